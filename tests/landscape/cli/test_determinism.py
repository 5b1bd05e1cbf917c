"""The same command gives the same bits: three runs (one beside a busy process), a run killed with
SIGKILL and resumed, with the default plan and with --plan tune (issue: a timed planner made each
run choose its own evaluation batch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from landscape import read_h5

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASK = "tests.landscape._gen_task:task"


def _gen(summary_dir, out, *extra, env=None, **kw):
    cmd = [sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task", TASK, "--output", str(out),
           "--size", "12", *extra]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=300, **kw)


def _assert_same_bits(a, b):
    assert sorted(a) == sorted(b)
    for tag in a:
        assert a[tag].z.tobytes() == b[tag].z.tobytes(), tag
        if a[tag].path is not None:
            assert a[tag].path.z.tobytes() == b[tag].path.z.tobytes(), tag
        keep = {k: v for k, v in a[tag].metadata.items() if k != "plan_timings"}
        assert keep == {k: v for k, v in b[tag].metadata.items() if k != "plan_timings"}, tag


def test_three_runs_one_beside_a_busy_process_write_the_same_landscapes(summary_dir, tmp_path):
    runs = []
    for k in range(3):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if k == 1 else None
        try:
            res = _gen(summary_dir, tmp_path / f"run{k}")
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        assert res.returncode == 0, res.stderr[-2000:]
        runs.append(read_h5(tmp_path / f"run{k}" / "landscapes.h5"))
    assert all(ls.metadata["plan"] == "heuristic" for ls in runs[0].values())  # never timed
    _assert_same_bits(runs[0], runs[1])
    _assert_same_bits(runs[0], runs[2])


def _kill_midway(summary_dir, out, *extra):
    """Start the command, SIGKILL it once the second landscape has points on disk."""
    h5 = out / "landscapes.h5"
    env = dict(os.environ, LANDSCAPE_TEST_SLOW="0.01", LANDSCAPE_TEST_ONE_POINT="1", LANDSCAPE_FLUSH_SECONDS="0")
    cmd = [sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task", TASK, "--output", str(out),
           "--size", "12", *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            time.sleep(0.02)
            try:
                with h5py.File(h5, "r", locking=False) as fh:
                    parts = fh.get("_in_progress", {})
                    if "landscape_[4, 6]" in parts and parts["landscape_[4, 6]"]["done"][()].any():
                        return
            except (OSError, KeyError):  # absent, or being replaced at this instant
                continue
        pytest.fail("the generation made no progress")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("plan", ["auto", "tune"])
def test_a_run_killed_midway_and_resumed_equals_an_uninterrupted_one(summary_dir, tmp_path, plan):
    out = tmp_path / "out"
    env = {"LANDSCAPE_TEST_ONE_POINT": "1"}  # one point per call, as the killed run (the task sets it)
    _kill_midway(summary_dir, out, "--plan", plan)
    res = _gen(summary_dir, out, "--plan", plan, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "already in landscapes.h5" in res.stdout  # it resumed
    resumed = read_h5(out / "landscapes.h5")
    if plan == "tune":
        # the uninterrupted run, started over in the same folder, reuses the tuned plans recorded there:
        # the same plan, so the same bits
        res = _gen(summary_dir, out, "--plan", plan, "--restart", env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        again = read_h5(out / "landscapes.h5")
        assert all(ls.metadata["plan"] == "tuned" for ls in again.values())
    else:
        res = _gen(summary_dir, tmp_path / "uninterrupted", "--plan", plan, env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        again = read_h5(tmp_path / "uninterrupted" / "landscapes.h5")
    _assert_same_bits(resumed, again)
    np.testing.assert_array_equal(resumed["landscape_[6]"].z, again["landscape_[6]"].z)
