"""Sharpness scalars against independent computations: a dense search of the scaled ball (numpy),
the closed form of a quadratic loss's average case, a plain Monte Carlo loop, and a dense Hessian."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from collector.common import InvalidParameterError
from landscape.curvature import Sharpness, sharpness
from landscape.curvature._sharpness import apgd_checkpoints


class Tiny(nn.Module):
    """``a * tanh(b * x)``: two parameters, a loss that is not convex in them."""

    def __init__(self, a: float = 0.5, b: float = 2.0, c: float | None = None) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.b = nn.Parameter(torch.tensor(b, dtype=torch.float64))
        # a third parameter at exactly zero: the scaled ball holds it there
        self.c = None if c is None else nn.Parameter(torch.tensor(c, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.a * torch.tanh(self.b * x)
        return out if self.c is None else out + self.c * x


def _tiny_data(n: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    x = g.normal(size=n)
    return x, 0.8 * np.tanh(1.5 * x) + 0.1 * g.normal(size=n)


def _mse(model, batch):
    xb, yb = batch
    return ((model(xb) - yb) ** 2).mean()


def _np_loss(a, b, x, y):
    """The tiny model's mean squared error at arrays of (a, b), written out in numpy."""
    a, b = np.asarray(a), np.asarray(b)
    return ((a[..., None] * np.tanh(b[..., None] * x) - y) ** 2).mean(-1)


def _dense_worst(a0: float, b0: float, x, y, rho: float, p) -> float:
    """max over ||(da/|a0|, db/|b0|)||_p <= rho of L - L(w): a grid over the ball, then a finer grid
    around its best point."""
    base = float(_np_loss(a0, b0, x, y))
    if p == "inf":
        t = np.linspace(-rho, rho, 801)
        g1, g2 = np.meshgrid(t, t)
    else:
        r, th = np.meshgrid(np.linspace(0, rho, 201), np.linspace(0, 2 * np.pi, 4001))
        g1, g2 = r * np.cos(th), r * np.sin(th)
    vals = _np_loss(a0 + abs(a0) * g1, b0 + abs(b0) * g2, x, y)
    i = np.unravel_index(np.argmax(vals), vals.shape)
    c1, c2, h = g1[i], g2[i], 4 * rho / 400
    f1, f2 = np.meshgrid(np.linspace(c1 - h, c1 + h, 401), np.linspace(c2 - h, c2 + h, 401))
    inside = np.maximum(abs(f1), abs(f2)) <= rho if p == "inf" else np.hypot(f1, f2) <= rho
    fine = _np_loss(a0 + abs(a0) * f1[inside], b0 + abs(b0) * f2[inside], x, y)
    return max(float(vals.max()), float(fine.max())) - base


def _tensors(x, y):
    return torch.tensor(x), torch.tensor(y)


@pytest.mark.parametrize("p", [2, "inf"])
@pytest.mark.parametrize("rho", [0.1, 0.3])
def test_adaptive_worst_matches_a_dense_search_of_the_scaled_ball(rho, p):
    x, y = _tiny_data()
    want = _dense_worst(0.5, 2.0, x, y, rho, p)
    got = sharpness(Tiny(), data=_tensors(x, y), task=_mse, kind="adaptive_worst", rho=rho, p=p, num_samples=None)
    assert isinstance(got, Sharpness) and got.kind == "adaptive_worst" and got.rho == rho
    assert got.value == pytest.approx(want, rel=0.01)
    assert got.value <= want * (1 + 1e-6)  # a point of the ball: not above the maximum (to the grid's resolution)
    assert got.details["p"] == p and got.details["iterations"] == 20 and got.details["nonfinite"] == 0
    assert got.details["loss"] == pytest.approx(float(_np_loss(0.5, 2.0, x, y)), rel=1e-12)


def test_adaptive_worst_needs_restarts_on_a_rugged_ball():
    """At rho=1 (weights moved by up to their own size) the maximum (a = 0) is away from where the
    ascent from one start leads; five seeded starts find it."""
    x, y = _tiny_data()
    for p in (2, "inf"):
        want = _dense_worst(0.5, 2.0, x, y, 1.0, p)
        got = sharpness(Tiny(), data=_tensors(x, y), task=_mse, kind="adaptive_worst", rho=1.0, p=p, num_samples=None,
                        iterations=50, restarts=5)
        assert got.value == pytest.approx(want, rel=0.01)


def test_a_zero_weight_stays_at_zero():
    """T = diag(|w|): a weight that is 0 cannot move (||T^-1 delta|| would be infinite), and takes none
    of the budget: the maximum is the two-parameter one. Five iterations reach it to 1e-6 (a start
    that gave the zero weight's coordinate a share of the sphere would still be 4e-4 short)."""
    x, y = _tiny_data()
    want = _dense_worst(0.5, 2.0, x, y, 0.3, 2)
    got = sharpness(Tiny(c=0.0), data=_tensors(x, y), task=_mse, kind="adaptive_worst", rho=0.3, num_samples=None,
                    iterations=5)
    assert got.value == pytest.approx(want, rel=1e-4)


def test_m_sharpness_is_the_mean_of_each_group_s_maximum():
    x, y = _tiny_data(n=32)
    got = sharpness(Tiny(), data=_tensors(x, y), task=_mse, kind="adaptive_worst", rho=0.3, m=16, num_samples=None,
                    restarts=3)
    want = [_dense_worst(0.5, 2.0, x[i:i + 16], y[i:i + 16], 0.3, 2) for i in (0, 16)]
    assert got.details["groups"] == 2 and got.details["m"] == 16
    np.testing.assert_allclose(got.details["per_group"], want, rtol=0.01)
    assert got.value == pytest.approx(np.mean(got.details["per_group"]), rel=1e-12)


def _linear_problem(n: int = 40, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.randn(n, 1, generator=g, dtype=torch.float64)
    torch.manual_seed(seed)
    net = nn.Linear(3, 1).double()
    return net, x, y


def test_adaptive_average_equals_the_closed_form_of_a_quadratic_loss():
    """L(w + d) = L(w) + g.d + d^T A d for a linear model's mean squared error (A = X~^T X~ / n, X~ = [X, 1]),
    so E[L(w + d)] - L(w) = rho^2 sum_i A_ii w_i^2 exactly, and the draws' variance is
    g^T S g + 2 tr((A S)^2) with S = rho^2 diag(w^2)."""
    net, x, y = _linear_problem()
    rho, draws = 0.2, 4000
    got = sharpness(net, nn.MSELoss(), (x, y), kind="adaptive_average", rho=rho, draws=draws, num_samples=None)
    xt = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], 1).numpy()
    w = np.concatenate([net.weight.detach().numpy().ravel(), net.bias.detach().numpy()])
    a = xt.T @ xt / len(x)
    s = np.diag(rho ** 2 * w ** 2)
    exact = float(np.trace(a @ s))
    grad = 2 * xt.T @ (xt @ w - y.numpy().ravel()) / len(x)
    sd = math.sqrt(grad @ s @ grad + 2 * np.trace(a @ s @ a @ s))
    assert got.details["draws"] == draws and got.details["nonfinite"] == 0
    assert got.details["std_error"] == pytest.approx(sd / math.sqrt(draws), rel=0.1)
    assert abs(got.value - exact) < 4 * got.details["std_error"]


def test_adaptive_average_against_a_plain_monte_carlo_loop():
    """A network's average case against 20000 draws of a plain loop (numpy's generator, its own forward)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).double()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(48, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (48,), generator=g)
    rho = 0.1
    got = sharpness(net, nn.CrossEntropyLoss(), (x, y), kind="adaptive_average", rho=rho, draws=400,
                    num_samples=None)
    w = [p.detach().numpy() for p in net.parameters()]
    rng = np.random.default_rng(7)

    def loss(ps):
        h = np.tanh(x.numpy() @ ps[0].T + ps[1])
        z = h @ ps[2].T + ps[3]
        z = z - z.max(1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y.numpy()]))

    vals = np.array([loss([t + rho * np.abs(t) * rng.standard_normal(t.shape) for t in w]) for _ in range(20000)])
    ref, ref_se = vals.mean() - loss(w), vals.std(ddof=1) / math.sqrt(len(vals))
    assert abs(got.value - ref) < 4 * math.hypot(got.details["std_error"], ref_se)
    assert got.details["std_error"] == pytest.approx(vals.std(ddof=1) / math.sqrt(400), rel=0.15)


def _hand_loss(net, x, y):
    """The two-layer tanh network's loss as a function of its flat parameters, written out by hand."""
    shapes = [p.shape for p in net.parameters()]
    sizes = [int(np.prod(s)) for s in shapes]

    def f(flat):
        w1, b1, w2, b2 = (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))
        return F.cross_entropy(torch.tanh(x.double() @ w1.T + b1) @ w2.T + b2, y)

    return f, torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])


def test_lambda_max_and_trace_equal_the_dense_hessian_s():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(60, 5, generator=g), torch.randint(0, 3, (60,), generator=g)
    f, flat = _hand_loss(net, x, y)
    dense = torch.autograd.functional.hessian(f, flat).numpy()
    eig = np.linalg.eigvalsh((dense + dense.T) / 2)
    got = sharpness(net, nn.CrossEntropyLoss(), (x, y), kind="lambda_max", num_samples=None, dtype="float64",
                    progress=False)
    assert got.value == pytest.approx(eig[-1], rel=1e-8)
    assert got.rho is None and got.details["converged"] and got.details["num_samples"] == 60
    tr = sharpness(net, nn.CrossEntropyLoss(), (x, y), kind="trace", num_samples=None, dtype="float64",
                   progress=False)
    lo, hi = tr.details["interval"]
    assert lo <= np.trace(dense) <= hi
    assert tr.details["std_error"] > 0


def test_lambda_max_of_the_ggn_on_a_linear_model_is_the_hessian_s():
    """curvature= reaches the operator: a linear model's mean squared error has GGN = Hessian =
    2/n X~^T X~ (X~ = [X, 1]), whose top eigenvalue numpy gives."""
    net, x, y = _linear_problem()
    xt = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], 1).numpy()
    want = np.linalg.eigvalsh(2 * xt.T @ xt / len(x))[-1]
    for curvature in ("hessian", "ggn"):
        got = sharpness(net, nn.MSELoss(), (x, y), kind="lambda_max", curvature=curvature, num_samples=None,
                        dtype="float64", progress=False)
        assert got.value == pytest.approx(want, rel=1e-8)


def test_same_seed_same_bits_and_the_network_untouched():
    x, y = _tiny_data()
    net = Tiny()
    before = [p.detach().clone() for p in net.parameters()]
    for kind in ("adaptive_worst", "adaptive_average"):
        a = sharpness(net, data=_tensors(x, y), task=_mse, kind=kind, rho=0.3, p="inf", num_samples=None, seed=4)
        b = sharpness(net, data=_tensors(x, y), task=_mse, kind=kind, rho=0.3, p="inf", num_samples=None, seed=4)
        assert a.value == b.value  # bit for bit
    for p, q in zip(before, net.parameters()):
        assert torch.equal(p, q)


class _Wall(nn.Module):
    """A loss that is NaN beyond w = 0.6 (and at negative w for the log)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(0.5, dtype=torch.float64))

    def forward(self, x):
        return torch.where(self.w < 0.6, torch.log(self.w) * x, torch.full_like(x, math.nan))


def _wall_task(model, batch):
    return model(batch[0]).mean()


def test_nonfinite_losses_are_counted_and_make_the_value_nan():
    data = (torch.ones(4, 1, dtype=torch.float64), torch.zeros(4))
    worst = sharpness(_Wall(), data=data, task=_wall_task, kind="adaptive_worst", rho=0.5, num_samples=None)
    assert math.isnan(worst.value) and worst.details["nonfinite"] > 0
    avg = sharpness(_Wall(), data=data, task=_wall_task, kind="adaptive_average", rho=0.5, num_samples=None)
    assert math.isnan(avg.value) and avg.details["nonfinite"] > 0
    assert "non-finite" in str(avg)


def test_apgd_checkpoints_are_croce_and_hein_s():
    # p = 0.22, 0.41, 0.57, 0.70, 0.80, 0.87, 0.93, 0.99 of the iterations, rounded up
    assert apgd_checkpoints(100) == [22, 41, 57, 70, 80, 87, 93, 99]
    assert apgd_checkpoints(20) == [5, 9, 12, 14, 16, 18, 19]


@pytest.mark.parametrize("kwargs, named", [
    (dict(kind="sharpest"), "'kind'"),
    (dict(kind="adaptive_worst"), "'rho'"),
    (dict(kind="adaptive_worst", rho=-1.0), "'rho'"),
    (dict(kind="lambda_max", rho=0.1), "'rho'"),
    (dict(kind="adaptive_worst", rho=0.1, p=1), "'p'"),
    (dict(kind="adaptive_worst", rho=0.1, m=5), "'m'"),
    (dict(kind="adaptive_average", rho=0.1, draws=1), "'draws'"),
    (dict(kind="adaptive_average", rho=0.1, curvature="ggn"), "'curvature'"),
    (dict(kind="adaptive_worst", rho=0.1, dtype="float16"), "'dtype'"),
])
def test_bad_arguments_are_refused_naming_the_parameter(kwargs, named):
    x, y = _tiny_data()
    with pytest.raises(InvalidParameterError, match=named):
        sharpness(Tiny(), data=_tensors(x, y), task=_mse, num_samples=None, **kwargs)
