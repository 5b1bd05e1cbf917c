"""torchrun: two processes (gloo on the loopback) give the single-process landscapes bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from collector import SummaryReader
from landscape import read_h5

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _torchrun(summary_dir, out, *extra, env=None, timeout=180):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "landscape", "gen", str(summary_dir), "--task", "tests.landscape._gen_task:task",
           "--output", str(out), "--size", "9", *extra]
    env = {k: v for k, v in {**os.environ, **(env or {})}.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _single(summary_dir, out, *extra, threads):
    """The same command in one process, evaluating with ``threads`` threads (as many as each rank)."""
    cmd = [sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task", "tests.landscape._gen_task:task",
           "--output", str(out), "--size", "9", *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = str(threads)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("plan", ["auto", "tune"])
def test_torchrun_two_processes_equal_single_process(summary_dir, tmp_path, plan):
    res = _torchrun(summary_dir, tmp_path / "dist", "--plan", plan)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("evaluated") == 3  # rank 0 alone reports
    got = read_h5(tmp_path / "dist" / "landscapes.h5")
    threads = {ls.metadata["threads"] for ls in got.values()}
    assert len(threads) == 1
    # the same command in one process with as many threads as a rank (a BLAS product may round differently
    # with another count); with --plan tune it starts over in the same folder and reuses the tuned plans
    # rank 0 recorded there
    folder = tmp_path / ("dist" if plan == "tune" else "single")
    res = _single(summary_dir, folder, "--plan", plan, *(["--restart"] if plan == "tune" else []),
                  threads=threads.pop())
    assert res.returncode == 0, res.stderr[-3000:]
    single = read_h5(folder / "landscapes.h5")
    assert sorted(got) == sorted(single)
    for tag, ls in single.items():
        np.testing.assert_array_equal(got[tag].z, ls.z)
        if ls.path is not None:
            np.testing.assert_array_equal(got[tag].path.z, ls.path.z)
        assert {k: v for k, v in got[tag].metadata.items() if k != "plan_timings"} == \
            {k: v for k, v in ls.metadata.items() if k != "plan_timings"}
    if plan == "auto":  # one summary file (rank 0 writes), holding the same landscapes
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
