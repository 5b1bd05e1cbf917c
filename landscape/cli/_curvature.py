"""``landscape curvature RUN --task MODULE:FUNCTION``: the curvature at a run's checkpoint.

What ``--what`` asks for, at one checkpoint (``--checkpoint N``, default the last one
collected), with the loss the landscapes use (the task over the first ``--num-samples``
samples, default the run's recorded number):

* ``eigs``: the top ``--k`` Hessian eigenvalues (:func:`landscape.curvature.hessian_eigs`);
* ``trace``: the trace with its interval (:func:`landscape.curvature.hessian_trace`);
* ``density``: the eigenvalue density by SLQ (:func:`landscape.curvature.spectral_density`,
  ``--runs`` runs of ``--steps`` products);
* ``sharpness``: the ``--sharpness`` kinds (:func:`landscape.curvature.sharpness`; the
  adaptive ones need ``--rho``).

Every option is checked before the task module, torch or the data is touched (bad usage
exits 2 with one line naming the option); the checkpoint is verified against the digest
training recorded and loaded with ``torch.load(weights_only=True)``. The results go to the
group ``curvature/{unit}_{N}`` of ``landscapes.h5`` in ``--output`` (default RUN), written
atomically, replacing that checkpoint's earlier results, with the SHA-256 of the samples used
(``samples_digest``); ``landscape ls`` shows them. Bad data (a loss that is not finite, not one
number per batch, or of broadcast targets) is refused before any product, and nothing is written. A
``landscapes.h5`` of another run is refused, as ``gen`` refuses it.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import Any

import numpy as np

from collector.common import check_directory
from collector.trajectory import CKPT_DIR, METADATA_FILE, TrainMetadata, load_checkpoint
from landscape.cli._common import UsageError
from landscape.cli._gen import load_task, progress_lines
from landscape.cli._gen_check import _check_summary_dir, _check_task
from landscape.curvature import SHARPNESS_KINDS, hessian_eigs, hessian_trace, sharpness, spectral_density
from landscape.io import H5_NAME, CurvatureRecord, check_run, run_record, write_curvature

__all__ = ["run_curvature", "WHAT"]

WHAT = ("eigs", "trace", "density", "sharpness")
_ADAPTIVE = ("adaptive_worst", "adaptive_average")


def _checked(args: argparse.Namespace) -> tuple[TrainMetadata, int, list[str]]:
    """The run's metadata, the checkpoint's number and the sharpness kinds; UsageError naming the option."""
    _check_task(args.task)
    md = _check_summary_dir(args.run)
    if not md.files:
        raise UsageError(f"RUN {str(args.run)!r} has no checkpoint in its {CKPT_DIR}/{METADATA_FILE}.")
    number = max(md.files) if args.checkpoint is None else args.checkpoint
    if number not in md.files:
        raise UsageError(f"--checkpoint {number}: no checkpoint of {md.unit} {number} was collected; collected: "
                         f"{','.join(str(n) for n in sorted(md.files))}.")
    kinds = [k.strip() for k in args.sharpness.split(",") if k.strip()]
    bad = [k for k in kinds if k not in SHARPNESS_KINDS]
    if bad or not kinds:
        raise UsageError(f"--sharpness takes comma-separated kinds of {', '.join(SHARPNESS_KINDS)}; got "
                         f"{args.sharpness!r}.")
    adaptive = [k for k in kinds if k in _ADAPTIVE]
    if "sharpness" in args.what:
        if adaptive and args.rho is None:
            raise UsageError(f"--rho is required for --sharpness {','.join(adaptive)} (the radius of the scaled "
                             "ball, or the noise's scale). HINT: e.g. --rho 0.05 with --p 2.")
        if args.rho is not None and not adaptive:
            raise UsageError(f"--rho applies to the adaptive kinds; --sharpness {args.sharpness} has none.")
    if args.rho is not None and not (math.isfinite(args.rho) and args.rho > 0):
        raise UsageError(f"--rho must be a positive number; got {args.rho}.")
    if args.output is not None:
        check_directory("--output", args.output, caller="landscape curvature",
                        hint="pass the folder whose landscapes.h5 takes the results (created if missing).")
    return md, number, kinds


def _problem(spec: str) -> tuple[Any, Any, Any, Any]:
    """``(network, loss_fn, task, dataset)`` from the task function (a task as fifth item replaces the loss)."""
    got = load_task(spec)()
    if not (isinstance(got, (tuple, list)) and len(got) in (4, 5)):
        raise UsageError(f"--task {spec}: the function must return (model, network, dataset, metrics) or (model, "
                         f"network, dataset, metrics, task); got {type(got).__name__}.")
    model, network, dataset = got[:3]
    task = got[4] if len(got) == 5 else None
    return network, None if task is not None else getattr(model, "loss_fn", None), task, dataset


def _measure(args: argparse.Namespace, kinds: list[Any], network: Any, loss_fn: Any, task: Any, data: Any,
             num_samples: int) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str]]:
    """Every measurement ``--what`` asks for: the group's attributes, its arrays and the lines to print."""
    common = dict(task=task, num_samples=num_samples, seed=args.seed)
    info: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    lines = []
    if "eigs" in args.what:
        eig = hessian_eigs(network, loss_fn, data, k=args.k, **common)
        arrays.update(eigenvalues=eig.eigenvalues, residuals=eig.residuals)
        info.update(eigs_iterations=eig.iterations, eigs_converged=eig.converged, eigs_method=eig.method,
                    samples_digest=eig.samples_digest)
        lines.append(f"eigenvalues: {', '.join(f'{v:.6g}' for v in eig.eigenvalues)} ({eig.iterations} Lanczos "
                     f"iterations, {'converged' if eig.converged else 'NOT converged'})")
    if "trace" in args.what:
        tr = hessian_trace(network, loss_fn, data, **common)
        info.update(trace=tr.estimate, trace_interval=list(tr.interval), trace_probes=tr.probes,
                    trace_confidence=tr.confidence, trace_converged=tr.converged, trace_method=tr.method,
                    samples_digest=tr.samples_digest)
        lines.append(f"trace: {tr}")
    if "density" in args.what:
        den = spectral_density(network, loss_fn, data, runs=args.runs, steps=args.steps, **common)
        arrays.update(density_grid=den.grid, density=den.density, density_nodes=den.nodes,
                      density_weights=den.weights)
        info.update(density_mean=den.mean, density_stderr=den.stderr, density_sigma=den.sigma,
                    density_method=den.method, samples_digest=den.samples_digest)
        lines.append(f"density: mean eigenvalue {den.mean:.6g} (tr/n, n={den.n}), exact: every eigenvalue of the "
                     "whole matrix" if den.method == "exact" else
                     f"density: mean eigenvalue {den.mean:.6g} ± {den.stderr:.3g} (tr/n, n={den.n}), "
                     f"{den.nodes.shape[0]} runs x {den.nodes.shape[1]} steps")
    if "sharpness" in args.what:
        found = {}
        for kind in kinds:
            adaptive = kind in _ADAPTIVE
            s = sharpness(network, loss_fn, data, kind=kind, rho=args.rho if adaptive else None,
                          p=args.p if adaptive else 2, **common)
            found[kind] = {"value": s.value, "rho": s.rho, "details": s.details}
            lines.append(f"sharpness: {s}")
        info["sharpness"] = found
    return info, arrays, lines


def run_curvature(args: argparse.Namespace) -> int:
    """Measure, print, and write the results to ``landscapes.h5``."""
    started = time.perf_counter()
    md, number, kinds = _checked(args)
    ckpt_dir = os.path.join(os.fspath(args.run), CKPT_DIR)
    out = args.output if args.output is not None else args.run
    h5 = os.path.join(os.fspath(out), H5_NAME)
    record = run_record(args.run, md, ckpt_dir)
    check_run(h5, record, caller="landscape curvature", parameter="--output")  # before the task's imports
    num_samples = args.num_samples or md.num_samples
    path = md.checkpoint_path(ckpt_dir, number)
    network, loss_fn, task, data = _problem(args.task)
    what = f"the checkpoint of {md.unit} {number}"
    state = load_checkpoint(path, what=what, network=network, digest=md.digests.get(number),
                            recorded_in=os.path.join(ckpt_dir, METADATA_FILE))
    network.load_state_dict(state)
    with progress_lines():
        info, arrays, lines = _measure(args, kinds, network, loss_fn, task, data, num_samples)
    if info.get("samples_digest"):
        lines.append(f"samples: SHA-256 {info['samples_digest'][:16]}... of the {num_samples} used")
    info.update(unit=md.unit, checkpoint=number, checkpoint_file=os.path.basename(path), num_samples=num_samples,
                seed=args.seed, task=args.task, what=[w for w in WHAT if w in args.what])
    os.makedirs(out, exist_ok=True)
    write_curvature(h5, f"{md.unit}_{number}", CurvatureRecord(info, arrays), run=record)
    print(f"{md.unit} {number} ({os.path.basename(path)}), {num_samples} samples:")
    for line in lines:
        print(f"  {line}")
    print(f"Wrote the curvature of {md.unit} {number} to {h5} in {time.perf_counter() - started:.1f} s")
    return 0
