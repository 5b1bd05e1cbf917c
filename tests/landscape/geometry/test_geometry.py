"""PCA directions, path coordinates and axes against a direct numpy computation of the spec."""

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from landscape.geometry._pca import pca_trajectory
from landscape.geometry._state import flat_float, moved_names


def _numpy_reference(traj, names, method):
    flat = [np.concatenate([sd[n].double().numpy().ravel() for n in names]) for sd in traj]
    final = flat[-1]
    m = np.stack([f - final for f in flat[:-1]])  # (n-1, D)
    shapes = [traj[-1][n].shape for n in names]
    if method == "mindspore":
        mt = m.T - m.T.mean(axis=0, keepdims=True)  # centre columns of M^T over the D coordinates
        u, s, _ = np.linalg.svd(mt, full_matrices=False)
        dirs = []
        for k in range(2):
            col = u[:, k] * s[k]
            if col[np.argmax(np.abs(u[:, k]))] < 0:
                col = -col
            dirs.append(col)
    else:
        mc = m - m.mean(axis=0, keepdims=True)
        _, s, vt = np.linalg.svd(mc, full_matrices=False)
        dirs = [vt[k] * np.sign(vt[k][np.argmax(np.abs(vt[k]))]) for k in range(2)]
    out = []
    for d in dirs:  # layer-wise normalization
        parts, a = [], 0
        for n, sh in zip(names, shapes):
            size = int(np.prod(sh))
            seg = d[a:a + size]
            pf = traj[-1][n].double().numpy().ravel()
            parts.append(seg * np.linalg.norm(pf) / np.linalg.norm(seg))
            a += size
        out.append(np.concatenate(parts))
    a_mat = np.stack(out, axis=1)
    coords = np.stack([np.linalg.lstsq(a_mat, f - final, rcond=None)[0] for f in flat])
    return out[0], out[1], coords, s ** 2 / np.sum(s ** 2)


@pytest.mark.parametrize("method", ["mindspore", "li"])
@pytest.mark.parametrize("solver", ["full", "gram", "lowrank"])
def test_pca_matches_numpy(trained, method, solver):
    net, traj = trained
    names, _ = moved_names(net, None)
    res = pca_trajectory(lambda k: flat_float(traj[k], names), len(traj), method=method, solver=solver)
    v_ref, w_ref, coords_ref, ratio = _numpy_reference(traj, names, method)
    v = np.concatenate([t.double().numpy().ravel() for t in res["v"]])
    w = np.concatenate([t.double().numpy().ravel() for t in res["w"]])
    tol = 1e-3 if solver == "lowrank" else 2e-5
    np.testing.assert_allclose(v, v_ref, rtol=tol, atol=tol * np.abs(v_ref).max())
    np.testing.assert_allclose(w, w_ref, rtol=tol, atol=tol * np.abs(w_ref).max())
    np.testing.assert_allclose(res["coords"], coords_ref, atol=tol * np.abs(coords_ref).max())
    np.testing.assert_allclose(res["explained_variance_ratio"][:2], ratio[:2], rtol=1e-3)


def test_landscape_axes_and_path(trained, data):
    net, traj = trained
    names, _ = moved_names(net, None)
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, directions="pca", checkpoints=traj,
                                     size=6, num_samples=64)
    _, _, coords, _ = _numpy_reference(traj, names, "mindspore")
    coords[-1] = 0.0
    np.testing.assert_allclose(np.c_[ls.path.x, ls.path.y], coords, atol=1e-5 * np.abs(coords).max())
    for axis, col in ((ls.x, coords[:, 0]), (ls.y, coords[:, 1])):
        lo, hi = col.min(), col.max()
        np.testing.assert_allclose(axis, np.linspace(lo - 0.2 * (hi - lo), hi + 0.2 * (hi - lo), 6),
                                   atol=1e-5 * (hi - lo))
    assert ls.path.x[-1] == 0 and ls.path.y[-1] == 0
    assert ls.convergence_point[:2] == (0.0, 0.0) and ls.convergence_point[2] == ls.path.z[-1]
    assert ls.metadata["decomposition"] == "PCA"
    r = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=6, num_samples=64)
    np.testing.assert_array_equal(r.x, np.linspace(-1, 1, 6))
    assert r.convergence_point[:2] == (r.x[3], r.y[3])


def test_filter_normalization(trained):
    from landscape.geometry._directions import normalize_directions

    net, traj = trained
    p = traj[-1]["fc1.weight"].float()
    d = torch.randn_like(p)
    (out,) = normalize_directions([d], [p], "filter")
    np.testing.assert_allclose(out.norm(dim=1).numpy(), p.norm(dim=1).numpy(), rtol=1e-5)
    (out,) = normalize_directions([d], [p], "layer")
    np.testing.assert_allclose(float(out.norm()), float(p.norm()), rtol=1e-5)


def test_seed_reproducible(trained, data):
    net, traj = trained
    a = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=4, num_samples=32, seed=5)
    b = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=4, num_samples=32, seed=5)
    c = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, size=4, num_samples=32, seed=6)
    np.testing.assert_array_equal(a.z, b.z)
    assert not np.array_equal(a.z, c.z)
    assert a.metadata["seed"] == 5
