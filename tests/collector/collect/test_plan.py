"""collect_freq / collect_tensor_freq rule (seed 001's worked example)."""

from __future__ import annotations

import pytest

from collector.collect._plan import collection_kind, plan_collections, tensor_collect_range


@pytest.mark.parametrize("total, freq, n_other, n_tensor", [
    (600, 10, 61, 20),  # the seed's example
    (20, 10, 3, 3),     # the seed's example
    (280, 1, 280, 20),  # the MindSpore fixture's run: collect_freq=1, 10 epochs of 28 steps
    (15, 1, 15, 15),
    (25, 1, 25, 20),    # total // 19 == 1: the first 20 steps
    (7, 10, 1, 1),      # only the first step
])
def test_default_rule(total, freq, n_other, n_tensor):
    others, tensors = plan_collections(total, freq)
    assert (len(others), len(tensors)) == (n_other, n_tensor)
    assert others[0] == tensors[0] == 1
    assert set(tensors) <= set(range(1, total + 1))


def test_600_steps_exact():
    others, tensors = plan_collections(600, 10)
    assert others == [1] + list(range(10, 601, 10))
    assert tensors == [1] + list(range(31, 600, 31))


def test_explicit_tensor_freq_and_unknown_total():
    assert plan_collections(20, 10, collect_tensor_freq=4)[1] == [1, 4, 8, 12, 16, 20]
    assert tensor_collect_range(None, 10, None) is None
    assert [collection_kind(s, s == 1, 5, None) for s in (1, 2, 5)] == ["all", None, "all"]
    assert collection_kind(31, False, 10, range(0, 601, 31)) == "tensor"
    assert collection_kind(30, False, 10, range(0, 601, 31)) == "other"
