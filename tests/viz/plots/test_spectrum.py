"""viz.plot of an eigenvalue density: PyHessian's figure (log density over the eigenvalues), the
top eigenvalues marked where they are, the caption saying how it was made; blocks as small multiples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import viz
from landscape.curvature._density import slq_density
from viz.plots import plot_spectrum

LAM = np.concatenate([np.linspace(-0.2, 1.0, 197), [10.0, 20.0, 50.0]])


def _density(lam: np.ndarray = LAM, **kw):
    return slq_density(lambda v: torch.from_numpy(lam) * v, len(lam), runs=4, steps=30, seed=0, **kw)


def test_one_density_is_drawn_on_a_log_axis_with_its_top_eigenvalues_marked():
    d = _density()
    ax = viz.plot(d)
    assert ax.get_yscale() == "log"
    curve, = [line for line in ax.lines if line.get_gid() == "density"]
    np.testing.assert_array_equal(curve.get_xdata(), d.grid)
    np.testing.assert_array_equal(curve.get_ydata(), d.density)
    marks, = [line for line in ax.lines if line.get_gid() == "top_eigenvalues"]
    np.testing.assert_allclose(marks.get_xdata(), [50.0, 20.0, 10.0], rtol=1e-10)  # the outliers, largest first
    # each mark sits just above the curve at its eigenvalue
    np.testing.assert_allclose(marks.get_ydata(), 2.5 * np.interp(marks.get_xdata(), d.grid, d.density))
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["\u03bb\u2081 = 50", "\u03bb\u2082 = 20", "\u03bb\u2083 = 10"]
    title = ax.get_title()
    assert title.startswith("Hessian eigenvalue density\n")
    assert f"4 runs \u00d7 30 Lanczos steps, Hessian, mean \u03bb = {d.mean:.4g} \u00b1 {d.stderr:.2g}, n = 200" in title
    lo, hi = ax.get_ylim()
    assert lo == pytest.approx(d.density.max() * 1e-7) and hi > d.density.max()
    assert ax.get_xlim()[0] < d.grid[0] and ax.get_xlim()[1] > 50.0  # the outermost mark inside the frame
    assert isinstance(ax.figure, Figure)


def test_blocks_are_small_multiples_each_with_its_own_axes():
    blocks = {"fc1": _density(), "fc2": _density(LAM[:120] * 3), "fc3": _density(LAM[50:] / 2),
              "head": _density(LAM[:90])}
    fig = viz.plot(blocks)
    assert isinstance(fig, Figure)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 4 and len(fig.axes) == 6  # three to a row, the two spare panels hidden
    for ax, (key, d) in zip(shown, blocks.items()):
        assert ax.get_yscale() == "log" and ax.get_title().startswith(f"{key}\n")
        marks, = [line for line in ax.lines if line.get_gid() == "top_eigenvalues"]
        np.testing.assert_array_equal(marks.get_xdata(), d.top)
    assert fig.get_suptitle() == "Hessian eigenvalue density by block"


def test_a_grid_that_cuts_off_mass_is_said_in_the_caption():
    d = _density(grid=np.linspace(-1.0, 5.0, 3000), sigma=0.05)  # the three outliers outside
    assert d.mass == pytest.approx(197 / 200, abs=1e-3)
    ax = plot_spectrum(d, title="cut")
    assert ax.get_title().startswith("cut\n") and f"the grid holds {100 * d.mass:.1f} % of the quadrature's mass" \
        in ax.get_title()


def test_refusals():
    d = _density()
    with pytest.raises(ValueError, match="'kind' parameter of plot must be None"):
        viz.plot(d, "contour")
    with pytest.raises(ValueError, match="'ax' parameter of plot_spectrum must be None for a dict of blocks"):
        viz.plot({"a": d}, ax=viz.plot(d))
    with pytest.raises(ValueError, match="'density' parameter of plot_spectrum must be an instance of "
                                         "'SpectralDensity' or a non-empty dict"):
        plot_spectrum({"a": 1})
    with pytest.raises(ValueError, match="'landscape' parameter of plot must be a landscape.Landscape"):
        viz.plot({})
