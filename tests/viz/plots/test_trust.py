"""Pictures a researcher can trust: true aspect, explained variance, the true centre, log
colours over a decade, narrow ranges printed, and the caller's matplotlib left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from matplotlib.colors import LogNorm

import viz
from landscape import Landscape, LossPath

PX = np.linspace(-0.6, 0.1, 29)                 # a PCA plane 0.7 wide and 0.2 high, as the demo's
PY = np.linspace(-0.13, 0.07, 9)


def pca(**changes) -> Landscape:
    z = 0.1 + (PX[None, :] - 0.05) ** 2 + 4 * PY[:, None] ** 2
    kw = dict(x=PX, y=PY, z=z, path=LossPath(np.array([-0.5, -0.2, 0.0]), np.array([0.05, -0.1, 0.0]),
                                             np.array([0.4, 0.2, 0.1025]), [1, 3, 5]),
              convergence_point=(0.0, 0.0, 0.1025), tag="landscape_[1, 5]",
              metadata={"decomposition": "PCA", "unit": "epoch",
                        "explained_variance_ratio": [0.9316919227171268, 0.06074839263537816]})
    kw.update(changes)
    return Landscape(**kw)


def random_even(**changes) -> Landscape:
    """MindSpore's Random plane on an even grid: the convergence point is grid point 20 of 40."""
    s = np.linspace(-1, 1, 40)
    z = 0.0487 + 0.9 * (s[None, :] ** 2 + s[:, None] ** 2)
    kw = dict(x=s, y=s.copy(), z=z, convergence_point=(s[20], s[20], float(z[20, 20])),
              metadata={"decomposition": "Random"}, tag="landscape_[10]")
    kw.update(changes)
    return Landscape(**kw)


def gid(ax, name):
    return [ln for ln in ax.lines if ln.get_gid() == name]


def landscape_artist(ax):
    (art,) = [c for c in ax.collections if c.get_gid() == "landscape"]
    return art


@pytest.mark.parametrize("kind", ["contour", "filled", "heatmap"])
def test_pca_plane_has_true_aspect_and_explained_variance(kind):
    ax = viz.plot(pca(), kind)
    assert ax.get_xlabel() == "PC1: 93.2 %" and ax.get_ylabel() == "PC2: 6.1 %"
    assert ax.get_aspect() == 1.0
    ax.figure.draw_without_rendering()
    box = ax.get_window_extent()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    # one data unit is as long on screen along x as along y
    assert box.width / (x1 - x0) == pytest.approx(box.height / (y1 - y0), rel=0.01)
    cb_ax = landscape_artist(ax).colorbar.ax
    assert cb_ax.get_window_extent().height == pytest.approx(box.height, rel=0.02)   # the bar fits the plot
    assert viz.plot(pca(), kind, aspect="auto").get_aspect() == "auto"


def test_aspect_defaults_by_view():
    target = pca(metadata={"decomposition": "Target"}, path=None)
    assert viz.plot_contour(target).get_aspect() == "auto"                   # alpha and a direction: no common unit
    assert viz.plot_contour(random_even()).get_aspect() == 1.0
    assert viz.plot_contour(target, aspect="equal").get_aspect() == 1.0
    no_ratio = pca(metadata={"decomposition": "PCA"})
    assert viz.plot_contour(no_ratio).get_xlabel() == "direction 1 (PC1)"
    box = viz.plot_surface(pca()).get_box_aspect()
    assert box[1] / box[0] == pytest.approx(np.ptp(PY) / np.ptp(PX))


def test_star_at_the_exactly_evaluated_centre():
    ls = random_even(metadata={"decomposition": "Random", "centre": [0.0, 0.0, 0.04866]})
    for kind in ("contour", "filled", "heatmap"):
        (star,) = gid(viz.plot(ls, kind), "convergence")
        assert (star.get_xdata()[0], star.get_ydata()[0]) == (0.0, 0.0)
        assert star.get_label() == "trained weights (loss 0.04866)"
    (star,) = gid(viz.plot_surface(ls, log=False), "convergence")
    assert [float(v[0]) for v in star.get_data_3d()] == [0.0, 0.0, 0.04866]
    for ax, pos in zip(viz.plot_slices(ls).axes, (0.0, 0.0)):
        (star,) = gid(ax, "convergence")
        assert (star.get_xdata()[0], star.get_ydata()[0]) == (pos, 0.04866)


def test_star_falls_back_to_the_path_end_then_the_convergence_point():
    ls = pca(convergence_point=(0.05, 0.05, 9.0))          # a PCA plane: the path's last checkpoint
    (star,) = gid(viz.plot_contour(ls), "convergence")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (0.0, 0.0) and "0.1025" in star.get_label()
    ls = random_even()                                     # nothing else known: MindSpore's grid point
    (star,) = gid(viz.plot_contour(ls), "convergence")
    assert star.get_xdata()[0] == pytest.approx(ls.x[20])
    assert star.get_label() == f"convergence point (nearest grid point) (loss {ls.z[20, 20]:.4g})"


def test_log_colours_above_a_decade():
    wide = random_even()                                   # 0.049 to 1.85: more than a decade
    art = landscape_artist(viz.plot_filled_contour(wide))
    assert isinstance(art.norm, LogNorm) and art.colorbar.ax.get_ylabel() == "loss (log scale)"
    narrow_span = random_even(z=random_even().z + 0.5)     # 0.55 to 2.35: linear
    assert not isinstance(landscape_artist(viz.plot_filled_contour(narrow_span)).norm, LogNorm)
    assert not isinstance(landscape_artist(viz.plot_filled_contour(wide, log=False)).norm, LogNorm)
    x = np.linspace(-1, 1, 11)
    line = Landscape(x=x, y=np.zeros(0), z=0.05 + x ** 2, metadata={"decomposition": "Random"})
    assert viz.plot_line(line).get_yscale() == "linear"   # a value axis switches only above three decades


def test_narrow_range_is_printed_and_ticks_tell_apart():
    s = np.linspace(-1, 1, 21)
    z = 0.6402 + 0.0039 * (s[None, :] ** 2 + s[:, None] ** 2) / 2
    ls = Landscape(x=s, y=s.copy(), z=z, metadata={"decomposition": "PCA", "explained_variance_ratio": [0.7, 0.2]})
    cb = landscape_artist(viz.plot_filled_contour(ls)).colorbar
    assert cb.ax.get_ylabel() == "loss\nnarrow range 0.6402 to 0.6441 (0.61 %)"
    labels = [t.get_text() for t in cb.ax.get_yticklabels()]
    assert len(labels) >= 3 and len(set(labels)) == len(labels)
    assert [float(t) for t in labels] == pytest.approx(cb.get_ticks(), abs=1e-9)
    ax3 = viz.plot_surface(ls)
    assert "narrow range" in ax3.figure.axes[-1].get_ylabel()
    assert "narrow" not in landscape_artist(viz.plot_filled_contour(random_even())).colorbar.ax.get_ylabel()


def test_importing_and_plotting_leave_the_backend_and_pyplot_alone(tmp_path):
    code = textwrap.dedent(f"""
        import os, sys
        import matplotlib
        raw = dict.__getitem__(matplotlib.rcParams, "backend")
        import viz, numpy as np
        from landscape import Landscape
        s = np.linspace(-1, 1, 5)
        ls = Landscape(x=s, y=s, z=1 + np.add.outer(s ** 2, s ** 2), metadata={{"decomposition": "Random"}})
        viz.plot(ls).figure.savefig({str(tmp_path / "a.png")!r})
        viz.plot(ls, "all").savefig({str(tmp_path / "b.png")!r})
        viz.repr_png(ls)
        assert dict.__getitem__(matplotlib.rcParams, "backend") is raw, "backend changed"
        assert "matplotlib.pyplot" not in sys.modules, "pyplot imported"
        print(matplotlib.get_backend())
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("MPLBACKEND", "DISPLAY")}
    for backend in (None, "svg"):                  # nothing chosen, and a backend the caller chose
        if backend:
            env["MPLBACKEND"] = backend
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode == 0, res.stderr
        if backend:
            assert res.stdout.strip() == backend
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
