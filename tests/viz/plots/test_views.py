"""Lines and planes through models: the line plot (two y axes) and the models marked."""

from __future__ import annotations

import numpy as np
import pytest

import viz
from collector import InvalidParameterError
from landscape import Landscape

X = np.linspace(-0.5, 1.5, 9)
Z = (X - 1.0) ** 2 + 0.25


def line(**changes) -> Landscape:
    kw = dict(x=X, y=np.zeros(0), z=Z, convergence_point=(0.0, 0.0, 1.25),
              metadata={"decomposition": "Interpolation"}, surfaces={"accuracy": 1 - Z / 4},
              tag="interpolation_[1, 10]", markers={"A": (0.0, 0.0, 1.25), "B": (1.0, 0.0, 0.25)})
    kw.update(changes)
    return Landscape(**kw)


def plane() -> Landscape:
    x, y = np.linspace(-0.2, 2.2, 7), np.linspace(-0.1, 0.6, 4)
    return Landscape(x=x, y=y, z=np.add.outer(y ** 2, (x - 1) ** 2), convergence_point=(0.0, 0.0, 1.0),
                     metadata={"decomposition": "Plane"}, tag="plane_[1, 5, 10]",
                     markers={"A": (0.0, 0.0, 1.0), "B": (2.0, 0.0, 1.0), "C": (1.5, 0.5, 0.5)})


def test_line_plot_has_loss_and_accuracy_axes_and_the_models():
    ax = viz.plot(line())
    (loss,) = [ln for ln in ax.lines if ln.get_gid() == "line"]
    np.testing.assert_array_equal(loss.get_xdata(), X)
    np.testing.assert_array_equal(loss.get_ydata(), Z)
    (metric,) = [ln for ln in ax.right_ax.lines if ln.get_gid() == "metric"]
    np.testing.assert_allclose(metric.get_ydata(), 1 - Z / 4)
    assert ax.right_ax.get_ylabel() == "accuracy"
    marks = {ln.get_label(): (ln.get_xdata()[0], ln.get_ydata()[0]) for ln in ax.lines if ln.get_gid() == "marker"}
    assert marks == {"model A (loss 1.25)": (0.0, 1.25), "model B (loss 0.25)": (1.0, 0.25)}
    assert not hasattr(viz.plot_line(line(), metric=None), "right_ax")


def test_random_line_marks_its_centre_and_kinds_are_checked():
    ls = line(markers={}, surfaces={}, metadata={"decomposition": "Random"})
    ax = viz.plot(ls, "line")
    assert [ln.get_gid() for ln in ax.lines if ln.get_gid() == "convergence"] == ["convergence"]
    assert ax.get_xlabel() == "random direction"
    with pytest.raises(InvalidParameterError, match="'kind' parameter of plot must be line"):
        viz.plot(ls, "contour")
    with pytest.raises(InvalidParameterError, match="'kind' parameter of plot must be one of"):
        viz.plot(plane(), "line")
    with pytest.raises(ValueError, match="is a line"):
        viz.plot_contour(ls)
    assert viz.repr_png(ls)[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", ["contour", "filled", "heatmap", "surface"])
def test_plane_plots_mark_the_three_models(kind):
    ax = viz.plot(plane(), kind)
    marks = sorted(ln.get_label() for ln in ax.lines if ln.get_gid() == "marker")
    assert marks == ["model A (loss 1)", "model B (loss 1)", "model C (loss 0.5)"]
    assert not [ln for ln in ax.lines if ln.get_gid() == "convergence"]  # the markers show the models


def test_overview_draws_lines_as_lines_and_compare_refuses_them():
    fig = viz.plot_overview([line(), plane()], kind="surface")
    names = [getattr(ax, "name", "") for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert names == ["rectilinear", "rectilinear", "3d"]  # the line, its metric's twin axis, the surface
    with pytest.raises(ValueError, match="is a line"):
        viz.compare([line(), plane()])
