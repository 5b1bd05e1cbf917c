"""The report's page: the runs, scalars, landscapes and lineage as one HTML file (private).

The page holds plotly.js (inline), the figures as JSON and a small script
(``report.js``) that fills the selectors and draws the chosen views: nothing is
fetched, so the file opens from disk with no network.
"""

from __future__ import annotations

import html
import json
import math
from importlib import resources
from typing import Any

import numpy as np

from landscape.io import curvature_text
from landscape.result import Landscape
from viz.html._data import RunData
from viz.html._figures import (
    PLOTLY_VERSION,
    TEMPLATE,
    Z_RATIO,
    Colours,
    aspect,
    colours,
    line_figure,
    paths_of,
    plane_figures,
    plotly_js,
    scalar_figure,
    topology_figures,
)
from viz.io import AXIS_LOG_RANGE, centre, centre_name, clamped_grid, clamped_text, value_scale

__all__ = ["landscape_entry", "render_page"]

#: The lineage columns first shown, in MindInsight's order; the others follow by name.
_LINEAGE_FIRST = ("network", "optimizer", "learning_rate", "batch_size", "epoch", "loss_function", "loss",
                  "train_dataset_count", "test_dataset_count", "model_size", "device_num")


def _g(v: float) -> str:
    return f"{v:.5g}"


def _title(ls: Landscape) -> str:
    """``landscape_[1, 5] — PCA, epochs 1–5``: what the landscape selector lists."""
    d = str(ls.metadata.get("decomposition") or ("PCA" if ls.path is not None else ""))
    parts = [d] if d else []
    if ls.path is not None and len(ls.path.intervals):
        iv, unit = list(ls.path.intervals), str(ls.metadata.get("unit") or "step")
        parts.append(f"{unit} {iv[0]}" if len(iv) == 1 else f"{unit}s {iv[0]}\u2013{iv[-1]}")
    if ls.dims == 1:
        parts.append("line")
    elif ls.dims > 2:
        parts.append(f"{ls.dims}-D grid")
    return (ls.tag or "landscape") + (" \u2014 " + ", ".join(parts) if parts else "")


def _info(ls: Landscape, z: np.ndarray, name: str, c: Colours | None) -> str:
    """The caption of a view: grid, value range, non-finite and clamped counts, colours, axes, the
    centre, what is drawn where (HTML)."""
    e = html.escape
    finite = z[np.isfinite(z)]
    shape = f"{ls.x.size} points" if ls.dims == 1 else f"{ls.x.size} \u00d7 {ls.y.size} grid"
    lines = [f"<b>{e(_title(ls))}</b>"]
    rng = f"{e(name)} from {_g(finite.min())} to {_g(finite.max())}" if finite.size else f"no finite {e(name)}"
    lines.append(f"{shape}, x from {_g(ls.x.min())} to {_g(ls.x.max())}"
                 + ("" if ls.dims == 1 else f", y from {_g(ls.y.min())} to {_g(ls.y.max())}") + f"; {rng}.")
    bad = int(z.size - finite.size)
    lines.append(f'<span class="warn">{bad} of {z.size} points not finite</span> (marked \u00d7, drawn at the top '
                 "of the finite range)." if bad else f"All {z.size} values finite.")
    clamped = clamped_text(ls)
    if clamped:
        most = int(np.max(clamped_grid(ls)))  # type: ignore[arg-type]  # not None: clamped_text said so
        lines.append(f'<span class="warn">{clamped}</span> (up to {most} channels at a point; marked \u25a1): '
                     "the values there are the clamped network's.")
    if c is not None and finite.size:
        lines.append(_colours_text(c))
    if name == "loss":
        cx, cy, cz = centre(ls)
        at = f"x {_g(cx)}" + ("" if ls.dims == 1 else f", y {_g(cy)}")
        lines.append(f"Centre: {e(centre_name(ls))} at {at}, loss {_g(cz)}.")
    md = ls.metadata
    facts = [f"{k} {e(str(md[k]))}" for k in ("normalization", "num_samples", "seed") if md.get(k) is not None]
    if facts:
        lines.append("Directions: " + ", ".join(facts) + ".")
    if ls.dims == 2:
        true, drawn = aspect(ls)
        lines.append("3-D box and contour at the plane's true proportions (height/width "
                     f"{true:.3g}); value axis {Z_RATIO:g} of the box's width." if drawn == true else
                     f"Plane drawn stretched: its height/width is {true:.3g}, drawn as {drawn:.3g}; value axis "
                     f"{Z_RATIO:g} of the box's width.")
        paths = paths_of(ls)
        if len(paths) > 1:
            lines.append("Paths: " + ", ".join(e(p) for p in paths) + " (one colour each).")
        if name != "loss" and (paths or ls.markers):
            lines.append("The path and the models carry the loss: in 3-D they are drawn on the loss surface only.")
    return "<br>".join(lines)


def _colours_text(c: Colours) -> str:
    """``"Colours: log scale (...), 20 contour levels; ..."``: how the colours were chosen, as the PNGs choose."""
    s = c.shown
    if c.log is None:
        how = "linear scale (not every value is positive: no log scale)"
    elif c.asked != "auto":
        how = f"{'log' if s.log else 'linear'} scale (as asked)"
    elif s.log:
        how = "log scale (the values span more than a decade, as in the PNGs)"
    else:
        how = "linear scale (the values span less than a decade, as in the PNGs)"
    text = f"Colours: {how}, {c.levels} contour levels"
    if c.log is not None:
        text += "; the buttons above each view switch between log and linear colours"
    if s.clipped:
        text += f"; values above {_g(s.vmax)} (outliers) take the top colour"
    return text + "."


def landscape_entry(ls: Landscape, log: bool | str = "auto", levels: int = 20) -> dict[str, Any]:
    """The landscape's figures for every surface it has (loss first) and their captions; colours chosen
    by ``log`` ("auto": the PNGs' rule) with ``levels`` contour levels; and the loss's topology (its
    persistence diagram and merge tree, axis neighbours, threshold 0): an n-D grid's only figures."""
    views: dict[str, Any] = {}
    for name in ["loss", *ls.surfaces]:
        z = np.asarray(ls.z if name == "loss" else ls.surfaces[name], dtype=np.float64)
        if z.shape != np.shape(ls.z):
            continue  # a surface not on the grid (it cannot be drawn over these axes)
        if ls.dims == 2:
            c = colours(z, log, levels)
            view: dict[str, Any] = {"info": _info(ls, z, name, c)}
            view["surface"], view["contour"] = plane_figures(ls, z, name, c)
        elif ls.dims == 1:
            view = {"info": _info(ls, z, name, None), "line": line_figure(ls, z, name, _line_log(z, log))}
        else:
            view = {"info": _grid_info(ls, z, name)}
        views[name] = view
    topo = ls.topology()
    diagram, tree = topology_figures(topo)
    info = f"<b>Topology of the loss</b>: {html.escape(topo.summary())}."
    return {"tag": ls.tag, "label": _title(ls), "dims": ls.dims, "views": views,
            "topology": {"info": info, "diagram": diagram, "tree": tree}}


def _grid_info(ls: Landscape, z: np.ndarray, name: str) -> str:
    """The caption of an n-D grid (no picture of its own: its topology below)."""
    e = html.escape
    finite = z[np.isfinite(z)]
    axes = ", ".join(f"{_g(a.min())} to {_g(a.max())}" for a in ls.axes)
    shape = " \u00d7 ".join(str(n) for n in np.shape(z)[::-1])
    rng = f"{e(name)} from {_g(finite.min())} to {_g(finite.max())}" if finite.size else f"no finite {e(name)}"
    bad = int(z.size - finite.size)
    lines = [f"<b>{e(_title(ls))}</b>", f"A grid of {ls.dims} directions, {shape} points (axes {axes}); {rng}.",
             f'<span class="warn">{bad} of {z.size} points not finite</span>.' if bad else
             f"All {z.size} values finite.", "No picture shows it whole: its topology is drawn below."]
    return "<br>".join(lines)


def _line_log(z: np.ndarray, log: bool | str) -> bool:
    """A line's value axis is logarithmic as the PNG's is: above three decades ("auto"), values all positive."""
    finite = z[np.isfinite(z)]
    if not finite.size or float(finite.min()) <= 0:
        return False
    return value_scale([z], log=log, log_range=AXIS_LOG_RANGE).log


def _cell(value: Any) -> str:
    if value is None or value == {}:
        return "<td>\u2013</td>"
    if isinstance(value, float):
        return f'<td class="num">{html.escape(_g(value) if math.isfinite(value) else str(value))}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num">{value}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _lineage_table(runs: list[RunData]) -> str:
    rows = []
    for run in runs:
        flat = {k: v for k, v in (run.lineage or {}).items() if k not in ("metric", "user_defined")}
        for part in ("metric", "user_defined"):
            flat.update({f"{part}_{k}": v for k, v in ((run.lineage or {}).get(part) or {}).items()})
        rows.append((run, flat))
    if not any(run.lineage is not None for run, _ in rows):
        return '<p class="muted">No run has a lineage (TrainLineage / SummaryCollector records it).</p>'
    present = {k for _, flat in rows for k, v in flat.items() if v is not None}
    columns = [c for c in _LINEAGE_FIRST if c in present] + sorted(present - set(_LINEAGE_FIRST))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["run", *columns])
    body = "".join(
        f"<tr><td>{html.escape(run.name)}</td>" + ("".join(_cell(flat.get(c)) for c in columns) if run.lineage
                                                  is not None else f'<td colspan="{len(columns)}">no lineage</td>')
        + "</tr>" for run, flat in rows)
    return f'<table id="lineage-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _runs_table(runs: list[RunData]) -> str:
    body = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.source)}</td><td class=\"num\">{len(r.landscapes)}"
        f"</td><td>{html.escape(', '.join(sorted(r.scalars)) or '-')}</td>"
        f"<td>{'<br>'.join(html.escape(n) for n in r.notes) or '-'}</td></tr>" for r in runs)
    return ("<table id=\"runs-table\"><thead><tr><th>run</th><th>read from</th><th>landscapes</th><th>scalars</th>"
            f"<th>notes</th></tr></thead><tbody>{body}</tbody></table>")


def _curvature_table(runs: list[RunData]) -> str:
    """``landscape curvature``'s results: a row per run and checkpoint (none: the section is left out)."""
    rows = [(run, item) for run in runs for item in run.curvature]
    if not rows:
        return ""
    body = "".join(f"<tr><td>{html.escape(run.name)}</td><td>{html.escape(curvature_text(item))}</td></tr>"
                   for run, item in rows)
    return ('<section id="curvature"><h2>Curvature</h2><table id="curvature-table"><thead><tr><th>run</th>'
            f"<th>measured by landscape curvature</th></tr></thead><tbody>{body}</tbody></table></section>\n")


def barrier_text(md: dict[str, Any]) -> str:
    """A barrier's record (``metadata["barrier"]`` of a landscape made by ``landscape.connect``) in words."""
    how = "naive" if md.get("alignment") in (None, "none") else f"aligned ({md.get('alignment')})"
    along = f"along a {md['curve']} curve" if md.get("curve") else "along the line"

    def pair(metric: str, scale: float = 1.0) -> str:
        mean, linear = md.get(f"{metric}_mean"), md.get(f"{metric}_linear")
        if mean is None or linear is None:
            return "-"
        return f"{scale * float(mean):.4g} (mean) / {scale * float(linear):.4g} (linear)"

    text = (f"{along}, {how}, {md.get('split', 'train')} data, {md.get('points', '?')} points, batch norm "
            f"{md.get('bn_statistics', '?')}: loss {pair('loss')}")
    if md.get("error_mean") is not None:
        text += f", error {pair('error', 100.0)} points"
    return text


def _barrier_table(runs: list[RunData]) -> str:
    """``landscape connect``'s barriers: a row per run and line landscape holding one (none: no section)."""
    rows = [(run, ls) for run in runs for ls in run.landscapes if isinstance(ls.metadata.get("barrier"), dict)]
    if not rows:
        return ""
    body = "".join(f"<tr><td>{html.escape(run.name)}</td><td>{html.escape(ls.tag or '')}</td>"
                   f"<td>{html.escape(barrier_text(ls.metadata['barrier']))}</td></tr>" for run, ls in rows)
    return ('<section id="barriers"><h2>Barriers</h2><table id="barrier-table"><thead><tr><th>run</th>'
            f"<th>landscape</th><th>barrier</th></tr></thead><tbody>{body}</tbody></table></section>\n")


def _script_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``</script>``, no ``<!--``, no NaN."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"), ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(title: str, runs: list[RunData], version: str, *, log: bool | str = "auto",
                levels: int = 20) -> str:
    """The whole HTML page (figures built here; colours by ``log`` with ``levels`` contour levels)."""
    tags = sorted({t for r in runs for t in r.scalars})
    scalars = [{"tag": t, "figure": scalar_figure(t, [(r.name, *r.scalars[t]) for r in runs if t in r.scalars])}
               for t in tags]
    default = next((t for t in tags if t == "loss/auto"), next((t for t in tags if "loss" in t), None))
    data = {"template": TEMPLATE, "scalars": scalars, "default_scalar": default,
            "runs": [{"name": r.name, "landscapes": [landscape_entry(ls, log, levels) for ls in r.landscapes]}
                     for r in runs]}
    n_ls = sum(len(r.landscapes) for r in runs)
    static = resources.files("viz.html")
    e = html.escape
    no_scalars = "" if scalars else '<p class="muted">No scalars were recorded in these runs.</p>'
    no_ls = "" if n_ls else '<p class="muted">No landscapes in these runs.</p>'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="torch-landscape {e(version)} (viz.report), plotly {e(PLOTLY_VERSION)}">
<title>{e(title)}</title>
<style>
{static.joinpath("report.css").read_text(encoding="utf-8")}</style>
<script>{plotly_js()}</script>
</head>
<body>
<header>
<h1>{e(title)}</h1>
<p class="muted">{len(runs)} run{'s' if len(runs) != 1 else ''}, {n_ls} landscape{'s' if n_ls != 1 else ''}.
Drag to rotate the 3-D views, scroll to zoom, hover for values; double-click a plot to reset it.
This file works offline: everything it shows is inside it.</p>
</header>
<section id="runs"><h2>Runs</h2>{_runs_table(runs)}</section>
<section id="scalars"><h2>Scalars</h2>{no_scalars}
<div class="controls"><label>Scalar<select id="scalar-select"></select></label></div>
<div id="scalar-plot" class="plot"></div></section>
<section id="landscapes"><h2>Landscapes</h2>{no_ls}
<div class="controls"><label>Run<select id="run-select"></select></label>
<label>Landscape<select id="landscape-select"></select></label>
<label>Surface<select id="surface-select"></select></label></div>
<p id="landscape-info"></p>
<div id="views" class="views plane"><div id="view-3d" class="plot"></div><div id="view-contour" class="plot"></div>
<div id="view-line" class="plot" hidden></div></div>
<p id="topology-info"></p>
<div id="topology" class="views plane"><div id="topology-diagram" class="plot"></div>
<div id="topology-tree" class="plot"></div></div></section>
{_curvature_table(runs)}{_barrier_table(runs)}<section id="lineage"><h2>Lineage</h2>{_lineage_table(runs)}</section>
<script type="application/json" id="report-data">{_script_json(data)}</script>
<script>
{static.joinpath("report.js").read_text(encoding="utf-8")}</script>
</body>
</html>
"""
