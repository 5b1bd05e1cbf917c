"""``compare_runs``: several training runs on one plane, from their summary directories.

The runs' collected checkpoints (``ckpt_dir`` of each SummaryCollector directory, every
one, in order) are drawn on one plane: the PCA of all of them (a shared plane) or a
random plane, centred on their start, their mean or one run's end. Their start is the
initial weights SummaryCollector saved before the first step (not an interval's
checkpoint: no path shows it): shared when they are equal bit for bit (one seed), else
the first run's; a run written before they were saved starts at its first saved
checkpoint, and the landscape's ``centre_description`` says which. It goes the
same path as ``SummaryLandscape`` (checkpoints verified before any work, the resumable
store with fingerprints, the summary events), so it resumes after a kill and gives the
same bits.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_directory, check_param
from collector.summary import SummaryRecord
from collector.trajectory import (
    CKPT_DIR,
    LANDSCAPE_SIZES,
    METADATA_FILE,
    load_checkpoint,
    read_train_metadata,
    verify_checkpoint_file,
)
from landscape.execution import executor
from landscape.generate._build import run_jobs
from landscape.generate._jobs import LandscapeJob
from landscape.generate._options import check_runs, check_runs_view
from landscape.generate._prepare import check_options, prepare_problem
from landscape.geometry import PCA_METHODS, Geometry, RunStart, run_start
from landscape.io import Fingerprints, Store
from landscape.result import Landscape

__all__ = ["compare_runs"]
_CALLER = "compare_runs"


def _run_names(runs: Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike]) -> dict[str, str]:
    if isinstance(runs, Mapping):
        return {str(k): os.fspath(v) for k, v in runs.items()}
    out: dict[str, str] = {}
    for path in runs:
        base = os.path.basename(os.path.normpath(os.fspath(path))) or "run"
        name, k = base, 2
        while name in out:  # two folders of one name: run, run_2
            name, k = f"{base}_{k}", k + 1
        out[name] = os.fspath(path)
    return out


def compare_runs(runs: Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike], callback_fn: Callable[[], tuple],
                 output: str | os.PathLike, *, directions: Literal["pca", "random"] = "pca", centre: str | None = None,
                 size: int = 40, num_samples: int | None = None, normalization: str | None = None, seed: int = 0,
                 eval_mode: bool = True, device_ids: list[int] | None = None, distributed: bool | None = None,
                 restart: bool = False, plan: Any = "auto",
                 pca_method: Literal["uncentred", "li", "mindspore"] = "uncentred") -> Landscape:
    """Draw several runs on one plane and write it to ``output`` (summary events and landscapes.h5).

    Read more in the user guide: [Several runs on one plane](../generating.md#several-runs-on-one-plane).

    Parameters
    ----------
    runs : list of paths, or dict of name to path
        SummaryCollector directories (each with ``ckpt_dir/``); named by their folders when a list.
    callback_fn : callable
        As for ``SummaryLandscape``: ``(model, network, dataset, metrics[, task])``, the network
        every run's checkpoints load into.
    output : str or os.PathLike
        The folder the comparison goes to (made if absent).
    directions : {"pca", "random"}, default="pca"
        The PCA of every checkpoint of every run (a shared plane), or a seeded random plane.
    centre : {"start", "mean"} or a run's name, optional
        The plane's centre: the runs' start (their shared initial weights, saved by
        SummaryCollector before the first step; when the runs' differ, the first run's; for
        runs saved without them, the first run's first saved checkpoint), the mean of all
        their checkpoints, or a run's last checkpoint (None: the first run's end).
        ``metadata["centre_description"]`` says which.
    normalization : {"none", "layer", "filter", "dfilter", "dlayer", "weight"}, optional
        How the directions are scaled to the centre's weights. None: "none" for the PCA (the
        PCA plane itself: a per-tensor scaling such as "layer" turns the plane, which then
        holds less of the runs' movement than the PCA says), "layer" for a random plane.
    pca_method : {"uncentred", "li", "mindspore"}, default="uncentred"
        The PCA (docs/generating.md, "PCA methods"): "uncentred", the plane through the
        centre that holds the largest share of the runs' movement; "li", ordinary PCA
        (centred across the checkpoints); "mindspore", MindSpore's.
    size, num_samples, seed, eval_mode, device_ids, distributed, restart, plan
        As for ``compute_landscape`` and ``SummaryLandscape`` (``num_samples`` None: the first
        run's ``num_samples``).

    Returns
    -------
    Landscape
        With one path per run in ``paths`` (their checkpoints numbered by their step or epoch),
        and in ``metadata``: ``movement_in_plane`` (the share of every checkpoint's squared
        distance from the centre the drawn plane holds), ``path_distance`` (each checkpoint's
        distance from the plane relative to its distance from the centre), for PCA
        ``explained_variance_ratio`` (the PCA's, before normalization), and
        ``samples_digest``.

    Examples
    --------
    Two learning rates from the same initial weights, on their shared PCA plane:

    >>> import os, tempfile, torch
    >>> from collector import Model, SummaryCollector
    >>> from landscape import compare_runs
    >>> from landscape.examples import MLP, digits_loader
    >>> root = tempfile.mkdtemp()
    >>> collect = {"collect_landscape": {"unit": "epoch", "num_samples": 64, "intervals": [[1, 2, 3]]}}
    >>> for lr in (0.05, 0.2):
    ...     _ = torch.manual_seed(0)
    ...     net = MLP(hidden=16)
    ...     model = Model(net, torch.nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=lr))
    ...     collector = SummaryCollector(os.path.join(root, f"lr{lr}"), collect_specified_data=collect)
    ...     model.train(3, digits_loader(256), callbacks=[collector])
    >>> def callback_fn():
    ...     network = MLP(hidden=16)
    ...     return Model(network, torch.nn.CrossEntropyLoss()), network, digits_loader(64, shuffle=False), None
    >>> runs = {"slow": os.path.join(root, "lr0.05"), "fast": os.path.join(root, "lr0.2")}
    >>> ls = compare_runs(runs, callback_fn, os.path.join(root, "compare"), size=3, centre="start")
    >>> sorted(ls.paths)
    ['fast', 'slow']
    """
    check_param("runs", runs, [InstanceOf(list, tuple, Mapping)], caller=_CALLER)
    check_param("callback_fn", callback_fn, ["callable"], caller=_CALLER)
    check_directory("output", output, caller=_CALLER, hint="pass the folder the comparison goes to.")
    check_param("directions", directions, [Options(("pca", "random"))], caller=_CALLER)
    check_param("size", size, [Interval(int, *LANDSCAPE_SIZES)], caller=_CALLER)
    check_param("num_samples", num_samples, [None, Interval(int, 1, None)], caller=_CALLER)
    check_param("restart", restart, ["boolean"], caller=_CALLER)
    check_param("pca_method", pca_method, [Options(PCA_METHODS)], caller=_CALLER)
    if normalization is None:  # the PCA plane itself (a per-tensor scaling turns it); MindSpore's for random
        normalization = "none" if directions == "pca" else "layer"
    check_options(normalization=normalization, ignore=None, include=None, biasbn="normalize",
                         seed=seed, eval_mode=eval_mode, device_ids=device_ids, distributed=distributed, plan=plan,
                         x=None, y=None, caller=_CALLER)
    dirs = _run_names(runs)
    if len(dirs) < 2:
        raise InvalidParameterError(f"The 'runs' parameter of {_CALLER} must name at least 2 runs. Got {len(dirs)}.")
    metadata, paths, initial, found = {}, {}, {}, {}
    for name, folder in dirs.items():  # every checkpoint used is the file training wrote, before any work
        ckpt_dir = os.path.join(folder, CKPT_DIR)
        where = os.path.join(ckpt_dir, METADATA_FILE)
        md = metadata[name] = read_train_metadata(where)
        paths[name] = [md.checkpoint_path(ckpt_dir, n) for n in sorted(md.files)]
        checked = [(f"the checkpoint of {md.unit} {n} of run {name!r}", path, md.digests.get(n))
                   for n, path in zip(sorted(md.files), paths[name])]
        saved = initial[name] = md.initial_path(ckpt_dir) if centre == "start" else None
        if saved is not None:  # the runs' start (SummaryCollector's initial weights): used as the centre
            checked.append((f"the initial weights of run {name!r}", saved, md.initial_digest))
        for what, path, recorded in checked:
            digest = verify_checkpoint_file(path, what=what, digest=recorded, recorded_in=where)
            if digest is not None:
                found[path] = digest.sha256
    run_paths = check_runs(paths, _CALLER)
    check_runs_view(run_paths, centre, directions, "random", _CALLER)
    got = callback_fn()
    if not (isinstance(got, (tuple, list)) and len(got) in (4, 5)):
        raise ValueError(f"callback_fn of {_CALLER} must return (model, network, dataset, metrics[, task]).")
    model, network, dataset, metrics = got[:4]
    task = got[4] if len(got) == 5 else None
    first = next(iter(metadata.values()))
    problem = prepare_problem(network, dataset, loss_fn=None if task is not None else getattr(model, "loss_fn", None),
                              task=task, metrics=metrics, num_samples=num_samples or first.num_samples,
                              eval_mode=eval_mode, plan=plan, ignore=None, include=None, caller=_CALLER,
                              where=" (callback_fn)")
    start = _start(initial, metadata, run_paths, network) if centre == "start" else None
    geo = Geometry(kind=directions, size=size, normalization=normalization, seed=seed, runs=run_paths,
                   centre_on=centre, run_start=start, pca_method=pca_method)
    numbers = [n for name in run_paths for n in sorted(metadata[name].files)]  # each path's steps or epochs
    job = LandscapeJob(geo, tag=f"{directions}_{'+'.join(run_paths)}", unit=first.unit, intervals=numbers,
                       step_per_epoch=first.step_per_epoch)
    out_dir = os.fspath(output)
    with executor(device_ids, distributed, _CALLER) as ex, contextlib.ExitStack() as held:
        opened: list[Store] = []
        prints: dict[str, dict[str, Any]] = {}

        def open_store() -> None:  # rank 0 only
            os.makedirs(out_dir, exist_ok=True)
            store = Store(os.path.join(out_dir, "landscapes.h5"))
            held.enter_context(store.lock())
            opened.append(store)
            fp = Fingerprints(problem.network, problem.task, problem.samples, problem.metrics, eval_mode, known=found,
                              bn_samples=problem.bn_samples)
            prints[job.tag or ""] = fp.of(geo, intervals=None, unit=job.unit, step_per_epoch=job.step_per_epoch)
            if restart:
                store.forget([job.tag or ""])
            store.check(job.tag or "", prints[job.tag or ""])

        ex.on_root(open_store)
        store = opened[0] if opened else None
        (result,) = run_jobs(problem, [job], ex, store=store, fingerprints=prints)
        if store is not None:
            store.flush()
    if ex.root:
        with SummaryRecord(out_dir) as rec:
            rec.add_value("landscape", job.tag or "landscape", result.to_proto())
            rec.record(0)
    return result


def _start(initial: Mapping[str, str | None], metadata: Mapping[str, Any], run_paths: Mapping[str, list],
           network: Any) -> RunStart:
    """The runs' start (:func:`landscape.geometry.run_start`): their initial weights, loaded into
    ``network`` to be compared bit for bit."""
    first = next(iter(run_paths))
    md = metadata[first]

    def load(path: str) -> dict[str, Any]:
        return load_checkpoint(path, what=f"the initial weights {path!r}", network=network)

    return run_start(initial, load, first_saved=(run_paths[first][0], f"{md.unit} {min(md.files)}"))
