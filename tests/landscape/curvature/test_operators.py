"""The curvature operators (Hessian, GGN, empirical Fisher; reverse, forward and finite-difference
products) against dense matrices built independently: ``torch.autograd.functional`` on a loss
written out by hand over flat parameters, per-sample gradients by a plain loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from collector.common import InvalidParameterError
from landscape.curvature._operators import PRODUCTS, make_operator
from landscape.engine import collect
from landscape.tasks import HuggingFace, Supervised


class Tiny(nn.Module):
    def __init__(self, d_in: int = 4, hidden: int = 6, out: int = 3) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, out)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc2(torch.tanh(self.fc1(x)))


def _tiny(seed: int = 0) -> Tiny:
    torch.manual_seed(seed)
    return Tiny().double()


def _data(n: int = 20, d_in: int = 4, classes: int = 3, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d_in, generator=g, dtype=torch.float64), torch.randint(0, classes, (n,), generator=g)


def _flat(net: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])


def _outputs_of_flat(net: Tiny, x: torch.Tensor):
    """The network's outputs as a function of the flat parameters, written out by hand."""
    shapes = [p.shape for p in net.parameters()]
    sizes = [math.prod(s) for s in shapes]

    def f(flat: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))
        return torch.tanh(x @ w1.T + b1) @ w2.T + b2

    return f


def _matrix(op) -> torch.Tensor:
    """The operator as a dense matrix, one product per unit vector."""
    eye = torch.eye(op.dim, dtype=torch.float64)
    return torch.stack([op.matvec(e).double() for e in eye], dim=1)


def _op(net, data, curvature, product=None, dtype=torch.float64, loss=None, batch_size=None, **kw):
    task = Supervised(loss if loss is not None else nn.CrossEntropyLoss())
    src = DataLoader(TensorDataset(*data), batch_size=batch_size) if batch_size else data
    samples = collect(src, None, task, caller="test")
    names = [n for n, _ in net.named_parameters()]
    return make_operator(net, task, samples, names, curvature=curvature, product=product, dtype=dtype, **kw)


def test_ggn_equals_the_hessian_of_a_linear_model_with_squared_error():
    """A linear model's outputs have no second derivative: H = J^T H_out J exactly."""
    torch.manual_seed(0)
    net = nn.Linear(4, 2).double()
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(15, 4, generator=g, dtype=torch.float64), torch.randn(15, 2, generator=g, dtype=torch.float64)
    hess = _matrix(_op(net, (x, y), "hessian", loss=nn.MSELoss()))
    ggn = _matrix(_op(net, (x, y), "ggn", loss=nn.MSELoss()))
    # independent: MSE's Hessian is (2 / (n m)) [x 1]^T [x 1] for each of the m outputs (weights row by row)
    xa = torch.cat([x, torch.ones(15, 1, dtype=torch.float64)], 1)
    block = 2 / (15 * 2) * xa.T @ xa  # rows: the 4 weights then the bias, per output
    want = torch.zeros(10, 10, dtype=torch.float64)
    w_idx = [[0, 1, 2, 3], [4, 5, 6, 7]]  # weight (2, 4) flattened row-major, then the bias (2,)
    for o in range(2):
        idx = w_idx[o] + [8 + o]
        want[np.ix_(idx, idx)] = block
    torch.testing.assert_close(hess, want, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(ggn, hess, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("product", PRODUCTS["ggn"][:2])
def test_ggn_equals_dense_jacobian_transpose_loss_hessian_jacobian(product):
    net = _tiny()
    x, y = _data()
    f = _outputs_of_flat(net, x)
    theta = _flat(net)
    jac = torch.autograd.functional.jacobian(f, theta).reshape(-1, theta.numel())  # (n * classes, P)
    out = f(theta).detach()
    h_out = torch.autograd.functional.hessian(lambda o: F.cross_entropy(o.reshape(out.shape), y),
                                              out.reshape(-1))
    want = jac.T @ h_out @ jac
    got = _matrix(_op(net, (x, y), "ggn", product, batch_size=8))  # batches of 8, 8, 4: weighted by size
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert torch.linalg.eigvalsh(want).min() > -1e-12  # cross-entropy: positive semi-definite


def test_ggn_is_not_the_hessian_of_a_network_with_curvature():
    net = _tiny()
    data = _data()
    hess = _matrix(_op(net, data, "hessian"))
    ggn = _matrix(_op(net, data, "ggn"))
    assert float((hess - ggn).norm() / hess.norm()) > 1e-3  # the network's own second derivatives


def test_fisher_equals_the_mean_of_per_sample_gradient_outer_products():
    net = _tiny()
    x, y = _data()
    f = _outputs_of_flat(net, x)
    theta = _flat(net).requires_grad_(True)
    grads = []
    for i in range(len(x)):  # a plain loop: one sample's loss, its gradient
        gi, = torch.autograd.grad(F.cross_entropy(f(theta)[i:i + 1], y[i:i + 1]), theta)
        grads.append(gi)
    g = torch.stack(grads)
    want = g.T @ g / len(x)
    for kw in (dict(batch_size=8), dict(batch_size=8, chunk=3), dict()):
        got = _matrix(_op(net, (x, y), "fisher", **kw))
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)


def test_hessian_products_agree_and_equal_the_dense_hessian():
    net = _tiny()
    x, y = _data()
    f = _outputs_of_flat(net, x)
    want = torch.autograd.functional.hessian(lambda t: F.cross_entropy(f(t), y), _flat(net))
    for product in ("reverse", "forward"):
        torch.testing.assert_close(_matrix(_op(net, (x, y), "hessian", product)), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype, bound", [(torch.float64, 1e-8), (torch.float32, 1e-3)])
@pytest.mark.parametrize("curvature", ["hessian", "ggn"])
def test_finite_difference_products_are_within_their_step_of_the_exact_ones(curvature, dtype, bound):
    """A smooth network (tanh). The step eps = eps_mach^(1/3) (1 + ||theta||) / ||v|| leaves a truncation
    error of order (eps ||v||)^2 and rounding of order eps_mach / eps, each about eps_mach^(2/3) of the
    product times the problem's scale: float64 ~4e-11 (measured 4e-11 to 1.5e-10, bound 1e-8), float32
    ~2.4e-5 (measured 3e-5 to 1e-4 here, 3e-3 on a 2-layer GPT-2; bound 1e-3), against the exact
    float64 product. (A piecewise-linear network is another matter: see the module docstring.)"""
    net = _tiny()
    data = _data()
    exact = _op(net, data, curvature)
    fd = _op(net, data, curvature, "finite_difference", dtype=dtype)
    gen = torch.Generator().manual_seed(5)
    errors = []
    for scale in (1.0, 1e-3, 1e3):  # the step follows ||v||: the error does not
        v = scale * torch.randn(exact.dim, generator=gen, dtype=torch.float64)
        want = exact.matvec(v)
        errors.append(float((fd.matvec(v).double() - want).norm() / want.norm()))
    assert max(errors) < bound, errors
    assert float(fd.matvec(torch.zeros(exact.dim)).abs().max()) == 0.0


def test_the_interface_the_other_functions_build_on():
    net = _tiny()
    data = _data()
    for curvature in PRODUCTS:
        op = _op(net, data, curvature, dtype=torch.float32)
        assert (op.curvature, op.product) == (curvature, PRODUCTS[curvature][0])
        assert op.dim == 51 and op.dtype == torch.float32 and op.device == torch.device("cpu")
        assert op.names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
        v = torch.arange(51, dtype=torch.float64)
        parts = op.unflatten(v)
        assert parts["fc1.weight"].shape == (6, 4) and torch.equal(op.flatten(parts), v)
        out = op.matvec(v)
        assert out.shape == (51,) and out.dtype == torch.float32 and op.products == 1
        assert torch.equal(out, op.matvec(v))  # the same bits at every call
        with torch.no_grad():
            assert op.loss() == pytest.approx(float(F.cross_entropy(net(data[0]), data[1])), rel=1e-6)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(curvature="gauss-newton"), "'curvature' parameter of make_operator must be one of 'hessian', 'ggn', "
                                     "'fisher'. Got 'gauss-newton'"),
    (dict(curvature="fisher", product="forward"), "'product' parameter of make_operator must be None or one of "
                                                  "'reverse'. Got 'forward'"),
    (dict(product="backward"), "'product' parameter of make_operator must be None or one of 'reverse', 'forward', "
                               "'finite_difference'. Got 'backward'"),
    (dict(dtype=torch.float16), "'dtype' parameter of make_operator"),
    (dict(seed=-1), "'seed' parameter of make_operator"),
])
def test_bad_operator_inputs_are_refused_before_work(kwargs, fragment):
    net = _tiny()
    task = Supervised(nn.CrossEntropyLoss())
    samples = collect(_data(), None, task, caller="test")
    with pytest.raises(InvalidParameterError) as err:
        make_operator(net, task, samples, ["fc1.weight"], **kwargs)
    assert fragment in str(err.value)
    assert net.calls == 0


def test_ggn_needs_a_task_that_separates_outputs_and_loss():
    net = _tiny()
    samples = collect([{"x": torch.zeros(2, 4)}], None, HuggingFace(), caller="test")
    with pytest.raises(InvalidParameterError, match="'curvature' parameter of make_operator is 'ggn', which needs"):
        make_operator(net, HuggingFace(), samples, ["fc1.weight"], curvature="ggn")
    assert net.calls == 0


def test_chunk_is_the_fishers_alone():
    net = _tiny()
    task = Supervised(nn.CrossEntropyLoss())
    samples = collect(_data(), None, task, caller="test")
    with pytest.raises(InvalidParameterError, match="'chunk' parameter of make_operator applies to "
                                                    "curvature='fisher' only"):
        make_operator(net, task, samples, ["fc1.weight"], chunk=4)
    with pytest.raises(InvalidParameterError, match="'chunk' parameter of make_operator must be"):
        make_operator(net, task, samples, ["fc1.weight"], curvature="fisher", chunk=0)


def _dense_ggn(net: Tiny, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    f = _outputs_of_flat(net, x)
    theta = _flat(net)
    jac = torch.autograd.functional.jacobian(f, theta).reshape(-1, theta.numel())
    out = f(theta).detach()
    h_out = torch.autograd.functional.hessian(lambda o: F.cross_entropy(o.reshape(out.shape), y), out.reshape(-1))
    return jac.T @ h_out @ jac


def test_the_functions_take_the_curvature_and_say_which():
    from landscape import compute_landscape
    from landscape.curvature import EigenRatio, hessian_eigs, hessian_trace

    net = _tiny()
    x, y = _data()
    lam = np.linalg.eigvalsh(_dense_ggn(net, x, y).numpy())[::-1]
    eig = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=2, num_samples=None, dtype="float64", curvature="ggn",
                       progress=False)
    np.testing.assert_allclose(eig.eigenvalues, lam[:2], rtol=1e-9)
    assert (eig.curvature, eig.product) == ("ggn", "forward") and str(eig).startswith("GGN eigenvalues")
    fd = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=2, num_samples=None, dtype="float64", curvature="ggn",
                      product="finite_difference", progress=False)
    np.testing.assert_allclose(fd.eigenvalues, lam[:2], rtol=1e-7)
    assert fd.product == "finite_difference"
    # the empirical Fisher's trace is the mean squared per-sample gradient norm
    f = _outputs_of_flat(net, x)
    theta = _flat(net).requires_grad_(True)
    sq = [float(torch.autograd.grad(F.cross_entropy(f(theta)[i:i + 1], y[i:i + 1]), theta)[0].square().sum())
          for i in range(len(x))]
    # rel_tol 0.1: at 0.02 this Fisher's probes vary enough to run all 1000 (20 s); the check is the same
    tr = hessian_trace(net, nn.CrossEntropyLoss(), (x, y), num_samples=None, curvature="fisher", dtype="float64",
                       rel_tol=0.1, progress=False)
    assert tr.interval[0] <= np.mean(sq) <= tr.interval[1]
    # the eigen-ratio of the GGN (positive semi-definite: lambda_min >= 0) and GGN directions
    ratio = EigenRatio(curvature="ggn", dtype="float64")
    assert repr(ratio).endswith("dtype=float64, curvature='ggn')") and "curvature" not in repr(EigenRatio())
    ls = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=None, metrics={"r": ratio})
    assert np.isfinite(ls.surfaces["r"]).all() and (ls.surfaces["r"] >= 0).all()


def test_hessian_directions_of_the_ggn_are_its_top_eigenvectors():
    from landscape.curvature import hessian_directions

    net = _tiny()
    x, y = _data()
    lam, vec = np.linalg.eigh(_dense_ggn(net, x, y).numpy())
    task = Supervised(nn.CrossEntropyLoss())
    names = [n for n, _ in net.named_parameters()]
    v, w, eig = hessian_directions(net, task, collect((x, y), None, task, caller="test"), names, curvature="ggn",
                                   dtype=torch.float64, tol=1e-10)
    assert eig.curvature == "ggn"
    for got, want in zip((v, w), (vec[:, -1], vec[:, -2])):
        flat = torch.cat([t.reshape(-1) for t in got]).double().numpy()
        assert abs(abs(flat @ want) - 1.0) < 1e-6


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(curvature="gn"), "The 'curvature' parameter of hessian_eigs must be one of 'hessian', 'ggn', 'fisher'"),
    (dict(curvature="fisher", product="finite_difference"), "The 'product' parameter of hessian_eigs must be None "
                                                            "or one of 'reverse'"),
    (dict(curvature="ggn", loss_fn=None, task=lambda m, b: m(b[0]).sum()), "'curvature' parameter of hessian_eigs "
                                                                           "is 'ggn', which needs a task"),
    (dict(basis=4), "The 'basis' parameter of hessian_eigs must be None or an int in the range [7, inf)"),
])
def test_the_functions_refuse_a_bad_curvature_before_work(kwargs, fragment):
    from landscape.curvature import EigenRatio, hessian_eigs

    net = _tiny()
    kw = dict(loss_fn=nn.CrossEntropyLoss(), num_samples=None, progress=False)
    kw.update(kwargs)
    with pytest.raises(InvalidParameterError) as err:
        hessian_eigs(net, data=_data(), **kw)
    assert fragment in str(err.value)
    assert net.calls == 0
    with pytest.raises(InvalidParameterError, match="The 'product' parameter of EigenRatio"):
        EigenRatio(curvature="fisher", product="forward")
