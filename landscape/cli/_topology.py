"""``landscape topology RUN``: the topology of every landscape of a run, one line each."""

from __future__ import annotations

import argparse
import json
from typing import Any

from landscape.cli._select import select_landscapes
from landscape.result import Landscape
from landscape.topology import Topology

__all__ = ["run_topology", "topology_record"]


def topology_record(ls: Landscape, topo: Topology, basin: float | None) -> dict[str, Any]:
    """What ``--json`` prints of one landscape: the counts with the threshold and connectivity they used."""
    out: dict[str, Any] = {
        "tag": ls.tag, "shape": list(topo.shape), "connectivity": topo.connectivity, "threshold": topo.threshold,
        "minima": len(topo.minima), "saddles": len(topo.saddles), "pairs": topo.pairs.tolist(),
        "components": len(topo.essential), "smad": topo.smad(), "smad_normalized": topo.smad(normalize=True),
        "smad_weighted": topo.smad(normalize=True, weighted=True), "total_persistence": topo.total_persistence,
        "non_finite": topo.non_finite, "points": topo.points,
    }
    if ls.dims == 1:
        out["barriers"] = [{"at": b.saddle_at[0] if b.saddle_at else b.saddle[0], "height": b.height,
                            "value": b.value} for b in topo.barriers()]
    if basin is not None:
        b = topo.basin(basin)
        out["basin"] = {"height": basin, "minimum": list(b.minimum), "value": b.value, "points": b.points,
                        "share": b.share, "at_edge": b.at_edge, "contains_centre": b.contains,
                        "extent": None if b.coordinates is None else b.coordinates.tolist()}
    return out


def _basin_text(topo: Topology, height: float) -> str:
    b = topo.basin(height)
    where = "holds the centre" if b.contains else "does not hold the centre"
    edge = ", cut by the grid's edge" if b.at_edge else ""
    return (f"; the centre's basin {height:g} above its minimum: {b.points} points ({100 * b.share:.1f} %), "
            f"{where}{edge}")


def run_topology(args: argparse.Namespace) -> int:
    landscapes = select_landscapes(args.path, args.tag)
    records = []
    for ls in landscapes:
        topo = ls.topology(connectivity=args.connectivity, threshold=args.threshold)
        if args.json:
            records.append(topology_record(ls, topo, args.basin))
            continue
        text = f"{ls.tag or 'landscape'}: {topo.summary()}"
        if args.basin is not None:
            text += _basin_text(topo, args.basin)
        print(text)
    if args.json:
        print(json.dumps(records, indent=1))
    return 0
