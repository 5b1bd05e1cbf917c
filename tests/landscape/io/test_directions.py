"""A landscape reloaded from landscapes.h5 gives its directions back, and a grid point recomputed
from them by a plain PyTorch loop (the centre plus a*v + b*w loaded into the network, a forward on
the same samples) is the stored value: PCA, random and given directions."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector.common import InvalidParameterError
from landscape import SummaryLandscape, read_h5, write_h5
from landscape.geometry import _directions as geometry_directions
from tests.landscape._helpers import TinyMLP, make_data, plain_loss, point_state, seeded_draw, tiny_callback

H5 = "landscapes.h5"


def _loader():
    x, y = make_data()  # tiny_callback's data, in its batches
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)


def _recomputed(ls, centre, v, w, i, j):
    names = ls.metadata["moved_parameters"]
    a, b = ls.x[j], (ls.y[i] if ls.dims == 2 else 0.0)
    state = point_state(centre, names, v, w if w is not None else {n: torch.zeros_like(v[n]) for n in names}, a, b)
    return plain_loss(TinyMLP(), state, _loader(), int(ls.metadata["num_samples"]))


def _assert_point(ls, centre, v, w, i=1, j=2):
    got = ls.z[i, j] if ls.dims == 2 else ls.z[j]
    want = _recomputed(ls, centre, v, w, i, j)
    assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-7), (ls.tag, got, want)


@pytest.fixture
def generated(summary_dir, tmp_path):
    """landscape gen's PCA and Random landscapes of the fixture's run, reloaded from landscapes.h5."""
    out = tmp_path / "out"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(tiny_callback, output=out)
    return summary_dir, read_h5(out / H5), out / H5


def test_pca_directions_come_back_and_recompute_a_grid_point(generated, trained):
    summary_dir, stored, _ = generated
    _, traj = trained
    pca = [ls for ls in stored.values() if ls.metadata["decomposition"] == "PCA"]
    assert len(pca) == 2
    for ls in pca:
        v, w = ls.directions()
        names = ls.metadata["moved_parameters"]
        assert list(v) == names and list(w) == names
        assert all(v[n].dtype == torch.float32 and v[n].shape == traj[0][n].shape for n in names)
        centre = traj[ls.metadata["checkpoint_steps"][-1] - 1]  # the interval's last checkpoint
        _assert_point(ls, centre, v, w)
        _assert_point(ls, centre, v, w, i=0, j=3)


def test_random_directions_are_redrawn_against_the_centre_and_recompute_a_grid_point(generated, trained):
    summary_dir, stored, _ = generated
    _, traj = trained
    (ls,) = [ls for ls in stored.values() if ls.metadata["decomposition"] == "Random"]
    with pytest.raises(InvalidParameterError, match="'centre' parameter of Landscape.directions is required"):
        ls.directions()
    ckpt = summary_dir / "ckpt_dir" / "TinyMLP_6_epoch.pt"
    v, w = ls.directions(centre=ckpt)
    names = ls.metadata["moved_parameters"]
    # the documented draw, normalized by the layer's norm, computed here with numpy
    n = "fc1.weight"
    d = seeded_draw(0, 0, n, tuple(traj[-1][n].shape)).double().numpy()
    p = traj[-1][n].double().numpy()
    np.testing.assert_allclose(v[n].numpy(), d * np.linalg.norm(p) / np.linalg.norm(d), rtol=1e-6)
    _assert_point(ls, traj[-1], v, w)
    # a network or a state dict as the centre gives the same bits
    net = TinyMLP()
    net.load_state_dict(traj[-1])
    v2, w2 = ls.directions(centre=net)
    assert all(torch.equal(v[k], v2[k]) and torch.equal(w[k], w2[k]) for k in names)
    with pytest.raises(InvalidParameterError, match="must be the weights 'landscape_\\[6\\]' is centred on"):
        ls.directions(centre=traj[0])


def test_a_torch_that_draws_other_numbers_is_detected(generated, trained, monkeypatch):
    _, stored, _ = generated
    _, traj = trained
    (ls,) = [ls for ls in stored.values() if ls.metadata["decomposition"] == "Random"]
    fill = geometry_directions._fill_block

    def other_generator(out, *args):  # as if torch's generator gave other numbers
        fill(out, *args)
        out.add_(1e-3)

    monkeypatch.setattr(geometry_directions, "_fill_block", other_generator)
    with pytest.raises(ValueError, match=r"this torch \(.*\) draws other standard normals than torch"):
        ls.directions(centre=traj[-1])


def test_given_directions_round_trip_through_a_file(trained, data, tmp_path):
    net, traj = trained
    x, y = data
    names = [n for n, _ in net.named_parameters()]
    g = torch.Generator().manual_seed(1)
    given = [{n: 0.1 * torch.randn(traj[-1][n].shape, generator=g) for n in names} for _ in range(2)]
    net.load_state_dict(traj[-1])
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x[:32], y[:32])], directions=tuple(given),
                                     size=4, num_samples=32)
    write_h5(tmp_path / "given.h5", [ls])
    (back,) = read_h5(tmp_path / "given.h5").values()
    v, w = back.directions()
    assert all(torch.equal(v[n], given[0][n]) and torch.equal(w[n], given[1][n]) for n in names)
    loss = plain_loss(TinyMLP(), point_state(traj[-1], names, v, w, back.x[3], back.y[0]), [(x[:32], y[:32])], 32)
    assert math.isclose(back.z[0, 3], loss, rel_tol=1e-5, abs_tol=1e-7)
    # a plane reused: the directions given again give the same landscape, bit for bit
    again = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x[:32], y[:32])], directions=(v, w),
                                        size=4, num_samples=32)
    np.testing.assert_array_equal(again.z, back.z)
    # damaged bytes are refused, not returned
    with h5py.File(tmp_path / "given.h5", "r+") as fh:
        fh[f"{back.tag or 'landscape'}/directions/v/fc1.weight"][0, 0] += 1.0
    with pytest.raises(ValueError, match="does not have the SHA-256 recorded with it"):
        back.directions()


def test_directions_over_the_size_limit_keep_their_digests_only(trained, data, tmp_path, monkeypatch):
    net, traj = trained
    x, y = data
    monkeypatch.setenv("LANDSCAPE_DIRECTIONS_MAX_BYTES", "100")
    net.load_state_dict(traj[-1])
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), checkpoints=traj, directions="pca",
                                     size=3, num_samples=32, tag="pca")
    write_h5(tmp_path / "big.h5", [ls])
    with h5py.File(tmp_path / "big.h5", "r") as fh:
        d = fh["pca/directions"]
        assert "v" not in d and len(d.attrs["digest_v"]) == 64 and not d.attrs["stored"]
    with pytest.raises(ValueError, match="over the limit of 100 .*LANDSCAPE_DIRECTIONS_MAX_BYTES"):
        read_h5(tmp_path / "big.h5")["pca"].directions()


def test_a_line_has_no_second_direction_and_old_files_none_at_all(trained, data, tmp_path):
    net, traj = trained
    x, y = data
    net.load_state_dict(traj[-1])
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), between=(traj[0], traj[-1]), size=5,
                                     num_samples=32, tag="ab")
    write_h5(tmp_path / "line.h5", [ls])
    back = read_h5(tmp_path / "line.h5")["ab"]
    v, w = back.directions()
    names = back.metadata["moved_parameters"]
    # an interpolation: v = A, w = B around a centre of zeros, the point of alpha at (1 - alpha, alpha)
    assert w is not None and all(torch.equal(v[n], traj[0][n].float()) for n in names)
    with h5py.File(tmp_path / "line.h5", "r+") as fh:
        points = fh["ab/directions/points"][()]
        np.testing.assert_array_equal(points[:5], np.stack([1 - back.x, back.x], axis=1))
        del fh["ab/directions"]  # as written before directions were kept
    with pytest.raises(ValueError, match="holds no directions"):
        read_h5(tmp_path / "line.h5")["ab"].directions()
    line = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=1, size=5, num_samples=32)
    assert line.directions(centre=traj[-1])[1] is None


@pytest.mark.parametrize("biasbn", ["normalize", "li"])
def test_recipe_digests_are_those_of_the_directions_drawn_whole_or_a_tensor_at_a_time(trained, monkeypatch, biasbn):
    """A small network's digests draw the directions whole (two calls); a large one's a tensor at a
    time: the same SHA-256 either way, that of the tensors SeededDirections gives one by one."""
    import hashlib

    from landscape.geometry import SeededDirections
    from landscape.io import _directions as io_directions
    from landscape.io._fingerprint import hash_tensor, tensor_digest

    _, traj = trained
    names = tuple(n for n, t in traj[-1].items() if t.is_floating_point())
    centre = [traj[-1][n] for n in names]
    recipe = SeededDirections(3, "filter", biasbn, names)
    want_v = tensor_digest(*(recipe.tensor(i, 0, c) for i, c in enumerate(centre)))
    want_w = tensor_digest(*(recipe.tensor(i, 1, c) for i, c in enumerate(centre)))
    draw = hashlib.sha256()
    for i, (n, c) in enumerate(zip(names, centre)):
        if biasbn == "li" and c.dim() <= 1:
            continue
        for axis in (0, 1):
            hash_tensor(draw, seeded_draw(3, axis, n, tuple(c.shape)))
    whole = io_directions._recipe_digests(recipe, centre)
    # within a landscape (shared_draws_kept) the engine's draw gives the digests: nothing drawn again
    draws = []
    real_draw = SeededDirections._draw
    monkeypatch.setattr(SeededDirections, "_draw", lambda self, *a, **k: draws.append(1) or real_draw(self, *a, **k))
    with io_directions.shared_draws_kept():
        recipe.draw_axes(centre)  # the engine's
        shared = io_directions._recipe_digests(recipe, centre)
    assert len(draws) == 1
    # the sequences hashed side by side on threads (as beyond _THREADED_DIGESTS): the same digests
    pools = []
    real_pool = io_directions.ThreadPoolExecutor
    monkeypatch.setattr(io_directions, "ThreadPoolExecutor", lambda *a, **k: pools.append(a) or real_pool(*a, **k))
    monkeypatch.setattr(io_directions, "_THREADED_DIGESTS", 0)
    monkeypatch.setattr(io_directions.torch, "get_num_threads", lambda: 2)
    threaded = io_directions._recipe_digests(recipe, centre)
    assert pools == [(2,)]
    monkeypatch.setattr(io_directions, "_WHOLE_DRAW", 0)
    one_by_one = io_directions._recipe_digests(recipe, centre)
    assert whole == shared == threaded == one_by_one == {
        "digest_centre": tensor_digest(*centre), "digest_v": want_v, "digest_w": want_w,
        "digest_draw": draw.hexdigest()}


def test_a_large_networks_engine_draw_gives_the_digests_and_no_draw_outlives_its_use(trained, monkeypatch):
    """Beyond SHARED_ELEMENTS only an engine's draw (``held``: it holds it anyway) is kept, and the digests
    take it with no draw of their own; any other large draw is not kept (a view's projection, then a lean
    engine, would hold it twice), and an engine whose directions are a copy (another layout) forgets a
    large draw kept before it (the planner's probe's), so no two engines' directions are held at once, and
    its copies give the digests."""
    import torch

    from landscape.geometry import SeededDirections
    from landscape.geometry import _directions as geometry_directions
    from landscape.io import _directions as io_directions

    _, traj = trained
    names = tuple(n for n, t in traj[-1].items() if t.is_floating_point())
    centre = [traj[-1][n] for n in names]
    recipe = SeededDirections(3, "filter", "normalize", names)
    want = io_directions._recipe_digests(recipe, centre)  # no sharing: drawn again for the digests
    monkeypatch.setattr(geometry_directions, "SHARED_ELEMENTS", 0)  # every network is large
    monkeypatch.setattr(io_directions, "_WHOLE_DRAW", 0)
    draws = []
    real_draw = SeededDirections._draw
    monkeypatch.setattr(SeededDirections, "_draw", lambda self, *a, **k: draws.append(1) or real_draw(self, *a, **k))
    with io_directions.shared_draws_kept():
        engine = recipe.draw_axes(centre, held=True)
        assert recipe.draw_axes(centre, held=True)[0][0] is engine[0][0]  # the next engine's: the same tensors
        assert io_directions._recipe_digests(recipe, centre) == want
        assert len(draws) == 1
        # a draw nobody holds for the landscape is not kept when large: drawn every time (a kept one is given)
        first = recipe.draw_axes(centre, (0,))
        assert recipe.draw_axes(centre, (0,))[0][0] is not first[0][0]
        assert recipe.draw_axes(centre)[0][0] is engine[0][0]
        # an engine whose directions are copies (channels-last) forgets the kept draw; its copies give the digests
        copies = recipe.draw_axes(centre, finish=lambda t, c: t.clone(memory_format=torch.channels_last)
                                  if t.dim() == 4 else t.clone(), held=True)
        assert all(torch.equal(a, b) for a, b in zip(copies[0], engine[0]))
        kept = [k for k in geometry_directions._SHARED.get() if k is not geometry_directions._RAW_HASH]
        assert len(kept) == 1 and kept[0][3]  # the copies only (finished), not the first engine's draw
        assert recipe.draw_axes(centre)[0][0] is not engine[0][0]  # drawn again: nothing to give
        before = len(draws)
        assert io_directions._recipe_digests(recipe, centre) == want and len(draws) == before
    # outside a landscape nothing is kept: a held draw with copies draws axis by axis, the same values
    assert all(torch.equal(a, b) for a, b in zip(
        recipe.draw_axes(centre, finish=lambda t, c: t.clone(), held=True)[1], engine[1]))


@pytest.mark.parametrize("kind", ["random", "given"])
def test_a_small_landscape_kept_in_memory_hashes_its_directions_when_first_asked(trained, data, kind, monkeypatch):
    """compute_landscape of a small network hashes nothing during the call; its record, made when asked
    for, is the one made at once (kept_directions without lazy), from the centre as it was at the call:
    training the network on afterwards changes neither the record nor the directions given back."""
    from landscape.io import _directions as io_directions
    from landscape.io._fingerprint import tensor_digest

    net, traj = trained
    x, y = data
    net.load_state_dict(traj[-1])
    names = [n for n, _ in net.named_parameters()]
    given = None
    if kind == "given":
        g = torch.Generator().manual_seed(1)
        given = tuple({n: 0.1 * torch.randn(traj[-1][n].shape, generator=g) for n in names} for _ in range(2))
    hashed = []
    real = io_directions.hash_tensor
    monkeypatch.setattr(io_directions, "hash_tensor", lambda h, t: hashed.append(1) or real(h, t))
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x[:32], y[:32])], directions=given, size=4,
                                     num_samples=32)
    assert not hashed
    centre = {n: traj[-1][n].clone() for n in names}
    with torch.no_grad():  # the caller trains on
        for p in net.parameters():
            p.add_(1.0)
    record = ls.directions_source.record()
    assert hashed and record.info["digest_centre"] == tensor_digest(*(centre[n] for n in names))
    part = io_directions.Partial(md={}, x=ls.x, y=ls.y, points=record.points, n_path=0, intervals=None,
                                 v=np.concatenate([given[0][n].reshape(-1).numpy() for n in names]) if given else
                                 np.zeros(0, np.float32),
                                 w=np.concatenate([given[1][n].reshape(-1).numpy() for n in names]) if given else
                                 np.zeros(0, np.float32), values={}, done=np.zeros(0, bool))
    recipe = None
    if kind == "random":
        from landscape.generate._build import _recipe
        recipe = _recipe(ls.metadata, names)
    eager = io_directions.kept_directions(part, names, centre, recipe).record()
    assert record.info == eager.info
    v, w = ls.directions(centre)
    net.load_state_dict(traj[-1])
    again = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x[:32], y[:32])], directions=(v, w), size=4,
                                        num_samples=32, normalization="none")
    if kind == "given":
        np.testing.assert_array_equal(again.z, ls.z)
        assert all(torch.equal(v[n], given[0][n]) for n in names)
    else:
        np.testing.assert_allclose(again.z, ls.z, rtol=1e-6)


def test_a_larger_landscape_kept_in_memory_hashes_its_draw_when_first_asked(trained, data, monkeypatch):
    """Above the lazy bound a landscape kept in memory makes its centre's and directions' digests in the call,
    but not the one of its draw before normalization: no draw is hashed as it is drawn, and the record, when
    asked for, is the one made at once, its digest of the draw that of the seeded standard normals."""
    import hashlib

    from landscape.generate import _build
    from landscape.geometry import SeededDirections
    from landscape.io import _directions as io_directions
    from landscape.io._fingerprint import hash_tensor

    net, traj = trained
    x, y = data
    net.load_state_dict(traj[-1])
    names = [n for n, _ in net.named_parameters()]
    monkeypatch.setattr(_build, "LAZY_DIGEST_BYTES", 0)  # every network is above the bound
    raw_hashed = []
    real_draw = SeededDirections._draw
    monkeypatch.setattr(SeededDirections, "_draw", lambda self, c, n, axes, finish, on_raw=None, **kw: raw_hashed.append(
        on_raw is not None and self.normalization != "none") or real_draw(self, c, n, axes, finish, on_raw, **kw))
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x[:32], y[:32])], size=4, num_samples=32)
    assert raw_hashed and not any(raw_hashed)
    assert ls.directions_source._record.__class__ is not io_directions.DirectionsRecord  # the draw's digest to come
    record = ls.directions_source.record()
    from landscape.generate._build import _recipe
    recipe = _recipe(ls.metadata, names)
    centre = {n: traj[-1][n] for n in names}
    part = io_directions.Partial(md={}, x=ls.x, y=ls.y, points=record.points, n_path=0, intervals=None,
                                 v=np.zeros(0, np.float32), w=np.zeros(0, np.float32), values={},
                                 done=np.zeros(0, bool))
    eager = io_directions.kept_directions(part, names, centre, recipe).record()
    assert list(record.info.items()) == list(eager.info.items())  # the same keys in the same order
    draw = hashlib.sha256()
    for n in names:
        for axis in (0, 1):
            hash_tensor(draw, seeded_draw(recipe.seed, axis, n, tuple(centre[n].shape)))
    assert record.info["digest_draw"] == draw.hexdigest()
    v, w = ls.directions(centre)  # and the directions come back against it
    assert set(v) == set(names) and w is not None
