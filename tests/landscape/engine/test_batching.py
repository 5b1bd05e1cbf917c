"""The batching ways as a registry: every way is checked on a probe before use, a given plan too.

A folded convolution honours ``padding_mode``; a way that does not apply is refused before any
point, naming the layer; a way PyTorch warns about (no vmap batching rule) is not chosen."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import landscape
from collector.common import InvalidParameterError
from landscape.engine import Engine
from landscape.geometry import moved_names
from landscape.tasks import Supervised
from tests.landscape.engine.test_folded import _naive


class PaddedCNN(nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding=1, padding_mode=mode)
        self.c2 = nn.Conv2d(4, 4, 3, padding=2, padding_mode=mode)
        self.c3 = nn.Conv1d(4, 4, 3, padding=1, padding_mode=mode)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.c2(torch.relu(self.c1(x))))
        h = torch.relu(self.c3(h.flatten(2)))
        return self.fc(h.mean(2))


def _random_plane(net, x, y, plan):
    names, _ = moved_names(net, None)
    g = torch.Generator().manual_seed(1)
    v = {k: torch.randn(t.shape, generator=g) * 0.1 for k, t in net.named_parameters()}
    w = {k: torch.randn(t.shape, generator=g) * 0.1 for k, t in net.named_parameters()}
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions=(v, w), normalization="none",
                                     size=4, num_samples=len(x), plan=plan)
    pts = np.stack(np.meshgrid(ls.x, ls.y), -1).reshape(-1, 2)
    centre = {k: t.detach().clone() for k, t in net.state_dict().items()}
    ref = _naive(net, names, [v[k] for k in names], [w[k] for k in names], centre, x, y, pts, nn.CrossEntropyLoss())
    return ls, ref.reshape(ls.z.shape)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
def test_folded_convolutions_honour_padding_mode(mode):
    torch.manual_seed(0)
    net = PaddedCNN(mode).eval()
    x, y = torch.randn(12, 2, 6, 6), torch.randint(0, 3, (12,))
    ls, ref = _random_plane(net, x, y, {"points_per_call": 4, "batching": "folded"})
    assert ls.metadata["batching"] == "folded"
    np.testing.assert_allclose(ls.z, ref, rtol=1e-5, atol=1e-6)


class ReadsItsOwnWeight(nn.Module):
    """A parent reading its child's weight in its forward: points cannot be folded into the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.fc.weight.t() + self.fc.bias


def test_a_given_way_that_does_not_apply_is_refused_before_any_point_naming_the_layer(monkeypatch):
    torch.manual_seed(0)
    x, y = torch.randn(10, 5), torch.randint(0, 3, (10,))
    evaluated = []
    original = Engine.evaluate
    monkeypatch.setattr(Engine, "evaluate", lambda self, pts, start=0, **kw: evaluated.append(
        (self.p, len(pts))) or original(self, pts, start, **kw))
    with pytest.raises(InvalidParameterError, match=r"batching 'sequential' cannot run this network.*not an "
                                                    r"nn.Sequential.*HINT: plan='auto'"):
        landscape.compute_landscape(ReadsItsOwnWeight(), nn.CrossEntropyLoss(), (x, y), size=3, num_samples=10,
                                    plan={"points_per_call": 4, "batching": "sequential"})
    assert all(n <= 8 for _, n in evaluated)  # only the probe's few points, never the landscape's


def test_folded_on_a_bert_is_refused_naming_the_layer():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, num_labels=2)
    torch.manual_seed(0)
    net = transformers.BertForSequenceClassification(cfg).eval()
    ids, y = torch.randint(0, 50, (8, 6)), torch.randint(0, 2, (8,))
    task = Supervised(nn.CrossEntropyLoss(), output=lambda o: o.logits)
    with pytest.raises(InvalidParameterError, match=r"batching 'folded' cannot run this network and task: "
                                                    r".* in layer bert\.embeddings\."):
        landscape.compute_landscape(net, data=(ids, y), task=task, size=3, num_samples=8,
                                    plan={"points_per_call": 4, "batching": "folded"})


class Attention(nn.Module):
    """Scaled dot-product attention: under vmap PyTorch runs its CPU kernel point by point, and warns."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.o = nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.q(x).view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2)
        a = F.scaled_dot_product_attention(h, h, h).transpose(1, 2).reshape(x.shape[0], x.shape[1], 8)
        return self.o(a.mean(1))


def test_a_way_pytorch_warns_about_is_not_chosen_and_nothing_is_printed():
    torch.manual_seed(0)
    net = Attention()
    x, y = torch.randn(16, 4, 8), torch.randint(0, 3, (16,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=16)
    assert ls.metadata["batching"] != "vmap"
    assert not [w for w in caught if "performance drop" in str(w.message)]
    with pytest.raises(InvalidParameterError, match="PyTorch warns when it runs so: There is a performance drop"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=16,
                                    plan={"points_per_call": 4, "batching": "vmap"})


def test_a_loss_without_a_batching_rule_keeps_the_batched_forward_without_warnings():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    x, y = torch.randn(20, 6), torch.randint(0, 3, (20,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ls, ref = _random_plane(net, x, y, "auto")
        mm = landscape.compute_landscape(net, nn.MultiMarginLoss(), (x, y), size=4, num_samples=20)
    assert ls.metadata["points_per_call"] > 1
    np.testing.assert_allclose(ls.z, ref, rtol=1e-5, atol=1e-6)
    assert mm.metadata["points_per_call"] > 1 and mm.metadata["batching"] == "sequential"
    assert not [w for w in caught if "performance drop" in str(w.message)]


def test_a_call_s_cross_entropy_over_few_classes_keeps_the_bits_of_the_flat_layout(monkeypatch):
    """A cross-entropy over fewer classes than a SIMD register is computed over a (points, classes, samples)
    view when, on the first call, that gives the losses of the flat (points x samples, classes) layout bit for
    bit (it is several times faster on the CPU there); every call's losses are the flat layout's, whichever
    is used; NaN outputs, and more classes, keep the flat layout."""
    from landscape.engine._batched import FEW_CLASSES, batched_loss
    from landscape.tasks import mean_loss

    dims: list[int] = []
    forward = nn.CrossEntropyLoss.forward

    def spy(self, input, target):  # the layout each call used
        dims.append(input.dim())
        return forward(self, input, target)

    monkeypatch.setattr(nn.CrossEntropyLoss, "forward", spy)
    g = torch.Generator().manual_seed(0)
    for classes in (3, 10, FEW_CLASSES + 24):
        f = batched_loss(nn.CrossEntropyLoss(), mean_loss)
        y = torch.randint(0, classes, (50,), generator=g)
        dims.clear()
        for call in range(3):
            out = torch.randn(6, 50, classes, generator=g) * 4
            flat = F.cross_entropy(out.reshape(-1, classes), y.repeat(6), reduction="none").reshape(6, -1).mean(1)
            assert torch.equal(f(out, y), flat), (classes, call)
        # the first call computes both layouts and compares them; then one only: the view where they agreed
        # (below a register's width on every SIMD PyTorch uses: 3 classes; 10 with AVX-512), else the flat one
        if classes >= FEW_CLASSES:
            assert dims == [2, 2, 2], (classes, dims)
        else:
            assert dims[:2] == [3, 2] and dims[2:] in ([3, 3], [2, 2]), (classes, dims)
            if classes == 3:
                assert dims[2:] == [3, 3]
    f = batched_loss(nn.CrossEntropyLoss(), mean_loss)
    out = torch.randn(4, 20, 10, generator=g)
    out[1, 3, 2] = float("nan")
    y = torch.randint(0, 10, (20,), generator=g)
    dims.clear()
    got = f(out, y)
    assert torch.isnan(got[1]) and torch.isfinite(got[[0, 2, 3]]).all()
    f(torch.randn(4, 20, 10, generator=g), y)
    assert dims[-1] == 2  # the views disagreed on NaN: the flat layout from then on
