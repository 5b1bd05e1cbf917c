"""Lines, interpolations, planes through models, target directions and ranges, each value
against a plain load_state_dict + forward loop, and the geometry against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector import InvalidParameterError
from landscape.engine import _planner as _evaluate
from landscape.geometry._state import moved_names
from tests.landscape._helpers import TinyMLP, plain_loss, seeded_draw

LOSS = nn.CrossEntropyLoss()


#: These check the geometry of the views through models with the batch-norm statistics carried along like
#: the parameters (so each model's point is that model): the default estimates them again at every point
#: (tests/landscape/generate/test_bn_statistics.py).
CARRIED = {"bn_statistics": "clamped"}


def _flat(sd, names):
    return np.concatenate([sd[n].double().numpy().ravel() for n in names])


def _state(centre, names, flat):
    """``centre`` with the tensors ``names`` replaced by the pieces of ``flat``."""
    sd = {k: t.clone() for k, t in centre.items()}
    o = 0
    for n in names:
        size = centre[n].numel()
        sd[n] = torch.from_numpy(flat[o:o + size].reshape(tuple(centre[n].shape))).to(torch.float32)
        o += size
    return sd


def _loss(state, x, y, n=96):
    return plain_loss(TinyMLP(), state, [(x, y)], n)


def _close(a, b, rel=1e-5):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-7)


@pytest.fixture
def models(trained):
    _, traj = trained
    return traj[0], traj[-1], traj[3]


def _all_names(net):
    """Parameters, then floating-point buffers: what a view through models moves."""
    names, _ = moved_names(net, None, buffers=True)
    return names


@pytest.mark.parametrize("batched", [True, False])
def test_interpolation_ends_are_the_models_and_every_point_the_plain_loop(trained, data, models, batched,
                                                                           monkeypatch):
    if not batched:
        monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    net, _ = trained
    x, y = data
    a, b, _ = models
    ls = landscape.compute_landscape(net, LOSS, (x, y), between=(a, b), **CARRIED, x=(-0.5, 1.5, 9), num_samples=96)
    assert ls.dims == 1 and ls.z.shape == (9,) and ls.y.size == 0
    assert ls.metadata["decomposition"] == "Interpolation"
    np.testing.assert_array_equal(ls.x, np.linspace(-0.5, 1.5, 9))
    own_a, own_b = _loss(a, x, y), _loss(b, x, y)
    assert ls.markers["A"][:2] == (0.0, 0.0) and ls.markers["B"][:2] == (1.0, 0.0)
    if batched:  # the batched forward's products are grouped differently: float32 rounding
        assert _close(ls.markers["A"][2], own_a, 1e-6) and _close(ls.markers["B"][2], own_b, 1e-6)
    else:  # one point per call: the models' parameters (and batch-norm statistics) bit for bit
        assert ls.markers["A"][2] == own_a and ls.markers["B"][2] == own_b
    assert ls.z[2] == ls.markers["A"][2] and ls.z[6] == ls.markers["B"][2]  # alpha = 0 and 1 are grid points
    names = _all_names(net)
    fa, fb = _flat(a, names), _flat(b, names)
    for j, alpha in enumerate(ls.x):
        want = _loss(_state(a, names, (1 - alpha) * fa + alpha * fb), x, y)
        assert _close(ls.z[j], want), (j, ls.z[j], want)


def test_interpolation_ends_off_the_grid_are_extra_points(trained, data, models):
    net, _ = trained
    x, y = data
    a, b, _ = models
    ls = landscape.compute_landscape(net, LOSS, (x, y), between=(a, b), **CARRIED, size=4, num_samples=96)
    np.testing.assert_array_equal(ls.x, np.linspace(-0.5, 1.5, 4))   # alpha = 0, 1 not among them
    assert _close(ls.markers["A"][2], _loss(a, x, y), 1e-6) and _close(ls.markers["B"][2], _loss(b, x, y), 1e-6)
    assert ls.convergence_point == ls.markers["A"]


def test_interpolation_between_modules_and_with_metrics(data):
    x, y = data
    torch.manual_seed(1)
    a, b = TinyMLP().eval(), TinyMLP().eval()
    ls = landscape.compute_landscape(a, LOSS, (x, y), between=(a, b), **CARRIED, x=(0.0, 1.0, 3), num_samples=96,
                                     metrics=["accuracy"])
    with torch.no_grad():
        acc_b = float((b(x).argmax(1) == y).double().mean())
    assert ls.surfaces["accuracy"].shape == (3,) and ls.surfaces["accuracy"][-1] == pytest.approx(acc_b)


def test_random_line_is_the_plane_row_at_zero_and_the_plain_loop(trained, data):
    net, traj = trained
    x, y = data
    line = landscape.compute_landscape(net, LOSS, (x, y), checkpoints=[traj[-1]], dims=1, x=(-1.0, 1.0, 7),
                                       num_samples=96, seed=4, normalization="filter")
    plane = landscape.compute_landscape(net, LOSS, (x, y), checkpoints=[traj[-1]], x=(-1.0, 1.0, 7),
                                        y=(-1.0, 1.0, 3), num_samples=96, seed=4, normalization="filter")
    assert line.z.shape == (7,) and plane.z.shape == (3, 7)
    np.testing.assert_allclose(line.z, plane.z[1], rtol=1e-6)  # the line runs along the plane's first axis
    assert line.convergence_point == (0.0, 0.0, line.z[3])
    # the direction, rebuilt with numpy from the same seeded draw (filter normalization)
    names, _ = moved_names(net, None)
    raw = [seeded_draw(4, 0, n, traj[-1][n].shape).double().numpy() for n in names]
    parts = []
    for d, n in zip(raw, names):
        p = traj[-1][n].double().numpy()
        d2, p2 = d.reshape(d.shape[0], -1), p.reshape(p.shape[0], -1)
        parts.append((d2 * (np.linalg.norm(p2, axis=1) / np.linalg.norm(d2, axis=1))[:, None]).ravel())
    v = np.concatenate(parts)
    c = _flat(traj[-1], names)
    for j, alpha in enumerate(line.x):
        want = _loss(_state(traj[-1], names, c + alpha * v), x, y)
        assert _close(line.z[j], want), (j, line.z[j], want)


def test_one_given_direction_is_a_line_normalized_as_asked(trained, data):
    net, traj = trained
    x, y = data
    names, _ = moved_names(net, None)
    g = torch.Generator().manual_seed(7)
    d = {n: torch.randn(traj[-1][n].shape, generator=g) for n in names}
    raw = landscape.compute_landscape(net, LOSS, (x, y), checkpoints=[traj[-1]], directions=d, x=(-0.5, 0.5, 3),
                                      num_samples=96)
    layer = landscape.compute_landscape(net, LOSS, (x, y), checkpoints=[traj[-1]], directions=d,
                                        x=(-0.5, 0.5, 3), num_samples=96, normalization="layer")
    assert raw.metadata["normalization"] == "none" and layer.metadata["normalization"] == "layer"
    c = _flat(traj[-1], names)
    v_raw = _flat(d, names)
    v_layer = np.concatenate([d[n].double().numpy().ravel() * np.linalg.norm(traj[-1][n].double().numpy())
                              / np.linalg.norm(d[n].double().numpy()) for n in names])
    for ls, v in ((raw, v_raw), (layer, v_layer)):
        for j, alpha in enumerate(ls.x):
            assert _close(ls.z[j], _loss(_state(traj[-1], names, c + alpha * v), x, y))
    assert not np.allclose(raw.z, layer.z)  # normalization is not silently ignored


def _gram_schmidt(a, b, c):
    u = b - a
    nb = np.linalg.norm(u)
    u = u / nb
    cu = float((c - a) @ u)
    v = c - a - cu * u
    nc = np.linalg.norm(v)
    return u, v / nc, np.array([[0, 0], [nb, 0], [cu, nc]])


def test_plane_through_three_models_passes_through_each(trained, data, models):
    net, _ = trained
    x, y = data
    a, b, c = models
    ls = landscape.compute_landscape(net, LOSS, (x, y), between=(a, b, c), **CARRIED, size=4, num_samples=96)
    assert ls.metadata["decomposition"] == "Plane" and list(ls.markers) == ["A", "B", "C"]
    params, _ = moved_names(net, None)
    u, v, coords = _gram_schmidt(*(_flat(m, params) for m in (a, b, c)))
    for k, label in enumerate("ABC"):
        np.testing.assert_allclose(ls.markers[label][:2], coords[k], rtol=1e-6, atol=1e-9)
        own = _loss((a, b, c)[k], x, y)
        assert _close(ls.markers[label][2], own), (label, ls.markers[label][2], own)
    # grid points: A + x u + y v on the parameters; the buffers at the same affine combination
    names = _all_names(net)
    fa, fb, fc = (_flat(m, names) for m in (a, b, c))
    n_par = sum(a[n].numel() for n in params)
    for i, py in enumerate(ls.y):
        for j, px in enumerate(ls.x):
            s = px / coords[1, 0] - py * coords[2, 0] / (coords[1, 0] * coords[2, 1])
            t = py / coords[2, 1]
            flat = fa + s * (fb - fa) + t * (fc - fa)
            flat[:n_par] = fa[:n_par] + px * u + py * v
            want = _loss(_state(a, names, flat), x, y)
            assert _close(ls.z[i, j], want), (i, j, ls.z[i, j], want)


def test_target_direction_with_a_random_and_a_principal_second_axis(trained, data, models):
    net, traj = trained
    x, y = data
    a, b, _ = models
    ls = landscape.compute_landscape(net, LOSS, (x, y), between=(a, b), directions="target", **CARRIED, x=(0.0, 1.0, 3),
                                     y=(-0.5, 0.5, 3), num_samples=96, seed=2)
    assert ls.metadata["decomposition"] == "Target" and ls.metadata["second"] == "random"
    assert _close(ls.markers["B"][2], _loss(b, x, y)) and ls.z[1, 2] == ls.markers["B"][2]
    pca = landscape.compute_landscape(net, LOSS, (x, y), between=(a, b), directions=("target", "pca"), **CARRIED,
                                      checkpoints=traj, size=3, num_samples=96)
    params, _ = moved_names(net, None)
    fa, fb = _flat(a, params), _flat(b, params)
    u = fb - fa
    devs = np.stack([(_flat(sd, params) - fa) - ((_flat(sd, params) - fa) @ u) / (u @ u) * u for sd in traj])
    top = np.linalg.svd(devs, full_matrices=False)[2][0]
    top = top * np.sign(top[np.argmax(np.abs(top))]) * np.linalg.norm(u)
    # the path: least-squares coordinates of each checkpoint in (u, top)
    m = np.stack([u, top], axis=1)
    coords = np.stack([np.linalg.lstsq(m, _flat(sd, params) - fa, rcond=None)[0] for sd in traj])
    np.testing.assert_allclose(np.c_[pca.path.x, pca.path.y], coords, atol=1e-5)
    assert pca.path.intervals == [1, 2, 3, 4, 5, 6]


def test_ranges_are_honoured_exactly_non_square_not_centred(trained, data):
    net, traj = trained
    x, y = data
    ls = landscape.compute_landscape(net, LOSS, (x, y), checkpoints=[traj[-1]], x=(0.1, 0.9, 5),
                                     y=(-0.3, 0.7, 3), num_samples=96)
    assert ls.z.shape == (3, 5)
    np.testing.assert_array_equal(ls.x, np.linspace(0.1, 0.9, 5))
    np.testing.assert_array_equal(ls.y, np.linspace(-0.3, 0.7, 3))
    # the origin is off the grid: evaluated at exactly (0, 0), the centre's own loss
    assert ls.convergence_point[:2] == (0.0, 0.0)
    assert _close(ls.convergence_point[2], _loss(traj[-1], x, y), 1e-6)
    assert ls.metadata["x_range"] == [0.1, 0.9, 5] and ls.metadata["y_range"] == [-0.3, 0.7, 3]


def test_include_and_ignore_patterns_move_only_the_chosen_modules(trained, data):
    net, traj = trained
    x, y = data
    ls = landscape.compute_landscape(net, LOSS, (x, y), checkpoints=[traj[-1]], include="fc2", dims=1,
                                     x=(-1.0, 1.0, 3), num_samples=96)
    names = ["fc2.weight", "fc2.bias"]
    assert ls.metadata["moved_parameters"] == names
    # the seeded draw of the moved tensors (each by its name, whatever else moves), layer-normalized
    v = np.concatenate([(d * np.linalg.norm(traj[-1][n].double().numpy()) / np.linalg.norm(d)).ravel() for n, d in
                        ((n, seeded_draw(0, 0, n, traj[-1][n].shape).double().numpy()) for n in names)])
    c = _flat(traj[-1], names)
    for j, alpha in enumerate(ls.x):
        assert _close(ls.z[j], _loss(_state(traj[-1], names, c + alpha * v), x, y))
    assert moved_names(net, ["biasbn", "fc1"])[0] == ["fc2.weight"]
    assert moved_names(net, "*.bias")[0] == ["fc1.weight", "bn.weight", "fc2.weight"]
    with pytest.raises(InvalidParameterError, match="'include' pattern 'conv' matches no parameter"):
        landscape.compute_landscape(net, LOSS, (x, y), include="conv", num_samples=96)
    with pytest.raises(InvalidParameterError, match="No parameter moves"):
        landscape.compute_landscape(net, LOSS, (x, y), include="fc1", ignore="fc*", num_samples=96)


@pytest.mark.parametrize("kw, fragment", [
    (dict(between=("a",)), "'between' parameter"),
    (dict(dims=1, y=(0, 1, 3)), "'y' parameter"),
    (dict(x=(1, 0, 3)), "'x' parameter"),
    (dict(x=(0, 1, 1)), "'x' parameter"),
    (dict(directions="target"), "between=\\(model_a, model_b\\)"),
    (dict(directions="pca", dims=1, checkpoints=[{}, {}, {}]), "'dims' parameter"),
    (dict(between="AB", directions="random"), "'directions' parameter"),
    (dict(normalization="filter", between="AB"), "'normalization' parameter"),
    (dict(between="AB", dims=2), "directions='target'"),
    (dict(between="ABC", dims=1), "'dims' parameter"),
    (dict(between="AB", directions=("target", "pca")), "at least 3 checkpoints"),
    (dict(biasbn="zero"), "'biasbn' parameter"),
    (dict(normalization="unit"), "'normalization' parameter"),
])
def test_views_refuse_what_does_not_fit(trained, data, models, kw, fragment):
    net, _ = trained
    if isinstance(kw.get("between"), str):
        kw["between"] = [dict(models[0]), dict(models[1]), dict(models[2])][:len(kw["between"])]
    with pytest.raises(InvalidParameterError, match=fragment):
        landscape.compute_landscape(net, LOSS, data, num_samples=96, **kw)


def test_plane_of_collinear_models_is_refused(trained, data, models):
    net, _ = trained
    a, b, _ = models
    mid = {k: (0.5 * (a[k].double() + b[k].double())).to(a[k].dtype) for k in a}
    with pytest.raises(ValueError, match="lies on the line through A and B"):
        landscape.compute_landscape(net, LOSS, data, between=(a, b, mid), **CARRIED, size=3, num_samples=96)


def test_views_on_two_worker_processes_equal_one(trained, data, models):
    net, _ = trained
    a, b, c = models
    for kw in (dict(between=(a, b), **CARRIED, x=(-0.5, 1.5, 9)), dict(between=(a, b, c), **CARRIED, size=3)):
        two = landscape.compute_landscape(net, LOSS, data, num_samples=96, device_ids=[0, 1], **kw)
        # each worker evaluates with its share of the cores; a BLAS product may round differently with
        # another number of threads, so the one-process run uses as many as a worker did
        threads = torch.get_num_threads()
        torch.set_num_threads(two.metadata["threads"])
        try:
            one = landscape.compute_landscape(net, LOSS, data, num_samples=96, **kw)
        finally:
            torch.set_num_threads(threads)
        assert one.metadata["threads"] == two.metadata["threads"]
        np.testing.assert_array_equal(one.z, two.z)
        assert one.markers == two.markers
