"""Matplotlib pictures of landscapes: contours, heatmaps, surfaces, paths, overviews, animations."""

# Figures are matplotlib ``Figure`` objects, never pyplot's: importing or plotting selects no
# backend and opens no window; the caller's backend and figures are theirs.
from viz.plots._animate import animate
from viz.plots._contour import plot_contour, plot_filled_contour, plot_heatmap
from viz.plots._curvature import compare_eigen_ratio, plot_eigen_ratio
from viz.plots._depth import view_angle
from viz.plots._line import plot_line
from viz.plots._overview import compare, plot_overview
from viz.plots._path import plot_path
from viz.plots._plot import plot, repr_png
from viz.plots._slices import plot_slices
from viz.plots._spectrum import plot_spectrum
from viz.plots._surface import plot_surface
from viz.plots._topology import plot_topology

__all__ = ["plot", "plot_contour", "plot_filled_contour", "plot_heatmap", "plot_surface", "plot_line", "plot_path",
           "plot_slices", "plot_overview", "compare", "animate", "repr_png", "view_angle", "plot_eigen_ratio",
           "compare_eigen_ratio", "plot_spectrum", "plot_topology"]
