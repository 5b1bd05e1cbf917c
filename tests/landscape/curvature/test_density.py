"""The eigenvalue density (stochastic Lanczos quadrature) against spectra known in advance and
numpy: operators built from given eigenvalues, and a dense Hessian of a loss written out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape.curvature import SpectralDensity, spectral_density
from landscape.curvature._density import slq_density
from tests.landscape.curvature.test_curvature import _data, _dense, _loss_of_flat, _net

OUTLIERS = np.array([50.0, 20.0, 10.0])


def _spectrum(n: int, seed: int = 0) -> np.ndarray:
    """A bulk of distinct values in [-0.5, 1] and three outliers."""
    bulk = np.random.default_rng(seed).uniform(-0.5, 1.0, n - 3)
    return np.concatenate([bulk, OUTLIERS])


def _rotated(lam: np.ndarray, seed: int = 1) -> np.ndarray:
    """``Q diag(lam) Q^T`` for a random orthogonal ``Q``: a dense matrix with that spectrum."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((len(lam), len(lam))))
    return (q * lam) @ q.T


def test_a_diagonal_operator_run_to_its_size_gives_each_eigenvalue_weight_one_over_n():
    """Rademacher starts have (q . e_i)^2 = 1/n exactly, so a run of n steps on a diagonal
    matrix with distinct entries has the entries as nodes and 1/n as every weight; the
    density is then (1/n) sum_i g(t - lambda_i), computed here with numpy."""
    lam = np.linspace(-1.0, 3.0, 40) ** 3
    d = slq_density(lambda v: torch.from_numpy(lam) * v, 40, runs=2, steps=40, seed=3)
    np.testing.assert_allclose(d.nodes, np.tile(np.sort(lam), (2, 1)), atol=1e-12)
    np.testing.assert_allclose(d.weights, 1 / 40, atol=1e-12)
    assert d.mean == pytest.approx(lam.mean(), abs=1e-12) and d.trace == pytest.approx(lam.sum(), abs=1e-10)
    sigma = math.sqrt(1e-5 * (lam.max() - lam.min()))  # PyHessian's default
    assert d.sigma == pytest.approx(sigma)
    expected = np.exp(-0.5 * ((d.grid[:, None] - lam[None, :]) / sigma) ** 2).sum(axis=1) / (
        40 * sigma * math.sqrt(2 * math.pi))
    assert d.mass == pytest.approx(1.0, abs=1e-6)  # the grid covers and resolves every Gaussian
    np.testing.assert_allclose(d.density, expected / d.mass, rtol=1e-9, atol=1e-12)
    assert np.trapezoid(d.density, d.grid) == pytest.approx(1.0, abs=1e-12)
    assert d.grid[0] <= lam.min() - 4.9 * sigma and d.grid[-1] >= lam.max() + 4.9 * sigma
    assert np.all(np.diff(d.grid) <= sigma / 4 + 1e-12)


def test_mean_is_the_trace_over_n_within_its_error_and_the_nodes_find_the_outliers():
    n, runs = 300, 20
    lam = _spectrum(n)
    a = _rotated(lam)
    at = torch.from_numpy(a)
    d = slq_density(lambda v: at @ v, n, runs=runs, steps=50, seed=0)
    assert d.nodes.shape == d.weights.shape == (runs, 50)
    np.testing.assert_allclose(d.weights.sum(axis=1), 1.0, atol=1e-12)
    # each run's quadrature mean is z^T A z / n: its variance is 2 sum_{i != j} a_ij^2 / n^2 (Rademacher z)
    se = _probe_se(a, runs)
    plain = (d.nodes * d.weights).sum(axis=1)
    assert d.quadrature_mean == pytest.approx(plain.mean(), abs=1e-15)
    assert 0.5 * se < plain.std(ddof=1) / math.sqrt(runs) < 2 * se
    assert abs(d.quadrature_mean - lam.mean()) <= 4 * se
    # the mean deflated by another run's Krylov space, which holds the three outliers (and some
    # of the bulk): it samples at most the bulk, A without them
    assert np.all(d.deflated == 50)
    q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((n, n)))
    bulk = a - (q[:, -3:] * OUTLIERS) @ q[:, -3:].T
    se_bulk = _probe_se(bulk, runs)
    assert se_bulk < se / 5 and d.stderr < 2 * se_bulk
    assert abs(d.mean - lam.mean()) <= 4 * se_bulk
    np.testing.assert_allclose(d.top, OUTLIERS, rtol=1e-10)
    # the density: its mass near each outlier is that eigenvalue's share, about 1/n
    for v in OUTLIERS:
        near = (d.grid > v - 1) & (d.grid < v + 1)
        assert 0.2 / n < np.trapezoid(d.density[near], d.grid[near]) < 3 / n
    # and the bulk's distribution: the quadrature's CDF against the eigenvalues' own
    for t in (-0.25, 0.25, 0.5, 0.75):
        cdf = float((d.weights * (d.nodes <= t)).sum(axis=1).mean())
        assert abs(cdf - np.mean(lam <= t)) < 0.06, (t, cdf)


def _probe_se(a: np.ndarray, runs: int) -> float:
    """The standard error of ``runs`` Rademacher probes' mean of ``z^T A z / n``."""
    return math.sqrt(2 * ((a ** 2).sum() - (np.diag(a) ** 2).sum())) / len(a) / math.sqrt(runs)


def test_the_deflated_mean_is_unbiased_and_tighter_than_the_quadrature():
    """Over 300 seeds of two short runs, the deflated mean averages to tr / n (it is unbiased
    whatever the other run's space) with a spread far below the plain quadrature's;
    one run has no other run to borrow from, and its mean is the quadrature's."""
    lam = _spectrum(120, seed=2)
    a = torch.from_numpy(_rotated(lam, seed=3))
    deflated, plain = [], []
    for seed in range(300):
        d = slq_density(lambda v: a @ v, 120, runs=2, steps=8, seed=seed)
        deflated.append(d.mean)
        plain.append(d.quadrature_mean)
    deflated_, plain_ = np.array(deflated), np.array(plain)
    assert abs(deflated_.mean() - lam.mean()) <= 4 * deflated_.std(ddof=1) / math.sqrt(300)
    assert abs(plain_.mean() - lam.mean()) <= 4 * plain_.std(ddof=1) / math.sqrt(300)
    assert deflated_.std() < plain_.std() / 4
    one = slq_density(lambda v: a @ v, 120, runs=1, steps=8, seed=0)
    assert one.mean == pytest.approx(one.quadrature_mean, rel=1e-14) and list(one.deflated) == [0]


def test_a_normal_start_and_a_breakdown():
    """Normal start vectors estimate the same mean; an operator with fewer distinct eigenvalues
    than steps breaks down and goes on uncoupled: the extra nodes carry no weight."""
    lam = np.repeat([1.0, 2.0, 5.0], 20)  # three distinct eigenvalues, n = 60
    d = slq_density(lambda v: torch.from_numpy(lam) * v, 60, runs=3, steps=10, seed=0, start="normal")
    assert d.start == "normal"
    np.testing.assert_allclose(d.top, [5.0, 5.0, 5.0], rtol=1e-10)  # each fresh block finds them again
    for nodes, weights in zip(d.nodes, d.weights):
        heavy = weights > 1e-12
        assert heavy.sum() == 3  # the start vector's quadrature: the three eigenvalues
        np.testing.assert_allclose(np.sort(nodes[heavy]), [1.0, 2.0, 5.0], rtol=1e-10)
    assert np.isfinite(d.density).all() and abs(d.mean - lam.mean()) < 4 * d.stderr


@pytest.fixture(scope="module")
def tiny():
    net = _net()
    x, y = _data()
    h = _dense(net, x, y).numpy()
    return net, x, y, h


def test_a_tiny_network_against_its_dense_hessian(tiny):
    net, x, y, h = tiny
    lam = np.linalg.eigvalsh(h)[::-1]
    d = spectral_density(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, runs=4, steps=60,
                         dtype=torch.float64, progress=False)
    assert isinstance(d, SpectralDensity) and d.block is None and d.n == h.shape[0] == 645
    assert d.names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"] and d.curvature == "hessian"
    np.testing.assert_allclose(d.top, lam[:3], rtol=1e-10)  # well-separated top eigenvalues: converged
    # the default float32 products: the top eigenvalues to float32's rounding
    d32 = spectral_density(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, runs=2, steps=60, progress=False)
    assert d32.dtype == torch.float32
    np.testing.assert_allclose(d32.top, lam[:3], rtol=1e-5)
    # the mean over many runs (it needs one product per run: steps=1) within a few % of tr(H) / n
    m = spectral_density(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, runs=400, steps=1,
                         dtype=torch.float64, progress=False)
    se = math.sqrt(2 * ((h ** 2).sum() - (np.diag(h) ** 2).sum())) / h.shape[0] / math.sqrt(400)
    assert abs(m.mean - np.trace(h) / h.shape[0]) <= 4 * se and 0.7 * se < m.stderr < 1.4 * se
    assert abs(m.mean / (np.trace(h) / h.shape[0]) - 1) < 0.1
    assert m.trace == pytest.approx(m.mean * 645)


def test_same_seed_same_bits_and_the_network_is_left_alone(tiny):
    net, x, y, _ = tiny
    before = {k: v.clone() for k, v in net.state_dict().items()}
    net.train()
    kw = dict(num_samples=None, runs=3, steps=20, progress=False)
    a = spectral_density(net, nn.CrossEntropyLoss(), (x, y), **kw)
    b = spectral_density(net, nn.CrossEntropyLoss(), (x, y), **kw)
    c = spectral_density(net, nn.CrossEntropyLoss(), (x, y), seed=1, **kw)
    for f in ("nodes", "weights", "grid", "density"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert a.mean == b.mean and not np.array_equal(a.nodes, c.nodes)
    assert net.training and all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    net.eval()


def test_blocks_are_principal_sub_blocks_whose_sizes_add_up(tiny):
    net, x, y, h = tiny
    _, sizes = _loss_of_flat(net, x, y)
    o = np.cumsum([0, *sizes])
    kw = dict(num_samples=None, runs=2, steps=30, dtype=torch.float64, progress=False)
    blocks = spectral_density(net, nn.CrossEntropyLoss(), (x, y), include={"first": "fc1", "second": ["fc2.*"]}, **kw)
    assert list(blocks) == ["first", "second"]
    assert blocks["first"].block == "first" and blocks["first"].names == ["fc1.weight", "fc1.bias"]
    assert sum(d.n for d in blocks.values()) == h.shape[0]
    for d, (a, b) in zip(blocks.values(), [(o[0], o[2]), (o[2], o[4])]):
        sub = np.linalg.eigvalsh(h[a:b, a:b])[::-1]
        assert d.n == b - a
        np.testing.assert_allclose(d.top[0], sub[0], rtol=1e-8)
    # a list of lists: keyed by the globs; a list of globs: one block
    listed = spectral_density(net, nn.CrossEntropyLoss(), (x, y), include=[["fc1.weight"], ["*.bias", "fc2"]], **kw)
    assert list(listed) == ["fc1.weight", "*.bias, fc2"]
    assert listed["*.bias, fc2"].names == ["fc1.bias", "fc2.weight", "fc2.bias"]
    one = spectral_density(net, nn.CrossEntropyLoss(), (x, y), include=["fc1.weight", "fc2.weight"], **kw)
    assert isinstance(one, SpectralDensity) and one.block == "fc1.weight, fc2.weight"
    keep = np.r_[o[0]:o[1], o[2]:o[3]]
    assert one.n == len(keep)
    np.testing.assert_allclose(one.top[0], np.linalg.eigvalsh(h[np.ix_(keep, keep)])[-1], rtol=1e-8)


def test_the_gauss_newton_density_against_the_dense_j_t_h_j(tiny):
    """curvature="ggn": G = sum_i J_i^T H_i J_i / N with J_i the outputs' Jacobian and H_i the
    softmax cross-entropy's Hessian in the outputs, diag(p) - p p^T, written out here."""
    net, x, y, _ = tiny
    _, sizes = _loss_of_flat(net, x, y)
    shapes = [p.shape for p in net.parameters()]
    flat = torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])

    def outputs(w: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = (t.reshape(s) for t, s in zip(torch.split(w, sizes), shapes))
        return torch.tanh(x.double() @ w1.T + b1) @ w2.T + b2

    jac = torch.autograd.functional.jacobian(outputs, flat)  # (N, classes, n)
    p = torch.softmax(outputs(flat), dim=1)
    h_out = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    g = torch.einsum("ick,icd,idl->kl", jac, h_out, jac).numpy() / len(x)
    lam = np.linalg.eigvalsh(g)[::-1]
    d = spectral_density(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, runs=2, steps=60, curvature="ggn",
                         dtype=torch.float64, progress=False)
    assert d.curvature == "ggn"
    np.testing.assert_allclose(d.top, lam[:3], rtol=1e-8)
    assert d.nodes.min() > -1e-10 * lam[0]  # positive semi-definite


CALLS = [0]


class Counted(nn.Module):
    """Counts its forwards in a module-level list (a deep copy shares it)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(10, 4)
        self.fc2 = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS[0] += 1
        return self.fc2(torch.tanh(self.fc1(x)))


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(runs=0), "'runs' parameter of spectral_density must be an int in the range [1, inf)"),
    (dict(steps=0), "'steps' parameter"),
    (dict(steps=70, method="slq"), "'steps' parameter of spectral_density must be at most the number of values in "
                                   "the block (69)"),
    (dict(steps=30, include="fc2", method="slq"), "at most the number of values in the block (25 in 'fc2')"),
    (dict(method="dense"), "'method' parameter of spectral_density must be one of 'auto', 'slq', 'exact'"),
    (dict(curvature="ggm"), "'curvature' parameter of spectral_density must be one of 'hessian', 'ggn', 'fisher'"),
    (dict(curvature="fisher", product="forward"), "'product' parameter of spectral_density must be None or one of "
                                                  "'reverse'"),
    (dict(include="conv*"), "'include' pattern 'conv*' matches no parameter"),
    (dict(include=5), "'include' parameter of spectral_density must be None (every moved parameter), a glob"),
    (dict(include={"a": 3}), "'include' parameter"),
    (dict(include=[["fc1"], ["fc1"]]), "a list of distinct lists of globs"),
    (dict(include=[]), "'include' parameter"),
    (dict(grid=[1.0, 0.0]), "'grid' parameter of spectral_density must be None, an int in the range [2, inf) or "
                            "an increasing sequence"),
    (dict(grid=1), "'grid' parameter"),
    (dict(grid=[0.0, float("nan")]), "'grid' parameter"),
    (dict(sigma=0.0), "'sigma' parameter"),
    (dict(start="gauss"), "'start' parameter of spectral_density must be one of 'rademacher', 'normal'"),
    (dict(seed=-1), "'seed' parameter"),
    (dict(progress="yes"), "'progress' parameter"),
    (dict(dtype=torch.int32), "'dtype' parameter"),
    (dict(ignore="bias"), "'ignore' parameter"),
])
def test_bad_inputs_are_refused_before_any_product(kwargs, fragment):
    torch.manual_seed(0)
    net = Counted()
    x, y = _data()
    CALLS[0] = 0
    kw = dict(num_samples=None, runs=2, steps=5, progress=False)
    kw.update(kwargs)
    with pytest.raises(ValueError) as err:
        spectral_density(net, nn.CrossEntropyLoss(), (x, y), **kw)
    assert fragment in str(err.value)
    assert CALLS[0] == 0


def test_a_loss_that_is_not_finite_is_said():
    """Refused before any product, the data found finite: the weights give it."""
    torch.manual_seed(0)
    net = Counted()
    with torch.no_grad():
        net.fc2.weight[0, 0] = float("nan")
    with pytest.raises(InvalidParameterError, match="spectral_density at the network's weights is NaN on samples "
                                                    "0-99: the inputs and the targets there are finite"):
        spectral_density(net, nn.CrossEntropyLoss(), _data(), num_samples=None, runs=2, steps=5, progress=False)


def test_a_grid_that_cuts_off_nodes_says_how_much_mass_it_holds():
    lam = np.linspace(0.0, 10.0, 50)
    d = slq_density(lambda v: torch.from_numpy(lam) * v, 50, runs=1, steps=50, seed=0,
                    grid=np.linspace(-1.0, 4.95, 600), sigma=0.05)
    assert d.mass == pytest.approx(25 / 50, abs=0.02)  # half of the eigenvalues, weight 1/50 each
    assert np.trapezoid(d.density, d.grid) == pytest.approx(1.0)
    e = slq_density(lambda v: torch.from_numpy(lam) * v, 50, runs=1, steps=50, seed=0, grid=2000)
    assert len(e.grid) == 2000 and e.mass == pytest.approx(1.0, abs=1e-3)


def test_two_gram_schmidt_passes_leave_the_vector_orthogonal_to_float32_stored_vectors():
    """The stored float32 vectors are orthonormal only to their rounding (``E ~ 1e-8``), and one
    classical pass leaves ``w`` orthogonal to about ``E`` times the cancellation ``||w|| / ||w'||``;
    the second pass takes it to float64's rounding times the cancellation, mild or severe (a
    vector almost inside their span): why the runs always take two."""
    from landscape.curvature._density import _project_out

    gen = torch.Generator().manual_seed(0)
    v = torch.linalg.qr(torch.randn(5000, 40, generator=gen, dtype=torch.float64))[0].T.float()  # rows, float32
    v64 = v.double()
    rest = torch.randn(5000, generator=gen, dtype=torch.float64)
    rest -= v64.T @ (v64 @ rest)
    for scale in (1.0, 1e-6):
        w = v64.T @ torch.randn(40, generator=gen, dtype=torch.float64) + scale * rest / rest.norm()
        once = w.clone()
        _project_out(v, 40, once)
        _project_out(v, 40, w, twice=True)
        assert float((v64 @ once).abs().max() / once.norm()) > 1e-10 / scale  # one pass: E times the cancellation
        assert float((v64 @ w).abs().max() / w.norm()) < 1e-14 / scale, scale  # float64's rounding, times it
