"""torchrun: two processes (gloo on the loopback) give the single-process landscapes bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from collector import SummaryReader
from landscape import SummaryLandscape, read_h5
from tests.landscape import _gen_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _torchrun(summary_dir, out, env=None, timeout=180):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "landscape", "gen", str(summary_dir), "--task", "tests.landscape._gen_task:task",
           "--output", str(out), "--size", "9"]
    env = {k: v for k, v in {**os.environ, **(env or {})}.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_torchrun_two_processes_equal_single_process(summary_dir, tmp_path):
    single = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, collect_landscape={"landscape_size": 9}, output=tmp_path / "single")
    res = _torchrun(summary_dir, tmp_path / "dist")
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("evaluated") == 3  # rank 0 alone reports
    got = read_h5(tmp_path / "dist" / "landscapes.h5")
    assert sorted(got) == sorted(ls.tag for ls in single)
    for ls in single:
        np.testing.assert_array_equal(got[ls.tag].z, ls.z)
        if ls.path is not None:
            np.testing.assert_array_equal(got[ls.tag].path.z, ls.path.z)
    # one summary file (rank 0 writes), holding the same landscapes
    files = [f for f in os.listdir(tmp_path / "dist") if ".summary." in f]
    assert len(files) == 1
    events = SummaryReader(tmp_path / "dist").landscapes()
    expected = SummaryReader(tmp_path / "single").landscapes()
    assert sorted(events) == sorted(expected)
    for tag, item in expected.items():
        for key in ("x", "y", "z", "convergence_point"):
            np.testing.assert_array_equal(events[tag][key], item[key])


def test_torchrun_failure_on_one_rank_stops_every_rank_naming_it(summary_dir, tmp_path):
    res = _torchrun(summary_dir, tmp_path / "dist", env={"LANDSCAPE_TEST_FAIL_RANK": "1"}, timeout=120)
    assert res.returncode != 0
    assert "rank 1: Evaluating landscape 'landscape_[1, 3]' failed in chunk 1" in res.stderr
    assert "device cpu" in res.stderr and "forward failed on purpose" in res.stderr


def test_in_process_group_of_one_and_joblib_threading_backend_equal_default(trained, data, tmp_path):
    """The distributed code path (a gloo group of one process, distributed=True) and a
    joblib backend chosen with parallel_config give the default run's values."""
    import joblib
    import torch.distributed as td
    from torch import nn

    import landscape

    net, traj = trained
    kw = dict(directions="pca", checkpoints=traj, size=6, num_samples=64)
    ref = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, **kw)
    td.init_process_group("gloo", store=td.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="'device_ids' parameter .* must be None in a distributed run"):
            landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, device_ids=[0], distributed=True, **kw)
        one = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, distributed=True, **kw)
    finally:
        td.destroy_process_group()
    np.testing.assert_array_equal(one.z, ref.z)
    np.testing.assert_array_equal(one.path.z, ref.path.z)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        threaded = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, **kw)
    np.testing.assert_array_equal(threaded.z, ref.z)
