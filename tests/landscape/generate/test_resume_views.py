"""A line killed midway resumes: the rerun evaluates only the missing points and equals an
uninterrupted run bit for bit; a rerun with another range is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from landscape import SummaryLandscape, read_h5
from landscape.engine import _planner as _evaluate
from landscape.engine._engine import Engine
from tests.landscape import _gen_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VIEWS = {"line": (["--view", "line", "--x=-1:1:40"], dict(view="line", x=(-1.0, 1.0, 40)), "line_[6]"),
         "interpolation": (["--view", "interpolation", "--between", "1,6", "--x=-0.5:1.5:40"],
                           dict(view="interpolation", between=[1, 6], x=(-0.5, 1.5, 40)), "interpolation_[1, 6]")}


def _done(h5, tag):
    with h5py.File(h5, "r", locking=False) as fh:
        g = fh.get("_in_progress", {}).get(tag)
        return None if g is None else int(g["done"][()].sum())


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_sigkill_midway_then_rerun_equals_uninterrupted(summary_dir, tmp_path, monkeypatch, view):
    args, kwargs, tag = VIEWS[view]
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)  # one point per call, as the killed run
    ref_dir = tmp_path / "reference"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, output=ref_dir, **kwargs)
    reference = read_h5(ref_dir / "landscapes.h5")[tag]
    out = tmp_path / "out"
    h5 = out / "landscapes.h5"
    env = dict(os.environ, LANDSCAPE_TEST_SLOW="0.02", LANDSCAPE_TEST_ONE_POINT="1", LANDSCAPE_FLUSH_SECONDS="0")
    cmd = [sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task", "tests.landscape._gen_task:task",
           "--output", str(out), *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            time.sleep(0.02)
            if h5.exists():
                try:
                    done = _done(h5, tag)
                except OSError:  # being replaced at this instant
                    continue
                if done:
                    break
        else:
            pytest.fail("the generation made no progress")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = _done(h5, tag)
    assert 0 < before < 40
    asked = []
    original = Engine.evaluate
    monkeypatch.setattr(Engine, "evaluate", lambda self, pts, start=0, **kw: asked.append(len(pts)) or
                        original(self, pts, start, **kw))
    sl = SummaryLandscape(summary_dir)
    (again,) = sl.gen_landscapes_with_multi_process(_gen_task.task, output=out, **kwargs)
    total = 40 + (1 if view == "line" else 2)  # the grid, then the exact origin / A and B (off the grid)
    assert sl.last_stats[tag] == {"evaluated": total - before, "points": total}
    assert sum(asked) == total - before
    got = read_h5(h5)[tag]
    np.testing.assert_array_equal(got.z, reference.z)
    np.testing.assert_array_equal(got.x, reference.x)
    assert got.markers == reference.markers and got.convergence_point == reference.convergence_point
    assert got.metadata == reference.metadata
    np.testing.assert_array_equal(again.z, reference.z)


def test_other_range_is_refused_and_old_fingerprints_unchanged(summary_dir, tmp_path):
    out = tmp_path / "out"
    sl = SummaryLandscape(summary_dir)
    sl.gen_landscapes_with_multi_process(_gen_task.task, output=out, view="line", x=(-1.0, 1.0, 5))
    with pytest.raises(ValueError, match=r"x: \[-1.0, 1.0, 5\] then, \[-1.0, 1.0, 7\] now"):
        sl.gen_landscapes_with_multi_process(_gen_task.task, output=out, view="line", x=(-1.0, 1.0, 7))
    # MindSpore's landscapes keep the fingerprint keys they had before the views existed
    sl.gen_landscapes_with_multi_process(_gen_task.task, output=out, collect_landscape={"landscape_size": 3})
    import json

    with h5py.File(out / "landscapes.h5") as fh:
        fp = json.loads(fh["landscape_[6]"].attrs["fingerprint"])
    assert not {"dims", "x", "y", "biasbn", "second", "include"} & set(fp)
    assert fp["normalization"] == "layer" and fp["ignore"] == "none" and fp["seed"] == 0
