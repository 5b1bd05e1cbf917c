"""The result type: a ``Landscape`` (grid, path, convergence point, metadata) and its message."""

from landscape.result._display import (
    ENTRY_POINT_GROUP,
    png_renderer,
    register_png_renderer,
)
from landscape.result._landscape import Landscape, LossPath

__all__ = ["Landscape", "LossPath", "register_png_renderer", "png_renderer", "ENTRY_POINT_GROUP"]
