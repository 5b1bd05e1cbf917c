"""TensorBoard: summary runs (ours or MindSpore's) converted to TensorBoard event files.

Above :mod:`viz.plots`: each landscape also becomes a picture (the filled contour with
its path). Needs the optional ``tensorboard`` package, imported when this loads.
"""

from viz.tensorboard._export import export_tensorboard

__all__ = ["export_tensorboard"]
