"""Convolution + batch norm fused per point in eval mode: the network's own values, whatever moves."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from landscape import compute_landscape
from landscape.engine._fuse import fuse_conv_bn
from landscape.examples import SmallCNN
from tests.landscape.engine.test_folded import ResidualCNN


def _randomise_statistics(net: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return net.eval()


class Branchy(nn.Module):
    """Data-dependent control flow: does not trace, runs as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.conv(x))
        if h.sum() > 0:
            h = F.relu(h)
        return self.fc(h.mean((2, 3)))


def test_pairs_are_fused_and_follow_the_parameters_and_statistics_they_are_built_from():
    torch.manual_seed(0)
    net = _randomise_statistics(ResidualCNN(), 1)
    fused = fuse_conv_bn(net)
    assert fused is not None and len(fused.pairs) == 2
    x = torch.randn(6, 3, 8, 8)
    with torch.no_grad():
        np.testing.assert_allclose(fused(x), net(x), rtol=1e-5, atol=1e-6)
        for p in net.parameters():  # moved in place, as the engine does
            p.add_(0.1 * torch.randn_like(p))
        net.bn1.running_var.mul_(2.0)
        fused.refresh()
        np.testing.assert_allclose(fused(x), net(x), rtol=1e-5, atol=1e-6)
    assert all(type(m) is not nn.Conv2d or not name.startswith("_landscape") for name, m in net.named_modules())
    assert fuse_conv_bn(Branchy().eval()) is None
    assert fuse_conv_bn(net.train()) is None  # batch statistics: nothing to fuse


def test_interpolation_between_cnns_with_different_statistics_ends_at_each_models_own_loss():
    torch.manual_seed(0)
    a = _randomise_statistics(SmallCNN(channels=4), 1)
    b = _randomise_statistics(copy.deepcopy(a), 2)
    with torch.no_grad():
        for p in b.parameters():
            p.add_(0.2 * torch.randn_like(p))
    x, y = torch.rand(24, 1, 8, 8), torch.randint(0, 10, (24,))
    assert fuse_conv_bn(copy.deepcopy(a)) is not None  # one point per call below runs fused
    # the statistics carried with the weights (the default estimates them again at every point)
    ls = compute_landscape(a, nn.CrossEntropyLoss(), (x, y), between=(a, b), x=(0.0, 1.0, 5), num_samples=24,
                           plan={"points_per_call": 1}, bn_statistics="clamped")
    with torch.no_grad():
        own = [float(nn.functional.cross_entropy(m(x), y)) for m in (a, b)]
    np.testing.assert_allclose([ls.z[0], ls.z[-1]], own, rtol=1e-5)


def test_a_network_that_does_not_trace_gives_the_loop_values():
    torch.manual_seed(0)
    net = _randomise_statistics(Branchy(), 3)
    x, y = torch.randn(10, 3, 6, 6), torch.randint(0, 2, (10,))
    names = [k for k, _ in net.named_parameters()]
    g = torch.Generator().manual_seed(4)
    dv = {k: 0.1 * torch.randn(p.shape, generator=g) for k, p in net.named_parameters()}
    dw = {k: 0.1 * torch.randn(p.shape, generator=g) for k, p in net.named_parameters()}
    ls = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions=(dv, dw), normalization="none", size=3,
                           num_samples=10, plan={"points_per_call": 1})
    model = copy.deepcopy(net)
    centre = {k: v.clone() for k, v in net.state_dict().items()}
    ref = np.empty((3, 3))
    with torch.no_grad():
        for i, bb in enumerate(ls.y):
            for j, aa in enumerate(ls.x):
                model.load_state_dict({k: centre[k] + aa * dv[k] + bb * dw[k] if k in names else centre[k]
                                       for k in centre})
                ref[i, j] = float(nn.functional.cross_entropy(model(x), y))
    np.testing.assert_allclose(ls.z, ref, rtol=1e-5, atol=1e-7)
