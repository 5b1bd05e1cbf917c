"""Fingerprints: everything that defines a landscape, as the store records and compares it (private).

A rerun resumes a landscape of ``landscapes.h5`` only when its fingerprint is the one the
store holds; a difference is refused, naming it (:func:`landscape.io._store.differences`). Files are named by
their SHA-256, the network by its architecture (class, module tree, every state entry's
name, shape and dtype), the data by the SHA-256 of the samples (``Samples.digest()``, the layout
of landscape/engine/_digest.py).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collector.trajectory import file_digest as trajectory_file_digest
from landscape.engine import hash_tensor, tensor_digest
from landscape.geometry import Geometry
from landscape.tasks import Supervised

__all__ = ["file_digest", "tensor_digest", "hash_tensor", "model_digest", "task_name", "run_identity", "Fingerprints"]


def file_digest(path: str) -> str:
    return trajectory_file_digest(path).sha256


def model_digest(network: nn.Module) -> str:
    """The architecture: class, module tree and every state entry's name, shape and dtype."""
    cls = type(network)
    items = [f"{cls.__module__}.{cls.__qualname__}", repr(network)]
    items += [f"{k}:{tuple(v.shape)}:{v.dtype}" for k, v in network.state_dict().items()]
    return hashlib.sha256("\n".join(items).encode()).hexdigest()


def task_name(task: Any) -> str:
    """How the fingerprint names the loss: the loss_fn's repr for ``Supervised(loss_fn)`` with the
    default layout (as before tasks existed, so older landscapes.h5 files still resume), else the
    task's repr."""
    if isinstance(task, Supervised) and task.plain:
        return repr(task.loss_fn)
    return repr(task)


def run_identity(network: nn.Module, task: Any) -> dict[str, str]:
    """What a run's record in ``landscapes.h5`` says of its network and task (see
    ``landscape/io/_run.py``): the architecture's digest (:func:`model_digest`), its class for
    messages, and the task's name without memory addresses (a plain function's repr holds one,
    which differs in every process)."""
    cls = type(network)
    return {"network": model_digest(network), "network_class": f"{cls.__module__}.{cls.__qualname__}",
            "task": re.sub(r" at 0x[0-9a-fA-F]+", "", task_name(task))}


class Fingerprints:
    """The fingerprints of a generation's landscapes: what they share computed once.

    Parameters
    ----------
    network, task, samples, metrics, eval_mode
        The problem every landscape evaluates (``samples`` has ``n`` and ``tensors()``).
    known : dict of str to str, optional
        SHA-256 of files verified already (path -> digest), not read again.
    bn_samples : optional
        The samples batch-norm statistics are estimated again on, when not ``samples``
        (``compute_landscape``'s ``bn_data``): their digest is part of every fingerprint.
    """

    def __init__(self, network: nn.Module, task: Any, samples: Any, metrics: Mapping[str, Any], eval_mode: bool,
                 known: Mapping[str, str] | None = None, bn_samples: Any = None) -> None:
        self._digests: dict[Any, str] = dict(known or {})
        self.common: dict[str, Any] = {
            "num_samples": samples.n, "eval_mode": eval_mode, "model": model_digest(network),
            "loss_fn": task_name(task), "metrics": sorted(str(k) for k in metrics),
            "data": samples.digest()}
        points = {str(k): repr(m) for k, m in metrics.items() if getattr(m, "metric_inputs", None) == "point"}
        if points:  # their settings (an EigenRatio's tolerance) define the surface; absent otherwise, as before
            self.common["point_metrics"] = points
        if bn_samples is not None:  # the statistics' own samples define the values; absent otherwise, as before
            self.common["bn_data"] = {"num_samples": bn_samples.n, "digest": bn_samples.digest()}

    def digest(self, path: Any) -> str:
        if path not in self._digests:
            self._digests[path] = file_digest(path)
        return self._digests[path]

    def _item_digest(self, item: Any) -> str:
        """A checkpoint file by its SHA-256; a state dict by its tensors' bytes."""
        if isinstance(item, (str, os.PathLike)):
            return self.digest(os.fspath(item))
        return tensor_digest(*[t for t in dict(item).values() if isinstance(t, torch.Tensor)])

    def of(self, geo: Geometry, *, intervals: Sequence[Any] | None, unit: str | None, step_per_epoch: int | None,
           checkpoint: Callable[[Any], str] | None = None) -> dict[str, Any]:
        """The fingerprint of one landscape; ``checkpoint(n)`` is the path of checkpoint number ``n``
        of ``intervals`` (PCA and random landscapes of a run name their checkpoints by digest)."""
        ignore = geo.ignore if geo.ignore is None or isinstance(geo.ignore, str) else list(geo.ignore)
        fp = dict(self.common, landscape_size=geo.size, unit=unit, step_per_epoch=step_per_epoch,
                  normalization=geo.normalization, ignore=ignore or "none", kind=geo.kind,
                  intervals=list(intervals or []))
        # options added with the views are recorded only when set, so that a landscapes.h5
        # written before them still resumes
        for key, value, default in (("dims", geo.dims, 2), ("x", geo.x, None), ("y", geo.y, None),
                                    ("biasbn", geo.biasbn, "normalize"), ("second", geo.second, "random"),
                                    ("include", None if geo.include is None else list(geo.include), None)):
            if value != default:
                fp[key] = list(value) if isinstance(value, tuple) else value
        if geo.through_models:  # how batch-norm statistics follow the point defines the values
            fp["bn_statistics"] = geo.bn_statistics
        if geo.kind in ("random", "hessian") or (geo.kind == "target" and geo.second == "random"):
            fp["seed"] = int(geo.seed)  # the draw, or the Lanczos start
        elif geo.kind == "pca":
            fp["pca_method"] = geo.pca_method
        if checkpoint is not None and (geo.kind in ("pca", "random", "hessian") or geo.second == "pca"):
            for n in intervals or []:
                fp[f"checkpoint {unit} {n}"] = self.digest(checkpoint(n))
        for k, path in enumerate(geo.models or []):
            fp[f"model {'ABC'[k]}"] = self.digest(path)
        if geo.runs is not None:  # several runs on one plane: every checkpoint of each, and the centre's rule
            fp["runs"] = {str(name): [self._item_digest(c) for c in ckpts] for name, ckpts in geo.runs.items()}
            fp["centre_on"] = geo.centre_on
            if geo.run_start is not None:  # the start the runs' saved initial weights give (absent before them)
                fp["run_start"] = self._item_digest(geo.run_start.checkpoint)
        return fp
