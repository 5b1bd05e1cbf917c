"""collector.trajectory._checkpoints (fast saving): the bytes are torch.save's, whatever the state dict looks like."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from collector.trajectory._checkpoints import StateDictSaver


def _torch_save(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _mixed_state(shift: float = 0.0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "w": torch.randn(7, 5, generator=g) + shift,
        "b": torch.randn(5, generator=g).to(torch.float16) + shift,
        "bf": torch.randn(3, 2, generator=g).to(torch.bfloat16),
        "d": torch.randn(4, generator=g, dtype=torch.float64),
        "steps": torch.tensor(12 + int(shift)),  # 0-dim int64 buffer (BatchNorm's num_batches_tracked)
        "mask": torch.tensor([True, False, True]),
        "col": torch.randn(6, 1, generator=g),
    }


def test_repeated_layout_gives_torch_save_bytes_and_is_reused():
    saver = StateDictSaver()
    first = _mixed_state()
    assert saver.to_bytes(first) == _torch_save(first)
    assert len(saver._heads) == 1  # checked once, then reused
    for shift in (1.0, -3.5, 100.0):
        state = _mixed_state(shift)
        data = saver.to_bytes(state)
        assert data == _torch_save(state)
        loaded = torch.load(io.BytesIO(data), weights_only=True)
        assert loaded.keys() == state.keys()
        assert all(torch.equal(loaded[k], state[k]) and loaded[k].dtype == state[k].dtype for k in state)
    assert len(saver._heads) == 1


def test_network_state_dicts_of_two_layouts():
    saver = StateDictSaver()
    nets = [nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)), nn.Linear(3, 3)]
    for _ in range(2):
        for net in nets:
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(torch.randn_like(p))
            state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            assert saver.to_bytes(state) == _torch_save(state)
    assert len(saver._heads) == 2


@pytest.mark.parametrize("case", ["shared-storage", "view", "non-contiguous", "requires-grad", "nested", "empty-tensor",
                                  "parameter", "ordered-dict"])
def test_unusual_states_take_torch_save_itself(case):
    base = torch.arange(12.0).reshape(3, 4)
    states = {
        "shared-storage": {"a": base, "b": base},  # tied weights: one storage saved once
        "view": {"a": base[1]},  # part of a bigger storage
        "non-contiguous": {"a": base.t()},
        "requires-grad": {"a": base.clone().requires_grad_()},
        "nested": {"a": {"b": base}},
        "empty-tensor": {"a": torch.empty(0), "b": torch.empty(0)},
        "parameter": {"a": nn.Parameter(base.clone())},
        "ordered-dict": nn.Linear(2, 2).state_dict(),
    }
    state = states[case]
    saver = StateDictSaver()
    for _ in range(2):
        assert saver.to_bytes(state) == _torch_save(state)
    assert not saver._heads


def test_a_replay_that_differs_is_never_used(monkeypatch):
    """If torch.save's internals changed, the check refuses the layout and torch.save is used."""
    from collector.trajectory import _checkpoints
    monkeypatch.setattr(_checkpoints, "_replay", lambda head, state: b"not what torch.save writes")
    saver = StateDictSaver()
    state = _mixed_state()
    for shift in (0.0, 2.0):
        state = _mixed_state(shift)
        assert saver.to_bytes(state) == _torch_save(state)
    assert not saver._heads and len(saver._refused) == 1
