"""compute_landscape keeps what the planner probed between calls: a small landscape does not
pay the probes again, and another selection of moved tensors is probed anew."""

from __future__ import annotations

import numpy as np
from torch import nn

import landscape
from landscape.engine import _planner
from landscape.generate import _compute


def test_second_call_does_not_probe_again(trained, data, monkeypatch):
    net, traj = trained
    calls = []
    original = _planner._working_batchings
    monkeypatch.setattr(_planner, "_working_batchings", lambda spec, p: calls.append(p) or original(spec, p))
    monkeypatch.setattr(_compute, "_PLAN_CACHES", type(_compute._PLAN_CACHES)())
    kw = dict(checkpoints=[traj[-1]], dims=1, x=(-1.0, 1.0, 9), num_samples=96)
    first = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, **kw)
    probes = len(calls)
    assert probes > 0
    again = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, seed=3, **kw)
    assert len(calls) == probes  # the same architecture, task, samples and selection: no new probe
    assert again.metadata["points_per_call"] == first.metadata["points_per_call"]
    assert not np.array_equal(again.z, first.z)  # another seed: another line, same plan
    landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, ignore="biasbn", **kw)
    assert len(calls) == 2 * probes  # another selection of moved tensors: probed anew
