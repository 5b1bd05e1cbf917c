"""``fit_curve``: a curve of low loss between two models, for any ``nn.Module`` (private).

Garipov et al. (2018): ``phi(t) = sum_j c_j(t) w_j`` with ``w_0 = A`` and ``w_{n-1} = B`` fixed and
the bends ``w_1 .. w_{n-2}`` trained; a Bezier curve has ``c_j = C(n-1, j) t^j (1-t)^(n-1-j)``, a
polygonal chain ``c_j = max(0, 1 - |t (n-1) - j|)``. Each mini-batch draws one ``t ~ U(0, 1)``
and takes a step on the loss at ``phi(t)`` plus ``weight_decay / 2 * |phi(t)|^2`` (the L2
penalty on the point of the curve, not on the bends), with SGD (momentum 0.9) and Garipov et
al.'s learning-rate schedule (constant for half the epochs, then down to 1 % by nine tenths).
The network is called through ``torch.func.functional_call`` on the point's tensors: no layer
is rewritten. Batch norm runs on the batch's statistics while training; at every evaluated
``t`` its running statistics are estimated again from the training data
(:func:`landscape.engine.reestimate_bn_statistics`, the engine's).

The bends, the optimizer's momentum and the epochs done are saved to ``checkpoint`` after every
epoch; a call with the same settings resumes there and gives the same bits as an uninterrupted
run (each epoch's draws come from a generator seeded by ``seed`` and the epoch).
Memory: the two ends, the bends, their momentum and one point of the curve (``4 + 2 * bends``
model sizes of parameters), plus one forward and backward pass.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param, unwrap_module
from collector.train import Accuracy
from collector.trajectory import load_checkpoint, save_file
from landscape.connect._align import Alignment, check_pair, replayable, samples_of, task_of
from landscape.connect._barrier import Barrier, check_align, classifies, resolve_alignment
from landscape.engine import Samples, network_at, reestimate_bn_statistics
from landscape.generate import compute_landscape
from landscape.result import Landscape
from landscape.tasks import map_tensors, tensors_in

__all__ = ["Curve", "fit_curve", "KINDS"]

KINDS = ("bezier", "polychain")
#: Samples per batch when the curve is evaluated (loss, error, batch-norm statistics).
EVAL_BATCH = 256


def coefficients(kind: str, n: int, t: float) -> list[float]:
    """``c_j(t)`` of the ``n`` points of a curve (the module docstring)."""
    if kind == "bezier":
        return [math.comb(n - 1, j) * t ** j * (1.0 - t) ** (n - 1 - j) for j in range(n)]
    return [max(0.0, 1.0 - abs(t * (n - 1) - j)) for j in range(n)]


def _combine(points: Sequence[Mapping[str, torch.Tensor]], cs: Sequence[Any]) -> dict[str, torch.Tensor]:
    """``sum_j c_j w_j``, terms with ``c_j == 0`` left out (so the ends are their models bit for bit)."""
    out = {}
    for name in points[0]:
        total = None
        for w, c in zip(points, cs):
            if isinstance(c, float) and c == 0.0:
                continue
            term = w[name] * c
            total = term if total is None else total + term
        out[name] = total if total is not None else points[0][name] * 0.0
    return out


class _At(nn.Module):
    """``net`` called on the given parameters (``functional_call``): what a task is handed."""

    def __init__(self, net: nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        self.net = net
        self.tensors = dict(tensors)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self.net, self.tensors, args, kwargs)


def _params(model: nn.Module) -> list[str]:
    """The floating parameters that lie on the curve (each tied tensor once)."""
    seen: set[int] = set()
    out = []
    for name, p in model.named_parameters():
        if id(p) not in seen and p.is_floating_point():
            seen.add(id(p))
            out.append(name)
    return out


def _has_bn(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


def _schedule(lr: float, epoch: int, epochs: int) -> float:
    """Garipov et al.'s ``learning_rate_schedule``."""
    alpha = epoch / epochs
    if alpha <= 0.5:
        factor = 1.0
    elif alpha <= 0.9:
        factor = 1.0 - (alpha - 0.5) / 0.4 * 0.99
    else:
        factor = 0.01
    return lr * factor


def _whole(samples: Samples) -> tuple[Any, int]:
    """The samples as one batch (tensors with a sample axis concatenated) and their number."""
    first = samples.batches[0]
    if len(samples.batches) == 1:
        return first, samples.n
    leaves = [tensors_in(b) for b in samples.batches]
    n0 = samples.sizes[0]
    merged = []
    for j, t in enumerate(leaves[0]):
        if t.dim() > 0 and t.shape[0] == n0:
            merged.append(torch.cat([ls[j] for ls in leaves]))
        else:
            merged.append(t)
    it = iter(merged)
    return map_tensors(first, lambda _t: next(it)), samples.n


def _take(whole: Any, n: int, idx: torch.Tensor) -> Any:
    return map_tensors(whole, lambda t: t.index_select(0, idx) if t.dim() > 0 and t.shape[0] == n else t)


def _digest(state: Mapping[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


@dataclass
class Curve:
    """A trained curve between two models (Garipov et al.).

    Attributes
    ----------
    kind : {"bezier", "polychain"}
    bends : list of dict of str to Tensor
        The trained bends (parameters only), in order from A to B.
    ends : tuple of dict of str to Tensor
        A's and B's parameters (B aligned to A when ``align`` was given).
    epochs : int
        Epochs trained.
    history : list of float
        The mean training loss (at the drawn ``t``, without the penalty) of each epoch.
    alignment : Alignment or None
    """

    kind: str
    bends: list[dict[str, torch.Tensor]] = field(repr=False)
    ends: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]] = field(repr=False)
    epochs: int
    history: list[float]
    alignment: Alignment | None = None
    network: nn.Module | None = field(default=None, repr=False)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    task: Any = field(default=None, repr=False)
    samples: Samples | None = field(default=None, repr=False)

    @property
    def points(self) -> list[dict[str, torch.Tensor]]:
        return [self.ends[0], *self.bends, self.ends[1]]

    def state_at(self, t: float) -> dict[str, torch.Tensor]:
        """The parameters at ``t`` (exactly A's at 0 and B's at 1) with A's buffers."""
        check_param("t", t, [Interval(float, 0.0, 1.0)], caller="Curve.state_at")
        params = _combine(self.points, coefficients(self.kind, len(self.points), float(t)))
        return {**self.buffers, **{k: v.detach() for k, v in params.items()}}

    def model_at(self, t: float, data: Any = None) -> nn.Module:
        """A copy of the network at ``t``; batch-norm statistics estimated again on ``data`` (by default
        the training samples) when it has batch norm, else A's buffers."""
        assert self.network is not None
        net = network_at(self.network, self.state_at(float(t)), None)
        bns = _has_bn(net)
        if bns:
            samples = self.samples if data is None else samples_of(data, None, self.task, "Curve.model_at")
            assert samples is not None
            batches = samples.rebatch(EVAL_BATCH)
            net.eval()
            with torch.no_grad():
                reestimate_bn_statistics(net, bns, self.task, batches.batches.__getitem__, batches.sizes)
        return net.eval()

    def _evaluate(self, net: nn.Module, samples: Samples, classify: bool) -> tuple[float, float]:
        batches = samples.rebatch(EVAL_BATCH)
        total, n = 0.0, 0
        acc = Accuracy() if classify else None
        with torch.no_grad():
            for batch, k in zip(batches.batches, batches.sizes):
                if acc is not None:
                    task = self.task
                    inputs, targets = task.split(batch)
                    out = task.outputs(net, inputs)
                    total += float(task.loss(out, targets)) * k
                    acc.update(out, targets)
                else:
                    total += float(self.task(net, batch)) * k
                n += k
        return total / n, (1.0 - float(acc.eval())) if acc is not None else float("nan")

    def barrier(self, data: Any = None, *, points: int = 61, test_data: Any = None) -> Barrier:
        """The loss and error along the curve at ``linspace(0, 1, points)`` (batch-norm statistics
        estimated again at every ``t`` from the training samples), as a :class:`Barrier` whose
        ``alphas`` are the curve's ``t``.

        Parameters
        ----------
        data : optional
            The data the loss is taken on (default: the samples the curve was trained on).
        points : int, default=61
            Garipov et al.'s 61 (odd: the grid holds 0.5).
        test_data : optional
        """
        caller = "Curve.barrier"
        check_param("points", points, [Interval(int, 3, None)], caller=caller)
        if points % 2 == 0:
            raise InvalidParameterError(f"The 'points' parameter of {caller} must be odd (the grid holds 0.5); "
                                        f"got {points}.")
        train = self.samples if data is None else samples_of(data, None, self.task, caller)
        test = None if test_data is None else samples_of(test_data, None, self.task, caller)
        assert train is not None
        classify = classifies(self.task, train.batches[0])
        ts = np.linspace(0.0, 1.0, points)
        values: dict[str, list[float]] = {"loss": [], "error": [], "test_loss": [], "test_error": []}
        for t in ts:
            net = self.model_at(float(t))
            loss, err = self._evaluate(net, train, classify)
            values["loss"].append(loss)
            values["error"].append(err)
            if test is not None:
                loss, err = self._evaluate(net, test, classify)
                values["test_loss"].append(loss)
                values["test_error"].append(err)
            del net

        def line(split: str) -> Landscape:
            z = np.asarray(values["loss" if split == "train" else "test_loss"])
            err = np.asarray(values["error" if split == "train" else "test_error"])
            md: dict[str, Any] = {"decomposition": "Curve", "dims": 1, "curve": self.kind,
                                  "bends": len(self.bends), "epochs": self.epochs,
                                  "num_samples": (train if split == "train" else test).n}  # type: ignore[union-attr]
            return Landscape(x=ts.copy(), y=np.zeros(0), z=z, convergence_point=(0.0, 0.0, float(z[0])),
                             metadata=md, surfaces={"accuracy": 1.0 - err} if classify else {},
                             tag=f"curve_{self.kind}_{split}",
                             markers={"A": (0.0, 0.0, float(z[0])), "B": (1.0, 0.0, float(z[-1]))})

        train_ls = line("train")
        test_ls = line("test") if test is not None else None
        bn = "recompute" if _has_bn(self.network or nn.Module()) else "none"
        out = Barrier(ts, train_ls.z, np.asarray(values["error"]) if classify else None,
                      None if test_ls is None else test_ls.z,
                      np.asarray(values["test_error"]) if classify and test is not None else None,
                      train_ls, test_ls, self.alignment, bn, self.kind)
        for split, ls in (("train", train_ls), ("test", test_ls)):
            if ls is not None:
                heights = out.heights()
                mine = {k.replace(f"_{split}", ""): v for k, v in heights.items() if f"_{split}_" in k}
                ls.metadata["barrier"] = {"definitions": ["mean", "linear"], "points": int(points), "split": split,
                                          "bn_statistics": out.bn_statistics, "curve": self.kind, **mine,
                                          "alignment": "none" if self.alignment is None else self.alignment.method,
                                          "alignment_digest": None if self.alignment is None else
                                          self.alignment.digest}
        return out

    def plane(self, data: Any = None, *, size: int = 21, points: int = 61, **kwargs: Any) -> Landscape:
        """The plane through A, B and the bend with the curve drawn on it (Garipov et al.'s Figure 1):
        ``compute_landscape(between=(A, B, bend))`` (x along B - A, the bend the marker "C") with
        the curve's ``points`` as a path, the run "curve" (a curve of one bend).

        Other keyword arguments go to ``compute_landscape`` (``num_samples``, ``x``, ``y``, ...).
        """
        if len(self.bends) != 1:
            raise InvalidParameterError(f"Curve.plane: a plane holds a curve of one bend; this one has "
                                        f"{len(self.bends)}.")
        assert self.network is not None
        ts = np.linspace(0.0, 1.0, points)
        path = [self.state_at(float(t)) for t in ts]
        ends = [{**self.buffers, **p} for p in (self.ends[0], self.ends[1], self.bends[0])]
        if data is None:  # the training samples, as one batch
            assert self.samples is not None
            data = [_whole(self.samples)[0]]
        data = replayable(data, None, self.task, "Curve.plane")
        ls = compute_landscape(self.network, task=self.task, data=data, between=tuple(ends),
                               checkpoints={"curve": path}, size=size, **kwargs)
        ls.metadata["curve"] = self.kind
        return ls


def fit_curve(model_a: nn.Module, model_b: nn.Module, loss_fn: Any = None, data: Any = None, *, task: Any = None,
              kind: Literal["bezier", "polychain"] = "bezier", bends: int = 1, epochs: int = 10, lr: float = 0.05,
              weight_decay: float = 5e-4, batch_size: int = 64, seed: int = 0,
              align: str | Alignment | None = None, checkpoint: str | os.PathLike | None = None) -> Curve:
    """Train a curve of low loss between two models (Garipov et al.), any ``nn.Module``, no layer rewritten.

    Parameters
    ----------
    model_a, model_b : nn.Module
        The ends (one architecture, checked), fixed.
    loss_fn, task :
        ``loss_fn(outputs, labels)`` or ``task(model, batch) -> loss``.
    data : DataLoader, iterable of batches, Dataset or (inputs, labels) tensors
        The training data (all of it, held in memory; shuffled into ``batch_size`` batches
        each epoch).
    kind : {"bezier", "polychain"}, default="bezier"
    bends : int, default=1
        Trained points between the ends (1: a quadratic Bezier curve, a chain of two segments).
    epochs : int, default=10
    lr : float, default=0.05
        The initial learning rate (SGD, momentum 0.9, Garipov et al.'s schedule).
    weight_decay : float, default=5e-4
        The L2 penalty on the point of the curve.
    batch_size : int, default=64
    seed : int, default=0
        The draws of ``t`` and the batches' order.
    align : {"weights", "activations"}, Alignment or None
        Permute B into A's basis first (the curve then joins A and the aligned B).
    checkpoint : path, optional
        Where the bends are saved after every epoch; when it exists (same settings and models),
        training resumes there. Its settings (kind, bends, lr, weight_decay, batch_size, seed)
        and model A are compared first, before the data is read or B aligned; B, as aligned
        now, after the alignment. Any difference refuses it.

    Returns
    -------
    Curve
        ``Curve.model_at(t)``, ``Curve.barrier(...)``, ``Curve.plane(...)``.

    Examples
    --------
    >>> import torch
    >>> from landscape import fit_curve
    >>> from landscape.examples import MLP, digits_tensors
    >>> x, y = digits_tensors()
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> curve = fit_curve(MLP(8), MLP(8), torch.nn.CrossEntropyLoss(), (x[:64], y[:64]), epochs=1)
    >>> torch.equal(curve.model_at(0.0).fc1.weight, curve.ends[0]["fc1.weight"])
    True
    """
    caller = "fit_curve"
    check_pair(model_a, model_b, caller)
    check_param("kind", kind, [Options(KINDS)], caller=caller)
    check_param("bends", bends, [Interval(int, 1, None)], caller=caller)
    check_param("epochs", epochs, [Interval(int, 1, None)], caller=caller)
    check_param("lr", lr, [Interval(float, 0.0, None, closed="right")], caller=caller)
    check_param("weight_decay", weight_decay, [Interval(float, 0.0, None)], caller=caller)
    check_param("batch_size", batch_size, [Interval(int, 1, None)], caller=caller)
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("checkpoint", checkpoint, [None, InstanceOf(str, os.PathLike)], caller=caller)
    for name, value in (("lr", lr), ("weight_decay", weight_decay)):
        if not math.isfinite(value):
            raise InvalidParameterError(f"The '{name}' parameter of {caller} must be finite. Got {value!r} instead. "
                                        "HINT: an infinite step or penalty makes every bend NaN.")
    folder = os.path.dirname(os.fspath(checkpoint)) if checkpoint is not None else ""
    if folder and not os.path.isdir(folder):
        raise InvalidParameterError(f"The 'checkpoint' parameter of {caller} must be a file in a folder that exists. "
                                    f"Got {checkpoint!r} (no folder {folder!r}) instead. HINT: create the folder "
                                    "first.")
    a, b = unwrap_module(model_a), unwrap_module(model_b)
    check_align(align, a, caller)
    if data is None:
        raise InvalidParameterError(f"The 'data' parameter of {caller} is required: the data the curve is "
                                    "trained on.")
    t_ = task_of(loss_fn, task, caller)
    if t_ is None:
        raise InvalidParameterError(f"{caller}: give a loss_fn(outputs, labels) or a task(model, batch) -> loss.")
    names = _params(a)
    sa = {k: t.detach() for k, t in a.state_dict().items()}
    start = {k: sa[k] for k in names}
    settings = {"kind": kind, "bends": bends, "lr": lr, "weight_decay": weight_decay, "batch_size": batch_size,
                "seed": seed, "epochs_planned": epochs, "a": _digest(start)}
    # a checkpoint of other settings or another A is refused before the data is read or B aligned
    saved = _saved(checkpoint, settings, caller) if checkpoint is not None and os.path.exists(checkpoint) else None
    data = replayable(data, None, t_, caller)
    samples = samples_of(data, None, t_, caller)
    alignment = resolve_alignment(align, a, b, data, t_, seed, None, caller)
    sb = {k: t.detach() for k, t in b.state_dict().items()}
    if alignment is not None:
        sb = alignment.apply_state(sb)
    end = {k: sb[k] for k in names}
    buffers = {k: v for k, v in sa.items() if k not in set(names) and k in dict(a.named_buffers())}
    settings["b"] = _digest(end)
    points = [{k: (start[k] * (1.0 - (j + 1) / (bends + 1)) + end[k] * ((j + 1) / (bends + 1))).clone()
               .requires_grad_(True) for k in names} for j in range(bends)]
    done, history = 0, list[float]()
    momentum: list[dict[str, torch.Tensor]] | None = None
    if saved is not None:
        assert checkpoint is not None
        _compare(saved, settings, ("b",), checkpoint, caller)  # B as aligned now
        done, history, momentum = _resume(saved, points, names)
    net = network_at(a, sa, None).train()
    params = [p for w in points for p in w.values()]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
    if momentum is not None:
        for w, m in zip(points, momentum):
            for k, p in w.items():
                opt.state[p]["momentum_buffer"] = m[k].clone()
    whole, n = _whole(samples)
    curve = Curve(kind, points, (start, end), done, history, alignment, a, buffers, t_, samples)
    for epoch in range(done, epochs):
        for group in opt.param_groups:
            group["lr"] = _schedule(lr, epoch, epochs)
        gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        order = torch.randperm(n, generator=gen)
        total, count = 0.0, 0
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed * 1_000_003 + epoch)
            for i in range(0, n, batch_size):
                idx = order[i:i + batch_size]
                batch = _take(whole, n, idx)
                t = float(torch.rand((), generator=gen))
                cs = coefficients(kind, bends + 2, t)
                tensors = _combine([start, *points, end], cs)
                loss = t_(_At(net, tensors), batch)
                penalty = sum((v * v).sum() for v in tensors.values())
                opt.zero_grad()
                (loss + 0.5 * weight_decay * penalty).backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                count += len(idx)
        history.append(total / count)
        curve.epochs = epoch + 1
        if checkpoint is not None:
            _save(checkpoint, settings, points, opt, epoch + 1, history)
    curve.bends = [{k: v.detach() for k, v in w.items()} for w in points]
    return curve


def _save(path: str | os.PathLike, settings: Mapping[str, Any], points: Sequence[Mapping[str, torch.Tensor]],
          opt: torch.optim.Optimizer, epoch: int, history: Sequence[float]) -> None:
    state: dict[str, torch.Tensor] = {}
    for j, w in enumerate(points):
        for k, p in w.items():
            state[f"bend{j}.{k}"] = p.detach().clone()
            buf = opt.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                state[f"momentum{j}.{k}"] = buf.detach().clone()
    state["meta.epoch"] = torch.tensor(epoch, dtype=torch.int64)
    state["meta.history"] = torch.tensor(list(history), dtype=torch.float64)
    state["meta.settings"] = torch.tensor(list(json.dumps(dict(settings), sort_keys=True).encode()),
                                          dtype=torch.uint8)
    save_file(state, os.fspath(path))


def _compare(state: Mapping[str, Any], settings: Mapping[str, Any], keys: Sequence[str],
             path: str | os.PathLike, caller: str) -> None:
    """Refuse a checkpoint whose recorded settings differ from ``settings`` at ``keys``."""
    got = json.loads(bytes(state["meta.settings"].tolist()).decode())
    want = json.loads(json.dumps(dict(settings), sort_keys=True))
    diff = sorted(k for k in keys if got.get(k) != want.get(k))
    if diff:
        raise InvalidParameterError(
            f"The 'checkpoint' parameter of {caller} ({os.fspath(path)!r}) holds a curve trained with other "
            f"settings or models ({', '.join(diff)} differ). HINT: remove it to start over, or pass another path.")


def _saved(path: str | os.PathLike, settings: Mapping[str, Any], caller: str) -> dict[str, torch.Tensor]:
    """A curve checkpoint, refused unless its settings and A are ``settings``' (B is compared once aligned)."""
    state = load_checkpoint(os.fspath(path), what=f"the curve checkpoint of {caller}")
    got = json.loads(bytes(state["meta.settings"].tolist()).decode())
    _compare(state, settings, sorted(k for k in set(got) | set(settings) if k not in ("epochs_planned", "b")), path,
             caller)
    return state


def _resume(state: Mapping[str, torch.Tensor], points: list[dict[str, torch.Tensor]],
            names: Sequence[str]) -> tuple[int, list[float], list[dict[str, torch.Tensor]] | None]:
    with torch.no_grad():
        for j, w in enumerate(points):
            for k in names:
                w[k].copy_(state[f"bend{j}.{k}"])
    momentum = None
    if all(f"momentum{j}.{k}" in state for j in range(len(points)) for k in names):
        momentum = [{k: state[f"momentum{j}.{k}"] for k in names} for j in range(len(points))]
    return int(state["meta.epoch"]), [float(v) for v in state["meta.history"].tolist()], momentum
