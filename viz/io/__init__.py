"""Landscapes from files (summaries, HDF5) and to files (VTP, CSV, HDF5)."""

from viz.io._export import FORMATS, export
from viz.io._load import find_runs, load_landscapes

__all__ = ["load_landscapes", "find_runs", "export", "FORMATS"]
