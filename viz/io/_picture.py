"""What every picture of a landscape shows, whatever draws it (private).

The PNGs (:mod:`viz.plots`) and the interactive report (:mod:`viz.html`) both take from
here, so that one landscape is one picture in both:

* the value range and its scale (:func:`value_scale`). One diverging grid point (a loss
  of 1e6 among losses near 1) must not flatten the rest of the picture into one colour,
  so values beyond ``p98 + (p98 - min) / 2`` (p98 the 98th percentile of the finite
  values) are outliers and the range ends at the largest value that is not one
  (outliers saturate). With ``log="auto"`` the scale is logarithmic when the finite
  values are positive and span more than a decade (Li et al. offer log contours for the
  same reason: a basin at 0.05 inside walls at 2 is one colour on a linear scale); value
  axes of lines switch only above three decades (``log_range=AXIS_LOG_RANGE``);
* the centre and its name (:func:`centre`, :func:`centre_name`): the exactly evaluated
  centre where the generation recorded one, never a grid point beside it, named by what
  it is (the trained weights, a shared plane's centre, model A);
* the points whose batch-norm running variances were clamped at zero
  (:attr:`landscape.Landscape.clamped`), with the words that count them;
* the ranges of a topology's persistence diagram and merge tree (:func:`diagram_range`,
  :func:`tree_range`): the pairs and the minima and saddles set them, not the highest loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from landscape.result import Landscape
from landscape.topology import MergeTree, Topology

__all__ = ["ValueScale", "value_scale", "log_ticks", "tick_labels", "centre", "centre_name", "centre_label",
           "clamped_grid", "clamped_text", "LOG_RANGE", "AXIS_LOG_RANGE", "CLIP_PERCENTILE", "NARROW",
           "diagram_range", "tree_range"]

LOG_RANGE = 10.0  # "auto" gives colours a log scale above this max/min ratio of the (clipped) finite values
AXIS_LOG_RANGE = 1e3  # ... and the value axis of a line above this one
CLIP_PERCENTILE = 98.0
NARROW = 0.1  # a colour range below this fraction of its largest |value| is printed on the colour bar


# ---------------------------------------------------------------- the value range
@dataclass
class ValueScale:
    """Range of one or several grids, log or linear, and whether outliers were clipped off it."""

    vmin: float
    vmax: float
    log: bool
    clipped: bool

    def levels(self, levels: int | Any) -> np.ndarray:
        """``levels`` contour levels spread over the range (geometrically on a log scale), or the ones given."""
        if not isinstance(levels, (int, np.integer)):
            return np.asarray(levels, dtype=np.float64)
        if self.log:
            return np.geomspace(self.vmin, self.vmax, int(levels))
        return np.linspace(self.vmin, self.vmax, int(levels))

    @property
    def extend(self) -> str:
        return "max" if self.clipped else "neither"

    @property
    def narrow(self) -> bool:
        """The range is a small fraction of the values' size (colours exaggerate it)."""
        size = max(abs(self.vmin), abs(self.vmax))
        return not self.log and size > 0 and (self.vmax - self.vmin) < NARROW * size


def value_scale(grids: list[np.ndarray], log: bool | str = "auto", clip: bool = True,
                percentile: float = CLIP_PERCENTILE, vmin: float | None = None,
                vmax: float | None = None, log_range: float = LOG_RANGE) -> ValueScale:
    """One range for ``grids``: outliers clipped, log when asked or when the range is wide.

    ``vmin``/``vmax`` fix an end of the range (values beyond it saturate); ``log="auto"``
    turns log on when every finite value is positive and max/min exceeds ``log_range``.

    Raises
    ------
    ValueError
        No finite value at all, or ``log=True`` with no positive value.
    """
    finite = np.concatenate([np.asarray(g, dtype=np.float64)[np.isfinite(g)].ravel() for g in grids])
    if finite.size == 0:
        raise ValueError("The landscape has no finite value to draw (every cell is NaN or inf).")
    lo, hi_all = float(finite.min()), float(finite.max())
    hi, clipped = hi_all, False
    if vmin is not None:
        lo = float(vmin)
    if vmax is not None:
        hi, clipped = float(vmax), hi_all > float(vmax)
    elif clip and finite.size >= 4:
        p = float(np.percentile(finite, percentile))
        # values far above the bulk (beyond p + half the bulk's span) are outliers: the range
        # ends at the largest value that is not one
        limit = p + 0.5 * (p - lo) + 1e-12 * max(abs(p), 1.0)
        if hi_all > limit:
            hi, clipped = float(finite[finite <= limit].max()), True
    positive = lo > 0
    if log == "auto":
        use_log = positive and hi / lo > log_range
    else:
        use_log = bool(log)
        if use_log and not positive:
            pos = finite[finite > 0]
            if pos.size == 0:
                raise ValueError("log=True needs positive values; every finite value is <= 0.")
            lo = float(pos.min()) if vmin is None or vmin <= 0 else lo
    if hi <= lo:  # a flat grid
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = (lo / 2, lo * 2) if use_log else (lo - pad, hi + pad)
    return ValueScale(lo, hi, use_log, clipped)


def log_ticks(lo: float, hi: float) -> np.ndarray:
    """Round tick values in ``[lo, hi]`` on a log scale: 1 per decade, else 1-2-5, else finer."""
    for mults in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8)):
        dec = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
        cand = np.array(sorted(m * 10.0 ** d for d in dec for m in mults))
        ticks = cand[(cand >= lo * (1 - 1e-9)) & (cand <= hi * (1 + 1e-9))]
        if ticks.size >= 4:
            return ticks
    return np.geomspace(lo, hi, 4)


def tick_labels(ticks: np.ndarray) -> list[str]:
    """The shortest ``%g`` labels (3 significant digits or more) that tell every tick apart."""
    values = [float(t) for t in np.ravel(ticks)]
    for digits in range(3, 16):
        labels = [f"{v:.{digits}g}" for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(v) for v in values]


# ---------------------------------------------------------------- the centre
def _is_pca(ls: Landscape) -> bool:
    d = str(ls.metadata.get("decomposition") or "").lower()
    return d == "pca" or (not d and ls.path is not None)


def _exact_centre(ls: Landscape) -> tuple[float, float, float] | None:
    """``metadata["centre"] = [x, y, loss]``, the centre the generation evaluated exactly, if any."""
    c = ls.metadata.get("centre")
    if c is None or np.size(c) != 3:
        return None
    cx, cy, cz = (float(v) for v in np.ravel(np.asarray(c, dtype=float)))
    return (cx, cy, cz) if np.isfinite(cx) and np.isfinite(cy) else None


def centre(ls: Landscape) -> tuple[float, float, float]:
    """Where the centre is marked, ``(x, y, loss)``.

    The exactly evaluated centre ``metadata["centre"]`` when the generation recorded one,
    else the end of the training path (PCA: the last checkpoint, at the origin), else
    ``convergence_point`` (MindSpore's: the grid point at index size // 2 of the grid,
    which on an even grid is not the trained model).
    """
    exact = _exact_centre(ls)
    if exact is not None:
        return exact
    if ls.path is not None and np.size(ls.path.x) and _is_pca(ls):
        return float(np.ravel(ls.path.x)[-1]), float(np.ravel(ls.path.y)[-1]), float(np.ravel(ls.path.z)[-1])
    cx, cy, cz = (float(v) for v in ls.convergence_point)
    return cx, cy, cz


def centre_name(ls: Landscape) -> str:
    """What the centre of the view is, as every picture names it.

    - a view through models (``markers``): ``"model A"`` (the view's centre is its first model);
    - a plane shared by several runs (``paths``, ``metadata["runs"]`` or ``["centre_on"]``):
      ``"shared centre: "`` and ``metadata["centre_description"]`` (``"the runs' shared initial
      weights"``, ...) when the generation wrote it, else ``"shared centre: the runs' start"``,
      ``"... the runs' mean"`` or ``"... run sgd's end"``;
    - the network's own weights, evaluated exactly (``metadata["centre"]``, or a PCA path's
      end, or a convergence point at the origin): ``"trained weights"``, or, for a run's
      landscape (``metadata["checkpoint_steps"]``), the checkpoint it is centred on:
      ``"weights at epoch 5"`` (an interval's last checkpoint, not necessarily the run's);
    - else MindSpore's convergence point, a grid point beside the centre:
      ``"convergence point (nearest grid point)"``.

    >>> import numpy as np
    >>> s = np.linspace(-1, 1, 4)
    >>> centre_name(Landscape(x=s, y=s, z=np.ones((4, 4)), metadata={"centre_on": "mean"}))
    "shared centre: the runs' mean"
    """
    if ls.markers:
        return f"model {next(iter(ls.markers))}"
    md = ls.metadata
    on = md.get("centre_on")
    if ls.paths or md.get("runs") or on is not None:
        if md.get("centre_description"):  # the generation's own words (landscape compare: which start it is)
            return f"shared centre: {md['centre_description']}"
        if on in ("start", "mean"):
            return f"shared centre: the runs' {on}"
        run = on if on is not None else next(iter(ls.paths or md.get("runs") or {}), None)
        return f"shared centre: run {run}'s end" if run is not None else "shared centre"
    exact = _exact_centre(ls) is not None or (ls.path is not None and np.size(ls.path.x) and _is_pca(ls))
    if exact or tuple(float(v) for v in ls.convergence_point[:2]) == (0.0, 0.0):
        steps = md.get("checkpoint_steps")
        if steps:  # a run's landscape: its interval's last checkpoint, which need not be the run's last
            return f"weights at {md.get('unit') or 'step'} {list(np.ravel(steps))[-1]}"
        return "trained weights"
    return "convergence point (nearest grid point)"


def centre_label(ls: Landscape) -> str:
    """The legend's words for the centre: ``"trained weights (loss 0.04866)"``."""
    return f"{centre_name(ls)} (loss {centre(ls)[2]:.4g})"


# ---------------------------------------------------------------- clamped points
def clamped_grid(ls: Landscape) -> np.ndarray | None:
    """``ls.clamped`` as int64 shaped like ``z`` (None when nothing could be clamped).

    Raises
    ------
    ValueError
        ``clamped`` is not shaped like ``z``.
    """
    if ls.clamped is None:
        return None
    c = np.asarray(ls.clamped)
    if c.shape != np.shape(ls.z):
        raise ValueError(f"The landscape's 'clamped' counts have shape {c.shape}; they must be shaped like z, "
                         f"{np.shape(ls.z)}. HINT: one count of clamped batch-norm channels per grid point.")
    return c.astype(np.int64)


def clamped_text(ls: Landscape) -> str:
    """``"22 of 101 points with batch-norm variances clamped at zero"``, or "" when none was."""
    c = clamped_grid(ls)
    n = int(np.count_nonzero(c)) if c is not None else 0
    return f"{n} of {c.size} points with batch-norm variances clamped at zero" if c is not None and n else ""


# ---------------------------------------------------------------- a topology's panels
def _span(lo: float, hi: float) -> float:
    return hi - lo or max(abs(hi), 1.0) * 0.1


def diagram_range(topo: Topology) -> tuple[float, float, float]:
    """``(low, top, span)`` of a persistence diagram's axes: its pairs and the births of the classes that
    never die (drawn on the ``top`` line) with margins; ``span`` the range they cover."""
    values = np.concatenate([topo.pairs.ravel(), topo.essential.values])
    lo = float(values.min()) if values.size else 0.0
    hi = float(values.max()) if values.size else 1.0
    span = _span(lo, hi)
    return lo - 0.05 * span, hi + 0.08 * span, span


def tree_range(tree: MergeTree) -> tuple[float, float, float]:
    """``(low, top, span)`` of a merge tree's value axis: its minima and saddles with margins; the branch
    to a component's highest point leaves the panel at ``top``."""
    inner = tree.kinds != "maximum"
    low = float(tree.values[inner].min()) if inner.any() else 0.0
    high = float(tree.values[inner].max()) if inner.any() else 1.0
    span = _span(low, high)
    return low - 0.05 * span, high + 0.25 * span, span
