"""The pipeline's figures: each run's landscapes, and the runs compared on shared levels.

The comparison of planes (``[plot] compare``: "contour" or "filled") is Li et al.'s
Fig. 5 layout: one row of panels, one per run, every panel on the same contour levels
and colour range, spanning every run's finite values from the smallest to the largest
(nothing clipped, so a surface reaching 1e8 and one staying below 1 are both drawn; log-
spaced levels when ``compare_log`` asks for them or, with "auto", when the values span more
than three decades). Each panel's title gives the run's loss at the centre, the largest
value, the fraction of the plane where the surface's 2D Hessian has a negative eigenvalue
(:func:`landscape.curvature.surface_nonconvexity`; those points are dotted red) and the
NaN/inf values if there are any.
A "surface" comparison is :func:`viz.compare`'s (one colour scale, outliers clipped).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Circle

import viz
from landscape.cli._common import safe_name
from landscape.curvature import surface_hessian
from landscape.result import Landscape

__all__ = ["plot_run", "plot_compare", "result_landscape", "score_text", "LOG_DECADES"]

#: "auto" takes log-spaced levels when the largest finite value is this many times the smallest.
LOG_DECADES = 1e3


def _save(fig: Figure, path: Path) -> str:
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return str(path)


def plot_run(landscapes: list[Landscape], folder: Path, kinds: list[str], log_scale: bool) -> list[str]:
    """Each landscape of one run in each of ``kinds``, and the run's overview; the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for ls in landscapes:
        for kind in kinds:
            fig = cast(Figure, viz.plot(ls, kind=kind, log=True if log_scale else "auto").figure)
            made.append(_save(fig, folder / f"{safe_name(ls.tag or 'landscape')}_{kind}.png"))
    made.append(_save(viz.plot_overview(landscapes), folder / "overview.png"))
    return made


def result_landscape(landscapes: list[Landscape]) -> Landscape:
    """A run's Random (result) landscape, or its last one (what :func:`viz.compare` picks)."""
    for ls in reversed(landscapes):
        if str(ls.metadata.get("decomposition", "")).lower() == "random":
            return ls
    return landscapes[-1]


def score_text(score: Mapping[str, Any]) -> str:
    """The surface-Hessian score in words, NaN/inf values counted."""
    text = (f"negative 2D-Hessian eigenvalue at {100 * score['fraction_negative']:.0f} % of the plane "
            f"({score['negative']}/{score['points']} interior points)")
    if score["nonfinite"]:
        text += f"; {score['nonfinite']} NaN/inf values, {score['undefined']} points undefined"
    return text


def _shared_levels(grids: list[np.ndarray], levels: int, log: bool | str) -> tuple[np.ndarray, Normalize]:
    finite = np.concatenate([g[np.isfinite(g)].ravel() for g in grids])
    if finite.size == 0:
        raise ValueError("The runs' landscapes have no finite value to draw (every cell is NaN or inf).")
    lo, hi = float(finite.min()), float(finite.max())
    use_log = lo > 0 and (hi / lo > LOG_DECADES if log == "auto" else bool(log))
    if log is True and lo <= 0:
        raise ValueError(f"compare_log = true needs positive values; the smallest is {lo:g}.")
    if hi <= lo:
        lo, hi = (lo / 2, lo * 2) if use_log else (lo - 1, hi + 1)
    if use_log:
        return np.geomspace(lo, hi, levels), LogNorm(lo, hi)
    return np.linspace(lo, hi, levels), Normalize(lo, hi)


def _compare_planes(chosen: Mapping[str, Landscape], info: Mapping[str, Mapping[str, Any]], kind: str,
                    levels: int, log: bool | str, title: str) -> Figure:
    grids = [np.asarray(ls.z, dtype=np.float64) for ls in chosen.values()]
    lv, norm = _shared_levels(grids, levels, log)
    draw = viz.plot_contour if kind == "contour" else viz.plot_filled_contour
    n = len(chosen)
    fig = Figure(figsize=(4.2 * n + 1.0, 4.9), layout="constrained")
    axes = [fig.add_subplot(1, n, k + 1) for k in range(n)]
    for ax, (name, ls) in zip(axes, chosen.items()):
        run = info[name]
        score = run["surface_nonconvexity"]
        head = f"{name}: trained loss {run['final_loss']:.3g}, max {score['max']:.3g}"
        tail = f"non-convex {100 * score['fraction_negative']:.0f} % of the plane"
        if score["nonfinite"]:
            tail += f", {score['nonfinite']} NaN/inf"
        centre = run.get("centre_nonconvexity")
        if centre:  # the basin alone: the points inside the dashed circle
            tail += f";\nwithin {centre['radius']:g} of the centre: at {centre['negative']}/{centre['points']} points"
        draw(ls, ax, levels=lv, log=isinstance(norm, LogNorm), vmin=float(lv[0]), vmax=float(lv[-1]),
             colorbar=False, path=False, title=f"{head}\n{tail}")
        lo, _ = surface_hessian(ls)
        gx, gy = np.meshgrid(np.asarray(ls.x)[1:-1], np.asarray(ls.y)[1:-1])
        neg = np.isfinite(lo) & (lo < 0)
        ax.plot(gx[neg], gy[neg], ls="none", marker="o", ms=2.2, color="tab:red", alpha=0.7,
                label="negative curvature" if ax is axes[0] else None)
        if centre:
            ax.add_patch(Circle((0.0, 0.0), centre["radius"], fill=False, ls="--", lw=0.9, color="0.25",
                                label=f"within {centre['radius']:g} of the centre" if ax is axes[0] else None))
        cx, cy = ls.convergence_point[:2]
        ax.plot([cx], [cy], ls="none", marker="*", ms=13, mfc="gold", mec="black",
                label="trained weights" if ax is axes[0] else None)
        ax.set_aspect("equal")
    fig.legend(loc="lower center", ncols=3, bbox_to_anchor=(0.5, -0.06), frameon=False)
    sm = plt.cm.ScalarMappable(norm=norm, cmap="viridis")
    cb = fig.colorbar(sm, ax=axes, shrink=0.8, pad=0.02)
    cb.set_label(f"loss ({len(lv)} shared {'log-spaced ' if isinstance(norm, LogNorm) else ''}levels)")
    fig.suptitle(title, fontsize="large")
    return fig


def plot_compare(all_landscapes: Mapping[str, list[Landscape]], info: Mapping[str, Mapping[str, Any]], out: Path,
                 kinds: list[str], levels: int, log: bool | str) -> list[str]:
    """Each run's Random (result) landscape side by side, one figure per kind; the files written."""
    made = []
    chosen = {name: result_landscape(items) for name, items in all_landscapes.items()}
    planes = {name: ls for name, ls in chosen.items() if ls.dims == 2}
    for kind in kinds:
        if kind == "surface":
            fig = viz.compare(all_landscapes, kind=kind, title="Random landscapes, one colour scale")
        elif len(planes) < 2:
            continue
        else:
            fig = _compare_planes(planes, info, kind, levels, log,
                                  "Random planes on shared levels; non-convex: where the surface's 2D Hessian "
                                  "(finite differences) has a negative eigenvalue")
        made.append(_save(fig, out / f"compare_{kind}.png"))
    return made
