"""Progress wherever the output goes: the lines' cadence and the moving estimate, with an injected clock
(no sleeping), and the lines of a landscape computed from Python."""

from __future__ import annotations

import logging
import re
import types

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from landscape.engine import PROGRESS_LOGGER, ProgressMeter, _progress
from tests.landscape._helpers import TinyMLP, make_data

LINE = re.compile(r"^(?P<label>.+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+), (?P<rate>[\d.e+]+) (?P=unit)/s, "
                  r"(?P<bound>about|at most) (?P<left>.+) left$")


class Clock:
    """Seconds set by the test."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]


def _run(meter: ProgressMeter, clock: Clock, schedule: list[tuple[float, int]]) -> list[tuple[float, str]]:
    """Feed ``(seconds, steps)`` updates; return each line said with the time it was said at."""
    said: list[tuple[float, str]] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append((clock.t, record.getMessage()))  # type: ignore[method-assign]
    log = logging.getLogger(PROGRESS_LOGGER)
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)
    try:
        for dt, k in schedule:
            clock.t += dt
            meter.update(k)
        meter.close()
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return said


def test_a_line_every_tenth_after_the_first_two_seconds():
    clock = Clock()
    meter = ProgressMeter("landscape_[1, 5]", 200, clock=clock)
    assert meter.lines  # pytest's stderr is not a terminal: lines, no bar
    said = _run(meter, clock, [(0.25, 1)] * 200)  # 4 points/s, 50 s
    progress = [LINE.match(text) for _, text in said[:-1]]
    assert all(progress), said
    # quiet for the first 2 s (8 points), then at 8 (the first update past 2 s) and at every tenth of 200
    assert [int(m["done"]) for m in progress] == [8, 20, 40, 60, 80, 100, 120, 140, 160, 180]
    assert {m["rate"] for m in progress} == {"4"}
    for (_, text), m in zip(said, progress):
        assert text.startswith("landscape_[1, 5]: ") and m["unit"] == "points" and m["bound"] == "about"
        assert m["left"] == f"{(200 - int(m['done'])) / 4:.0f} s"  # the remaining points at 4 points/s
    assert said[-1][1] == "landscape_[1, 5]: 200/200 points in 50 s"


def test_a_line_every_minute_when_a_tenth_takes_longer():
    clock = Clock()
    meter = ProgressMeter("landscape_[6]", 1000, clock=clock)
    said = _run(meter, clock, [(7.0, 1)] * 100)  # a tenth takes 700 s
    times = [t - 1000.0 for t, text in said if "left" in text]
    assert times[0] == 7.0  # the first update past 2 s
    gaps = np.diff(times)
    assert len(gaps) >= 9 and np.all(gaps >= 60) and np.all(gaps < 67)  # every minute, to within one update


def test_work_that_ends_within_two_seconds_says_nothing():
    clock = Clock()
    meter = ProgressMeter("line_[6]", 50, clock=clock)
    assert _run(meter, clock, [(0.03, 1)] * 50) == []


def test_the_estimate_leaves_out_the_start_and_follows_the_rate():
    """The time left after a tenth of the points, compared with the schedule's real time left."""
    clock = Clock()
    meter = ProgressMeter("landscape_[1, 5]", 1000, clock=clock)
    clock.t += 5.0
    meter.update(1)  # 5 s of start-up (planning, the first call) before the first point
    for _ in range(99):
        clock.t += 0.1  # then 10 points/s
        meter.update(1)
    real_left = 900 / 10
    assert meter.seconds_left() == pytest.approx(real_left, rel=0.05)
    average_left = 900 / (100 / (clock.t - meter.started))  # the rate since the start: 134 s
    assert abs(average_left - real_left) > 0.4 * real_left  # which the moving rate does not follow
    for _ in range(400):
        clock.t += 0.1
        meter.update(1)
    for _ in range(480):  # the machine gets busy: 4 points/s for 120 s
        clock.t += 0.25
        meter.update(1)
    assert meter.seconds_left() == pytest.approx(20 / 4, rel=0.1)
    assert meter.rate() == pytest.approx(4, rel=0.1)


def test_steps_reported_at_one_instant_are_rated_over_the_next_interval():
    clock = Clock()
    meter = ProgressMeter("landscape_[1, 5]", 400, clock=clock)
    for _ in range(40):  # a chunk of 4 points every second, reported point by point at one instant
        clock.t += 1.0
        for _ in range(4):
            meter.update(1)
    assert meter.rate() == pytest.approx(4, rel=0.05)
    assert meter.seconds_left() == pytest.approx(240 / 4, rel=0.05)


def test_a_capped_total_says_at_most_and_how_it_ended():
    clock = Clock()
    meter = ProgressMeter("Lanczos", 300, unit="iterations", capped=True, leave=False, clock=clock)
    said = _run(meter, clock, [(1.0, 1)] * 40)  # converged after 40 of at most 300
    progress = [LINE.match(text) for _, text in said[:-1]]
    assert progress and all(m and m["bound"] == "at most" and m["unit"] == "iterations" for m in progress), said
    assert said[-1][1] == "Lanczos: 40/300 iterations in 40 s"


def test_a_bar_shows_the_estimate_and_says_no_lines(caplog):
    caplog.set_level(logging.INFO, logger="landscape")
    clock = Clock()
    meter = ProgressMeter("landscape_[1, 5]", 100, bar=True, clock=clock)  # the bar, as on a terminal
    assert not meter.bar.disable and not meter.lines
    for _ in range(30):
        clock.t += 0.5
        meter.update(1)
    assert re.fullmatch(r"2 pt/s, about 35 s left", meter.bar.postfix), meter.bar.postfix
    meter.close()
    assert _lines(caplog) == []


def test_a_disabled_meter_says_nothing(caplog):
    caplog.set_level(logging.INFO, logger="landscape")
    clock = Clock()
    meter = ProgressMeter("landscape_[1, 5]", 100, enabled=False, clock=clock)
    for _ in range(100):
        clock.t += 1.0
        meter.update(1)
    meter.close()
    assert meter.bar.disable and _lines(caplog) == []


def test_compute_landscape_says_its_progress_in_the_log(monkeypatch, caplog):
    """From Python, not on a terminal: the lines go to the logger (shown where logging shows INFO);
    the values are those of a run that says nothing."""
    torch.manual_seed(0)
    net = TinyMLP()
    x, y = make_data()
    one = {"points_per_call": 1}  # a reading of the clock per point
    caplog.set_level(logging.INFO, logger="landscape")
    # a clock that stands still (not the real one, which a loaded machine can make slow): nothing to say
    monkeypatch.setattr(_progress, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))
    quiet = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=6, num_samples=64, plan=one)
    assert _lines(caplog) == []
    t = [0.0]

    def perf_counter() -> float:  # half a second per reading: long enough to be said
        t[0] += 0.5
        return t[0]

    monkeypatch.setattr(_progress, "time", types.SimpleNamespace(perf_counter=perf_counter))
    said = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=6, num_samples=64, plan=one)
    lines = _lines(caplog)
    assert len([s for s in lines if LINE.match(s)]) >= 3, lines
    assert all(s.startswith("random landscape: ") for s in lines), lines
    assert re.fullmatch(r"random landscape: 37/37 points in \d+ s", lines[-1])  # 36 and the centre
    np.testing.assert_array_equal(said.z, quiet.z)
