"""Curvature on a CUDA device: Hessian eigenvalues through attention equal the CPU's, in float64 and,
to the documented float32 accuracy, in float32. Skipped without CUDA (the ``cuda`` marker)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

from landscape.curvature import hessian_eigs

pytestmark = pytest.mark.cuda
transformers = pytest.importorskip("transformers")


def _gpt2() -> nn.Module:
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=23, n_positions=12,
                                     attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


def _task(model, ids):
    logits = model(input_ids=ids).logits
    return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def test_hessian_through_sdpa_on_cuda_equals_the_cpu(caplog):
    ids = torch.randint(0, 23, (4, 12), generator=torch.Generator().manual_seed(1))
    net = _gpt2()
    kw = dict(data=[ids], task=_task, k=3, num_samples=None, progress=False, tol=1e-8, max_iter=200,
              dtype=torch.float64)
    cpu = hessian_eigs(net, device="cpu", **kw)
    with caplog.at_level(logging.INFO, logger="landscape"):
        gpu = hessian_eigs(net.cuda(), device="cuda", **kw)
    assert cpu.converged and gpu.converged
    np.testing.assert_allclose(gpu.eigenvalues, cpu.eigenvalues, rtol=1e-7)
    assert any("math kernel" in r.getMessage() for r in caplog.records)
    # float32 products: the top eigenvalue within the documented few parts in 1e5 of float64's
    f32 = hessian_eigs(net, device="cuda", **{**kw, "tol": 1e-4, "dtype": torch.float32})
    np.testing.assert_allclose(f32.eigenvalues[0], cpu.eigenvalues[0], rtol=1e-4)
    assert next(net.parameters()).device.type == "cuda"  # the network itself is left where it was
