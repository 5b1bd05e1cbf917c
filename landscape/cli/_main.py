"""The ``landscape`` command (also ``python -m landscape``): the parser and the dispatch.

Subcommands: demo, run, gen, plot, ls, export, lineage, curvature, connect, topology; each runs from
its own module (``_demo``, ``_gen``, ``_plot``, ``_export``, ``_ls``, ``_lineage``, ``_curvature``,
``_connect``, ``_topology``), imported only when it runs. Arguments are parsed once here into
explicit keyword arguments for the library; bad usage prints one line and exits with status 2, a failure while working
exits with status 1.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from collector.common import InvalidParameterError
from collector.trajectory import LANDSCAPE_SIZES
from landscape.cli._common import UsageError, non_negative, positive

__all__ = ["main", "build_parser"]

logger = logging.getLogger("landscape")


class _Parser(argparse.ArgumentParser):
    """One-line errors; a value starting with a minus and a digit is a value, not an option, so
    that ``--x -0.5:1.5:101`` works as printed (no option of ours looks like a negative number;
    Python 3.13's argparse reads these as values too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def error(self, message: str) -> None:  # type: ignore[override]  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_list(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints like 0,1; got {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one device id")
    return ids


def _size(text: str) -> int:
    """Points per side, in MindSpore's range (the one ``compute_landscape`` accepts too)."""
    lo, hi = LANDSCAPE_SIZES
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int in [{lo}, {hi}]; got {text!r}") from None
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"expected an int in [{lo}, {hi}] (points per side); got {value}")
    return value


def _axis(text: str) -> tuple[float, float, int]:
    """``MIN:MAX:NUM`` (Li et al.'s ``--x=-1:1:51``) as ``(min, max, num)``: finite MIN < MAX, NUM >= 2."""
    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        lo, hi, num = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX:NUM like -0.5:1.5:101; got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and num >= 2):
        raise argparse.ArgumentTypeError(f"expected MIN:MAX:NUM with finite MIN < MAX and NUM >= 2 points, like "
                                         f"-0.5:1.5:101; got {text!r}")
    return lo, hi, num


def _checkpoints(text: str) -> list[int | str]:
    """``1,10`` (step or epoch numbers) or checkpoint files, comma-separated."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if len(items) not in (2, 3):
        raise argparse.ArgumentTypeError(f"expected 2 or 3 comma-separated checkpoints like 1,10; got {text!r}")
    return [int(t) if t.lstrip("-").isdigit() else t for t in items]


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, read from its metadata only when asked
    (the one place the version is written is pyproject.toml)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        try:
            text = f"landscape (torch-landscape) {metadata.version('torch-landscape')}"
        except metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
            parser.exit(1, "landscape: error: the torch-landscape distribution is not installed, so it has no "
                           "version. HINT: pip install -e . in the source tree\n")
        print(text)  # on stdout, as argparse's own --version
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (argparse only: building it imports nothing heavy)."""
    parser = _Parser(prog="landscape", description="Loss landscapes for PyTorch: train, collect, generate, look.")
    parser.add_argument("--version", action=_Version, help="print the installed version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
                                help="what to do (landscape COMMAND --help for its options)")

    _add_run_commands(sub)
    _add_gen(sub)
    _add_compare(sub)
    _add_views(sub)
    _add_lineage(sub)
    _add_curvature(sub)
    _add_connect(sub)
    _add_topology(sub)
    return parser


def _threshold(text: str) -> float:
    """A persistence threshold: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 (a loss difference); got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0 (a loss difference); got {text!r}")
    return value


def _add_topology(sub: Any) -> None:
    """topology: minima, saddles, persistence and SMAD of every landscape."""
    p = sub.add_parser("topology", help="minima, saddles, persistence pairs and SMAD of every landscape of a run "
                                        "(lines, planes, n-D grids), one line each",
                       description="Summarise the shape of each landscape of PATH in numbers: its sublevel sets' "
                                   "minima and saddles above a persistence threshold, the persistence pairs, SMAD "
                                   "(Landscaper's saddle-minimum average distance) and, on a line, its barriers. "
                                   "No point is evaluated; non-finite losses are left out and counted.")
    p.add_argument("path", type=Path, metavar="RUN",
                   help="a summary directory, a summary (events) file, or an HDF5 file such as landscapes.h5")
    p.add_argument("--connectivity", choices=("axis", "full"), default="axis",
                   help="neighbours along the axes (default; Landscaper's graph) or all around (gudhi's, TTK's)")
    p.add_argument("--threshold", type=_threshold, default=0.0, metavar="T",
                   help="pairs of persistence at most T (a loss difference) are noise: not counted (default 0)")
    p.add_argument("--basin", type=_threshold, metavar="H",
                   help="also the centre's basin H above its minimum: its points and whether the grid cuts it")
    p.add_argument("--tag", help="only this landscape, e.g. 'hessian_3d_[10]'")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")


def _add_run_commands(sub: Any) -> None:
    """demo and run: the pipeline on built-in data or a TOML configuration."""
    p = sub.add_parser("demo", help="train the digits MLP, generate its landscapes, write PNGs")
    p.add_argument("--out", type=Path, help="summary directory to create (default: a fresh ./landscape_demo_<time>)")
    p.add_argument("--size", type=_size, help=f"grid points per side, {LANDSCAPE_SIZES[0]} to {LANDSCAPE_SIZES[1]} "
                                              "(default 40)")
    p = sub.add_parser("run", help="the demo pipeline from a TOML configuration (see configs/)")
    p.add_argument("config", type=Path, help="TOML file")
    p.add_argument("--out", type=Path, help="output directory (default: a fresh ./<name>_<time>)")
    p.add_argument("--seed", type=non_negative,
                   help="train with this seed instead of the configuration's top-level 'seed' (the weights' "
                        "initialisation and the batches' order; [generate] seed, the plane's directions, is kept)")


def _add_compare(sub: Any) -> None:
    """compare: several runs on one plane."""
    p = sub.add_parser("compare", help="several runs on one plane: their shared PCA plane (or a random one) with "
                                       "each run's path",
                       description="Draw several SummaryCollector runs (started from the same weights, say) on one "
                                   "plane: the PCA of all their checkpoints, centred on their start, their mean or one "
                                   "run's end; each run's path is projected on it and its distance from the plane "
                                   "reported. Resumable like gen.")
    p.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="SummaryCollector directories (at least two)")
    p.add_argument("--task", required=True, metavar="MODULE:FUNCTION",
                   help="as for gen: returns (model, network, dataset, metrics[, task]); every run's checkpoints load "
                        "into its network")
    p.add_argument("-o", "--output", type=Path, required=True, help="the folder the comparison goes to")
    p.add_argument("--directions", choices=("pca", "random"), default="pca",
                   help="pca: the shared plane of all the runs' checkpoints (default); random: a seeded random plane")
    p.add_argument("--centre", metavar="start|mean|RUN",
                   help="the plane's centre: the runs' start (their saved initial weights, written by "
                        "SummaryCollector before the first step; shared when equal, else the first run's; for runs "
                        "saved without them, the first run's first checkpoint), the mean of all checkpoints, or a "
                        "run's folder name (its last checkpoint); default: the first run's end")
    p.add_argument("--size", type=positive, help="grid points per side (3 to 256, default 40)")
    p.add_argument("--num-samples", type=positive, help="samples the loss averages over (default: the first run's)")
    p.add_argument("--normalization", choices=("layer", "filter", "dfilter", "dlayer", "weight", "none"),
                   metavar="NAME", help="direction normalization: %(choices)s (default: none for pca, the PCA "
                                        "plane itself; layer for random)")
    p.add_argument("--pca-method", choices=("uncentred", "li", "mindspore"), default="uncentred", metavar="METHOD",
                   help="the PCA: %(choices)s. uncentred: the plane through the centre that holds the most of the "
                        "runs' movement (default); li: ordinary PCA, centred across the checkpoints; mindspore: "
                        "MindSpore's")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of a random plane (default 0)")
    p.add_argument("--devices", type=_int_list, help="device ids, e.g. 0,1 (CPU: that many worker processes)")
    p.add_argument("--restart", action="store_true", help="start over instead of resuming what landscapes.h5 holds")
    p.add_argument("--plan", choices=("auto", "tune"), default="auto", help="as for gen")


def _add_gen(sub: Any) -> None:
    """gen: post-training generation with the user's callback_fn."""
    p = sub.add_parser("gen", help="post-training generation with your callback_fn",
                       description="Generate the landscapes of a SummaryCollector's run (MindSpore's PCA and Random "
                                   "landscapes, or one --view) from its checkpoints. Options are checked before any "
                                   "work; Ctrl-C keeps what was evaluated and the same command resumes.")
    p.add_argument("summary_dir", type=Path, metavar="SUMMARY_DIR",
                   help="the SummaryCollector's directory (holds ckpt_dir/ and its train_metadata.json)")
    p.add_argument("--task", required=True, metavar="MODULE:FUNCTION",
                   help="FUNCTION of MODULE (importable from the current directory) returning (model, network, "
                        "dataset, metrics) or (model, network, dataset, metrics, task): model.loss_fn(outputs, "
                        "labels) is the loss unless the fifth item, a task(model, batch) -> loss, is given "
                        "(landscape.tasks.HuggingFace() for dict batches holding labels, Supervised(loss_fn, "
                        "inputs=..., targets=...)); network is the architecture the checkpoints load into; "
                        "dataset the data; metrics None or extra surfaces by name")
    p.add_argument("--size", type=_size, metavar="N",
                   help=f"points per side, {LANDSCAPE_SIZES[0]} to {LANDSCAPE_SIZES[1]} (default: the "
                        "landscape_size recorded in train_metadata.json)")
    p.add_argument("--num-samples", type=positive, metavar="N",
                   help="samples the loss is averaged over (default: the num_samples recorded in "
                        "train_metadata.json)")
    p.add_argument("--devices", type=_int_list, metavar="IDS",
                   help="device ids, e.g. 0,1 (CPU: that many worker processes)")
    p.add_argument("--output", type=Path, metavar="DIR",
                   help="folder for the summary events and landscapes.h5 (default: SUMMARY_DIR; created if missing)")
    p.add_argument("--verify", action="store_true",
                   help="on a run this same command finished, check everything again (call the task, hash its "
                        "network and data) instead of trusting the stamp in landscapes.h5")
    p.add_argument("--normalization", choices=("layer", "filter", "dfilter", "dlayer", "weight", "none"),
                   metavar="NAME",
                   help="direction normalization: %(choices)s (default: layer for random and PCA directions)")
    p.add_argument("--biasbn", choices=("normalize", "li"), default="normalize",
                   help="li: a bias or norm-layer tensor's direction is the tensor itself (Li et al.)")
    p.add_argument("--ignore", action="append", metavar="GLOB",
                   help="parameters that do not move (fnmatch glob on names; 'biasbn': every tensor with at most "
                        "one dimension); repeatable")
    p.add_argument("--include", action="append", metavar="GLOB",
                   help="only parameters matching this glob move; repeatable")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the random directions (default 0)")
    p.add_argument("--eigen-ratio", action="store_true",
                   help="also map the Hessian's |lambda_min/lambda_max| at every point (Li et al.; one Lanczos "
                        "run per point: use a small --size); stored as the surface 'eigen_ratio'")
    p.add_argument("--view", choices=("line", "interpolation", "plane", "target", "grid"),
                   help="instead of MindSpore's landscapes: a random line around the last checkpoint, the "
                        "interpolation between two checkpoints, the plane through three, the target direction, "
                        "or a grid of --dims --directions around the last checkpoint")
    p.add_argument("--dims", type=int, metavar="N",
                   help="--view grid: its directions, 2 to 6 (default 3; 3 and more go to landscapes.h5 only, with "
                        "21, 11, 7 or 5 points per axis unless --size)")
    p.add_argument("--directions", choices=("random", "hessian", "pca"),
                   help="--view grid: seeded random directions (default), the Hessian's top eigenvectors or the "
                        "principal directions of the collected checkpoints")
    p.add_argument("--between", type=_checkpoints, metavar="A,B[,C]",
                   help="the view's checkpoints: step/epoch numbers or checkpoint files (default: first, last)")
    p.add_argument("--second", choices=("random", "pca"),
                   help="second axis of --view target: random (the default), or the trajectory's top direction")
    p.add_argument("--x", type=_axis, metavar="MIN:MAX:NUM",
                   help="the first axis, NUM points from MIN to MAX, e.g. --x -0.5:1.5:101")
    p.add_argument("--y", type=_axis, metavar="MIN:MAX:NUM",
                   help="the second axis, e.g. --y -1:1:51 (not for lines)")
    p.add_argument("--restart", action="store_true",
                   help="start the landscapes over instead of resuming what landscapes.h5 holds of them; a "
                        "landscapes.h5 of another run's landscapes is removed, to start afresh")
    p.add_argument("--distributed", action=argparse.BooleanOptionalAction, default=None,
                   help="share the work between torch.distributed processes (default: when run under torchrun)")
    p.add_argument("--plan", choices=("auto", "tune"), default="auto",
                   help="how points are evaluated: auto (default) never times, so the same command gives the same "
                        "values bit for bit; tune times the candidates on the data and records the fastest in "
                        "landscapes.h5 (reused by a rerun, a resume and every rank)")
    p.add_argument("--bn-statistics", choices=("recompute", "clamped", "affine", "a"), default="recompute",
                   help="views through checkpoints: batch-norm statistics estimated again at every point from the "
                        "samples (default); carried with the parameters, variances clamped at zero (counted per "
                        "point); carried as they are; or kept at A's")
    p.add_argument("--memory", choices=("auto", "fast", "lean"), default="auto",
                   help="random directions held (fast: two model sizes), drawn again whenever a layer reads "
                        "a tensor (lean: nothing held, slower), or held when they fit (auto, the default); the "
                        "values are the same")


def _add_views(sub: Any) -> None:
    """plot, ls, export and report: looking at what was made."""
    p = sub.add_parser("plot", help="draw the landscapes of a summary directory, events file or landscapes.h5")
    p.add_argument("path", type=Path, metavar="PATH",
                   help="a summary directory, a summary (events) file, or an HDF5 file such as landscapes.h5")
    p.add_argument("-o", "--output", type=Path,
                   help="PNG file (several figures: FILE_<tag>[_<kind>].png beside it), or a folder (no suffix)")
    p.add_argument("--kind", choices=("contour", "filled", "surface", "heatmap", "line", "eigen-ratio", "all",
                                       "topology"),
                   metavar="KIND",
                   help="how planes are drawn: %(choices)s (default filled); lines are drawn as lines, and --kind line "
                        "draws only them; eigen-ratio: the Hessian's |lambda_min/lambda_max| map (gen --eigen-ratio); "
                        "topology: minima, saddles, persistence diagram and merge tree (n-D grids' default)")
    p.add_argument("--metric", help="the surface on a line plot's second y axis (default: an accuracy if any)")
    p.add_argument("--tag", help="only this landscape, e.g. 'landscape_[1, 5]'")
    p.add_argument("--log", action="store_true", help="log-scaled loss")
    p = sub.add_parser("ls", help="list the runs under a directory with their landscapes, scalars and final loss")
    p.add_argument("base_dir", type=Path, metavar="BASE_DIR",
                   help="directory searched for runs (summary folders, and landscapes.h5 of unfinished generations)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p = sub.add_parser("export", help="export landscapes as VTP (ParaView), CSV or HDF5 (Li et al.'s layout), "
                                      "or whole runs as TensorBoard event files")
    p.add_argument("path", type=Path, metavar="PATH",
                   help="a summary directory, summary file or HDF5 file (with --format tensorboard: a base "
                        "directory whose runs are exported)")
    p.add_argument("--format", choices=("vtp", "csv", "h5", "tensorboard"), required=True,
                   help="tensorboard: every run under PATH (scalars, histograms, images, lineage as hparams, "
                        "landscapes as meshes, pictures and tensors)")
    p.add_argument("-o", "--output", "--out", type=Path, dest="output",
                   help="output folder (default: PATH/export, for tensorboard PATH/export/tensorboard)")
    p.add_argument("--tag", help="only this landscape (not with --format tensorboard)")
    p = sub.add_parser("report", help="one interactive HTML file of runs (scalars, rotatable 3-D landscapes, "
                                      "contours, lines, lineage) that opens offline (needs plotly)")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                   help="a run directory, a directory of runs, a summary file or an HDF5 file; several runs are "
                        "shown together (a selector, one curve each)")
    p.add_argument("-o", "--output", type=Path,
                   help="the HTML file to write (default: report.html in the first RUN, or beside it if a file)")
    p.add_argument("--title", help="the page's title (default: 'Loss landscapes: ' and the run names)")
    p.add_argument("--log", choices=("auto", "on", "off"), default="auto",
                   help="the colours shown first: log or linear as the PNGs choose (auto, the default: log when the "
                        "values span more than a decade), log, or linear; the page's buttons switch either way")
    p.add_argument("--levels", type=int, default=20, help="contour levels of the contour views (default 20)")
    p.add_argument("--paths", choices=("relative", "absolute"), default="relative",
                   help="where each run was read from, as the runs table shows it: relative to the folder the runs "
                        "share (default: no absolute path of this machine in a page that is shared), or absolute")


def _add_curvature(sub: Any) -> None:
    """curvature: eigenvalues, trace, density and sharpness at a run's checkpoint."""
    p = sub.add_parser("curvature", help="the Hessian's top eigenvalues, trace, density and sharpness at a run's "
                                         "checkpoint, into landscapes.h5",
                       description="Measure the curvature of the loss the landscapes use at one checkpoint of a "
                                   "SummaryCollector run (default the last); the results go to landscapes.h5 "
                                   "(group curvature/{unit}_{N}) and landscape ls shows them.")
    p.add_argument("run", type=Path, metavar="RUN", help="the SummaryCollector's directory (holds ckpt_dir/)")
    p.add_argument("--task", required=True, metavar="MODULE:FUNCTION", help="as for gen")
    p.add_argument("--what", type=_what, default=["eigs", "trace"], metavar="LIST",
                   help="comma-separated, of eigs (top --k eigenvalues), trace (Hutchinson, with its interval), "
                        "density (SLQ), sharpness (the --sharpness kinds); default eigs,trace")
    p.add_argument("--checkpoint", type=int, metavar="N", help="the step or epoch number (default: the last one)")
    p.add_argument("--num-samples", type=positive, metavar="N",
                   help="samples the loss is averaged over (default: the num_samples recorded in train_metadata.json)")
    p.add_argument("--k", type=positive, default=3, help="eigenvalues for eigs (default 3)")
    p.add_argument("--runs", type=positive, default=10, help="density: Lanczos runs (default 10)")
    p.add_argument("--steps", type=positive, default=80, help="density: products per run (default 80)")
    p.add_argument("--sharpness", default="lambda_max,trace", metavar="KINDS",
                   help="comma-separated, of lambda_max, trace, adaptive_worst, adaptive_average "
                        "(Andriushchenko et al.'s; they need --rho); default lambda_max,trace")
    p.add_argument("--rho", type=float, help="the adaptive kinds' radius (relative to |w|, elementwise)")
    p.add_argument("--p", choices=("2", "inf"), default="2", help="adaptive_worst's norm (default 2)")
    p.add_argument("--seed", type=non_negative, default=0,
                   help="seed of the start vectors, probes and draws (default 0)")
    p.add_argument("-o", "--output", type=Path, metavar="DIR",
                   help="the folder whose landscapes.h5 takes the results (default: RUN)")


def _odd(text: str) -> int:
    """``--points``: an odd int >= 3 (the grid from 0 to 1 holds 0.5)."""
    value = positive(text)
    if value < 3 or value % 2 == 0:
        raise argparse.ArgumentTypeError(f"expected an odd int >= 3 (the grid holds alpha = 0.5); got {value}")
    return value


def _add_connect(sub: Any) -> None:
    """connect: two models' barriers before and after alignment, and a curve between them."""
    p = sub.add_parser("connect", help="between two models: loss barriers before and after aligning B to A, and "
                                       "a curve of low loss, into DIR (landscapes.h5, PNGs)",
                       description="Measure the loss and error barrier along the straight line between two "
                                   "checkpoints (or two SummaryCollector runs' last checkpoints), naive and after "
                                   "permuting B's units into A's basis, and optionally train a Bezier or "
                                   "polygonal-chain curve between them. landscape report DIR shows the results.")
    p.add_argument("a", type=Path, metavar="A", help="a checkpoint file, or a SummaryCollector run (its last "
                                                      "checkpoint)")
    p.add_argument("b", type=Path, metavar="B", help="the same for model B")
    p.add_argument("--task", required=True, metavar="MODULE:FUNCTION",
                   help="as for gen: returns (model, network, dataset, metrics[, task]); both checkpoints load "
                        "into network, the dataset is what the barrier and the curve are measured on")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="the folder the results go to")
    p.add_argument("--align", choices=("weights", "activations", "none"), default="weights",
                   help="weight matching (default), activation matching, or only the naive barrier")
    p.add_argument("--curve", choices=("bezier", "polychain"),
                   help="also train a curve between A and the aligned B (one bend)")
    p.add_argument("--curve-epochs", type=positive, default=10, help="epochs of the curve (default 10)")
    p.add_argument("--points", type=_odd, default=25, help="alphas from 0 to 1, odd (default 25)")
    p.add_argument("--size", type=_size, default=21, help="points per side of the curve's plane (default 21)")
    p.add_argument("--num-samples", type=positive, help="samples the loss averages over (default: all)")
    p.add_argument("--bn-statistics", choices=("recompute", "clamped", "affine", "a"), default="recompute",
                   help="batch-norm statistics along the line: estimated again at every alpha (default), "
                        "interpolated (clamped or affine), or A's")
    p.add_argument("--seed", type=non_negative, default=0,
                   help="seed of weight matching's order and the curve (default 0)")


def _what(text: str) -> list[str]:
    """``--what``: comma-separated measurements, each known."""
    known = ("eigs", "trace", "density", "sharpness")
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in known]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"expected comma-separated {', '.join(known)}; got {text!r}")
    return items


def _add_lineage(sub: Any) -> None:
    """lineage: the runs' hyper-parameters and metrics."""
    p = sub.add_parser(
        "lineage", help="list, filter and sort the runs' lineage (hyper-parameters, metrics)",
        description="Print the lineage of the runs under BASE_DIR (found recursively) as a table.",
        epilog="--where takes FIELD OP VALUE, e.g. 'learning_rate>0.01', optimizer=SGD, 'metric_accuracy>=0.9', "
               "'batch_size in 32,64'; OP is =, !=, <, <=, >, >=, in, not in. Repeat --where to combine (AND).")
    p.add_argument("base_dir", type=Path, help="directory holding the run folders")
    p.add_argument("--where", action="append", default=[], metavar="EXPR", help="a condition; repeatable (AND)")
    p.add_argument("--sort", metavar="FIELD", help="sort by this field (e.g. metric_accuracy, learning_rate)")
    p.add_argument("--desc", action="store_true", help="sort descending (with --sort)")
    p.add_argument("--limit", type=int, metavar="N", help="show at most N runs (1..100)")
    p.add_argument("--offset", type=int, metavar="PAGE", help="page number with --limit (0-based)")
    p.add_argument("--json", action="store_true", help="print filter_summary_lineage's result as JSON")


def _command(name: str, argv: Sequence[str]) -> Callable[[argparse.Namespace], int]:
    """The function that runs subcommand ``name``.

    The imports below are the command-line's start-up budget: each command's module
    (and with it torch, matplotlib or the summary format) is imported only when that
    command runs, so ``landscape --help`` and ``landscape ls`` do not pay for the others.
    """
    if name in ("demo", "run"):
        # start-up: torch and the pipeline only for demo/run
        from landscape.cli import _demo

        return _demo.run_demo if name == "demo" else _demo.run_config
    if name == "gen":
        # start-up: options checked and a finished run recognised without torch (_gen_check, _stamp)
        from landscape.cli import _gen_check, _resume, _stamp

        def run_gen(args: argparse.Namespace) -> int:
            _gen_check.check_gen(args)  # every option, before the task module, torch or the data
            try:
                key = _stamp.command_key(args)
                if key is not None and _stamp.finished_run(args, key):
                    return 0
                # start-up: torch and the engine only when gen has work to do
                from landscape.cli import _gen

                return _gen.run_gen(args, stamp_key=key)
            except KeyboardInterrupt:  # what was kept, and the command that resumes (rank 0 of torchrun)
                if _resume.reports_here():
                    print(_resume.interrupted_report(args, argv), file=sys.stderr)
                return 130

        return run_gen
    if name == "plot":
        # start-up: matplotlib only for plot
        from landscape.cli import _plot

        return _plot.run_plot
    if name == "export":
        # start-up: viz only for export
        from landscape.cli import _export

        return _export.run_export
    if name == "compare":
        # start-up: torch and the engine only for compare
        from landscape.cli import _compare

        return _compare.run_compare
    if name == "report":
        # start-up: plotly only for report
        from landscape.cli import _report

        return _report.run_report
    if name == "curvature":
        # start-up: torch and the curvature only for curvature
        from landscape.cli import _curvature

        return _curvature.run_curvature
    if name == "connect":
        # start-up: torch, the engine and matplotlib only for connect
        from landscape.cli import _connect

        return _connect.run_connect
    if name == "topology":
        # start-up: the summary reader and HDF5 only for topology
        from landscape.cli import _topology

        return _topology.run_topology
    if name == "ls":
        # start-up: the summary reader only for ls
        from landscape.cli import _ls

        return _ls.run_ls
    # start-up: the lineage reader only for lineage
    from landscape.cli import _lineage

    return _lineage.run_lineage


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``landscape`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    run = _command(args.command, argv)
    if args.command == "lineage":  # it words its own errors and exit statuses
        return run(args)
    try:
        return run(args)
    except (UsageError, InvalidParameterError) as exc:
        print(f"landscape {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("landscape: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.verbose:
            logger.exception("failed")
        print(f"landscape {args.command}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
