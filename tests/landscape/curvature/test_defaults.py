"""The curvature functions at their defaults on a small dataset (scikit-learn's 442 diabetes samples, an MLP
with LayerNorm and Dropout): every sample is used ("auto"), and the values agree with a float64 Hessian
written here with ``torch.autograd.functional.hessian`` and numpy's ``eigh``. The exact path (the whole
matrix) is taken by the stated rule, and gives the matrix's own eigenvalues and trace."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

from landscape.curvature import hessian_eigs, hessian_trace, spectral_density
from landscape.engine import collect


def _problem(hidden: int, samples: int | None):
    from sklearn.datasets import load_diabetes

    xs, ys = load_diabetes(return_X_y=True)
    x = torch.tensor((xs - xs.mean(0)) / xs.std(0), dtype=torch.float32)[:samples]
    y = torch.tensor((ys - ys.mean()) / ys.std(), dtype=torch.float32).reshape(-1, 1)[:samples]
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, hidden), nn.LayerNorm(hidden), nn.ReLU(), nn.Dropout(0.1),
                        nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Linear(hidden // 2, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(60):  # a few full-batch steps: weights away from their initialisation
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    net.eval()
    return net, x, y, _dense_hessian(net, x, y)


@pytest.fixture(scope="module")
def diabetes():
    """All 442 samples, 241 parameters."""
    return _problem(12, None)


@pytest.fixture(scope="module")
def small():
    """128 samples, 145 parameters."""
    return _problem(8, 128)


def _dense_hessian(net, x, y):
    """The Hessian of the mean squared error over every sample in float64, by autograd, as numpy."""
    net64 = copy.deepcopy(net).double()
    names = [k for k, _ in net64.named_parameters()]
    shapes = [p.shape for _, p in net64.named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for _, p in net64.named_parameters()])

    def loss(theta):
        parts, a = {}, 0
        for k, s in zip(names, shapes):
            n = int(np.prod(s))
            parts[k] = theta[a:a + n].reshape(s)
            a += n
        return nn.functional.mse_loss(functional_call(net64, parts, (x.double(),)), y.double())

    return torch.autograd.functional.hessian(loss, flat, vectorize=True).numpy()


def test_defaults_use_every_sample_of_a_small_set_and_agree_with_a_float64_hessian(diabetes):
    net, x, y, h = diabetes
    exact = np.linalg.eigvalsh(h)
    top = max(abs(exact[0]), abs(exact[-1]))
    everything = collect((x, y), None, caller="test").digest()
    eig = hessian_eigs(net, nn.MSELoss(), (x, y), progress=False)
    assert eig.method == "lanczos" and eig.converged  # 241 values: more than Lanczos' window of 20
    np.testing.assert_allclose(eig.eigenvalues, exact[::-1][:3], atol=1e-4 * top)
    tr = hessian_trace(net, nn.MSELoss(), (x, y), progress=False)
    assert tr.method == "hutch++" and tr.interval[0] <= np.trace(h) <= tr.interval[1]
    den = spectral_density(net, nn.MSELoss(), (x, y), progress=False)
    assert den.method == "exact"  # 241 values: fewer than SLQ's 10 x 80 products
    np.testing.assert_allclose(den.nodes[0], exact, atol=1e-5 * top)
    assert den.trace == pytest.approx(np.trace(h), abs=1e-5 * top)
    assert eig.samples_digest == tr.samples_digest == den.samples_digest == everything  # all 442 samples


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_the_exact_path_is_the_matrix_s_own_values(small, dtype, tol):
    """Within float64 rounding with float64 products; within 1e-5 of the largest magnitude with float32 ones."""
    net, x, y, h = small
    values, vectors = np.linalg.eigh(h)
    top = max(abs(values[0]), abs(values[-1]))
    eig = hessian_eigs(net, nn.MSELoss(), (x, y), k=2, which="both", method="exact", dtype=dtype, progress=False)
    np.testing.assert_allclose(eig.eigenvalues, [values[-1], values[-2], values[1], values[0]], atol=tol * top)
    assert eig.method == "exact" and eig.iterations == h.shape[0] and float(eig.residuals.max()) <= 10 * tol * top
    lead = eig.flat()[0].double().numpy()
    assert abs(float(lead @ vectors[:, -1])) == pytest.approx(1.0, abs=10 * tol * top / (values[-1] - values[-2]))
    tr = hessian_trace(net, nn.MSELoss(), (x, y), method="exact", dtype=dtype, progress=False)
    assert tr.estimate == pytest.approx(np.trace(h), abs=tol * top) and tr.half_width == 0.0
    den = spectral_density(net, nn.MSELoss(), (x, y), method="exact", dtype=dtype, progress=False)
    np.testing.assert_allclose(den.nodes[0], values, atol=tol * top)
    assert den.stderr == 0.0 and den.mean == pytest.approx(np.trace(h) / h.shape[0], abs=tol * top)


def test_the_rule_takes_the_exact_path_when_it_costs_no_more_products():
    """eigs: at most Lanczos' window (20 for k=3); trace: at most Hutch++'s fewest products (32); density: at
    most runs * steps."""
    torch.manual_seed(0)
    small = nn.Linear(3, 4)  # 16 values
    x, y = torch.randn(32, 3), torch.randn(32, 4)
    assert hessian_eigs(small, nn.MSELoss(), (x, y), progress=False).method == "exact"
    assert hessian_eigs(small, nn.MSELoss(), (x, y), basis=9, k=2, progress=False).method == "lanczos"
    assert hessian_trace(small, nn.MSELoss(), (x, y), progress=False).method == "exact"
    assert hessian_trace(small, nn.MSELoss(), (x, y), min_probes=6, progress=False).method == "hutch++"  # 4 + 6 < 16
    assert spectral_density(small, nn.MSELoss(), (x, y), runs=2, steps=8, progress=False).method == "exact"
    assert spectral_density(small, nn.MSELoss(), (x, y), runs=1, steps=8, progress=False).method == "slq"


def test_a_generator_of_fewer_samples_than_auto_is_read_once():
    """``num_samples="auto"`` on a one-shot generator of 100 samples: the same trace as the samples
    given as tensors (same seed), the samples read once."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(100, 5, generator=g), torch.randn(100, 1, generator=g)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 1))
    batches = ((x[i:i + 25], y[i:i + 25]) for i in range(0, 100, 25))
    once = hessian_trace(net, nn.MSELoss(), batches)
    whole = hessian_trace(net, nn.MSELoss(), [(x[i:i + 25], y[i:i + 25]) for i in range(0, 100, 25)])
    assert once.estimate == whole.estimate and once.samples_digest == whole.samples_digest
