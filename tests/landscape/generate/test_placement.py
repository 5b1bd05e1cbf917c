"""A network its caller placed over devices (Hugging Face's ``device_map``) is evaluated where it is."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector import InvalidParameterError
from landscape.tasks import HuggingFace


def _dispatched():
    transformers = pytest.importorskip("transformers")
    accelerate = pytest.importorskip("accelerate")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=61, n_positions=16)
    plain = transformers.GPT2LMHeadModel(config).eval()
    # every layer placed by name, as device_map="auto" does over several GPUs (here each on the CPU)
    device_map = dict.fromkeys(("transformer.wte", "transformer.wpe", "transformer.drop", "transformer.h.0", "transformer.h.1", "transformer.ln_f", "lm_head"), "cpu")
    placed = accelerate.dispatch_model(copy.deepcopy(plain), device_map=device_map)
    assert placed.hf_device_map == device_map
    ids = torch.randint(0, 61, (4, 10), generator=torch.Generator().manual_seed(2))
    return plain, placed, {"input_ids": ids, "labels": ids}


def test_a_device_map_model_is_never_moved(monkeypatch):
    plain, placed, batch = _dispatched()
    want = landscape.compute_landscape(plain, data=[batch], task=HuggingFace(), size=3, num_samples=None)

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__} moved: {args} {kwargs}")

    monkeypatch.setattr(nn.Module, "to", refuse)  # nothing moves the model (or the engine's copy of its modules)
    monkeypatch.setattr(nn.Module, "_apply", refuse)
    for memory in ("fast", "lean"):
        got = landscape.compute_landscape(placed, data=[batch], task=HuggingFace(), size=3, num_samples=None,
                                          memory=memory)
        np.testing.assert_array_equal(got.z, want.z)


def test_device_ids_are_refused_for_a_placed_model():
    _, placed, batch = _dispatched()
    with pytest.raises(InvalidParameterError, match="'device_ids' parameter of compute_landscape must be None for a "
                                                    "network placed over devices"):
        landscape.compute_landscape(placed, data=[batch], task=HuggingFace(), size=3, device_ids=[0])
