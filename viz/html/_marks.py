"""What the report's views mark: NaN/inf points, clamped points, the centre and the models (private).

Nothing is left out silently. A NaN/inf value is a gap in the grid (JSON ``null``) and a
red ``x`` at the top of the finite range, with the value (nan, inf, -inf) under the
cursor. A point whose batch-norm running variances were clamped at zero
(``Landscape.clamped``) is an open orange square at its value (at the top where that is not
finite), with the number of channels under the cursor. The centre is
:func:`viz.io.centre` (the exactly evaluated one, never a grid point beside it) named by
:func:`viz.io.centre_name`, as the PNGs mark and name it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from landscape.result import Landscape
from viz.io import centre, centre_label, centre_name, clamped_grid

__all__ = ["json_values", "nonfinite_points", "clamped_points", "point_traces"]

_NONFINITE = dict(symbol="x", color="#d62728", size=9, line=dict(width=1, color="#7f0000"))
#: Open squares in the PNGs' orange (viz.plots marks clamped points alike).
_CLAMPED = dict(symbol="square-open", color="#ff7f0e", size=10, line=dict(width=2))


def json_values(a: Any) -> list:
    """Floats with None where not finite (JSON null: a gap), nested like ``a``."""
    arr = np.asarray(a, dtype=np.float64)
    out = arr.astype(object)
    out[~np.isfinite(arr)] = None
    return out.tolist()


def _grid(xs: np.ndarray, ys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    if ys is None:
        return xs, None
    gx, gy = np.meshgrid(xs, ys)
    return gx, gy


def _scatter(view: str) -> Any:
    return go.Scatter3d if view == "3d" else go.Scatter


def nonfinite_points(xs: np.ndarray, ys: np.ndarray | None, z: np.ndarray, top: float,
                     name: str, three_d: bool, prefix: str = "") -> list[Any]:
    """Red ``x`` marks where ``z`` is not finite (nothing when all is finite)."""
    bad = ~np.isfinite(z)
    if not bad.any():
        return []
    text = [str(v) for v in z[bad]]
    label = f"{prefix}not finite: {int(bad.sum())} of {z.size}"
    hover = "x %{x:.4g}" + ("<br>y %{y:.4g}" if ys is not None else "") + f"<br>{name} %{{text}}<extra></extra>"
    gx, gy = _grid(xs, ys)
    if gy is None:
        return [go.Scatter(x=gx[bad].tolist(), y=[top] * int(bad.sum()), mode="markers", marker=_NONFINITE,
                           name=label, text=text, hovertemplate=hover)]
    kw = dict(x=gx[bad].tolist(), y=gy[bad].tolist(), mode="markers", name=label, text=text, hovertemplate=hover)
    if three_d:
        return [go.Scatter3d(z=[top] * int(bad.sum()), marker=dict(_NONFINITE, size=4), **kw)]
    return [go.Scatter(marker=_NONFINITE, **kw)]


def clamped_points(ls: Landscape, z: np.ndarray, top: float, name: str, view: str) -> list[Any]:
    """Open squares where ``ls.clamped`` counts batch-norm variances clamped at zero (nothing when none).

    ``view``: "3d" at ``(x, y, value)``, "plane" at ``(x, y)``, "line" at ``(x, value)``; a
    point without a finite value at ``top``.
    """
    counts = clamped_grid(ls)
    if counts is None or not counts.any():
        return []
    gx, gy = _grid(np.asarray(ls.x, dtype=np.float64), None if view == "line" else np.asarray(ls.y, dtype=np.float64))
    hit = counts > 0
    at = np.where(np.isfinite(z), z, top)[hit]
    label = f"batch-norm variances clamped at zero: {int(hit.sum())} of {counts.size} points"
    where = "x %{x:.4g}" + ("" if view == "line" else "<br>y %{y:.4g}")
    kw: dict[str, Any] = dict(x=gx[hit].tolist(), mode="markers", name=label, customdata=counts[hit].tolist(),
                              text=[f"{v:.5g}" for v in z[hit]],
                              hovertemplate=f"{where}<br>{name} %{{text}}<br>%{{customdata}} batch-norm "
                                            "channels clamped at zero<extra></extra>")
    if view == "line":
        return [go.Scatter(y=at.tolist(), marker=_CLAMPED, **kw)]
    assert gy is not None
    if view == "3d":
        return [go.Scatter3d(y=gy[hit].tolist(), z=at.tolist(), marker=dict(_CLAMPED, size=4), **kw)]
    return [go.Scatter(y=gy[hit].tolist(), marker=_CLAMPED, **kw)]


def point_traces(ls: Landscape, view: str) -> list[Any]:
    """The models a view passes through (A, B, C), or else its centre, named as the PNGs name it.

    ``view``: "3d" at ``(x, y, loss)``, "plane" at ``(x, y)``, "line" at ``(x, loss)``.
    """
    scatter = _scatter(view)
    where = "x %{x:.4g}" + ("" if view == "line" else "<br>y %{y:.4g}")

    def coords(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> dict[str, Any]:
        if view == "3d":
            return dict(x=x.tolist(), y=y.tolist(), z=json_values(z))
        return dict(x=x.tolist(), y=json_values(z) if view == "line" else y.tolist())

    if ls.markers:
        names = list(ls.markers)
        mx, my, mz = (np.array([ls.markers[n][i] for n in names], dtype=np.float64) for i in range(3))
        return [scatter(**coords(mx, my, mz), mode="markers+text", text=names, textposition="top center",
                        name="models", customdata=[f"{v:.5g}" for v in mz], textfont=dict(size=14, color="black"),
                        hovertemplate=f"model %{{text}}<br>{where}<br>loss %{{customdata}}<extra></extra>",
                        marker=dict(symbol="square", size=6 if view == "3d" else 12,
                                    color="white", line=dict(color="black", width=2)))]
    cx, cy, cz = (np.array([float(v)]) for v in centre(ls))
    name = centre_name(ls)
    return [scatter(**coords(cx, cy, cz), mode="markers", name=centre_label(ls),
                    hovertemplate=f"{name}<br>{where}<br>loss {cz[0]:.6g}<extra></extra>",
                    marker=dict(symbol="diamond" if view == "3d" else "star", size=7 if view == "3d" else 17,
                                color="#ffd700", line=dict(color="black", width=2)))]
