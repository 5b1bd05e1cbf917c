"""The report's figures, built with plotly: 3-D surfaces, contours, lines and scalar curves (private).

Each function returns a figure as plotly's JSON (a dict of ``data`` and ``layout``)
without its template: the page holds one template for all of them. Non-finite values
are never dropped silently: the grid keeps a gap there (JSON ``null``) and a red ``x``
marks each such point, drawn at the top of the finite range, with the value (nan, inf,
-inf) under the cursor.
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

__all__ = ["PLOTLY_VERSION", "TEMPLATE", "Z_RATIO", "plotly_js", "plane_figures", "line_figure", "scalar_figure",
           "paths_of", "axis_titles", "aspect"]

PLOTLY_VERSION: str = plotly.__version__
#: Every figure's look (plotly's "plotly_white"), stored once in the page.
TEMPLATE: dict[str, Any] = json.loads(pio.to_json(go.Figure(layout_template="plotly_white")))["layout"]["template"]

#: Path colours that stand out on viridis (no blue, green or yellow): red, orange, magenta, black, brown, grey, pink.
PATH_COLOURS = ("#e41a1c", "#ff7f00", "#e7298a", "#000000", "#a65628", "#7f7f7f", "#f781bf")
_NONFINITE = dict(symbol="x", color="#d62728", size=9, line=dict(width=1, color="#7f0000"))
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


def _values(a: Any) -> list:
    """Floats with None where not finite (JSON null: a gap), nested like ``a``."""
    arr = np.asarray(a, dtype=np.float64)
    out = arr.astype(object)
    out[~np.isfinite(arr)] = None
    return out.tolist()


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
        "plane": ("distance along B \u2212 A", "distance towards C (orthogonal)"),
        "target": ("\u03b1 along B \u2212 A", "second direction"),
    }.get(d, ("direction 1", "direction 2"))


def aspect(ls: Landscape) -> tuple[float, float]:
    """``(true, drawn)`` height-to-width ratio of a plane; drawn is the true one kept within [1/4, 4]."""
    xs = float(np.ptp(ls.x)) if np.size(ls.x) else 0.0
    ys = float(np.ptp(ls.y)) if np.size(ls.y) else 0.0
    true = ys / xs if xs > 0 and ys > 0 else 1.0
    return true, float(np.clip(true, 1 / MAX_ASPECT, MAX_ASPECT))


def _nonfinite_points(xs: np.ndarray, ys: np.ndarray | None, z: np.ndarray, top: float,
                      name: str, three_d: bool, prefix: str = "") -> list[Any]:
    """Red ``x`` marks where ``z`` is not finite (nothing when all is finite)."""
    bad = ~np.isfinite(z)
    if not bad.any():
        return []
    text = [str(v) for v in z[bad]]
    label = f"{prefix}not finite: {int(bad.sum())} of {z.size}"
    hover = "x %{x:.4g}" + ("<br>y %{y:.4g}" if ys is not None else "") + f"<br>{name} %{{text}}<extra></extra>"
    if ys is None:
        return [go.Scatter(x=xs[bad].tolist(), y=[top] * int(bad.sum()), mode="markers", marker=_NONFINITE,
                           name=label, text=text, hovertemplate=hover)]
    gx, gy = np.meshgrid(xs, ys)
    kw = dict(x=gx[bad].tolist(), y=gy[bad].tolist(), mode="markers", name=label, text=text, hovertemplate=hover)
    if three_d:
        return [go.Scatter3d(z=[top] * int(bad.sum()), marker=dict(_NONFINITE, size=4), **kw)]
    return [go.Scatter(marker=_NONFINITE, **kw)]


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
            xyz["z"], end["z"] = _values(pz), _values(pz[-1:])
        size = (3, 7) if three_d else (6, 13)
        traces.append(scatter(**xyz, mode="lines+markers", name=name, legendgroup=name, text=text,
                              hovertemplate=hover, line=dict(color=colour, width=5 if three_d else 2.5),
                              marker=dict(size=size[0], color=colour)))
        traces.append(scatter(**end, mode="markers", name=f"{name}: end ({unit} {steps[-1]})", legendgroup=name,
                              text=text[-1:], hovertemplate=hover,
                              marker=dict(size=size[1], color=colour, line=dict(color="white", width=2))))
    return traces


def _point_traces(ls: Landscape, view: str) -> list[Any]:
    """The models a view passes through (A, B, C), or else the trained weights / convergence point.

    ``view``: "3d" at ``(x, y, loss)``, "plane" at ``(x, y)``, "line" at ``(x, loss)``.
    """
    scatter = go.Scatter3d if view == "3d" else go.Scatter
    where = "x %{x:.4g}" + ("" if view == "line" else "<br>y %{y:.4g}")

    def coords(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> dict[str, Any]:
        if view == "3d":
            return dict(x=x.tolist(), y=y.tolist(), z=_values(z))
        return dict(x=x.tolist(), y=_values(z) if view == "line" else y.tolist())

    if ls.markers:
        names = list(ls.markers)
        mx, my, mz = (np.array([ls.markers[n][i] for n in names], dtype=np.float64) for i in range(3))
        return [scatter(**coords(mx, my, mz), mode="markers+text", text=names, textposition="top center",
                        name="models", customdata=[f"{v:.5g}" for v in mz], textfont=dict(size=14, color="black"),
                        hovertemplate=f"model %{{text}}<br>{where}<br>loss %{{customdata}}<extra></extra>",
                        marker=dict(symbol="square", size=6 if view == "3d" else 12,
                                    color="white", line=dict(color="black", width=2)))]
    cx, cy, cz = (np.array([float(v)]) for v in ls.convergence_point)
    trained = str(ls.metadata.get("decomposition", "")).lower() == "pca" or ls.path is not None
    name = "trained weights" if trained else "convergence point" if ls.dims == 2 else "centre"
    return [scatter(**coords(cx, cy, cz), mode="markers", name=f"{name} (loss {cz[0]:.5g})",
                    hovertemplate=f"{name}<br>{where}<br>loss {cz[0]:.5g}<extra></extra>",
                    marker=dict(symbol="diamond" if view == "3d" else "star", size=7 if view == "3d" else 17,
                                color="white", line=dict(color="black", width=2)))]


def plane_figures(ls: Landscape, z: np.ndarray, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The 3-D surface and the contour view of one surface of a plane (``name``: "loss", "accuracy", ...).

    The 3-D box keeps the plane's proportions (within [1/4, 4]) with the value axis
    ``Z_RATIO`` of its width, whatever the units, so the default camera frames the surface.
    """
    x, y = np.asarray(ls.x, dtype=np.float64), np.asarray(ls.y, dtype=np.float64)
    lo, hi = _finite_range(z)
    xt, yt = axis_titles(ls)
    unit = str(ls.metadata.get("unit") or "step")
    paths = paths_of(ls)
    on_loss = name == "loss"  # the path, the markers and the centre carry the loss, not the other surfaces
    hover = f"x %{{x:.4g}}<br>y %{{y:.4g}}<br>{name} %{{z:.5g}}<extra></extra>"
    colorbar = dict(title=dict(text=name), len=0.75, thickness=14)

    surface: list[Any] = [go.Surface(x=x.tolist(), y=y.tolist(), z=_values(z), colorscale="Viridis", cmin=lo,
                                     cmax=hi, colorbar=colorbar, name=name, hovertemplate=hover)]
    if on_loss:
        surface += _path_traces(paths, unit, True) + _point_traces(ls, "3d")
    surface += _nonfinite_points(x, y, z, hi, name, True)
    _true, drawn = aspect(ls)
    box = np.array([1.0, drawn, Z_RATIO] if drawn <= 1 else [1 / drawn, 1.0, Z_RATIO])
    ax, ay, az = (float(v) for v in box * BOX_DIAGONAL / np.linalg.norm(box))
    scene = dict(xaxis=dict(title=dict(text=xt)), yaxis=dict(title=dict(text=yt)),
                 zaxis=dict(title=dict(text=name)), aspectmode="manual",
                 aspectratio=dict(x=ax, y=ay, z=az), camera=dict(eye=dict(x=1.6, y=-1.6, z=1.15)))
    fig3d = go.Figure(surface, layout=dict(scene=scene, height=_HEIGHT, margin=dict(l=0, r=0, t=10, b=0),
                                           showlegend=True, legend=dict(x=0, y=1, bgcolor="rgba(255,255,255,0.7)")))

    contour: list[Any] = [go.Contour(x=x.tolist(), y=y.tolist(), z=_values(z), colorscale="Viridis", zmin=lo,
                                     zmax=hi, ncontours=24, contours=dict(coloring="fill", showlines=True),
                                     line=dict(width=0.5, color="rgba(255,255,255,0.6)"), connectgaps=False,
                                     colorbar=colorbar, name=name, hovertemplate=hover)]
    contour += _path_traces(paths, unit, False) + _point_traces(ls, "plane")
    contour += _nonfinite_points(x, y, z, hi, name, False)
    yaxis: dict[str, Any] = dict(title=dict(text=yt))
    if drawn == _true:  # true proportions: one unit is as long on both axes
        yaxis.update(scaleanchor="x", scaleratio=1)
    fig2d = go.Figure(contour, layout=dict(xaxis=dict(title=dict(text=xt)), yaxis=yaxis, height=_HEIGHT,
                                           margin=dict(l=60, r=10, t=10, b=50), showlegend=True,
                                           legend=dict(orientation="h", y=-0.15)))
    return _json(fig3d), _json(fig2d)


def line_figure(ls: Landscape, z: np.ndarray, name: str) -> dict[str, Any]:
    """A line (random line, interpolation): the values along x, the models or the centre marked."""
    x = np.asarray(ls.x, dtype=np.float64)
    _lo, hi = _finite_range(z)
    traces: list[Any] = [go.Scatter(x=x.tolist(), y=_values(z), mode="lines+markers", name=name, connectgaps=False,
                                    line=dict(color="#1f77b4", width=2), marker=dict(size=4),
                                    hovertemplate=f"x %{{x:.4g}}<br>{name} %{{y:.5g}}<extra></extra>")]
    if name == "loss":
        traces += _point_traces(ls, "line")
    traces += _nonfinite_points(x, None, z, hi, name, False)
    fig = go.Figure(traces, layout=dict(xaxis=dict(title=dict(text=axis_titles(ls)[0])),
                                        yaxis=dict(title=dict(text=name)), height=420,
                                        margin=dict(l=60, r=10, t=10, b=50), legend=dict(orientation="h", y=-0.2)))
    return _json(fig)


def scalar_figure(tag: str, series: list[tuple[str, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """One scalar tag over the steps, one curve per run (legend: the runs)."""
    traces: list[Any] = []
    for run, steps, values in series:
        s, v = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
        traces.append(go.Scatter(x=s.tolist(), y=_values(v), mode="lines", name=run, connectgaps=False,
                                 hovertemplate=f"step %{{x}}<br>{tag} %{{y:.5g}}<extra>{run}</extra>"))
        traces += _nonfinite_points(s, None, v, _finite_range(v)[1], tag, False, prefix=f"{run}: ")
    fig = go.Figure(traces, layout=dict(xaxis=dict(title=dict(text="step")), yaxis=dict(title=dict(text=tag)),
                                        height=380, margin=dict(l=60, r=10, t=10, b=50)))
    return _json(fig)
