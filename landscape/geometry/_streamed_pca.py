"""PCA of a trajectory whose checkpoints are read a block at a time (private).

The same PCA as :func:`landscape.geometry._pca.pca_trajectory` (the same methods, sign fix,
singular values, explained variance ratios, path coordinates and distances from the drawn
plane), without holding the ``n - 1`` differences ``d_k = theta_k - theta_centre``.

Two passes over the checkpoints (three with ``normalization="weight"``), each a block of rows
of a few tensors at a time (:class:`collector.trajectory.CheckpointReader`):

1. the Gram matrix ``G0 = [d_i . d_j]`` and the sums ``s_k = sum(d_k)`` in float64 (exact for
   float32, float16 and bfloat16 checkpoints), then centred as the method says
   (:func:`_combinations`);
2. the directions as combinations of the differences, rounded to float32 as they are
   formed, normalized against the centre and sign-fixed. The same pass keeps each row's dot
   products with the differences: a normalization other than ``weight`` scales each row by
   one number, so the path's right-hand sides follow from them (:func:`_row_scales`);
3. with ``weight`` (or when those row products would exceed ``ROW_PRODUCT_BYTES``), a third
   pass forms the right-hand sides from the normalized directions.

Memory beyond the directions and the centre: one block of float64 rows (``BLOCK_BYTES``), a
checkpoint's slices of it, the row products, and the float64 temporaries of normalizing the
largest tensor (about seven times its float32 size).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from collector.trajectory import CheckpointReader, load_checkpoint
from landscape.geometry._directions import normalize_directions
from landscape.geometry._pca import pca_trajectory, plane_share
from landscape.geometry._state import flat_float

__all__ = ["trajectory_pca", "streamed_pca", "BLOCK_BYTES", "ROW_PRODUCT_BYTES"]
_log = logging.getLogger("landscape")
#: Bytes of the float64 block of differences read at a time (all checkpoints together).
BLOCK_BYTES = 256 << 20
#: Bytes the row-by-row dot products of pass 2 may take (else a third pass).
ROW_PRODUCT_BYTES = 256 << 20

#: The normalizations that scale each row of a direction (or the whole tensor) by one number
#: (:mod:`landscape.geometry._directions`); ``weight`` scales each value by the centre's.
_ROW_SCALED = ("layer", "filter", "dlayer", "dfilter", "none")

#: One block: ``(tensor index, first row, last row + 1)`` of consecutive tensors.
Block = list[tuple[int, int, int]]


def _blocks(shapes: Sequence[torch.Size], elements: int) -> list[Block]:
    """Consecutive row ranges of the tensors, at most ``elements`` per block (but one row at least)."""
    out: list[Block] = []
    cur: Block = []
    filled = 0
    for i, shape in enumerate(shapes):
        rows = shape[0] if len(shape) else 1
        per_row = int(np.prod(shape[1:])) if len(shape) else 1
        step = max(1, elements // per_row) if per_row else max(rows, 1)
        for start in range(0, max(rows, 1), step):
            stop = min(rows, start + step)
            size = (stop - start) * per_row
            if cur and filled + size > elements:
                out.append(cur)
                cur, filled = [], 0
            cur.append((i, start, stop))
            filled += size
    if cur:
        out.append(cur)
    return out


class _Differences:
    """The blocks of ``d_k = checkpoint_k - centre`` (float64, one row per checkpoint)."""

    def __init__(self, readers: Sequence[CheckpointReader], names: Sequence[str],
                 centre: Sequence[torch.Tensor]) -> None:
        self.readers, self.names, self.centre = readers, names, centre

    def block(self, block: Block) -> torch.Tensor:
        ref = _flat(_slice(self.centre[i], a, b) for i, a, b in block)
        out = torch.empty((len(self.readers), ref.numel()), dtype=torch.float64)
        parts = [(self.names[i], a, b) for i, a, b in block]
        for k, reader in enumerate(self.readers):
            torch.sub(_flat(reader.read(parts)), ref, out=out[k])
        return out


def _slice(t: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    return t[start:stop] if t.dim() else t


def _flat(ts: Any) -> torch.Tensor:
    return torch.cat([t.reshape(-1).to(torch.float64) for t in ts])


def _gram(diffs: _Differences, blocks: list[Block], m: int) -> tuple[np.ndarray, np.ndarray]:
    g = torch.zeros((m, m), dtype=torch.float64)
    sums = torch.zeros(m, dtype=torch.float64)
    for block in blocks:
        x = diffs.block(block)
        g += x @ x.T
        sums += x.sum(dim=1)
    return g.numpy(), sums.numpy()


def _combinations(g0: np.ndarray, sums: np.ndarray, dim: int, method: str, k: int = 2
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(a, c, s, ratio)``: direction i (of the top ``k``) is ``sum_k a[k, i] d_k + c[i]``; singular values;
    all ratios.

    Centring is applied to ``G0`` itself: MindSpore's ``G = G0 - s s^T / D``, Li et al.'s
    ``G = C G0 C`` with ``C = I - 11^T / (n-1)``, none for ``"uncentred"``. With
    ``G = V diag(lambda) V^T`` the singular values are ``sqrt(lambda)``; MindSpore's
    ``a_i = V_i``, ``c_i = -(V_i . s) / D`` (the score ``u_i s_i``); Li et al.'s
    ``a_i = C V_i / sqrt(lambda_i)`` and the uncentred ``a_i = V_i / sqrt(lambda_i)``, ``c_i = 0``
    (unit right singular vectors). In float64 the centring of ``G0`` loses at most
    ``1e-16 x (mean^2 / variance)`` relatively.
    """
    m = g0.shape[0]
    if method == "mindspore":
        g = g0 - np.outer(sums, sums) / dim
    elif method == "li":
        centring = np.eye(m) - 1.0 / m
        g = centring @ g0 @ centring
    elif method == "uncentred":
        centring = np.eye(m)
        g = g0
    else:
        raise ValueError(f"unknown PCA method {method!r}")
    lam, vec = np.linalg.eigh((g + g.T) / 2)
    lam, vec = lam[::-1].clip(min=0.0), vec[:, ::-1]
    s = np.sqrt(lam)
    ratio = lam / max(float(lam.sum()), np.finfo(float).tiny)
    if method == "mindspore":
        a = vec[:, :k].copy()
        c = -(sums @ a) / dim
    else:
        a = (centring @ vec[:, :k]) / np.maximum(s[:k], np.finfo(float).tiny)
        c = np.zeros(k)
    return a, c, s, ratio


def _rows_of(shape: torch.Size) -> tuple[int, int]:
    """``(rows, values per row)`` of a tensor: slices along its first dimension (a 0-d tensor: one row)."""
    return (shape[0], int(np.prod(shape[1:]))) if len(shape) else (1, 1)


def _directions(diffs: _Differences, blocks: list[Block], a: np.ndarray, c: np.ndarray,
                shapes: Sequence[torch.Size], partial: bool
                ) -> tuple[list[list[torch.Tensor]], list[bool], list[torch.Tensor] | None]:
    """The raw float32 directions (one per column of ``a``), for each whether its largest-magnitude entry is
    negative, and (``partial``) each tensor's row-by-row dot products with the differences, shape
    (rows, m, k)."""
    m, k = a.shape
    out = [[torch.empty(shape, dtype=torch.float32) for shape in shapes] for _ in range(k)]
    dots = [torch.zeros((_rows_of(shape)[0], m, k), dtype=torch.float64) for shape in shapes] if partial else None
    coef = torch.from_numpy(np.ascontiguousarray(a.T))
    shift = torch.from_numpy(c).reshape(k, 1)
    best = [-1.0] * k
    negative = [False] * k
    for block in blocks:
        x = diffs.block(block)
        raw = (coef @ x + shift).to(torch.float32)
        for i in range(k):
            at = int(torch.argmax(raw[i].abs())) if raw.shape[1] else 0
            if raw.shape[1] and float(raw[i, at].abs()) > best[i]:  # the first largest entry, as torch.argmax
                best[i], negative[i] = float(raw[i, at].abs()), float(raw[i, at]) < 0
        at = 0
        for t, start, stop in block:
            rows, per_row = (stop - start, _rows_of(shapes[t])[1]) if shapes[t] else (1, 1)
            size = rows * per_row
            for i in range(k):
                _slice(out[i][t], start, stop).copy_(raw[i, at:at + size].reshape(_slice(out[i][t], start,
                                                                                          stop).shape))
            if dots is not None and size:
                xs = x[:, at:at + size].reshape(m, rows, per_row)
                rs = raw[:, at:at + size].to(torch.float64).reshape(k, rows, per_row)
                dots[t][start:stop] = torch.einsum("krl,irl->rki", xs, rs)
            at += size
    return out, negative, dots


def _row_scales(normalized: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """``sigma`` with ``normalized[r] = sigma[r] * raw[r]`` for each row (float64 least squares: the
    normalizations other than ``weight`` scale each row, or the whole tensor, by one number)."""
    rows, per_row = _rows_of(raw.shape)
    n2, r2 = normalized.reshape(rows, per_row), raw.reshape(rows, per_row)
    num = torch.zeros(rows, dtype=torch.float64)
    den = torch.zeros(rows, dtype=torch.float64)
    step = max(1, (1 << 22) // max(per_row, 1))
    for a in range(0, rows, step):  # a few rows at a time: float64 copies of a chunk, not of the tensor
        nc, rc = n2[a:a + step].double(), r2[a:a + step].double()
        num[a:a + step] = (nc * rc).sum(dim=1)
        den[a:a + step] = (rc * rc).sum(dim=1)
    return torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)


def _solve(b: torch.Tensor, dirs: Sequence[list[torch.Tensor]], norms2: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, float]:
    """Path coordinates from ``b[k] = [v . d_k, w . d_k, ...]``: the normal equations of the directions
    ``dirs``, the centre's row 0; with the distances from the plane of the first two and its share
    (:func:`landscape.geometry._pca.plane_share`)."""
    dots = np.array([[sum(float(torch.dot(x.reshape(-1).double(), y.reshape(-1).double())) for x, y in zip(p, q))
                      for q in dirs] for p in dirs])
    coords = np.zeros((b.shape[0] + 1, len(dirs)))
    coords[:-1] = np.linalg.lstsq(dots, b.numpy().T, rcond=None)[0].T
    plane = np.zeros((b.shape[0] + 1, 2))
    plane[:-1] = np.linalg.lstsq(dots[:2, :2], b[:, :2].numpy().T, rcond=None)[0].T
    rhs = np.zeros_like(plane)
    rhs[:-1] = b[:, :2].numpy()
    distance, share = plane_share(np.append(norms2, 0.0), rhs, dots[:2, :2], plane)
    return coords, distance, share


def _coordinates(diffs: _Differences, blocks: list[Block], dirs: Sequence[list[torch.Tensor]], m: int
                 ) -> torch.Tensor:
    """``[v . d_k, w . d_k, ...]`` for each k, by a pass over the checkpoints."""
    b = torch.zeros((m, len(dirs)), dtype=torch.float64)
    for block in blocks:
        vw = torch.stack([_flat(_slice(d[i], s0, s1) for i, s0, s1 in block) for d in dirs], dim=1)
        b += diffs.block(block) @ vw
    return b


def streamed_pca(readers: Sequence[CheckpointReader], names: Sequence[str], centre: Sequence[torch.Tensor], *,
                 method: str = "mindspore", normalization: str = "layer", block_bytes: int | None = None,
                 components: int = 2) -> dict[str, Any]:
    """PCA directions of the checkpoints ``readers`` and ``centre`` (the last), read a block at a time.

    Parameters
    ----------
    readers : sequence of CheckpointReader
        The checkpoints before the centre (at least two).
    names : sequence of str
        The moved tensors, in order.
    centre : sequence of Tensor
        The centre's tensors ``names`` (the trajectory's last checkpoint), on the CPU.
    method : {"mindspore", "li", "uncentred"}
    normalization : str
        See :func:`landscape.geometry._directions.normalize_directions`.
    block_bytes : int, optional
        Bytes of one float64 block of the differences of every checkpoint (default
        ``BLOCK_BYTES``).
    components : int, default=2
        The principal directions computed (an n-D grid's axes): beyond two, ``more`` holds the
        third and later and ``coords`` has a column per direction.

    Returns
    -------
    dict
        As :func:`landscape.geometry._pca.pca_trajectory`: ``v``, ``w``, ``coords``,
        ``explained_variance_ratio``, ``singular_values``, ``distance``, ``share`` (of the plane of
        the first two); and ``more``.
    """
    m = len(readers)
    shapes = [t.shape for t in centre]
    dim = sum(t.numel() for t in centre)
    budget = block_bytes or BLOCK_BYTES
    blocks = _blocks(shapes, max(1, budget // (8 * m)))
    diffs = _Differences(readers, names, centre)
    g0, sums = _gram(diffs, blocks, m)
    a, c, s, ratio = _combinations(g0, sums, dim, method, components)
    # the path's coordinates from pass 2's row-by-row dot products, when every row of a normalized
    # direction is its raw row times one number and those products fit the block's budget; else a pass 3
    partial = normalization in _ROW_SCALED and sum(_rows_of(sh)[0] for sh in shapes) * m * 16 <= ROW_PRODUCT_BYTES
    dirs, negative, dots = _directions(diffs, blocks, a, c, shapes, partial)
    b = torch.zeros((m, components), dtype=torch.float64)
    for i, (d, flip) in enumerate(zip(dirs, negative)):
        for j, ref in enumerate(centre):  # tensor by tensor: one tensor's float64 temporaries at a time
            normalized = normalize_directions([d[j]], [ref], normalization)[0]
            if dots is not None:
                b[:, i] += _row_scales(normalized, d[j]) @ dots[j][:, :, i]
            d[j] = normalized.neg_() if flip else normalized
        if flip:
            b[:, i] = -b[:, i]
    if dots is None:
        b = _coordinates(diffs, blocks, dirs, m)
    coords, distance, share = _solve(b, dirs, np.diag(g0).copy())
    _log.debug("streamed PCA of %d checkpoints, %d coordinates in %d blocks (%d passes), explained variance %s",
               m + 1, dim, len(blocks), 2 if partial else 3, ratio[:2])
    return {"v": dirs[0], "w": dirs[1], "more": dirs[2:], "coords": coords,
            "explained_variance_ratio": np.asarray(ratio), "singular_values": np.asarray(s),
            "distance": distance, "share": share}


def trajectory_pca(trajectory: Sequence[Any], names: Sequence[str], centre: Sequence[torch.Tensor], *,
                   network: nn.Module, label: str, method: str = "mindspore", solver: str = "auto",
                   normalization: str = "layer", what: Sequence[str] | None = None,
                   components: int = 2) -> dict[str, Any]:
    """PCA directions of a trajectory of checkpoints (paths or state dicts; the last is the centre).

    Streamed (:func:`streamed_pca`) with ``solver`` "auto" or "gram"; "full" and
    "lowrank" hold every difference in memory (:func:`pca_trajectory`).

    Parameters
    ----------
    trajectory : sequence of str, os.PathLike or mapping
        The checkpoints (torch or safetensors files, or state dicts), at least three.
    names : sequence of str
        The moved tensors, in order.
    centre : sequence of Tensor
        The last checkpoint's tensors ``names`` (it is not read again).
    network : nn.Module
        Checkpoints must fit it (keys and shapes).
    label : str
        Names the landscape in messages (``"checkpoint 2 of {label}"``).
    method, solver, normalization : str
        See :func:`pca_trajectory`.
    what : sequence of str, optional
        Each checkpoint's name in messages (default ``"checkpoint k of {label}"``).
    components : int, default=2
        Principal directions (more than two: the streamed solvers only, "auto" and "gram").

    Returns
    -------
    dict
        See :func:`pca_trajectory`.
    """
    n = len(trajectory)
    what = list(what) if what is not None else [f"checkpoint {k} of {label}" for k in range(n)]
    if solver in ("auto", "gram") or components > 2:
        readers = [CheckpointReader(trajectory[k], what=what[k], network=network) for k in range(n - 1)]
        return streamed_pca(readers, names, centre, method=method, normalization=normalization,
                            components=components)

    def load(k: int) -> list[torch.Tensor]:
        if k == n - 1:
            return list(centre)
        return flat_float(load_checkpoint(trajectory[k], what=what[k], network=network), names)

    return pca_trajectory(load, n, method=method, solver=solver, normalization=normalization)
