"""The streamed PCA of a trajectory: today's in-memory PCA and a numpy SVD, from files read in blocks."""

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector.trajectory import CheckpointError
from collector.trajectory._checkpoints import save_file
from landscape.geometry._pca import pca_trajectory
from landscape.geometry._state import flat_float, moved_names
from landscape.geometry._streamed_pca import _blocks, trajectory_pca


class Shapes(nn.Module):
    """Tensors of every rank: a conv kernel, a matrix, biases, a 0-d scale."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.fc = nn.Linear(12, 5)
        self.scale = nn.Parameter(torch.tensor(1.5))


def _trajectory(net, n=6, seed=0):
    """Checkpoints drifting along a few directions, plus noise (a trajectory with a dominant plane)."""
    gen = torch.Generator().manual_seed(seed)
    base = {k: v.detach().clone() for k, v in net.state_dict().items()}
    drift = {k: torch.randn(v.shape, generator=gen) for k, v in base.items()}
    wobble = {k: torch.randn(v.shape, generator=gen) for k, v in base.items()}
    out = []
    for t in range(n):
        out.append({k: base[k] + 0.1 * t * drift[k] + 0.05 * np.sin(t) * wobble[k]
                    + 0.01 * torch.randn(base[k].shape, generator=gen) for k in base})
    return out


def _numpy_pca(traj, names, method):
    """Today's spec in numpy (float64 SVD), layer normalization: v, w, coords, ratios, singular values."""
    flat = [np.concatenate([sd[n].double().numpy().ravel() for n in names]) for sd in traj]
    m = np.stack([f - flat[-1] for f in flat[:-1]])
    if method == "mindspore":
        u, s, _ = np.linalg.svd(m.T - m.T.mean(axis=0, keepdims=True), full_matrices=False)
        raw = [u[:, k] * s[k] for k in range(2)]
    else:  # Li et al.'s centred across checkpoints, or not centred at all
        _, s, vt = np.linalg.svd(m - m.mean(axis=0, keepdims=True) if method == "li" else m, full_matrices=False)
        raw = [vt[k] for k in range(2)]
    dirs = []
    for d in raw:
        d = d * np.sign(d[np.argmax(np.abs(d))])
        parts, a = [], 0
        for n in names:
            p = traj[-1][n].double().numpy().ravel()
            seg = d[a:a + p.size]
            parts.append(seg * np.linalg.norm(p) / np.linalg.norm(seg))
            a += p.size
        dirs.append(np.concatenate(parts))
    basis = np.stack(dirs, axis=1)
    coords = np.stack([np.linalg.lstsq(basis, f - flat[-1], rcond=None)[0] for f in flat])
    return dirs[0], dirs[1], coords, s ** 2 / np.sum(s ** 2), s


def _flat(ts):
    return np.concatenate([t.double().numpy().ravel() for t in ts])


def _files(tmp_path, traj, kind):
    paths = []
    for k, sd in enumerate(traj):
        if kind == "pt":
            path = tmp_path / f"c{k}.pt"
            torch.save(sd, path)
        else:
            path = tmp_path / f"c{k}.safetensors"
            save_file(sd, str(path), file_format="safetensors")
        paths.append(str(path))
    return paths


def _streamed(net, items, centre, monkeypatch, method="mindspore", normalization="layer", block_bytes=1 << 20,
              third_pass=False):
    """The PCA of ``items`` (the last one's tensors given as ``centre``), ``block_bytes`` a block;
    ``third_pass``: the path's coordinates by a pass of their own, not from pass 2's row products."""
    from landscape.geometry import _streamed_pca

    monkeypatch.setattr(_streamed_pca, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(_streamed_pca, "ROW_PRODUCT_BYTES", 0 if third_pass else 1 << 20)
    names, _ = moved_names(net, None)
    return names, trajectory_pca(items, names, flat_float(centre, names), network=net, label="test", method=method,
                                 normalization=normalization)


@pytest.mark.parametrize("third_pass", [False, True], ids=["two-passes", "three-passes"])
@pytest.mark.parametrize("method", ["mindspore", "li", "uncentred"])
def test_streamed_pca_equals_a_numpy_svd_and_the_in_memory_pca(method, third_pass, monkeypatch):
    torch.manual_seed(0)
    net = Shapes()
    traj = _trajectory(net)
    # 100 bytes per block and 5 checkpoints: 2 elements a block, so tensors are split across blocks
    names, res = _streamed(net, traj, traj[-1], monkeypatch, method=method, block_bytes=100,
                           third_pass=third_pass)
    v_ref, w_ref, coords_ref, ratio_ref, s_ref = _numpy_pca(traj, names, method)
    for got, want in ((res["v"], v_ref), (res["w"], w_ref)):
        np.testing.assert_allclose(_flat(got), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    np.testing.assert_allclose(res["coords"], coords_ref, rtol=1e-5, atol=1e-6 * np.abs(coords_ref).max())
    np.testing.assert_allclose(res["explained_variance_ratio"], ratio_ref, rtol=1e-9, atol=1e-12)
    # through the Gram matrix a singular value is resolved to sqrt(float64 eps) of the largest
    # (Li's centring leaves a zero one)
    np.testing.assert_allclose(res["singular_values"], s_ref, rtol=1e-9, atol=3e-8 * s_ref[0])
    memory = pca_trajectory(lambda k: flat_float(traj[k], names), len(traj), method=method, solver="full")
    for key in ("v", "w"):
        np.testing.assert_allclose(_flat(res[key]), _flat(memory[key]), rtol=1e-5,
                                   atol=1e-6 * np.abs(_flat(memory[key])).max())
    np.testing.assert_allclose(res["coords"], memory["coords"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res["explained_variance_ratio"], memory["explained_variance_ratio"], rtol=1e-6, atol=1e-12)
    # what the drawn (normalized) plane holds: each checkpoint's distance from it, relative to its distance
    # from the centre, and the share of their squared distances in it, by numpy on the numpy directions
    d = np.stack([_flat(flat_float(sd, names)) for sd in traj]) - _flat(flat_float(traj[-1], names))
    q, _ = np.linalg.qr(np.stack([v_ref, w_ref], axis=1))
    norms = np.linalg.norm(d, axis=1)
    off = np.linalg.norm(d - (d @ q) @ q.T, axis=1) / np.where(norms > 0, norms, 1.0)
    share = ((d @ q) ** 2).sum() / (d ** 2).sum()
    for got in (res, memory):
        np.testing.assert_allclose(got["distance"], off, atol=1e-5)
        assert got["share"] == pytest.approx(share, abs=1e-6)
    if method == "uncentred":  # the plane that holds the most: its explained variance is its share (layer-normalized
        # here, the plane turns: the share is below it)
        assert share <= ratio_ref[:2].sum() + 1e-9


@pytest.mark.parametrize("normalization", ["filter", "weight", "dlayer", "none"])
def test_every_normalization_equals_the_in_memory_pca(normalization, monkeypatch):
    torch.manual_seed(1)
    net = Shapes()
    traj = _trajectory(net, n=5, seed=3)
    names, res = _streamed(net, traj, traj[-1], monkeypatch, normalization=normalization, block_bytes=300)
    memory = pca_trajectory(lambda k: flat_float(traj[k], names), len(traj), solver="full",
                            normalization=normalization)
    for key in ("v", "w"):
        want = _flat(memory[key])
        np.testing.assert_allclose(_flat(res[key]), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    np.testing.assert_allclose(res["coords"], memory["coords"], rtol=1e-5, atol=1e-6 * np.abs(memory["coords"]).max())


def test_files_and_state_dicts_give_the_same_bits(tmp_path, monkeypatch):
    """torch files (memory-mapped), safetensors files (read by byte range) and state dicts: one result."""
    torch.manual_seed(2)
    net = Shapes()
    traj = _trajectory(net, n=4)
    (tmp_path / "pt").mkdir()
    (tmp_path / "st").mkdir()
    results = [_streamed(net, items, traj[-1], monkeypatch, block_bytes=200)[1]
               for items in (traj, _files(tmp_path / "pt", traj, "pt"), _files(tmp_path / "st", traj, "st"))]
    for other in results[1:]:
        for key in ("v", "w"):
            assert all(torch.equal(a, b) for a, b in zip(results[0][key], other[key]))
        np.testing.assert_array_equal(results[0]["coords"], other["coords"])


def test_the_block_size_changes_nothing_but_rounding(monkeypatch):
    torch.manual_seed(3)
    net = Shapes()
    traj = _trajectory(net)
    small = _streamed(net, traj, traj[-1], monkeypatch, block_bytes=64)[1]
    whole = _streamed(net, traj, traj[-1], monkeypatch, block_bytes=1 << 30)[1]
    for key in ("v", "w"):
        np.testing.assert_allclose(_flat(small[key]), _flat(whole[key]), rtol=1e-6, atol=1e-7)


def test_blocks_cover_every_row_once_in_order():
    shapes = [torch.Size([7, 3]), torch.Size([]), torch.Size([0, 4]), torch.Size([5]), torch.Size([2, 50])]
    for elements in (1, 4, 10, 1000):
        blocks = _blocks(shapes, elements)
        flat = [part for block in blocks for part in block]
        for i, shape in enumerate(shapes):
            mine = [(a, b) for t, a, b in flat if t == i]
            rows = shape[0] if len(shape) else 1
            assert mine[0][0] == 0 and mine[-1][1] == rows and all(x[1] == y[0] for x, y in zip(mine, mine[1:]))
        assert [t for t, _, _ in flat] == sorted(t for t, _, _ in flat)
        for block in blocks:  # within the budget, unless one row alone is larger
            sizes = [(b - a) * (int(np.prod(shapes[t][1:])) if len(shapes[t]) else 1) for t, a, b in block]
            assert sum(sizes) <= elements or len(block) == 1


def test_compute_landscape_from_checkpoint_files_equals_from_state_dicts(tmp_path, data):
    from tests.landscape._helpers import TinyMLP, train_trajectory

    torch.manual_seed(0)
    net = TinyMLP()
    traj = train_trajectory(net, *data)
    kw = dict(directions="pca", size=4, num_samples=64)
    in_memory = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, checkpoints=traj, **kw)
    (tmp_path / "st").mkdir()
    files = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data,
                                        checkpoints=_files(tmp_path / "st", traj, "st"), **kw)
    np.testing.assert_array_equal(files.z, in_memory.z)
    np.testing.assert_array_equal(files.path.x, in_memory.path.x)
    np.testing.assert_array_equal(files.path.y, in_memory.path.y)


def test_a_checkpoint_of_another_network_is_refused_before_any_work(tmp_path):
    torch.manual_seed(4)
    net = Shapes()
    traj = _trajectory(net, n=4)
    traj[1] = {**traj[1], "fc.weight": torch.zeros(5, 13)}
    paths = _files(tmp_path, traj, "st")
    names, _ = moved_names(net, None)
    with pytest.raises(CheckpointError, match=r"checkpoint 1 of test .*'fc.weight' has shape \(5, 13\)"):
        trajectory_pca(paths, names, flat_float(traj[-1], names), network=net, label="test")
