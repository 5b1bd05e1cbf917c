"""Landscapes from files (summaries, HDF5) and to files (VTP, CSV, HDF5), and what every picture
of a landscape shows (its value scale, its centre and the centre's name, its clamped points)."""

from viz.io._arrays import check_landscape, line_values, n_d_refusal, surface_values
from viz.io._export import FORMATS, export
from viz.io._load import find_runs, load_landscapes
from viz.io._picture import (
    AXIS_LOG_RANGE,
    CLIP_PERCENTILE,
    LOG_RANGE,
    NARROW,
    ValueScale,
    centre,
    centre_label,
    centre_name,
    clamped_grid,
    clamped_text,
    diagram_range,
    log_ticks,
    tick_labels,
    tree_range,
    value_scale,
)

# check_landscape, surface_values, line_values and the picture's rules (value_scale, centre, ...):
# what viz.plots and viz.html take from here, so that a PNG and the report draw one picture
__all__ = ["load_landscapes", "find_runs", "export", "FORMATS", "check_landscape", "surface_values", "line_values",
           "n_d_refusal", "ValueScale", "value_scale", "log_ticks", "tick_labels", "centre", "centre_name",
           "centre_label", "clamped_grid", "clamped_text", "LOG_RANGE", "AXIS_LOG_RANGE", "CLIP_PERCENTILE", "NARROW",
           "diagram_range", "tree_range"]
