"""Train, collect, generate, look: the pipeline behind ``landscape demo`` and ``landscape run``.

A configuration (a TOML file, or the built-in demo) is parsed once into typed
dataclasses; the library functions below take them explicitly. Each run trains a
built-in model on scikit-learn's digits with ``Model.train`` and a ``SummaryCollector``
(collect_landscape), then ``SummaryLandscape`` generates the PCA and Random
landscapes, then ``viz`` draws them.

With ``[curvature] eigen_ratio = true`` each run also gets the Hessian's eigen-ratio map
(``|lambda_min/lambda_max|`` at every point, Li et al. section 6) on a Random landscape
around the last checkpoint, with the same directions settings on its own (usually
coarser) grid: ``SummaryLandscape`` again, into ``{run}/eigen_ratio/`` (resumable like
every landscape), scored with :func:`landscape.curvature.nonconvexity`.

With several runs, each run's Random landscape is also drawn beside the others on shared
contour levels (``[plot] compare``, Li et al.'s Fig. 5 layout), every run's plane scored by
its own 2D Hessian (:func:`landscape.curvature.surface_nonconvexity`: the fraction of the
plane where the surface has a negative curvature), the score printed, in the figure and in
``results.json``.

A run whose centre sits at chance level (loss near ln 10 for the ten digits) or whose loss
never fell is flagged: in the results, on the command's report and in its plots' titles.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

import viz
from collector.collect import SummaryCollector
from collector.common import Interval, InvalidParameterError, Options, Predicate, check_param
from collector.train import Callback, LearningRateScheduler, Model
from collector.trajectory import LANDSCAPE_SIZES, validate_collect_landscape
from landscape.cli._figures import plot_compare, plot_run, result_landscape
from landscape.cli._scores import centre_nonconvexity
from landscape.cli._training import effective_config, flatten_section, learning_rate_at, run_overrides
from landscape.curvature import EIGEN_RATIO, EigenRatio, nonconvexity, surface_nonconvexity
from landscape.examples import IMAGE_KINDS, build_model, digits_loader, digits_tensors
from landscape.generate import SummaryLandscape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["PipelineConfig", "RunSpec", "load_config", "config_from_dict", "validate_config", "run_pipeline",
           "DEMO_CONFIG"]

logger = logging.getLogger(__name__)

_TOP_KEYS = {"name", "seed", "train", "collect", "generate", "curvature", "plot", "runs"}
_SECTION_KEYS = {
    "train": {"epochs", "batch_size", "optimizer", "learning_rate", "momentum", "weight_decay", "lr_milestones",
              "lr_gamma", "warmup_epochs"},
    "collect": {"collect_freq", "landscape_size", "unit", "num_samples", "intervals", "create_train", "create_result"},
    "generate": {"normalization", "ignore", "seed", "eval_mode", "workers"},
    "curvature": {"eigen_ratio", "size", "tol", "dtype", "quantile", "threshold"},
    "plot": {"kinds", "log_scale", "compare", "compare_levels", "compare_log"},
}


@dataclass
class RunSpec:
    """One model to train: a name (its summary folder), the built-in model's options and the
    ``PipelineConfig`` fields its ``[runs.train]``/``[runs.collect]`` tables set for it alone."""

    name: str
    model: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class PipelineConfig:
    """Everything a pipeline run needs, parsed and validated before any work starts."""

    name: str = "digits_mlp"
    seed: int = 0
    epochs: int = 10
    batch_size: int = 64
    optimizer: str = "momentum"
    learning_rate: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    lr_milestones: list[int] = field(default_factory=list)
    lr_gamma: float = 0.1
    warmup_epochs: int = 0
    collect_freq: int = 10
    landscape_size: int = 40
    unit: str = "epoch"
    num_samples: int = 512
    intervals: list[list[int]] = field(default_factory=lambda: [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    create_train: bool = True
    create_result: bool = True
    normalization: str = "layer"
    ignore: str | None = None
    generate_seed: int = 0
    eval_mode: bool = True
    workers: int = 1
    eigen_ratio: bool = False
    curvature_size: int = 15
    curvature_tol: float = 1e-3
    curvature_dtype: str = "float32"
    curvature_quantile: float = 0.1
    curvature_threshold: float = 0.1
    kinds: list[str] = field(default_factory=lambda: ["filled", "surface"])
    log_scale: bool = False
    compare: list[str] = field(default_factory=lambda: ["filled", "surface"])
    compare_levels: int = 20
    compare_log: bool | str = "auto"
    runs: list[RunSpec] = field(default_factory=lambda: [RunSpec("mlp", {"kind": "mlp", "hidden": 128})])


DEMO_CONFIG = PipelineConfig()


def load_config(path: str | os.PathLike) -> PipelineConfig:
    """Read a TOML configuration (see ``configs/``) into a :class:`PipelineConfig`."""
    with open(path, "rb") as fh:
        try:
            data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidParameterError(f"{os.fspath(path)}: not valid TOML: {exc}") from None
    return config_from_dict(data, source=os.fspath(path))


def config_from_dict(data: dict[str, Any], *, source: str = "the configuration") -> PipelineConfig:
    """Validate a configuration dict; unknown keys are refused, naming the key."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise InvalidParameterError(f"{source}: unknown key(s) {sorted(unknown)}; accepted: {sorted(_TOP_KEYS)}")
    flat: dict[str, Any] = {k: data[k] for k in ("name", "seed") if k in data}
    for section, keys in _SECTION_KEYS.items():
        flat.update(flatten_section(section, data.get(section, {}), keys, f"{source}: [{section}]"))
    if "ignore" in flat and flat["ignore"] in ("", "none"):
        flat["ignore"] = None
    if "runs" in data:
        check_param("runs", data["runs"], [list], caller=source)
        runs = []
        for i, run in enumerate(data["runs"]):
            check_param(f"runs[{i}]", run, [dict], caller=source)
            check_param(f"runs[{i}].name", run.get("name"), ["nonempty_str"], caller=source)
            check_param(f"runs[{i}].model", run.get("model", {"kind": "mlp"}), [dict], caller=source)
            runs.append(RunSpec(run["name"], dict(run.get("model", {"kind": "mlp"})),
                                run_overrides(run, i, _SECTION_KEYS["train"], source)))
        flat["runs"] = runs
    cfg = PipelineConfig(**flat)
    validate_config(cfg, source)
    return cfg


def validate_config(cfg: PipelineConfig, source: str) -> None:
    """Check every value of ``cfg`` (``source`` names the file or option in messages), and of
    each run's own training settings (``[runs.train]``, ``[runs.collect]``) in their place."""
    check_param("name", cfg.name, ["nonempty_str"], caller=source)
    # torch.manual_seed's range: a seed beyond it would fail only once the output folder exists
    check_param("seed", cfg.seed, [Interval(int, -2 ** 63, 2 ** 64 - 1)], caller=source)
    check_param("train.optimizer", cfg.optimizer, [Options(("sgd", "momentum", "adam"))], caller=source)
    for key in ("epochs", "batch_size", "collect_freq", "workers"):
        value = getattr(cfg, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParameterError(f"{source}: {key!r} must be an int >= 1; got {value!r}")
    for key in ("learning_rate", "momentum", "weight_decay"):
        value = getattr(cfg, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InvalidParameterError(f"{source}: {key!r} must be a number >= 0; got {value!r}")
    check_param("train.lr_milestones", cfg.lr_milestones,
                [Predicate(lambda m: isinstance(m, list) and all(isinstance(e, int) and not isinstance(e, bool)
                                                                 for e in m)
                           and all(1 <= a < b for a, b in zip(m, m[1:] + [cfg.epochs])),
                           f"a list of strictly increasing epochs in 1..{cfg.epochs - 1}")], caller=source)
    check_param("train.lr_gamma", cfg.lr_gamma, [Interval(float, 0, 1, closed="right")], caller=source)
    # the warm-up ends before the first decay: a decay during it would cut a rate still rising
    check_param("train.warmup_epochs", cfg.warmup_epochs,
                [Interval(int, 0, min([cfg.epochs - 1, *cfg.lr_milestones]))], caller=source)
    check_param("generate.normalization", cfg.normalization, [Options(("layer", "filter", "none"))], caller=source)
    check_param("generate.ignore", cfg.ignore, [Options(("biasbn",)), None], caller=source)
    check_param("curvature.eigen_ratio", cfg.eigen_ratio, ["boolean"], caller=source)
    check_param("curvature.size", cfg.curvature_size, [Interval(int, *LANDSCAPE_SIZES)], caller=source)
    check_param("curvature.tol", cfg.curvature_tol, [Interval(float, 0, 1, closed="neither")], caller=source)
    check_param("curvature.dtype", cfg.curvature_dtype, [Options(("float32", "float64"))], caller=source)
    check_param("curvature.quantile", cfg.curvature_quantile, [Interval(float, 0, 1, closed="right")], caller=source)
    check_param("curvature.threshold", cfg.curvature_threshold, [Interval(float, 0, None)], caller=source)
    check_param("plot.kinds", cfg.kinds, [list], caller=source)
    for kind in cfg.kinds:
        check_param("plot.kinds[]", kind, [Options(("contour", "filled", "surface", "heatmap"))], caller=source)
    check_param("plot.compare", cfg.compare, [list], caller=source)
    for kind in cfg.compare:
        check_param("plot.compare[]", kind, [Options(("contour", "filled", "surface"))], caller=source)
    check_param("plot.compare_levels", cfg.compare_levels, [Interval(int, 2, 200)], caller=source)
    check_param("plot.compare_log", cfg.compare_log, [Options(("auto",)), "boolean"], caller=source)
    validate_collect_landscape(_collect_landscape(cfg), source)
    if cfg.unit == "epoch" and max(max(i) for i in cfg.intervals) > cfg.epochs:
        raise InvalidParameterError(
            f"{source}: interval epoch {max(max(i) for i in cfg.intervals)} is beyond train.epochs={cfg.epochs}")
    names = [r.name for r in cfg.runs]
    if len(set(names)) != len(names) or not names:
        raise InvalidParameterError(f"{source}: run names must be unique and at least one run given; got {names}")
    for run in cfg.runs:
        kwargs = {k: v for k, v in run.model.items() if k != "kind"}
        try:
            build_model(run.model.get("kind", "mlp"), **kwargs)
        except TypeError as exc:
            raise InvalidParameterError(f"{source}: run {run.name!r}: bad model options {run.model}: {exc}") from None
        if run.overrides:  # the run's settings checked as a configuration of that one run
            own = dataclasses.replace(effective_config(cfg, run), runs=[RunSpec(run.name, run.model)])
            validate_config(own, f"{source}: run {run.name!r}")


def _collect_landscape(cfg: PipelineConfig) -> dict[str, Any]:
    return {
        "landscape_size": cfg.landscape_size,
        "unit": cfg.unit,
        "create_landscape": {"train": cfg.create_train, "result": cfg.create_result},
        "num_samples": cfg.num_samples,
        "intervals": cfg.intervals,
    }


def _optimizer(cfg: PipelineConfig, params, steps_per_epoch: int) -> torch.optim.Optimizer:
    lr = learning_rate_at(cfg, 0, steps_per_epoch)  # the first step's: a warm-up starts low
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=cfg.weight_decay)
    momentum = cfg.momentum if cfg.optimizer == "momentum" else 0.0
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=cfg.weight_decay)


def _callbacks(cfg: PipelineConfig, collector: SummaryCollector, steps_per_epoch: int) -> list[Callback]:
    """The collector, and the learning rate's schedule when ``lr_milestones`` or ``warmup_epochs``
    asks for one (:func:`landscape.cli._training.learning_rate_at`)."""
    if not cfg.lr_milestones and not cfg.warmup_epochs:
        return [collector]
    # called after each step with the steps done so far: the next step's rate
    return [collector, LearningRateScheduler(lambda _lr, step: learning_rate_at(cfg, step, steps_per_epoch))]


def _make_callback_fn(model_spec: dict[str, Any], image: bool, metrics: dict[str, Any] | None = None):
    """The post-training ``callback_fn``: a fresh model, the loss, a fixed-order loader."""

    def callback_fn() -> tuple[Model, torch.nn.Module, Iterable[Any], dict[str, Any] | None]:
        network = build_model(model_spec.get("kind", "mlp"), **{k: v for k, v in model_spec.items() if k != "kind"})
        loss_fn = torch.nn.CrossEntropyLoss()
        data = digits_loader(256, image=image, shuffle=False, drop_last=False)
        return Model(network, loss_fn), network, data, metrics

    return callback_fn


#: The loss of a uniform guess over the ten digits: a centre at this level learned nothing.
CHANCE_LOSS = math.log(10)


def _mean_loss(network: torch.nn.Module, image: bool, num_samples: int) -> float:
    """The eval-mode loss over the first ``num_samples`` digits (the landscapes' samples)."""
    x, y = digits_tensors(image)
    was = network.training
    network.eval()
    with torch.no_grad():
        loss = float(torch.nn.functional.cross_entropy(network(x[:num_samples]), y[:num_samples]))
    network.train(was)
    return loss


def training_note(initial: float, final: float) -> str | None:
    """A warning when the trained network learned nothing: its loss is at chance level
    (within 5 % of ln 10) or fell by less than 10 % from the untrained network's."""
    if not math.isfinite(final):
        return f"training diverged (loss {final})"
    if final >= 0.95 * CHANCE_LOSS:
        return f"centre at chance level: loss {final:.4g} ≈ ln 10 = {CHANCE_LOSS:.4g}"
    if final >= 0.9 * initial:
        return f"training loss never fell: {initial:.4g} before, {final:.4g} after"
    return None


def run_pipeline(cfg: PipelineConfig, out_dir: str | os.PathLike, *, progress: bool = True) -> dict[str, Any]:
    """Train every run of ``cfg``, generate its landscapes, plot them; return what was made.

    With one run the summary directory is ``out_dir`` itself; with several, each run is
    a sub-folder named after it (so ``out_dir`` is a MindInsight summary base directory).
    """
    out = Path(out_dir)
    results: dict[str, Any] = {"out": str(out), "seed": cfg.seed, "runs": {}, "figures": []}
    t_start = time.perf_counter()
    all_landscapes = {}
    curvature: dict[str, Any] = {}
    for run in cfg.runs:
        summary_dir = out if len(cfg.runs) == 1 else out / run.name
        own = effective_config(cfg, run)  # the run's own [runs.train] and [runs.collect], if any
        torch.manual_seed(own.seed)
        kwargs = {k: v for k, v in run.model.items() if k != "kind"}
        kind = run.model.get("kind", "mlp")
        network = build_model(kind, **kwargs)
        image = kind in IMAGE_KINDS
        loss_fn = torch.nn.CrossEntropyLoss()
        initial = _mean_loss(network, image, cfg.num_samples)
        loader = digits_loader(own.batch_size, image=image, seed=own.seed)
        model = Model(network, loss_fn, _optimizer(own, network.parameters(), len(loader)))
        collector = SummaryCollector(
            str(summary_dir), collect_freq=own.collect_freq,
            collect_specified_data={"collect_landscape": _collect_landscape(own)},
        )
        t0 = time.perf_counter()
        model.train(own.epochs, loader, callbacks=_callbacks(own, collector, len(loader)))
        t_train = time.perf_counter() - t0
        t0 = time.perf_counter()
        landscapes = SummaryLandscape(str(summary_dir)).gen_landscapes_with_multi_process(
            _make_callback_fn(run.model, image),
            device_ids=list(range(cfg.workers)) if cfg.workers > 1 else None,
            normalization=cfg.normalization, ignore=cfg.ignore, seed=cfg.generate_seed, eval_mode=cfg.eval_mode,
        )
        t_gen = time.perf_counter() - t0
        final = _mean_loss(network, image, cfg.num_samples)
        accuracy = _accuracy(network, image, cfg.num_samples)
        note = training_note(initial, final)
        if note:
            logger.warning("run %s: %s", run.name, note)
            for ls in landscapes:
                ls.metadata["note"] = note
        all_landscapes[run.name] = landscapes
        figures = plot_run(landscapes, summary_dir / "plots", cfg.kinds, cfg.log_scale)
        info: dict[str, Any] = {
            "summary_dir": str(summary_dir),
            "landscapes": [ls.tag for ls in landscapes],
            "train_seconds": round(t_train, 2),
            "generate_seconds": round(t_gen, 2),
            "initial_loss": round(initial, 6), "final_loss": round(final, 6), "accuracy": round(accuracy, 4),
            "warning": note,
            "figures": figures,
            # the settings this run trained with (its own where [runs.train] gave them)
            "train": {key: getattr(own, key) for key in sorted(_SECTION_KEYS["train"])}, "intervals": own.intervals,
        }
        if result_landscape(landscapes).dims == 2:
            info["surface_nonconvexity"] = surface_nonconvexity(result_landscape(landscapes))
            info["centre_nonconvexity"] = centre_nonconvexity(result_landscape(landscapes))
        if cfg.eigen_ratio:
            t0 = time.perf_counter()
            curv = SummaryLandscape(str(summary_dir)).gen_landscapes_with_multi_process(
                _make_callback_fn(run.model, image, {EIGEN_RATIO: EigenRatio(cfg.curvature_tol,
                                                                             dtype=cfg.curvature_dtype)}),
                collect_landscape={"landscape_size": cfg.curvature_size,
                                   "create_landscape": {"train": False, "result": True}},
                output=str(summary_dir / EIGEN_RATIO),
                device_ids=list(range(cfg.workers)) if cfg.workers > 1 else None,
                normalization=cfg.normalization, ignore=cfg.ignore, seed=cfg.generate_seed, eval_mode=cfg.eval_mode,
            )[-1]
            if note:
                curv.metadata["note"] = note
            score = nonconvexity(curv, quantile=cfg.curvature_quantile, threshold=cfg.curvature_threshold)
            curvature[run.name] = curv
            fig = cast(Figure, viz.plot(curv, kind="eigen-ratio").figure)
            path = summary_dir / "plots" / "eigen_ratio.png"
            fig.savefig(path, dpi=120, bbox_inches="tight")
            plt.close(fig)
            figures.append(str(path))
            info.update(nonconvexity=score, eigen_ratio_seconds=round(time.perf_counter() - t0, 2))
        results["figures"].extend(figures)
        results["runs"][run.name] = info
    if len(cfg.runs) > 1:
        results["figures"].extend(plot_compare(all_landscapes, results["runs"], out, cfg.compare,
                                               cfg.compare_levels, cfg.compare_log))
    if len(curvature) > 1:
        fig = viz.compare_eigen_ratio(curvature, quantile=cfg.curvature_quantile, threshold=cfg.curvature_threshold,
                                      title="Loss and Hessian eigen-ratio |λmin/λmax|, one colour scale per row")
        path = out / "compare_eigen_ratio.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        results["figures"].append(str(path))
    results["seconds"] = round(time.perf_counter() - t_start, 2)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def _accuracy(network: torch.nn.Module, image: bool, num_samples: int) -> float:
    x, y = digits_tensors(image)
    was = network.training
    network.eval()
    with torch.no_grad():
        acc = float((network(x[:num_samples]).argmax(1) == y[:num_samples]).float().mean())
    network.train(was)
    return acc


def describe(cfg: PipelineConfig) -> dict[str, Any]:
    """The configuration as a plain dict (for logs and the command's output)."""
    return dataclasses.asdict(cfg)
