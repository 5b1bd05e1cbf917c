"""The topology of a landscape drawn: its persistence diagram and merge tree beside the landscape (private).

A plane is drawn as its filled contour with the minima and saddles marked, a line as the loss along
it with its barriers, an n-D grid (no picture of its own) as the two topology panels alone. The
numbers are :meth:`landscape.Landscape.topology`'s; the title says the threshold and connectivity
they used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from collector.common import check_param
from landscape.result import Landscape
from landscape.topology import Topology
from viz.io import check_landscape, diagram_range, tree_range
from viz.plots import _style
from viz.plots._contour import plot_filled_contour
from viz.plots._line import plot_line

__all__ = ["plot_topology", "draw_persistence", "draw_merge_tree"]

MINIMUM_COLOR = "#1f4e99"
SADDLE_COLOR = "#c0392b"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def draw_merge_tree(ax: Axes, topo: Topology) -> None:
    """The merge tree as a dendrogram: value upwards, each branch an elbow to the saddle it joins; the
    branch to a component's highest point leaves the top of the panel (its value in the legend), so
    that the minima and saddles, not the highest loss, set the scale."""
    tree = topo.merge_tree
    xs = tree.layout()
    low, top, _ = tree_range(tree)
    for c, p in tree.edges.tolist():
        up = min(float(tree.values[p]), top) if tree.kinds[p] == "maximum" else float(tree.values[p])
        ax.plot([xs[c], xs[c], xs[p]], [tree.values[c], up, up], color="0.35", lw=1.0, clip_on=True)
    for kind, color, marker in (("minimum", MINIMUM_COLOR, "v"), ("saddle", SADDLE_COLOR, "x")):
        at = tree.kinds == kind
        if at.any():
            ax.scatter(xs[at], tree.values[at], color=color, marker=marker, s=22, zorder=3,
                       label={"minimum": "minima", "saddle": "saddles"}[kind])
    for r in np.flatnonzero(tree.kinds == "maximum"):
        ax.scatter([xs[r]], [top], color="0.3", marker="^", s=22, zorder=3, clip_on=False,
                   label=f"to the highest point ({tree.values[r]:.4g})")
    ax.set_ylim(low, top)
    ax.set_xticks([])
    ax.set_ylabel("loss")
    ax.set_title(f"merge tree: {_plural(len(topo.minima), 'minimum', 'minima')}, "
                 f"{_plural(len(topo.saddles), 'saddle', 'saddles')}", fontsize="medium")
    if len(tree):
        ax.legend(fontsize="small", loc="upper right")


def draw_persistence(ax: Axes, topo: Topology) -> None:
    """The persistence diagram: each finite pair (birth, death) above the diagonal, the threshold's band
    along it, each class that never dies on a line at the top."""
    pairs = topo.pairs
    lo, top, span = diagram_range(topo)
    ax.plot([lo, top], [lo, top], color="0.5", lw=0.8)
    if topo.threshold > 0:
        ax.fill_between([lo, top], [lo, top], [lo + topo.threshold, top + topo.threshold], color="0.85",
                        label=f"persistence <= {topo.threshold:g}")
    if pairs.size:
        ax.scatter(pairs[:, 0], pairs[:, 1], color=MINIMUM_COLOR, s=18, zorder=3,
                   label=_plural(len(pairs), "pair", "pairs"))
    if len(topo.essential):
        ax.scatter(topo.essential.values, np.full(len(topo.essential), top), color="black", marker="^", s=26,
                   zorder=3, clip_on=False, label="never die (drawn at the top)")
    ax.set_xlim(lo, top)
    ax.set_ylim(lo, top + 0.02 * span)
    ax.set_xlabel("birth (a minimum's loss)")
    ax.set_ylabel("death (its saddle's loss)")
    ax.set_title(f"persistence diagram ({topo.connectivity} neighbours)", fontsize="medium")
    ax.legend(fontsize="small", loc="lower right")


def _mark_plane(ax: Axes, topo: Topology) -> None:
    for points, color, marker, label in ((topo.minima, MINIMUM_COLOR, "v", "minima"),
                                         (topo.saddles, SADDLE_COLOR, "x", "saddles")):
        if len(points) and points.coordinates is not None:  # array order (y, x)
            ax.scatter(points.coordinates[:, 1], points.coordinates[:, 0], color=color, marker=marker, s=40,
                       zorder=4, label=label, edgecolors="white" if marker == "v" else None, linewidths=0.6)
    ax.legend(fontsize="small", loc="upper right")


def _mark_line(ax: Axes, topo: Topology) -> None:
    for b in topo.barriers():
        if b.saddle_at is None or b.minimum_at is None:
            continue
        ax.annotate("", xy=(b.saddle_at[0], b.value), xytext=(b.saddle_at[0], b.value - b.height),
                    arrowprops={"arrowstyle": "<->", "color": SADDLE_COLOR, "lw": 1.0})
        ax.annotate(f"{b.height:.3g}", (b.saddle_at[0], b.value), textcoords="offset points", xytext=(3, 3),
                    fontsize="small", color=SADDLE_COLOR)
    if len(topo.minima) and topo.minima.coordinates is not None:
        ax.scatter(topo.minima.coordinates[:, 0], topo.minima.values, color=MINIMUM_COLOR, marker="v", s=30,
                   zorder=4, label="minima")


def plot_topology(landscape: Landscape, *, fig: Figure | None = None, connectivity: str = "axis",
                  threshold: float = 0.0, log: _style.LogOption = "auto", title: str | None = None) -> Figure:
    """The landscape with its minima and saddles marked, its persistence diagram and its merge tree.

    A plane is drawn as its filled contour, a line as the loss along it (each barrier an arrow of
    its height); an n-D grid, which has no picture of its own, as the diagram and the tree alone.
    The numbers are ``landscape.topology(connectivity, threshold)``'s.

    Parameters
    ----------
    landscape : Landscape
    fig : Figure, optional
        The Figure to draw into (a new one by default).
    connectivity : {"axis", "full"}, default="axis"
    threshold : float, default=0.0
        Pairs of persistence at most this are simplified away (and shaded in the diagram).
    log : bool or "auto", default="auto"
        The landscape panel's colour or value scale.
    title : str, optional
        The Figure's title; by default the tag and the topology's one-line summary.

    Returns
    -------
    Figure

    Examples
    --------
    >>> fig = viz.plot_topology(landscape, threshold=0.01)    # doctest: +SKIP
    >>> fig.savefig("topology.png", dpi=150)                   # doctest: +SKIP
    """
    caller = "plot_topology"
    ls = check_landscape(landscape, caller)
    _style.check_common(caller, log=log, fig=fig, title=title)
    topo = ls.topology(connectivity=connectivity, threshold=threshold)
    picture = ls.dims <= 2
    if fig is None:
        fig = Figure(figsize=(16.5 if picture else 11.0, 5.0), layout="constrained")
    axes = fig.subplots(1, 3 if picture else 2, width_ratios=[1.25, 1.0, 1.0] if picture else [1.0, 1.0])
    rest: Any = axes[1:] if picture else axes
    if ls.dims == 2:
        plot_filled_contour(ls, axes[0], log=log, title="minima and saddles")
        _mark_plane(axes[0], topo)
    elif ls.dims == 1:
        plot_line(ls, axes[0], log=log, metric=None, title="barriers")
        _mark_line(axes[0], topo)
    draw_persistence(rest[0], topo)
    draw_merge_tree(rest[1], topo)
    check_param("title", title, [None, str], caller=caller)
    fig.suptitle(title if title is not None else f"{ls.tag or 'landscape'}: {topo.summary()}", fontsize="medium",
                 wrap=True)
    return fig
