"""``barrier``: the loss and error barrier between two models, as a line landscape (private).

The path ``theta(alpha) = (1 - alpha) A + alpha B`` (B aligned to A first, when asked) is the
interpolation view of :func:`landscape.compute_landscape` on ``alpha in linspace(0, 1, points)``:
the engine evaluates it, batch-norm statistics re-estimated at every point by default, and the
result is a :class:`~landscape.Landscape` like any other (pictures, report, ``landscapes.h5``).
The barrier's two definitions in use (:func:`barrier_height`), with ``L(alpha)`` the loss or
the error on the training or the test data:

* ``"mean"`` (Git Re-Basin's code): ``max L(alpha) - (L(0) + L(1)) / 2``;
* ``"linear"`` (Entezari et al.'s paper): ``max [L(alpha) - ((1 - alpha) L(0) + alpha L(1))]``.

Only ``alpha`` in ``[0, 1]`` enters a barrier, and the grid must hold 0, 0.5 and 1 (an odd
number of points): both definitions coincide where the highest point is the midpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param, unwrap_module
from collector.train import get_metric
from landscape.connect._align import Alignment, align, check_pair, check_spec, replayable, samples_of, task_of
from landscape.generate import check_selection, compute_landscape
from landscape.geometry import BN_STATISTICS
from landscape.result import Landscape
from landscape.tasks import Supervised

__all__ = ["Barrier", "barrier", "barrier_height", "resolve_alignment", "check_align", "check_test_data", "classifies",
           "DEFINITIONS", "ALIGN"]

DEFINITIONS = ("mean", "linear")
ALIGN = ("none", "weights", "activations")
#: How far from 0, 0.5 and 1 a grid point may be and still be taken for them (float rounding of linspace).
_AT = 1e-9


def _where(alphas: np.ndarray, value: float) -> int | None:
    hit = np.flatnonzero(np.abs(alphas - value) <= _AT)
    return int(hit[0]) if hit.size else None


def _numbers(name: str, value: Any, caller: str) -> np.ndarray:
    """``value`` as a flat float64 array, refused naming ``name`` unless it is a sequence of real numbers."""
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError("a string")
        return np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The '{name}' parameter of {caller} must be a sequence or array of real numbers. Got "
            f"{type(value).__name__} {value!r:.60} instead ({exc}). HINT: barrier_height(alphas, values, "
            "'mean'), alphas holding 0, 0.5 and 1, one value per alpha.") from None


def check_grid(alphas: Any, what: str, caller: str) -> np.ndarray:
    """The grid, refused unless it holds 0, 0.5 and 1."""
    a = _numbers("alphas", alphas, caller)
    missing = [v for v in (0.0, 0.5, 1.0) if _where(a, v) is None]
    if missing:
        raise InvalidParameterError(
            f"The {what} of {caller} must hold alpha = 0, 0.5 and 1; it lacks {missing} (grid of {a.size} points "
            f"from {a.min() if a.size else 'nothing'} to {a.max() if a.size else 'nothing'}). HINT: an odd number "
            "of points from 0 to 1 (25, as Git Re-Basin) holds all three.")
    return a


def barrier_height(alphas: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                   definition: Literal["mean", "linear"] = "mean") -> float:
    """The barrier of ``values`` along ``alphas`` (only ``alpha`` in ``[0, 1]``; the module docstring).

    Parameters
    ----------
    alphas, values : array-like
        The grid (holding 0, 0.5 and 1) and the loss or error at each point.
    definition : {"mean", "linear"}, default="mean"
        ``max L - (L(0) + L(1)) / 2`` (Git Re-Basin) or ``max [L - ((1 - alpha) L(0) + alpha L(1))]``
        (Entezari et al.).

    Returns
    -------
    float
        NaN when a value in ``[0, 1]`` is not finite.

    Examples
    --------
    >>> from landscape.connect import barrier_height
    >>> round(barrier_height([0, 0.5, 1], [0.2, 1.0, 0.4], "mean"), 12)
    0.7
    >>> round(barrier_height([0, 0.5, 1], [0.2, 0.5, 1.0], "linear"), 12)
    0.0
    """
    check_param("definition", definition, [Options(DEFINITIONS)], caller="barrier_height")
    a = check_grid(alphas, "grid", "barrier_height")
    v = _numbers("values", values, "barrier_height")
    if v.shape != a.shape:
        raise InvalidParameterError(f"barrier_height: {v.size} values for {a.size} alphas.")
    inside = (a >= -_AT) & (a <= 1.0 + _AT)
    a, v = a[inside], v[inside]
    if not np.isfinite(v).all():
        return float("nan")
    i0, i1 = _where(a, 0.0), _where(a, 1.0)
    assert i0 is not None and i1 is not None
    l0, l1 = v[i0], v[i1]
    if definition == "mean":
        return float(v.max() - 0.5 * (l0 + l1))
    t = np.clip(a, 0.0, 1.0)
    return float((v - ((1.0 - t) * l0 + t * l1)).max())


def _error(ls: Landscape | None) -> np.ndarray | None:
    if ls is None or "accuracy" not in ls.surfaces:
        return None
    return 1.0 - np.asarray(ls.surfaces["accuracy"], dtype=np.float64)


@dataclass
class Barrier:
    """The loss (and, for classification, the error) along the line from A to B, and its height.

    Attributes
    ----------
    alphas : ndarray
        The grid (``linspace(0, 1, points)``, or a landscape's axis: only ``[0, 1]`` counts).
    loss, error : ndarray
        On the training data (``error`` None when the task is not a classification).
    test_loss, test_error : ndarray or None
        On ``test_data``.
    landscape, test_landscape : Landscape or None
        The line landscapes (metadata ``"barrier"`` holds the heights, the definitions, the
        batch-norm setting and the alignment's digest).
    alignment : Alignment or None
        What B was permuted by (None: the naive barrier).
    bn_statistics : str
        The batch-norm setting used ("none": the network has no batch norm).
    path : str
        ``"line"``, or the curve's kind (``Curve.barrier``: ``alphas`` are then its ``t``).
    """

    alphas: np.ndarray
    loss: np.ndarray
    error: np.ndarray | None = None
    test_loss: np.ndarray | None = None
    test_error: np.ndarray | None = None
    landscape: Landscape | None = field(default=None, repr=False)
    test_landscape: Landscape | None = field(default=None, repr=False)
    alignment: Alignment | None = field(default=None, repr=False)
    bn_statistics: str = "recompute"
    path: str = "line"

    def height(self, definition: Literal["mean", "linear"] = "mean", metric: Literal["loss", "error"] = "loss",
               split: Literal["train", "test"] = "train") -> float:
        """The barrier's height (:func:`barrier_height`) of ``metric`` on ``split``'s data.

        The error at a point whose loss is not finite is taken as NaN too (its outputs' argmax is
        no prediction), so such a point makes both heights NaN.

        Raises
        ------
        InvalidParameterError
            ``error`` of a task that is not a classification, or ``test`` without test data.
        """
        check_param("metric", metric, [Options(("loss", "error"))], caller="Barrier.height")
        check_param("split", split, [Options(("train", "test"))], caller="Barrier.height")
        values = {("loss", "train"): self.loss, ("error", "train"): self.error,
                  ("loss", "test"): self.test_loss, ("error", "test"): self.test_error}[(metric, split)]
        if values is None:
            why = "no test_data was given" if split == "test" and self.test_loss is None else \
                "the task is not a classification (no error)"
            raise InvalidParameterError(f"Barrier.height: no {metric} on the {split} data: {why}.")
        loss = self.loss if split == "train" else self.test_loss
        if metric == "error" and loss is not None:
            values = np.where(np.isfinite(loss), values, np.nan)
        return barrier_height(self.alphas, values, definition)

    def heights(self) -> dict[str, float]:
        """Every height there is: ``{"loss_train_mean": ..., "error_test_linear": ...}``."""
        out = {}
        for split in ("train", "test"):
            for metric in ("loss", "error"):
                for d in DEFINITIONS:
                    try:
                        out[f"{metric}_{split}_{d}"] = self.height(d, metric, split)  # type: ignore[arg-type]
                    except InvalidParameterError:
                        pass
        return out

    @property
    def landscapes(self) -> list[Landscape]:
        """The line landscapes (train, then test): what ``landscape.write_h5`` and the pictures take."""
        return [ls for ls in (self.landscape, self.test_landscape) if ls is not None]

    def summary(self) -> str:
        """A few lines: what was measured, then the loss and error barriers under both definitions
        ("mean" and "linear", :meth:`height`), train and test."""
        h = self.heights()
        lines = [f"  loss {h['loss_train_mean']:.4g} (mean), {h['loss_train_linear']:.4g} (linear)"]
        if "error_train_mean" in h:
            lines.append(f"  error {100 * h['error_train_mean']:.2f} (mean), {100 * h['error_train_linear']:.2f} "
                         "(linear) points")
        if "loss_test_mean" in h:
            lines.append(f"  test loss {h['loss_test_mean']:.4g} (mean), {h['loss_test_linear']:.4g} (linear)")
        if "error_test_mean" in h:
            lines.append(f"  test error {100 * h['error_test_mean']:.2f} (mean), {100 * h['error_test_linear']:.2f} "
                         "(linear) points")
        how = "naive" if self.alignment is None else f"aligned ({self.alignment.method})"
        if self.path != "line":
            how = f"along a {self.path} curve, {how}"
        bad = int(np.count_nonzero(~np.isfinite(self.loss)))
        tail = f", {bad} of {self.loss.size} points non-finite" if bad else ""
        bn = "" if self.bn_statistics == "none" else f", batch norm {self.bn_statistics}"
        return "\n".join([f"barrier, {how}, {self.alphas.size} points{bn}{tail}:", *lines])

    def __repr__(self) -> str:
        return f"Barrier({self.summary()})"

    @classmethod
    def from_landscape(cls, landscape: Landscape, test: Landscape | None = None) -> Barrier:
        """The barrier of an interpolation landscape (any ``x`` range: only ``[0, 1]`` counts).

        Raises
        ------
        InvalidParameterError
            Not a line, or its axis lacks 0, 0.5 or 1.
        """
        check_param("landscape", landscape, [InstanceOf(Landscape)], caller="Barrier.from_landscape")
        if landscape.dims != 1:
            raise InvalidParameterError("Barrier.from_landscape takes a line landscape (an interpolation between "
                                        f"two models); got a plane of shape {np.shape(landscape.z)}.")
        alphas = check_grid(landscape.x, "landscape's axis", "Barrier.from_landscape")
        md = landscape.metadata.get("barrier") or {}
        return cls(alphas, np.asarray(landscape.z, dtype=np.float64), _error(landscape),
                   None if test is None else np.asarray(test.z, dtype=np.float64), _error(test), landscape, test,
                   None, str(md.get("bn_statistics", landscape.metadata.get("bn_statistics", "recompute"))))


def classifies(task: Any, batch: Any) -> bool:
    """Whether the error is defined: a supervised task whose targets (in ``batch``) are class indices."""
    if not isinstance(task, Supervised):
        return False
    _, targets = task.split(batch)
    return isinstance(targets, torch.Tensor) and not targets.is_floating_point() and targets.dim() == 1


def check_test_data(test_data: Any, task: Any, caller: str) -> None:
    """Refuse ``test_data`` of no accepted form before any work (its first sample read)."""
    try:
        samples_of(test_data, 1, task, caller)
    except InvalidParameterError:
        raise
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The 'test_data' parameter of {caller} must be None or data of a form 'data' takes: a DataLoader, an "
            f"iterable of batches, a Dataset or an (inputs, labels) pair of tensors. Got {type(test_data).__name__} "
            f"instead ({exc}).") from None


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: t.detach() for k, t in model.state_dict().items()}


def check_align(value: Any, model: nn.Module, caller: str) -> None:
    check_param("align", value, [None, Options(ALIGN), InstanceOf(Alignment)], caller=caller,
                hint="'weights' or 'activations' to align B to A first, an Alignment, or None for the naive line.")
    if isinstance(value, Alignment):
        check_spec(value.spec, model, caller)


def barrier(model_a: nn.Module, model_b: nn.Module, loss_fn: Any = None, data: Any = None, *, task: Any = None,
            points: int = 25, align: str | Alignment | None = None,
            bn_statistics: Literal["recompute", "clamped", "affine", "a"] = "recompute", test_data: Any = None,
            include: str | Sequence[str] | None = None, ignore: str | Sequence[str] | None = None,
            num_samples: int | None = None, seed: int = 0, tag: str = "barrier") -> Barrier:
    """The loss and error barrier between two models along the straight line, as a line landscape.

    Parameters
    ----------
    model_a, model_b : nn.Module
        Two models of one architecture (checked: same tensors and shapes, finite weights).
    loss_fn : callable, optional
        ``loss_fn(outputs, labels)``; or give ``task``.
    data : DataLoader, iterable of batches, Dataset or (inputs, labels) tensors
        The training data: the loss and error along the line (all of it, or ``num_samples``),
        the samples batch-norm statistics are re-estimated on (for both lines), and those the
        alignment is found (activations) and checked on.
    task : callable, optional
        ``task(model, batch) -> loss`` (``landscape.tasks``).
    points : int, default=25
        ``alpha in linspace(0, 1, points)``: odd, so that the grid holds 0.5.
    align : {"weights", "activations", "none"}, Alignment or None, default=None
        Permute B into A's basis first (:func:`landscape.align`), with a given alignment, or
        not (the naive barrier). A given alignment is checked on ``data`` before it is used.
    bn_statistics : {"recompute", "clamped", "affine", "a"}, default="recompute"
        Batch-norm statistics along the line: re-estimated at every alpha from ``data``
        (REPAIR's reset; without it a barrier is mostly an artefact), interpolated with the
        weights ("clamped", "affine"), or A's ("a"); see ``compute_landscape``.
    test_data : optional
        The same on held-out data (``Barrier.test_loss``, ``test_error``): a line of its own,
        evaluated on ``test_data`` with the batch-norm statistics ("recompute") estimated on
        ``data`` at every alpha (REPAIR's and Garipov et al.'s rule, ``Curve.barrier``'s), never
        on the test samples (``compute_landscape``'s ``bn_data``).
    include, ignore : str or list of str, optional
        Interpolate only these parameters (globs, as in ``compute_landscape``) and hold the
        rest at A's: a layer's barrier, or the adapters'.
    num_samples : int, optional
        Samples of ``data`` and ``test_data`` used (default: all).
    seed : int, default=0
        Weight matching's order of groups.
    tag : str, default="barrier"
        The landscapes' tags: ``{tag}_train`` and ``{tag}_test``.

    Returns
    -------
    Barrier
        ``Barrier.height(definition, metric, split)``; ``Barrier.landscapes`` for the pictures,
        the report and ``landscape.write_h5``.

    Examples
    --------
    >>> import torch
    >>> from landscape import barrier
    >>> from landscape.examples import MLP, digits_tensors
    >>> x, y = digits_tensors()
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> b = barrier(MLP(16), MLP(16), torch.nn.CrossEntropyLoss(), (x[:64], y[:64]), points=5)
    >>> b.alphas.tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    caller = "barrier"
    check_pair(model_a, model_b, caller)
    check_param("points", points, [Interval(int, 3, None)], caller=caller)
    if points % 2 == 0:
        raise InvalidParameterError(
            f"The 'points' parameter of {caller} must be odd, so that linspace(0, 1, points) holds alpha = 0.5 (a "
            f"barrier is taken at the midpoint); got {points}. HINT: points=25, as Git Re-Basin.")
    a, b = unwrap_module(model_a), unwrap_module(model_b)
    check_align(align, a, caller)
    check_param("bn_statistics", bn_statistics, [Options(BN_STATISTICS)], caller=caller,
                hint="'recompute' re-estimates them at every alpha (the default), 'clamped'/'affine' interpolate "
                     "them, 'a' keeps A's.")
    check_param("num_samples", num_samples, [None, Interval(int, 1, None)], caller=caller)
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("tag", tag, [str], caller=caller)
    if data is None:
        raise InvalidParameterError(f"The 'data' parameter of {caller} is required: a DataLoader, an iterable of "
                                    "batches, a Dataset or an (inputs, labels) pair of tensors.")
    check_selection(a, ignore, include, caller)
    t = task_of(loss_fn, task, caller)
    if t is None:
        raise InvalidParameterError(f"{caller}: give a loss_fn(outputs, labels) or a task(model, batch) -> loss.")
    if test_data is not None:
        test_data = replayable(test_data, num_samples, t, caller)
        check_test_data(test_data, t, caller)
    data = replayable(data, num_samples, t, caller)
    alignment = resolve_alignment(align, a, b, data, t, seed, num_samples, caller)
    state_b = _state(b) if alignment is None else alignment.apply_state(_state(b))
    classify = isinstance(t, Supervised) and classifies(t, samples_of(data, 1, t, caller).batches[0])
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in a.modules())
    record: dict[str, Any] = {"definitions": list(DEFINITIONS), "points": int(points),
                              "bn_statistics": bn_statistics if has_bn else "none",
                              "alignment": "none" if alignment is None else alignment.method,
                              "alignment_digest": None if alignment is None else alignment.digest,
                              "include": include, "ignore": ignore}

    def line(d: Any, split: str) -> Landscape:
        # the test line's statistics are the training samples' (bn_data), as on the training line
        bn_data = data if split == "test" and has_bn and bn_statistics == "recompute" else None
        return compute_landscape(a, task=t, data=d, between=(_state(a), state_b), x=(0.0, 1.0, points),
                                 metrics={"accuracy": get_metric("accuracy")} if classify else None,
                                 bn_statistics=bn_statistics, include=include, ignore=ignore,
                                 num_samples=num_samples, tag=f"{tag}_{split}", bn_data=bn_data)

    train = line(data, "train")
    test = line(test_data, "test") if test_data is not None else None
    out = Barrier(np.asarray(train.x, dtype=np.float64), np.asarray(train.z, dtype=np.float64), _error(train),
                  None if test is None else np.asarray(test.z, dtype=np.float64), _error(test), train, test,
                  alignment, bn_statistics if has_bn else "none")
    heights = out.heights()
    for split, ls in (("train", train), ("test", test)):
        if ls is not None:
            mine = {k.replace(f"_{split}", ""): v for k, v in heights.items() if f"_{split}_" in k}
            ls.metadata["barrier"] = {**record, "split": split, **mine}
    return out


def resolve_alignment(value: Any, a: nn.Module, b: nn.Module, data: Any, task: Any, seed: int,
                      num_samples: int | None, caller: str) -> Alignment | None:
    """The alignment ``align=`` asks for: none, a given one (checked on ``data``), or one found now."""
    if value is None or value == "none":
        return None
    if isinstance(value, Alignment):
        value.check(b, data, task=task)
        return value
    return align(a, b, method=value, data=data, seed=seed, task=task, num_samples=num_samples)
