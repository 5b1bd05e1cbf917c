"""The curvature functions say their progress like a landscape (one ProgressMeter): Lanczos iterations
and Hutchinson probes, with the time left as a bound (they may stop sooner); values never depend on it."""

from __future__ import annotations

import logging
import re
import types

import numpy as np
import torch
from torch import nn

from landscape.curvature import hessian_eigs, hessian_trace
from landscape.engine import PROGRESS_LOGGER, _progress


def _problem():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    g = torch.Generator().manual_seed(1)
    return net, nn.CrossEntropyLoss(), (torch.randn(50, 6, generator=g), torch.randint(0, 3, (50,), generator=g))


def _slow_clock(monkeypatch) -> None:
    """A second per reading of the clock: every run is long enough to be said."""
    t = [0.0]

    def perf_counter() -> float:
        t[0] += 1.0
        return t[0]

    monkeypatch.setattr(_progress, "time", types.SimpleNamespace(perf_counter=perf_counter))


def test_hessian_trace_and_eigs_say_their_progress_and_give_the_same_values(monkeypatch, caplog):
    net, loss, data = _problem()
    kw = dict(num_samples=None, seed=0)
    quiet_trace = hessian_trace(net, loss, data, progress=False, max_probes=60, rel_tol=1e-9, method="hutchinson",
                                **kw)
    quiet_eigs = hessian_eigs(net, loss, data, k=2, progress=False, **kw)
    _slow_clock(monkeypatch)
    caplog.set_level(logging.INFO, logger="landscape")
    trace = hessian_trace(net, loss, data, max_probes=60, rel_tol=1e-9, method="hutchinson", **kw)  # lines
    eigs = hessian_eigs(net, loss, data, k=2, **kw)
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    probes = [s for s in lines if s.startswith("Hutchinson: ")]
    iterations = [s for s in lines if s.startswith("Lanczos: ")]
    assert len(probes) >= 4 and all(re.fullmatch(r"Hutchinson: \d+/60 probes, [\d.]+ probes/s, at most .+ left", s)
                                    for s in probes[:-1]), probes
    assert probes[-1] == f"Hutchinson: 60/60 probes in {probes[-1].split(' in ')[1]}"
    assert len(iterations) >= 2 and "iterations/s, at most" in iterations[0], iterations
    assert re.fullmatch(rf"Lanczos: {eigs.iterations}/\d+ iterations in \d+ s", iterations[-1]), iterations
    assert trace.estimate == quiet_trace.estimate and trace.probes == quiet_trace.probes == 60
    np.testing.assert_array_equal(eigs.eigenvalues, quiet_eigs.eigenvalues)
