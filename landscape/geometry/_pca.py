"""PCA of a training trajectory (private), holding one float32 copy of the differences.

The rows are the differences ``d_k = theta_k - theta_centre`` of the checkpoints from the
centre (the last one). Three methods:

* ``"mindspore"``: MindSpore's PCA on ``M^T``: centre each column of ``M^T`` (each
  checkpoint difference) over the D coordinates, SVD, sign fix (largest magnitude entry of
  each column of U positive), directions ``u1*s1`` and ``u2*s2``;
* ``"li"``: Li et al.'s: centre across checkpoints, top right singular vectors of M;
* ``"uncentred"``: no centring, top right singular vectors of M: the plane through the
  centre that holds the largest share of ``sum_k |d_k|^2`` (Eckart-Young), which its
  explained variance ratios then are.

The SVD of the small side is exact: ``"full"`` (a float64 LAPACK SVD, small problems) or
``"gram"`` (eigendecomposition of the (n-1)x(n-1) Gram matrix accumulated in float64 over
column blocks, then the D-long scores by one pass over M), and ``"lowrank"``
(``torch.svd_lowrank``, randomized) on request.

What the drawn plane (the directions after normalization) holds is measured on it
(:func:`plane_share`): each checkpoint's distance from the plane relative to its distance
from the centre, and the share of all the checkpoints' ``|d_k|^2`` in the plane.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from landscape.geometry._directions import normalize_directions

__all__ = ["PCA_METHODS", "plane_share"]
#: The PCA methods (see the module docstring).
PCA_METHODS = ("mindspore", "li", "uncentred")
_log = logging.getLogger("landscape")
_BLOCK = 1 << 20  # columns per float64 block
_FULL_LIMIT = 2_000_000  # elements of M below which the full SVD is used


def _row_dots(m: torch.Tensor, vec: torch.Tensor) -> np.ndarray:
    """``m @ vec`` in float64, block by block (m: (r, D) float32, vec: (D,))."""
    out = torch.zeros(m.shape[0], dtype=torch.float64)
    for a in range(0, m.shape[1], _BLOCK):
        out += m[:, a:a + _BLOCK].double() @ vec[a:a + _BLOCK].double()
    return out.numpy()


def _scores(m: torch.Tensor, coef: np.ndarray) -> torch.Tensor:
    """``m.T @ coef`` for coef of shape (r, k), in float64 blocks; returns (k, D) float32."""
    c = torch.from_numpy(np.ascontiguousarray(coef))
    out = torch.empty((coef.shape[1], m.shape[1]), dtype=torch.float32)
    for a in range(0, m.shape[1], _BLOCK):
        out[:, a:a + _BLOCK] = (c.T @ m[:, a:a + _BLOCK].double()).to(torch.float32)
    return out


def _top2(m: torch.Tensor, solver: str) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """Top-2 ``(left scores U*S of m.T as (2, D), singular values s, all s**2 ratios)``."""
    r, dim = m.shape
    if solver == "auto":
        solver = "full" if r * dim <= _FULL_LIMIT else "gram"
    if solver == "full":
        u, s, _ = np.linalg.svd(m.double().numpy().T, full_matrices=False)
        sc = torch.from_numpy((u[:, :2] * s[:2]).T.copy()).to(torch.float32)
        return sc, s, s ** 2 / max(float(np.sum(s ** 2)), np.finfo(float).tiny)
    if solver == "gram":
        g = torch.zeros((r, r), dtype=torch.float64)
        for a in range(0, dim, _BLOCK):
            blk = m[:, a:a + _BLOCK].double()
            g += blk @ blk.T
        lam, vec = np.linalg.eigh(g.numpy())
        lam, vec = lam[::-1].clip(min=0.0), vec[:, ::-1]
        s = np.sqrt(lam)
        return _scores(m, vec[:, :2]), s, lam / max(float(lam.sum()), np.finfo(float).tiny)
    if solver == "lowrank":
        q = min(r, 6)
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(0)
        try:
            _, s_t, v_t = torch.svd_lowrank(m, q=q, niter=6, M=None)
        finally:
            torch.random.set_rng_state(gen_state)
        s = s_t.double().numpy()
        total = float(sum(_row_dots(m[i:i + 1], m[i]).item() for i in range(r)))
        sc = (v_t[:, :2] * s_t[:2]).T.contiguous().to(torch.float32)
        return sc, s, s ** 2 / max(total, np.finfo(float).tiny)
    raise ValueError(f"unknown PCA solver {solver!r}")


def _sign_fix(vec: torch.Tensor) -> torch.Tensor:
    i = int(torch.argmax(vec.abs()))
    return -vec if float(vec[i]) < 0 else vec


def _split(flat: torch.Tensor, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    out, a = [], 0
    for sh in shapes:
        n = int(np.prod(sh)) if len(sh) else 1
        out.append(flat[a:a + n].reshape(sh).clone())
        a += n
    return out


def plane_share(norms2: np.ndarray, rhs: np.ndarray, gram: np.ndarray, coords: np.ndarray
                ) -> tuple[np.ndarray, float]:
    """Each difference's distance from the plane relative to its length, and the share of their
    squared lengths in the plane: ``|d - a v - b w|^2 = |d|^2 - 2 (a, b).r + (a, b) G (a, b)`` for
    its least-squares ``(a, b)``, ``r = [v.d, w.d]`` and the Gram matrix ``G`` of ``v, w`` (rows of
    ``norms2``, ``rhs`` and ``coords`` per difference; a difference of length 0 is 0 off the plane)."""
    rest = norms2 - 2.0 * np.einsum("ki,ki->k", coords, rhs) + np.einsum("ki,ij,kj->k", coords, gram, coords)
    rest = np.clip(rest, 0.0, norms2)
    safe = np.where(norms2 > 0, norms2, 1.0)
    distance = np.where(norms2 > 0, np.sqrt(rest / safe), 0.0)
    total = float(norms2.sum())
    return distance, (1.0 - float(rest.sum()) / total) if total > 0 else 1.0


def pca_trajectory(load: Callable[[int], list[torch.Tensor]], n: int, *, method: str = "mindspore",
                   solver: str = "auto", normalization: str = "layer") -> dict[str, Any]:
    """PCA directions of a trajectory of ``n`` checkpoints and the checkpoints' coordinates.

    Parameters
    ----------
    load : callable
        ``load(k)`` returns checkpoint k's moved tensors (float32, CPU); called once per k.
    n : int
        Number of checkpoints (>= 3); the last is the centre.
    method, solver, normalization : str
        See the module docstring and :func:`normalize_directions`.

    Returns
    -------
    dict
        ``v``, ``w`` (lists of tensors), ``coords`` (array of shape (n, 2), the last row 0),
        ``explained_variance_ratio`` (array) and ``singular_values`` (of the PCA, before
        normalization), ``distance`` (each checkpoint's distance from the drawn plane relative
        to its distance from the centre, the last 0) and ``share`` (of the checkpoints'
        squared distances from the centre, in the drawn plane): :func:`plane_share`.
    """
    final = load(n - 1)
    shapes = [t.shape for t in final]
    flat_f = torch.cat([t.reshape(-1) for t in final])
    dim = flat_f.numel()
    m = torch.empty((n - 1, dim), dtype=torch.float32)
    norms2 = np.zeros(n)
    for k in range(n - 1):
        torch.cat([t.reshape(-1) for t in load(k)], out=m[k])
        m[k] -= flat_f
        norms2[k] = _row_dots(m[k:k + 1], m[k])[0]
    shift, colmean = np.zeros(n - 1), torch.zeros(dim, dtype=torch.float64)
    if method == "mindspore":
        shift = np.array([float(m[k].sum(dtype=torch.float64)) / dim for k in range(n - 1)])
        for k in range(n - 1):
            m[k] -= float(shift[k])
    elif method == "li":
        for k in range(n - 1):
            colmean += m[k]
        colmean /= n - 1
        m -= colmean.to(torch.float32)
    elif method != "uncentred":
        raise ValueError(f"unknown PCA method {method!r}")
    sc, s, ratio = _top2(m, solver)
    dirs = []
    for i in range(2):
        d = sc[i] if method == "mindspore" else sc[i] / max(float(s[i]), np.finfo(float).tiny)
        dirs.append(_sign_fix(d))
    raw_v, raw_w = _split(dirs[0], shapes), _split(dirs[1], shapes)
    v = normalize_directions(raw_v, final, normalization)
    w = normalize_directions(raw_w, final, normalization)
    flat_v = torch.cat([t.reshape(-1) for t in v])
    flat_w = torch.cat([t.reshape(-1) for t in w])
    # b_k = [v.d_k, w.d_k] with d_k = (centred row k) + shift
    bv, bw = _row_dots(m, flat_v), _row_dots(m, flat_w)
    if method == "mindspore":
        bv += shift * float(flat_v.sum(dtype=torch.float64))
        bw += shift * float(flat_w.sum(dtype=torch.float64))
    elif method == "li":
        bv += float(colmean @ flat_v.double())
        bw += float(colmean @ flat_w.double())
    vv, ww = float(flat_v.double() @ flat_v.double()), float(flat_w.double() @ flat_w.double())
    vw = float(flat_v.double() @ flat_w.double())
    gram = np.array([[vv, vw], [vw, ww]])
    coords = np.zeros((n, 2))
    coords[:-1] = np.linalg.lstsq(gram, np.stack([bv, bw]), rcond=None)[0].T
    rhs = np.zeros((n, 2))
    rhs[:-1] = np.stack([bv, bw], axis=1)
    distance, share = plane_share(norms2, rhs, gram, coords)
    del m
    _log.debug("PCA of %d checkpoints, %d coordinates, explained variance %s", n, dim, ratio[:2])
    return {"v": v, "w": w, "coords": coords, "explained_variance_ratio": np.asarray(ratio),
            "singular_values": np.asarray(s), "distance": distance, "share": share}
