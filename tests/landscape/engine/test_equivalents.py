"""Modules replaced by the same function in a faster form: values of a real tiny GPT-2 unchanged."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from landscape import compute_landscape
from landscape.engine._equivalents import TanhGELU, replace_equivalents
from landscape.tasks import HuggingFace
from tests.landscape.engine.test_tasks import _directions

transformers = pytest.importorskip("transformers")


def _gpt2(activation: str = "gelu_new"):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                     activation_function=activation)
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("activation", ["gelu_new", "gelu_fast"])
def test_hugging_face_tanh_gelus_equal_the_fused_kernel(activation):
    from transformers.activations import ACT2FN

    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    # (gelu_fast writes sqrt(2/pi) to ten digits: 3e-11 relative, far below float32's 6e-8)
    np.testing.assert_allclose(ACT2FN[activation](x), F.gelu(x, approximate="tanh"), rtol=1e-10, atol=1e-14)
    model = _gpt2(activation)
    original = copy.deepcopy(model)
    assert replace_equivalents(model) == 2  # one per block
    assert all(isinstance(b.mlp.act, TanhGELU) for b in model.transformer.h)
    ids = torch.randint(0, 50, (4, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        np.testing.assert_allclose(model(input_ids=ids).logits, original(input_ids=ids).logits, rtol=1e-5, atol=1e-6)


def test_a_gpt2_landscape_equals_the_users_own_loop_and_the_model_is_untouched():
    model = _gpt2()
    ids = torch.randint(0, 50, (6, 16), generator=torch.Generator().manual_seed(2))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
    dv, dw = _directions(model)
    ls = compute_landscape(model, data=[batch], task=HuggingFace(), directions=(dv, dw), normalization="none",
                           size=3, num_samples=6)
    # the reference runs the user's own module (gelu_new as five element-wise ops), its parameters set in
    # place (the output layer is tied to the token embedding: it moves with it)
    ref = np.empty((len(ls.y), len(ls.x)))
    net = copy.deepcopy(model)
    centre = {k: p.detach().clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        for i, b in enumerate(ls.y):
            for j, a in enumerate(ls.x):
                for k, p in net.named_parameters():
                    p.copy_(centre[k] + float(a) * dv[k] + float(b) * dw[k])
                ref[i, j] = float(net(**batch).loss)
    np.testing.assert_allclose(ls.z, ref, rtol=1e-5, atol=1e-7)
    assert type(model.transformer.h[0].mlp.act).__name__ == "NewGELUActivation"
