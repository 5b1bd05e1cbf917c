"""Li et al.'s normalizations and their bias convention against a numpy transcription of
``net_plotter.normalize_direction`` / ``normalize_directions_for_weights``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from landscape.geometry._directions import normalize_directions
from landscape.geometry._state import moved_names
from tests.landscape._helpers import TinyMLP, plain_loss, seeded_draw


def li_et_al(d: np.ndarray, w: np.ndarray, norm: str, ignore: str = "") -> np.ndarray:
    """Li et al.'s code, in numpy (their loops over ``for d, w in zip(direction, weights)``
    run over the first dimension: the filters)."""
    d = d.copy()
    if d.ndim <= 1:
        return np.zeros_like(d) if ignore == "biasbn" else w.copy()   # d.fill_(0) / d.copy_(w)
    if norm == "filter":
        for f in range(d.shape[0]):
            d[f] *= np.linalg.norm(w[f]) / (np.linalg.norm(d[f]) + 1e-10)
    elif norm == "layer":
        d *= np.linalg.norm(w) / np.linalg.norm(d)
    elif norm == "weight":
        d *= w
    elif norm == "dfilter":
        for f in range(d.shape[0]):
            d[f] /= np.linalg.norm(d[f]) + 1e-10
    elif norm == "dlayer":
        d /= np.linalg.norm(d)
    return d


def _tensors():
    g = torch.Generator().manual_seed(0)
    shapes = [(6, 3, 3, 3), (6,), (4, 6), (4,), ()]   # a conv weight, biases, a linear weight, a scalar
    params = [torch.randn(s, generator=g) * 0.3 for s in shapes]
    dirs = [torch.randn(s, generator=g) for s in shapes]
    return params, dirs


@pytest.mark.parametrize("norm", ["filter", "layer", "weight", "dfilter", "dlayer"])
def test_li_biasbn_convention_matches_their_code(norm):
    params, dirs = _tensors()
    ours = normalize_directions(dirs, params, norm, biasbn="li")
    for o, d, p in zip(ours, dirs, params):
        want = li_et_al(d.double().numpy(), p.double().numpy(), norm)
        np.testing.assert_allclose(o.double().numpy(), want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("norm", ["filter", "layer", "weight", "dfilter", "dlayer", "none"])
def test_normalize_convention_treats_biases_like_any_tensor(norm):
    params, dirs = _tensors()
    ours = normalize_directions(dirs, params, norm)
    for o, d, p in zip(ours, dirs, params):
        d64, p64 = d.double().numpy(), p.double().numpy()
        if d64.ndim >= 2:  # the same formulas as Li et al. (exact quotient instead of their + 1e-10)
            want = li_et_al(d64, p64, norm) if norm != "none" else d64
        elif norm in ("filter", "dfilter") and d64.ndim == 1:  # every element its own filter
            want = np.sign(d64) * (np.abs(p64) if norm == "filter" else 1.0)
        elif norm in ("layer", "filter"):
            want = d64 * np.linalg.norm(p64) / np.linalg.norm(d64)
        elif norm in ("dlayer", "dfilter"):
            want = d64 / np.linalg.norm(d64)
        elif norm == "weight":
            want = d64 * p64
        else:
            want = d64
        np.testing.assert_allclose(o.double().numpy(), want, rtol=2e-6, atol=1e-7)


def test_filter_with_li_bias_convention_end_to_end(trained, data):
    """A Li et al. reproduction with ignore=None: their bias convention gives their values."""
    net, traj = trained
    x, y = data
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), checkpoints=[traj[-1]], dims=1,
                                     x=(-1.0, 1.0, 5), normalization="filter", biasbn="li", seed=3, num_samples=96)
    assert ls.metadata["biasbn"] == "li"
    names, _ = moved_names(net, None)
    centre = traj[-1]
    v = np.concatenate([li_et_al(seeded_draw(3, 0, n, centre[n].shape).double().numpy(),
                                 centre[n].double().numpy(), "filter").ravel() for n in names])
    c = np.concatenate([centre[n].double().numpy().ravel() for n in names])
    for j, alpha in enumerate(ls.x):
        sd = {k: t.clone() for k, t in centre.items()}
        flat, o = c + alpha * v, 0
        for n in names:
            sd[n] = torch.from_numpy(flat[o:o + centre[n].numel()].reshape(tuple(centre[n].shape))).float()
            o += centre[n].numel()
        want = plain_loss(TinyMLP(), sd, [(x, y)], 96)
        assert math.isclose(ls.z[j], want, rel_tol=1e-5, abs_tol=1e-7), (j, ls.z[j], want)
    ours = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), checkpoints=[traj[-1]], dims=1,
                                       x=(-1.0, 1.0, 5), normalization="filter", seed=3, num_samples=96)
    assert not np.allclose(ours.z, ls.z)  # the convention matters: +-|b| is not b


def _small_cnn_centre() -> tuple[list[str], list[torch.Tensor]]:
    """A small CNN's moved tensors (convolution, batch norm, linear): their names and the centre's tensors."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8 * 36, 5))
    names, _ = moved_names(net, None)
    params = dict(net.named_parameters())
    return names, [params[n].detach() for n in names]


@pytest.mark.parametrize("norm,biasbn", [("filter", "normalize"), ("layer", "li"), ("weight", "normalize")])
def test_directions_drawn_on_threads_are_the_documented_draw(monkeypatch, norm, biasbn):
    """A large network's directions are drawn on several threads: each tensor is still its own seeded draw,
    normalized as documented (the same bits as drawing them one by one in this thread)."""
    from landscape.geometry import _directions

    names, centre = _small_cnn_centre()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    monkeypatch.setattr(_directions, "THREADED_DRAW", 0)  # threads whatever the size
    recipe = _directions.SeededDirections(7, norm, biasbn, tuple(names))
    threaded = recipe.draw(centre, 1)
    for name, c, got in zip(names, centre, threaded):
        if biasbn == "li" and c.dim() <= 1:
            want = c.clone()
        else:
            want = normalize_directions([seeded_draw(7, 1, name, tuple(c.shape))], [c], norm, biasbn)[0]
        assert torch.equal(got, want), name


@pytest.mark.parametrize("threaded, finished", [(False, False), (True, False), (True, True)])
def test_both_axes_drawn_in_windows_are_the_documented_draw(monkeypatch, threaded, finished):
    """Both axes drawn together, a window of draws at a time (on threads or not): each tensor of each axis
    is its own seeded draw normalized as documented, and each centre tensor's norms are computed once. With
    a ``finish`` (a copy), at most twice as many raw draws as threads are held at a time."""
    from landscape.geometry import _directions

    names, centre = _small_cnn_centre()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(_directions, "THREADED_DRAW", 0 if threaded else 1 << 40)
    monkeypatch.setattr(_directions, "WINDOW", 1 << 40 if finished else 500)  # windows by count, or several
    jobs = [(k, i) for i in range(len(centre)) for k in (0, 1)]
    assert finished or len(_directions._windows(jobs, [c.numel() for c in centre], None)) > 1
    normed: list[int] = []
    norm64, draw_buffer = _directions._norm64, _directions._draw_buffer
    monkeypatch.setattr(_directions, "_norm64", lambda t, **kw: (normed.append(t.data_ptr()), norm64(t, **kw))[1])
    held = [0, 0]  # raw draws not finished yet, and the most at a time

    def counted(*args):
        held[0] += 1
        held[1] = max(held)
        return draw_buffer(*args)

    def finish(t, c):
        held[0] -= 1
        return t.clone()

    monkeypatch.setattr(_directions, "_draw_buffer", counted)
    recipe = _directions.SeededDirections(7, "filter", "normalize", tuple(names))
    v, w = recipe.draw_axes(centre, finish=finish if finished else None)
    assert all(normed.count(c.data_ptr()) == 1 for c in centre)  # the centre's norms: once for both axes
    if finished:
        assert held == [0, 4]
    for axis, got in ((0, v), (1, w)):
        for name, c, t in zip(names, centre, got):
            want = normalize_directions([seeded_draw(7, axis, name, tuple(c.shape))], [c], "filter")[0]
            assert torch.equal(t, want), (axis, name)


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("finished", [False, True])
def test_a_tensor_of_several_blocks_is_the_documented_block_draw(monkeypatch, threaded, finished):
    """A tensor larger than a block is drawn block by block (each block its own seeded generator), on
    threads or not, held or finished into a copy, and drawn alone at a read (``tensor``): the documented
    block draw, normalized as documented; a tensor of one block is the per-tensor draw."""
    from landscape.geometry import _directions

    names, centre = _small_cnn_centre()  # 216, 8, 8 and 1440 + 5 elements
    monkeypatch.setattr(_directions, "BLOCK", 100)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    monkeypatch.setattr(_directions, "THREADED_DRAW", 0 if threaded else 1 << 40)
    recipe = _directions.SeededDirections(5, "layer", "normalize", tuple(names))
    v, w = recipe.draw_axes(centre, finish=(lambda t, c: t.clone()) if finished else None)
    for axis, got in ((0, v), (1, w)):
        for i, (name, c, t) in enumerate(zip(names, centre, got)):
            raw = seeded_draw(5, axis, name, tuple(c.shape), block=100)
            want = normalize_directions([raw], [c], "layer")[0]
            assert torch.equal(t, want), (axis, name)
            assert torch.equal(recipe.tensor(i, axis, c), want), (axis, name)
            with torch.inference_mode():  # how lean's engine reads it, the blocks on threads
                assert torch.equal(recipe.tensor(i, axis, c), want), (axis, name)
                both = recipe.tensors(i, (0, 1, 2), c)  # both axes together; a third is zero
                assert torch.equal(both[axis], want) and both[2] is None, (axis, name)
    assert not torch.equal(seeded_draw(5, 0, names[0], (216,), block=100),
                           seeded_draw(5, 0, names[0], (216,), per_tensor=True))


def test_the_block_draw_of_a_large_tensor_is_the_documented_one():
    """At the real block size (1,048,576 elements): a tensor of two blocks and a bit, drawn whole or alone,
    is the documented block draw; its first block is what one generator draws first."""
    from landscape.geometry._directions import BLOCK, SeededDirections

    assert BLOCK == 1 << 20
    shape = (2 * BLOCK // 1024 + 3, 1024)
    centre = torch.ones(shape)
    recipe = SeededDirections(11, "none", "normalize", ("big.weight",))
    want = seeded_draw(11, 1, "big.weight", shape)
    assert torch.equal(recipe.draw(centre=[centre], axis=1)[0], want)
    assert torch.equal(recipe.tensor(0, 1, centre), want)
    assert recipe.metadata()["direction_draw"] == "per-block"
    whole = seeded_draw(11, 1, "big.weight", shape, per_tensor=True)
    assert torch.equal(want.reshape(-1)[:BLOCK], whole.reshape(-1)[:BLOCK])
    assert not torch.equal(want, whole)


def test_a_per_tensor_recipe_draws_each_tensor_from_one_generator(monkeypatch):
    """``direction_draw="per-tensor"`` (landscapes written before the blocks): every tensor from one
    generator whatever its size, threaded or not; an unknown draw is refused, naming the accepted ones."""
    from landscape.geometry import _directions

    names, centre = _small_cnn_centre()
    monkeypatch.setattr(_directions, "BLOCK", 100)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(_directions, "THREADED_DRAW", 0)
    recipe = _directions.SeededDirections(5, "filter", "normalize", tuple(names), 2, "per-tensor")
    assert recipe.metadata()["direction_draw"] == "per-tensor"
    for name, c, t in zip(names, centre, recipe.draw(centre, 0)):
        want = normalize_directions([seeded_draw(5, 0, name, tuple(c.shape), per_tensor=True)], [c], "filter")[0]
        assert torch.equal(t, want), name
    with pytest.raises(ValueError, match=r"direction_draw must be one of \('per-block', 'per-tensor'\), got 'x'"):
        _directions.SeededDirections(5, "filter", "normalize", tuple(names), 2, "x")


@pytest.mark.parametrize("normalization", ["filter", "layer", "weight"])
@pytest.mark.parametrize("biasbn", ["normalize", "li"])
def test_a_draw_against_an_engines_channels_last_copy_reads_the_originals_it_was_copied_from(
        monkeypatch, normalization, biasbn):
    """An engine lays its copy's kernels out channels-last and draws against it with the tensors it copied
    (``key``): the directions are those drawn against the originals, bit for bit, and the norms are read from
    the originals, so no contiguous copy of the engine's kernels is made for them."""
    from landscape.geometry import SeededDirections
    from landscape.geometry import _directions as geometry_directions

    g = torch.Generator().manual_seed(0)
    names = ("conv.weight", "conv.bias", "fc.weight")
    originals = [torch.randn(8, 3, 3, 3, generator=g), torch.randn(8, generator=g), torch.randn(5, 12, generator=g)]
    copies = [t.clone(memory_format=torch.channels_last) if t.dim() == 4 else t.clone() for t in originals]
    recipe = SeededDirections(4, normalization, biasbn, names)
    want = recipe.draw_axes(originals)
    hosted = []
    real_host = geometry_directions._host
    monkeypatch.setattr(geometry_directions, "_host", lambda p: hosted.append(p) or real_host(p))
    got = recipe.draw_axes(copies, key=originals)
    assert all(torch.equal(a, b) for axis in (0, 1) for a, b in zip(got[axis], want[axis]))
    assert hosted and not any(p.data_ptr() == c.data_ptr() for p in hosted for c in copies)  # never the copies
    # a key of other dtypes or shapes is not read: the copy is (the same values, by its own contiguous copy)
    halves = [t.double() for t in originals]
    assert all(torch.equal(a, b) for a, b in zip(recipe.draw_axes(copies, key=halves)[0], want[0]))
