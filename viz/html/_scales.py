"""The report's colour scales: the PNGs' rule, its levels, and a log/linear toggle (private).

A view's colours follow :func:`viz.io.value_scale`, the rule the PNGs follow by default:
the range ends at the largest value that is not an outlier, and it is logarithmic when
the finite values are positive and span more than a decade (a CNN's plane from 0.0036 to
15.4 is one flat basin on a linear scale). plotly has no logarithmic colour scale, so a
log view colours by ``log10`` of the values (contours at geometrically spaced levels,
the colour bar's ticks labelled with the values themselves) while the hover and the 3-D
heights keep the values (plotly's log axes in 3-D label their ticks unreadably). Two
buttons on each figure switch between the log and the linear view (plotly's
``updatemenus``); a view whose values are not all positive has the linear one only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from viz.html._marks import json_values
from viz.io import ValueScale, log_ticks, tick_labels, value_scale

__all__ = ["Colours", "colours", "contour_style", "surface_style", "toggle"]


@dataclass
class Colours:
    """A view's colour scales: the one shown first (by the rule when ``asked`` is "auto"), the linear one
    and (values all positive) the log one."""

    shown: ValueScale
    linear: ValueScale
    log: ValueScale | None
    levels: int
    asked: bool | str = "auto"

    def scale(self, log: bool) -> ValueScale:
        return self.log if log and self.log is not None else self.linear


def colours(z: np.ndarray, log: bool | str, levels: int) -> Colours:
    """The scales of ``z``: shown by the rule (``log`` "auto", True or False), and both to switch between."""
    finite = z[np.isfinite(z)]
    positive = bool(finite.size) and float(finite.min()) > 0
    if not finite.size:  # nothing to colour: a linear scale from 0 to 1 (the caption says why)
        flat = ValueScale(0.0, 1.0, False, False)
        return Colours(flat, flat, None, levels, log)
    linear = value_scale([z], log=False)
    logged = value_scale([z], log=True) if positive else None
    auto = value_scale([z], log="auto")
    shown = logged if logged is not None and (auto.log if log == "auto" else bool(log)) else linear
    return Colours(shown, linear, logged, levels, log)


def _colour_values(z: np.ndarray, scale: ValueScale) -> np.ndarray:
    """What the colours are computed from: the values, or their log10 (NaN where not finite)."""
    if not scale.log:
        return z
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(z) & (z > 0), np.log10(np.where(z > 0, z, 1.0)), np.nan)


def _ends(scale: ValueScale) -> tuple[float, float]:
    return (float(np.log10(scale.vmin)), float(np.log10(scale.vmax))) if scale.log else (scale.vmin, scale.vmax)


def _colorbar(scale: ValueScale, name: str, prefix: str = "") -> dict[str, Any]:
    """The colour bar's title and ticks (on a log scale: round values at their log10)."""
    title = f"{name} (log scale)" if scale.log else name
    if scale.log:
        ticks = log_ticks(scale.vmin, scale.vmax)
        return {f"{prefix}title.text": title, f"{prefix}tickmode": "array",
                f"{prefix}tickvals": np.log10(ticks).tolist(), f"{prefix}ticktext": tick_labels(ticks)}
    return {f"{prefix}title.text": title, f"{prefix}tickmode": "auto", f"{prefix}tickvals": None,
            f"{prefix}ticktext": None}


def contour_style(z: np.ndarray, scale: ValueScale, levels: int, name: str, flat: bool = False) -> dict[str, Any]:
    """A contour trace's colour attributes for ``scale``: ``levels`` levels over its range, as the PNG's.

    ``flat``: attribute paths as plotly's restyle takes them ("contours.start"), else nested
    dicts for the trace.
    """
    lo, hi = _ends(scale)
    contours = {"start": lo, "end": hi, "size": (hi - lo) / (levels - 1)}
    bar = _colorbar(scale, name, "colorbar.")
    out: dict[str, Any] = {"z": json_values(_colour_values(z, scale)), "zmin": lo, "zmax": hi}
    if flat:
        return {**out, **{f"contours.{k}": v for k, v in contours.items()}, **bar}
    return {**out, "contours": contours, "colorbar": _nest(bar, "colorbar.")}


def surface_style(z: np.ndarray, scale: ValueScale, name: str, flat: bool = False) -> dict[str, Any]:
    """A 3-D surface's colour attributes for ``scale`` (its heights stay the values)."""
    lo, hi = _ends(scale)
    bar = _colorbar(scale, name, "colorbar.")
    out: dict[str, Any] = {"surfacecolor": json_values(_colour_values(z, scale)) if scale.log else None,
                           "cmin": lo, "cmax": hi}
    return {**out, **bar} if flat else {**out, "colorbar": _nest(bar, "colorbar.")}


def _nest(flat: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``{"colorbar.title.text": t}`` as ``{"title": {"text": t}}`` (None values left out)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None:
            continue
        *parents, leaf = key[len(prefix):].split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def toggle(c: Colours, restyle: Any) -> list[dict[str, Any]]:
    """plotly's ``updatemenus``: a "linear colours" and a "log colours" button over trace 0 (none
    when the values cannot be on a log scale); ``restyle(scale)`` gives the trace's attributes.
    At the top left, clear of plotly's tool bar at the top right."""
    if c.log is None:
        return []
    buttons = [dict(label=label, method="restyle", args=[{k: [v] for k, v in restyle(scale).items()}, [0]])
               for label, scale in (("linear colours", c.linear), ("log colours", c.log))]
    return [dict(type="buttons", direction="right", showactive=True, active=1 if c.shown.log else 0,
                 buttons=buttons, x=0.0, xanchor="left", y=1.0, yanchor="bottom", pad=dict(t=2, b=2),
                 font=dict(size=11), bgcolor="white", bordercolor="#bbb")]
