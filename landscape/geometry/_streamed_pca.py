"""PCA of a trajectory whose checkpoints are read a block at a time (private).

The same PCA as :func:`landscape.geometry._pca.pca_trajectory` (MindSpore's centring of
each difference over the D coordinates, or Li et al.'s across checkpoints; the same sign
fix, singular values, explained variance ratios and path coordinates), without holding
the ``n - 1`` differences ``d_k = theta_k - theta_centre``: memory is one block of them,
the ``(n-1) x (n-1)`` Gram matrix and the two directions themselves.

Three passes over the checkpoints, each a block of rows of a few tensors at a time
(:class:`collector.trajectory.CheckpointReader`: a torch checkpoint memory-mapped and
released after each block, a safetensors file read by byte range, a state dict in
memory sliced in place):

1. the Gram matrix ``G0 = [d_i . d_j]`` and the sums ``s_k = sum(d_k)``, in float64 from
   differences formed in float64 (exact for float32, float16 and bfloat16 checkpoints).
   Centring is then applied to ``G0`` itself: MindSpore's ``G = G0 - s s^T / D``, Li et
   al.'s ``G = C G0 C`` with ``C = I - 11^T / (n-1)``. In float64 this loses at most
   ``1e-16 x (mean^2 / variance)`` relatively, far below the float32 rounding of the
   in-memory path's centring;
2. the directions as combinations of checkpoints: with ``G = V diag(lambda) V^T``, the
   singular values are ``sqrt(lambda)`` and the i-th direction is
   ``sum_k a_ik d_k + c_i``: MindSpore's ``a_i = V_i``, ``c_i = -(V_i . s) / D`` (the
   score ``u_i s_i``); Li et al.'s ``a_i = C V_i / sqrt(lambda_i)``, ``c_i = 0`` (the
   unit right singular vector). Rounded to float32 as they are formed, each tensor is
   normalized against the centre, and the sign makes the largest-magnitude entry of the
   raw direction positive (every normalization is odd, so the flip is applied last);
3. the path coordinates: ``[v . d_k, w . d_k]`` solved through the 2x2 normal equations.

Memory beyond the two directions (two float32 copies of the moved parameters) and the
centre: one block of ``(n-1)`` float64 rows (``BLOCK_BYTES``), plus a checkpoint's slices
of that block as read, plus the float64 temporaries of normalizing one tensor.
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
from landscape.geometry._pca import pca_trajectory
from landscape.geometry._state import flat_float

__all__ = ["trajectory_pca", "streamed_pca", "BLOCK_BYTES"]
_log = logging.getLogger("landscape")
#: Bytes of the float64 block of differences read at a time (all checkpoints together).
BLOCK_BYTES = 256 << 20

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


def _combinations(g0: np.ndarray, sums: np.ndarray, dim: int, method: str
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(a, c, s, ratio)``: direction i is ``sum_k a[k, i] d_k + c[i]``; singular values; all ratios."""
    m = g0.shape[0]
    if method == "mindspore":
        g = g0 - np.outer(sums, sums) / dim
    elif method == "li":
        centring = np.eye(m) - 1.0 / m
        g = centring @ g0 @ centring
    else:
        raise ValueError(f"unknown PCA method {method!r}")
    lam, vec = np.linalg.eigh((g + g.T) / 2)
    lam, vec = lam[::-1].clip(min=0.0), vec[:, ::-1]
    s = np.sqrt(lam)
    ratio = lam / max(float(lam.sum()), np.finfo(float).tiny)
    if method == "mindspore":
        a = vec[:, :2].copy()
        c = -(sums @ a) / dim
    else:
        a = (centring @ vec[:, :2]) / np.maximum(s[:2], np.finfo(float).tiny)
        c = np.zeros(2)
    return a, c, s, ratio


def _directions(diffs: _Differences, blocks: list[Block], a: np.ndarray, c: np.ndarray,
                shapes: Sequence[torch.Size]) -> tuple[list[list[torch.Tensor]], list[bool]]:
    """The raw float32 directions, and for each whether its largest-magnitude entry is negative."""
    out = [[torch.empty(shape, dtype=torch.float32) for shape in shapes] for _ in range(2)]
    coef = torch.from_numpy(np.ascontiguousarray(a.T))
    shift = torch.from_numpy(c).reshape(2, 1)
    best = [-1.0, -1.0]
    negative = [False, False]
    for block in blocks:
        raw = (coef @ diffs.block(block) + shift).to(torch.float32)
        for i in range(2):
            at = int(torch.argmax(raw[i].abs())) if raw.shape[1] else 0
            if raw.shape[1] and float(raw[i, at].abs()) > best[i]:  # the first largest entry, as torch.argmax
                best[i], negative[i] = float(raw[i, at].abs()), float(raw[i, at]) < 0
        at = 0
        for t, start, stop in block:
            target = _slice(out[0][t], start, stop)
            size = target.numel()
            for i in range(2):
                _slice(out[i][t], start, stop).copy_(raw[i, at:at + size].reshape(target.shape))
            at += size
    return out, negative


def _coordinates(diffs: _Differences, blocks: list[Block], v: list[torch.Tensor], w: list[torch.Tensor],
                 m: int) -> np.ndarray:
    b = torch.zeros((m, 2), dtype=torch.float64)
    for block in blocks:
        vw = torch.stack([_flat(_slice(d[i], s0, s1) for i, s0, s1 in block) for d in (v, w)], dim=1)
        b += diffs.block(block) @ vw
    dots = [[sum(float(torch.dot(x.reshape(-1).double(), y.reshape(-1).double())) for x, y in zip(p, q))
             for q in (v, w)] for p in (v, w)]
    coords = np.zeros((m + 1, 2))
    coords[:-1] = np.linalg.lstsq(np.array(dots), b.numpy().T, rcond=None)[0].T
    return coords


def streamed_pca(readers: Sequence[CheckpointReader], names: Sequence[str], centre: Sequence[torch.Tensor], *,
                 method: str = "mindspore", normalization: str = "layer", block_bytes: int | None = None
                 ) -> dict[str, Any]:
    """PCA directions of the checkpoints ``readers`` and ``centre`` (the last), read a block at a time.

    Parameters
    ----------
    readers : sequence of CheckpointReader
        The checkpoints before the centre (at least two).
    names : sequence of str
        The moved tensors, in order.
    centre : sequence of Tensor
        The centre's tensors ``names`` (the trajectory's last checkpoint), on the CPU.
    method : {"mindspore", "li"}
    normalization : str
        See :func:`landscape.geometry._directions.normalize_directions`.
    block_bytes : int, optional
        Bytes of one float64 block of the differences of every checkpoint (default
        ``BLOCK_BYTES``).

    Returns
    -------
    dict
        As :func:`landscape.geometry._pca.pca_trajectory`: ``v``, ``w``, ``coords``,
        ``explained_variance_ratio``, ``singular_values``.
    """
    m = len(readers)
    shapes = [t.shape for t in centre]
    dim = sum(t.numel() for t in centre)
    blocks = _blocks(shapes, max(1, (block_bytes or BLOCK_BYTES) // (8 * m)))
    diffs = _Differences(readers, names, centre)
    g0, sums = _gram(diffs, blocks, m)
    a, c, s, ratio = _combinations(g0, sums, dim, method)
    dirs, negative = _directions(diffs, blocks, a, c, shapes)
    for d, flip in zip(dirs, negative):
        for j, ref in enumerate(centre):  # tensor by tensor: one tensor's float64 temporaries at a time
            d[j] = normalize_directions([d[j]], [ref], normalization)[0]
            if flip:
                d[j].neg_()
    coords = _coordinates(diffs, blocks, dirs[0], dirs[1], m)
    _log.debug("streamed PCA of %d checkpoints, %d coordinates in %d blocks, explained variance %s",
               m + 1, dim, len(blocks), ratio[:2])
    return {"v": dirs[0], "w": dirs[1], "coords": coords, "explained_variance_ratio": np.asarray(ratio),
            "singular_values": np.asarray(s)}


def trajectory_pca(trajectory: Sequence[Any], names: Sequence[str], centre: Sequence[torch.Tensor], *,
                   network: nn.Module, label: str, method: str = "mindspore", solver: str = "auto",
                   normalization: str = "layer") -> dict[str, Any]:
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

    Returns
    -------
    dict
        See :func:`pca_trajectory`.
    """
    n = len(trajectory)
    what = [f"checkpoint {k} of {label}" for k in range(n)]
    if solver in ("auto", "gram"):
        readers = [CheckpointReader(trajectory[k], what=what[k], network=network) for k in range(n - 1)]
        return streamed_pca(readers, names, centre, method=method, normalization=normalization)

    def load(k: int) -> list[torch.Tensor]:
        if k == n - 1:
            return list(centre)
        return flat_float(load_checkpoint(trajectory[k], what=what[k], network=network), names)

    return pca_trajectory(load, n, method=method, solver=solver, normalization=normalization)
