"""What a landscape looks like in TensorBoard's Mesh dashboard: vertices, faces, colours, scale (private).

TensorBoard's mesh viewer centres a surface and places its camera above it, far enough
to see the largest side of the surface's bounding box. A landscape in its own units is
a thin column there (a PCA plane may span 0.1 while the loss spans 2: the camera backs
off to see the height and the plane is a dot), so the vertices are scaled: the plane's
longer side to 2 (its proportions kept), the finite loss range to 1. The scale is stated
in the mesh's description and the values themselves are in the ``{tag}/grid`` tensor.
Pure numpy (and matplotlib's colour map): the writer, which needs ``tensorboard``, lives
in ``_tensorboard``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps  # the colour scale only: no backend, no pyplot

__all__ = ["MeshFrame", "mesh_frame", "landscape_mesh", "NOT_FINITE_RGB", "PLANE_SIDE", "LOSS_HEIGHT",
           "MESH_CONFIG"]

#: Colour of points where the loss is not finite (grey).
NOT_FINITE_RGB = (128, 128, 128)
#: The scaled plane's longer side, and the scaled height of the finite loss range.
PLANE_SIDE = 2.0
LOSS_HEIGHT = 1.0
#: The mesh viewer's scene: a perspective camera in front of and above the (centred) scaled surface,
#: looking at its centre, so that the relief shows and the surface fills the card.
MESH_CONFIG = {"camera": {"cls": "PerspectiveCamera", "fov": 75, "position": [0.0, -2.0, 1.5]}}


@dataclass(frozen=True)
class MeshFrame:
    """``vertex = ((x - cx) * s, (y - cy) * s, (loss - z0) * sz)``: the landscape scaled to fill the view."""

    cx: float
    cy: float
    z0: float
    s: float
    sz: float

    def apply(self, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Vertices (N, 3) of points ``(x, y, loss)`` (arrays of one shape)."""
        return np.stack([(np.ravel(x) - self.cx) * self.s, (np.ravel(y) - self.cy) * self.s,
                         (np.ravel(z) - self.z0) * self.sz], axis=1)

    def describe(self, tag: str) -> str:
        """The scale in words, for the mesh's description of landscape ``tag``."""
        return (f"vertices scaled to fill the view: x' = (x - {self.cx:.6g}) * {self.s:.6g}, "
                f"y' = (y - {self.cy:.6g}) * {self.s:.6g}, loss' = (loss - {self.z0:.6g}) * {self.sz:.6g} "
                f"(the plane's longer side {PLANE_SIDE:g}, the finite loss range {LOSS_HEIGHT:g}; the values are in "
                f"the tensor {tag}/grid)")


def mesh_frame(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> MeshFrame:
    """The scale that makes the plane's longer side ``PLANE_SIDE`` and the finite loss range ``LOSS_HEIGHT``.

    A side or range of zero length (one grid point, a flat or all-NaN loss) keeps a factor of 1.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    finite = np.asarray(z, dtype=np.float64)[np.isfinite(z)]
    side = max(float(np.ptp(x)), float(np.ptp(y)))
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    return MeshFrame(cx=float(x.min() + x.max()) / 2, cy=float(y.min() + y.max()) / 2, z0=lo,
                     s=PLANE_SIDE / side if side > 0 else 1.0, sz=LOSS_HEIGHT / (hi - lo) if hi > lo else 1.0)


def landscape_mesh(x: np.ndarray, y: np.ndarray, z: np.ndarray,
                   frame: MeshFrame | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(vertices, faces, colors)`` of a landscape's surface.

    Vertex ``i * len(x) + j`` is ``(x[j], y[i], z[i, j])``, mapped by ``frame`` when given
    (:func:`mesh_frame`); each grid cell gives two triangles; colours are the loss on
    matplotlib's viridis scale (min to max of the finite values). A non-finite loss is drawn
    at the largest finite one, grey, and the triangles touching it are left out.
    """
    ny, nx = z.shape
    finite = np.isfinite(z)
    lo, hi = (float(z[finite].min()), float(z[finite].max())) if finite.any() else (0.0, 1.0)
    zz = np.where(finite, z, hi)
    gx, gy = np.meshgrid(x, y)
    if frame is None:
        vertices = np.stack([gx.reshape(-1), gy.reshape(-1), zz.reshape(-1)], axis=1)
    else:
        vertices = frame.apply(gx, gy, zz)
    scale = (zz - lo) / (hi - lo) if hi > lo else np.zeros_like(zz)
    colors = (colormaps["viridis"](scale.reshape(-1))[:, :3] * 255).round().astype(np.uint8)
    colors[~finite.reshape(-1)] = NOT_FINITE_RGB
    idx = np.arange(nx * ny).reshape(ny, nx)
    a, b, c, d = idx[:-1, :-1], idx[:-1, 1:], idx[1:, :-1], idx[1:, 1:]
    tri = np.concatenate([np.stack([a, b, d], -1).reshape(-1, 3), np.stack([a, d, c], -1).reshape(-1, 3)])
    keep = finite.reshape(-1)[tri].all(axis=1)
    return vertices, tri[keep].astype(np.int32), colors
