"""Ctrl-C during ``landscape gen``: it says what was kept and the command that resumes; ``landscape ls``
lists the unfinished landscape with its progress; the printed command finishes the run, equal to an
uninterrupted one."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from landscape import SummaryLandscape, read_h5
from landscape.cli._main import main
from landscape.engine import _planner
from landscape.io import stored_landscapes
from tests.landscape import _gen_task

ROOT = Path(__file__).resolve().parents[3]
TASK = "tests.landscape._gen_task:task"
TAG, POINTS = "line_[6]", 40  # a random line around the last checkpoint: one small landscape


def _done(h5: Path) -> dict[str, tuple[int, int]]:
    """Points done and in all per unfinished landscape, read with h5py (not the code under test)."""
    with h5py.File(h5, "r", locking=False) as fh:
        return {t: (int(np.count_nonzero(g["done"][()])), g["done"].size)
                for t, g in fh.get("_in_progress", {}).items()}


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_after_first_points(cmd: list[str], h5: Path, env: dict) -> subprocess.CompletedProcess:
    # SIGINT's default action restored in the child: a suite started in the background (``pytest &``
    # from a script) inherits an ignored SIGINT, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interruptible)
    deadline = time.time() + 90
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
        try:
            if h5.exists() and any(d for d, _ in _done(h5).values()):
                break
        except OSError:  # the file is being replaced at this instant
            continue
    else:
        proc.kill()
        pytest.fail(f"no point was flushed: {proc.communicate()}")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_ctrl_c_says_what_was_kept_and_the_printed_command_resumes(summary_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    h5 = out / "landscapes.h5"
    args = ["gen", str(summary_dir), "--task", TASK, "--output", str(out), "--view", "line", "--x", f"-1:1:{POINTS}"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), LANDSCAPE_TEST_SLOW="0.02", LANDSCAPE_TEST_ONE_POINT="1",
               LANDSCAPE_FLUSH_SECONDS="0")
    # --restart in the interrupted command: the resume command must leave it out (it would start over)
    res = _interrupt_after_first_points([sys.executable, "-m", "landscape", *args, "--restart"], h5, env)
    assert res.returncode == 130, res.stderr
    kept, total = _done(h5)[TAG]
    assert 0 < kept < total and total >= POINTS  # the grid, and the centre where the grid misses it
    lines = res.stderr.strip().splitlines()
    assert lines[0] == "landscape gen: interrupted."
    assert lines[1:3] == [f"Kept in {h5}:", f"  {TAG}: unfinished, {kept} of {total} points"]
    assert lines[-2] == f"To resume (only the missing points are evaluated), run the same command again in {ROOT}:"
    resume = shlex.split(lines[-1])
    assert resume == [sys.executable, "-m", "landscape", *args]

    # landscape ls shows the unfinished landscape with its progress (it said "no runs" before)
    assert main(["ls", str(tmp_path), "--json"]) == 0
    rows = {row["run"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["out"]["unfinished"] == [{"tag": TAG, "done": kept, "points": total}]
    assert main(["ls", str(tmp_path)]) == 0
    assert f"out\tfinal loss -\tscalars: -\n\t{TAG}\tunfinished: {kept} of {total} points" in capsys.readouterr().out
    assert stored_landscapes(h5) == ([], {TAG: (kept, total)})

    # the printed command, run as printed (no slow forward), finishes with only the missing points
    env.pop("LANDSCAPE_TEST_SLOW")
    again = subprocess.run(resume, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"evaluated {total - kept} of {total} points ({kept} already in landscapes.h5)" in again.stdout
    assert stored_landscapes(h5) == ([TAG], {})
    with h5py.File(h5, "r") as fh:
        assert "_in_progress" not in fh

    # equal to an uninterrupted run (one point per call, as the interrupted run)
    monkeypatch.setattr(_planner, "CALL_BYTES", 0)
    (want,) = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, output=tmp_path / "reference", view="line", x=(-1.0, 1.0, POINTS))
    got = read_h5(h5)[TAG]
    np.testing.assert_array_equal(got.z, want.z)
    np.testing.assert_array_equal(got.x, want.x)
    assert got.metadata == read_h5(tmp_path / "reference" / "landscapes.h5")[TAG].metadata


def test_ctrl_c_before_any_point_says_nothing_was_kept(tmp_path, capsys):
    from landscape.cli._main import build_parser
    from landscape.cli._resume import interrupted_report

    args = build_parser().parse_args(["gen", "run", "--task", TASK, "--output", str(tmp_path / "o"), "--restart"])
    text = interrupted_report(args, ["gen", "run", "--task", TASK, "--output", str(tmp_path / "o"), "--resta"])
    assert f"Nothing was kept in {tmp_path / 'o' / 'landscapes.h5'} yet" in text
    assert "--resta" not in text and text.endswith(f"gen run --task {TASK} --output {tmp_path / 'o'}")
