"""The result type: a ``Landscape`` (grid, path, convergence point, metadata) and its message."""

from landscape.result._landscape import Landscape, LossPath

__all__ = ["Landscape", "LossPath"]
