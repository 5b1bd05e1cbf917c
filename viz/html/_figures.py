"""The report's figures, built with plotly: 3-D surfaces, contours, lines and scalar curves (private).

Each function returns a figure as plotly's JSON (a dict of ``data`` and ``layout``)
without its template: the page holds one template for all of them. What is marked on
them (NaN/inf and clamped points, the centre, the models) is ``_marks``'; their colour
scale (the PNGs' rule, the levels, the log/linear toggle) ``_scales``'.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

try:
    import plotly
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.offline import get_plotlyjs
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without plotly
    raise ImportError(
        "The interactive report needs the 'plotly' package, which is not installed. "
        "HINT: pip install 'torch-landscape[report]' (or pip install plotly)."
    ) from exc

from landscape.result import Landscape, LossPath
from landscape.topology import Topology
from viz.html._marks import clamped_points, json_values, nonfinite_points, point_traces
from viz.html._scales import Colours, colours, contour_style, surface_style, toggle
from viz.io import diagram_range, tree_range

__all__ = ["PLOTLY_VERSION", "TEMPLATE", "Z_RATIO", "plotly_js", "plane_figures", "line_figure", "scalar_figure",
           "paths_of", "axis_titles", "aspect", "colours", "Colours", "topology_figures"]

PLOTLY_VERSION: str = plotly.__version__
#: Every figure's look (plotly's "plotly_white"), stored once in the page.
TEMPLATE: dict[str, Any] = json.loads(pio.to_json(go.Figure(layout_template="plotly_white")))["layout"]["template"]

#: Path colours that stand out on viridis (no blue, green or yellow): red, orange, magenta, black, brown, grey, pink.
PATH_COLOURS = ("#e41a1c", "#ff7f00", "#e7298a", "#000000", "#a65628", "#7f7f7f", "#f781bf")
#: The 3-D box: the value axis this tall against the plane's longer side; the box is then sized
#: like plotly's default cube (its diagonal), which the default camera frames.
Z_RATIO = 0.6
BOX_DIAGONAL = float(np.sqrt(3.0))
#: Planes whose sides differ by more than this are drawn stretched (and the caption says so).
MAX_ASPECT = 4.0
_HEIGHT = 520


def plotly_js() -> str:
    """plotly.js itself (minified), as the page embeds it."""
    return str(get_plotlyjs())


def _json(fig: Any) -> dict[str, Any]:
    out = json.loads(pio.to_json(fig, validate=False))
    out["layout"].pop("template", None)
    return out


def _finite_range(z: np.ndarray) -> tuple[float, float]:
    finite = z[np.isfinite(z)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    if hi > lo:
        return lo, hi
    pad = abs(lo) * 0.05 or 0.5  # a flat surface still gets a colour scale
    return lo - pad, hi + pad


def paths_of(ls: Landscape) -> dict[str, LossPath]:
    """The paths to draw: ``ls.paths`` (run name -> path, planes shared by runs) when set, else ``ls.path``."""
    paths = getattr(ls, "paths", None)
    if paths:
        return dict(paths)
    return {"training path": ls.path} if ls.path is not None and np.size(ls.path.x) else {}


def axis_titles(ls: Landscape) -> tuple[str, str]:
    """What the axes are: principal components with their share of the variance, directions, models."""
    d = str(ls.metadata.get("decomposition") or ("PCA" if ls.path is not None else "")).lower()
    if d == "pca":
        evr = list(ls.metadata.get("explained_variance_ratio") or [])
        return tuple(f"PC{k + 1}" + (f" ({100 * float(evr[k]):.1f} % of variance)" if k < len(evr) else "")
                     for k in range(2))  # type: ignore[return-value]
    return {
        "random": ("random direction 1", "random direction 2"),
        "hessian": ("Hessian eigenvector 1", "Hessian eigenvector 2"),
        "interpolation": ("\u03b1: (1 \u2212 \u03b1) A + \u03b1 B", ""),
        "curve": ("t along the curve from A to B", ""),
        "plane": ("distance along B \u2212 A", "distance towards C (orthogonal)"),
        "target": ("\u03b1 along B \u2212 A", "second direction"),
    }.get(d, ("direction 1", "direction 2"))


def aspect(ls: Landscape) -> tuple[float, float]:
    """``(true, drawn)`` height-to-width ratio of a plane; drawn is the true one kept within [1/4, 4]."""
    xs = float(np.ptp(ls.x)) if np.size(ls.x) else 0.0
    ys = float(np.ptp(ls.y)) if np.size(ls.y) else 0.0
    true = ys / xs if xs > 0 and ys > 0 else 1.0
    return true, float(np.clip(true, 1 / MAX_ASPECT, MAX_ASPECT))


def _path_traces(paths: dict[str, LossPath], unit: str, three_d: bool) -> list[Any]:
    """Each path in its own colour (legend entry: its name), its end marked with a larger dot."""
    traces: list[Any] = []
    scatter = go.Scatter3d if three_d else go.Scatter
    for k, (name, p) in enumerate(paths.items()):
        colour = PATH_COLOURS[k % len(PATH_COLOURS)]
        px, py, pz = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (p.x, p.y, p.z))
        steps = list(p.intervals) if len(p.intervals) == px.size else list(range(px.size))
        text = [f"{unit} {s}<br>loss {v:.5g}" for s, v in zip(steps, pz)]
        hover = "%{text}<br>x %{x:.4g}<br>y %{y:.4g}<extra>" + name + "</extra>"
        xyz: dict[str, Any] = dict(x=px.tolist(), y=py.tolist())
        end: dict[str, Any] = dict(x=[px[-1]], y=[py[-1]])
        if three_d:
            xyz["z"], end["z"] = json_values(pz), json_values(pz[-1:])
        size = (3, 7) if three_d else (6, 13)
        traces.append(scatter(**xyz, mode="lines+markers", name=name, legendgroup=name, text=text,
                              hovertemplate=hover, line=dict(color=colour, width=5 if three_d else 2.5),
                              marker=dict(size=size[0], color=colour)))
        traces.append(scatter(**end, mode="markers", name=f"{name}: end ({unit} {steps[-1]})", legendgroup=name,
                              text=text[-1:], hovertemplate=hover,
                              marker=dict(size=size[1], color=colour, line=dict(color="white", width=2))))
    return traces


def plane_figures(ls: Landscape, z: np.ndarray, name: str, c: Colours) -> tuple[dict[str, Any], dict[str, Any]]:
    """The 3-D surface and the contour view of one surface of a plane (``name``: "loss", "accuracy", ...).

    The 3-D box keeps the plane's proportions (within [1/4, 4]) with the value axis
    ``Z_RATIO`` of its width, whatever the units, so the default camera frames the surface.
    Both are coloured by ``c`` (``_scales``: the PNGs' rule, ``c.levels`` contour levels,
    a log/linear toggle).
    """
    x, y = np.asarray(ls.x, dtype=np.float64), np.asarray(ls.y, dtype=np.float64)
    _lo, hi = _finite_range(z)
    xt, yt = axis_titles(ls)
    unit = str(ls.metadata.get("unit") or "step")
    paths = paths_of(ls)
    on_loss = name == "loss"  # the path, the markers and the centre carry the loss, not the other surfaces
    hover = f"x %{{x:.4g}}<br>y %{{y:.4g}}<br>{name} %{{z:.5g}}<extra></extra>"

    def surface_attrs(scale: Any, flat: bool = False) -> dict[str, Any]:
        return surface_style(z, scale, name, flat)

    attrs = surface_attrs(c.shown)
    _bar(attrs["colorbar"])
    surface: list[Any] = [go.Surface(x=x.tolist(), y=y.tolist(), z=json_values(z), colorscale="Viridis", name=name,
                                     hovertemplate=hover, **attrs)]
    if on_loss:
        surface += _path_traces(paths, unit, True) + point_traces(ls, "3d")
    surface += nonfinite_points(x, y, z, hi, name, True) + clamped_points(ls, z, hi, name, "3d")
    _true, drawn = aspect(ls)
    box = np.array([1.0, drawn, Z_RATIO] if drawn <= 1 else [1 / drawn, 1.0, Z_RATIO])
    ax, ay, az = (float(v) for v in box * BOX_DIAGONAL / np.linalg.norm(box))
    scene = dict(xaxis=dict(title=dict(text=xt)), yaxis=dict(title=dict(text=yt)),
                 zaxis=dict(title=dict(text=name)), aspectmode="manual",
                 aspectratio=dict(x=ax, y=ay, z=az), camera=dict(eye=dict(x=1.6, y=-1.6, z=1.15)))
    fig3d = go.Figure(surface, layout=dict(scene=scene, height=_HEIGHT, margin=dict(l=0, r=0, t=30, b=0),
                                           showlegend=True, legend=dict(x=0, y=1, bgcolor="rgba(255,255,255,0.7)"),
                                           updatemenus=toggle(c, lambda s: surface_attrs(s, True))))

    def contour_attrs(scale: Any, flat: bool = False) -> dict[str, Any]:
        return contour_style(z, scale, c.levels, name, flat)

    attrs = contour_attrs(c.shown)
    _bar(attrs["colorbar"])
    contour: list[Any] = [go.Contour(x=x.tolist(), y=y.tolist(), customdata=json_values(z), colorscale="Viridis",
                                     autocontour=False, line=dict(width=0.5, color="rgba(255,255,255,0.6)"),
                                     connectgaps=False, name=name, **_merge(attrs, contours=dict(
                                         coloring="fill", showlines=True)),
                                     hovertemplate=hover.replace("%{z:.5g}", "%{customdata:.5g}"))]
    contour += _path_traces(paths, unit, False) + point_traces(ls, "plane")
    contour += nonfinite_points(x, y, z, hi, name, False) + clamped_points(ls, z, hi, name, "plane")
    yaxis: dict[str, Any] = dict(title=dict(text=yt))
    if drawn == _true:  # true proportions: one unit is as long on both axes
        yaxis.update(scaleanchor="x", scaleratio=1)
    fig2d = go.Figure(contour, layout=dict(xaxis=dict(title=dict(text=xt)), yaxis=yaxis, height=_HEIGHT,
                                           margin=dict(l=60, r=10, t=30, b=50), showlegend=True,
                                           legend=dict(orientation="h", y=-0.15),
                                           updatemenus=toggle(c, lambda s: contour_attrs(s, True))))
    return _json(fig3d), _json(fig2d)


def _bar(colorbar: dict[str, Any]) -> None:
    """The colour bar's size, its title beside it (a long "loss (log scale)" above would push the bar
    into the plot)."""
    colorbar.update(len=0.75, thickness=14)
    colorbar["title"]["side"] = "right"


def _merge(attrs: dict[str, Any], **nested: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` with the dicts ``nested`` merged into its own of the same names."""
    return {**attrs, **{k: {**attrs.get(k, {}), **v} for k, v in nested.items()}}


def line_figure(ls: Landscape, z: np.ndarray, name: str, log: bool) -> dict[str, Any]:
    """A line (random line, interpolation): the values along x (a NaN/inf value a gap, never bridged),
    the models or the centre marked; ``log``: a logarithmic value axis."""
    x = np.asarray(ls.x, dtype=np.float64)
    _lo, hi = _finite_range(z)
    traces: list[Any] = [go.Scatter(x=x.tolist(), y=json_values(z), mode="lines+markers", name=name, connectgaps=False,
                                    line=dict(color="#1f77b4", width=2), marker=dict(size=4),
                                    hovertemplate=f"x %{{x:.4g}}<br>{name} %{{y:.5g}}<extra></extra>")]
    if name == "loss":
        traces += point_traces(ls, "line")
    traces += nonfinite_points(x, None, z, hi, name, False) + clamped_points(ls, z, hi, name, "line")
    fig = go.Figure(traces, layout=dict(xaxis=dict(title=dict(text=axis_titles(ls)[0])),
                                        yaxis=dict(title=dict(text=f"{name} (log scale)" if log else name),
                                                   type="log" if log else "linear"), height=420,
                                        margin=dict(l=60, r=10, t=10, b=50), legend=dict(orientation="h", y=-0.2)))
    return _json(fig)


def scalar_figure(tag: str, series: list[tuple[str, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """One scalar tag over the steps, one curve per run (legend: the runs)."""
    traces: list[Any] = []
    for run, steps, values in series:
        s, v = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
        traces.append(go.Scatter(x=s.tolist(), y=json_values(v), mode="lines", name=run, connectgaps=False,
                                 hovertemplate=f"step %{{x}}<br>{tag} %{{y:.5g}}<extra>{run}</extra>"))
        traces += nonfinite_points(s, None, v, _finite_range(v)[1], tag, False, prefix=f"{run}: ")
    fig = go.Figure(traces, layout=dict(xaxis=dict(title=dict(text="step")), yaxis=dict(title=dict(text=tag)),
                                        height=380, margin=dict(l=60, r=10, t=10, b=50)))
    return _json(fig)


def topology_figures(topo: Topology) -> tuple[dict[str, Any], dict[str, Any]]:
    """The persistence diagram (each finite pair above the diagonal, the classes that never die on the top
    line) and the merge tree (a dendrogram: value upwards; the branch to a component's highest point
    leaves the top, its value in the hover), as the PNG's topology figure draws them."""
    pairs = topo.pairs
    lo, top, span = diagram_range(topo)
    traces: list[Any] = [go.Scatter(x=[lo, top], y=[lo, top], mode="lines", line=dict(color="#999", width=1),
                                    hoverinfo="skip", showlegend=False)]
    if topo.threshold > 0:
        traces.append(go.Scatter(x=[lo, top, top, lo], y=[lo, top, top + topo.threshold, lo + topo.threshold],
                                 fill="toself", mode="none", fillcolor="rgba(0,0,0,0.12)", hoverinfo="skip",
                                 name=f"persistence <= {topo.threshold:g}"))
    traces.append(go.Scatter(x=pairs[:, 0].tolist(), y=pairs[:, 1].tolist(), mode="markers", name="pairs",
                             marker=dict(color="#1f4e99", size=7),
                             customdata=(pairs[:, 1] - pairs[:, 0]).tolist(),
                             hovertemplate="birth %{x:.5g}<br>death %{y:.5g}<br>persistence %{customdata:.4g}"
                                           "<extra></extra>"))
    traces.append(go.Scatter(x=topo.essential.values.tolist(), y=[top] * len(topo.essential), mode="markers",
                             name="never die", marker=dict(color="black", symbol="triangle-up", size=9),
                             hovertemplate="birth %{x:.5g}<br>never dies<extra></extra>"))
    diagram = go.Figure(traces, layout=dict(
        xaxis=dict(title=dict(text="birth (a minimum's loss)"), range=[lo, top]),
        yaxis=dict(title=dict(text="death (its saddle's loss)"), range=[lo, top + 0.02 * span]),
        height=420, margin=dict(l=60, r=10, t=30, b=50), legend=dict(orientation="h", y=-0.2),
        title=dict(text=f"persistence diagram ({topo.connectivity} neighbours)", font=dict(size=13))))
    tree = topo.merge_tree
    xs = tree.layout()
    low, ttop, tspan = tree_range(tree)
    ex: list[float | None] = []
    ey: list[float | None] = []
    for c, p in tree.edges.tolist():
        up = min(float(tree.values[p]), ttop) if tree.kinds[p] == "maximum" else float(tree.values[p])
        ex += [float(xs[c]), float(xs[c]), float(xs[p]), None]
        ey += [float(tree.values[c]), up, up, None]
    ttraces: list[Any] = [go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#555", width=1.2),
                                     hoverinfo="skip", showlegend=False)]
    for kind, colour, symbol, label in (("minimum", "#1f4e99", "triangle-down", "minima"),
                                        ("saddle", "#c0392b", "x", "saddles")):
        at = tree.kinds == kind
        where = [", ".join(str(int(i)) for i in pos) for pos in tree.positions[at]]
        ttraces.append(go.Scatter(x=xs[at].tolist(), y=tree.values[at].tolist(), mode="markers", name=label,
                                  marker=dict(color=colour, symbol=symbol, size=9), customdata=where,
                                  hovertemplate=f"{kind} %{{y:.5g}}<br>grid index (%{{customdata}})<extra></extra>"))
    roots = tree.kinds == "maximum"
    ttraces.append(go.Scatter(x=xs[roots].tolist(), y=[ttop] * int(roots.sum()), mode="markers",
                              name="to the highest point", marker=dict(color="#555", symbol="triangle-up", size=8),
                              customdata=tree.values[roots].tolist(),
                              hovertemplate="highest point %{customdata:.5g}<extra></extra>"))
    merge = go.Figure(ttraces, layout=dict(
        xaxis=dict(showticklabels=False, zeroline=False, showgrid=False),
        yaxis=dict(title=dict(text="loss"), range=[low, ttop + 0.02 * tspan]),
        height=420, margin=dict(l=60, r=10, t=30, b=50), legend=dict(orientation="h", y=-0.2),
        title=dict(text=f"merge tree: {len(topo.minima)} {'minimum' if len(topo.minima) == 1 else 'minima'}, "
                        f"{len(topo.saddles)} saddle{'' if len(topo.saddles) == 1 else 's'}", font=dict(size=13))))
    return _json(diagram), _json(merge)
