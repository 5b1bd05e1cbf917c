"""Memory as a designed quantity: the network held once, directions held or drawn again, low precision.

Every landscape here is checked against a naive loop that moves a copy of the network in place,
point by point (``p.copy_(point)``), with the documented draw of the directions.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector import InvalidParameterError
from landscape.engine import Engine, EngineSpec, Samples
from landscape.engine import _points as points_module
from landscape.geometry import SeededDirections
from landscape.geometry._directions import random_directions
from landscape.geometry._state import moved_names
from landscape.tasks import HuggingFace, Supervised
from tests.landscape._helpers import naive_in_place


def _tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=61, n_positions=16)
    net = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 61, (6, 12), generator=torch.Generator().manual_seed(1))
    return net, {"input_ids": ids, "labels": ids}


def _state(net: nn.Module) -> list[tuple[str, int, torch.Tensor]]:
    return [(k, p.data_ptr(), p.detach().clone()) for k, p in net.named_parameters()]


@pytest.mark.parametrize("memory", ["fast", "lean"])
def test_tied_gpt2_equals_the_naive_loop_and_is_left_untouched(memory):
    net, batch = _tiny_gpt2()
    assert net.lm_head.weight is net.transformer.wte.weight
    before, classes = _state(net), [type(m) for m in net.modules()]
    ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=2,
                                     memory=memory)
    names, _ = moved_names(net, None)
    assert "lm_head.weight" not in names and ls.metadata["direction_draw"] == "per-block"
    ref = [p.detach() for n, p in net.named_parameters() if n in names]
    v, w = random_directions(ref, 2, "layer", names=names)
    want = naive_in_place(net, names, v, w, ls.x, ls.y, lambda m: m(**batch).loss)
    np.testing.assert_array_equal(ls.z, want)  # the model's own modules run: the same bits
    # the caller's network: the same tensors (no copy was moved), values, classes and mode
    after = _state(net)
    assert [(k, ptr) for k, ptr, _ in after] == [(k, ptr) for k, ptr, _ in before]
    assert all(torch.equal(a, b) for (_, _, a), (_, _, b) in zip(before, after))
    assert [type(m) for m in net.modules()] == classes and not net.training
    assert net.lm_head.weight is net.transformer.wte.weight


@pytest.mark.parametrize("blocks", [False, True])
def test_fast_and_lean_give_the_same_bits(monkeypatch, blocks):
    """With tensors of several blocks drawn on threads too (lean draws them at every read, in the
    engine's inference mode)."""
    if blocks:
        from landscape.geometry import _directions

        monkeypatch.setattr(_directions, "BLOCK", 200)
        monkeypatch.setattr(_directions, "THREADED_DRAW", 0)
        monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    net, batch = _tiny_gpt2()
    runs = [landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=4, num_samples=None, seed=5,
                                        normalization=norm, memory=memory)
            for norm in ("filter", "weight") for memory in ("fast", "lean")]
    np.testing.assert_array_equal(runs[0].z, runs[1].z)
    np.testing.assert_array_equal(runs[2].z, runs[3].z)
    assert not np.array_equal(runs[0].z, runs[2].z)


def test_the_engine_holds_no_copy_of_the_network():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
    names, _ = moved_names(net, None)
    centre = {k: t.detach() for k, t in net.state_dict().items()}
    recipe = SeededDirections(0, "layer", "normalize", tuple(names))
    spec = EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, Samples([(x, y)], [10]), names, centre, [], [],
                      recipe=recipe, memory="lean")
    eng = Engine(spec)
    mine = dict(net.named_parameters())
    assert [p.data_ptr() for p in eng.params] == [mine[k].data_ptr() for k in names]  # the caller's storage
    assert eng.points.dirs.held == [[], []]  # lean: nothing held
    res = eng.evaluate(np.array([[0.0, 0.0], [0.5, -0.25]]))["loss"]
    assert eng.points.form == "jit"
    with torch.no_grad():
        assert res[0] == float(nn.functional.cross_entropy(net(x), y))  # the centre: the network bit for bit
    fast = Engine(EngineSpec(**{**spec.__dict__, "memory": "fast"}))
    assert len(fast.points.dirs.held[0]) == len(names)
    np.testing.assert_array_equal(fast.evaluate(np.array([[0.0, 0.0], [0.5, -0.25]]))["loss"], res)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_network_in_its_dtype(dtype):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)).to(dtype)
    x = torch.randn(40, 12).to(dtype)
    y = torch.randint(0, 4, (40,))
    loss_fn = nn.CrossEntropyLoss()
    ls = landscape.compute_landscape(net, loss_fn, (x, y), size=5, num_samples=None, seed=1)
    assert ls.metadata["points_per_call"] == 1  # the batched ways form points in float32 only
    names, _ = moved_names(net, None)
    ref = [p.detach() for p in net.parameters()]
    v, w = random_directions(ref, 1, "layer", names=names)
    want = naive_in_place(net, names, v, w, ls.x, ls.y, lambda m: loss_fn(m(x), y))
    np.testing.assert_array_equal(ls.z, want)  # the same rounding, the same bits
    with torch.no_grad():
        assert ls.z[2, 2] == float(loss_fn(net(x), y))  # the centre: the model itself
    lean = landscape.compute_landscape(net, loss_fn, (x, y), size=5, num_samples=None, seed=1, memory="lean")
    np.testing.assert_array_equal(lean.z, ls.z)


def test_bf16_gpt2_is_the_model_at_the_centre_and_the_naive_bf16_loop_elsewhere():
    """Hugging Face's gelu_new runs as the model defines it (five bfloat16 operations): a fused kernel
    computing the same function in float32 would change the loss by ~1e-5 relative at the centre."""
    net, batch = _tiny_gpt2()
    net = net.to(torch.bfloat16)
    ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=4)
    names, _ = moved_names(net, None)
    ref = [p.detach() for n, p in net.named_parameters() if n in names]
    v, w = random_directions(ref, 4, "layer", names=names)
    np.testing.assert_array_equal(ls.z, naive_in_place(net, names, v, w, ls.x, ls.y, lambda m: m(**batch).loss))
    with torch.no_grad():
        assert ls.z[1, 1] == float(net(**batch).loss)


class _Cached(nn.Module):
    """Reads its layer's weight through a reference kept at construction (like nn.LSTM's _flat_weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 3)
        self.kept = [self.lin.weight]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.kept[0], self.lin.bias)


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(5, 7, batch_first=True)
        self.head = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


@pytest.fixture
def read_by_layers(monkeypatch):
    """Small networks read each moved tensor when a layer reads it, as networks over
    ``SMALL_NETWORK_BYTES`` do (the small ones here stand in for them)."""
    monkeypatch.setattr(points_module, "SMALL_NETWORK_BYTES", 0)


@pytest.mark.usefixtures("read_by_layers")
@pytest.mark.parametrize("make, shape", [(_Cached, (30, 5)), (_Recurrent, (30, 4, 5)),
                                         (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
                                             5, 1, 8, dropout=0.0, batch_first=True), 1, enable_nested_tensor=False),
                                          (30, 4, 5))])
def test_tensors_read_without_their_attribute_still_move(make, shape, caplog):
    torch.manual_seed(0)
    net = make().eval()
    x = torch.randn(*shape)
    y = torch.randn(net(x).shape)
    loss_fn = nn.MSELoss()
    with caplog.at_level(logging.INFO, logger="landscape"):
        ls = landscape.compute_landscape(net, loss_fn, (x, y), size=3, num_samples=None,
                                         plan={"points_per_call": 1})
    names, _ = moved_names(net, None)
    v, w = random_directions([p.detach() for p in net.parameters()], 0, "layer", names=names)
    want = naive_in_place(net, names, v, w, ls.x, ls.y, lambda m: loss_fn(m(x), y))
    np.testing.assert_allclose(ls.z, want, rtol=1e-5)
    # only the kept reference escapes the attribute (the LSTM reads its weights through it; attention reads
    # out_proj.weight through the attribute, in the parent's forward)
    assert ("set in place" in caplog.text) == (make is _Cached)


def test_auto_draws_the_directions_when_they_do_not_fit(monkeypatch, caplog):
    net, batch = _tiny_gpt2()
    fast = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, memory="fast")
    monkeypatch.setattr(points_module, "free_memory", lambda device: 1000)
    with caplog.at_level(logging.INFO, logger="landscape"):
        auto = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None)
    assert "drawn again at every read" in caplog.text
    np.testing.assert_array_equal(auto.z, fast.z)


def test_memory_option_is_validated(trained, data):
    net, _ = trained
    with pytest.raises(InvalidParameterError, match="'memory' parameter of compute_landscape.*'auto', 'fast', 'lean'"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=3, memory="small")
    with pytest.raises(InvalidParameterError, match="memory='lean' draws them at every read, one point per call"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=3, memory="lean",
                                    plan={"points_per_call": 4, "batching": "vmap"})


def test_point_values_are_point_value_bit_for_bit():
    """All of a point's tensors at once (multi-tensor additions) give each tensor's point_value exactly."""
    from landscape.engine import point_value, point_values

    g = torch.Generator().manual_seed(0)

    def rnd(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    centre = [rnd(7, 3), rnd(5), rnd(4, dtype=torch.bfloat16), rnd(6, dtype=torch.float64), rnd(3), rnd(2, 2), rnd(9)]
    v = [rnd(7, 3), rnd(5), rnd(4), rnd(6, dtype=torch.float64), rnd(3), None, rnd(9)]
    w = [rnd(7, 3), None, rnd(4), rnd(6, dtype=torch.float64), rnd(3), rnd(2, 2), None]
    clamp = {4}
    # the in-place form's buffers on the CPU: float32/float64 tensors not clamped (a bfloat16 one has none)
    into = [None if c.dtype == torch.bfloat16 or i in clamp else torch.empty_like(c) for i, c in enumerate(centre)]
    for a, b in [(0.3, -0.7), (0.0, 0.5), (0.25, 0.0), (-1.0, 1.0), (0.0, 0.0)]:
        got = point_values(centre, v, w, a, b, clamp)
        written = point_values(centre, v, w, a, b, clamp, into=into)
        for i, c in enumerate(centre):
            want = point_value(c, v[i], w[i], a, b, i in clamp)
            assert got[i].dtype == want.dtype and torch.equal(got[i], want), (a, b, i)
            assert written[i].dtype == want.dtype and torch.equal(written[i], want), (a, b, i)
            if want is c:  # no term: the centre itself, not a copy
                assert got[i] is c and written[i] is c
            else:  # a buffer is written, not replaced: no new tensor per point
                assert (written[i] is into[i]) == (into[i] is not None), (a, b, i)


class _Held(nn.Module):
    """Moved tensors of every kind the in-place form meets: float32 ones (contiguous), a float64 one, a
    channels-last kernel and a running variance (clamped at zero)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(4)
        self.w1 = nn.Parameter(torch.randn(7, 3, generator=g))
        self.b1 = nn.Parameter(torch.randn(5, generator=g))
        self.d64 = nn.Parameter(torch.randn(6, generator=g, dtype=torch.float64))
        self.k = nn.Parameter(torch.randn(2, 3, 4, 4, generator=g).contiguous(memory_format=torch.channels_last))
        self.w2 = nn.Parameter(torch.randn(4, 9, generator=g))
        self.register_buffer("running_var", torch.rand(4, generator=g))


def test_in_place_points_formed_as_one_vector_keep_the_bits(monkeypatch):
    """The in-place form's float32 contiguous tensors are formed as one vector (two operations a point, not two
    per tensor): every tensor is point_value's bit for bit, beside tensors formed one by one (float64,
    channels-last, clamped) or alone; the network's tensors are slices of one buffer written again at every
    point (no new tensor), the centre again after release, and the point again after a materialized block."""
    from landscape.engine import point_value

    g = torch.Generator().manual_seed(5)
    for only_float32 in (False, True):
        net = _Held()
        names = ["w1", "b1", "w2"] if only_float32 else ["w1", "b1", "d64", "k", "w2", "running_var"]
        clamp = {names.index("running_var")} if "running_var" in names else set()
        named = {**dict(net.named_buffers()), **dict(net.named_parameters())}
        centre = [named[k].detach().clone() for k in names]
        v = [torch.randn(c.shape, generator=g, dtype=c.dtype) for c in centre]
        w = [torch.randn(c.shape, generator=g, dtype=c.dtype) for c in centre]
        pts = points_module.Points(net, names, clamp, v, w)
        assert pts.form == "in place"
        flat_names = {"w1", "b1", "w2"}
        ptrs = None
        for a, b in [(0.3, -0.7), (0.0, 0.5), (0.25, 0.0), (0.0, 0.0), (-1.0, 1.0)]:
            pts.set(a, b)
            for i, (k, t) in enumerate(zip(names, pts.tensors)):
                want = point_value(centre[i], v[i], w[i], a, b, i in clamp)
                assert t.dtype == want.dtype and torch.equal(t.detach(), want), (only_float32, a, b, k)
            assert pts._flat is not None and {names[i] for i in pts._flat.idx} == flat_names
            buf = pts._flat.buf
            lo, hi = buf.data_ptr(), buf.data_ptr() + buf.numel() * buf.element_size()
            now = [t.data_ptr() for k, t in zip(names, pts.tensors) if k in flat_names]
            assert all(lo <= q < hi for q in now)  # slices of the one buffer
            assert ptrs is None or now == ptrs  # written again, not replaced
            ptrs = now
        with pts.materialized(0.5, 0.5):
            assert torch.equal(pts.tensors[0].detach(), point_value(centre[0], v[0], w[0], 0.5, 0.5))
        assert torch.equal(pts.tensors[0].detach(), point_value(centre[0], v[0], w[0], 0.5, 0.5))
        pts.release()
        assert pts._flat is None
        for c, t in zip(centre, pts.tensors):
            assert torch.equal(t.detach(), c)
    # the same landscape with the vector and with every tensor formed one by one
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    data = (torch.randn(20, 6), torch.randint(0, 3, (20,)))
    runs = []
    for limit in (points_module.FLAT_BYTES, 0):
        monkeypatch.setattr(points_module, "FLAT_BYTES", limit)
        runs.append(landscape.compute_landscape(mlp, nn.CrossEntropyLoss(), data, size=5, num_samples=None,
                                                plan={"points_per_call": 1}).z)
    np.testing.assert_array_equal(runs[0], runs[1])


def test_small_networks_hold_the_whole_point_with_the_same_bits(monkeypatch):
    """A network of at most SMALL_NETWORK_BYTES holds a whole point at once ("in place"); the values are those
    of the tensors formed as each layer reads them, bit for bit (a CNN whose convolutions and batch norms run
    fused, and GPT-2's tied embedding read twice per forward)."""
    from tests.landscape.engine.test_folded import ResidualCNN
    from tests.landscape.engine.test_fuse import _randomise_statistics

    torch.manual_seed(0)
    cnn = _randomise_statistics(ResidualCNN(), 1)
    x, y = torch.randn(12, 3, 8, 8), torch.randint(0, 5, (12,))
    gpt2, batch = _tiny_gpt2()
    cases = [(cnn, nn.CrossEntropyLoss(), (x, y), None), (gpt2, None, [batch], HuggingFace())]
    small = points_module.SMALL_NETWORK_BYTES
    for net, loss_fn, data, task in cases:
        runs, forms = [], []
        for limit in (small, 0):
            monkeypatch.setattr(points_module, "SMALL_NETWORK_BYTES", limit)
            runs.append(landscape.compute_landscape(net, loss_fn, data, task=task, size=4, num_samples=None, seed=3,
                                                    plan={"points_per_call": 1}).z)
            names, _ = moved_names(net, None)
            spec = EngineSpec(net, task or Supervised(loss_fn), {}, Samples([data[0] if task else data], [12]),
                              names, {k: t.detach() for k, t in net.state_dict().items()}, [], [],
                              recipe=SeededDirections(3, "filter", "normalize", tuple(names)))
            forms.append(Engine(spec).points.form)
        assert forms == ["in place", None]
        np.testing.assert_array_equal(runs[0], runs[1])
        assert np.isfinite(runs[0]).all()


def test_point_value_is_the_centre_at_the_origin_and_rounds_once():
    c = torch.randn(1000).to(torch.bfloat16)
    v, w = torch.randn(1000), torch.randn(1000)
    from landscape.engine import point_value

    assert point_value(c, v, w, 0.0, 0.0) is c
    got = point_value(c, v, w, 0.3, -0.7)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, torch.add(torch.add(c.float(), w, alpha=-0.7), v, alpha=0.3).to(torch.bfloat16))
    assert math.isclose(float(point_value(torch.tensor([-1.0]), None, torch.tensor([2.0]), 0, 1.0, clamp=True)), 1.0)



class _Calls(list):
    """Batch sizes of the forwards, shared by the network's copies (the engine runs a copy of the modules)."""

    def __deepcopy__(self, memo: dict) -> _Calls:
        return self


class _Counted(nn.Module):
    """An MLP counting its forwards; ``unused`` adds a head the forward never runs."""

    def __init__(self, unused: bool = False) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        self.head = nn.Linear(3, 2) if unused else None
        self.calls = _Calls()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(len(x))
        return self.body(x)


@pytest.mark.usefixtures("read_by_layers")
@pytest.mark.parametrize("unused", [False, True])
def test_the_first_point_decides_how_tensors_are_read(unused):
    """Every moved tensor read through its attribute at the first point: the way is decided there, with no
    probe's forward; a tensor not read (an unused head) is probed as before, and the first point is kept."""
    torch.manual_seed(0)
    net = _Counted(unused).eval()
    x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
    names, _ = moved_names(net, None)
    centre = {k: t.detach() for k, t in net.state_dict().items()}
    recipe = SeededDirections(0, "layer", "normalize", tuple(names))
    spec = EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, Samples([(x, y)], [10]), names, centre, [], [],
                      recipe=recipe)
    pts = np.array([[0.5, -0.25], [0.0, 0.0], [-1.0, 1.0]])
    eng = Engine(spec)
    got = eng.evaluate(pts)["loss"]
    assert eng.points.form == "jit"
    # one forward per point, and the probe's two on two samples (reads watched, then the unread tensors set
    # to NaN) only when a tensor was not read
    assert net.calls == ([10, 2, 2] if unused else [10]) + [10, 10]
    probed = Engine(spec)
    probed.points.choose(probed._probe_loss)  # the way decided by the probe first, as before
    np.testing.assert_array_equal(probed.evaluate(pts)["loss"], got)
    v, w = recipe.drawn([centre[k] for k in names])
    loss_fn = nn.CrossEntropyLoss()
    want = [naive_in_place(net, names, v, w, [a], [b], lambda m: loss_fn(m(x), y))[0, 0] for a, b in pts]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("normalization", ["filter", "layer"])
def test_lean_reads_the_centres_norms_once_per_tensor_not_at_every_point(monkeypatch, normalization):
    """lean draws every tensor again at each read, but the centre does not move: its norms are computed at
    the first read of each tensor and kept, with the same bits as the fast path (which draws once)."""
    from landscape.geometry import _directions

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
    names, _ = moved_names(net, None)
    centre = {k: t.detach() for k, t in net.state_dict().items()}
    spec = EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, Samples([(x, y)], [10]), names, centre, [], [],
                      recipe=SeededDirections(0, normalization, "normalize", tuple(names)), memory="lean")
    points = np.array([[a, b] for a in (-0.5, 0.25, 1.0) for b in (-1.0, 0.5)])
    hosted = []
    real_host = _directions._host
    monkeypatch.setattr(_directions, "_host", lambda p: hosted.append(p.data_ptr()) or real_host(p))
    lean = Engine(spec).evaluate(points)["loss"]
    assert sorted(hosted) == sorted(t.data_ptr() for t in centre.values())  # once each, not six times
    fast = Engine(EngineSpec(**{**spec.__dict__, "memory": "fast"})).evaluate(points)["loss"]
    np.testing.assert_array_equal(lean, fast)
