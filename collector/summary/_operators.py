"""Summary operators: record a value from anywhere in the training code with one line.

PyTorch counterparts of MindSpore's ``ScalarSummary``, ``TensorSummary``, ``ImageSummary``
and ``HistogramSummary``. Call them where the value exists: a module's ``forward``, a loss
function, an optimizer's ``step``, a hook. Each call buffers the value into the open
:class:`SummaryRecord` (the one a :class:`SummaryCollector` opens, or your own); the record
writes it at its next ``record(step)``.

* **Free when nothing collects.** With no SummaryRecord open the call returns at once: no
  copy, no synchronisation, no tensor operation. Leave the calls in your model.
* **Train mode only.** While the record is in ``set_mode("eval")`` calls are ignored, as
  MindSpore ignores its summary operators during evaluation.
* **Tags.** The tag written is the name given (``scalar("loss", x)`` writes ``loss`` with the
  scalar plugin; MindInsight lists it as ``loss/scalar``). A scalar and a histogram may share
  a name.
* **A name reused in one step** keeps the newest value, with a warning once per name and
  record (MindSpore leaves the result undefined). A step ends at ``record(step)`` (under
  SummaryCollector, at every ``step_end``); an operator's value wins over ``add_value``'s.
* **Cost while recording.** The value is validated and copied to host memory at the call (a
  GPU tensor is synchronised then; a wrong value raises at the call site); encoding and
  writing happen later, on the record's writer thread.
* **torch.compile.** With no record open a compiled model holds no trace of the operator (the
  check is a global read dynamo turns into a guard); while one is open the buffering runs
  eagerly behind ``torch.compiler.disable``, made on first need so that importing the
  collector does not import ``torch._dynamo``.

Examples
--------
>>> import tempfile, torch
>>> import collector.summary as summary
>>> from collector import SummaryRecord, SummaryReader
>>> summary.scalar("loss", torch.tensor(0.5))  # nothing open: returns at once
>>> with SummaryRecord(tempfile.mkdtemp()) as rec:
...     summary.scalar("loss", torch.tensor(0.25))
...     _ = rec.record(1)
>>> SummaryReader(rec.log_dir).scalars()["loss"][1].tolist()
[0.25]
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import torch

from collector.summary import _record as _sr
from collector.summary._record import SummaryRecord

logger = logging.getLogger(__name__)

__all__ = ["scalar", "tensor", "image", "histogram", "is_recording", "discard_pending"]

# Records already warned about a name reused in one step: {record: {(plugin, name)}}.
_warned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scalar(name: str, value: Any) -> None:
    """Record a scalar (MindSpore's ``ScalarSummary``).

    Parameters
    ----------
    name : str
        The tag, non-empty.
    value : torch.Tensor, numpy.ndarray or number
        One value; a larger tensor is logged and its first element recorded.
    """
    if _sr.open_record_ref is not None and (rec := _sr.operator_record()) is not None:
        _buffer(rec, "scalar", name, value)


def tensor(name: str, value: Any) -> None:
    """Record a whole tensor (MindSpore's ``TensorSummary``).

    Parameters
    ----------
    name : str
        The tag, non-empty.
    value : torch.Tensor, numpy.ndarray or number
        Written with its shape and dtype.
    """
    if _sr.open_record_ref is not None and (rec := _sr.operator_record()) is not None:
        _buffer(rec, "tensor", name, value)


def image(name: str, value: Any) -> None:
    """Record images (MindSpore's ``ImageSummary``).

    Parameters
    ----------
    name : str
        The tag, non-empty.
    value : torch.Tensor or numpy.ndarray of shape (N, C, H, W), C in {1, 3}
        The batch is tiled into one picture; floats in [0, 1] are scaled by 255.
    """
    if _sr.open_record_ref is not None and (rec := _sr.operator_record()) is not None:
        _buffer(rec, "image", name, value)


def histogram(name: str, value: Any) -> None:
    """Record the distribution of a tensor's values (MindSpore's ``HistogramSummary``).

    Parameters
    ----------
    name : str
        The tag, non-empty; for a gradient MindSpore's tutorial uses
        ``param_name + ".gradient"``.
    value : torch.Tensor or numpy.ndarray
        Numeric values; binned as MindSpore bins them when the record writes.

    Examples
    --------
    The tutorial's tip on gradients, for a torch optimizer:

    >>> import torch
    >>> import collector.summary as summary
    >>> class RecordingSGD(torch.optim.SGD):
    ...     def step(self, closure=None):
    ...         for group in self.param_groups:
    ...             for i, p in enumerate(group["params"]):
    ...                 if p.grad is not None:
    ...                     summary.histogram(f"param{i}.gradient", p.grad)
    ...         return super().step(closure)
    """
    if _sr.open_record_ref is not None and (rec := _sr.operator_record()) is not None:
        _buffer(rec, "histogram", name, value)


def is_recording() -> bool:
    """Whether a summary operator called now would record its value.

    Useful to skip computing a value only an operator needs
    (``if summary.is_recording(): summary.tensor("attn", attn.softmax(-1))``).
    """
    return _sr.operator_record() is not None


def discard_pending() -> None:
    """Drop the operator values buffered since the last ``record``: the step is not collected.

    SummaryCollector calls this at the ``step_end`` of a step it does not record, so
    that a value reaches the file only with the step that produced it, and a name used
    once per step is not reported as reused. Does nothing when no record is open.
    """
    rec = _sr.open_record()
    if rec is not None:
        rec.discard_operator_values()


def _buffer(rec: SummaryRecord, plugin: str, name: str, value: Any) -> None:
    """Buffer one operator value into ``rec``: at once, or behind a graph break while dynamo traces the call."""
    if torch.compiler.is_compiling():
        # dynamo is tracing (so torch._dynamo is loaded already): the call becomes a graph break
        # and the buffering runs eagerly, with real values, as under @torch.compiler.disable
        (_disabled_buffer or _make_disabled_buffer())(rec, plugin, name, value)
    else:
        _buffer_now(rec, plugin, name, value)


#: ``torch.compiler.disable(_buffer_now)`` once made (see :func:`_make_disabled_buffer`).
_disabled_buffer: Any = None


def _make_disabled_buffer() -> Any:
    """``torch.compiler.disable(_buffer_now)``, made once, on first need."""
    global _disabled_buffer
    if _disabled_buffer is None:
        _disabled_buffer = torch.compiler.disable(_buffer_now)
    return _disabled_buffer


def _buffer_now(rec: SummaryRecord, plugin: str, name: str, value: Any) -> None:
    """Validate, copy and buffer one operator value into ``rec``, the open record (train mode)."""
    if type(name) is not str or not name:
        raise ValueError(f"collector.summary.{plugin}: the name must be a non-empty str. "
                         f"Got {name!r} instead.")
    if rec.buffer_operator_value(plugin, name, value):
        warned = _warned.setdefault(rec, set())
        key = (plugin, name)
        if key not in warned:
            warned.add(key)
            logger.warning("%r has duplicate values. Only the newest one will be recorded. (A summary operator "
                           "name must not be repeated within one step; this is reported once.)", f"{name}/{plugin}")
