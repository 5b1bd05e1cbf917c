"""Several runs on one plane: the PCA of all their checkpoints (a shared plane) or any other plane,
each run's path projected by least squares, its distance from the plane reported."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector.common import InvalidParameterError
from landscape.examples import MLP, digits_tensors

N = 512


@pytest.fixture(scope="module")
def runs():
    """Two runs from the same initial weights, SGD and Adam, four epochs each (start included)."""
    x, y = digits_tensors()
    x, y = x[:N], y[:N]
    torch.manual_seed(0)
    start = MLP(hidden=32)
    out = {}
    for name, make in (("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("adam", lambda p: torch.optim.Adam(p, lr=3e-3))):
        net = copy.deepcopy(start)
        opt = make(net.parameters())
        ckpts = [{k: v.clone() for k, v in net.state_dict().items()}]
        for _ in range(4):
            for i in range(0, N, 64):
                opt.zero_grad()
                nn.functional.cross_entropy(net(x[i:i + 64]), y[i:i + 64]).backward()
                opt.step()
            ckpts.append({k: v.clone() for k, v in net.state_dict().items()})
        out[name] = ckpts
    return start, out, (x, y)


def _flat(sd, names):
    return np.concatenate([sd[k].double().numpy().ravel() for k in names])


def _mindspore_pca(diffs):
    """MindSpore's PCA on M^T, written with numpy: rows centred over their coordinates, SVD, the
    sign of each singular vector's largest entry positive, directions u * s."""
    m = np.stack(diffs)
    m = m - m.mean(axis=1, keepdims=True)
    u, s, _ = np.linalg.svd(m.T, full_matrices=False)
    dirs = []
    for i in range(2):
        ui = u[:, i] * (1.0 if u[np.argmax(np.abs(u[:, i])), i] >= 0 else -1.0)
        dirs.append(ui * s[i])
    return dirs, s ** 2 / np.sum(s ** 2)


def _loss(net, sd, x, y):
    model = copy.deepcopy(net)
    model.load_state_dict(sd)
    with torch.no_grad():
        return float(nn.functional.cross_entropy(model.eval()(x), y))


def test_shared_plane_projects_each_path_by_least_squares_and_reports_its_variance(runs):
    start, ckpts, (x, y) = runs
    ls = landscape.compute_landscape(start, nn.CrossEntropyLoss(), (x, y), directions="pca", checkpoints=ckpts,
                                     centre="start", normalization="none", size=5, num_samples=N,
                                     pca_method="mindspore")
    names = [k for k, _ in start.named_parameters()]
    centre = _flat(ckpts["sgd"][0], names)
    diffs = [_flat(sd, names) - centre for run in ckpts.values() for sd in run[1:]]  # the starts are the centre
    (v, w), ratio = _mindspore_pca(diffs)
    np.testing.assert_allclose(ls.metadata["explained_variance_ratio"], ratio[:2], rtol=1e-4)
    basis = np.stack([v, w], axis=1)
    assert list(ls.paths) == ["sgd", "adam"] and ls.path is ls.paths["sgd"]
    for name, run in ckpts.items():
        d = np.stack([_flat(sd, names) - centre for sd in run])
        ref, *_ = np.linalg.lstsq(basis, d.T, rcond=None)
        got = np.stack([ls.paths[name].x, ls.paths[name].y])
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max())
        # the distance from the plane, relative to the distance from the centre
        resid = np.linalg.norm(d - (basis @ ref).T, axis=1)
        norms = np.linalg.norm(d, axis=1)
        expect = np.where(norms > 0, resid / np.where(norms > 0, norms, 1), 0.0)
        np.testing.assert_allclose(ls.metadata["path_distance"][name], expect, atol=2e-5)
        assert ls.paths[name].intervals == [1, 2, 3, 4, 5]
    assert ls.paths["sgd"].x[0] == ls.paths["adam"].x[0] == 0.0  # the common start is the centre
    assert np.isfinite(ls.z).all()


def test_the_default_plane_is_the_uncentred_pca_and_holds_what_it_says(runs):
    """At the defaults the plane is the PCA plane itself (the SVD of the differences from the centre, not
    rescaled): the share of the runs' movement it holds, computed here from the checkpoints and the
    directions, is the metadata's and the PCA's explained variance; each checkpoint's distance too."""
    start, ckpts, (x, y) = runs
    ls = landscape.compute_landscape(start, nn.CrossEntropyLoss(), (x, y), directions="pca", checkpoints=ckpts,
                                     centre="sgd", size=3, num_samples=64)
    assert (ls.metadata["pca_method"], ls.metadata["normalization"]) == ("uncentred", "none")
    names = [k for k, _ in start.named_parameters()]
    v, w = ls.directions()
    plane = np.stack([np.concatenate([d[k].double().numpy().ravel() for k in names]) for d in (v, w)], axis=1)
    q, _ = np.linalg.qr(plane)
    centre = _flat(ckpts["sgd"][-1], names)
    d = np.stack([_flat(sd, names) - centre for run in ckpts.values() for sd in run])
    inside = ((d @ q) ** 2).sum()
    assert ls.metadata["movement_in_plane"] == pytest.approx(inside / (d ** 2).sum(), abs=1e-6)
    # the plane that holds the most: the top two right singular vectors of the differences
    s = np.linalg.svd(d, compute_uv=False)
    assert ls.metadata["movement_in_plane"] == pytest.approx((s[:2] ** 2).sum() / (s ** 2).sum(), abs=1e-6)
    np.testing.assert_allclose(ls.metadata["explained_variance_ratio"], s[:2] ** 2 / (s ** 2).sum(), atol=1e-6)
    norms = np.linalg.norm(d, axis=1)
    off = np.linalg.norm(d - (d @ q) @ q.T, axis=1) / np.where(norms > 0, norms, 1.0)
    np.testing.assert_allclose(np.concatenate([ls.metadata["path_distance"][n] for n in ckpts]), off, atol=2e-5)


@pytest.mark.parametrize("centre", ["sgd", "adam"])
def test_the_plane_passes_through_the_centre_runs_end_at_its_own_loss(runs, centre):
    start, ckpts, (x, y) = runs
    ls = landscape.compute_landscape(start, nn.CrossEntropyLoss(), (x, y), directions="pca", checkpoints=ckpts,
                                     centre=centre, size=4, num_samples=N)
    own = _loss(start, ckpts[centre][-1], x, y)
    assert (ls.paths[centre].x[-1], ls.paths[centre].y[-1]) == (0.0, 0.0)
    assert ls.metadata["path_distance"][centre][-1] == 0.0
    assert ls.paths[centre].z[-1] == pytest.approx(own, rel=1e-5)
    assert ls.metadata["centre"] == [0.0, 0.0, ls.paths[centre].z[-1]]
    other = "adam" if centre == "sgd" else "sgd"
    assert 0.0 < ls.metadata["path_distance"][other][-1] < 1.0  # reported, whatever it is


def test_paths_projected_on_a_random_plane_around_a_runs_end(runs):
    start, ckpts, (x, y) = runs
    ls = landscape.compute_landscape(start, nn.CrossEntropyLoss(), (x, y), checkpoints=ckpts, centre="adam",
                                     size=4, num_samples=N, seed=3)
    assert ls.metadata["decomposition"] == "Random" and list(ls.paths) == ["sgd", "adam"]
    assert (ls.paths["adam"].x[-1], ls.paths["adam"].y[-1]) == (0.0, 0.0)
    assert ls.metadata["path_distance"]["adam"][-1] == 0.0
    assert ls.paths["adam"].z[-1] == pytest.approx(_loss(start, ckpts["adam"][-1], x, y), rel=1e-5)
    # far from a random plane in 26,000 dimensions: the distances say so
    assert min(ls.metadata["path_distance"]["sgd"]) > 0.9
    assert ls.metadata["centre"][2] == pytest.approx(_loss(start, ckpts["adam"][-1], x, y), rel=1e-5)


def test_shared_plane_round_trips_through_the_file(runs, tmp_path):
    start, ckpts, (x, y) = runs
    ls = landscape.compute_landscape(start, nn.CrossEntropyLoss(), (x, y), directions="pca", checkpoints=ckpts,
                                     centre="mean", size=3, num_samples=64, tag="shared")
    landscape.write_h5(tmp_path / "a.h5", [ls])
    back = landscape.read_h5(tmp_path / "a.h5")["shared"]
    assert list(back.paths) == ["sgd", "adam"]
    for name in ckpts:
        np.testing.assert_array_equal(back.paths[name].z, ls.paths[name].z)
    assert back.metadata["centre_on"] == "mean"


@pytest.mark.parametrize("kw, match", [
    (dict(checkpoints={"a/b": [None]}), "run names must be non-empty strings without '/'"),
    (dict(checkpoints={"sgd": []}), "run 'sgd' must be a non-empty list"),
    (dict(checkpoints={"sgd": [0, 1, 2]}, centre="middle"), "'centre' parameter .* must be .*'start', 'mean', 'sgd'"),
    (dict(checkpoints=[0, 1, 2], centre="start"), "'centre' parameter .* must be None unless checkpoints is a dict"),
])
def test_bad_runs_are_refused_before_any_work(kw, match):
    x, y = digits_tensors()
    with pytest.raises(InvalidParameterError, match=match):
        landscape.compute_landscape(MLP(hidden=8), nn.CrossEntropyLoss(), (x[:8], y[:8]), directions="pca", **kw)
