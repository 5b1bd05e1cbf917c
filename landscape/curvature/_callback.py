"""``SharpnessCallback``: the top Hessian eigenvalue during training, as summary scalars (private).

Why here and not in ``collector``: measuring needs the Hessian-vector products of
``landscape.curvature``, and the collector is the lower layer (it never imports
``landscape``; ``tests/test_architecture.py``). The callback is a
:class:`collector.Callback` all the same, and it writes into the :class:`SummaryRecord`
that is open in the process (a :class:`SummaryCollector`'s, or one of its framework
adapters'), so the scalars sit in the run's summary file beside ``loss/auto`` and, with
``tensorboard_dir``, in its TensorBoard events.

Writing: the values of step ``s`` go out as their own record at step ``s``. A record also
takes the summary operators' values buffered for the step (``collector.summary.scalar``
in a ``forward``); while such values wait (the collector has not handled the step yet: it
comes after this callback in the list), the values are kept and written at the next hook
instead, after the collector has recorded or dropped the step's, so nothing of the
collector's is written at a step it would not collect or lost.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator
from typing import Any, Literal, cast

import torch
from torch import nn

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param, unwrap_module
from collector.summary import open_record
from collector.train import Callback, RunContext, run_network
from landscape.curvature._api import top_eigenpairs
from landscape.curvature._hvp import PointOperator
from landscape.curvature._operators import make_operator
from landscape.engine import Samples, collect
from landscape.geometry import moved_names
from landscape.tasks import as_task

__all__ = ["SharpnessCallback", "adam_preconditioner"]

logger = logging.getLogger("landscape")


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a wrapper (accelerate's AcceleratedOptimizer, itself an Optimizer
    subclass holding the trainer's as ``.optimizer``; Lightning's as ``._optimizer``)."""
    for _ in range(4):
        inner = getattr(optimizer, "optimizer", None)
        inner = inner if inner is not None else getattr(optimizer, "_optimizer", None)
        if not isinstance(inner, torch.optim.Optimizer):
            break
        optimizer = inner
    return optimizer


def adam_preconditioner(optimizer: Any, params: list[nn.Parameter]) -> torch.Tensor | None:
    """``P^-1/2`` of Adam's preconditioner, flat over ``params``, or None.

    ``P_t = (1 - beta1^t) diag(sqrt(v_hat_t) + eps)``, ``v_hat_t = v_t / (1 - beta2^t)``
    (Cohen et al. 2022, section 2: Adam as preconditioned momentum ``w -= lr P^-1 m``, ``m`` the
    first moment without bias correction), each parameter with its group's ``betas`` and
    ``eps`` and its own step count ``t``; ``v_t`` is ``max_exp_avg_sq`` with ``amsgrad``.
    None for an optimizer other than ``torch.optim.Adam`` / ``AdamW``, or when a parameter has
    no state yet (no step taken, or not in the optimizer).
    """
    opt = _torch_optimizer(optimizer)
    if not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
        return None
    group_of = {id(p): g for g in opt.param_groups for p in g["params"]}
    parts = []
    for p in params:
        state, group = opt.state.get(p), group_of.get(id(p))
        if not state or group is None or "exp_avg_sq" not in state:
            return None
        beta1, beta2 = group["betas"]
        t = float(state["step"])
        v = state["max_exp_avg_sq"] if group.get("amsgrad") else state["exp_avg_sq"]
        v_hat = v.detach().double() / (1 - beta2 ** t)
        precond = (1 - beta1 ** t) * (v_hat.sqrt() + group["eps"])
        parts.append(precond.rsqrt().reshape(-1))
    return torch.cat(parts) if parts else None


class _Preconditioned:
    """``P^-1/2 H P^-1/2`` from a Hessian operator and the flat ``P^-1/2``: the same eigenvalues as
    ``P^-1 H`` (a similar matrix), symmetric, so Lanczos applies. It has what ``top_eigenpairs``
    reads of an operator."""

    curvature = "hessian"

    def __init__(self, op: PointOperator, scale: torch.Tensor) -> None:
        self.op, self.scale = op, scale.to(op.device, op.dtype)
        self.dim, self.dtype, self.device, self.names = op.dim, op.dtype, op.device, op.names
        self.product = op.product

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        v = v.to(self.device, self.dtype)
        return self.scale * self.op.matvec(self.scale * v)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.op.unflatten(flat)


@contextlib.contextmanager
def _measuring(net: nn.Module, eval_mode: bool) -> Iterator[None]:
    """The network in the mode of the measurement, and as it was afterwards: its mode, its buffers
    (a train-mode forward updates batch-norm statistics) and the random state training draws from
    (train-mode products seed dropout)."""
    was = net.training
    buffers = {} if eval_mode else {k: b.detach().clone() for k, b in net.named_buffers()}
    devices = sorted({p.device.index for p in net.parameters() if p.device.type == "cuda" and p.device.index
                      is not None})
    with torch.random.fork_rng(devices=devices):
        try:
            net.train(not eval_mode)
            yield
        finally:
            net.train(was)
            with torch.no_grad():
                for k, b in net.named_buffers():
                    if k in buffers:
                        b.copy_(buffers[k])


class SharpnessCallback(Callback):
    """Record the top Hessian eigenvalue every ``every`` steps as a summary scalar.

    ``lambda_max`` is the largest eigenvalue of the Hessian of the mean loss over the
    first ``num_samples`` samples of ``data`` (collected once, when the callback is made:
    every measurement sees the same samples) at the weights after the step, by Lanczos
    (:func:`landscape.curvature.hessian_eigs`'s, with this callback's ``tol``,
    ``max_iter``, ``dtype`` and ``seed``: the same value ``hessian_eigs`` gives at those
    weights). With ``torch.optim.Adam`` or ``AdamW`` (and ``preconditioned``) also the
    preconditioned sharpness of Cohen et al. 2022, the top eigenvalue of
    ``P^-1 H`` (computed as the symmetric ``P^-1/2 H P^-1/2``, the same eigenvalues), with
    Adam's preconditioner ``P_t = (1 - beta1^t) diag(sqrt(v_hat_t) + eps)``,
    ``v_hat_t = v_t / (1 - beta2^t)`` the bias-corrected second moment: Adam's step is
    ``w -= lr P_t^-1 m_t``, and it is stable on a quadratic while the preconditioned
    sharpness is below ``(2 + 2 beta1) / ((1 - beta1) lr)``, 38 / lr for beta1 = 0.9, where
    Cohen et al. find it equilibrates (the adaptive edge of stability). The learning rate
    is not in ``P``; the Hessian is the loss's (no weight-decay term).

    Values go to the :class:`~collector.SummaryRecord` open in the process (the
    :class:`~collector.SummaryCollector`'s, a ``LightningCollector``'s or ``HFCollector``'s)
    as scalars at the step: ``tag`` and ``tag + "_preconditioned"``; MindInsight and
    TensorBoard draw them beside ``loss/auto``. Every measurement is also kept in
    :attr:`history`.

    Use it as a callback of :class:`collector.Model` beside a SummaryCollector, call
    :meth:`step` in a plain loop (after the SummaryCollector's ``step``), or wrap it for
    Lightning (:class:`LightningSharpness`) or the Hugging Face Trainer
    (:class:`HFSharpness`) beside their collectors.

    Parameters
    ----------
    every : int, default=50
        Measure at every step whose number is a multiple of this.
    data : DataLoader, iterable of batches, map-style Dataset or (inputs, labels) tensors
        The samples the loss is averaged over (the first ``num_samples``); a DataLoader whose
        order changes from pass to pass (a shuffling training loader) is refused, as everywhere.
    loss_fn : callable, optional
        ``loss_fn(outputs, labels)``; give this or ``task``.
    task : callable, optional
        ``task(model, batch) -> loss`` (:mod:`landscape.tasks`; ``HuggingFace()`` for dict batches).
    num_samples : int or None, default=512
    tag : str, default="sharpness/lambda_max"
    preconditioned : bool, default=True
        Also the preconditioned sharpness when the optimizer is Adam or AdamW.
    tol : float, default=1e-4
        Lanczos' residual tolerance relative to ``|lambda_max|``: about four digits, plenty
        for a curve along training.
    max_iter : int, default=100
        At most this many Hessian-vector products per eigenvalue; a measurement that did not
        converge is still recorded, logged as a warning and marked in :attr:`history`.
    dtype : {"float32", "float64"} or torch.dtype, default="float32"
    seed : int, default=0
    ignore : {"biasbn"} or None, default=None
    eval_mode : bool, default=True
        Measure with batch-norm running statistics and no dropout; the network's mode, its
        buffers and the random state are restored after each measurement either way.
    device : str or torch.device, optional
        Default: where the network is.

    Attributes
    ----------
    history : list of dict
        One per measurement: ``step``, ``lambda_max``, ``converged``, ``iterations``,
        ``preconditioned`` (None without Adam), ``seconds``.

    Notes
    -----
    A measurement runs on the training network itself (no copy; its parameters are read,
    never written) between two steps: its cost is a Lanczos run, about ``2 x iterations``
    forward-backward passes over ``num_samples`` samples (twice with the preconditioned
    one). Measured on the digits MLP, ``benchmarks/bench_sharpness_callback.py``.

    Examples
    --------
    >>> model.train(5, loader, callbacks=[SummaryCollector("runs/a"),              # doctest: +SKIP
    ...     SharpnessCallback(every=50, data=(x[:512], y[:512]), loss_fn=torch.nn.CrossEntropyLoss())])
    """

    def __init__(
        self,
        every: int = 50,
        data: Any = None,
        loss_fn: Any = None,
        *,
        task: Any = None,
        num_samples: int | None = 512,
        tag: str = "sharpness/lambda_max",
        preconditioned: bool = True,
        tol: float = 1e-4,
        max_iter: int = 100,
        dtype: torch.dtype | str = "float32",
        seed: int = 0,
        ignore: Literal["biasbn"] | None = None,
        eval_mode: bool = True,
        device: str | torch.device | None = None,
    ) -> None:
        c = "SharpnessCallback"
        check_param("every", every, [Interval(int, 1, None)], caller=c)
        check_param("num_samples", num_samples, [Interval(int, 1, None), None], caller=c,
                    hint="None uses the whole dataset.")
        check_param("tag", tag, ["nonempty_str"], caller=c)
        check_param("preconditioned", preconditioned, ["boolean"], caller=c)
        check_param("tol", tol, [Interval(float, 0, 1, closed="neither")], caller=c)
        check_param("max_iter", max_iter, [Interval(int, 2, None)], caller=c)
        check_param("seed", seed, [Interval(int, 0, None)], caller=c)
        check_param("ignore", ignore, [None, Options(("biasbn",))], caller=c)
        check_param("eval_mode", eval_mode, ["boolean"], caller=c)
        check_param("device", device, [None, str, InstanceOf(torch.device)], caller=c)
        if dtype in ("float32", "float64"):
            dtype = getattr(torch, dtype)
        if dtype not in (torch.float32, torch.float64):
            raise InvalidParameterError(f"The 'dtype' parameter of {c} must be 'float32', 'float64', torch.float32 or "
                                        f"torch.float64. Got {dtype!r} instead.")
        self._task = as_task(loss_fn, task, caller=c)
        if data is None:
            raise InvalidParameterError(f"The 'data' parameter of {c} is required: a DataLoader, an iterable of "
                                        "batches, a Dataset or an (inputs, labels) pair of tensors.")
        # once: every measurement averages over the same samples (a shuffling loader would not)
        self._samples: Samples = collect(data, num_samples, self._task, caller=c)
        self.every, self.tag, self.preconditioned = every, tag, preconditioned
        self.tol, self.max_iter, self.dtype, self.seed = tol, max_iter, dtype, seed
        self.ignore, self.eval_mode, self.device = ignore, eval_mode, device
        self.history: list[dict[str, Any]] = []
        self._pending: list[tuple[int, dict[str, float]]] = []
        self._steps = 0
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ measuring
    def measure(self, network: nn.Module, optimizer: Any = None) -> dict[str, Any]:
        """``lambda_max`` (and the preconditioned one) at the network's current weights, not recorded."""
        net = unwrap_module(network)
        started = time.perf_counter()
        names, _ = moved_names(net, self.ignore)
        with _measuring(net, self.eval_mode):
            op = make_operator(net, self._task, self._samples, names, curvature="hessian", dtype=self.dtype,
                               device=self.device, seed=self.seed, caller="SharpnessCallback")
            eig = top_eigenpairs(op, k=1, which="largest", tol=self.tol, max_iter=min(self.max_iter, op.dim),
                                 seed=self.seed, progress=False)
            out: dict[str, Any] = {"lambda_max": float(eig.eigenvalues[0]), "converged": eig.converged,
                                   "iterations": eig.iterations, "preconditioned": None}
            scale = None
            if self.preconditioned and optimizer is not None:
                params = dict(net.named_parameters())
                scale = adam_preconditioner(optimizer, [params[k] for k in names])
                if scale is None:
                    self._warn_once("precond", "SharpnessCallback: no preconditioned sharpness: it is defined for "
                                    f"torch.optim.Adam and AdamW with a state for every moved parameter; got "
                                    f"{type(_torch_optimizer(optimizer)).__name__}.")
            if scale is not None:
                wrapped = cast(PointOperator, _Preconditioned(op, scale))  # duck-typed: what Lanczos reads
                pre = top_eigenpairs(wrapped, k=1, which="largest", tol=self.tol, max_iter=min(self.max_iter, op.dim),
                                     seed=self.seed, progress=False)
                out["preconditioned"] = float(pre.eigenvalues[0])
                out["converged"] = out["converged"] and pre.converged
                out["iterations"] += pre.iterations
        out["seconds"] = time.perf_counter() - started
        return out

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    def _at(self, step: int, network: Any, optimizer: Any) -> None:
        """Measure and record at ``step`` if it is due."""
        self.flush()
        if step <= 0 or step % self.every or network is None:
            return
        got = self.measure(network, optimizer)
        got["step"] = step
        self.history.append(got)
        if not got["converged"]:
            logger.warning("SharpnessCallback: Lanczos did not converge at step %d in %d iterations (tol=%g); "
                           "lambda_max=%.6g recorded all the same.", step, self.max_iter, self.tol,
                           got["lambda_max"])
        values = {self.tag: got["lambda_max"]}
        if got["preconditioned"] is not None:
            values[f"{self.tag}_preconditioned"] = got["preconditioned"]
        self._pending.append((step, values))
        self.flush()

    def flush(self) -> None:
        """Write the measured values that wait for the open record (see the module's notes)."""
        if not self._pending:
            return
        record = open_record()
        if record is None:
            self._warn_once("record", "SharpnessCallback: no SummaryRecord is open (no SummaryCollector?): the "
                            "values are kept in .history only.")
            self._pending.clear()
            return
        if record.has_operator_values:
            return  # the collector has not handled this step's summary-operator values yet
        for step, values in self._pending:
            for tag, value in values.items():
                if not math.isfinite(value):
                    self._warn_once(f"nonfinite {tag}", f"SharpnessCallback: {tag} is {value} at step {step}.")
                record.add_value("scalar", tag, value)
            record.record(step)
        self._pending.clear()

    # ------------------------------------------------------------------ Model's hooks
    def step_begin(self, run_context: RunContext) -> None:
        """Write what waited from the step before."""
        self.flush()

    def step_end(self, run_context: RunContext) -> None:
        """Measure at the steps ``every`` selects (training only)."""
        params = run_context.original_args()
        if params.get("mode", "train") != "train":
            return
        self._at(int(params.get("cur_step_num") or 0), run_network(params), params.get("optimizer"))

    def epoch_end(self, run_context: RunContext) -> None:
        """Write what waited."""
        self.flush()

    def end(self, run_context: RunContext) -> None:
        """Write what waited."""
        self.flush()

    # ------------------------------------------------------------------ plain loop
    def step(self, network: nn.Module, optimizer: Any = None, *, step: int | None = None) -> None:
        """One training step done (call after ``optimizer.step()``, and after the SummaryCollector's
        ``step``): measure and record if the step is due.

        Parameters
        ----------
        network : nn.Module
        optimizer : torch.optim.Optimizer, optional
            For the preconditioned sharpness (Adam, AdamW).
        step : int, optional
            The global step number; None counts the calls (1, 2, ...).
        """
        check_param("network", network, [InstanceOf(nn.Module)], caller="SharpnessCallback.step")
        check_param("step", step, [None, Interval(int, 0, None)], caller="SharpnessCallback.step")
        self._steps = self._steps + 1 if step is None else step
        self._at(self._steps, network, optimizer)
