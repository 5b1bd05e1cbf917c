"""The shape of a landscape in numbers: persistence pairs, minima, saddles, merge tree, SMAD.

Pure NumPy (no torch): :func:`grid_topology` summarises any grid of values -- a line, a plane,
an n-D grid -- by a union-find over its points (``landscape/topology/_sweep.py``), and
:func:`barriers` lists the barriers along a line. ``Landscape.topology`` calls it on a
landscape's loss.
"""

from landscape.topology._sweep import CONNECTIVITIES
from landscape.topology._topology import (
    Barrier,
    Basin,
    CriticalPoints,
    MergeTree,
    Topology,
    barriers,
    grid_topology,
)

__all__ = ["grid_topology", "barriers", "Topology", "CriticalPoints", "MergeTree", "Barrier", "Basin",
           "CONNECTIVITIES"]
