"""What a network computes, recorded at the dispatcher while it runs on real samples (private).

The permutation structure is read from a trace of the ATen operations a forward pass runs
(:class:`Recorder`, a ``TorchDispatchMode``): every operation with its real input and output
tensors, and the module that ran it. Parameters and buffers are recognised by identity. The
trace runs on the engine's copy of the network (:func:`landscape.engine.network_at`: the
caller's tensors, the copy's own modules), in eval mode, with gradients enabled so that
PyTorch's fused inference kernels for attention (``nn.MultiheadAttention``'s and
``nn.TransformerEncoderLayer``'s fast path) are not taken: the trace sees their ATen ops.

A task says how a batch reaches the model (``model(x)``, ``model(**batch)``, ...); the call
it makes is caught by a forward pre-hook on the copy (:func:`model_call`), so any task works.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from landscape.engine import network_at

__all__ = ["Event", "Trace", "Recorder", "model_call", "traced", "run_call", "output_tensors", "shell",
           "call_task"]


@dataclass
class Event:
    """One ATen operation: its overload, the module running it, its tensors in and out."""

    op: Any
    module: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any

    @property
    def name(self) -> str:
        """The operation's name without its overload (``addmm``, ``native_batch_norm``)."""
        return str(self.op.overloadpacket.__name__) if hasattr(self.op, "overloadpacket") else str(self.op)

    @property
    def inputs(self) -> list[torch.Tensor]:
        return [t for t in tree_flatten((self.args, self.kwargs))[0] if isinstance(t, torch.Tensor)]

    @property
    def outputs(self) -> list[torch.Tensor]:
        return [t for t in tree_flatten(self.out)[0] if isinstance(t, torch.Tensor)]

    def bound(self) -> dict[str, Any]:
        """The arguments by the names of the operation's schema (defaults filled in)."""
        got: dict[str, Any] = {}
        for i, arg in enumerate(self.op._schema.arguments):
            if i < len(self.args):
                got[arg.name] = self.args[i]
            elif arg.name in self.kwargs:
                got[arg.name] = self.kwargs[arg.name]
            elif arg.has_default_value():
                got[arg.name] = arg.default_value
        return got


@dataclass
class Trace:
    """The operations of one forward pass, and the tensors that matter to them."""

    events: list[Event]
    params: dict[int, str]  # id of a parameter or buffer of the traced copy -> its (first) name
    inputs: list[torch.Tensor]  # the batch's tensors as the model received them
    outputs: list[torch.Tensor]  # the tensors of the model's output
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


class _Stop(Exception):
    """Raised by the pre-hook once the model's call is caught (the task's loss is not needed)."""


def call_task(task: Any, model: nn.Module, batch: Any) -> Any:
    """``task(model, batch)``, or the model's output for ``task=None`` (``model(inputs)`` of an
    ``(inputs, labels)`` batch, ``model(**batch)`` of a dict)."""
    if task is not None:
        return task(model, batch)
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (list, tuple)):
        return model(batch[0])
    return model(batch)


def model_call(model: nn.Module, task: Any, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments the task calls ``model`` with on ``batch`` (caught before the forward runs)."""
    got: dict[str, Any] = {}

    def hook(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        got["args"], got["kwargs"] = args, dict(kwargs)
        raise _Stop

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        call_task(task, model, batch)
    except _Stop:
        pass
    finally:
        handle.remove()
    if "args" not in got:
        raise ValueError("The task never called the model (model(...)) on a batch, so the network's operations "
                         "cannot be traced. HINT: a task calls model(inputs) or model(**batch).")
    return got["args"], got["kwargs"]


def shell(model: nn.Module, state: Mapping[str, torch.Tensor] | None = None) -> nn.Module:
    """A copy of ``model``'s modules over ``state``'s tensors (its own by default; parameters shared,
    buffers copied), that this module may put in any mode or hook without touching the caller's."""
    if state is None:
        state = {k: t.detach() for k, t in model.state_dict(keep_vars=True).items()}
    return network_at(model, state, None)


def output_tensors(out: Any) -> list[torch.Tensor]:
    """The tensors of a model's output (tensors, tuples, dicts, Hugging Face ``ModelOutput``s)."""
    if hasattr(out, "to_tuple") and callable(out.to_tuple):
        out = out.to_tuple()
    leaves, _ = tree_flatten(out)
    found = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
        elif hasattr(leaf, "to_tuple") or isinstance(leaf, (list, tuple, dict)):
            found.extend(output_tensors(leaf))
    return found


class Recorder(TorchDispatchMode):
    """Records every ATen operation (``events``), or only counts them and keeps the outputs of
    ``keep`` (event index -> output index) for activation statistics."""

    def __init__(self, keep: Mapping[int, int] | None = None) -> None:
        super().__init__()
        self.events: list[Event] = []
        self.keep = dict(keep) if keep is not None else None
        self.kept: dict[int, torch.Tensor] = {}
        self.names: list[str] = []
        self.count = 0
        self.stack: list[str] = [""]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        k = self.count
        self.count += 1
        if self.keep is None:
            self.events.append(Event(func, self.stack[-1], tuple(args), dict(kwargs), out))
        else:
            self.names.append(str(getattr(func, "overloadpacket", func)))
            if k in self.keep:
                flat_out, _ = tree_flatten(out)
                self.kept[k] = flat_out[self.keep[k]].detach()
        return out


@contextlib.contextmanager
def _module_names(net: nn.Module, rec: Recorder) -> Iterator[None]:
    """Keep ``rec.stack`` on the module running (hooks on the copy only)."""
    handles = []
    for name, mod in net.named_modules():
        def pre(m: nn.Module, a: Any, name: str = name) -> None:
            rec.stack.append(name)

        def post(m: nn.Module, a: Any, o: Any) -> None:
            if len(rec.stack) > 1:
                rec.stack.pop()

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _prepared(net: nn.Module, train: bool) -> nn.Module:
    net.train(train)
    for p in net.parameters():  # the fused inference kernels are skipped when a parameter requires grad
        p.requires_grad_(p.is_floating_point() or p.is_complex())
    return net


def run_call(net: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any], rec: Recorder | None = None,
             *, train: bool = False) -> Any:
    """The copy's output on a caught call, recorded by ``rec`` when given (outputs detached)."""
    _prepared(net, train)
    if rec is None:
        with torch.enable_grad():
            return net(*args, **kwargs)
    with torch.enable_grad(), _module_names(net, rec), rec:
        return net(*args, **kwargs)


def traced(model: nn.Module, task: Any, batch: Any, state: Mapping[str, torch.Tensor] | None = None) -> Trace:
    """The trace of ``model`` (over ``state``'s tensors when given) on ``batch``, in eval mode."""
    net = shell(model, state)
    args, kwargs = model_call(net, task, batch)
    params: dict[int, str] = {}
    saved = set(net.state_dict(keep_vars=True))
    # a buffer left out of the state dict (rotary embeddings' inv_freq) is never permuted: a constant
    for name, t in list(net.named_parameters(remove_duplicate=False)) + list(net.named_buffers(remove_duplicate=False)):
        if name in saved:
            params.setdefault(id(t), name)
    rec = Recorder()
    out = run_call(net, args, kwargs, rec)
    flat_in, _ = tree_flatten((args, kwargs))
    return Trace(rec.events, params, [t for t in flat_in if isinstance(t, torch.Tensor)], output_tensors(out),
                 args, dict(kwargs))
