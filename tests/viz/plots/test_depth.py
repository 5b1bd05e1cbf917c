"""3-D surfaces in a correct depth order, checked against a depth buffer computed here.

At sample points of the picture, the face painted last (on top) must be the nearest of
the faces that cover the point, with depths interpolated from the projected corners
(matplotlib's own projection, the ground truth of what is drawn). matplotlib's
``plot_surface`` (faces sorted by mean depth) breaks this on a rough surface.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpl_toolkits.mplot3d import proj3d

import viz
from landscape import Landscape

S = np.linspace(-1.0, 1.0, 12)


def surface_artist(ax):
    (art,) = [c for c in ax.collections if c.get_gid() == "landscape"]
    return art


def covered_wrongly(ax, faces: np.ndarray, samples: int = 90) -> tuple[int, int]:
    """(points where a farther face is painted over a nearer one, points covered twice or more)."""
    xs, ys, zs = proj3d.proj_transform(faces[..., 0].ravel(), faces[..., 1].ravel(), faces[..., 2].ravel(), ax.M)
    p = np.stack([xs, ys, zs], axis=-1).reshape(len(faces), 4, 3)
    lo, hi = p[..., :2].reshape(-1, 2).min(axis=0), p[..., :2].reshape(-1, 2).max(axis=0)
    g = np.stack(np.meshgrid(*(np.linspace(lo[k], hi[k], samples) for k in (0, 1))), axis=-1).reshape(-1, 2)
    depth = np.full((len(faces), len(g)), np.nan)
    for k, quad in enumerate(p):
        for tri in (quad[[0, 1, 2]], quad[[0, 2, 3]]):
            t = np.array([tri[1, :2] - tri[0, :2], tri[2, :2] - tri[0, :2]]).T
            if abs(np.linalg.det(t)) < 1e-15:
                continue
            lam = np.linalg.solve(t, (g - tri[0, :2]).T).T
            inside = (lam[:, 0] > 0.02) & (lam[:, 1] > 0.02) & (lam.sum(axis=1) < 0.98)   # clear of the edges
            d = tri[0, 2] + lam[:, 0] * (tri[1, 2] - tri[0, 2]) + lam[:, 1] * (tri[2, 2] - tri[0, 2])
            depth[k, inside] = d[inside]
    covered = np.isfinite(depth)
    multi = covered.sum(axis=0) >= 2
    last = len(faces) - 1 - np.argmax(covered[::-1], axis=0)       # the face painted last at each point
    nearest = np.nanmin(np.where(covered, depth, np.inf), axis=0)
    on_top = depth[last, np.arange(len(g))]
    tol = 1e-3 * float(np.nanmax(depth) - np.nanmin(depth))
    return int(np.sum(multi & (on_top > nearest + tol))), int(multi.sum())


def rough(seed=0):
    z = np.random.default_rng(seed).random((S.size, S.size))
    return Landscape(x=S, y=S.copy(), z=z, metadata={"decomposition": "Random"})


@pytest.mark.parametrize("elev,azim", [(30, -60), (20, 30), (45, 120), (60, -150)])
def test_faces_are_painted_far_to_near(elev, azim):
    ax = viz.plot_surface(rough(), elev=elev, azim=azim, log=False, path=False)
    ax.figure.draw_without_rendering()
    wrong, checked = covered_wrongly(ax, surface_artist(ax).draw_order())
    assert checked > 500 and wrong == 0


def test_the_checker_catches_matplotlibs_mean_depth_order():
    """The same check on the order matplotlib's plot_surface paints: it finds the errors."""
    from matplotlib.figure import Figure

    z = rough().z
    X, Y = np.meshgrid(S, S)
    ax = Figure().add_subplot(projection="3d")
    ax.set_proj_type("ortho")
    ax.view_init(30, -60)
    poly = ax.plot_surface(X, Y, z, rstride=1, cstride=1)
    ax.figure.draw_without_rendering()
    corners = [(slice(None, -1), slice(None, -1)), (slice(None, -1), slice(1, None)), (slice(1, None), slice(1, None)),
               (slice(1, None), slice(None, -1))]
    faces = np.stack([np.stack([X[c], Y[c], z[c]], -1) for c in corners], axis=2).reshape(-1, 4, 3)
    xs, ys, _ = proj3d.proj_transform(faces[..., 0].ravel(), faces[..., 1].ravel(), faces[..., 2].ravel(), ax.M)
    centres = np.stack([xs, ys], -1).reshape(-1, 4, 2).mean(axis=1)
    drawn = np.array([path.vertices[:4].mean(axis=0) for path in poly.get_paths()])
    order = [int(np.argmin(((centres - d) ** 2).sum(axis=1))) for d in drawn]
    wrong, checked = covered_wrongly(ax, faces[order])
    assert wrong > 0.01 * checked


def test_undersides_are_grey_and_the_automatic_camera_sees_the_top():
    bowl = Landscape(x=S, y=S.copy(), z=0.1 + 3 * (S[None, :] ** 2 + S[:, None] ** 2),
                     metadata={"decomposition": "Random"})
    ax = viz.plot_surface(bowl, elev=20, azim=-60, log=False)      # the near wall is steeper than 20 degrees
    ax.figure.draw_without_rendering()
    art = surface_artist(ax)
    under = art.undersides()
    assert 0 < under.sum() < len(under)
    colours = art.get_facecolor()
    order = art.draw_order()
    assert len(colours) == len(order)
    grey = np.all(np.isclose(colours, (0.55, 0.55, 0.55, 1.0)), axis=1)
    assert grey.sum() == under.sum()
    ax = viz.plot_surface(bowl, log=False)                          # the camera view_angle picks
    ax.figure.draw_without_rendering()
    assert not surface_artist(ax).undersides().any()


def test_a_centre_behind_a_wall_is_drawn_faded_and_says_so():
    z = 0.1 + 0.01 * (S[None, :] ** 2 + S[:, None] ** 2)
    z[:3, :] = 5.0                                   # a wall on the low-y side, in front of the default camera
    ls = Landscape(x=S, y=S.copy(), z=z, metadata={"decomposition": "Random", "centre": [0.0, 0.0, 0.1]})
    ax = viz.plot_surface(ls, elev=10, azim=-90, log=False)
    (star,) = [ln for ln in ax.lines if ln.get_gid() == "convergence"]
    assert star.get_alpha() == 0.4 and star.get_label().endswith("behind the surface")
    ax = viz.plot_surface(ls, log=False)
    (star,) = [ln for ln in ax.lines if ln.get_gid() == "convergence"]
    assert star.get_alpha() is None and "behind" not in star.get_label()
