"""Progress of long work: a landscape's points, Lanczos iterations, Hutchinson probes (private).

One :class:`ProgressMeter` per piece of work of ``total`` steps, updated as steps finish, says
how many are done, the rate and the time left, wherever the output goes:

* on a terminal or in a notebook, a tqdm bar, its estimate refreshed as steps finish
  (``landscape_[1, 5]:  33%|###     | 1200/3605 [00:31, 39 pt/s, about 61 s left]``);
* elsewhere (a pipe, ``tee``, ``nohup``, a batch job's log file), a plain line on the logger
  ``landscape.progress`` (:data:`PROGRESS_LOGGER`) at INFO level every tenth of the steps or
  every minute, whichever comes first, and one when the work ends:
  ``landscape_[1, 5]: 1200/3605 points, 39 points/s, about 61 s left``. The ``landscape``
  command shows them on stderr; a Python program, where its logging shows INFO. Work
  that ends within its first :data:`ESTIMATE_AFTER_S` seconds says nothing.

The estimate comes from a moving rate, not the first seconds' (planning, the first call's
allocations, a machine whose load changes): the steps and the seconds so far, each weighted
by ``exp(-age / tau)``, ``tau`` a quarter of the time elapsed (at least half a second, at
most a minute), and their ratio. A meter only reads counts and a clock: no value depends
on it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from tqdm.auto import tqdm

__all__ = ["ProgressMeter", "Bar", "PROGRESS_LOGGER", "ESTIMATE_AFTER_S", "LINE_EVERY_S", "LINE_EVERY_FRACTION"]


class Bar(tqdm):
    """tqdm's bar without its monitor thread: tqdm starts one with its first bar, and it then runs until the
    process ends (a thread the caller did not ask for, and 3 ms of a process's first landscape). It only
    redraws a bar whose updates stopped showing; the library's bars are updated as their work goes."""

    monitor_interval = 0


#: The logger of the plain lines (a child of ``landscape``).
PROGRESS_LOGGER = "landscape.progress"
#: No line (and no estimate) before this much of the work has been timed.
ESTIMATE_AFTER_S = 2.0
#: A line at least this often ...
LINE_EVERY_S = 60.0
#: ... and whenever another tenth of the steps is done.
LINE_EVERY_FRACTION = 10
#: The moving rate's time constant: this fraction of the time elapsed, within these bounds.
_TAU_FRACTION, _TAU_MIN_S, _TAU_MAX_S = 0.25, 0.5, 60.0
#: The bar's estimate is refreshed at most this often.
_POSTFIX_EVERY_S = 0.5
#: tqdm's unit for each plural the lines use.
_BAR_UNITS = {"points": "pt", "iterations": "it", "probes": "probe"}
_log = logging.getLogger(PROGRESS_LOGGER)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _rate(per_s: float) -> str:
    return f"{per_s:.0f}" if per_s >= 10 else f"{per_s:.2g}"


class ProgressMeter:
    """The progress of ``total`` steps of work; ``update(k)`` as ``k`` more finish, ``close()`` at the end.

    Parameters
    ----------
    label : str
        Names the work in the bar and the lines (``"landscape_[1, 5]"``, ``"Lanczos"``).
    total : int
        Steps to do (or, with ``capped``, at most).
    unit : str, default="points"
        The steps' plural, in the lines ("points", "iterations", "probes").
    enabled : bool, default=True
        False: neither bar nor lines (a rank that does not report, a caller that asked for none).
    bar : bool or None, default=None
        The tqdm bar: None on a terminal or in a notebook (else the lines), True always, False
        never (the lines).
    capped : bool, default=False
        ``total`` is a maximum the work may stop before (an iterative method): the time left
        is said as "at most".
    leave : bool, default=True
        Keep the bar on the terminal when done.
    clock : callable, optional
        Seconds, monotonic (default ``time.perf_counter``; tests pass their own).
    """

    def __init__(self, label: str, total: int, *, unit: str = "points", enabled: bool = True,
                 bar: bool | None = None, capped: bool = False, leave: bool = True,
                 clock: Callable[[], float] | None = None) -> None:
        self.label, self.total, self.unit, self.capped = label, int(total), unit, capped
        self.clock = clock or time.perf_counter
        self.done = 0
        self.started = self.last = self.last_line = self.clock()
        self.last_postfix = -math.inf  # the first rated step shows the estimate at once, then every half second
        self.weighted_steps = self.weighted_seconds = 0.0  # the moving rate's numerator and denominator
        self.pending = 0  # steps reported at the instant of the last update (no time to rate them over yet)
        self.next_mark = 1  # a line once this many steps are done (or a minute has passed)
        self.said = False
        disable = True if not enabled or self.total <= 0 else (None if bar is None else not bar)
        self.bar = Bar(total=self.total, desc=label, unit=_BAR_UNITS.get(unit, unit), leave=leave,
                        dynamic_ncols=True, disable=disable,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        self.lines = enabled and self.total > 0 and bool(self.bar.disable)

    # -- the estimate ----------------------------------------------------------------------
    def rate(self) -> float:
        """Steps per second, the moving rate (0 before any step)."""
        return self.weighted_steps / self.weighted_seconds if self.weighted_seconds > 0 else 0.0

    def seconds_left(self) -> float | None:
        """The time the remaining steps take at :meth:`rate` (None before any step)."""
        rate = self.rate()
        return (self.total - self.done) / rate if rate > 0 else None

    def _left(self) -> str:
        left = self.seconds_left()
        if left is None:
            return "time left unknown"
        if left < 1:
            return "under 1 s left"
        return f"{'at most' if self.capped else 'about'} {_duration(left)} left"

    # -- updates ---------------------------------------------------------------------------
    def update(self, k: int) -> None:
        """``k`` more steps finished."""
        now = self.clock()
        self.done += k
        dt = now - self.last
        if dt > 0:
            # older steps and seconds fade with their age; steps reported at one instant wait for the next
            tau = min(max(_TAU_FRACTION * (now - self.started), _TAU_MIN_S), _TAU_MAX_S)
            fade = math.exp(-dt / tau)
            self.weighted_steps = self.weighted_steps * fade + self.pending + k
            self.weighted_seconds = self.weighted_seconds * fade + dt
            self.pending, self.last = 0, now
        else:
            self.pending += k
        if not self.bar.disable:
            if now - self.last_postfix >= _POSTFIX_EVERY_S and self.rate() > 0:
                self.last_postfix = now
                self.bar.set_postfix_str(f"{_rate(self.rate())} {self.bar.unit}/s, {self._left()}", refresh=False)
            self.bar.update(k)
        elif self.lines and self.done < self.total and now - self.started >= ESTIMATE_AFTER_S and (
                self.done >= self.next_mark or now - self.last_line >= LINE_EVERY_S):
            self._say(f"{self.done}/{self.total} {self.unit}, {_rate(self.rate())} {self.unit}/s, {self._left()}")
            self.last_line = now
            tenth = self.done * LINE_EVERY_FRACTION // self.total + 1
            self.next_mark = -(-tenth * self.total // LINE_EVERY_FRACTION)  # the next tenth, rounded up

    def _say(self, text: str) -> None:
        _log.info("%s: %s", self.label, text)
        self.said = True

    def close(self) -> None:
        """The end of the work: the bar closed; after lines, one saying how it ended."""
        self.bar.close()
        if self.said:
            self._say(f"{self.done}/{self.total} {self.unit} in {_duration(self.clock() - self.started)}")
            self.said = False
