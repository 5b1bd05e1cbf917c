"""The engine on a CUDA device: the naive loop's values, the model at the centre, memory held once.

Skipped without CUDA (the ``cuda`` marker). Each landscape is compared with a naive loop moving a
copy of the network in place on the same device, point by point, with the documented directions.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from landscape.engine import _points as points_module
from landscape.geometry._directions import random_directions
from landscape.geometry._state import moved_names
from landscape.tasks import HuggingFace
from tests.landscape._helpers import naive_in_place

pytestmark = pytest.mark.cuda


def _gpt2(dtype: torch.dtype = torch.float32):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=97, n_positions=32)
    net = transformers.GPT2LMHeadModel(config).eval().to("cuda", dtype)
    ids = torch.randint(0, 97, (8, 24), generator=torch.Generator().manual_seed(1))
    return net, {"input_ids": ids, "labels": ids}


def _directions(net: nn.Module, seed: int):
    names, _ = moved_names(net, None)
    params = dict(net.named_parameters())
    v, w = random_directions([params[n].detach() for n in names], seed, "layer", names=names)
    return names, v, w


@pytest.mark.parametrize("memory", ["fast", "lean"])
def test_gpt2_on_cuda_is_the_naive_cuda_loop_and_the_model_at_the_centre(memory):
    net, batch = _gpt2()
    before = [(k, p.data_ptr(), p.detach().clone()) for k, p in net.named_parameters()]
    ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=2,
                                     memory=memory)
    names, v, w = _directions(net, 2)
    want = naive_in_place(net, names, v, w, ls.x, ls.y, lambda m: m(**{k: t.cuda() for k, t in batch.items()}).loss)
    np.testing.assert_allclose(ls.z, want, rtol=1e-5)
    with torch.inference_mode():
        own = float(net(**{k: t.cuda() for k, t in batch.items()}).loss)
    assert ls.z[1, 1] == own  # the centre: the model itself, bit for bit
    after = [(k, p.data_ptr(), p.detach()) for k, p in net.named_parameters()]
    assert [(k, ptr) for k, ptr, _ in after] == [(k, ptr) for k, ptr, _ in before]  # not copied, not moved
    assert all(torch.equal(a, b) for (_, _, a), (_, _, b) in zip(before, after))


def test_bf16_on_cuda_is_the_naive_bf16_loop_bit_for_bit():
    net, batch = _gpt2(torch.bfloat16)
    ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=4)
    names, v, w = _directions(net, 4)
    want = naive_in_place(net, names, v, w, ls.x, ls.y, lambda m: m(**{k: t.cuda() for k, t in batch.items()}).loss)
    np.testing.assert_array_equal(ls.z, want)


def test_fast_and_lean_on_cuda_give_the_same_bits_and_the_cpu_values_to_rounding():
    net, batch = _gpt2()
    runs = {m: landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=5,
                                           memory=m) for m in ("fast", "lean")}
    np.testing.assert_array_equal(runs["fast"].z, runs["lean"].z)
    cpu_net = copy.deepcopy(net).cpu()
    names, v, w = _directions(cpu_net, 5)  # the directions are drawn on the CPU wherever the network is
    want = naive_in_place(cpu_net, names, v, w, runs["fast"].x, runs["fast"].y, lambda m: m(**batch).loss)
    np.testing.assert_allclose(runs["fast"].z, want, rtol=1e-4)


def test_directions_on_cuda_cost_their_memory_and_lean_none(monkeypatch):
    """Peak CUDA memory above the model: fast holds two float32 directions (and, the network being small, its
    whole point: one more model size), or reads each tensor as a layer does; lean draws one tensor at a time."""
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(8)]).cuda().eval()
    x, y = torch.randn(4, 1024), torch.randn(4, 1024)
    size = sum(p.numel() * p.element_size() for p in net.parameters())
    assert size <= points_module.SMALL_NETWORK_BYTES
    peaks = {}
    for label, memory, limit in (("fast", "fast", 0), ("lean", "lean", 0),
                                 ("fast, small", "fast", points_module.SMALL_NETWORK_BYTES)):
        monkeypatch.setattr(points_module, "SMALL_NETWORK_BYTES", limit)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        landscape.compute_landscape(net, nn.MSELoss(), (x, y), size=3, num_samples=None, memory=memory, seed=0,
                                    plan={"points_per_call": 1})
        torch.cuda.synchronize()
        peaks[label] = (torch.cuda.max_memory_allocated() - base) / size
    print(f"CUDA peak above the model, in model sizes: {peaks}")
    assert 1.9 <= peaks["fast"] <= 2.6  # two directions, a point's tensor and activations
    assert peaks["lean"] <= 0.6
    assert 2.9 <= peaks["fast, small"] <= 3.6  # and the whole point


def test_a_point_formed_whole_on_cuda_is_each_tensor_formed_alone_bit_for_bit():
    """point_values' multi-tensor additions (CUDA's fused kernels over many tensors) against point_value."""
    from landscape.engine import point_value, point_values

    g = torch.Generator().manual_seed(0)
    shapes = [(3, 3, 3, 16), (16,), (1000, 70), (5,), (70_001,), (64, 64)]
    centre = [torch.randn(s, generator=g).cuda() for s in shapes]
    v = [torch.randn(s, generator=g).cuda() for s in shapes]
    w = [torch.randn(s, generator=g).cuda() for s in shapes]
    for a, b in [(0.3, -0.7), (0.0, 0.5), (-0.123456789, 0.0), (0.987654321, 0.333333333)]:
        got = point_values(centre, v, w, a, b)
        for i, c in enumerate(centre):
            assert torch.equal(got[i], point_value(c, v[i], w[i], a, b)), (a, b, shapes[i])


def test_a_network_over_cuda_and_cpu_is_evaluated_where_it_is():
    """Parameters on two devices (as device_map places a model): nothing moved, the all-CPU values."""
    torch.manual_seed(0)

    class Split(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(16, 32)
            self.b = nn.Linear(32, 4).cuda()

        def forward(self, x):
            return self.b(torch.tanh(self.a(x)).cuda())

    net = Split().eval()
    x, y = torch.randn(20, 16), torch.randint(0, 4, (20,))

    def task(model, batch):
        xb, yb = batch
        return nn.functional.cross_entropy(model(xb.cpu()), yb.cuda())

    ls = landscape.compute_landscape(net, data=[(x, y)], task=task, size=3, num_samples=None, seed=1)
    assert net.a.weight.device.type == "cpu" and net.b.weight.device.type == "cuda"
    names, v, w = _directions(net, 1)
    model = copy.deepcopy(net)
    params = dict(model.named_parameters())
    centre = {n: params[n].detach().clone() for n in names}
    want = np.empty((3, 3))
    with torch.no_grad():
        for i, b in enumerate(ls.y):
            for j, a in enumerate(ls.x):
                for n, dv, dw in zip(names, v, w):
                    c = centre[n]
                    params[n].copy_(torch.add(torch.add(c, dw.to(c.device), alpha=float(b)), dv.to(c.device),
                                              alpha=float(a)))
                want[i, j] = float(task(model, (x, y)))
    np.testing.assert_allclose(ls.z, want, rtol=1e-5)
