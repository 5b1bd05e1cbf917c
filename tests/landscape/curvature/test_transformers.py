"""Curvature through attention (the fused SDPA kernels have no double backward), against a dense
Hessian of the same model with plain eager attention."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

from landscape.curvature import hessian_eigs

transformers = pytest.importorskip("transformers")


def _gpt2(attn: str) -> nn.Module:
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=4, vocab_size=8, n_positions=4,
                                     attn_implementation=attn)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).double().eval()


def _lm_loss(model, ids):
    logits = model(input_ids=ids).logits
    return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def test_gpt2_hessian_through_sdpa_equals_the_dense_hessian_of_eager_attention(caplog):
    ids = torch.randint(0, 8, (3, 4), generator=torch.Generator().manual_seed(1))
    sdpa = _gpt2("sdpa")
    assert sdpa.config._attn_implementation == "sdpa"
    # the reference: the same weights, attention as plain matmul and softmax, a dense Hessian by autograd
    eager = _gpt2("eager")
    eager.load_state_dict(sdpa.state_dict())
    names = [n for n, _ in eager.named_parameters()]  # tied head once, under the embedding's name
    shapes = [p.shape for _, p in eager.named_parameters()]
    sizes = [math.prod(s) for s in shapes]
    flat = torch.cat([p.detach().reshape(-1) for _, p in eager.named_parameters()])

    def f(x):
        params = {n: t.reshape(s) for n, t, s in zip(names, torch.split(x, sizes), shapes)}
        params["lm_head.weight"] = params["transformer.wte.weight"]
        return _lm_loss(lambda **kw: functional_call(eager, params, (), kw), ids)

    dense = torch.autograd.functional.hessian(f, flat, vectorize=True).numpy()  # 300 x 300
    want = np.linalg.eigvalsh((dense + dense.T) / 2)[::-1][:2]

    def task(model, batch):
        return _lm_loss(model, batch)

    with caplog.at_level(logging.INFO, logger="landscape"):
        eig = hessian_eigs(sdpa, data=[ids], task=task, k=2, num_samples=None, dtype=torch.float64, progress=False)
    assert eig.converged
    np.testing.assert_allclose(eig.eigenvalues, want, rtol=1e-8, atol=1e-10 * abs(want[0]))
    assert any("math kernel" in r.getMessage() for r in caplog.records)


def test_transformer_encoder_hessian_vector_products_equal_double_backward():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from landscape.curvature import HessianOperator
    from landscape.engine import collect
    from landscape.tasks import Supervised

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    net = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).double().eval()
    x = torch.randn(4, 5, 4, dtype=torch.float64)
    target = torch.randn(4, 5, 4, dtype=torch.float64)
    params = list(net.parameters())

    def loss_fn(out, y):
        return ((out - y) ** 2).mean()

    task = Supervised(loss_fn)
    names = [n for n, _ in net.named_parameters()]
    op = HessianOperator(net, task, collect((x, target), None, task, caller="test"), names, dtype=torch.float64)
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        v = [torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in params]
        # the reference: torch.autograd.grad twice, with the math kernel (the fused ones cannot)
        with sdpa_kernel(SDPBackend.MATH):
            grads = torch.autograd.grad(loss_fn(net(x), target), params, create_graph=True)
            want = torch.autograd.grad(sum((g * t).sum() for g, t in zip(grads, v)), params)
        got = op.matvec(torch.cat([t.reshape(-1) for t in v]))
        torch.testing.assert_close(got, torch.cat([t.reshape(-1) for t in want]), rtol=1e-10, atol=1e-12)
