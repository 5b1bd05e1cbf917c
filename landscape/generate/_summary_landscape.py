"""``SummaryLandscape``: landscapes from the checkpoints SummaryCollector collected."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import stat
from collections.abc import Callable
from typing import Any

from torch import nn

from collector.common import check_param, unwrap_module
from collector.summary import SummaryRecord
from collector.trajectory import (
    CKPT_DIR,
    METADATA_FILE,
    TrainMetadata,
    load_checkpoint,
    read_train_metadata,
    validate_collect_landscape,
)
from landscape.engine import Supervised, as_task, collect
from landscape.execution._devices import resolve_devices
from landscape.execution._distributed import check_devices_for_dist, detect, on_root
from landscape.execution._run import start_pool, stop_pool
from landscape.generate._build import build_landscape, metric_dict
from landscape.generate._compute import check_common, check_metrics
from landscape.generate._plan import Execution, Geometry, LandscapePlan, Problem
from landscape.geometry._state import check_keys, fit_state
from landscape.io._store import Store, file_digest, model_digest, tensor_digest
from landscape.result._landscape import Landscape

__all__ = ["SummaryLandscape"]
_log = logging.getLogger("landscape")
_GEN = "SummaryLandscape.gen_landscapes_with_multi_process"


def _validate_override(value: Any) -> dict[str, Any]:
    return validate_collect_landscape(value, _GEN, name="collect_landscape", require_intervals=False,
                                      fill_defaults=False)


class SummaryLandscape:
    """Turn the checkpoints collected during training into loss landscapes.

    Parameters
    ----------
    summary_dir : str or os.PathLike
        The SummaryCollector's directory; checkpoints and ``train_metadata.json`` are read
        from ``{summary_dir}/ckpt_dir`` (never rewritten).

    Attributes
    ----------
    last_stats : dict
        After a generation, each landscape's tag mapped to ``{"evaluated": points
        evaluated by that call, "points": points of the landscape}`` (fewer evaluated
        than points when it resumed).
    """

    def __init__(self, summary_dir: str | os.PathLike) -> None:
        check_param("summary_dir", summary_dir, ["path"], caller="SummaryLandscape")
        self.summary_dir = os.fspath(summary_dir)
        self.ckpt_dir = os.path.join(self.summary_dir, CKPT_DIR)
        self.metadata_path = os.path.join(self.ckpt_dir, METADATA_FILE)
        self.last_stats: dict[str, dict[str, int]] = {}

    # -- metadata -----------------------------------------------------------------
    def _read_metadata(self) -> TrainMetadata:
        return read_train_metadata(self.metadata_path)

    # -- public -------------------------------------------------------------------
    def gen_landscapes_with_multi_process(
        self, callback_fn: Callable[[], tuple], collect_landscape: dict | None = None,
        device_ids: list[int] | None = None, output: str | os.PathLike | None = None, *,
        normalization: str = "layer", ignore: str | None = None, seed: int = 0, eval_mode: bool = True,
        restart: bool = False, distributed: bool | None = None,
    ) -> list[Landscape]:
        """Compute every landscape the metadata asks for and write them to ``output``.

        One PCA landscape per interval (``create_landscape['train']``), then one Random
        landscape around the last checkpoint of the last interval
        (``create_landscape['result']``), each written as its own Event at step 0 of a
        summary file in ``output`` (default ``summary_dir``) and to ``{output}/landscapes.h5``.
        ``collect_landscape`` overrides the metadata for this call only.

        Finished chunks of points are flushed to ``landscapes.h5`` as they come, with the
        directions and a fingerprint of every input: rerunning the same call after a crash
        or Ctrl-C evaluates only the missing points (and a finished landscape not at all)
        and gives the same result as an uninterrupted run. A landscape of the file made from
        other inputs (size, seed, num_samples, normalization, checkpoints, model, data, ...)
        is refused, naming what differs, unless ``restart=True``.

        Parameters
        ----------
        callback_fn : callable
            Returns ``(model, network, dataset, metrics)`` or ``(model, network, dataset,
            metrics, task)``: ``model.loss_fn`` is the loss (``loss_fn(outputs, labels)``),
            unless a fifth item, a ``task(model, batch) -> loss``, is given (then ``model``
            may be None); ``network`` the architecture the checkpoints load into;
            ``dataset`` the data (its first ``num_samples`` samples are used; batches of
            any structure the task understands); ``metrics`` None or extra surfaces by
            name.
        collect_landscape : dict, default=None
            Overrides of ``train_metadata.json`` (landscape_size, unit, create_landscape,
            num_samples, intervals) for this call.
        device_ids : list of int, default=None
            CUDA devices to use, or that many CPU worker processes without CUDA.
        output : str or os.PathLike, default=None
            Where the summary file and ``landscapes.h5`` go (default ``summary_dir``).
        normalization : {"layer", "filter", "none"}, default="layer"
        ignore : {"biasbn"} or None, default=None
        seed : int, default=0
            Seed of the random directions of the result landscape.
        eval_mode : bool, default=True
        restart : bool, default=False
            Start this call's landscapes over, discarding what ``landscapes.h5`` holds of
            them.
        distributed : bool or None, default=None
            Share the work between the processes of a ``torch.distributed`` group (gloo on
            CPU, nccl on CUDA, one device per process): None uses an initialised group or
            torchrun's environment when there is one, True requires one, False computes
            everything in this process. Rank 0 writes the files; every rank returns the
            landscapes.

        Returns
        -------
        list of Landscape
        """
        check_param("callback_fn", callback_fn, ["callable"], caller=_GEN)
        check_param("output", output, [None, "path"], caller=_GEN)
        check_common(normalization=normalization, ignore=ignore, seed=seed, eval_mode=eval_mode,
                     device_ids=device_ids, caller=_GEN)
        check_param("restart", restart, ["boolean"], caller=_GEN)
        check_param("distributed", distributed, [None, "boolean"], caller=_GEN)
        override = {} if collect_landscape is None else _validate_override(collect_landscape)
        metadata = self._read_metadata()
        cfg: dict[str, Any] = dict(vars(metadata))
        cfg.update(override)
        unit = cfg["unit"]
        create = cfg["create_landscape"]
        intervals = cfg["intervals"]
        if (create["train"] or create["result"]) and not intervals:
            raise ValueError(f"No interval to make a landscape of: epoch_group in {self.metadata_path!r} "
                             "is empty and collect_landscape gives no 'intervals'.")
        needed = sorted({n for iv in intervals for n in iv}) if create["train"] else (
            [intervals[-1][-1]] if create["result"] else [])
        paths = {n: metadata.checkpoint_path(self.ckpt_dir, n) for n in needed}
        check_devices_for_dist(distributed, device_ids, _GEN)
        devices, threads = resolve_devices(None if device_ids is None else list(device_ids), _GEN)
        got = callback_fn()
        if not (isinstance(got, (tuple, list)) and len(got) in (4, 5)):
            raise ValueError(f"The 'callback_fn' parameter of {_GEN} must return (model, network, dataset, "
                             f"metrics) or (model, network, dataset, metrics, task); got {type(got).__name__}"
                             f"{' of length ' + str(len(got)) if isinstance(got, (tuple, list)) else ''}.")
        model, network, dataset, metrics = got[:4]
        given_task = got[4] if len(got) == 5 else None
        if not isinstance(network, nn.Module):
            raise ValueError(f"callback_fn must return an nn.Module as its second item (network); "
                             f"got {type(network).__name__}.")
        network = unwrap_module(network)  # DDP, DataParallel, torch.compile: the module inside
        loss_fn = getattr(model, "loss_fn", None)
        if given_task is None and not callable(loss_fn):
            raise ValueError("callback_fn must return a model (first item) whose loss_fn is callable, or a task "
                             f"as its fifth item; got {type(model).__name__} with loss_fn={loss_fn!r}.")
        task = as_task(None if given_task is not None else loss_fn, given_task, caller=f"{_GEN} (callback_fn)")
        if metrics is not None and not isinstance(metrics, (dict, set, list, tuple)):
            raise ValueError(f"callback_fn must return a dict of metrics or None as its fourth item; "
                             f"got {type(metrics).__name__}.")
        metric_map = metric_dict(metrics)
        check_metrics(metric_map, task, f"{_GEN} (callback_fn)")
        for n, path in paths.items():  # every checkpoint matches the network before any work
            check_keys(network, fit_state(network, load_checkpoint(path, what=f"{unit} {n}")),
                       what=f"the checkpoint of {unit} {n} ({os.path.basename(path)})")
        samples = collect(dataset, cfg["num_samples"], task, caller=_GEN)
        out_dir = os.fspath(output) if output is not None else self.summary_dir
        geo = dict(size=cfg["landscape_size"], normalization=normalization, ignore=ignore, seed=seed)
        plans: list[LandscapePlan] = []
        if create["train"]:
            plans += [LandscapePlan(Geometry("pca", trajectory=[paths[n] for n in iv], **geo), intervals=iv,
                                    tag=f"landscape_{[iv[0], iv[-1]]}", unit=unit,
                                    step_per_epoch=cfg["step_per_epoch"]) for iv in intervals]
        if create["result"]:
            last = intervals[-1][-1]
            plans.append(LandscapePlan(Geometry("random", trajectory=[paths[last]], **geo), intervals=[last],
                                       tag=f"landscape_{[last]}", unit=unit, step_per_epoch=cfg["step_per_epoch"]))
        problem = Problem(network, task, samples, metrics=metric_map, eval_mode=eval_mode)
        dist = detect(distributed, _GEN)
        # one set of worker processes for every landscape of this call (none in a distributed run)
        pool = start_pool(devices, threads) if dist is None else None
        held = contextlib.ExitStack()  # the output folder's lock, on rank 0
        try:
            store, fps = None, {}

            def open_store() -> None:  # rank 0 only: the others neither read nor write files
                nonlocal store, fps
                os.makedirs(out_dir, exist_ok=True)
                store = Store(os.path.join(out_dir, "landscapes.h5"))
                held.enter_context(store.lock())
                fps = self._fingerprints(plans, cfg, problem)
                if restart:
                    store.forget([pl.tag or "" for pl in plans])
                for pl in plans:  # refuse other inputs' landscapes before any work
                    store.check(pl.tag or "", fps[pl.tag or ""])

            on_root(dist, open_store)
            execution = Execution(devices=devices, threads=threads, pool=pool, dist=dist, store=store)
            results: list[Landscape] = []
            self.last_stats = {}
            for pl in plans:
                stats: dict[str, int] = {}
                pl = dataclasses.replace(pl, fingerprint=fps.get(pl.tag or ""))
                results.append(build_landscape(problem, pl, execution, stats=stats))
                self.last_stats[pl.tag or ""] = {"evaluated": stats["evaluated"], "points": stats["points"]}
            if dist is None or dist.root:
                self._write(out_dir, results)
            return results
        except BaseException:
            stop_pool(pool, ok=False)
            raise
        finally:
            stop_pool(pool)  # after a failure, a no-op: the pool was killed above
            held.close()
            if dist is not None:
                dist.close()

    @staticmethod
    def _fingerprints(plans: list[LandscapePlan], cfg: dict[str, Any], problem: Problem) -> dict[str, dict[str, Any]]:
        """Everything that defines each landscape, digests for files, network and data."""
        digests: dict[str, str] = {}
        geo0 = plans[0].geometry if plans else None
        common = {"landscape_size": cfg["landscape_size"], "num_samples": problem.samples.n,
                  "normalization": geo0.normalization if geo0 else None,
                  "ignore": (geo0.ignore if geo0 else None) or "none", "eval_mode": problem.eval_mode,
                  "unit": cfg["unit"], "step_per_epoch": cfg["step_per_epoch"],
                  "model": model_digest(problem.network), "loss_fn": _task_name(problem.task),
                  "metrics": sorted(str(k) for k in problem.metrics),
                  "data": tensor_digest(*problem.samples.tensors())}
        out = {}
        for pl in plans:
            geo = pl.geometry
            fp = dict(common, kind=geo.kind, intervals=list(pl.intervals or []))
            if geo.kind == "random":
                fp["seed"] = int(geo.seed)
            else:
                fp["pca_method"] = geo.pca_method
            for n, path in zip(pl.intervals or [], geo.trajectory or []):
                if path not in digests:
                    digests[path] = file_digest(path)
                fp[f"checkpoint {cfg['unit']} {n}"] = digests[path]
            out[pl.tag or ""] = fp
        return out

    @staticmethod
    def _write(out_dir: str, results: list[Landscape]) -> None:
        """The summary events (landscapes.h5 was written landscape by landscape)."""
        if not results:
            return
        with SummaryRecord(out_dir) as rec:
            for ls in results:
                rec.add_value("landscape", ls.tag or "landscape", ls.to_proto())
                rec.record(0)
        _log.info("wrote %d landscape(s) to %s", len(results), out_dir)

    def clean_ckpt(self) -> None:
        """Delete ``{summary_dir}/ckpt_dir`` (the checkpoints and their metadata)."""
        if not os.path.isdir(self.ckpt_dir):
            return

        def onerror(func: Callable, path: str, _exc: Any) -> None:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            func(path)

        shutil.rmtree(self.ckpt_dir, onerror=onerror)


def _task_name(task: Any) -> str:
    """How the fingerprint names the loss: the loss_fn's repr for ``Supervised(loss_fn)`` with the
    default layout (as before tasks existed, so older landscapes.h5 files still resume), else the
    task's repr."""
    if isinstance(task, Supervised) and task.plain:
        return repr(task.loss_fn)
    return repr(task)
