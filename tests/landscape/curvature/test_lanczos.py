"""Thick-restart Lanczos against numpy's dense eigendecomposition and scipy's ARPACK; its memory
against the window it says it holds (tracemalloc and the process's peak resident memory)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from landscape.curvature import _lanczos, hessian_eigs
from landscape.curvature._lanczos import DEFAULT_TOL, basis_size, lanczos
from landscape.examples import SmallCNN, digits_tensors, train_epoch


def _dense(n: int = 300, seed: int = 0, top=(9.0, 8.5, 8.4, 8.3, -5.0, -4.6, -4.5)
           ) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """A symmetric matrix with a known spectrum: a few separated eigenvalues at each end of a bulk in [-1, 1]."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.concatenate([top, rng.uniform(-1, 1, n - len(top))])
    return torch.from_numpy((q * lam) @ q.T), lam, q


@pytest.mark.parametrize("which", ["largest", "smallest", "both"])
@pytest.mark.parametrize("basis", [None, 10, 40])
def test_restarted_lanczos_finds_the_dense_eigenpairs(which, basis):
    a, lam, q = _dense()
    order = np.argsort(lam)[::-1]
    want = {"largest": order[:3], "smallest": order[::-1][:3][::-1], "both": np.r_[order[:3], order[-3:]]}[which]
    res = lanczos(lambda v: a @ v, 300, k=3, which=which, tol=1e-10, max_iter=3000, seed=0, basis=basis,
                  progress=False)
    assert res.converged and res.basis == (basis or basis_size(3, which, 300))
    np.testing.assert_allclose(res.values, lam[want], rtol=1e-12, atol=1e-12)
    assert (res.restarts > 0) == (res.iterations > res.basis)  # restarted when the window was full
    if basis == 10:
        assert res.restarts > 0
    for vec, i in zip(res.vectors, want):  # unit Ritz vectors equal to the eigenvectors up to sign
        assert abs(abs(float(vec @ torch.from_numpy(q[:, i]))) - 1.0) < 1e-9
    # the stated residuals are the true ones, ||A x - theta x||
    true = torch.linalg.vector_norm(res.vectors @ a - torch.from_numpy(res.values)[:, None] * res.vectors, dim=1)
    np.testing.assert_allclose(true.numpy(), res.residuals, rtol=1e-3, atol=1e-11)  # (a converged pair's is ~0)


def test_float32_storage_keeps_float64_arithmetic():
    """Vectors stored in float32, coefficients in float64: eigenvalues to float32's rounding of the
    vectors (~1e-7 of ||A||), not to the 1e-4 of float32 coefficients summed over 300 entries."""
    a, lam, _ = _dense()
    res = lanczos(lambda v: (a @ v.double()).float(), 300, k=3, which="largest", tol=DEFAULT_TOL[torch.float32],
                  max_iter=300, seed=0, dtype=torch.float32, progress=False)
    assert res.converged and res.vectors.dtype == torch.float32
    np.testing.assert_allclose(res.values, np.sort(lam)[::-1][:3], rtol=2e-7)


def test_a_window_spanning_the_space_diagonalises_exactly():
    a, lam, _ = _dense(n=12, top=(3.0,))
    res = lanczos(lambda v: a @ v, 12, k=12, which="largest", tol=1e-12, max_iter=50, seed=0, progress=False)
    assert res.converged and res.iterations == 12 and res.restarts == 0
    np.testing.assert_allclose(res.values, np.sort(lam)[::-1], atol=1e-12)


@pytest.mark.parametrize("on_device", [True, False], ids=["device", "host"])
def test_the_window_may_live_on_the_host(monkeypatch, on_device):
    a, lam, _ = _dense(n=80)
    monkeypatch.setattr(_lanczos, "_fits", lambda device, nbytes: on_device)
    monkeypatch.setattr(_lanczos, "BLOCK", 7)  # blocks that do not divide the dimension
    res = lanczos(lambda v: a @ v, 80, k=2, which="largest", tol=1e-10, max_iter=500, seed=0, basis=6,
                  progress=False)
    np.testing.assert_allclose(res.values, np.sort(lam)[::-1][:2], rtol=1e-12)


_MEMORY_PROBE = """
import json, re, sys, tracemalloc
from pathlib import Path
import torch
from landscape.curvature._lanczos import lanczos

def status(key):
    return int(re.search(key + r":\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

n, k, basis, iters = (int(a) for a in sys.argv[1:])
diag = torch.linspace(0.0, 1.0, n)
diag[:3] = torch.tensor([10.0, 9.9, 9.8])  # clustered at the top: every product is needed
Path("/proc/self/clear_refs").write_text("5")  # the peak resident size starts again from here
rss0 = status("VmRSS")
tracemalloc.start()
res = lanczos(lambda v: diag * v, n, k=k, which="largest", tol=1e-14, max_iter=iters, seed=0,
              dtype=torch.float32, basis=basis, progress=False)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"traced": traced, "peak_rss": status("VmHWM") - rss0, "iterations": res.iterations,
                  "restarts": res.restarts, "top": float(res.values[0])}))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc peak resident size")
def test_memory_is_the_window_not_the_iterations():
    """A 4M-parameter operator (diagonal: no network), k=1 in a window of 6, 24 products (4 restarts):
    the memory Lanczos allocates is bounded by (basis + k + 4) * n * 4 bytes = 11 * 4 * n (c = 44 bytes
    per parameter and eigenpair, float32: the window, the Ritz vector, the product and its float64
    copy), whatever the iterations; plain Lanczos would hold 24 vectors. tracemalloc sees the window
    (numpy's allocation); the peak resident memory sees everything (the working vectors and the
    products' results too), measured in a fresh process whose allocator returns every large block
    when it is freed (glibc's mmap threshold fixed at 128 KiB)."""
    n, k, basis, iters = 4_000_000, 1, 6, 24
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(n), str(k), str(basis), str(iters)], env=env,
                         capture_output=True, text=True, check=True, timeout=900)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    bound = (basis + k + 4) * n * 4
    assert got["iterations"] == iters and got["restarts"] >= 4
    assert abs(got["top"] - 10.0) < 1e-2
    assert basis * n * 4 <= got["traced"] <= bound, got  # the window is there, and no more
    assert got["peak_rss"] <= bound, (got, bound)


def _trained_cnn() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    net = SmallCNN(4)
    x, y = digits_tensors(image=True)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    train_epoch(net, opt, x, y, torch.Generator().manual_seed(0))
    return net.eval(), x[:256], y[:256]


def _arpack_top(net: nn.Module, x: torch.Tensor, y: torch.Tensor, k: int) -> np.ndarray:
    """ARPACK (tol 1e-12) on plain double-backward products in float64: independent of the code tested."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    n64 = copy.deepcopy(net).double()
    params = list(n64.parameters())
    g = torch.autograd.grad(nn.functional.cross_entropy(n64(x.double()), y), params, create_graph=True)
    sizes = [p.numel() for p in params]

    def mv(v: np.ndarray) -> np.ndarray:
        vs = torch.split(torch.from_numpy(np.ascontiguousarray(v).reshape(-1)), sizes)
        hv = torch.autograd.grad(sum((a * b.view_as(a)).sum() for a, b in zip(g, vs)), params, retain_graph=True)
        return torch.cat([t.reshape(-1) for t in hv]).numpy()

    dim = sum(sizes)
    vals = eigsh(LinearOperator((dim, dim), matvec=mv, dtype=np.float64), k=k, which="LA", tol=1e-12,
                 v0=np.ones(dim), return_eigenvectors=False)
    return np.sort(vals)[::-1]


def test_the_defaults_give_a_cnns_top_eigenvalues_to_1e3():
    """float32 products, tol 1e-4, the default window: the top three eigenvalues of a trained CNN
    (1,650 parameters, batch norm in eval mode, 256 digits) within 1e-3 relative of float64 ARPACK."""
    net, x, y = _trained_cnn()
    want = _arpack_top(net, x, y, 3)
    eig = hessian_eigs(net, nn.CrossEntropyLoss(), (x, y), k=3, num_samples=None, progress=False)
    assert eig.dtype == torch.float32 and eig.converged and eig.curvature == "hessian"
    np.testing.assert_allclose(eig.eigenvalues, want, rtol=1e-3)
