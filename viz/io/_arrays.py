"""What viz needs of a Landscape as data: the argument check and the grid of a surface (private)."""

from __future__ import annotations

from typing import Any

import numpy as np

from collector.common import InstanceOf, Options, check_param
from landscape.result import Landscape

__all__ = ["check_landscape", "surface_values", "line_values", "n_d_refusal"]


def n_d_refusal(ls: Landscape, caller: str) -> str:
    """Why ``caller`` does not take an n-D grid, and what does."""
    return (f"{caller} draws lines and planes; {ls.tag or 'this landscape'!r} is a grid of {ls.dims} directions "
            f"(z of shape {np.shape(ls.z)}). HINT: viz.plot_topology(landscape) draws its persistence diagram and "
            "merge tree; landscape.topology() gives the numbers.")


def check_landscape(value: Any, caller: str, name: str = "landscape") -> Landscape:
    """Validate a Landscape argument."""
    return check_param(name, value, [InstanceOf(Landscape, description="a landscape.Landscape")],
                       caller=caller, hint="load one with viz.load_landscapes(path).")


def surface_values(ls: Landscape, surface: str, caller: str) -> np.ndarray:
    """The grid to draw: ``ls.z`` for "loss", else ``ls.surfaces[surface]``."""
    names = ["loss", *ls.surfaces]
    check_param("surface", surface, [Options(names)], caller=caller)
    z = ls.z if surface == "loss" else ls.surfaces[surface]
    z = np.asarray(z, dtype=np.float64)
    x, y = np.asarray(ls.x), np.asarray(ls.y)
    if ls.dims == 1:
        raise ValueError(f"{caller} draws planes; {ls.tag or 'this landscape'!r} is a line (z of shape "
                         f"{np.shape(ls.z)}). HINT: viz.plot_line(landscape), or viz.plot(landscape).")
    if ls.dims > 2:
        raise ValueError(n_d_refusal(ls, caller))
    if z.shape != (y.size, x.size):
        raise ValueError(f"The landscape's {surface!r} grid has shape {z.shape}; expected (len(y), len(x)) = "
                         f"({y.size}, {x.size}).")
    return z


def line_values(ls: Landscape, surface: str, caller: str) -> np.ndarray:
    """The values along a line: ``ls.z`` for "loss", else ``ls.surfaces[surface]`` (shape (len(x),))."""
    names = ["loss", *ls.surfaces]
    check_param("surface", surface, [Options(names)], caller=caller)
    z = np.asarray(ls.z if surface == "loss" else ls.surfaces[surface], dtype=np.float64)
    x = np.asarray(ls.x)
    if ls.dims > 2:
        raise ValueError(n_d_refusal(ls, caller))
    if z.shape != (x.size,):
        raise ValueError(f"{caller} draws lines; {ls.tag or 'this landscape'!r} has {surface!r} of shape {z.shape} "
                         "(a plane). HINT: viz.plot(landscape) draws planes; viz.plot_slices cuts one.")
    return z
