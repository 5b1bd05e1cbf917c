"""The planner: batched ways verified before use (on a probe that costs little), timings deciding where they
matter."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

import landscape
from landscape.engine import BATCHINGS, Engine, EngineSpec, Samples, _engine, _planner, _probe, choose_plan
from landscape.examples import MLP
from landscape.geometry import SeededDirections
from landscape.tasks import Supervised
from tests.landscape.engine.test_folded import _naive, _setup


class MixesSamples(nn.Module):
    """A forward that centres its batch: folding points into the batch would mix them."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 12), nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.fc2(h - h.mean(0, keepdim=True))


def _spec(net, x, y):
    names, v, w, centre = _setup(net, x, y)
    samples = Samples([(x, y)], [x.shape[0]], merged=True, _whole=(x, y))
    return EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, samples, names, centre, v, w), (names, v, w, centre)


class FixedBatch(nn.Module):
    """A forward that reshapes its batch to the size it was written for: folded points fail in it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 12), nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)).reshape(40, 12))


@pytest.mark.parametrize("parallel", [False, True], ids=["in-process", "joblib"])
def test_a_way_that_changes_values_is_never_used(parallel, caplog):
    """In this process the engine refuses folding on the landscape's first group (the probe refuses it with
    workers); either way the landscape is vmap's, and the loop's values."""
    import joblib

    torch.manual_seed(0)
    net = MixesSamples()
    x, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    spec, (names, v, w, centre) = _spec(net, x, y)
    plan = choose_plan(spec, n_points=25)
    assert plan.points_per_call > 1 and plan.batching == "vmap"  # folding would mix the points' samples
    assert _probe.verify_way(spec, "folded", 4) is not None  # folded was probed and refused
    with joblib.parallel_config(backend="threading", n_jobs=2) if parallel else contextlib.nullcontext():
        with caplog.at_level(logging.INFO, logger="landscape"):
            ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions=(
                dict(zip(names, v)), dict(zip(names, w))), normalization="none", size=4, num_samples=40)
    assert ls.metadata["batching"] == "vmap" and ls.metadata["points_per_call"] > 1
    said = "other values than one point per call on " + ("a probe" if parallel else "the landscape's first group")
    assert any("'folded' not used" in r.getMessage() and said in r.getMessage() for r in caplog.records)
    pts = np.stack(np.meshgrid(ls.x, ls.y), -1).reshape(-1, 2)
    ref = _naive(net, names, v, w, centre, x, y, pts, nn.CrossEntropyLoss()).reshape(4, 4)
    np.testing.assert_allclose(ls.z, ref, rtol=2e-5, atol=1e-6)


def test_the_engine_checks_its_way_on_its_first_group_before_any_value():
    """``verify``: the first group's values at its first and last points against the one-point path (a
    way that fails, gives other values or makes PyTorch warn is refused, naming it and why); a way that
    agrees gives the same bits as without the check, and its points are not evaluated twice by the way."""
    torch.manual_seed(0)
    x, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    pts = np.random.default_rng(0).uniform(-1, 1, (10, 2))
    for net, why in ((MixesSamples(), "other values than one point per call on the landscape's first group"),
                     (FixedBatch(), "RuntimeError")):
        spec, _ = _spec(net, x, y)
        eng = Engine(dataclasses.replace(spec, points_per_call=4, batching="folded", verify=True))
        with pytest.raises(_engine.WayRefused, match=f"batching 'folded' not used: .*{why}") as info:
            eng.evaluate(pts)
        assert info.value.way == "folded"

    class Warns(MixesSamples):
        def forward(self, x):
            h = torch.relu(self.fc1(x))
            if h.shape[0] > 40:  # the points folded into the batch
                warnings.warn("a fallback ran", UserWarning, stacklevel=1)
            return self.fc2(h)

    spec, _ = _spec(Warns(), x, y)
    with pytest.raises(_engine.WayRefused, match="PyTorch warns when it runs so: a fallback ran"):
        Engine(dataclasses.replace(spec, points_per_call=4, batching="folded", verify=True)).evaluate(pts)
    spec, _ = _spec(MLP(hidden=8), torch.rand(40, 64), torch.randint(0, 10, (40,)))
    calls = []
    checked = Engine(dataclasses.replace(spec, points_per_call=4, batching="folded", verify=True))
    real = checked._forward_group
    checked._forward_group = lambda a, b: calls.append(len(a)) or real(a, b)
    got = checked.evaluate(pts)["loss"]
    plain = Engine(dataclasses.replace(spec, points_per_call=4, batching="folded")).evaluate(pts)["loss"]
    assert np.array_equal(got, plain) and calls == [4, 4, 4]


def test_a_landscape_in_this_process_builds_one_engine_and_no_probe(monkeypatch):
    """The verification costs no engine of its own: one engine, whose first group checks the way."""
    built, probed = [], []
    real_init, real_ref = Engine.__init__, _probe._reference
    monkeypatch.setattr(Engine, "__init__", lambda self, *a, **k: built.append(1) or real_init(self, *a, **k))
    monkeypatch.setattr(_probe, "_reference", lambda *a, **k: probed.append(1) or real_ref(*a, **k))
    torch.manual_seed(0)
    net = MLP(hidden=16).eval()
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (torch.rand(64, 64), torch.randint(0, 10, (64,))),
                                     size=6, num_samples=64)
    assert ls.metadata["points_per_call"] > 1 and ls.metadata["batching"] is not None
    assert len(built) == 1 and not probed


def _fake_timing(per_point):
    def timed(trial, device, points):
        return per_point(trial.points_per_call, trial.batching, trial.samples.sizes[0])
    return timed


def test_auto_is_a_pure_function_of_the_problem_and_never_times(monkeypatch):
    torch.manual_seed(0)
    spec, _ = _spec(MLP(hidden=16), torch.rand(64, 64), torch.randint(0, 10, (64,)))

    def never(*args, **kwargs):
        raise AssertionError("plan='auto' must not time anything")

    monkeypatch.setattr(_planner, "_time_per_point", never)
    plans = [choose_plan(spec, n_points=10_000, mode=m) for m in ("auto", "auto", "heuristic")]
    assert plans[0] == plans[1] == plans[2]
    plan = plans[0]
    assert plan.how == "heuristic" and plan.points_per_call > 1 and plan.batching in BATCHINGS


def test_points_per_call_never_exceed_the_landscape_points(monkeypatch):
    torch.manual_seed(0)
    spec, _ = _spec(MLP(hidden=16), torch.rand(64, 64), torch.randint(0, 10, (64,)))
    # a tiny MLP: the most per call
    assert choose_plan(spec, n_points=10_000).points_per_call == _planner.MAX_POINTS_PER_CALL == 64
    assert choose_plan(spec, n_points=20).points_per_call == 20  # not 64 calls' worth of padded copies
    # a landscape of at most SMALL_LANDSCAPE_POINTS (a 3x3 plane) runs one point per call, with no probe
    small = _planner.SMALL_LANDSCAPE_POINTS
    assert 9 <= small < 16
    probed: list[tuple] = []
    real = _planner.first_working_way
    monkeypatch.setattr(_planner, "first_working_way", lambda *a, **k: probed.append(a) or real(*a, **k))
    assert choose_plan(spec, n_points=small).points_per_call == 1 and not probed
    assert choose_plan(spec, n_points=small + 1).points_per_call == small + 1 and probed
    assert choose_plan(spec, n_points=1).points_per_call == 1


@pytest.mark.parametrize("n_points, most, expected", [
    (51, 16, 13), (101, 16, 15), (1600, 16, 16), (1605, 16, 16), (400, 32, 31), (33, 32, 17), (16, 16, 16)])
def test_the_points_are_spread_evenly_over_the_calls_the_working_set_needs(n_points, most, expected):
    """No call pads more copies than there are calls: the working set decides how many calls, not how empty
    the last one is (51 points at up to 16 per call run as four calls of 13, 52 evaluated, not 64)."""
    n_params = _planner.CALL_BYTES // (4 * most)  # no activations: the working set allows ``most`` per call
    p, _ = _planner.sizes(n_params, 64, 0, eval_mode=True, batched=True, n_points=n_points)
    assert p == expected
    calls = -(-n_points // p)
    assert calls == -(-n_points // most)  # as many calls as at ``most`` per call
    assert calls * p - n_points < calls  # the padding: fewer copies than calls


def test_tuning_keeps_one_point_per_call_unless_a_batched_plan_is_clearly_faster(monkeypatch):
    torch.manual_seed(0)
    net = MLP(hidden=16)
    x, y = torch.rand(64, 64), torch.randint(0, 10, (64,))
    spec, _ = _spec(net, x, y)
    # batched plans 5 % faster than one point per call: within the margin, one point per call stays
    monkeypatch.setattr(_planner, "_time_per_point", _fake_timing(lambda p, kind, b: 1.0 if p == 1 else 0.95))
    chosen = choose_plan(spec, n_points=10_000, mode="tune")
    assert chosen.how == "tuned" and chosen.points_per_call == 1
    assert chosen.timings and "p=1 batch=64" in chosen.timings
    # slower batched plans are never chosen
    monkeypatch.setattr(_planner, "_time_per_point", _fake_timing(lambda p, kind, b: 1.0 if p == 1 else 1.5))
    assert choose_plan(spec, n_points=10_000, mode="tune").points_per_call == 1
    # a clearly faster one is, and a smaller evaluation batch when it is the fastest
    monkeypatch.setattr(_planner, "_time_per_point", _fake_timing(lambda p, kind, b: 1.0 / p))
    fast = choose_plan(spec, n_points=10_000, mode="tune")
    assert fast.points_per_call > 1 and fast.batching in BATCHINGS
    monkeypatch.setattr(_planner, "_time_per_point", _fake_timing(lambda p, kind, b: 1.0 if p > 1 or b == 64 else 0.5))
    small = choose_plan(spec, n_points=10_000, mode="tune")
    assert small.points_per_call == 1 and small.eval_batch == 32
    md = small.metadata()
    assert md["plan"] == "tuned" and md["eval_batch"] == 32 and "plan_timings" in md


def test_a_given_plan_is_used_as_given():
    torch.manual_seed(0)
    spec, _ = _spec(MLP(hidden=16), torch.rand(32, 64), torch.randint(0, 10, (32,)))
    given = choose_plan(spec, n_points=16, mode={"points_per_call": 2, "batching": "folded", "eval_batch": 16})
    assert (given.points_per_call, given.batching, given.eval_batch, given.how) == (2, "folded", 16, "given")


@pytest.mark.parametrize("plan", ["auto", {"points_per_call": 4, "batching": "folded", "eval_batch": 32}])
def test_compute_landscape_records_the_plan(plan):
    torch.manual_seed(0)
    x, y = torch.rand(64, 64), torch.randint(0, 10, (64,))
    ls = landscape.compute_landscape(MLP(hidden=16), nn.CrossEntropyLoss(), (x, y), size=4, num_samples=64, plan=plan)
    if isinstance(plan, dict):
        assert ls.metadata["points_per_call"] == 4 and ls.metadata["batching"] == "folded"
        assert ls.metadata["eval_batch"] == 32 and ls.metadata["plan"] == "given"
    else:
        assert ls.metadata["plan"] == "heuristic"  # what plan="auto" records: made by the rule, not timed


def _cnn_spec(plan_fields=None):
    from tests.landscape.engine.test_folded import ResidualCNN

    torch.manual_seed(0)
    net = ResidualCNN()
    x, y = torch.randn(20, 3, 8, 8), torch.randint(0, 5, (20,))
    spec, parts = _spec(net, x, y)
    return net, x, y, spec, parts


@pytest.mark.parametrize("batches", [1, 3])
def test_channels_last_kernels_give_the_loop_values_whatever_the_chunking(batches):
    from landscape.engine import Engine

    net, x, y, spec, (names, v, w, centre) = _cnn_spec()
    if batches > 1:
        samples = Samples([(x[i::batches], y[i::batches]) for i in range(batches)],
                          [len(x[i::batches]) for i in range(batches)])
        x = torch.cat([x[i::batches] for i in range(batches)])
        y = torch.cat([y[i::batches] for i in range(batches)])
        spec = EngineSpec(net, spec.task, {}, samples, names, centre, v, w)
    pts = np.random.default_rng(0).uniform(-1, 1, (7, 2))
    ref = _naive(net, names, v, w, centre, x, y, pts, nn.CrossEntropyLoss())
    cl = EngineSpec(**{**spec.__dict__, "memory_format": "channels_last"})
    eng = Engine(cl)
    assert eng.net.get_submodule("conv1").weight.is_contiguous(memory_format=torch.channels_last)
    whole = eng.evaluate(pts)["loss"]
    np.testing.assert_allclose(whole, ref, rtol=1e-5, atol=1e-6)
    # the same bits however the points are split between calls and engines
    split = np.concatenate([Engine(cl).evaluate(pts[:3])["loss"], Engine(cl).evaluate(pts[3:], start=3)["loss"]])
    assert np.array_equal(whole, split)
    # the caller's network keeps its layout
    assert net.conv1.weight.is_contiguous()


def test_the_plan_lays_convolution_kernels_out_channels_last_at_one_point_per_call():
    net, x, y, spec, _ = _cnn_spec()
    assert choose_plan(spec, n_points=16, mode={"points_per_call": 1}).memory_format == "contiguous"
    monkey = _planner.CALL_BYTES
    try:
        _planner.CALL_BYTES = 0  # one point per call
        one = choose_plan(spec, n_points=16)
    finally:
        _planner.CALL_BYTES = monkey
    assert (one.points_per_call, one.memory_format) == (1, "channels_last")
    assert one.metadata()["memory_format"] == "channels_last"
    many = choose_plan(spec, n_points=16)  # a tiny CNN: several points per call
    assert many.points_per_call > 1 and many.memory_format == "contiguous"
    mlp = _spec(MLP(hidden=16), torch.rand(32, 64), torch.randint(0, 10, (32,)))[0]
    assert choose_plan(mlp, n_points=16, mode={"points_per_call": 1}).memory_format == "contiguous"
    given = {"points_per_call": 1, "memory_format": "channels_last"}
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=20, plan=given)
    assert ls.metadata["memory_format"] == "channels_last" and ls.metadata["plan"] == "given"
    with pytest.raises(ValueError, match=r"plan\['memory_format'\].*channels_last"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=20,
                                    plan={"points_per_call": 1, "memory_format": "nhwc"})


def test_tuning_times_both_layouts_of_a_cnn(monkeypatch):
    net, x, y, spec, _ = _cnn_spec()
    monkeypatch.setattr(_planner, "CALL_BYTES", 0)  # one point per call: only layouts and batches compete
    seen = []

    def timed(trial, device, points):
        seen.append((trial.points_per_call, trial.samples.sizes[0], trial.memory_format))
        return 0.5 if trial.memory_format == "contiguous" else 1.0

    monkeypatch.setattr(_planner, "_time_per_point", timed)
    chosen = choose_plan(spec, n_points=10_000, mode="tune")
    assert seen[0] == (1, 20, "channels_last") and (1, 20, "contiguous") in seen
    assert chosen.memory_format == "contiguous" and chosen.how == "tuned"
    assert "p=1 batch=20 channels_last" in chosen.timings and "p=1 batch=20" in chosen.timings




class LSTMNet(nn.Module):
    """``nn.LSTM`` reads its weights through ``_flat_weights``: the engine moves them in place."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn, self.fc = nn.LSTM(5, 8, batch_first=True), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.rnn(x)[0][:, -1])


def _recipe_spec(net, x, y):
    spec, (names, *_) = _spec(net, x, y)
    recipe = SeededDirections(3, "filter", "normalize", tuple(names), 2)
    return dataclasses.replace(spec, v=[], w=[], recipe=recipe)


@pytest.mark.parametrize("case", ["mlp", "mlp-recipe", "cnn", "lstm"])
def test_the_probe_gives_the_values_of_engines_built_for_it(case):
    from tests.landscape.engine.test_folded import ResidualCNN

    torch.manual_seed(0)
    net, x, y = {"mlp": (MLP(hidden=16), torch.rand(8, 64), torch.randint(0, 10, (8,))),
                 "mlp-recipe": (MLP(hidden=16), torch.rand(8, 64), torch.randint(0, 10, (8,))),
                 "cnn": (ResidualCNN(), torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))),
                 "lstm": (LSTMNet(), torch.randn(8, 6, 5), torch.randint(0, 3, (8,)))}[case]
    spec = _recipe_spec(net, x, y) if case == "mlp-recipe" else _spec(net, x, y)[0]
    probe = _probe._reference(spec, 4)
    # the one-point reference (moved tensors written in place) is a full engine's one-point path, bit for bit
    one = Engine(_probe._probe_spec(spec)).evaluate(probe.pts)["loss"]
    assert np.array_equal(probe.reference, one)
    if case == "lstm":
        return  # no batched way runs an LSTM
    # a batched way checked on the reference's network and directions gives a fresh engine's values
    way = dataclasses.replace(_probe._probe_spec(spec), points_per_call=4, batching="folded")
    fresh = Engine(way).evaluate(probe.pts)["loss"]
    lent = Engine(dataclasses.replace(probe.spec, points_per_call=4, batching="folded"), network=probe.lent)
    assert np.array_equal(lent.evaluate(probe.pts)["loss"], fresh)
    np.testing.assert_allclose(fresh, one, rtol=_probe.PROBE_RTOL)


def test_planning_builds_two_engines_over_one_copy_of_the_network_and_leaves_it_as_it_was(monkeypatch):
    torch.manual_seed(0)
    net = MLP(hidden=16)
    before = {k: (t, t.detach().clone()) for k, t in net.named_parameters()}
    spec = _recipe_spec(net, torch.rand(64, 64), torch.randint(0, 10, (64,)))
    built, copies = [], []

    class Counted(Engine):
        def __init__(self, spec, *args, **kwargs):
            built.append(spec)
            super().__init__(spec, *args, **kwargs)

    copy_network = _engine.network_at
    monkeypatch.setattr(_probe, "Engine", Counted)
    monkeypatch.setattr(_engine, "network_at", lambda *a, **k: copies.append(1) or copy_network(*a, **k))
    plan = choose_plan(spec, n_points=400)
    assert plan.points_per_call > 1 and plan.batching == "folded"
    # the one-point reference and the first way that applies (sequential does not: no engine for it);
    # the recipe's directions drawn by the first only, and one copy of the modules for both
    assert [s.points_per_call for s in built] == [1, 4] and [s.recipe is not None for s in built] == [True, False]
    assert len(copies) == 1
    assert not any(parametrize.is_parametrized(m) for m in net.modules())
    assert all(t is dict(net.named_parameters())[k] and torch.equal(t, old) for k, (t, old) in before.items())


def test_a_plan_records_the_batches_that_run_over_the_callers_own_batches(monkeypatch):
    """The caller's batches (a list, not one mergeable block) run as they are: their loss is the task's over
    each batch, so they are never cut, and the plan records the largest of them, not a size it cannot apply;
    one mergeable block is cut into the plan's batches."""
    torch.manual_seed(0)
    net, x, y = MixesSamples(), torch.randn(48, 6), torch.randint(0, 3, (48,))
    spec, _ = _spec(net, x, y)
    own = dataclasses.replace(spec, samples=Samples([(x[:30], y[:30]), (x[30:], y[30:])], [30, 18]))
    monkeypatch.setattr(_planner, "MEMORY_BUDGET", 4 * 15 * 12)  # 15 activations a sample: 12 samples a batch
    assert choose_plan(spec, n_points=1).eval_batch == 12  # one block: cut to the budget
    assert choose_plan(own, n_points=1).eval_batch == 30
    assert choose_plan(own, n_points=1, mode="tune").eval_batch == 30
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x[:30], y[:30]), (x[30:], y[30:])], size=3,
                                     num_samples=None)
    assert ls.metadata["eval_batch"] == 30


def test_a_plan_that_activations_cannot_change_runs_no_forward_to_count_them(monkeypatch):
    """The activations are counted (a hooked forward on two samples) only where they size the plan: a network
    whose one point fills a call over the caller's own batches gets the same plan without that forward."""
    torch.manual_seed(0)
    net, x, y = MLP(hidden=16), torch.rand(48, 64), torch.randint(0, 10, (48,))
    spec, _ = _spec(net, x, y)
    own = dataclasses.replace(spec, samples=Samples([(x[:30], y[:30]), (x[30:], y[30:])], [30, 18]))
    counted = []
    real = _planner._activations
    monkeypatch.setattr(_planner, "_activations", lambda s: counted.append(1) or real(s))
    wide = choose_plan(own, n_points=25)
    assert len(counted) == 1 and wide.points_per_call > 1  # a small network: several points per call
    monkeypatch.setattr(_planner, "CALL_BYTES", 4 * sum(p.numel() for p in net.parameters()))  # one point fills it
    plan = choose_plan(own, n_points=25)
    assert len(counted) == 1  # not counted again
    assert (plan.points_per_call, plan.batching, plan.eval_batch) == (1, None, 30)
    assert choose_plan(spec, n_points=25).eval_batch == 48 and len(counted) == 2  # one block: counted, it may cut


def test_the_landscapes_of_one_call_share_the_probe_and_keep_their_plans(monkeypatch):
    """Within shared_probes (the landscapes of one generation: one network, task and samples) the batched
    ways are probed once per moved tensors and setting; a landscape that differs only in its directions
    gets that answer, which is the plan it gets probed on its own (the plan is all the probe decides:
    the values follow from it, as test_compute_landscape_records_the_plan and the demo's fingerprints
    check)."""
    torch.manual_seed(0)
    net = MLP(hidden=12)
    x, y = torch.randn(40, 64), torch.randint(0, 10, (40,))
    spec, (names, v, w, centre) = _spec(net, x, y)
    probed = []
    real = _probe._reference
    monkeypatch.setattr(_probe, "_reference", lambda *a, **k: probed.append(1) or real(*a, **k))
    flipped = dataclasses.replace(spec, v=[-t for t in v], w=[2 * t for t in w])
    with _probe.shared_probes():
        first, shared = choose_plan(spec, n_points=25), choose_plan(flipped, n_points=25)
        assert len(probed) == 1 and first.batching is not None
        choose_plan(dataclasses.replace(spec, w=[]), n_points=25)  # a line: another structure, probed again
        choose_plan(dataclasses.replace(spec, names=names[:2], v=v[:2], w=w[:2]), n_points=25)  # other tensors
        assert len(probed) == 3
    alone = choose_plan(flipped, n_points=25)  # outside the block: probed as before
    assert len(probed) == 4 and shared == alone


def test_the_probe_keeps_no_large_draw_past_itself_and_the_engine_gives_it_to_the_digests(monkeypatch):
    """Within a landscape a large network's random draw (beyond SHARED_ELEMENTS) is kept only when the
    landscape's engine holds it anyway: the probe's engine lives shorter (workers may evaluate), so its
    draw is not kept; the engine's is, and the digests then draw nothing."""
    from landscape.geometry import _directions as geometry_directions
    from landscape.io import _directions as io_directions

    torch.manual_seed(0)
    net = MLP(hidden=16)
    spec = _recipe_spec(net, torch.rand(64, 64), torch.randint(0, 10, (64,)))
    monkeypatch.setattr(geometry_directions, "SHARED_ELEMENTS", 0)  # the MLP stands for a large network
    monkeypatch.setattr(io_directions, "_WHOLE_DRAW", 0)
    draws = []
    real_draw = SeededDirections._draw
    monkeypatch.setattr(SeededDirections, "_draw", lambda self, *a, **k: draws.append(1) or real_draw(self, *a, **k))

    def kept():
        return [k for k in geometry_directions._SHARED.get() if k is not geometry_directions._RAW_HASH]

    centre = [spec.centre[k] for k in spec.names]
    want = io_directions._recipe_digests(spec.recipe, centre)
    with io_directions.shared_draws_kept():
        choose_plan(spec, n_points=400)
        assert draws and not kept()
        before = len(draws)
        Engine(spec, "cpu")
        assert len(draws) == before + 1 and len(kept()) == 1
        assert io_directions._recipe_digests(spec.recipe, centre) == want and len(draws) == before + 1
