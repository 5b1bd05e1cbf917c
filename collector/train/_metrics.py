"""Evaluation metrics for :meth:`collector.Model.eval` (MindSpore's ``nn.Accuracy``, ``nn.Loss``).

Any object with ``clear()``, ``update(...)`` and ``eval()`` is a metric. By default
:class:`Model` calls ``update(logits, labels)``; a metric whose ``metric_inputs`` class
attribute is ``"loss"`` gets ``update(loss)`` (the batch's mean loss) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from collector.common import InvalidParameterError

__all__ = ["Metric", "Accuracy", "Loss", "get_metric", "check_metrics"]


@runtime_checkable
class Metric(Protocol):
    """What :class:`Model` needs from a metric: ``clear``, ``update`` and ``eval``."""

    def clear(self) -> None: ...

    def update(self, *inputs: Any) -> None: ...

    def eval(self) -> Any: ...


class Accuracy:
    """Fraction of samples whose arg-max prediction equals the label.

    ``update(y_pred, y)``: ``y_pred`` of shape (N, C) (logits or probabilities), ``y``
    class indices of shape (N,) or one-hot of shape (N, C).

    Examples
    --------
    >>> import torch
    >>> acc = Accuracy()
    >>> acc.update(torch.tensor([[0.1, 0.9], [0.8, 0.2]]), torch.tensor([1, 1]))
    >>> acc.eval()
    0.5
    """

    metric_inputs: Literal["pred_label", "loss"] = "pred_label"

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every sample seen."""
        # Counts stay on the device until eval() so update() never synchronises.
        self._correct: torch.Tensor | int = 0
        self._total = 0

    def update(self, y_pred: torch.Tensor, y: torch.Tensor) -> None:
        """Add one batch of predictions and labels."""
        y_pred = torch.as_tensor(y_pred)
        y = torch.as_tensor(y, device=y_pred.device)
        if y.ndim == y_pred.ndim and y.ndim > 1:
            y = y.argmax(dim=-1)
        if y_pred.ndim == 1:
            pred = (y_pred > 0.5).long()  # a single probability/logit per sample
        else:
            pred = y_pred.argmax(dim=-1)
        self._correct = self._correct + (pred == y.long()).sum()
        self._total += int(y.numel())

    def eval(self) -> float:
        """Return the accuracy; raises if no sample was seen."""
        if self._total == 0:
            raise RuntimeError("Accuracy needs at least one update() before eval().")
        return float(self._correct) / self._total


class Loss:
    """Mean of the batch losses (each batch weighs the same, as MindSpore's ``nn.Loss``).

    ``update(loss)`` with the batch's mean loss (a tensor or a number).
    """

    metric_inputs: Literal["pred_label", "loss"] = "loss"

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every batch seen."""
        self._sum: torch.Tensor | float = 0.0
        self._count = 0

    def update(self, loss: Any) -> None:
        """Add one batch's loss (its mean, if it has several elements)."""
        if isinstance(loss, (tuple, list)):
            loss = loss[0]
        if isinstance(loss, torch.Tensor):
            loss = loss.detach().float().mean()
        self._sum = self._sum + loss
        self._count += 1

    def eval(self) -> float:
        """Return the mean batch loss; raises if no batch was seen."""
        if self._count == 0:
            raise RuntimeError("Loss needs at least one update() before eval().")
        return float(self._sum) / self._count


_NAMED: dict[str, type[Accuracy] | type[Loss]] = {"accuracy": Accuracy, "acc": Accuracy, "loss": Loss}


def get_metric(name: str) -> Accuracy | Loss:
    """Return a fresh metric for a name MindSpore accepts in ``metrics={...}`` sets."""
    cls = _NAMED.get(name.lower()) if isinstance(name, str) else None
    if cls is None:
        raise InvalidParameterError(
            f"The metric name {name!r} is not known. Got {name!r} instead of one of {sorted(_NAMED)}. "
            "HINT: pass a dict {name: metric object} for other metrics."
        )
    return cls()


def check_metrics(metrics: Any, *, name: str, caller: str) -> None:
    """Refuse metrics in any form but the accepted ones, listing them.

    Accepted: None; a dict of name to metric, each an object with ``update`` and ``eval``
    (``clear`` optional) or a callable ``m(outputs, labels)``; a list, tuple or set of
    metric names :func:`get_metric` knows. A bare string is refused rather than read as a
    sequence of one-letter names.

    Parameters
    ----------
    metrics : object
        What the user passed.
    name : str
        How the parameter is named in messages (``"metrics"``).
    caller : str
        What it belongs to (``"compute_landscape"``).

    Raises
    ------
    InvalidParameterError
        Naming ``name`` and ``caller``, the accepted forms and the value received.
    """
    forms = ("None, a dict of name to metric (an object with update() and eval(), or a callable "
             f"m(outputs, labels)), or a list, tuple or set of metric names from {sorted(_NAMED)}")
    if metrics is None:
        return
    if isinstance(metrics, Mapping):
        for key, metric in metrics.items():
            if not (callable(metric) or (hasattr(metric, "update") and hasattr(metric, "eval"))):
                raise InvalidParameterError(
                    f"The '{name}[{key!r}]' parameter of {caller} must be a metric: an object with update() and "
                    f"eval(), or a callable m(outputs, labels). Got {metric!r} instead.")
        return
    if isinstance(metrics, (list, tuple, set, frozenset)):
        for item in metrics:
            if not (isinstance(item, str) and item.lower() in _NAMED):
                raise InvalidParameterError(
                    f"The '{name}' parameter of {caller} holds {item!r}, which is not a metric name; the names are "
                    f"{sorted(_NAMED)}. HINT: pass a dict {{name: metric}} for other metrics.")
        return
    hint = ""
    if isinstance(metrics, str):
        hint = f" HINT: one metric by name is a list: [{metrics!r}], or a dict: {{{metrics!r}: Accuracy()}}."
    raise InvalidParameterError(f"The '{name}' parameter of {caller} must be {forms}. Got {metrics!r} "
                                f"({type(metrics).__name__}) instead.{hint}")
