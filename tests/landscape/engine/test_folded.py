"""Points folded into the batch: ordinary modules at several points per call, against a plain loop."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from landscape.engine import Engine, EngineSpec, Samples
from landscape.engine._folded import fold_network
from landscape.examples import MLP, SmallCNN
from landscape.tasks import Supervised


class ResidualCNN(nn.Module):
    """Conv + BN + a parameter-free option-A shortcut + global pooling, as CIFAR ResNets are written."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        short = F.pad(h[:, :, ::2, ::2], (0, 0, 0, 0, 4, 4))
        h = F.relu(self.bn2(self.conv2(h)) + short)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


class TokenNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 12)
        self.norm = nn.LayerNorm(12)
        self.out = nn.Linear(12, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.emb(ids)).mean(1))


class LooseParameter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.scale = nn.Parameter(torch.ones(2))  # read by this module's own forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale


class SharedLayer(nn.Module):
    """One Linear applied twice, both outputs held until the end, and a branch held while two more
    layers run: the folded products' reused outputs (one per product of a call) must not alias."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 24)
        self.mid = nn.Linear(24, 24)
        self.side = nn.Linear(24, 24)
        self.out = nn.Linear(24, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        a = self.mid(h)
        b = self.mid(torch.sin(a))  # the same layer again, a still held
        branch = self.side(h)
        deep = self.side(torch.relu(a + b))
        return self.out(torch.tanh(a * b + branch - deep))


def _setup(net: nn.Module, x: torch.Tensor, y: torch.Tensor):
    torch.manual_seed(0)
    net.eval()
    with torch.no_grad():  # non-trivial running statistics
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    names = [k for k, _ in net.named_parameters()]
    g = torch.Generator().manual_seed(2)
    params = dict(net.named_parameters())
    v = [0.2 * torch.randn(params[k].shape, generator=g) for k in names]
    w = [0.2 * torch.randn(params[k].shape, generator=g) for k in names]
    centre = {k: t.detach().clone() for k, t in net.state_dict().items()}
    return names, v, w, centre


def _naive(net, names, v, w, centre, x, y, points, loss_fn):
    model = copy.deepcopy(net).eval()
    out = []
    with torch.no_grad():
        for a, b in points:
            state = dict(centre)
            for k, dv, dw in zip(names, v, w):
                state[k] = centre[k] + float(a) * dv + float(b) * dw
            model.load_state_dict(state)
            out.append(float(loss_fn(model(x), y)))
    return np.array(out)


CASES = [
    ("mlp", lambda: MLP(hidden=32), (torch.rand(40, 64), torch.randint(0, 10, (40,)))),
    ("cnn", lambda: SmallCNN(channels=4), (torch.rand(24, 1, 8, 8), torch.randint(0, 10, (24,)))),
    ("residual", ResidualCNN, (torch.randn(20, 3, 8, 8), torch.randint(0, 5, (20,)))),
    ("tokens", TokenNorm, (torch.randint(0, 40, (30, 7)), torch.randint(0, 3, (30,)))),
    ("shared_layer", SharedLayer, (torch.randn(36, 16), torch.randint(0, 4, (36,)))),
]


@pytest.mark.parametrize("name, make, data", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("batches", [1, 3])
def test_folded_points_equal_a_plain_loop(name, make, data, batches):
    net = make()
    x, y = data
    names, v, w, centre = _setup(net, x, y)
    loss_fn = nn.CrossEntropyLoss()
    n = x.shape[0]
    cut = [(s, min(n, s + -(-n // batches))) for s in range(0, n, -(-n // batches))]
    samples = Samples([(x[a:b], y[a:b]) for a, b in cut], [b - a for a, b in cut])
    pts = np.random.default_rng(0).uniform(-1, 1, (10, 2))
    spec = dict(network=net, task=Supervised(loss_fn), metrics={}, samples=samples, names=names, centre=centre,
                v=v, w=w)
    folded = Engine(EngineSpec(**spec, points_per_call=4, batching="folded"))
    got = folded.evaluate(pts)["loss"]
    assert folded.batching_used == "folded"
    one = Engine(EngineSpec(**spec, points_per_call=1)).evaluate(pts)["loss"]
    ref = _naive(net, names, v, w, centre, x, y, pts, loss_fn)
    np.testing.assert_allclose(one, ref, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)
    # a point's value does not depend on the group it was evaluated in (the padding included)
    again = np.concatenate([folded.evaluate(pts[:4])["loss"], folded.evaluate(pts[4:], 4)["loss"]])
    np.testing.assert_array_equal(again, got)


def test_refused_where_folding_cannot_be_right():
    net = LooseParameter()
    names = [k for k, _ in net.named_parameters()]
    zeros = [torch.zeros_like(p) for p in net.parameters()]
    params = [p.detach() for p in net.parameters()]
    assert fold_network(net, names, params, zeros, zeros) is None
    bn = SmallCNN(channels=2).train()
    names = [k for k, _ in bn.named_parameters()]
    params = [p.detach() for p in bn.parameters()]
    zeros = [torch.zeros_like(p) for p in params]
    assert fold_network(bn, names, params, zeros, zeros) is None  # train-mode statistics mix samples


class HalfFoldable(nn.Module):
    """A foldable Linear before a GRU, which has no folded form."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.gru = nn.GRU(6, 3, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(self.fc(x))[0][:, -1]


def test_folding_in_place_replaces_nothing_when_a_layer_cannot_fold():
    net = HalfFoldable()
    names = [k for k, _ in net.named_parameters()]
    params = [p.detach() for p in net.parameters()]
    zeros = [torch.zeros_like(p) for p in params]
    assert fold_network(net, names, params, zeros, zeros, copy=False) is None
    assert type(net.fc) is nn.Linear and type(net.gru) is nn.GRU  # refused before any replacement
    mlp = MLP(hidden=8).eval()
    names = [k for k, _ in mlp.named_parameters()]
    params = [p.detach() for p in mlp.parameters()]
    zeros = [torch.zeros_like(p) for p in params]
    folded = fold_network(mlp, names, params, zeros, zeros, copy=False)
    assert folded is not None and folded.net is mlp and type(mlp.fc1) is not nn.Linear


def test_point_metrics_beside_folded_groups_see_the_network_itself():
    net = MLP(hidden=8)
    x, y = torch.rand(12, 64), torch.randint(0, 10, (12,))
    names, v, w, centre = _setup(net, x, y)
    task = Supervised(nn.CrossEntropyLoss())

    def point_loss(model, task_, samples, moved):  # needs the plain network at the point
        assert type(model.fc1) is nn.Linear
        return float(task_(model, samples.batches[0]))

    point_loss.metric_inputs = "point"
    samples = Samples([(x, y)], [12])
    eng = Engine(EngineSpec(net, task, {"again": point_loss}, samples, names, centre, v, w, points_per_call=4,
                            batching="folded"))
    pts = np.random.default_rng(1).uniform(-1, 1, (6, 2))
    res = eng.evaluate(pts)
    assert eng.batching_used == "folded"
    np.testing.assert_allclose(res["again"], res["loss"], rtol=1e-5)
    np.testing.assert_allclose(res["loss"], _naive(net, names, v, w, centre, x, y, pts, nn.CrossEntropyLoss()),
                               rtol=2e-5, atol=1e-6)


def test_groups_build_only_the_parameters_the_folded_layers_read():
    net = MLP(hidden=8)
    x, y = torch.rand(12, 64), torch.randint(0, 10, (12,))
    names, v, w, centre = _setup(net, x, y)
    eng = Engine(EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, Samples([(x, y)], [12]), names, centre, v, w,
                            points_per_call=4, batching="folded"))
    pts = np.random.default_rng(3).uniform(-1, 1, (5, 2))
    got = eng.evaluate(pts)["loss"]
    # fc1 sees the inputs themselves: its output is linear in the point and computed from three products,
    # so its parameters are never built per point
    assert [names[i] for i in eng._group_idx] == ["fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
    # on the CPU the Linear weights are built as (p, in, out), the layout MKL's batched product reads fastest
    assert sorted(names[i] for i in eng._group_t) == ["fc2.weight", "fc3.weight"]
    np.testing.assert_allclose(got, _naive(net, names, v, w, centre, x, y, pts, nn.CrossEntropyLoss()),
                               rtol=2e-5, atol=1e-6)
