"""Alignment: a planted permutation of a trained model is found back (weight and activation
matching), the objective never decreases, the same seed gives the same bits, and bad input is
refused before any work."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from collector.common import InvalidParameterError
from landscape import align
from landscape.connect import Alignment
from landscape.examples import MLP, DigitsResNet, digits_tensors, train_epoch
from tests.landscape.connect._models import trained_mlp


@pytest.fixture(scope="module")
def mlp():
    return trained_mlp(1, hidden=128, epochs=3, n=512)


@pytest.fixture(scope="module")
def resnet():
    x, y = digits_tensors(image=True)
    torch.manual_seed(0)
    net = DigitsResNet(20, channels=8)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    train_epoch(net, opt, x[:512], y[:512], torch.Generator().manual_seed(0))
    return net.eval(), (x[:256], y[:256])


def _same_bits(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sb = b.state_dict()
    return all(torch.equal(t, sb[k]) for k, t in a.state_dict().items())


def _same_function(a: torch.nn.Module, b: torch.nn.Module, x: torch.Tensor) -> bool:
    with torch.no_grad():
        return bool(torch.allclose(a(x), b(x), rtol=0, atol=1e-5))


def _planted(model, data, method, seed=0):
    pi = Alignment.random(model, data, seed=11)
    b = pi.apply(model)
    assert not _same_bits(model, b)
    found = align(model, b, method=method, data=data, seed=seed)
    return b, found


@pytest.mark.parametrize("method", ["weights", "activations"])
def test_planted_permutation_of_trained_mlp_is_recovered(mlp, method):
    x, y = digits_tensors()
    data = (x[:512], y[:512])
    b, found = _planted(mlp, data, method)
    aligned = found.apply(b)
    assert _same_bits(mlp, aligned) or _same_function(mlp, aligned, x)
    assert found.iterations <= 5
    assert all(later >= earlier for earlier, later in zip(found.history, found.history[1:]))
    assert found.checked is not None and found.checked["eval"] <= 1e-5 and found.checked["train"] <= 1e-5


@pytest.mark.parametrize("method", ["weights", "activations"])
def test_planted_permutation_of_resnet20_with_batch_norm_is_recovered(resnet, method):
    model, data = resnet
    assert len(model.blocks) == 9  # ResNet-20: three stages of three blocks
    b, found = _planted(model, data, method)
    aligned = found.apply(b)
    assert _same_bits(model, aligned) or _same_function(model, aligned, data[0])
    assert found.iterations <= 5
    assert all(later >= earlier for earlier, later in zip(found.history, found.history[1:]))


def test_independent_models_objective_rises_and_seed_gives_same_bits():
    x, y = digits_tensors()
    a, b = trained_mlp(3, hidden=32, epochs=1, n=512), trained_mlp(4, hidden=32, epochs=1, n=512)
    data = (x[:64], y[:64])
    first = align(a, b, data=data, seed=5)
    again = align(a, b, data=data, seed=5)
    assert first.history[-1] > first.history[0]
    assert np.all(np.diff(first.history) >= 0)
    assert first.digest == again.digest
    assert all(torch.equal(first.perms[g], again.perms[g]) for g in first.perms)
    assert _same_bits(first.apply(b), again.apply(b))
    # the plain objective sum <A, pi(B)> over the tensors with a permuted axis (all but the last bias)
    aligned, kept = first.apply(b).state_dict(), a.state_dict()
    total = sum(float((t.double() * aligned[k].double()).sum()) for k, t in kept.items() if k != "fc3.bias")
    assert abs(total - first.history[-1]) <= 1e-9 * abs(total)


def _exploding_data():
    def batches():
        raise AssertionError("the data was read before the input was checked")
        yield  # pragma: no cover

    return batches()


def test_bad_input_refused_before_any_work():
    torch.manual_seed(0)
    a = MLP(hidden=8)
    with pytest.raises(InvalidParameterError, match="architecture"):
        align(a, DigitsResNet(8, channels=2), data=_exploding_data())
    with pytest.raises(InvalidParameterError, match=r"'fc1.weight' is \(16, 64\)"):
        align(a, MLP(hidden=16), data=_exploding_data())
    bad = copy.deepcopy(a)
    with torch.no_grad():
        bad.fc2.weight[0, 0] = float("nan")
    with pytest.raises(InvalidParameterError, match="finite"):
        align(a, bad, data=_exploding_data())
    with pytest.raises(InvalidParameterError, match="method"):
        align(a, copy.deepcopy(a), method="sinkhorn", data=_exploding_data())
    with pytest.raises(InvalidParameterError, match="'data' parameter of align is required"):
        align(a, copy.deepcopy(a))


def test_planted_permutation_of_gpt2_heads_is_recovered():
    from benchmarks._models import _gpt2
    from landscape.tasks import HuggingFace

    a = _gpt2(0).eval()
    ids = torch.randint(0, 1000, (4, 16), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": ids, "labels": ids}]
    b = Alignment.random(a, data, seed=1, task=HuggingFace()).apply(a)
    found = align(a, b, data=data, task=HuggingFace())
    assert _same_bits(a, found.apply(b))
    assert all(later >= earlier for earlier, later in zip(found.history, found.history[1:]))
