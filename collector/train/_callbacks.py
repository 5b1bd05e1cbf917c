"""Callbacks run by :class:`collector.Model` (MindSpore's ``mindspore.train.callback``).

A callback is a context manager with six do-nothing hooks; :class:`Model` enters every
callback before training (``__enter__``), calls the hooks with a :class:`RunContext`,
and leaves them afterwards (``__exit__``, also when training raises) so a callback that
holds a resource (a summary file, a writer thread) can release it.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from collector.common import InstanceOf, Interval, check_param

__all__ = [
    "Callback",
    "CallbackParams",
    "RunContext",
    "LambdaCallback",
    "History",
    "LearningRateScheduler",
    "LossMonitor",
    "run_network",
]

logger = logging.getLogger(__name__)


class CallbackParams(dict):
    """The run-context arguments: a dict whose keys are also attributes.

    MindSpore callbacks read ``cb_params.cur_step_num``; a dict keeps ``"key" in cb_params``
    and ``cb_params.get(...)`` working as well.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"run-context arguments have no {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None


class RunContext:
    """Information about the running model, handed to every hook.

    Parameters
    ----------
    original_args : dict
        The run-context arguments (``train_network``, ``cur_step_num``, ...). A plain
        dict is wrapped in :class:`CallbackParams` so its keys read as attributes.
    """

    def __init__(self, original_args: Mapping[str, Any]) -> None:
        check_param("original_args", original_args, [InstanceOf(Mapping)], caller="RunContext")
        if not isinstance(original_args, CallbackParams):
            original_args = CallbackParams(original_args)
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self) -> CallbackParams:
        """Return the run-context arguments (the object the model updates in place)."""
        return self._original_args

    def request_stop(self) -> None:
        """Ask the model to stop after the current step (checked after ``step_end``)."""
        self._stop_requested = True

    def get_stop_requested(self) -> bool:
        """Return True once :meth:`request_stop` was called."""
        return self._stop_requested


class Callback:
    """Base class of callbacks: every hook does nothing until overridden.

    A callback is also a context manager; :class:`Model` enters it before the first hook
    and exits it after the last one (exceptions included), so ``__enter__`` /
    ``__exit__`` are where resources are opened and released.

    Examples
    --------
    >>> class PrintStep(Callback):
    ...     def step_end(self, run_context):
    ...         print("step", run_context.original_args().cur_step_num)
    """

    def __enter__(self) -> Callback:
        return self

    def __exit__(self, *exc_args: Any) -> bool | None:
        return None

    def begin(self, run_context: RunContext) -> None:
        """Called once before the network runs."""

    def epoch_begin(self, run_context: RunContext) -> None:
        """Called before each epoch (training only)."""

    def epoch_end(self, run_context: RunContext) -> None:
        """Called after each epoch (training only)."""

    def step_begin(self, run_context: RunContext) -> None:
        """Called before each step."""

    def step_end(self, run_context: RunContext) -> None:
        """Called after each step."""

    def end(self, run_context: RunContext) -> None:
        """Called once after the network ran (not when training raised; see ``__exit__``)."""


_HOOKS = ("begin", "epoch_begin", "epoch_end", "step_begin", "step_end", "end")


def _overrides(cb: Callback, hook: str) -> bool:
    """Whether ``cb`` does something at ``hook``: its class or the instance replaces Callback's no-op."""
    return hook in getattr(cb, "__dict__", ()) or getattr(type(cb), hook, None) is not getattr(Callback, hook)


class _CallbackList(Callback):
    """Runs a list of callbacks in order and enters/exits them as one context manager."""

    def __init__(self, callbacks: Callback | Iterable[Callback] | None, *, caller: str = "Model") -> None:
        if callbacks is None:
            items: list[Callback] = []
        elif isinstance(callbacks, Callback):
            items = [callbacks]
        elif isinstance(callbacks, (list, tuple)):
            items = list(callbacks)
        else:
            check_param("callbacks", callbacks, [None, InstanceOf(Callback), InstanceOf(list, tuple)], caller=caller)
            items = []  # unreachable: check_param raised
        for i, cb in enumerate(items):
            check_param(f"callbacks[{i}]", cb, [InstanceOf(Callback)], caller=caller,
                        hint="subclass collector.Callback or wrap functions in LambdaCallback.")
        # One SummaryRecord may be open per process, so two collectors can never both write.
        n_collectors = sum(1 for cb in items if getattr(cb, "_is_summary_collector", False))
        if n_collectors > 1:
            raise ValueError(
                f"The 'callbacks' parameter of {caller} may hold at most one SummaryCollector; got "
                f"{n_collectors}. HINT: collect into one summary_dir per run with a single SummaryCollector."
            )
        self.callbacks = items
        self._stack: contextlib.ExitStack | None = None
        # Per hook, the callbacks that do something there (see __enter__); None: all of them.
        self._active: dict[str, list[Callback]] | None = None

    def __enter__(self) -> _CallbackList:
        stack = contextlib.ExitStack()
        try:
            for cb in self.callbacks:
                stack.enter_context(cb)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        # step_begin/step_end run at every step: skip the callbacks that keep Callback's
        # do-nothing hook (neither their class nor the instance replaces it), decided once
        # per run rather than looked up at every step.
        self._active = {hook: [cb for cb in self.callbacks if _overrides(cb, hook)] for hook in _HOOKS}
        return self

    def __exit__(self, *exc_args: Any) -> bool:
        stack, self._stack = self._stack, None
        self._active = None
        if stack is None:
            return False
        return bool(stack.__exit__(*exc_args))

    def _call(self, hook: str, run_context: RunContext) -> None:
        callbacks = self.callbacks if self._active is None else self._active[hook]
        for cb in callbacks:
            getattr(cb, hook)(run_context)

    def begin(self, run_context: RunContext) -> None:
        self._call("begin", run_context)

    def epoch_begin(self, run_context: RunContext) -> None:
        self._call("epoch_begin", run_context)

    def epoch_end(self, run_context: RunContext) -> None:
        self._call("epoch_end", run_context)

    def step_begin(self, run_context: RunContext) -> None:
        self._call("step_begin", run_context)

    def step_end(self, run_context: RunContext) -> None:
        self._call("step_end", run_context)

    def end(self, run_context: RunContext) -> None:
        self._call("end", run_context)


class LambdaCallback(Callback):
    """A callback built from functions, each taking the :class:`RunContext`.

    Parameters
    ----------
    epoch_begin, epoch_end, step_begin, step_end, begin, end : callable, default=None
        Called at the matching hook; None leaves that hook doing nothing.
    """

    def __init__(
        self,
        epoch_begin: Callable[[RunContext], Any] | None = None,
        epoch_end: Callable[[RunContext], Any] | None = None,
        step_begin: Callable[[RunContext], Any] | None = None,
        step_end: Callable[[RunContext], Any] | None = None,
        begin: Callable[[RunContext], Any] | None = None,
        end: Callable[[RunContext], Any] | None = None,
    ) -> None:
        funcs = dict(epoch_begin=epoch_begin, epoch_end=epoch_end, step_begin=step_begin,
                     step_end=step_end, begin=begin, end=end)
        for name, fn in funcs.items():
            check_param(name, fn, [None, "callable"], caller="LambdaCallback")
            if fn is not None:
                # An instance attribute shadows the do-nothing method of the same name.
                object.__setattr__(self, name, fn)


def _first_output_mean(outputs: Any) -> float:
    """The first network output as a float (mean over its elements), as MindSpore's History does."""
    if isinstance(outputs, (tuple, list)):
        outputs = outputs[0]
    if isinstance(outputs, torch.Tensor):
        return float(outputs.detach().float().mean())
    return float(outputs)


class History(Callback):
    """Record the network output (the loss) and evaluation metrics of every epoch.

    Attributes
    ----------
    epoch : list of int
        The epoch numbers seen (``cur_epoch_num``).
    history : dict of str to list
        ``"net_output"``: the first network output of each epoch's last step, averaged
        over its elements; plus one list per metric when the run context carries
        ``metrics`` (as it does after :meth:`Model.eval`).
    """

    def __init__(self) -> None:
        self.epoch: list[int] = []
        self.history: dict[str, list[float]] = {}

    def begin(self, run_context: RunContext) -> None:
        """Reset ``epoch`` and ``history`` for a new run."""
        self.epoch = []
        self.history = {}

    def epoch_end(self, run_context: RunContext) -> None:
        """Append this epoch's network output (and metrics, when present)."""
        cb_params = run_context.original_args()
        self.epoch.append(int(cb_params.get("cur_epoch_num", len(self.epoch) + 1)))
        outputs = cb_params.get("net_outputs")
        if outputs is not None:
            self.history.setdefault("net_output", []).append(_first_output_mean(outputs))
        for name, value in (cb_params.get("metrics") or {}).items():
            self.history.setdefault(name, []).append(value)


class LearningRateScheduler(Callback):
    """Change the learning rate at the end of every step.

    Parameters
    ----------
    learning_rate_function : callable
        ``learning_rate_function(lr, cur_step_num) -> new_lr``, called for every
        parameter group of the torch optimizer with the group's current ``lr``; a
        changed value is written back to ``param_groups[i]["lr"]``.
    """

    def __init__(self, learning_rate_function: Callable[[float, int], float]) -> None:
        check_param("learning_rate_function", learning_rate_function, ["callable"],
                    caller="LearningRateScheduler")
        self.learning_rate_function = learning_rate_function

    def step_end(self, run_context: RunContext) -> None:
        """Apply ``learning_rate_function`` to every parameter group."""
        cb_params = run_context.original_args()
        optimizer = cb_params.get("optimizer")
        if optimizer is None:
            return
        step = int(cb_params.cur_step_num)
        for group in optimizer.param_groups:
            lr = group["lr"]
            current = float(lr) if isinstance(lr, torch.Tensor) else lr
            new_lr = self.learning_rate_function(current, step)
            if new_lr != current:
                if isinstance(lr, torch.Tensor):
                    # Tensor learning rates (capturable optimizers) must keep their device.
                    lr.fill_(float(new_lr))
                else:
                    group["lr"] = float(new_lr)


class LossMonitor(Callback):
    """Log the loss every ``per_print_times`` steps and stop on NaN/inf.

    Parameters
    ----------
    per_print_times : int, default=1
        Log every this many steps of an epoch; 0 never logs (the NaN/inf check still
        runs on the steps that would log, so 0 also skips it).
    print_fn : callable, default=None
        Where the line goes; None logs at INFO on this module's logger.

    Raises
    ------
    ValueError
        At ``step_end`` when the loss is NaN or infinite ("Invalid loss, terminating
        training."), as MindSpore's LossMonitor does.
    """

    def __init__(self, per_print_times: int = 1, print_fn: Callable[[str], Any] | None = None) -> None:
        check_param("per_print_times", per_print_times, [Interval(int, 0, None)], caller="LossMonitor")
        check_param("print_fn", print_fn, [None, "callable"], caller="LossMonitor")
        self.per_print_times = per_print_times
        self._print = print_fn if print_fn is not None else logger.info

    def step_end(self, run_context: RunContext) -> None:
        """Log ``epoch: E step: S, loss is L`` and raise on an invalid loss."""
        if self.per_print_times == 0:
            return
        cb_params = run_context.original_args()
        step_in_epoch = int(cb_params.get("cur_step_in_epoch", cb_params.cur_step_num))
        if step_in_epoch % self.per_print_times != 0:
            return
        loss = _first_output_mean(cb_params.net_outputs)
        epoch = cb_params.get("cur_epoch_num")
        if not math.isfinite(loss):
            raise ValueError(f"epoch: {epoch} step: {step_in_epoch}. Invalid loss {loss}, terminating training.")
        self._print(f"epoch: {epoch} step: {step_in_epoch}, loss is {loss}")


def run_network(cb_params: Any) -> Any:
    """The network a run trains: ``cb_params.network``, else ``train_network``.

    Compared with None rather than by truth value: a ``torch.compile``d module has none
    (``bool()`` falls back to ``len()``, which it refuses).
    """
    network = cb_params.get("network")
    return network if network is not None else cb_params.get("train_network")
