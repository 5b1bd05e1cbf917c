"""Resumable generation: SIGKILL midway then rerun, refusals, restart, crash-safe writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
import pytest
import torch

from landscape import SummaryLandscape, read_h5
from landscape.engine import _planner as _evaluate
from landscape.engine._engine import Engine
from tests.landscape import _gen_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASK = "tests.landscape._gen_task:task"
TAGS = ["landscape_[1, 3]", "landscape_[4, 6]", "landscape_[6]"]


def _gen_cmd(summary_dir, out, *extra):
    return [sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task", TASK,
            "--output", str(out), "--size", "12", *extra]


def _done_counts(h5):
    """Per tag: points done (an unfinished landscape) or None (finished), read with h5py."""
    with h5py.File(h5, "r", locking=False) as fh:
        out = {t: None for t in fh if not t.startswith("_")}
        for t, g in fh.get("_in_progress", {}).items():
            out[t] = int(g["done"][()].sum())
        return out


@pytest.fixture
def reference(summary_dir, tmp_path, monkeypatch):
    """An uninterrupted run (one point per call, as the interrupted runs)."""
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    out = tmp_path / "reference"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, collect_landscape={"landscape_size": 12}, output=out)
    return read_h5(out / "landscapes.h5")


def _assert_same(a, b):
    assert sorted(a) == sorted(b)
    for tag in a:
        np.testing.assert_array_equal(a[tag].z, b[tag].z)
        np.testing.assert_array_equal(a[tag].x, b[tag].x)
        np.testing.assert_array_equal(a[tag].y, b[tag].y)
        if a[tag].path is not None:
            np.testing.assert_array_equal(a[tag].path.z, b[tag].path.z)
            np.testing.assert_array_equal(a[tag].path.x, b[tag].path.x)
        assert a[tag].convergence_point == b[tag].convergence_point
        assert a[tag].metadata == b[tag].metadata


def test_sigkill_midway_then_rerun_equals_uninterrupted_and_evaluates_only_missing(
        summary_dir, tmp_path, reference, monkeypatch):
    out = tmp_path / "out"
    h5 = out / "landscapes.h5"
    env = dict(os.environ, LANDSCAPE_TEST_SLOW="0.01", LANDSCAPE_TEST_ONE_POINT="1", LANDSCAPE_FLUSH_SECONDS="0")
    proc = subprocess.Popen(_gen_cmd(summary_dir, out), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 90
        while time.time() < deadline:  # kill once the second landscape is partly done
            time.sleep(0.02)
            if h5.exists():
                try:
                    done = _done_counts(h5).get(TAGS[1])
                except OSError:  # the file is being replaced at this instant
                    continue
                if done:
                    break
        else:
            pytest.fail("the generation made no progress")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = _done_counts(h5)  # the file is readable after the kill
    assert before[TAGS[0]] is None  # finished before the kill
    assert 0 < before[TAGS[1]] < 147
    # the rerun, in this process: count the points the engine is asked for
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    asked = []
    original = Engine.evaluate
    monkeypatch.setattr(Engine, "evaluate", lambda self, pts, start=0, **kw: asked.append(len(pts)) or
                        original(self, pts, start, **kw))
    sl = SummaryLandscape(summary_dir)
    sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 12}, output=out)
    # the Random landscape: 12x12 and its exact centre (off an even grid), evaluated as one more point
    missing = (147 - before[TAGS[1]]) + (145 - (before.get(TAGS[2]) or 0))
    assert sum(asked) == missing
    assert sl.last_stats[TAGS[0]] == {"evaluated": 0, "points": 147}
    assert sl.last_stats[TAGS[1]] == {"evaluated": 147 - before[TAGS[1]], "points": 147}
    _assert_same(read_h5(h5), reference)
    with h5py.File(h5, "r") as fh:
        assert "_in_progress" not in fh  # no leftovers once finished


def test_rerun_of_a_finished_generation_evaluates_nothing(summary_dir, tmp_path, reference, monkeypatch):
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    out = tmp_path / "reference"  # the fixture's finished output
    sl = SummaryLandscape(summary_dir)
    again = sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 12},
                                                 output=out)
    assert all(s["evaluated"] == 0 for s in sl.last_stats.values())
    _assert_same({ls.tag: ls for ls in again}, reference)


@pytest.mark.parametrize("change, fragment", [
    (dict(collect_landscape={"landscape_size": 5}), "landscape_size: 6 then, 5 now"),
    (dict(collect_landscape={"landscape_size": 6, "num_samples": 32}), "num_samples: 64 then, 32 now"),
    (dict(seed=5), "seed: 0 then, 5 now"),
    (dict(normalization="filter"), 'normalization: "layer" then, "filter" now'),
    (dict(ignore="biasbn"), 'ignore: "none" then, "biasbn" now'),
    ("checkpoint", "checkpoint epoch 3: "),
    ("model", "model: "),
])
def test_changed_input_is_refused_naming_what_differs(summary_dir, tmp_path, change, fragment):
    # a small grid (the refusal compares the inputs, not the values), evaluated as the plan chooses
    out = tmp_path / "out"
    sl = SummaryLandscape(summary_dir)
    sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 6}, output=out)
    kwargs = {"collect_landscape": {"landscape_size": 6}}
    task = _gen_task.task
    if change == "checkpoint":
        path = summary_dir / "ckpt_dir" / "TinyMLP_3_epoch.pt"
        sd = torch.load(path, weights_only=True)
        sd["fc1.bias"] += 1e-3
        torch.save(sd, path)
    elif change == "model":
        def task():
            model, net, data, metrics = _gen_task.task()
            net.fc1.extra_repr = lambda: "another architecture"
            return model, net, data, metrics
    else:
        kwargs.update(change)
    stamp = os.stat(out / "landscapes.h5").st_mtime_ns
    with pytest.raises(ValueError, match="made from other inputs") as err:
        sl.gen_landscapes_with_multi_process(task, output=out, **kwargs)
    assert fragment in str(err.value) and "restart=True" in str(err.value)
    assert os.stat(out / "landscapes.h5").st_mtime_ns == stamp  # refused before any work
    # starting over is allowed
    sl.gen_landscapes_with_multi_process(task, output=out, restart=True, **kwargs)
    assert all(s["evaluated"] == s["points"] for s in sl.last_stats.values())


def test_unfinished_landscape_with_other_inputs_is_refused(summary_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    # however long the flush period, an interruption writes the points evaluated so far
    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "1000")
    out = tmp_path / "out"
    calls = []
    original = Engine.evaluate

    def dying(self, pts, start=0, **kw):
        calls.append(len(pts))
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the first landscape
        return original(self, pts, start, **kw)

    monkeypatch.setattr(Engine, "evaluate", dying)
    sl = SummaryLandscape(summary_dir)
    with pytest.raises(KeyboardInterrupt):
        sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 12}, output=out)
    done = _done_counts(out / "landscapes.h5")
    assert done == {TAGS[0]: sum(calls[:2])}  # Ctrl-C kept the two finished chunks
    monkeypatch.setattr(Engine, "evaluate", original)
    with pytest.raises(ValueError, match=r"an unfinished landscape 'landscape_\[1, 3\]'.*landscape_size: 12 then, 8"):
        sl.gen_landscapes_with_multi_process(_gen_task.task, collect_landscape={"landscape_size": 8}, output=out)


@pytest.mark.parametrize("bad", [1, "yes"])
def test_restart_and_distributed_are_validated(summary_dir, bad):
    with pytest.raises(ValueError, match="The 'restart' parameter"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, restart=bad)
    with pytest.raises(ValueError, match="The 'distributed' parameter"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, distributed=bad)


def test_distributed_true_without_a_process_group_is_refused(summary_dir, monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, distributed=True)


_WRITER = textwrap.dedent("""
    import sys, numpy as np
    from landscape.io._store import Partial, Store
    from landscape.result._landscape import Landscape
    store = Store(sys.argv[1])
    n, k = 400, 0
    while True:  # create, fill chunk by chunk, finish, forget: every kind of write, forever
        tag = f"t{k % 3}"
        part = Partial(md={"k": k}, x=np.arange(20.0), y=np.arange(20.0), points=np.zeros((n, 2)), n_path=0,
                       intervals=None, v=np.ones(50_000, np.float32), w=np.ones(50_000, np.float32),
                       values={"loss": np.full(n, np.nan)}, done=np.zeros(n, bool))
        store.forget([tag])
        store.begin(tag, {"k": k}, part)
        with store.chunks(tag) as write:
            for lo in range(0, n, 40):
                write(lo, lo + 40, {"loss": np.arange(lo, lo + 40, dtype=float) + k})
        z = np.arange(n, dtype=float).reshape(20, 20) + k
        store.finish(Landscape(x=np.arange(20.0), y=np.arange(20.0), z=z, tag=tag), {"k": k})
        k += 1
""")


def test_file_stays_readable_and_consistent_whenever_the_writer_is_killed(tmp_path):
    h5 = tmp_path / "landscapes.h5"
    rng = np.random.default_rng(0)
    for trial in range(8):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(h5)], cwd=ROOT)
        time.sleep(1.0 + rng.uniform(0, 1.0))  # imports take about 1 s; then kill anywhere
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not h5.exists():
            continue
        with h5py.File(h5, "r") as fh:  # always opens
            for tag, g in fh.get("_in_progress", {}).items():
                done = g["done"][()].astype(bool)
                loss = g["value_loss"][()]
                k = json.loads(g.attrs["fingerprint"])["k"]
                expected = np.arange(400, dtype=float) + k
                np.testing.assert_array_equal(loss[done], expected[done])  # done means its value is there
        for tag, ls in read_h5(h5).items():
            k = int(ls.z[0, 0])
            np.testing.assert_array_equal(ls.z, np.arange(400, dtype=float).reshape(20, 20) + k)
    from landscape.io._store import Store

    Store(h5)  # copies left by killed rewrites are removed
    assert not list(tmp_path.glob("landscapes.h5.tmp-*"))


def test_second_generation_into_the_same_folder_is_refused(summary_dir, tmp_path):
    from landscape.io._store import Store

    out = tmp_path / "out"
    out.mkdir()
    with Store(out / "landscapes.h5").lock():
        with pytest.raises(RuntimeError, match=rf"Another generation \(pid {os.getpid()}\) is writing"):
            SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, output=out)
    assert not (out / "landscapes.h5.lock").exists()
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, output=out)
    assert (out / "landscapes.h5").exists() and not (out / "landscapes.h5.lock").exists()


@pytest.mark.parametrize("locking", [None, False])
def test_a_file_the_caller_holds_open_is_read_and_a_generation_into_it_refused_before_any_work(
        summary_dir, tmp_path, monkeypatch, locking):
    """A notebook's ``h5py.File(landscapes.h5)`` left open (either file-locking flag): HDF5 shares one handle per
    file in a process and refuses opens that do not fit it. Reads go through; a generation that would write
    into the file is refused before it evaluates anything, naming the file and what to do, and leaves nothing
    behind; once the handle is closed the same call runs."""
    from landscape.io import _h5

    monkeypatch.setattr(_h5, "WRITE_WAIT_S", 0.1)
    out = tmp_path / "out"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, collect_landscape={"landscape_size": 5}, output=out)
    h5 = out / "landscapes.h5"
    expected, before, files = read_h5(h5), h5.read_bytes(), sorted(os.listdir(out))
    evaluated = []
    evaluate = Engine.evaluate
    monkeypatch.setattr(Engine, "evaluate", lambda self, *a, **k: evaluated.append(1) or evaluate(self, *a, **k))
    with h5py.File(h5, "r", locking=locking):
        _assert_same(read_h5(h5), expected)
        with pytest.raises(RuntimeError, match=r"landscapes\.h5 is open read-only in this process .*Close it"):
            SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
                _gen_task.task, collect_landscape={"landscape_size": 5}, output=out, restart=True)
        assert evaluated == []
    assert h5.read_bytes() == before and sorted(os.listdir(out)) == files  # no lock file, no copy, no event
    again = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, collect_landscape={"landscape_size": 5}, output=out, restart=True)
    assert evaluated  # evaluated again, as restart asks
    _assert_same({ls.tag: ls for ls in again}, expected)


def test_a_write_waits_for_another_threads_read_of_the_file(tmp_path):
    """A read-only open of the file in another thread of the process (a progress display, a test) while a chunk
    is written: the write waits for it to close instead of failing with HDF5's "already open for read-only"."""
    import threading

    from landscape.io._h5 import open_h5

    h5 = tmp_path / "f.h5"
    with h5py.File(h5, "w") as fh:
        fh.create_dataset("d", data=np.zeros(3))
    opened, release = threading.Event(), threading.Event()

    def reader():
        with h5py.File(h5, "r"):
            opened.set()
            release.wait(5)

    t = threading.Thread(target=reader)
    t.start()
    assert opened.wait(5)
    threading.Timer(0.3, release.set).start()
    with open_h5(h5, "r+") as fh:
        fh["d"][1] = 7.0
    t.join()
    with h5py.File(h5, "r") as fh:
        assert fh["d"][()].tolist() == [0.0, 7.0, 0.0]


def test_writes_are_batched_and_a_failure_keeps_the_finished_landscapes(summary_dir, tmp_path, monkeypatch):
    from landscape.io import _store

    calls = []
    original = _store.rewrite
    monkeypatch.setattr(_store, "rewrite", lambda *a, **k: calls.append(k) or original(*a, **k))
    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "1000")  # however slow the machine, nothing is due before the end
    out = tmp_path / "batched"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _gen_task.task, collect_landscape={"landscape_size": 5}, output=out)
    assert len(calls) == 1  # three short landscapes: no progress groups, one write at the end
    assert sorted(read_h5(out / "landscapes.h5")) == sorted(TAGS)

    # a failure in the third landscape: the first two are written anyway
    from landscape.generate import _build

    build = _build.build_landscape

    def failing(problem, job, ex, **kw):
        if job.tag == TAGS[2]:
            raise RuntimeError("boom")
        return build(problem, job, ex, **kw)

    monkeypatch.setattr(_build, "build_landscape", failing)
    out2 = tmp_path / "failed"
    with pytest.raises(RuntimeError, match="boom"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
            _gen_task.task, collect_landscape={"landscape_size": 5}, output=out2)
    assert sorted(read_h5(out2 / "landscapes.h5")) == TAGS[:2]


def test_flush_interval_from_the_environment_is_validated(tmp_path, monkeypatch):
    from landscape.io._store import Store

    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "0.5")
    assert Store(tmp_path / "a.h5").flush_seconds == 0.5
    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "-1")
    with pytest.raises(ValueError, match="LANDSCAPE_FLUSH_SECONDS must be a number of seconds >= 0"):
        Store(tmp_path / "b.h5")


def test_a_landscape_begun_with_the_per_tensor_draw_is_resumed_with_it(monkeypatch):
    """A landscape whose stored metadata says ``direction_draw="per-tensor"`` (written before the blocks) is
    resumed drawing each tensor from one generator, and keeps saying so; ``"per-block"`` draws the blocks;
    a landscape without a recorded draw has its directions stored (no recipe)."""
    from landscape.generate._build import _recipe
    from landscape.geometry import _directions
    from landscape.geometry._directions import normalize_directions
    from tests.landscape._helpers import seeded_draw

    monkeypatch.setattr(_directions, "BLOCK", 10)
    torch.manual_seed(0)
    centre = [torch.randn(4, 6), torch.randn(6)]
    names = ["fc.weight", "fc.bias"]
    for draw in ("per-tensor", "per-block"):
        recipe = _recipe({"direction_draw": draw, "seed": 3, "normalization": "layer"}, names)
        assert recipe is not None and recipe.metadata() == {"seed": 3, "normalization": "layer", "direction_draw": draw}
        for axis in (0, 1):
            for name, c, got in zip(names, centre, recipe.draw(centre, axis)):
                raw = seeded_draw(3, axis, name, tuple(c.shape), block=10, per_tensor=draw == "per-tensor")
                assert torch.equal(got, normalize_directions([raw], [c], "layer")[0]), (draw, axis, name)
    assert _recipe({"seed": 3, "normalization": "layer"}, names) is None


def test_a_landscape_begun_here_and_resumed_by_workers_has_its_way_probed_first(tmp_path, monkeypatch):
    """A landscape evaluated in this process has its batched way checked on its first group, not probed
    when it is planned; begun so and stopped before a point was kept, it is resumed by workers (a joblib
    backend) only after the probe: a way that gives other values is planned out and the stored plan says so."""
    import joblib
    from torch import nn

    from landscape import compute_landscape
    from landscape.generate import _compute
    from landscape.io import Store
    from tests.landscape.engine.test_folded import _naive, _setup
    from tests.landscape.engine.test_planner import MixesSamples

    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "0")  # the definition is written at once
    store = Store(tmp_path / "landscapes.h5")
    build = _compute.build_landscape
    monkeypatch.setattr(_compute, "build_landscape", lambda *a, **k: build(*a, **k, store=store))
    torch.manual_seed(0)
    net = MixesSamples()
    x, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    names, v, w, centre = _setup(net, x, y)

    def run(tag=None):
        return compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions=(dict(zip(names, v)),
                                 dict(zip(names, w))), normalization="none", size=4, num_samples=40, tag=tag)

    evaluate = Engine.evaluate

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C before the first group
    monkeypatch.setattr(Engine, "evaluate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run()
    assert store.check("landscape", {}) == "partial"
    assert store.load_partial("landscape").md["batching"] == "folded"  # the first that applies, not yet checked
    monkeypatch.setattr(Engine, "evaluate", evaluate)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        ls = run()
    assert ls.metadata["batching"] == "vmap" and store.load_complete("landscape").metadata["batching"] == "vmap"
    pts = np.stack(np.meshgrid(ls.x, ls.y), -1).reshape(-1, 2)
    ref = _naive(net, names, v, w, centre, x, y, pts, nn.CrossEntropyLoss()).reshape(4, 4)
    np.testing.assert_allclose(ls.z, ref, rtol=2e-5, atol=1e-6)
    # in this process: refused on the first group, planned again, the definition written again before a point
    begun = []
    begin = store.begin
    monkeypatch.setattr(store, "begin", lambda tag, *a: begun.append(tag) or begin(tag, *a))

    def after_the_check(self, *args, **kwargs):
        if len(begun) == 2:
            raise KeyboardInterrupt  # stopped once planned again
        return evaluate(self, *args, **kwargs)
    monkeypatch.setattr(Engine, "evaluate", after_the_check)
    with pytest.raises(KeyboardInterrupt):
        run("here")
    assert begun == ["here", "here"] and store.load_partial("here").md["batching"] == "vmap"
    monkeypatch.setattr(Engine, "evaluate", evaluate)
    here = run("here")
    assert here.metadata["batching"] == "vmap" and store.load_complete("here").metadata["batching"] == "vmap"
    assert np.array_equal(here.z, ls.z)
