"""``SummaryLandscape``: landscapes from the checkpoints SummaryCollector collected."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import stat
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from collector.common import InstanceOf, InvalidParameterError, Options, check_directory, check_param, unwrap_module
from collector.summary import SummaryRecord
from collector.train import check_metrics as check_metric_forms
from collector.trajectory import (
    CKPT_DIR,
    METADATA_FILE,
    TrainMetadata,
    load_checkpoint,
    read_train_metadata,
    validate_collect_landscape,
    verify_checkpoint_file,
)
from landscape.engine import Supervised, as_task, collect, is_point_metric
from landscape.execution._devices import resolve_devices
from landscape.execution._distributed import check_devices_for_dist, detect, on_root
from landscape.execution._run import start_pool, stop_pool
from landscape.generate._build import build_landscape, metric_dict
from landscape.generate._options import (
    check_common,
    check_metrics,
    check_patterns,
    check_plan,
    check_range,
    check_selection,
    resolve_view,
)
from landscape.generate._plan import Execution, Geometry, LandscapePlan, Problem
from landscape.io._store import Store, file_digest, model_digest, tensor_digest
from landscape.result._landscape import Landscape

__all__ = ["SummaryLandscape"]
_log = logging.getLogger("landscape")
_GEN = "SummaryLandscape.gen_landscapes_with_multi_process"
VIEWS = ("line", "interpolation", "plane", "target")
#: Bytes of checkpoint states kept in memory during a generation (each file is then read once).
KEEP_CHECKPOINT_BYTES = 1 << 30


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
        check_directory("summary_dir", summary_dir, caller="SummaryLandscape", create=False,
                        hint="pass the SummaryCollector's summary_dir (the folder holding ckpt_dir/).")
        self.summary_dir = os.fspath(summary_dir)
        self.ckpt_dir = os.path.join(self.summary_dir, CKPT_DIR)
        self.metadata_path = os.path.join(self.ckpt_dir, METADATA_FILE)
        self.last_stats: dict[str, dict[str, int]] = {}

    # -- metadata -----------------------------------------------------------------
    def _read_metadata(self) -> TrainMetadata:
        return read_train_metadata(self.metadata_path)

    @property
    def intervals(self) -> list[list[int]]:
        """The complete intervals of step or epoch numbers ``train_metadata.json`` records."""
        return [list(iv) for iv in self._read_metadata().intervals]

    def checkpoints(self, interval: int | Sequence[int] | None = None) -> list[str]:
        """Paths of collected checkpoints, in order, checked to exist.

        Parameters
        ----------
        interval : int, sequence of int or None, default=None
            The index of an interval (``0`` is the first of :attr:`intervals`), or the step
            or epoch numbers themselves, or None for every collected checkpoint.

        Returns
        -------
        list of str
            For ``compute_landscape(..., directions="pca", checkpoints=...)`` (the last one
            is the centre).

        Examples
        --------
        >>> sl = SummaryLandscape("runs/mlp")                            # doctest: +SKIP
        >>> compute_landscape(net, loss_fn, data, directions="pca",       # doctest: +SKIP
        ...                   checkpoints=sl.checkpoints(0))
        """
        md = self._read_metadata()
        if interval is None:
            numbers = sorted(md.files)
        elif isinstance(interval, bool):
            raise InvalidParameterError("The 'interval' parameter of SummaryLandscape.checkpoints must be an "
                                        f"interval index, step/epoch numbers or None. Got {interval!r} instead.")
        elif isinstance(interval, int):
            if not 0 <= interval < len(md.intervals):
                raise InvalidParameterError(
                    f"The 'interval' parameter of SummaryLandscape.checkpoints must be an index in [0, "
                    f"{len(md.intervals) - 1}] (the run has {len(md.intervals)} complete interval(s): "
                    f"{md.intervals}). Got {interval!r} instead.")
            numbers = list(md.intervals[interval])
        else:
            check_param("interval", interval, [InstanceOf(list, tuple, range)],
                        caller="SummaryLandscape.checkpoints", hint="an interval index, or step/epoch numbers.")
            numbers = [int(k) for k in interval]
        return [md.checkpoint_path(self.ckpt_dir, k) for k in numbers]

    # -- public -------------------------------------------------------------------
    def gen_landscapes_with_multi_process(
        self, callback_fn: Callable[[], tuple], collect_landscape: dict | None = None,
        device_ids: list[int] | None = None, output: str | os.PathLike | None = None, *,
        normalization: str | None = None, ignore: str | Sequence[str] | None = None, seed: int = 0,
        eval_mode: bool = True, restart: bool = False, distributed: bool | None = None, plan: Any = "auto",
        view: str | None = None, between: Sequence[int | str | os.PathLike] | None = None, second: str = "random",
        x: tuple[float, float, int] | None = None, y: tuple[float, float, int] | None = None,
        include: str | Sequence[str] | None = None, biasbn: str = "normalize",
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
        normalization : {"layer", "filter", "dfilter", "dlayer", "weight", "none"}, optional
            Normalization of random and PCA directions ("layer", MindSpore's, by default);
            views between checkpoints use their differences as they are.
        ignore : str or list of str, optional
            Parameters that do not move: glob patterns, or "biasbn" (every tensor with at
            most one dimension); see ``compute_landscape``.
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
        plan : {"auto", "heuristic"} or dict, default="auto"
            How points are evaluated (see :func:`landscape.compute_landscape`); a resumed
            landscape keeps the plan it started with.
        view : {"line", "interpolation", "plane", "target"}, optional
            Instead of MindSpore's landscapes, one other view of the collected checkpoints:
            a random line around the last checkpoint (tag ``line_[n]``), the interpolation
            between two checkpoints (``interpolation_[a, b]``), the plane through three
            (``plane_[a, b, c]``), or the target direction from one to another with a
            ``second`` axis (``target_[a, b]``).
        between : sequence of int or path, optional
            The checkpoints of the view, by step or epoch number (or a checkpoint file):
            two for an interpolation or a target, three for a plane. By default the first
            and last checkpoints of the intervals (and, for a plane, the middle one).
        second : {"random", "pca"}, default="random"
            The second axis of ``view="target"``: random, or the top direction of the
            checkpoints between the two away from their difference (the path is drawn).
        x, y : (min, max, num), optional
            The axes (see ``compute_landscape``); they apply to every landscape of the call.
        include : str or list of str, optional
            Only the parameters matching one of these glob patterns move.
        biasbn : {"normalize", "li"}, default="normalize"
            Directions of tensors with at most one dimension: normalized like the others,
            or (Li et al.) the tensor itself.

        Returns
        -------
        list of Landscape
        """
        check_param("callback_fn", callback_fn, ["callable"], caller=_GEN)
        if output is not None:
            check_directory("output", output, caller=_GEN,
                            hint="pass the folder the summary file and landscapes.h5 go to (default summary_dir).")
        check_common(normalization=normalization or "layer", ignore=ignore, seed=seed, eval_mode=eval_mode,
                     device_ids=device_ids, caller=_GEN, include=include, biasbn=biasbn)
        check_param("view", view, [None, Options(VIEWS)], caller=_GEN,
                    hint="None gives MindSpore's PCA and Random landscapes.")
        check_param("second", second, [Options(("random", "pca"))], caller=_GEN)
        x_range, y_range = check_range("x", x, _GEN), check_range("y", y, _GEN)
        if view == "line" and y_range is not None:
            raise InvalidParameterError(f"The 'y' parameter of {_GEN} must be None for view='line'. Got {y!r} instead.")
        check_param("restart", restart, ["boolean"], caller=_GEN)
        check_param("distributed", distributed, [None, "boolean"], caller=_GEN)
        check_plan(plan, _GEN)
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
        if view is not None:
            numbers = self._view_numbers(view, between, second, intervals)
            needed = sorted({n for n in numbers if isinstance(n, int)})
        else:
            if between is not None:
                raise InvalidParameterError(f"The 'between' parameter of {_GEN} needs a view ('interpolation', "
                                            "'plane' or 'target'). HINT: pass view=... as well.")
            needed = sorted({n for iv in intervals for n in iv}) if create["train"] else (
                [intervals[-1][-1]] if create["result"] else [])
        paths = {n: metadata.checkpoint_path(self.ckpt_dir, n) for n in needed}
        # Before anything else (callback_fn may be slow): every checkpoint is the file training wrote, by the
        # SHA-256 recorded then, or for MindSpore's metadata (no digests) by its archive's CRC-32s.
        found = {n: verify_checkpoint_file(path, what=f"the checkpoint of {unit} {n}", digest=metadata.digests.get(n),
                                           recorded_in=self.metadata_path) for n, path in paths.items()}
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
        check_metric_forms(metrics, name="metrics (callback_fn's fourth item)", caller=_GEN)
        metric_map = metric_dict(metrics)
        check_metrics(metric_map, task, f"{_GEN} (callback_fn)")
        # Every checkpoint matches the network before any work; each is read once: the states are
        # kept (up to KEEP_CHECKPOINT_BYTES) for the PCA and the centres, else read again there.
        loaded: dict[int, Any] = {}
        kept = 0
        for n, path in paths.items():  # verified above; load_checkpoint words any failure (CheckpointError)
            state = load_checkpoint(path, what=f"the checkpoint of {unit} {n}", network=network)
            size = sum(t.nbytes for t in state.values() if isinstance(t, torch.Tensor))
            if kept + size <= KEEP_CHECKPOINT_BYTES:
                loaded[n] = state
                kept += size
        source = {n: loaded.get(n, path) for n, path in paths.items()}
        samples = collect(dataset, cfg["num_samples"], task, caller=_GEN)
        out_dir = os.fspath(output) if output is not None else self.summary_dir
        check_selection(network, ignore, include, _GEN)
        ignores = check_patterns("ignore", ignore, _GEN, keyword="biasbn")
        geo: dict[str, Any] = dict(size=cfg["landscape_size"], ignore=ignores[0] if ignores and len(ignores) == 1
                                   else ignores, seed=seed, x=x_range, y=y_range, biasbn=biasbn,
                                   include=check_patterns("include", include, _GEN))
        plans: list[LandscapePlan] = []
        step_per_epoch = cfg["step_per_epoch"]
        if view is not None:  # views read their checkpoints by path (two or three, read again there)
            plans.append(self._view_plan(view, numbers, second, paths, intervals, normalization, geo, unit,
                                         step_per_epoch))
        else:
            geo["normalization"] = normalization or "layer"
            if create["train"]:
                plans += [LandscapePlan(Geometry("pca", trajectory=[source[n] for n in iv], **geo), intervals=iv,
                                        tag=f"landscape_{[iv[0], iv[-1]]}", unit=unit,
                                        step_per_epoch=step_per_epoch) for iv in intervals]
            if create["result"]:
                last = intervals[-1][-1]
                plans.append(LandscapePlan(Geometry("random", trajectory=[source[last]], **geo), intervals=[last],
                                           tag=f"landscape_{[last]}", unit=unit, step_per_epoch=step_per_epoch))
        problem = Problem(network, task, samples, metrics=metric_map, eval_mode=eval_mode, plan=plan)
        dist = detect(distributed, _GEN)
        # one set of worker processes for every landscape of this call (none in a distributed run)
        pool = start_pool(devices, threads) if dist is None else None
        held = contextlib.ExitStack()  # the output folder's lock, on rank 0
        store: Store | None = None
        fps: dict[str, dict[str, Any]] = {}
        try:

            def open_store() -> None:  # rank 0 only: the others neither read nor write files
                nonlocal store, fps
                os.makedirs(out_dir, exist_ok=True)
                store = Store(os.path.join(out_dir, "landscapes.h5"))
                held.enter_context(store.lock())
                fps = self._fingerprints(plans, cfg, problem, paths,
                                         {paths[n]: d.sha256 for n, d in found.items() if d is not None})
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
            if store is not None:
                store.flush()
            if dist is None or dist.root:
                self._write(out_dir, results)
            return results
        except BaseException:
            stop_pool(pool, ok=False)
            if store is not None:  # the landscapes finished before the failure are kept
                try:
                    store.flush()
                except Exception:  # the original error is the one to report
                    _log.exception("could not write the finished landscapes to %s", store.path)
            raise
        finally:
            stop_pool(pool)  # after a failure, a no-op: the pool was killed above
            held.close()
            if dist is not None:
                dist.close()

    @staticmethod
    def _fingerprints(plans: list[LandscapePlan], cfg: dict[str, Any], problem: Problem,
                      paths: dict[int, str], known: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
        """Everything that defines each landscape, digests for files (``known``: verified already), network
        and data."""
        digests: dict[str, str] = dict(known or {})
        common = {"landscape_size": cfg["landscape_size"], "num_samples": problem.samples.n,
                  "eval_mode": problem.eval_mode,
                  "unit": cfg["unit"], "step_per_epoch": cfg["step_per_epoch"],
                  "model": model_digest(problem.network), "loss_fn": _task_name(problem.task),
                  "metrics": sorted(str(k) for k in problem.metrics),
                  "data": tensor_digest(*problem.samples.tensors())}
        points = {str(k): repr(m) for k, m in problem.metrics.items() if is_point_metric(m)}
        if points:  # their settings (an EigenRatio's tolerance) define the surface; absent otherwise, as before
            common["point_metrics"] = points
        out = {}

        def digest(path: Any) -> str:
            if path not in digests:
                digests[path] = file_digest(path)
            return digests[path]

        for pl in plans:
            geo = pl.geometry
            ignore = geo.ignore if geo.ignore is None or isinstance(geo.ignore, str) else list(geo.ignore)
            fp = dict(common, normalization=geo.normalization, ignore=ignore or "none", kind=geo.kind,
                      intervals=list(pl.intervals or []))
            # options added with the views are recorded only when set, so that a landscapes.h5
            # written before them still resumes
            for key, value, default in (("dims", geo.dims, 2), ("x", geo.x, None), ("y", geo.y, None),
                                        ("biasbn", geo.biasbn, "normalize"), ("second", geo.second, "random"),
                                        ("include", None if geo.include is None else list(geo.include), None)):
                if value != default:
                    fp[key] = list(value) if isinstance(value, tuple) else value
            if geo.kind == "random" or (geo.kind == "target" and geo.second == "random"):
                fp["seed"] = int(geo.seed)
            elif geo.kind == "pca":
                fp["pca_method"] = geo.pca_method
            if geo.kind == "pca" or geo.second == "pca" or geo.kind == "random":
                for n in pl.intervals or []:
                    fp[f"checkpoint {cfg['unit']} {n}"] = digest(paths[n])
            for k, path in enumerate(geo.models or []):
                fp[f"model {'ABC'[k]}"] = digest(path)
            out[pl.tag or ""] = fp
        return out

    def _view_numbers(self, view: str, between: Any, second: str, intervals: list[list[int]]) -> list[Any]:
        """The checkpoints of a view: ``between`` (numbers or paths), or the default ones from the
        intervals; for ``("target", "pca")`` every collected number between the two as well."""
        union = sorted({n for iv in intervals for n in iv})
        want = {"line": 0, "interpolation": 2, "plane": 3, "target": 2}[view]
        if view == "line":
            if between is not None:
                raise InvalidParameterError(f"The 'between' parameter of {_GEN} must be None with view='line' "
                                            "(a random line around the last checkpoint).")
            if not union:
                raise ValueError(f"No interval in {self.metadata_path!r} to take the last checkpoint from.")
            return [union[-1]]
        if between is None:
            if len(union) < want:
                raise ValueError(f"view={view!r} needs {want} checkpoints; the intervals hold {union}.")
            between = [union[0], union[len(union) // 2], union[-1]] if want == 3 else [union[0], union[-1]]
        ok = (isinstance(between, (list, tuple)) and len(between) == want and all(
            (isinstance(b, int) and not isinstance(b, bool)) or isinstance(b, (str, os.PathLike)) for b in between))
        if not ok:
            raise InvalidParameterError(
                f"The 'between' parameter of {_GEN} must be {want} checkpoints (step or epoch numbers, or "
                f"checkpoint files) for view={view!r}. Got {between!r} instead.")
        numbers = list(between)
        if view == "target" and second == "pca":
            ends = [b for b in numbers if isinstance(b, int)]
            if len(ends) != 2:
                raise InvalidParameterError(f"The 'between' parameter of {_GEN} must be two checkpoint numbers "
                                            "with second='pca' (the trajectory runs from one to the other).")
            lo, hi = sorted(ends)
            numbers += [n for n in union if lo <= n <= hi and n not in ends]
        return numbers

    @staticmethod
    def _view_plan(view: str, numbers: list[Any], second: str, paths: dict[int, str], intervals: list[list[int]],
                   normalization: str | None, geo: dict[str, Any], unit: str,
                   step_per_epoch: int) -> LandscapePlan:
        def where(item: Any) -> str:
            return paths[item] if isinstance(item, int) else os.fspath(item)

        def name(item: Any) -> Any:
            return item if isinstance(item, int) else os.path.splitext(os.path.basename(os.fspath(item)))[0]

        if view == "line":
            v = resolve_view(directions="random", between=None, dims=1, checkpoints=None,
                             normalization=normalization, caller=_GEN)
            return LandscapePlan(Geometry("random", trajectory=[where(numbers[0])], dims=1,
                                          normalization=v.normalization, **geo),
                                 intervals=[numbers[0]], tag=f"line_{[numbers[0]]}", unit=unit,
                                 step_per_epoch=step_per_epoch)
        k = 3 if view == "plane" else 2
        models = [where(b) for b in numbers[:k]]
        trajectory = None
        steps = [name(b) for b in numbers[:k]]
        if view == "target" and second == "pca":
            lo, hi = sorted(b for b in numbers[:2])
            traj_numbers = sorted(numbers)
            trajectory = [paths[n] for n in traj_numbers]
            steps = [n for n in traj_numbers if lo <= n <= hi]
        v = resolve_view(directions=("target", second) if view == "target" else None, between=models,
                         dims=None, checkpoints=trajectory, normalization=normalization, caller=_GEN)
        return LandscapePlan(Geometry(v.kind, models=models, trajectory=trajectory, dims=v.dims,  # type: ignore[arg-type]
                                      normalization=v.normalization, second=v.second, **geo),
                             intervals=steps, tag=f"{view}_{[name(b) for b in numbers[:k]]}", unit=unit,
                             step_per_epoch=step_per_epoch)

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
