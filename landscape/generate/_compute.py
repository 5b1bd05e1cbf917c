"""``compute_landscape``: the notebook entry point (validation, then the private core)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from torch import nn

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param, unwrap_module
from collector.trajectory import LANDSCAPE_DEFAULTS, LANDSCAPE_SIZES, check_checkpoints
from landscape.execution import check_placed_devices, executor
from landscape.generate._build import build_landscape
from landscape.generate._jobs import LandscapeJob
from landscape.generate._options import (
    check_bn_statistics,
    check_grid,
    check_points,
    check_runs,
    check_runs_view,
    check_sharded,
    resolve_view,
)
from landscape.generate._prepare import check_options, prepare_problem
from landscape.geometry import GRID_SIZES, PCA_METHODS, Geometry, Kind
from landscape.result import Landscape

__all__ = ["compute_landscape"]
_CALLER = "compute_landscape"

Normalization = Literal["layer", "filter", "dfilter", "dlayer", "weight", "none"]


def compute_landscape(
    network: nn.Module,
    loss_fn: Any = None,
    data: Any = None,
    *,
    task: Any = None,
    directions: Any = None,
    checkpoints: Sequence[Any] | Mapping[str, Sequence[Any]] | None = None,
    centre: str | None = None,
    between: Sequence[Any] | None = None,
    dims: int | None = None,
    size: int | None = None,
    x: tuple[float, float, int] | None = None,
    y: tuple[float, float, int] | None = None,
    num_samples: int | Literal["auto"] | None = "auto",
    normalization: Normalization | None = None,
    biasbn: Literal["normalize", "li"] = "normalize",
    ignore: str | Sequence[str] | None = None,
    include: str | Sequence[str] | None = None,
    seed: int = 0,
    eval_mode: bool = True,
    device_ids: list[int] | None = None,
    metrics: Mapping[str, Any] | None = None,
    pca_method: Literal["mindspore", "li", "uncentred"] | None = None,
    tag: str | None = None,
    distributed: bool | None = None,
    plan: Literal["auto", "tune"] | Mapping[str, Any] = "auto",
    bn_statistics: Literal["clamped", "affine", "a", "recompute"] = "recompute",
    memory: Literal["auto", "fast", "lean"] = "auto",
    bn_data: Any = None,
) -> Landscape:
    """Compute a loss landscape: a plane or a line around a network's weights, through models,
    or along a training trajectory.

    Read more in the user guide: [Generating](../generating.md).

    Parameters
    ----------
    network : nn.Module
        The architecture (never modified: the engine works on a copy of its modules over its
        own tensors, which are only read).
    loss_fn : callable, optional
        ``loss_fn(outputs, labels)`` for ``(inputs, labels)`` batches, one number per batch
        ('mean' or 'sum' reduction; a per-sample 'none' is refused, as are outputs and
        targets an element-wise loss would broadcast). Give this or ``task``.
    data : DataLoader, iterable of batches, map-style Dataset or (inputs, labels) tensors
        The first ``num_samples`` samples are taken once and used for every point.
        Batches may be any structure the task understands (dicts of token ids, tuples
        of several inputs); every tensor in them is moved to the device.
    task : callable, optional
        ``task(model, batch) -> loss`` (a 0-d tensor, the mean over the batch's samples)
        instead of ``loss_fn``: ``landscape.tasks.HuggingFace()`` for a Hugging Face model
        given its labels, ``Supervised(loss_fn, inputs=..., targets=..., output=...)`` for
        other batch layouts, or your own function.
    directions : {"random", "pca", "hessian", "target"}, ("target", "random" | "pca"), (dict, dict) or dict, optional
        Seeded normal directions (the default), PCA of ``checkpoints`` (MindSpore's by
        default), the top two eigenvectors of the loss's Hessian at the centre (Lanczos,
        seeded by ``seed``; unit vectors with ``normalization="none"``, else rescaled like
        random directions; the eigenvalues go to the metadata as ``hessian_eigenvalues``;
        ``dims=1`` keeps the top one), the target direction ``B - A`` of ``between=(A, B)``
        with a random second axis or the trajectory's top direction away from it (``checkpoints``),
        two state-dict-shaped direction dicts, or one for a line.
    checkpoints : list of state dicts or paths, or dict of run name to such lists, default=None
        The trajectory (the last is the centre); without it the centre is ``network``.
        A dict draws several runs on one plane: with ``directions="pca"`` the plane is the
        PCA of all their checkpoints together around ``centre`` (a shared plane; see
        ``pca_method``), with a random, given, Hessian, target or three-model plane they are
        projected on it. Each run is a path in ``Landscape.paths``;
        ``metadata["path_distance"]`` gives each checkpoint's distance from the plane
        relative to its distance from the centre (a path far off the plane misleads), and
        ``metadata["movement_in_plane"]`` the share of all their squared distances from the
        centre the drawn plane holds.
        Every one is checked before any work: a file against the SHA-256 that the
        ``train_metadata.json`` of its folder records (SummaryCollector's checkpoints), or
        else the CRC-32 of each record of its archive; then loaded
        (``weights_only=True``) and its keys and shapes compared with ``network``'s. Any
        failure raises ``collector.CheckpointError`` naming ``checkpoints[i]`` and the file.
    centre : {"start", "mean"} or str, optional
        Where a plane of several runs (``checkpoints`` a dict, without ``between``) is
        centred: the first run's first checkpoint (the runs' start when they share it), the
        mean of all their checkpoints, or a run's name (its last checkpoint); None: the
        first run's end.
    between : (A, B) or (A, B, C), optional
        Models (state dicts, checkpoint paths or nn.Modules of ``network``'s architecture),
        checked before any work as ``checkpoints`` are.
        Two: the line ``(1 - alpha) A + alpha B`` (an interpolation, Goodfellow et al.),
        ``x`` being ``alpha`` (default ``(-0.5, 1.5, size)``); with ``directions="target"``
        the plane of ``B - A`` (x, A at 0 and B at 1) and a second axis (y). Three: the
        plane through the three models (Garipov et al.): origin A, orthonormal axes from
        ``B - A`` and ``C - A``, coordinates in parameter-space distance. The models are
        the result's ``markers`` ("A", "B", "C"), evaluated at exactly their coordinates;
        on an interpolation their parameters are A's and B's bit for bit. Buffers
        (batch-norm statistics) are A's.
    dims : int, optional
        1 for a line along the first direction (``directions="random"`` or one given
        dict), 2 for a plane; by default what the view is (see ``between``). 3 to 6: an
        n-D grid along as many random, Hessian or PCA directions (``directions="random"``,
        ``"hessian"`` or ``"pca"``: the top principal directions of ``checkpoints``, at least
        ``dims + 1`` of them, their path's coordinates in ``metadata["path_coordinates"]``,
        not evaluated), ``z`` of shape ``(..., size, len(y), len(x))`` with ``size`` points
        on ``[-1, 1]`` along each later axis (``Landscape.extra_axes``). It is evaluated
        as one plane after another, each around the centre moved along the later
        directions; its directions are held: ``dims + 2`` model sizes of float32 (the
        directions, the centre and one moved copy) beside the evaluation's own, and its
        ``N = len(x) * len(y) * size**(dims - 2)`` points ``(8 * dims + 8 * s) * N`` bytes
        (``s`` surfaces: the loss and each metric; the coordinates twice while built). Any
        landscape holds at most 2**24 (16,777,216) points, refused before any work otherwise
        (``landscape.generate.MAX_POINTS``). Its topology (``Landscape.topology``)
        summarises what no picture shows.
    size : int, optional
        Points per axis not given by ``x`` / ``y`` (MindSpore's ``landscape_size``, 3 to 256).
        By default 40 for a line or a plane, and for an n-D grid 21, 11, 7 and 5 points per
        axis for 3, 4, 5 and 6 directions (about 10,000 points: 9,261 for 3).
    x, y : (min, max, num), optional
        The axes, ``np.linspace(min, max, num)``: any range, not centred, not square.
        By default ``linspace(-1, 1, size)`` (random and given directions), the path's
        extent with 0.2 margins (PCA), ``(-0.5, 1.5, size)`` along ``B - A``, the three
        models with 0.2 margins (planes through models). ``y`` is None for a line.
    num_samples : int, "auto" or None, default="auto"
        Samples the loss is averaged over: the first ``num_samples``; "auto" takes the first
        2048 (MindSpore's default), or the whole dataset when it holds fewer (the log says
        so, and ``metadata["num_samples"]`` records the number used); None takes the whole
        dataset. A number larger than the dataset is refused. Samples that
        do not fit the device's share of memory are streamed from host memory, one
        batch at a time, with the same result.
    normalization : {"layer", "filter", "dfilter", "dlayer", "weight", "none"}, optional
        How random, PCA and given directions are scaled to the centre's weights (see
        the README): "layer" (MindSpore's) by default for random and PCA directions,
        "none" for given ones and for the PCA plane of several runs (a per-tensor scaling
        turns a plane: the plane drawn would not be the PCA's). Given directions are normalized as asked. Axes between
        models are used as they are (only None or "none").
    biasbn : {"normalize", "li"}, default="normalize"
        Directions of tensors with at most one dimension (biases, norm layers):
        normalized like the others, or, as Li et al. do, the tensor itself.
    ignore : str or list of str, optional
        Parameters that do not move: fnmatch globs on parameter names or their modules'
        names (``"fc1"``, ``"*.bias"``), and the keyword ``"biasbn"`` for every tensor
        with at most one dimension (Li et al.).
    include : str or list of str, optional
        Only the parameters matching one of these globs move.
    seed : int, default=0
        Seed of the random directions.
    eval_mode : bool, default=True
        Evaluate in eval mode (batch-norm running statistics, no dropout).
    device_ids : list of int, default=None
        CUDA devices, or that many CPU worker processes without CUDA.
    metrics : dict of str to metric, list of names, default=None
        Extra surfaces: callables ``m(outputs, labels)`` or objects with clear/update/eval
        (with ``loss_fn`` or a ``Supervised`` task), ``m(model, batch)`` with
        ``m.metric_inputs = "batch"`` (any task), or point metrics such as
        ``landscape.curvature.EigenRatio()`` (the Hessian's ``|lambda_min/lambda_max|``
        at every point); by name, or a list of names such as ``["accuracy"]``.
    pca_method : {"mindspore", "li", "uncentred"}, optional
        The PCA of ``directions="pca"`` (docs/generating.md, "PCA methods"): "mindspore",
        MindSpore's (each checkpoint's difference from the centre centred by its own mean
        over the parameters before the SVD: MindSpore's landscapes, whose axes differ from
        ordinary PCA's); "li", ordinary PCA (centred across the checkpoints, Li et al.'s);
        "uncentred", the SVD of the differences from the centre themselves: the plane
        through the centre that holds the largest share of the checkpoints' movement. None:
        "mindspore" for one trajectory, "uncentred" for several runs (``checkpoints`` a
        dict), whose default ``normalization`` is then "none", so that the plane drawn is
        that plane. ``metadata["movement_in_plane"]`` and ``["path_distance"]`` say what the
        drawn plane holds; ``["explained_variance_ratio"]`` is the PCA's, before
        normalization.
    tag : str, default=None
    distributed : bool or None, default=None
        Share the points between the processes of a ``torch.distributed`` group (one
        device each): None uses an initialised group or torchrun's environment when there
        is one, True requires one, False computes everything here. Every rank returns the
        whole landscape. A ``network`` sharded over the group with FSDP2
        (``torch.distributed.fsdp.fully_shard``) is split the other way: every rank
        evaluates every point on its share of the samples, each unit's tensors moved as
        FSDP gathers them, the shards left at the centre (random directions around the
        network's own state, the loss only, eval mode).
    plan : {"auto", "tune"} or dict, default="auto"
        How points are evaluated: points per call, how a group runs (``"sequential"``,
        ``"folded"``, ``"vmap"``), samples per batch (for ``data`` given as one block of
        tensors; a list of batches runs as given) and the layout of convolution kernels
        (``"memory_format"``: ``"channels_last"`` by default for networks with ``Conv2d``
        at one point per call, ``"contiguous"`` otherwise). "auto" sizes it from the
        model, the data's shapes and the device's kind, never by timing, so the same call
        gives the same values bit for bit; "tune" times the candidates on the data and
        keeps the fastest (two tuned runs may choose other plans, whose values differ by
        float rounding); a dict ``{"points_per_call": 4, "batching": "folded",
        "eval_batch": 256}`` imposes one (its batching is checked on a probe first). A
        batched way is used only where it gives the one-point values. The plan is
        recorded in ``metadata``.
    bn_statistics : {"recompute", "clamped", "affine", "a"}, default="recompute"
        On views through models (``between``) of a network with batch norm, how its running
        statistics follow the point: estimated again at every point from the samples in
        train mode, then the loss in eval mode ("recompute", Garipov et al.'s ``bn_update``,
        as mode-connectivity work does: one more pass over the samples per point, one point
        per call); carried with the parameters, variances clamped at zero where they turn
        negative past the models ("clamped": the clamped channels are counted per point in
        the Landscape's ``clamped``, its summary, the plots and the report); carried as
        they are ("affine": the loss NaN where a variance turns negative); kept at model A's
        ("a"). Other views (PCA, random, given, Hessian) keep the centre's statistics, as
        MindSpore does.
    bn_data : optional
        With ``bn_statistics="recompute"``: the samples the statistics are estimated on at
        every point (the same forms and ``num_samples`` as ``data``), while the loss is
        taken on ``data``: a test line with the training samples' statistics, as REPAIR
        and Garipov et al. evaluate it. None: ``data``'s. Recorded as
        ``metadata["bn_num_samples"]`` and ``["bn_samples_digest"]``.
    memory : {"auto", "fast", "lean"}, default="auto"
        How random directions are kept while points are evaluated. "fast": held, two model
        sizes (in each tensor's dtype: a bfloat16 model's directions rounded to bfloat16);
        "lean": nothing held, each tensor of a direction drawn again from the seed whenever a
        layer reads it (one point per call, slower by the draws); "auto": held when they take
        at most half of the device's free memory, else drawn. The values are the same bit for
        bit either way. Other directions (PCA, given, Hessian, between models) are data and
        always held. The network itself is never copied: each moved tensor of a point is
        computed when a layer reads it.

    Returns
    -------
    Landscape
        ``z`` of shape (len(y), len(x)), or (len(x),) for a line.

    Examples
    --------
    A random plane around a small network; its centre is the network's own loss:

    >>> import torch
    >>> from landscape import compute_landscape
    >>> g = torch.Generator().manual_seed(0)
    >>> net = torch.nn.Linear(4, 3)
    >>> x, y = torch.randn(32, 4, generator=g), torch.randint(0, 3, (32,), generator=g)
    >>> ls = compute_landscape(net, torch.nn.CrossEntropyLoss(), (x, y), size=5)
    >>> ls.z.shape
    (5, 5)
    >>> own = torch.nn.functional.cross_entropy(net(x), y).item()
    >>> bool(abs(ls.z[2, 2] - own) < 1e-6)
    True
    """
    check_param("network", network, [InstanceOf(nn.Module)], caller=_CALLER)
    check_placed_devices(unwrap_module(network), device_ids, _CALLER)
    if data is None:
        raise InvalidParameterError(f"The 'data' parameter of {_CALLER} is required: a DataLoader, an iterable of "
                                    "batches, a Dataset or an (inputs, labels) pair of tensors.")
    check_param("checkpoints", checkpoints, [None, InstanceOf(list, tuple, Mapping)], caller=_CALLER)
    if checkpoints is not None and len(checkpoints) == 0:
        raise InvalidParameterError(f"The 'checkpoints' parameter of {_CALLER} must not be empty.")
    runs = check_runs(checkpoints, _CALLER) if isinstance(checkpoints, Mapping) else None
    view = resolve_view(directions=directions, between=between, dims=dims, normalization=normalization,
                        checkpoints=checkpoints if runs is None else ([0, 1, 2] if directions == "pca" else None),
                        caller=_CALLER)
    if runs is not None:
        check_runs_view(runs, centre, view.kind, view.second, _CALLER)
    if view.dims > 2:
        check_grid(runs=runs, memory=memory, network=unwrap_module(network), dims=view.dims, caller=_CALLER)
    if centre is not None and (runs is None or between is not None):
        raise InvalidParameterError(f"The 'centre' parameter of {_CALLER} must be None unless checkpoints is a dict "
                                    "of runs (and between is None: a plane through models is centred on A).")
    check_param("size", size, [None, Interval(int, *LANDSCAPE_SIZES)], caller=_CALLER)
    if size is None:
        size = GRID_SIZES.get(view.dims, LANDSCAPE_DEFAULTS["landscape_size"])
    check_param("num_samples", num_samples, [Interval(int, 1, None), Options(("auto",)), None], caller=_CALLER,
                hint='"auto" takes at most 2048, None the whole dataset.')
    check_param("pca_method", pca_method, [None, Options(PCA_METHODS)], caller=_CALLER,
                hint="None: 'mindspore' for one trajectory, 'uncentred' for several runs.")
    if pca_method is None:
        pca_method = "uncentred" if runs is not None else "mindspore"
    if runs is not None and view.kind == "pca" and normalization is None:  # the PCA plane itself, not turned
        view = dataclasses.replace(view, normalization="none")
    check_param("tag", tag, [None, str], caller=_CALLER)
    check_bn_statistics(bn_statistics, _CALLER)
    _check_bn_data(bn_data, bn_statistics, between, unwrap_module(network))
    opts = check_options(normalization=view.normalization, ignore=ignore, include=include, biasbn=biasbn, seed=seed,
                         eval_mode=eval_mode, device_ids=device_ids, distributed=distributed, plan=plan, x=x, y=y,
                         caller=_CALLER, memory=memory)
    check_sharded(unwrap_module(network), kind=view.kind, centre_given=checkpoints is not None or between is not None,
                  metrics=metrics, eval_mode=eval_mode, plan=plan, distributed=distributed, caller=_CALLER)
    if view.dims == 1 and opts.y is not None:
        raise InvalidParameterError(f"The 'y' parameter of {_CALLER} must be None for a line (dims=1). Got {y!r} "
                                    "instead.")
    check_points(dims=view.dims, size=size, x=opts.x, y=opts.y, caller=_CALLER)
    _check_models(network, checkpoints, runs, between)
    problem = prepare_problem(network, data, loss_fn=loss_fn, task=task, metrics=metrics, num_samples=num_samples,
                              eval_mode=eval_mode, plan=plan, ignore=ignore, include=include, caller=_CALLER,
                              memory=memory, bn_data=bn_data)
    trajectory = list(checkpoints) if checkpoints is not None and runs is None else None
    if view.kind in ("random", "given") and trajectory is not None:
        trajectory = trajectory[-1:]
    geometry = Geometry(kind=cast(Kind, view.kind), size=size, normalization=view.normalization, ignore=opts.ignore,
                        seed=seed, trajectory=trajectory, given=view.given, pca_method=pca_method, dims=view.dims,
                        x=opts.x, y=opts.y, models=list(between) if between is not None else None,
                        second=view.second, biasbn=biasbn, include=opts.include, bn_statistics=bn_statistics,
                        runs=runs, centre_on=centre)
    with executor(device_ids, distributed, _CALLER, network=problem.network) as ex:
        return build_landscape(problem, LandscapeJob(geometry, tag=tag), ex)


def _check_models(network: nn.Module, checkpoints: Any, runs: Mapping[str, Sequence[Any]] | None,
                  between: Sequence[Any] | None) -> None:
    """Each checkpoint and model intact and fitting the network, before the data or any point."""
    if runs is not None:
        for name, items in runs.items():
            check_checkpoints(items, network, name=f"checkpoints[{name!r}]", caller=_CALLER)
    elif checkpoints is not None:
        check_checkpoints(checkpoints, network, name="checkpoints", caller=_CALLER)
    if between is not None:
        check_checkpoints([m.state_dict() if isinstance(m, nn.Module) else m for m in between], network,
                          name="between", caller=_CALLER)


def _check_bn_data(bn_data: Any, bn_statistics: str, between: Any, network: nn.Module) -> None:
    """``bn_data`` only where statistics are estimated again: a view through models of a network with batch norm."""
    if bn_data is None:
        return
    tracked = any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in network.modules())
    why = ("bn_statistics is 'recompute'" if bn_statistics != "recompute" else
           "between is given (a view through models)" if between is None else
           "the network has batch norm with running statistics" if not tracked else None)
    if why is not None:
        raise InvalidParameterError(
            f"The 'bn_data' parameter of {_CALLER} must be None unless {why}: only then are batch-norm statistics "
            f"estimated again at every point. Got {type(bn_data).__name__}. HINT: drop bn_data, or pass "
            "between=(A, B) with bn_statistics='recompute'.")
