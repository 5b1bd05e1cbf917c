"""Tasks: what the loss of a model on a batch is, for any batch structure and model output.

A task is a callable ``task(model, batch) -> loss``: the loss as a 0-d tensor, the mean
over the batch's samples. Any batch works (a tensor pair, a dict of token ids and masks,
nested tuples, several inputs) and any model output (a tensor, a tuple, an object with
``.loss``), because the task, not the engine, knows how the two meet. The loss over
several batches is the mean of the batches' losses weighted by their sizes: the number
of samples, ``task.batch_size(batch)`` when the task defines it (e.g. a count of tokens),
else the first dimension of the first tensor found in the batch.

Batches move to the device by one rule (:func:`to_device`): every tensor anywhere in the
batch's structure (dicts, lists, tuples, named tuples, and the ``UserDict``-like
``BatchEncoding`` of Hugging Face) is moved; everything else is passed unchanged.

Ready-made tasks: :class:`Supervised` (``loss_fn(model(inputs), targets)``, with
:func:`classification` and :func:`regression`) and :class:`HuggingFace`
(``model(**batch).loss``). A plain ``loss_fn(outputs, labels)`` is the task
``Supervised(loss_fn)``: that is what ``compute_landscape(network, loss_fn, ...)`` uses.
"""

from __future__ import annotations

import collections.abc as cabc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Task", "Supervised", "HuggingFace", "classification", "regression", "as_task", "to_device",
           "batch_size", "slice_batch", "mean_loss", "map_tensors", "tensors_in", "NotOneNumber",
           "ELEMENTWISE_LOSSES", "broadcast_mismatch"]


@runtime_checkable
class Task(Protocol):
    """``task(model, batch) -> loss``: a 0-d tensor, the mean loss over the batch's samples.

    Optionally ``task.batch_size(batch) -> int``, the weight of the batch when several are
    averaged (default: the first tensor's first dimension).
    """

    def __call__(self, model: Any, batch: Any) -> torch.Tensor: ...


class NotOneNumber(ValueError):
    """A loss that is not one number per batch (a per-sample loss, say): refused, with the fix.

    Attributes
    ----------
    shape : tuple of int
        What the loss was.
    rule : str
        The rule and the fix, in words.
    """

    def __init__(self, loss_fn: Any, shape: tuple[int, ...], n: int) -> None:
        self.shape, self.rule = shape, (
            "a landscape's loss is one number per batch (a tensor of one element), the mean over its samples. "
            "HINT: use its 'mean' reduction (e.g. MSELoss() rather than MSELoss(reduction='none')), or pass a "
            "task(model, batch) that reduces it as training did.")
        super().__init__(f"The loss_fn {loss_fn!r} returned a tensor of shape {shape} for a batch of {n} samples; "
                         + self.rule)


def mean_loss(value: torch.Tensor, n: int, loss_fn: Any) -> torch.Tensor:
    """The mean over samples of a batch's loss, as a 0-d tensor.

    A 'mean' reduction's value is returned as it is, a 'sum' reduction's divided by ``n``. A
    value of more than one element ('none') is refused: its reduction is the user's (class
    weights, ignored labels and padding make it another mean than the average of the
    elements), so it is not guessed.

    Parameters
    ----------
    value : tensor
        What ``loss_fn`` returned for a batch: one number (0-d or one element).
    n : int
        The batch's samples.
    loss_fn : callable
        The loss; its ``reduction`` attribute says how ``value`` was reduced.

    Returns
    -------
    tensor
        0-d, the mean over the batch's samples.

    Raises
    ------
    NotOneNumber
        ``value`` has more than one element.
    """
    if value.numel() != 1:
        raise NotOneNumber(loss_fn, tuple(value.shape), n)
    value = value.reshape(()) if value.dim() else value
    if getattr(loss_fn, "reduction", None) == "sum":
        return value / n
    return value


#: Loss modules that compare outputs and targets element by element: torch broadcasts two shapes that
#: differ ((N, 1) against (N,) gives (N, N)), so the shapes must be equal.
ELEMENTWISE_LOSSES: tuple[type, ...] = (nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.BCELoss,
                                        nn.BCEWithLogitsLoss, nn.SoftMarginLoss, nn.PoissonNLLLoss, nn.KLDivLoss)
_ELEMENTWISE_FUNCTIONS = (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy,
                          F.binary_cross_entropy_with_logits, F.soft_margin_loss, F.poisson_nll_loss, F.kl_div)


def broadcast_mismatch(loss_fn: Any, outputs: Any, targets: Any) -> str | None:
    """Why ``loss_fn(outputs, targets)`` would broadcast two shapes (words for a refusal), or None.

    Only for the element-wise losses (:data:`ELEMENTWISE_LOSSES` and their functional forms):
    their outputs and targets must have one shape. Class-index targets of a cross-entropy or
    NLL loss ((N, C) against (N,)) are what those losses take, and are not checked.

    Parameters
    ----------
    loss_fn : callable
        The loss module or function.
    outputs, targets : object
        The model's outputs and the batch's targets (tensors are checked, anything else is not).

    Returns
    -------
    str or None
        The cause and the fix, or None when the shapes are fine or not checked.
    """
    if not (isinstance(loss_fn, ELEMENTWISE_LOSSES) or loss_fn in _ELEMENTWISE_FUNCTIONS):
        return None
    if not (isinstance(outputs, torch.Tensor) and isinstance(targets, torch.Tensor)):
        return None
    if outputs.shape == targets.shape:
        return None
    try:
        both = tuple(torch.broadcast_shapes(outputs.shape, targets.shape))
        what = f"broadcasts them to {both}, comparing every output with every target it meets"
    except RuntimeError:
        what = "cannot pair them"
    name = type(loss_fn).__name__ if isinstance(loss_fn, nn.Module) else getattr(loss_fn, "__name__", "loss_fn")
    fix = ("reshape the targets to the outputs' shape (y.reshape(-1, 1) for one output per sample), or take the "
           "output's last dimension away: Supervised(loss_fn, output=lambda out: out.squeeze(-1))"
           if outputs.dim() == targets.dim() + 1 and outputs.shape[-1] == 1 else
           "give targets of the outputs' shape, or a task(model, batch) that matches them as training did")
    return (f"the model's outputs have shape {tuple(outputs.shape)} and the targets {tuple(targets.shape)}: {name} "
            f"{what}. HINT: {fix}.")


def _first_tensor(obj: Any) -> torch.Tensor | None:
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, Mapping):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def batch_size(batch: Any, task: Any = None) -> int:
    """The weight of a batch when batches are averaged.

    Parameters
    ----------
    batch : any
        Tensors in nested tuples, lists and mappings.
    task : callable, optional
        Its ``batch_size(batch)``, where it has one, decides.

    Returns
    -------
    int
        ``task.batch_size(batch)``, else the first dimension of the first tensor found in
        the batch (depth first).
    """
    if task is not None and callable(getattr(task, "batch_size", None)):
        return int(task.batch_size(batch))
    first = _first_tensor(batch)
    if first is None or first.dim() == 0:
        raise ValueError("A batch must hold a tensor with a sample dimension (or the task must define "
                         f"batch_size(batch)); got a {type(batch).__name__} with none.")
    return int(first.shape[0])


def _rebuild(obj: Any, items: Sequence[Any]) -> Any:
    """``obj``'s container type around ``items`` (named tuples and Mapping subclasses kept)."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*items)
    return type(obj)(items)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``obj`` with ``fn`` applied to every tensor in its structure.

    Parameters
    ----------
    obj : any
        A tensor, or nested tuples (named tuples kept), lists and mappings (a Mapping
        subclass rebuilt where it can be) holding tensors; other values pass unchanged.
    fn : callable
        ``fn(tensor) -> any``.

    Returns
    -------
    any
        The same structure with ``fn``'s results in place of the tensors.
    """
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        mapped = {k: map_tensors(v, fn) for k, v in obj.items()}
        if type(obj) is dict:
            return mapped
        try:  # a BatchEncoding or another Mapping subclass built from a dict
            return type(obj)(mapped)  # type: ignore[call-arg]
        except Exception:
            return mapped
    if isinstance(obj, (list, tuple)):
        return _rebuild(obj, [map_tensors(v, fn) for v in obj])
    return obj


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """The tensors of a batch, in :func:`map_tensors`' order.

    Parameters
    ----------
    obj : any
        Nested tuples, lists and mappings.

    Returns
    -------
    list of tensor
    """
    found: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        found.append(t)
        return t

    map_tensors(obj, keep)
    return found


def to_device(batch: Any, device: torch.device | str, *, non_blocking: bool = False) -> Any:
    """The batch with every tensor in its structure moved to ``device`` (the documented rule).

    Parameters
    ----------
    batch : any
        Tensors in nested tuples, lists and mappings; other values pass unchanged.
    device : torch.device or str
    non_blocking : bool, default=False
        Passed to ``Tensor.to``.

    Returns
    -------
    any
        The same structure, its tensors on ``device``.
    """
    dev = torch.device(device)
    return map_tensors(batch, lambda t: t.to(dev, non_blocking=non_blocking))


def slice_batch(batch: Any, stop: int, start: int = 0, *, size: int | None = None) -> Any:
    """Samples ``start:stop`` of a batch.

    Parameters
    ----------
    batch : any
        Tensors in nested tuples, lists and mappings.
    stop, start : int
        The samples kept.
    size : int, optional
        The batch's size (default :func:`batch_size`).

    Returns
    -------
    any
        The batch with every tensor whose first dimension is its size sliced; other tensors
        and values kept as they are.
    """
    n = batch_size(batch) if size is None else size
    return map_tensors(batch, lambda t: t[start:stop] if t.dim() > 0 and t.shape[0] == n else t)


def _pick(obj: Any, key: Any) -> Any:
    if key is None:
        return obj
    if callable(key):
        return key(obj)
    return obj[key]


def _call(model: Any, x: Any) -> Any:
    if isinstance(x, Mapping):
        return model(**x)
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Tensor):
        return model(*x)
    return model(x)


class Supervised:
    """``loss_fn(model(inputs), targets)`` for batches holding inputs and targets.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(outputs, targets)``, one number per batch: its 'mean' reduction, or 'sum'
        (divided by the batch's samples). A per-sample loss ('none') is refused: its
        reduction is yours (class weights, ignored labels), so pass a task that does it.
    inputs : int, str or callable, default=0
        Where the model's input is in the batch (``batch[inputs]``, or ``inputs(batch)``).
        A tuple or list there is passed as several positional arguments, a dict as
        keyword arguments.
    targets : int, str or callable, default=1
        Where the targets are.
    output : int, str or callable, optional
        What of the model's output the loss takes (``output=0`` for a model returning
        ``(logits, aux)``, ``output="logits"`` for an output object or dict).

    Examples
    --------
    >>> import torch
    >>> task = Supervised(torch.nn.MSELoss())
    >>> model = torch.nn.Linear(3, 1)
    >>> batch = (torch.zeros(4, 3), torch.zeros(4, 1))
    >>> float(task(model, batch)) == float(((model(batch[0])) ** 2).mean())
    True
    """

    def __init__(self, loss_fn: Callable[..., torch.Tensor], *, inputs: Any = 0, targets: Any = 1,
                 output: Any = None) -> None:
        if not callable(loss_fn):
            raise TypeError(f"The 'loss_fn' parameter of Supervised must be a callable. Got {loss_fn!r} instead.")
        self.loss_fn = loss_fn
        self.inputs, self.targets, self.output = inputs, targets, output

    @property
    def plain(self) -> bool:
        """Whether batches are ``(inputs, targets)`` with the model's output used whole."""
        return self.inputs == 0 and self.targets == 1 and self.output is None

    def split(self, batch: Any) -> tuple[Any, Any]:
        """``(inputs, targets)`` of a batch."""
        return _pick(batch, self.inputs), _pick(batch, self.targets)

    def outputs(self, model: Any, inputs: Any) -> Any:
        """The model's output the loss takes."""
        return _pick(_call(model, inputs), self.output)

    def loss(self, outputs: Any, targets: Any) -> torch.Tensor:
        """The mean loss of outputs against targets."""
        n = batch_size(targets) if not isinstance(targets, torch.Tensor) else int(targets.shape[0])
        return mean_loss(self.loss_fn(outputs, targets), n, self.loss_fn)

    def __call__(self, model: Any, batch: Any) -> torch.Tensor:
        inputs, targets = self.split(batch)
        return self.loss(self.outputs(model, inputs), targets)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in ("inputs", "targets", "output")
                        if getattr(self, k) != {"inputs": 0, "targets": 1, "output": None}[k])
        return f"Supervised({self.loss_fn!r}{extra})"


def classification(loss_fn: Callable[..., torch.Tensor] | None = None, **kwargs: Any) -> Supervised:
    """A supervised task with ``nn.CrossEntropyLoss()`` by default (class-index or probability targets).

    Parameters
    ----------
    loss_fn : callable, optional
        ``loss_fn(outputs, targets)``; default ``nn.CrossEntropyLoss()``.
    **kwargs
        ``inputs``, ``targets``, ``output``, as :class:`Supervised` takes them.

    Returns
    -------
    Supervised
    """
    return Supervised(loss_fn if loss_fn is not None else nn.CrossEntropyLoss(), **kwargs)


def regression(loss_fn: Callable[..., torch.Tensor] | None = None, **kwargs: Any) -> Supervised:
    """A supervised task with ``nn.MSELoss()`` by default.

    Parameters
    ----------
    loss_fn : callable, optional
        ``loss_fn(outputs, targets)``; default ``nn.MSELoss()``.
    **kwargs
        ``inputs``, ``targets``, ``output``, as :class:`Supervised` takes them.

    Returns
    -------
    Supervised
    """
    return Supervised(loss_fn if loss_fn is not None else nn.MSELoss(), **kwargs)


class HuggingFace:
    """``model(**batch).loss``: a Hugging Face model given its labels in the batch.

    Parameters
    ----------
    loss : str, default="loss"
        The output's attribute (or key) holding the loss.
    inputs : sequence of str, optional
        Only these keys of the batch are passed to the model (default: all).

    Notes
    -----
    Batches are weighted by their number of samples (the first dimension of the first
    tensor, normally ``input_ids``). A Hugging Face loss is a mean over the batch's
    target tokens, so with batches of different token counts the combined loss is the
    sample-weighted mean of the batches' token means; give the whole set as one batch
    (or equal-length batches) for the exact per-token mean.
    """

    def __init__(self, loss: str = "loss", inputs: Sequence[str] | None = None) -> None:
        self.loss_key = loss
        self.inputs = None if inputs is None else tuple(inputs)

    def __call__(self, model: Any, batch: Any) -> torch.Tensor:
        if not isinstance(batch, cabc.Mapping):
            raise TypeError(f"HuggingFace task: a batch must be a dict of model inputs; got {type(batch).__name__}.")
        kwargs = dict(batch) if self.inputs is None else {k: batch[k] for k in self.inputs}
        out = model(**kwargs)
        loss = out[self.loss_key] if isinstance(out, Mapping) else getattr(out, self.loss_key, None)
        if not isinstance(loss, torch.Tensor):
            raise ValueError(f"HuggingFace task: the model's output has no tensor {self.loss_key!r}; give the batch "
                             "its 'labels' so that the model computes the loss.")
        return loss

    def __repr__(self) -> str:
        return f"HuggingFace(loss={self.loss_key!r}" + (f", inputs={list(self.inputs)!r})" if self.inputs else ")")


def as_task(loss_fn: Any = None, task: Any = None, *, caller: str) -> Any:
    """The task of a call that takes ``loss_fn`` or ``task`` (exactly one of them).

    Parameters
    ----------
    loss_fn : callable, optional
        Becomes ``Supervised(loss_fn)``.
    task : callable, optional
        ``task(model, batch) -> loss``, used as it is.
    caller : str
        The public name that received them, for the error messages.

    Returns
    -------
    callable
        The task.
    """
    if task is not None and loss_fn is not None:
        raise ValueError(f"{caller}: give either loss_fn or task, not both (a task computes its own loss; "
                         "Supervised(loss_fn) is the task of a loss_fn).")
    if task is not None:
        if not callable(task):
            raise TypeError(f"The 'task' parameter of {caller} must be a callable task(model, batch) -> loss. "
                            f"Got {task!r} instead.")
        return task
    if loss_fn is None:
        raise ValueError(f"{caller}: give a loss_fn(outputs, labels) or a task(model, batch) -> loss.")
    if not callable(loss_fn):
        raise TypeError(f"The 'loss_fn' parameter of {caller} must be a callable loss_fn(outputs, labels). "
                        f"Got {loss_fn!r} instead.")
    return Supervised(loss_fn)
