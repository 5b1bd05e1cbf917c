"""Several runs on one plane: each path in its own colour, its end marked, its distance from the
plane in the legend."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

import viz
from landscape.result import Landscape, LossPath


def _shared():
    x = y = np.linspace(-1, 1, 7)
    z = 1.0 + np.add.outer(y ** 2, x ** 2)
    paths = {"sgd": LossPath(np.array([0.0, -0.4, -0.8]), np.array([0.0, 0.3, 0.5]), np.array([2.0, 1.5, 1.2]),
                             [1, 2, 3]),
             "adam": LossPath(np.array([0.0, -0.5, -0.6]), np.array([0.0, -0.2, -0.4]), np.array([2.0, 1.4, 1.1]),
                              [1, 2, 3])}
    md = {"decomposition": "PCA", "explained_variance_ratio": [0.8, 0.15], "centre_on": "start",
          "path_distance": {"sgd": [0.0, 0.12, 0.3], "adam": [0.0, 0.001, 0.002]}, "centre": [0.0, 0.0, 2.0]}
    return Landscape(x=x, y=y, z=z, path=paths["sgd"], paths=paths, convergence_point=(0.0, 0.0, 2.0), metadata=md)


def test_each_run_is_drawn_in_its_colour_with_its_end_and_distance():
    ls = _shared()
    ax = Figure().add_subplot()
    viz.plot_filled_contour(ls, ax=ax)
    lines = {ln.get_gid(): ln for ln in ax.get_lines()}
    for name, run in ls.paths.items():
        np.testing.assert_array_equal(lines[f"path-{name}"].get_xdata(), run.x)
        np.testing.assert_array_equal(lines[f"path-{name}-end"].get_xdata(), run.x[-1:])
    assert lines["path-sgd"].get_color() != lines["path-adam"].get_color()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "sgd (up to 30% off the plane)" in legend
    assert "adam" in legend  # 0.2 % off: said as on the plane
    assert "shared centre: the runs' start (loss 2)" in legend
