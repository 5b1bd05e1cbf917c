"""Landscapes from files (summaries, HDF5) and to files (VTP, CSV, HDF5)."""

from viz.io._arrays import check_landscape, line_values, surface_values
from viz.io._export import FORMATS, export
from viz.io._load import find_runs, load_landscapes

# check_landscape, surface_values, line_values: what viz.plots and viz.html take from here
__all__ = ["load_landscapes", "find_runs", "export", "FORMATS", "check_landscape", "surface_values", "line_values"]
