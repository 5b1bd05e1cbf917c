"""``SummaryLandscape``: landscapes from the checkpoints SummaryCollector collected."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_directory, check_param
from collector.summary import SummaryRecord
from collector.trajectory import (
    CKPT_DIR,
    LANDSCAPE_DEFAULTS,
    METADATA_FILE,
    CheckpointReader,
    TrainMetadata,
    load_checkpoint,
    read_train_metadata,
    validate_collect_landscape,
    verify_checkpoint_file,
)
from landscape.engine import is_sharded
from landscape.execution import executor
from landscape.generate._build import run_jobs
from landscape.generate._jobs import LandscapeJob, RunOptions, jobs_from_metadata, view_checkpoints
from landscape.generate._options import SampleCount, check_bn_statistics, check_points, resolve_view
from landscape.generate._prepare import SharedOptions, check_options, prepare_problem
from landscape.geometry import GRID_KINDS, GRID_SIZES, MAX_DIMS, Geometry
from landscape.io import H5_NAME, Fingerprints, Store, check_run, run_identity, run_record
from landscape.result import Landscape

__all__ = ["SummaryLandscape"]
_log = logging.getLogger("landscape")
_GEN = "SummaryLandscape.gen_landscapes_with_multi_process"
VIEWS = ("line", "interpolation", "plane", "target", "grid")
#: Bytes of checkpoint states kept in memory during a generation (each file is then read once).
KEEP_CHECKPOINT_BYTES = 1 << 30


def _validate_override(value: Any) -> dict[str, Any]:
    return validate_collect_landscape(value, _GEN, name="collect_landscape", require_intervals=False,
                                      fill_defaults=False)


class SummaryLandscape:
    """Turn the checkpoints collected during training into loss landscapes.

    Read more in the user guide: [Generating](../generating.md#the-command-landscape-gen).

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

    Examples
    --------
    A run collected with MindSpore's ``Model`` and ``SummaryCollector``, then its PCA
    landscape of the interval and its random landscape around the last checkpoint:

    >>> import tempfile, torch
    >>> from collector import Model, SummaryCollector
    >>> from landscape import SummaryLandscape
    >>> from landscape.examples import MLP, digits_loader
    >>> run = tempfile.mkdtemp()
    >>> net = MLP(hidden=16)
    >>> model = Model(net, torch.nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
    >>> collect = {"collect_landscape": {"landscape_size": 3, "unit": "epoch", "num_samples": 64,
    ...                                  "intervals": [[1, 2, 3]]}}
    >>> model.train(3, digits_loader(256), callbacks=[SummaryCollector(run, collect_specified_data=collect)])
    >>> def callback_fn():
    ...     network = MLP(hidden=16)
    ...     return Model(network, torch.nn.CrossEntropyLoss()), network, digits_loader(64, shuffle=False), None
    >>> [ls.tag for ls in SummaryLandscape(run).gen_landscapes_with_multi_process(callback_fn)]
    ['landscape_[1, 3]', 'landscape_[3]']
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
        include: str | Sequence[str] | None = None, biasbn: str = "normalize", bn_statistics: str = "recompute",
        memory: str = "auto", directions: str = "random", dims: int | None = None,
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
            Where the summary file and ``landscapes.h5`` go (default ``summary_dir``). The file
            records its run; a folder whose ``landscapes.h5`` holds another run's landscapes is
            refused before any work, naming both runs (``InvalidParameterError``), unless
            ``restart``.
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
            them; a ``landscapes.h5`` of another run is removed, to start afresh.
        distributed : bool or None, default=None
            Share the work between the processes of a ``torch.distributed`` group (gloo on
            CPU, nccl on CUDA, one device per process): None uses an initialised group or
            torchrun's environment when there is one, True requires one, False computes
            everything in this process. Rank 0 writes the files; every rank returns the
            landscapes.
        plan : {"auto", "tune"} or dict, default="auto"
            How points are evaluated (see :func:`landscape.compute_landscape`): "auto" never
            times, so the same call gives the same values; "tune" times the candidates and
            records the plan in ``landscapes.h5``, where a resume, every rank and the later
            landscapes of the folder find it. A resumed landscape keeps the plan it started
            with.
        view : {"line", "interpolation", "plane", "target", "grid"}, optional
            Instead of MindSpore's landscapes, one other view of the collected checkpoints:
            a random line around the last checkpoint (tag ``line_[n]``), the interpolation
            between two checkpoints (``interpolation_[a, b]``), the plane through three
            (``plane_[a, b, c]``), the target direction from one to another with a
            ``second`` axis (``target_[a, b]``), or a grid of ``dims`` random, Hessian or PCA
            ``directions`` around the last checkpoint (``hessian_3d_[n]``; an n-D grid goes
            to ``landscapes.h5`` only, MindSpore's summary message holding planes).
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
        memory : {"auto", "fast", "lean"}, default="auto"
            How random directions are kept (see ``compute_landscape``): held, drawn again at
            every read, or held when they fit. The values are the same either way.
        directions : {"random", "hessian", "pca"}, default="random"
            The directions of ``view="grid"``: seeded random ones, the Hessian's top
            eigenvectors at the last checkpoint (Lanczos seeded by ``seed``), or the principal
            directions of every collected checkpoint (the path's coordinates recorded in the
            metadata, ``path_coordinates``).
        dims : int, optional
            The directions of ``view="grid"``, 2 to 6 (default 3). Its points per axis are
            ``collect_landscape['landscape_size']`` when given, else for 3 to 6 directions
            21, 11, 7 or 5 (about 10,000 points), for 2 the recorded ``landscape_size``.

        Returns
        -------
        list of Landscape
        """
        check_param("callback_fn", callback_fn, ["callable"], caller=_GEN)
        if output is not None:
            check_directory("output", output, caller=_GEN,
                            hint="pass the folder the summary file and landscapes.h5 go to (default summary_dir).")
        opts = check_options(normalization=normalization or "layer", ignore=ignore, include=include, biasbn=biasbn,
                             seed=seed, eval_mode=eval_mode, device_ids=device_ids, distributed=distributed,
                             plan=plan, x=x, y=y, caller=_GEN, memory=memory)
        check_param("restart", restart, ["boolean"], caller=_GEN)
        check_bn_statistics(bn_statistics, _GEN)
        run = self._check_view(view, between, second, normalization, opts, directions=directions, dims=dims,
                               memory=memory)
        metadata = self._read_metadata()
        cfg: dict[str, Any] = dict(vars(metadata))
        override = {} if collect_landscape is None else _validate_override(collect_landscape)
        cfg.update(override)
        if run.view == "grid" and run.dims > 2 and "landscape_size" not in override:
            cfg["landscape_size"] = GRID_SIZES[run.dims]
        dims = run.dims if run.view == "grid" else 1 if run.view in ("line", "interpolation") else 2
        check_points(dims=dims, size=int(cfg["landscape_size"]), x=opts.x, y=opts.y, caller=_GEN)
        if (cfg["create_landscape"]["train"] or cfg["create_landscape"]["result"] or view) and not cfg["intervals"]:
            raise ValueError(f"No interval to make a landscape of: epoch_group in {self.metadata_path!r} "
                             "is empty and collect_landscape gives no 'intervals'.")
        out_dir = os.fspath(output) if output is not None else self.summary_dir
        record = self._output_run(out_dir, metadata, restart)  # another run's landscapes: refused before any work
        paths, found = self._verified_checkpoints(metadata, cfg, run)
        count = self._sample_count(metadata, override)
        got = callback_fn()
        network, loss_fn, task, dataset, metrics = _callback_result(got)
        problem = prepare_problem(network, dataset, loss_fn=loss_fn, task=task, metrics=metrics,
                                  num_samples=count, eval_mode=eval_mode, plan=plan, ignore=ignore,
                                  include=include, caller=_GEN, where=" (callback_fn)",
                                  metrics_name="metrics (callback_fn's fourth item)", memory=memory)
        record = self._checked_problem(problem, out_dir, record, restart)
        base = Geometry(kind="random", size=cfg["landscape_size"], ignore=opts.ignore, seed=seed, x=opts.x, y=opts.y,
                        biasbn=biasbn, include=opts.include, bn_statistics=bn_statistics)
        jobs = jobs_from_metadata(cfg, run, base, _kept_states(problem.network, paths, cfg["unit"]), paths)
        self.last_stats = {}
        with executor(device_ids, distributed, _GEN, network=problem.network) as ex, contextlib.ExitStack() as held:
            opened: list[Store] = []
            prints: dict[str, dict[str, Any]] = {}

            def open_store() -> None:  # rank 0 only (its failure raised on every rank): the others touch no file
                os.makedirs(out_dir, exist_ok=True)
                store = Store(os.path.join(out_dir, H5_NAME), run=record)
                held.enter_context(store.lock())
                held.callback(_flush_after_failure, store)  # finished landscapes kept, also after an error
                opened.append(store)
                prints.update(self._fingerprints(problem, jobs, paths, found))
                store.claim([job.tag or "" for job in jobs], restart=restart, caller=_GEN)
                for job in jobs:  # refuse other inputs' landscapes before any work
                    store.check(job.tag or "", prints[job.tag or ""])

            ex.on_root(open_store)
            store = opened[0] if opened else None
            results = run_jobs(problem, jobs, ex, store=store, fingerprints=prints, stats=self.last_stats)
            if store is not None:
                store.flush()
        if ex.root:
            self._write(out_dir, results)
        return results

    def _sample_count(self, metadata: TrainMetadata, override: Mapping[str, Any]) -> SampleCount:
        """The samples of this call: ``collect_landscape['num_samples']`` when given, else the number
        recorded when training, which a smaller dataset replaces when it was the collector's default."""
        way = "collect_landscape={{'num_samples': {n}}}"
        if "num_samples" in override:
            return SampleCount(override["num_samples"], way)
        default = getattr(metadata, "num_samples_default", None)
        if default is None:  # the key is absent: a run written before it, when the default was always 2048
            default = metadata.num_samples == LANDSCAPE_DEFAULTS["num_samples"]
        return SampleCount(metadata.num_samples, way, recorded_in=self.metadata_path, default=bool(default))

    def _output_run(self, out_dir: str, metadata: TrainMetadata, restart: bool) -> dict[str, Any]:
        """This run's record (``landscape/io/_run.py``: its name and checkpoints, no file of them read but
        to hash one without a recorded digest), checked against the ``landscapes.h5`` of ``out_dir``:
        another run's landscapes are refused before any work (with ``restart`` the store replaces them)."""
        record = run_record(self.summary_dir, metadata, self.ckpt_dir)
        check_run(os.path.join(out_dir, H5_NAME), record, caller=_GEN, restart=restart)
        return record

    @staticmethod
    def _checked_problem(problem: Any, out_dir: str, record: dict[str, Any], restart: bool) -> dict[str, Any]:
        """The problem's network usable here (not sharded), and the run's record with its network and
        task, checked again before any checkpoint is loaded."""
        if is_sharded(problem.network):
            raise InvalidParameterError(
                f"The network of {_GEN} (callback_fn) is sharded with fully_shard; a run's landscapes are centred "
                "on its checkpoints, which load whole. HINT: compute_landscape(model, data=..., task=...) on every "
                "rank draws a random landscape around the sharded model's own state.")
        record = {**record, **run_identity(problem.network, problem.task)}
        check_run(os.path.join(out_dir, H5_NAME), record, caller=_GEN, restart=restart)
        return record

    def _check_view(self, view: str | None, between: Any, second: str, normalization: str | None,
                    opts: SharedOptions, *, directions: Any = "random", dims: Any = None,
                    memory: Any = "auto") -> RunOptions:
        """The view options, checked before any work."""
        check_param("view", view, [None, Options(VIEWS)], caller=_GEN,
                    hint="None gives MindSpore's PCA and Random landscapes.")
        check_param("second", second, [Options(("random", "pca"))], caller=_GEN)
        check_param("directions", directions, [Options(GRID_KINDS)], caller=_GEN,
                    hint="the directions of view='grid'.")
        check_param("dims", dims, [None, Interval(int, 2, MAX_DIMS)], caller=_GEN,
                    hint="the directions of view='grid' (default 3).")
        if view != "grid" and (directions != "random" or dims is not None):
            raise InvalidParameterError(
                f"The 'directions' and 'dims' parameters of {_GEN} are for view='grid'. Got view={view!r} with "
                f"directions={directions!r}, dims={dims!r}. HINT: pass view='grid' as well.")
        if view == "grid":
            if between is not None:
                raise InvalidParameterError(f"The 'between' parameter of {_GEN} must be None with view='grid' (a grid "
                                            "around the last checkpoint).")
            if int(dims or 3) > 2 and memory == "lean":
                raise InvalidParameterError(f"The 'memory' parameter of {_GEN} must be 'auto' or 'fast' for an n-D "
                                            "grid: it holds its directions. Got 'lean' instead.")
            return RunOptions(view=view, normalization=normalization, directions=directions, dims=int(dims or 3))
        if view == "line" and opts.y is not None:
            raise InvalidParameterError(f"The 'y' parameter of {_GEN} must be None for view='line'. Got {opts.y!r} "
                                        "instead.")
        if view is None or view == "line":
            if between is not None:
                raise InvalidParameterError(
                    f"The 'between' parameter of {_GEN} must be None " + (
                        "with view='line' (a random line around the last checkpoint)." if view else
                        "without a view. HINT: pass view='interpolation', 'plane' or 'target' as well."))
            return RunOptions(view=view, normalization=normalization)
        want = 3 if view == "plane" else 2
        if between is not None:
            ok = (isinstance(between, (list, tuple)) and len(between) == want and all(
                (isinstance(b, int) and not isinstance(b, bool)) or isinstance(b, (str, os.PathLike)) for b in between))
            if not ok:
                raise InvalidParameterError(
                    f"The 'between' parameter of {_GEN} must be {want} checkpoints (step or epoch numbers, or "
                    f"checkpoint files) for view={view!r}. Got {between!r} instead.")
            if view == "target" and second == "pca" and not all(isinstance(b, int) for b in between):
                raise InvalidParameterError(f"The 'between' parameter of {_GEN} must be two checkpoint numbers "
                                            "with second='pca' (the trajectory runs from one to the other).")
        # the view's normalization rules (axes between models take none), as compute_landscape words them
        resolve_view(directions=("target", second) if view == "target" else None, between=["A", "B", "C"][:want],
                     dims=None, checkpoints=[0, 1, 2] if (view, second) == ("target", "pca") else None,
                     normalization=normalization, caller=_GEN)
        return RunOptions(view=view, between=None if between is None else list(between), second=second,
                          normalization=normalization)

    def _verified_checkpoints(self, metadata: TrainMetadata, cfg: Mapping[str, Any],
                              run: RunOptions) -> tuple[dict[int, str], dict[int, Any]]:
        """The paths of the checkpoints the call needs, each verified to be the file training wrote
        (by the SHA-256 recorded then, or for MindSpore's metadata by its archive's CRC-32s), before
        anything else (callback_fn may be slow)."""
        if run.view is not None:
            numbers = view_checkpoints(run.view, run.between, run.second, cfg["intervals"], run.directions, run.dims)
            needed = sorted({n for n in numbers if isinstance(n, int)})
        elif cfg["create_landscape"]["train"]:
            needed = sorted({n for iv in cfg["intervals"] for n in iv})
        else:
            needed = [cfg["intervals"][-1][-1]] if cfg["create_landscape"]["result"] else []
        paths = {n: metadata.checkpoint_path(self.ckpt_dir, n) for n in needed}
        found = {n: verify_checkpoint_file(path, what=f"the checkpoint of {cfg['unit']} {n}",
                                           digest=metadata.digests.get(n), recorded_in=self.metadata_path)
                 for n, path in paths.items()}
        return paths, found

    def _fingerprints(self, problem: Any, jobs: Sequence[LandscapeJob], paths: Mapping[int, str],
                      found: Mapping[int, Any]) -> dict[str, dict[str, Any]]:
        """Each landscape's fingerprint (files verified already are not hashed again)."""
        prints = Fingerprints(problem.network, problem.task, problem.samples, problem.metrics, problem.eval_mode,
                              known={paths[n]: d.sha256 for n, d in found.items() if d is not None},
                              bn_samples=problem.bn_samples)
        return {job.tag or "": prints.of(job.geometry, intervals=job.intervals, unit=job.unit,
                                         step_per_epoch=job.step_per_epoch, checkpoint=paths.__getitem__)
                for job in jobs}

    @staticmethod
    def _write(out_dir: str, results: list[Landscape]) -> None:
        """The summary events (landscapes.h5 was written landscape by landscape)."""
        # MindSpore's message holds lines and planes: an n-D grid is in landscapes.h5 only
        results = [ls for ls in results if ls.dims <= 2]
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


def _callback_result(got: Any) -> tuple[Any, Any, Any, Any, Any]:
    """``(network, loss_fn, task, dataset, metrics)`` from what ``callback_fn`` returned."""
    if not (isinstance(got, (tuple, list)) and len(got) in (4, 5)):
        raise ValueError(f"The 'callback_fn' parameter of {_GEN} must return (model, network, dataset, "
                         f"metrics) or (model, network, dataset, metrics, task); got {type(got).__name__}"
                         f"{' of length ' + str(len(got)) if isinstance(got, (tuple, list)) else ''}.")
    model, network, dataset, metrics = got[:4]
    task = got[4] if len(got) == 5 else None
    if not isinstance(network, nn.Module):
        raise ValueError(f"callback_fn must return an nn.Module as its second item (network); "
                         f"got {type(network).__name__}.")
    loss_fn = getattr(model, "loss_fn", None)
    if task is None and not callable(loss_fn):
        raise ValueError("callback_fn must return a model (first item) whose loss_fn is callable, or a task "
                         f"as its fifth item; got {type(model).__name__} with loss_fn={loss_fn!r}.")
    return network, None if task is not None else loss_fn, task, dataset, metrics


def _kept_states(network: nn.Module, paths: Mapping[int, str], unit: str) -> dict[int, Any]:
    """Every checkpoint matched against the network before any work; each is read once: the states
    are kept (up to :data:`KEEP_CHECKPOINT_BYTES`) for the PCA and the centres, else read again there."""
    out: dict[int, Any] = {}
    kept = 0
    for n, path in paths.items():  # verified before; both checks word any failure (CheckpointError)
        what = f"the checkpoint of {unit} {n}"
        if kept + os.path.getsize(path) > KEEP_CHECKPOINT_BYTES:
            # not kept: matched from the file's structure, no tensor read (a large model's checkpoint
            # is never loaded whole here; the PCA streams it, a centre loads it when needed)
            CheckpointReader(path, what=what, network=network)
            out[n] = path
            continue
        state = load_checkpoint(path, what=what, network=network)
        out[n] = state
        kept += sum(t.nbytes for t in state.values() if isinstance(t, torch.Tensor))
    return out


def _flush_after_failure(store: Store) -> None:
    """The landscapes finished before a failure are written (a no-op after a successful flush)."""
    try:
        store.flush()
    except Exception:  # the original error is the one to report
        _log.exception("could not write the finished landscapes to %s", store.path)
