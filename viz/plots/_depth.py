"""Depth in 3-D surfaces: faces drawn in a correct order, a camera that sees the top (private).

matplotlib's ``plot_surface`` sorts the faces by the mean depth of their corners. On a
height field seen from above that depth mixes distance and height: a tall face at the
back can count as near and be painted over lower faces in front of it. For a height
field ``z = f(x, y)`` in an orthographic projection the right order needs no height at
all: a face can only hide faces farther away *horizontally*, so painting the faces by
the depth of their footprint (their centre at one common height), far to near, is exact.
:class:`SortedSurface` does that at every draw (rotation included).

A wall steeper than the camera's elevation is seen from below; coloured like the top it
reads as a bright "fold" of the landscape. :class:`SortedSurface` paints such faces
(whose projected corners turn the other way round than the ground's) in a flat grey,
and :func:`view_angle` prefers a camera that sees the top of every face, the minimum and
the centre (so that drawing the markers after the surface is right as well).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.collections import PolyCollection
from mpl_toolkits.mplot3d import proj3d

__all__ = ["SortedSurface", "view_angle", "hidden", "DEFAULT_BOX", "UNDERSIDE"]

UNDERSIDE = (0.55, 0.55, 0.55, 1.0)  # a face seen from below: grey, no loss colour

# candidate cameras, best first: matplotlib's default, then the other corners, then steeper
_CANDIDATES = [(elev, azim) for elev in (30, 45, 60, 75) for azim in (-60, -120, 120, 60, -30, 30, 150, -150)]
DEFAULT_BOX = (1.0, 1.0, 0.75)  # mplot3d's default box aspect (4, 4, 3)


class SortedSurface(PolyCollection):
    """The quads of a height field, painted far to near by the depth of their footprints.

    Parameters
    ----------
    X, Y, H : ndarray of shape (ny, nx)
        Corner coordinates and heights; a quad with a non-finite corner is left out.
    facecolors : ndarray of shape (ny, nx, 4)
        RGBA of quad ``(i, j)`` (the one whose lowest corner is ``(i, j)``).
    **kwargs
        Passed to ``PolyCollection`` (edge colours and widths).
    """

    def __init__(self, X: np.ndarray, Y: np.ndarray, H: np.ndarray, facecolors: np.ndarray, **kwargs: Any):
        corners = [(slice(None, -1), slice(None, -1)), (slice(None, -1), slice(1, None)),
                   (slice(1, None), slice(1, None)), (slice(1, None), slice(None, -1))]
        faces = np.stack([np.stack([X[c], Y[c], H[c]], axis=-1) for c in corners], axis=2)  # (ny-1, nx-1, 4, 3)
        ok = np.isfinite(faces).all(axis=(2, 3))
        self._faces = faces[ok]
        self._colors = np.asarray(facecolors)[:-1, :-1][ok]
        self._floor = float(self._faces[..., 2].min()) if self._faces.size else 0.0
        super().__init__(list(self._faces[..., :2]), facecolors=self._colors, **kwargs)

    def do_3d_projection(self) -> float:
        """Project the quads with the axes' matrix and order them far to near (called by Axes3D.draw)."""
        f = self._faces
        if not len(f):
            return np.nan
        M = self.axes.M  # type: ignore[union-attr]  # an Axes3D sets M before drawing its children
        xs, ys, zs = proj3d.proj_transform(f[..., 0].ravel(), f[..., 1].ravel(), f[..., 2].ravel(), M)
        cx, cy = f[..., 0].mean(axis=1), f[..., 1].mean(axis=1)
        _, _, depth = proj3d.proj_transform(cx, cy, np.full_like(cx, self._floor), M)
        order = np.argsort(-np.asarray(depth), kind="stable")  # far first: larger projected z is farther
        verts = np.stack([np.asarray(xs), np.asarray(ys)], axis=-1).reshape(len(f), 4, 2)
        colors = np.where(self.undersides(verts)[:, None], np.asarray(UNDERSIDE), self._colors)
        self.set_verts(list(verts[order]))
        self.set_facecolor(list(colors[order]))
        return float(np.max(zs))  # sorted among other collections as the farthest: drawn first

    def undersides(self, verts: np.ndarray | None = None) -> np.ndarray:
        """Which faces the camera sees from below (their projection turns the other way round
        than a level face's seen from above)."""
        M = self.axes.M  # type: ignore[union-attr]
        if verts is None:
            f = self._faces
            xs, ys, _ = proj3d.proj_transform(f[..., 0].ravel(), f[..., 1].ravel(), f[..., 2].ravel(), M)
            verts = np.stack([np.asarray(xs), np.asarray(ys)], axis=-1).reshape(len(f), 4, 2)
        x0, x1 = (float(v) for v in self.axes.get_xlim())  # type: ignore[union-attr]
        y0, y1 = (float(v) for v in self.axes.get_ylim())  # type: ignore[union-attr]
        lx, ly, _ = proj3d.proj_transform(np.array([x0, x1, x1, x0]), np.array([y0, y0, y1, y1]),
                                          np.full(4, self._floor), M)
        level = _signed_area(np.stack([np.asarray(lx), np.asarray(ly)], axis=-1)[None])[0]
        up = np.sign(level) * np.sign(np.sin(np.radians(getattr(self.axes, "elev", 30.0))))
        return np.sign(_signed_area(verts)) == -up

    def draw_order(self) -> np.ndarray:
        """The 3-D quads in the order of the last draw (for tests and for callers that check depth)."""
        M = self.axes.M  # type: ignore[union-attr]
        cx, cy = self._faces[..., 0].mean(axis=1), self._faces[..., 1].mean(axis=1)
        _, _, depth = proj3d.proj_transform(cx, cy, np.full_like(cx, self._floor), M)
        return self._faces[np.argsort(-np.asarray(depth), kind="stable")]


def _signed_area(polys: np.ndarray) -> np.ndarray:
    """Shoelace areas of polygons of shape (n, k, 2): positive when counter-clockwise."""
    x, y = polys[..., 0], polys[..., 1]
    return 0.5 * np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1)


def _unit_heights(z: np.ndarray, box: Sequence[float]) -> np.ndarray:
    """Heights scaled to the box; a point without a value is a hole in the surface (the floor)."""
    finite = np.isfinite(z)
    lo, hi = float(z[finite].min()), float(z[finite].max())
    return np.where(finite, (z - lo) / ((hi - lo) or 1.0), 0.0) * box[2]


def _overshoot(h: np.ndarray, cell: tuple[int, int], elev: float, azim: float, box: Sequence[float]) -> float:
    """How far the surface rises above the ray from ``cell`` towards the camera (<= 0: visible)."""
    ny, nx = h.shape
    ti, tj = cell
    bx, by = box[0], box[1]
    px, py, pz = bx * tj / max(nx - 1, 1), by * ti / max(ny - 1, 1), h[ti, tj]
    steps = np.linspace(0, 1.5 * max(bx, by, box[2]), 301)[1:]
    e, a = np.radians(elev), np.radians(azim)
    xs = px + steps * np.cos(e) * np.cos(a)
    ys = py + steps * np.cos(e) * np.sin(a)
    zs = pz + steps * np.sin(e) + 0.01
    inside = (xs >= 0) & (xs <= bx) & (ys >= 0) & (ys <= by)
    if not inside.any():
        return -np.inf
    jj = np.clip(np.rint(xs[inside] / bx * (nx - 1)).astype(int), 0, nx - 1)
    ii = np.clip(np.rint(ys[inside] / by * (ny - 1)).astype(int), 0, ny - 1)
    return float(np.max(h[ii, jj] - zs[inside]))


def _underside_share(h: np.ndarray, elev: float, azim: float, box: Sequence[float]) -> float:
    """The share of faces whose slope towards the camera is steeper than its elevation."""
    ny, nx = h.shape
    gx = np.diff(h, axis=1) / (box[0] / max(nx - 1, 1))
    gy = np.diff(h, axis=0) / (box[1] / max(ny - 1, 1))
    gx = 0.5 * (gx[1:, :] + gx[:-1, :])
    gy = 0.5 * (gy[:, 1:] + gy[:, :-1])
    e, a = np.radians(elev), np.radians(azim)
    facing = np.sin(e) - np.cos(e) * (gx * np.cos(a) + gy * np.sin(a))
    ok = np.isfinite(facing)
    return float(np.mean(facing[ok] < 0)) if ok.any() else 0.0


def hidden(z: np.ndarray, cell: tuple[int, int], elev: float, azim: float,
           box: Sequence[float] = DEFAULT_BOX) -> bool:
    """Whether grid cell ``cell`` of the heights ``z`` is behind the surface from ``(elev, azim)``."""
    z = np.asarray(z, dtype=float)
    if not np.isfinite(z).any():
        return False
    return _overshoot(_unit_heights(z, box), cell, elev, azim, box) > 0


def view_angle(z: np.ndarray, *, target: tuple[int, int] | None = None,
               also: Sequence[tuple[int, int]] = (), box: Sequence[float] = DEFAULT_BOX) -> tuple[float, float]:
    """``(elev, azim)`` from which the grid cell ``target`` (the minimum by default) is not hidden
    and the top of the surface is seen.

    The grid is scaled to the 3-D box (x and y to ``box[0]``, ``box[1]``, z to ``box[2]``;
    mplot3d's default is (1, 1, 0.75)); for each candidate camera (elevations 30 to 75
    degrees, eight azimuths) a ray is marched from the target cell towards the camera. The
    first camera whose ray stays above the surface (for the target and every cell of
    ``also``) and that sees no face from below wins; else the visible camera that sees the
    fewest faces from below; when every candidate is blocked, the one with the smallest
    overshoot.

    Parameters
    ----------
    z : ndarray of shape (len(y), len(x))
        Heights as drawn (NaN/inf are holes: the surface leaves them out).
    target : tuple of int, optional
        Grid index ``(i, j)`` to keep in sight; the minimum by default.
    also : sequence of tuple of int, optional
        Further cells to keep in sight (e.g. the centre's).
    box : sequence of 3 floats, default=(1, 1, 0.75)
        The box aspect the surface is drawn in.

    Returns
    -------
    tuple of float
        ``(elev, azim)`` in degrees, for ``Axes3D.view_init``.
    """
    z = np.asarray(z, dtype=float)
    finite = np.isfinite(z)
    if not finite.any():
        return 30.0, -60.0
    h = _unit_heights(z, box)
    if target is None:
        i, j = np.unravel_index(int(np.argmin(np.where(finite, z, np.inf))), z.shape)
        target = (int(i), int(j))
    cells = [target, *also]
    seen: list[tuple[float, float, float]] = []  # (share of undersides, elev, azim) of visible cameras
    best, best_over = (30.0, -60.0), np.inf
    for elev, azim in _CANDIDATES:
        over = max(_overshoot(h, c, elev, azim, box) for c in cells)
        if over <= 0:
            share = _underside_share(h, elev, azim, box)
            if share == 0:
                return float(elev), float(azim)
            seen.append((share, float(elev), float(azim)))
        elif over < best_over:
            best, best_over = (float(elev), float(azim)), over
    if seen:
        _, e, a = min(seen, key=lambda s: s[0])  # the first of the least (min keeps the first)
        return e, a
    return best
