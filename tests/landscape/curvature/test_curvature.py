"""Curvature against independent computations: a dense ``torch.autograd.functional.hessian``
of a loss written out by hand (flat parameters, plain torch ops), and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from collector.common import InvalidParameterError
from landscape import compute_landscape
from landscape.curvature import EigenRatio, hessian_eigs, hessian_trace, nonconvexity
from landscape.curvature._trace import hutchinson, t_quantile


class Net(nn.Module):
    def __init__(self, d_in: int = 10, hidden: int = 40, classes: int = 5) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, classes)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc2(torch.tanh(self.fc1(x)))


def _data(n: int = 100, d_in: int = 10, classes: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    return x, y


def _net(seed: int = 0, **kw) -> Net:
    torch.manual_seed(seed)
    return Net(**kw)


def _flat(net: Net) -> torch.Tensor:
    return torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])


def _loss_of_flat(net: Net, x: torch.Tensor, y: torch.Tensor):
    """The loss as a function of the flat parameters (fc1.weight, fc1.bias, fc2.weight, fc2.bias),
    written out by hand: independent of the code under test."""
    shapes = [p.shape for p in net.parameters()]
    sizes = [int(np.prod(s)) for s in shapes]
    xd = x.double()

    def f(flat: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))
        return F.cross_entropy(torch.tanh(xd @ w1.T + b1) @ w2.T + b2, y)

    return f, sizes


def _dense(net: Net, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    f, _ = _loss_of_flat(net, x, y)
    return torch.autograd.functional.hessian(f, _flat(net), vectorize=True)


@pytest.fixture(scope="module")
def problem():
    net = _net()
    x, y = _data()
    h = _dense(net, x, y)
    lam, vec = torch.linalg.eigh(h)
    return net, x, y, h, lam.numpy()[::-1].copy(), vec.numpy()[:, ::-1].copy()


def _sign(v: np.ndarray) -> np.ndarray:
    return v if v[np.argmax(np.abs(v))] > 0 else -v


def test_top_eigenvalues_and_vectors_equal_the_dense_hessian(problem):
    net, x, y, h, lam, vec = problem
    eig = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=3, num_samples=None, dtype=torch.float64,
                       progress=False)
    assert eig.converged and eig.iterations < h.shape[0]  # stopped by the tolerance, not the full basis
    np.testing.assert_allclose(eig.eigenvalues, lam[:3], rtol=1e-6)
    assert list(eig.eigenvalues) == sorted(eig.eigenvalues, reverse=True)
    flat = eig.flat().double().numpy()
    for i in range(3):
        assert abs(abs(flat[i] @ vec[:, i]) - 1) < 1e-6  # the same vector up to sign
        np.testing.assert_allclose(flat[i], _sign(vec[:, i]), atol=1e-5)  # and the stated sign
    assert set(eig.eigenvectors[0]) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert eig.eigenvectors[0]["fc1.weight"].shape == (40, 10)


def test_smallest_and_both_ends(problem):
    net, x, y, h, lam, vec = problem
    low = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=2, which="smallest", num_samples=None,
                       dtype=torch.float64, progress=False)
    np.testing.assert_allclose(low.eigenvalues, lam[-2:], rtol=1e-6, atol=1e-9 * lam[0])
    both = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=1, which="both", num_samples=None,
                        dtype=torch.float64, progress=False)
    np.testing.assert_allclose(both.eigenvalues, [lam[0], lam[-1]], rtol=1e-6, atol=1e-9 * lam[0])


def test_size_weighted_batches_ignore_and_float32(problem):
    net, x, y, h, lam, vec = problem
    loader = DataLoader(TensorDataset(x, y), batch_size=32)  # 32, 32, 32, 4: the mean over all 100
    eig = hessian_eigs(net, nn.CrossEntropyLoss(), loader, k=3, num_samples=None, dtype="float64", progress=False)
    np.testing.assert_allclose(eig.eigenvalues, lam[:3], rtol=1e-6)
    # ignore="biasbn": the Hessian of the weights alone, a principal sub-block of the dense one
    _, sizes = _loss_of_flat(net, x, y)
    o = np.cumsum([0, *sizes])
    keep = np.r_[o[0]:o[1], o[2]:o[3]]
    sub = np.linalg.eigvalsh(h.numpy()[np.ix_(keep, keep)])[::-1]
    w = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=2, ignore="biasbn", num_samples=None, dtype="float64",
                     progress=False)
    np.testing.assert_allclose(w.eigenvalues, sub[:2], rtol=1e-6)
    assert w.names == ["fc1.weight", "fc2.weight"]
    # num_samples: the first 60 samples
    h60 = np.linalg.eigvalsh(_dense(net, x[:60], y[:60]).numpy())[::-1]
    e60 = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=1, num_samples=60, dtype="float64", progress=False)
    np.testing.assert_allclose(e60.eigenvalues, h60[:1], rtol=1e-6)
    f32 = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=3, num_samples=None, progress=False)  # the default
    assert f32.dtype == torch.float32 and f32.tol == 1e-4
    np.testing.assert_allclose(f32.eigenvalues, lam[:3], rtol=1e-4)


def test_a_model_smaller_than_the_iterations_is_diagonalised_exactly():
    net = _net(d_in=3, hidden=4, classes=2)  # 26 parameters
    x, y = _data(40, 3, 2)
    lam = np.linalg.eigvalsh(_dense(net, x, y).numpy())[::-1]
    eig = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=26, num_samples=None, dtype="float64", progress=False)
    np.testing.assert_allclose(eig.eigenvalues, lam, rtol=1e-6, atol=1e-10 * lam[0])


def test_deterministic_and_the_network_is_left_alone(problem):
    net, x, y, *_ = problem
    before = {k: v.clone() for k, v in net.state_dict().items()}
    net.train()
    a = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=2, num_samples=None, seed=3, progress=False)
    b = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=2, num_samples=None, seed=3, progress=False)
    assert net.training
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
    assert torch.equal(a.flat(), b.flat())


def test_trace_interval_contains_the_dense_trace(problem):
    net, x, y, h, *_ = problem
    exact = float(torch.trace(h))
    # rel_tol 0.05 (the default): 0.02 ran to the most probes here, the checks are the same
    tr = hessian_trace(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, rel_tol=0.05, progress=False,
                       method="hutchinson")
    assert tr.interval[0] <= exact <= tr.interval[1]
    assert tr.probes == len(tr.values) and tr.probes >= 20
    half = t_quantile(0.975, tr.probes - 1) * np.std(tr.values, ddof=1) / math.sqrt(tr.probes)
    assert tr.half_width == pytest.approx(half)
    assert tr.converged == (tr.half_width <= 0.05 * abs(tr.estimate))


@pytest.mark.parametrize("rel_tol", [0.05, 0.2])
def test_trace_interval_covers_as_often_as_stated(problem, rel_tol):
    """Over 400 seeds the stated 95 % interval (with the default stopping rule) covers the
    dense trace about 95 % of the time: binomial sd 1.1 %, so at least 91.5 % (three sd
    below). The estimator runs on the dense matrix's products here: what is tested is the
    interval and the stopping rule, the products being tested above."""
    h = problem[3]
    exact = float(torch.trace(h))
    covered = []
    for seed in range(400):
        tr = hutchinson(lambda z: h @ z, h.shape[0], rel_tol=rel_tol, min_probes=20, max_probes=1000,
                        confidence=0.95, seed=seed, progress=False)
        covered.append(tr.interval[0] <= exact <= tr.interval[1])
    assert np.mean(covered) >= 0.915


def test_t_quantile_matches_the_tables():
    # Student's t, two-sided 95 % and 99 % (standard tables)
    for df, q95, q99 in [(5, 2.5706, 4.0321), (9, 2.2622, 3.2498), (19, 2.0930, 2.8609), (99, 1.9842, 2.6264)]:
        assert t_quantile(0.975, df) == pytest.approx(q95, abs=2e-3)
        assert t_quantile(0.995, df) == pytest.approx(q99, abs=2e-2)


class Cubic(nn.Module):
    """loss(theta) = theta^T A theta / 2 + sum(b * theta^3) / 6, so H(theta) = A + diag(b * theta)."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__()
        self.theta = nn.Parameter(torch.zeros(a.shape[0]))
        self.register_buffer("a", a)
        self.register_buffer("b", b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.theta
        return 0.5 * t @ self.a @ t + (self.b * t ** 3).sum() / 6 + 0.0 * x.sum()


def _cubic(b_scale: float):
    g = torch.Generator().manual_seed(1)
    m = torch.randn(6, 6, generator=g)
    a = m @ m.T / 6 - 0.3 * torch.eye(6)  # indefinite: some negative curvature
    b = b_scale * torch.randn(6, generator=g)
    model = Cubic(a, b)
    v = {"theta": torch.randn(6, generator=g)}
    w = {"theta": torch.randn(6, generator=g)}
    return model, a.double().numpy(), b.double().numpy(), v, w


@pytest.mark.parametrize("b_scale", [0.0, 2.0])
def test_eigen_ratio_map_equals_the_formula(b_scale):
    model, a, b, v, w = _cubic(b_scale)
    data = (torch.zeros(4, 1), torch.zeros(4))
    ls = compute_landscape(model, data=data, task=lambda m, batch: m(batch[0]), directions=(v, w), size=5,
                           num_samples=None, normalization="none", metrics={"eigen_ratio": EigenRatio()})
    expected = np.empty((5, 5))
    for i, yy in enumerate(ls.y):
        for j, xx in enumerate(ls.x):
            theta = xx * v["theta"].double().numpy() + yy * w["theta"].double().numpy()
            lam = np.linalg.eigvalsh(a + np.diag(b * theta))
            expected[i, j] = abs(lam[0] / lam[-1])
    np.testing.assert_allclose(ls.surfaces["eigen_ratio"], expected, rtol=1e-5)
    if b_scale == 0.0:  # a quadratic: one Hessian everywhere
        lam = np.linalg.eigvalsh(a)
        np.testing.assert_allclose(ls.surfaces["eigen_ratio"], abs(lam[0] / lam[-1]), rtol=1e-5)
    score = nonconvexity(ls, quantile=0.2, threshold=0.5)
    low = ls.z <= np.quantile(ls.z, 0.2)
    assert score["mean_ratio_low_loss"] == pytest.approx(expected[low].mean(), rel=1e-5)
    assert score["fraction_above"] == pytest.approx((expected > 0.5).mean())


def test_point_metric_leaves_the_loss_unchanged(problem):
    net, x, y, *_ = problem
    kw = dict(directions="random", size=4, num_samples=None, seed=1)
    plain = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), **kw)
    # a looser Lanczos tolerance than the default: the ratio's accuracy is another test's, not this one's
    with_ratio = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), metrics={"eigen_ratio": EigenRatio(tol=1e-3)},
                                   **kw)
    np.testing.assert_array_equal(plain.z, with_ratio.z)
    assert with_ratio.surfaces["eigen_ratio"].shape == (4, 4)
    assert np.isfinite(with_ratio.surfaces["eigen_ratio"]).all()


def test_hessian_directions_are_the_dense_top_two_eigenvectors(problem):
    net, x, y, h, lam, vec = problem
    ls = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions="hessian", size=3, num_samples=None,
                           normalization="none")
    assert ls.metadata["decomposition"] == "Hessian"
    np.testing.assert_allclose(ls.metadata["hessian_eigenvalues"], lam[:2], rtol=1e-6)
    # every grid point's loss is the hand-written loss at centre + a u1 + b u2 (dense eigenvectors)
    f, _ = _loss_of_flat(net, x, y)
    c, u1, u2 = _flat(net), torch.from_numpy(_sign(vec[:, 0])), torch.from_numpy(_sign(vec[:, 1]))
    for i, b in enumerate(ls.y):
        for j, a in enumerate(ls.x):
            assert ls.z[i, j] == pytest.approx(float(f(c + a * u1 + b * u2)), rel=1e-5)


def _filter_normalised(vec: np.ndarray, net: Net) -> np.ndarray:
    """The flat direction ``vec`` normalised filter by filter against ``net``'s weights, in numpy: each row
    of a weight rescaled to its row's norm, each element of a bias to its magnitude (``sign(d) |p|``)."""
    out, o = [], 0
    for p in net.parameters():
        pn = p.detach().double().numpy()
        d = vec[o:o + pn.size].reshape(pn.shape if pn.ndim > 1 else (-1, 1))
        rows = pn.reshape(d.shape)
        out.append((d * np.linalg.norm(rows, axis=1, keepdims=True) / np.linalg.norm(d, axis=1, keepdims=True))
                   .ravel())
        o += pn.size
    return np.concatenate(out)


def test_hessian_directions_filter_normalised(problem):
    net, x, y, h, lam, vec = problem
    ls = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions="hessian", size=3, num_samples=None,
                           normalization="filter")
    assert ls.metadata["normalization"] == "filter"
    d1, d2 = (_filter_normalised(_sign(vec[:, k]), net) for k in range(2))
    w1 = net.fc1.weight.detach().double().numpy()
    np.testing.assert_allclose(np.linalg.norm(d1[:w1.size].reshape(w1.shape), axis=1),
                               np.linalg.norm(w1, axis=1), rtol=1e-12)  # the reference's own norms, per filter
    # every grid point's loss is the hand-written loss at centre + a d1 + b d2: the dense eigenvectors
    # rescaled filter by filter. The float32 Lanczos vectors (tol 1e-4) are exact to about 6e-5 a component,
    # which a filter of small components magnifies: 4e-5 relative on the loss here, where the unit
    # eigenvectors left unscaled give losses up to 70 % off
    f, _ = _loss_of_flat(net, x, y)
    c, t1, t2 = _flat(net), torch.from_numpy(d1), torch.from_numpy(d2)
    for i, b in enumerate(ls.y):
        for j, a in enumerate(ls.x):
            assert ls.z[i, j] == pytest.approx(float(f(c + a * t1 + b * t2)), rel=2e-4), (i, j)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(k=0), "'k' parameter of hessian_eigs must be an int in the range [1, inf)"),
    (dict(k=700), "'k' parameter of hessian_eigs must be at most the number of moved values (645)"),
    (dict(which="top"), "'which' parameter"),
    (dict(tol=0.0), "'tol' parameter"),
    (dict(tol=2.0), "'tol' parameter"),
    (dict(max_iter=3), "'max_iter' parameter of hessian_eigs must be at least 2*k = 6"),
    (dict(dtype=torch.int32), "'dtype' parameter"),
    (dict(dtype="half"), "'dtype' parameter"),
    (dict(num_samples=0), "'num_samples' parameter"),
    (dict(num_samples=101), "'num_samples' parameter of hessian_eigs (101) is larger than the dataset"),
    (dict(ignore="bias"), "'ignore' parameter"),
    (dict(seed=-1), "'seed' parameter"),
    (dict(progress="yes"), "'progress' parameter"),
])
def test_bad_eigs_inputs_are_refused_before_work(kwargs, fragment):
    net = _net()
    x, y = _data()
    kw = dict(num_samples=None)
    kw.update(kwargs)
    with pytest.raises(ValueError) as err:
        hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), **kw)
    assert fragment in str(err.value)
    assert net.calls == 0


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(rel_tol=0.0), "'rel_tol' parameter"),
    (dict(min_probes=1), "'min_probes' parameter"),
    (dict(min_probes=30, max_probes=20), "'max_probes' parameter of hessian_trace must be at least min_probes"),
    (dict(confidence=1.0), "'confidence' parameter"),
])
def test_bad_trace_inputs_are_refused_before_work(kwargs, fragment):
    net = _net()
    x, y = _data()
    with pytest.raises(ValueError) as err:
        hessian_trace(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, **kwargs)
    assert fragment in str(err.value)
    assert net.calls == 0


class _Batches(list):
    """Batches that count how often they are iterated: a refusal before any work leaves it at 0."""

    iterated = 0

    def __iter__(self):
        self.iterated += 1
        return super().__iter__()


def test_other_refusals():
    data = _Batches([_data()])
    with pytest.raises(InvalidParameterError) as err:
        hessian_eigs("net", nn.CrossEntropyLoss(), data)
    assert str(err.value) == ("The 'network' parameter of hessian_eigs must be an instance of 'Module'. "
                              "Got 'net' instead.")
    assert data.iterated == 0
    with pytest.raises(InvalidParameterError, match="'data' parameter of hessian_eigs is required"):
        hessian_eigs(_net(), nn.CrossEntropyLoss())
    with pytest.raises(InvalidParameterError, match="'tol' parameter of EigenRatio"):
        EigenRatio(tol=0.0)
    ls = compute_landscape(_net(), nn.CrossEntropyLoss(), _data(), size=3, num_samples=None)
    with pytest.raises(InvalidParameterError, match="names no surface of the landscape"):
        nonconvexity(ls)
    net = _net()
    with pytest.raises(InvalidParameterError) as err:
        compute_landscape(net, nn.CrossEntropyLoss(), data, directions="eigen")
    assert str(err.value).startswith("The 'directions' parameter of compute_landscape must be one of 'random', "
                                     "'pca', 'hessian'. Got 'eigen' instead. HINT: ")
    assert net.calls == 0 and data.iterated == 0
