"""``compute_landscape(num_samples="auto")``, the default: the first 2048 samples, or all of a smaller
dataset (said in the log); an explicit number larger than the dataset is refused."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

import landscape
from collector.common import InvalidParameterError


def _data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g)


def test_auto_takes_all_of_a_smaller_dataset_and_says_so(caplog):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x, y = _data(569)
    with caplog.at_level(logging.INFO, logger="landscape"):
        ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3)
    assert ls.metadata["num_samples"] == 569
    assert "the dataset holds 569 samples (fewer than 2048): all 569 are used" in caplog.text
    with torch.no_grad():  # the centre: the network's own loss on all 569 samples
        own = float(nn.functional.cross_entropy(net(x), y))
    assert ls.z[1, 1] == pytest.approx(own, rel=1e-6)


def test_auto_takes_2048_of_a_larger_dataset():
    net = nn.Linear(4, 2)
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), _data(3000), size=3)
    assert ls.metadata["num_samples"] == 2048


def test_an_explicit_number_larger_than_the_dataset_is_refused():
    with pytest.raises(ValueError, match=r"'num_samples' parameter of compute_landscape \(600\) is larger than the "
                                         r"dataset \(569 samples\)"):
        landscape.compute_landscape(nn.Linear(4, 2), nn.CrossEntropyLoss(), _data(569), size=3, num_samples=600)
    with pytest.raises(InvalidParameterError, match="'num_samples' parameter of compute_landscape must be .*'auto'"):
        landscape.compute_landscape(nn.Linear(4, 2), nn.CrossEntropyLoss(), _data(569), size=3, num_samples="all")


def _generator(x: torch.Tensor, y: torch.Tensor, batch: int = 25):
    """A one-shot iterable of batches (a generator: a second read gets nothing)."""
    for i in range(0, len(x), batch):
        yield x[i:i + batch], y[i:i + batch]


def test_auto_reads_a_generator_once():
    """A generator of 100 samples (fewer than 2048) gives what the same samples as tensors give: the
    samples read once, the bad-data check taking none of them."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x, y = _data(100)
    once = landscape.compute_landscape(net, nn.CrossEntropyLoss(), _generator(x, y), size=3)
    assert once.metadata["num_samples"] == 100
    with torch.no_grad():
        assert once.z[1, 1] == pytest.approx(float(nn.functional.cross_entropy(net(x), y)), rel=1e-6)
    tensors = landscape.compute_landscape(net, nn.CrossEntropyLoss(), [(x, y)], size=3)
    assert once.metadata["samples_digest"] == tensors.metadata["samples_digest"]
