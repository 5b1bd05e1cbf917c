"""n-D grids (``dims=3`` and more): the values against a plain loop and the random plane, Hessian
directions against a dense eigendecomposition, resume, the files, and refusals before any work."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape import SummaryLandscape, compute_landscape, read_h5
from landscape.engine import _planner
from landscape.engine._engine import Engine
from tests.landscape import _gen_task
from tests.landscape._helpers import TinyMLP, make_data, plain_loss, seeded_draw


def _net() -> nn.Module:
    torch.manual_seed(0)
    return TinyMLP()


def _loader(x, y):
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=96)


def test_random_grid_holds_the_random_plane_and_equals_a_plain_loop():
    net, (x, y) = _net(), make_data()
    grid = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, size=5, normalization="none")
    assert grid.z.shape == (5, 5, 5) and grid.dims == 3 and len(grid.extra_axes) == 1
    np.testing.assert_array_equal(grid.extra_axes[0], np.linspace(-1, 1, 5))
    plane = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=2, size=5, normalization="none")
    np.testing.assert_array_equal(grid.z[2], plane.z)  # the middle plane (third axis at 0), bit for bit
    # the documented draw (axis k of the seed), normalization "none": centre + a v + b w + c u by a plain loop
    names = [n for n, _ in net.named_parameters()]
    centre = {k: t.detach().clone() for k, t in net.state_dict().items()}
    dirs = [{n: seeded_draw(0, k, n, tuple(centre[n].shape)) for n in names} for k in range(3)]
    for (k, i, j) in [(0, 0, 0), (4, 1, 3), (1, 4, 2), (3, 2, 0)]:
        a, b, c = grid.x[j], grid.y[i], grid.extra_axes[0][k]
        state = {n: (t.float() + a * dirs[0][n] + b * dirs[1][n] + c * dirs[2][n]) if n in names else t
                 for n, t in centre.items()}
        assert grid.z[k, i, j] == pytest.approx(plain_loss(TinyMLP(), state, _loader(x, y), 96), rel=1e-5)
    assert grid.convergence_point[2] == grid.z[2, 2, 2]  # the centre, a grid point


def test_a_grid_gives_back_every_axis_direction(tmp_path):
    """``directions()`` of a 3-D random grid: three dicts, in memory and from landscapes.h5, the third the
    documented draw of axis 2 (normalization "none"), each checked against its digest."""
    from landscape import write_h5

    net, (x, y) = _net(), make_data()
    grid = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, size=3, normalization="none")
    write_h5(tmp_path / "grid.h5", [grid])
    back = next(iter(read_h5(tmp_path / "grid.h5").values()))
    names = [n for n, _ in net.named_parameters()]
    for got in (grid.directions(), back.directions()):
        assert len(got) == 3
        for k, d in enumerate(got):
            assert list(d) == names
            for n in names:
                assert torch.equal(d[n], seeded_draw(0, k, n, tuple(d[n].shape))), (k, n)
    with h5py.File(tmp_path / "grid.h5", "r+") as f:  # a later direction changed in the file: refused
        group = next(g for g in f.values() if isinstance(g, h5py.Group) and "directions" in g)
        group["directions"]["u3"][names[0]][0, 0] += 1.0
    with pytest.raises(ValueError, match="direction u3 .* does not have the SHA-256"):
        next(iter(read_h5(tmp_path / "grid.h5").values())).directions()


def test_hessian_grid_along_the_top_eigenvectors():
    net, (x, y) = _net(), make_data()
    grid = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, size=3, directions="hessian",
                             normalization="none")
    # the dense Hessian of the same loss (eval mode, every sample) over the moved parameters
    names = [n for n, _ in net.named_parameters()]
    params = {n: p.detach().clone() for n, p in net.named_parameters()}
    flat = torch.cat([params[n].reshape(-1) for n in names]).double()
    shapes = [params[n].shape for n in names]
    model = TinyMLP().double().eval()
    model.load_state_dict({k: t.double() for k, t in net.state_dict().items()})

    def loss(vec):
        out, o = {}, 0
        for n, s in zip(names, shapes):
            k = int(np.prod(s))
            out[n] = vec[o:o + k].reshape(s)
            o += k
        return nn.functional.cross_entropy(torch.func.functional_call(model, out, (x.double(),)), y)

    hess = torch.autograd.functional.hessian(loss, flat, vectorize=True)
    vals, vecs = torch.linalg.eigh(hess)
    top = vals.flip(0)[:3].numpy()
    np.testing.assert_allclose(grid.metadata["hessian_eigenvalues"], top, rtol=1e-3)
    rec = grid.directions_source.record()
    assert rec.more is not None and len(rec.more) == 1 and rec.points.shape == (27, 3)
    for k, arrays in enumerate([rec.v, rec.w, rec.more[0]]):
        got = np.concatenate([arrays[n].reshape(-1) for n in names])
        want = vecs[:, -1 - k].numpy()
        assert abs(float(got @ want)) == pytest.approx(1.0, abs=1e-3)  # the k-th eigenvector, up to its sign
    centre = {k: t.detach().clone() for k, t in net.state_dict().items()}
    d = [{n: torch.from_numpy(a[n]) for n in names} for a in (rec.v, rec.w, rec.more[0])]
    for (k, i, j) in [(0, 0, 0), (2, 1, 2), (1, 2, 1)]:
        a, b, c = grid.x[j], grid.y[i], grid.extra_axes[0][k]
        state = {n: (t.float() + a * d[0][n] + b * d[1][n] + c * d[2][n]) if n in names else t
                 for n, t in centre.items()}
        assert grid.z[k, i, j] == pytest.approx(plain_loss(TinyMLP(), state, _loader(x, y), 96), rel=1e-5)


def test_four_directions_and_the_files(tmp_path):
    net, (x, y) = _net(), make_data()
    grid = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=4, size=3, tag="grid4")
    assert grid.z.shape == (3, 3, 3, 3) and grid.metadata["dims"] == 4
    from landscape import write_h5

    write_h5(tmp_path / "landscapes.h5", [grid])
    back = read_h5(tmp_path / "landscapes.h5")["grid4"]
    np.testing.assert_array_equal(back.z, grid.z)
    assert [a.tolist() for a in back.extra_axes] == [[-1.0, 0.0, 1.0]] * 2
    assert back.topology().summary() == grid.topology().summary()
    with pytest.raises(ValueError, match="grid of 4 directions; MindSpore's LossLandscape message"):
        grid.to_proto()
    rec = back.directions_source.record()
    assert len(rec.more) == 2 and {"digest_u3", "digest_u4"} <= set(rec.info)
    # 4 points per axis hold no 0: the centre is one more point, after the grid, evaluated alone
    even = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, size=4)
    assert even.z.shape == (4, 4, 4) and even.directions_source.record().points.shape == (65, 3)
    assert even.convergence_point == (0.0, 0.0, pytest.approx(plain_loss(TinyMLP(), net.state_dict(),
                                                                         _loader(x, y), 96), rel=1e-6))


def _done(h5, tag):
    import h5py

    with h5py.File(h5, "r", locking=False) as fh:
        g = fh.get("_in_progress", {}).get(tag)
        return None if g is None else int(g["done"][()].sum())


def test_interrupted_grid_resumes_to_the_same_bits(summary_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(_planner, "CALL_BYTES", 0)  # one point per call: many chunks
    # however long the flush period, an interruption writes the points evaluated so far
    monkeypatch.setenv("LANDSCAPE_FLUSH_SECONDS", "1000")
    kwargs = dict(view="grid", dims=3, directions="random", collect_landscape={"landscape_size": 3})
    tag = "random_3d_[6]"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, output=tmp_path / "ref",
                                                                    **kwargs)
    reference = read_h5(tmp_path / "ref" / "landscapes.h5")[tag]
    assert reference.z.shape == (3, 3, 3)
    assert not [f for f in os.listdir(tmp_path / "ref") if "summary" in f]  # an n-D grid: landscapes.h5 only
    calls = []
    original = Engine.evaluate

    def dying(self, pts, start=0, **kw):
        calls.append(len(pts))
        if len(calls) == 14:
            raise KeyboardInterrupt  # Ctrl-C in the second plane
        return original(self, pts, start, **kw)

    monkeypatch.setattr(Engine, "evaluate", dying)
    out = tmp_path / "out"
    sl = SummaryLandscape(summary_dir)
    with pytest.raises(KeyboardInterrupt):
        sl.gen_landscapes_with_multi_process(_gen_task.task, output=out, **kwargs)
    assert _done(out / "landscapes.h5", tag) == 13
    monkeypatch.setattr(Engine, "evaluate", original)
    sl.gen_landscapes_with_multi_process(_gen_task.task, output=out, **kwargs)
    assert sl.last_stats[tag] == {"evaluated": 27 - 13, "points": 27}
    np.testing.assert_array_equal(read_h5(out / "landscapes.h5")[tag].z, reference.z)


@pytest.mark.parametrize("kwargs, name", [
    ({"dims": 7}, "dims"),
    ({"dims": 0}, "dims"),
    ({"dims": 3, "directions": "pca"}, "checkpoints"),
    ({"dims": 3, "directions": "target"}, "dims"),
    ({"dims": 3, "directions": ({}, {})}, "dims"),
    ({"dims": 3, "memory": "lean"}, "memory"),
    ({"dims": 3, "size": 2}, "size"),
])
def test_bad_grids_refused_before_any_work(kwargs, name, monkeypatch):
    def no_work(*args, **kw):
        raise AssertionError("evaluated a point")

    monkeypatch.setattr(Engine, "evaluate", no_work)
    net, (x, y) = _net(), make_data()
    with pytest.raises(InvalidParameterError, match=f"'{name}'"):
        compute_landscape(net, nn.CrossEntropyLoss(), (x, y), **kwargs)
    with pytest.raises(InvalidParameterError, match="'dims'"):
        compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, between=(net, net))


@pytest.mark.parametrize("kwargs, name", [
    ({"view": "grid", "dims": 9}, "dims"),
    ({"view": "line", "dims": 3}, "directions' and 'dims"),
    ({"view": "grid", "directions": "given"}, "directions"),
    ({"view": "grid", "between": [1, 6]}, "between"),
    ({"view": "grid", "memory": "lean"}, "memory"),
])
def test_bad_grid_views_refused_before_any_file(summary_dir, tmp_path, kwargs, name):
    out = tmp_path / "out"
    with pytest.raises(InvalidParameterError, match=f"'{name}'"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(_gen_task.task, output=out, **kwargs)
    assert not out.exists()


@pytest.mark.parametrize("kwargs, count, hint", [
    ({"dims": 6, "size": 41, "directions": "hessian"}, "dims=6 and size=41 holds 4,750,104,241", "fewer points per axis: size=16 gives 16,777,216"),
    ({"dims": 3, "x": (-1, 1, 300), "y": (-1, 1, 300), "size": 200}, "holds 18,000,000",
     "fewer points per axis: size=186 gives 16,740,000"),
    ({"x": (-1, 1, 5000), "y": (-1, 1, 5000)}, "holds 25,000,000", "fewer points along x and y"),
])
def test_a_grid_of_too_many_points_is_refused_before_anything_runs(kwargs, count, hint, monkeypatch):
    """More than 2**24 points: refused naming dims, size, the count, the bound and the way out, before the
    directions (Hessian) are computed or the data read (spies)."""
    from landscape.generate import _build

    ran = []
    monkeypatch.setattr(_build, "hessian_axes", lambda *a, **k: ran.append("hessian"))
    monkeypatch.setattr(_build, "view_geometry", lambda *a, **k: ran.append("directions"))

    def data():
        ran.append("data")
        yield make_data()

    with pytest.raises(InvalidParameterError, match=count + r" points, more than the 16,777,216 \(2\*\*24\).*HINT: "
                       + hint):
        compute_landscape(_net(), nn.CrossEntropyLoss(), data(), **kwargs)
    assert ran == []


def test_a_grid_view_of_too_many_points_is_refused_before_any_file(summary_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(InvalidParameterError, match=r"dims=6 and size=41 holds 4,750,104,241 points"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
            _gen_task.task, output=out, view="grid", dims=6, collect_landscape={"landscape_size": 41})
    assert not out.exists()


def test_grid_through_worker_processes_is_the_same():
    """Each plane of the grid goes to the workers with its own moved centre: the same values."""
    net, (x, y) = _net(), make_data()
    here = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, size=3, plan={"points_per_call": 1})
    workers = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, size=3, device_ids=[0, 1],
                                plan={"points_per_call": 1})
    np.testing.assert_array_equal(here.z, workers.z)


def test_pca_grid_along_the_top_principal_directions():
    from tests.landscape._helpers import train_trajectory

    net, (x, y) = _net(), make_data()
    traj = train_trajectory(net, x, y)
    kw = dict(checkpoints=traj, directions="pca", pca_method="li", normalization="none", size=3)
    grid = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), dims=3, **kw)
    plane = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), **kw)
    names = [n for n, _ in net.named_parameters()]
    rec, prec = grid.directions_source.record(), plane.directions_source.record()
    dirs = [np.concatenate([a[n].reshape(-1) for n in names]) for a in (rec.v, rec.w, rec.more[0])]
    for k, axis in enumerate((prec.v, prec.w)):  # the plane's two, bit for bit
        np.testing.assert_array_equal(dirs[k], np.concatenate([axis[n].reshape(-1) for n in names]))
    # Li et al.'s PCA by numpy: the top right singular vectors of the differences from the last, centred
    flat = np.stack([np.concatenate([sd[n].reshape(-1).numpy() for n in names]) for sd in traj]).astype(np.float64)
    diffs = flat[:-1] - flat[-1]
    _, sv, vt = np.linalg.svd(diffs - diffs.mean(axis=0), full_matrices=False)
    for k in range(3):
        assert abs(float(dirs[k] @ vt[k])) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(grid.metadata["explained_variance_ratio"], (sv ** 2 / (sv ** 2).sum())[:3],
                               rtol=1e-6)
    # the path's coordinates: least squares on the three directions
    basis = np.stack(dirs, axis=1).astype(np.float64)
    want = np.linalg.lstsq(basis, np.vstack([diffs, np.zeros(flat.shape[1])]).T, rcond=None)[0].T
    np.testing.assert_allclose(grid.metadata["path_coordinates"], want, atol=1e-5)
    with pytest.raises(InvalidParameterError, match="at least 5 checkpoints for directions='pca' with dims=4"):
        compute_landscape(net, nn.CrossEntropyLoss(), (x, y), checkpoints=traj[:4], directions="pca", dims=4)


def test_pca_grid_of_a_run(summary_dir, tmp_path):
    sl = SummaryLandscape(summary_dir)
    got = sl.gen_landscapes_with_multi_process(_gen_task.task, output=tmp_path / "out", view="grid", dims=3,
                                               directions="pca", collect_landscape={"landscape_size": 3})
    assert [ls.tag for ls in got] == ["pca_3d_[6]"] and got[0].z.shape == (3, 3, 3)
    assert got[0].metadata["checkpoint_steps"] == [1, 2, 3, 4, 5, 6]  # every collected checkpoint, the last last
    assert len(got[0].metadata["path_coordinates"]) == 6 and got[0].metadata["path_coordinates"][-1] == [0, 0, 0]
    stored = read_h5(tmp_path / "out" / "landscapes.h5")["pca_3d_[6]"]
    np.testing.assert_array_equal(stored.z, got[0].z)
