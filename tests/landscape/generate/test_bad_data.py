"""Bad data is refused before any point, file or folder, in one place every entry point goes through:
a non-finite loss (the samples named, and whether their inputs hold NaN), a loss that is not one number
per batch, outputs and targets an element-wise loss would broadcast. A DataLoader whose order changes from
pass to pass is refused the same way everywhere; the samples a result used are recorded by a digest whose
layout the docs define (checked here with hashlib)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector.common import InvalidParameterError
from landscape import SummaryLandscape, compare_runs, compute_landscape, read_h5
from landscape.curvature import _api as curvature_api
from landscape.curvature import hessian_eigs, hessian_trace, spectral_density
from landscape.engine import check_loss, collect
from landscape.generate import _build
from landscape.tasks import Supervised
from tests.landscape import _bad_data as bad


@pytest.fixture
def no_point(monkeypatch):
    """Any landscape point evaluated, or any curvature operator made, fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a point was evaluated")

    monkeypatch.setattr(_build._Evaluation, "evaluate", refuse)
    monkeypatch.setattr(curvature_api, "make_operator", refuse)


def _files(folder):
    return sorted(os.path.relpath(os.path.join(r, f), folder) for r, _, fs in os.walk(folder) for f in fs)


@pytest.mark.parametrize("kind", bad.CASES)
def test_compute_landscape_refuses_before_any_point(kind, no_point):
    net = bad.Regressor()
    with pytest.raises(InvalidParameterError, match=bad.MESSAGES[kind]):
        compute_landscape(net, bad.loss_fn(kind), bad.data(kind), size=3)
    assert net.calls == 1  # the check's one forward over the 96 samples, and no point
    net = bad.Regressor()  # the same as a task
    with pytest.raises(InvalidParameterError, match=bad.MESSAGES[kind].replace("loss_fn", "task Supervised.*")):
        compute_landscape(net, data=bad.data(kind), task=bad.as_task(kind)[4], size=3)


@pytest.mark.parametrize("fn", [hessian_eigs, hessian_trace, spectral_density])
@pytest.mark.parametrize("kind", bad.CASES)
def test_the_curvature_functions_refuse_before_any_product(fn, kind, no_point):
    with pytest.raises(InvalidParameterError, match=bad.MESSAGES[kind]):
        fn(bad.Regressor(), bad.loss_fn(kind), bad.data(kind), progress=False)


@pytest.mark.parametrize("kind", bad.CASES)
def test_summary_landscape_and_compare_runs_write_nothing(kind, tmp_path, no_point):
    run = bad.write_run(tmp_path / "a")
    before = _files(run)
    with pytest.raises(InvalidParameterError, match=bad.MESSAGES[kind]):
        SummaryLandscape(str(run)).gen_landscapes_with_multi_process(getattr(bad, kind))
    assert _files(run) == before  # no landscapes.h5, no summary file
    other = bad.write_run(tmp_path / "b", seed=1)
    with pytest.raises(InvalidParameterError, match=bad.MESSAGES[kind]):
        compare_runs([run, other], getattr(bad, kind), tmp_path / "out", size=3)
    assert not (tmp_path / "out").exists()


def test_a_task_s_torch_broadcast_warning_is_refused(no_point):
    """Any task: torch's warning that a target's size differs from the input's (it then broadcasts)."""
    def task(model, batch):
        return nn.functional.l1_loss(model(batch[0]), batch[1])

    with pytest.raises(InvalidParameterError, match=r"task .* compares outputs and targets of other shapes.*"
                                                    r"HINT: give targets of the outputs' shape"):
        compute_landscape(bad.Regressor(), data=bad.data("broadcast"), task=task, size=3)


def test_finite_data_with_a_non_finite_loss_blames_the_weights(no_point):
    net = bad.Regressor()
    with torch.no_grad():
        net.fc2.weight.fill_(float("inf"))
    with pytest.raises(InvalidParameterError, match=r"the inputs and the targets there are finite.*HINT: the weights "
                                                    r"or the loss give it"):
        hessian_eigs(net, nn.MSELoss(), bad.data(), progress=False)


def test_the_check_leaves_the_network_as_it_was():
    """In train mode the check's forward would update batch-norm statistics and draw dropout masks: the
    network's buffers and modes, and torch's random state, are as they were."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.5), nn.Linear(16, 1))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    net.eval()
    state = torch.random.get_rng_state()
    task = Supervised(nn.MSELoss())
    check_loss(net, task, collect(bad.data(), None, task, caller="test"), caller="test", eval_mode=False)
    assert not net.training and torch.equal(torch.random.get_rng_state(), state)
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k]), k


def _digest(*tensors):
    """The documented layout, written here: for each tensor, the text of its dtype and shape, then its bytes."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(np.ascontiguousarray(t.numpy()).tobytes())
    return h.hexdigest()


def test_the_samples_digest_is_the_documented_hash_everywhere(tmp_path):
    x, y = bad.data()
    want = _digest(x[:64], y[:64])
    loader = DataLoader(TensorDataset(x, y), batch_size=20, shuffle=False)
    for given in ((x, y), loader):  # the same samples, in one block or in batches
        ls = compute_landscape(bad.Regressor(), nn.MSELoss(), given, size=3, num_samples=64)
        assert ls.metadata["samples_digest"] == want
    eig = hessian_eigs(bad.Regressor(), nn.MSELoss(), loader, num_samples=64, progress=False)
    tr = hessian_trace(bad.Regressor(), nn.MSELoss(), loader, num_samples=64, progress=False, method="exact")
    den = spectral_density(bad.Regressor(), nn.MSELoss(), loader, num_samples=64, progress=False)
    assert eig.samples_digest == tr.samples_digest == den.samples_digest == want
    # in landscapes.h5: written by a run's generation and by a comparison
    run = bad.write_run(tmp_path / "a")
    SummaryLandscape(str(run)).gen_landscapes_with_multi_process(bad.good)
    every = _digest(x, y)
    assert {ls.metadata["samples_digest"] for ls in read_h5(run / "landscapes.h5").values()} == {every}
    compare_runs([run, bad.write_run(tmp_path / "b", seed=1)], bad.good, tmp_path / "cmp", size=3)
    (ls,) = read_h5(tmp_path / "cmp" / "landscapes.h5").values()
    assert ls.metadata["samples_digest"] == every


def test_a_loader_whose_order_changes_is_refused_everywhere(tmp_path, no_point):
    """One rule: a shuffling (or any not sequential) sampler would give other samples at every call."""
    x, y = bad.data()
    shuffled = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    weighted = DataLoader(TensorDataset(x, y), batch_size=32,
                          sampler=torch.utils.data.WeightedRandomSampler(torch.ones(len(x)), len(x)))
    run = bad.write_run(tmp_path / "a")
    match = r"DataLoader whose order is not known to stay the same .*RandomSampler.*HINT: pass a DataLoader with " \
            r"shuffle=False"
    for loader in (shuffled, weighted):
        with pytest.raises(InvalidParameterError, match=match):
            compute_landscape(bad.Regressor(), nn.MSELoss(), loader, size=3)
        with pytest.raises(InvalidParameterError, match=match):
            hessian_trace(bad.Regressor(), nn.MSELoss(), loader, progress=False)
        with pytest.raises(InvalidParameterError, match=r"The dataset callback_fn returned \(its third item\) is a "
                                                        r"DataLoader whose order"):
            SummaryLandscape(str(run)).gen_landscapes_with_multi_process(
                lambda loader=loader: (bad._Model("good"), bad.Regressor(), loader, None))
    assert not (run / "landscapes.h5").exists()


def test_two_calls_with_a_sequential_loader_give_the_same_bits():
    x, y = bad.data()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=False)
    net = bad.Regressor()
    a, b = (compute_landscape(net, nn.MSELoss(), loader, size=3) for _ in range(2))
    np.testing.assert_array_equal(a.z, b.z)
    assert a.metadata["samples_digest"] == b.metadata["samples_digest"]
