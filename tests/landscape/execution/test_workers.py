"""Workers: identical results for 1 and 2 CPU workers, errors name landscape/chunk/device."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest
import torch
from torch import nn

import landscape
from landscape.engine import _planner as _evaluate
from landscape.io import _store
from tests.landscape._helpers import alive as _alive
from tests.landscape._helpers import children as _children


@pytest.mark.parametrize("batched", [True, False])
def test_one_and_two_workers_identical(trained, data, batched, monkeypatch):
    if not batched:
        monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    net, traj = trained
    kw = dict(directions="pca", checkpoints=traj, size=7, num_samples=64)
    one = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, **kw)
    two = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, device_ids=[0, 1], **kw)
    np.testing.assert_array_equal(one.z, two.z)
    np.testing.assert_array_equal(one.path.z, two.path.z)


class Exploding(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        if float(self.fc.weight.sum()) > 0.5:
            raise RuntimeError("boom")
        return self.fc(x)


@pytest.mark.parametrize("device_ids", [None, [0, 1]])
def test_worker_exception_names_landscape_chunk_device(data, device_ids, monkeypatch):
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    torch.manual_seed(0)
    net = Exploding()
    with torch.no_grad():
        net.fc.weight.fill_(0.0)
    v = {"fc.weight": torch.ones(3, 8), "fc.bias": torch.zeros(3)}
    with pytest.raises(RuntimeError, match=r"landscape 'boom-test'.*chunk \d+.*device cpu.*boom"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, directions=(v, v), size=5,
                                    num_samples=10, device_ids=device_ids, tag="boom-test")


def test_too_many_cpu_workers(trained, data):
    if torch.cuda.is_available():
        pytest.skip("device ids are CUDA ids here")
    net, _ = trained
    with pytest.raises(ValueError, match="device_ids"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, device_ids=list(range(4096)))


@pytest.mark.cuda
def test_cuda_matches_cpu_and_refuses_missing_ids(trained, data):
    net, traj = trained
    n = torch.cuda.device_count()
    with pytest.raises(ValueError, match=r"device_ids.*\[%d\]" % n):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, device_ids=[n])
    cpu = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=5, num_samples=64, device_ids=None)
    gpu = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=5, num_samples=64, device_ids=[0])
    np.testing.assert_allclose(gpu.z, cpu.z, rtol=1e-4)


def test_sequential_fast_path_identical_across_workers_and_chunks():
    """The direct batched forward (baddbmm, first layer from precomputed planes) gives the
    same bits with 1 or 2 workers (2 or 1 threads each) and whatever the chunking."""
    from landscape.engine import Engine, EngineSpec, Samples
    from landscape.tasks import Supervised

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 64, generator=g), torch.randint(0, 10, (96,), generator=g)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    kw = dict(size=9, num_samples=64, seed=4)
    one = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), **kw)
    two = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), device_ids=[0, 1], **kw)
    assert one.metadata["points_per_call"] > 1
    np.testing.assert_array_equal(one.z, two.z)
    names = [k for k, _ in net.named_parameters()]
    c = [t.detach() for t in net.parameters()]
    v = [torch.randn(t.shape, generator=g) for t in c]
    eng = Engine(EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, Samples([(x[:64], y[:64])], [64]), names,
                            net.state_dict(), v, v, points_per_call=4))
    pts = np.random.default_rng(0).uniform(-1, 1, (16, 2))
    whole = eng.evaluate(pts)["loss"]
    parts = np.concatenate([eng.evaluate(pts[:8])["loss"], eng.evaluate(pts[8:], 8)["loss"]])
    np.testing.assert_array_equal(whole, parts)


def test_killed_worker_fails_fast_naming_chunk_and_device_and_rerun_completes(summary_dir, tmp_path, monkeypatch):
    from landscape import SummaryLandscape
    from tests.landscape import _gen_task

    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    monkeypatch.setenv("LANDSCAPE_TEST_SLOW", "0.02")  # inherited by the workers
    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "0")  # every chunk on disk at once
    out = tmp_path / "out"
    h5 = out / "landscapes.h5"
    killed = {}
    # processes earlier tests left to this one (torch.compile's compile workers, ...) are not ours
    before = set(_children(os.getpid()))
    # some points' done flags on disk, read by the writer's own thread after each chunk it writes: a read
    # from the killer's thread could hold the file open read-only just as the writer opens it to write,
    # which HDF5 refuses within one process ("file is already open for read-only")
    on_disk = threading.Event()
    real_chunks = _store.Store.chunks

    @contextlib.contextmanager
    def chunks(store, tag):
        with real_chunks(store, tag) as write:
            def written(lo, hi, res):
                write(lo, hi, res)
                if not on_disk.is_set() and h5.exists():
                    with h5py.File(h5, "r") as fh:
                        if any(g["done"][()].any() for g in fh.get("_in_progress", {}).values()):
                            on_disk.set()
            yield written

    monkeypatch.setattr(_store.Store, "chunks", chunks)

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.02)
            kids = [k for k in _children(os.getpid()) if k not in before]
            if len(kids) == 2 and on_disk.is_set():
                os.kill(kids[0], signal.SIGKILL)
                killed["pid"] = kids[0]
                return

    thread = threading.Thread(target=killer)
    thread.start()
    sl = SummaryLandscape(summary_dir)
    try:
        with pytest.raises(RuntimeError) as err:
            sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 12},
                                                 device_ids=[0, 1], output=out)
    finally:
        thread.join()
    assert "pid" in killed, "the worker was not killed"
    msg = str(err.value)
    found = re.search(rf"pid {killed['pid']}\) of landscape '(.*)' died \(killed by SIGKILL\) while evaluating "
                      r"chunk \d+ \(points (\d+)\.\.(\d+)\) on device cpu; (\d+) point\(s\) finished", msg)
    assert found, msg
    label, lo, hi, finished = found.group(1), int(found.group(2)), int(found.group(3)), int(found.group(4))
    # failed at once, not after the surviving worker went through the rest of the landscape: the points
    # finished (on disk, as said) and the dead worker's chunks in flight (two at most) leave some of its 144
    # points never evaluated (a parent that let the survivor finish first leaves none)
    with h5py.File(h5, "r") as fh:
        assert int(fh["_in_progress"][label]["done"][()].sum()) == finished
    assert finished + 2 * (hi - lo + 1) < 12 * 12, msg
    assert not [k for k in _children(os.getpid()) if k not in before and _alive(k)]  # no worker left behind
    monkeypatch.setenv("LANDSCAPE_TEST_SLOW", "0")
    sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 12},
                                         device_ids=[0, 1], output=out)
    kept = sum(s["points"] - s["evaluated"] for s in sl.last_stats.values())
    assert kept > 0  # the points finished before the kill were not evaluated again
    ref_out = tmp_path / "ref"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, collect_landscape={"landscape_size": 12}, output=ref_out)
    got, ref = landscape.read_h5(h5), landscape.read_h5(ref_out / "landscapes.h5")
    for tag in ref:
        np.testing.assert_array_equal(got[tag].z, ref[tag].z)


def test_ctrl_c_stops_workers_and_keeps_finished_points(summary_dir, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = tmp_path / "out"
    h5 = out / "landscapes.h5"
    env = dict(os.environ, LANDSCAPE_TEST_SLOW="0.02", LANDSCAPE_TEST_ONE_POINT="1", LANDSCAPE_FLUSH_SECONDS="0")
    proc = subprocess.Popen([sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task",
                             "tests.landscape._gen_task:task", "--output", str(out), "--size", "12",
                             "--devices", "0,1"], cwd=root, env=env, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # see test_interrupt
    workers = []
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
        workers = _children(proc.pid) or workers
        if workers and h5.exists():
            try:
                with h5py.File(h5, "r", locking=False) as fh:
                    if any(g["done"][()].any() for g in fh.get("_in_progress", {}).values()):
                        break
            except OSError:
                continue
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert len(workers) == 2 and not [w for w in workers if _alive(w)]
    with h5py.File(h5, "r") as fh:
        done = sum(int(g["done"][()].sum()) for g in fh["_in_progress"].values())
    assert done > 0
