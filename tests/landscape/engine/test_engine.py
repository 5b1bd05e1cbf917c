"""Every z value against an independent plain PyTorch loop."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector.common import InvalidParameterError
from landscape.engine import _planner as _evaluate
from landscape.geometry._directions import random_directions
from landscape.geometry._state import moved_names
from tests.landscape._helpers import TinyMLP, plain_loss, point_state


def _check_all(ls, net, centre, names, v, w, loader, n, *, train=False):
    for i, b in enumerate(ls.y):
        for j, a in enumerate(ls.x):
            ref = plain_loss(net, point_state(centre, names, v, w, a, b), loader, n, train=train)
            assert math.isclose(ls.z[i, j], ref, rel_tol=1e-5, abs_tol=1e-7), (i, j, ls.z[i, j], ref)


@pytest.mark.parametrize("batched", [True, False])
def test_random_landscape_matches_plain_loop(trained, data, batched, monkeypatch):
    if not batched:
        monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)
    net, traj = trained
    x, y = data
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=20)
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), loader, checkpoints=[traj[-1]],
                                     size=5, num_samples=70, seed=3)
    assert (ls.metadata["points_per_call"] > 1) == batched
    names, _ = moved_names(net, None)
    ref = [traj[-1][n].float() for n in names]
    v, w = random_directions(ref, 3, "layer", names=names)
    v, w = dict(zip(names, v)), dict(zip(names, w))
    _check_all(ls, TinyMLP(), traj[-1], names, v, w, loader, 70)
    assert ls.convergence_point == (ls.x[2], ls.y[2], ls.z[2, 2])
    # the caller's network is never modified
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), traj[-1].values()))


def test_given_directions_and_reductions(trained, data):
    net, traj = trained
    x, y = data
    names, _ = moved_names(net, None)
    g = torch.Generator().manual_seed(1)
    v = {n: 0.1 * torch.randn(traj[-1][n].shape, generator=g) for n in names}
    w = {n: 0.1 * torch.randn(traj[-1][n].shape, generator=g) for n in names}
    net.load_state_dict(traj[-1])
    res = {}
    for red in ("mean", "sum"):
        res[red] = landscape.compute_landscape(net, nn.CrossEntropyLoss(reduction=red), (x, y),
                                               directions=(v, w), size=4, num_samples=50).z
    np.testing.assert_allclose(res["sum"], res["mean"], rtol=1e-5)
    # a per-sample loss is refused before any point: its reduction is the user's (weights, ignored labels)
    with pytest.raises(InvalidParameterError, match=r"returned a tensor of shape \(50,\) for a batch of 50 samples"
                                                    r".*HINT: use its 'mean' reduction"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(reduction="none"), (x, y), directions=(v, w), size=4,
                                    num_samples=50)
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), directions=(v, w), size=4,
                                     num_samples=50)
    _check_all(ls, TinyMLP(), traj[-1], names, v, w, [(x, y)], 50)


def test_metrics_surface_and_nan(trained, data):
    net, traj = trained
    x, y = data
    acc = lambda out, lab: (out.argmax(1) == lab).float().mean()  # noqa: E731
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), checkpoints=[traj[-1]], size=3,
                                     num_samples=40, metrics={"accuracy": acc})
    assert ls.surfaces["accuracy"].shape == (3, 3)
    assert np.all((ls.surfaces["accuracy"] >= 0) & (ls.surfaces["accuracy"] <= 1))

    with torch.no_grad():
        centre = float(net.eval()(x[:40])[:, 0].sum())

    def nan_loss(out, lab):  # NaN on one side of the centre, finite at it (a NaN there is refused before any point)
        val = nn.functional.cross_entropy(out, lab)
        return val * torch.where(out[:, 0].sum() > centre, torch.tensor(float("nan")), torch.tensor(1.0))

    ls = landscape.compute_landscape(net, nan_loss, (x, y), size=6, num_samples=40, seed=1)
    assert np.isnan(ls.z).any() and np.isfinite(ls.z).any()


def test_num_samples_larger_than_dataset(trained, data):
    net, _ = trained
    x, y = data
    with pytest.raises(ValueError, match=r"num_samples.*500.*96 samples"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), num_samples=500)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    with pytest.raises(ValueError, match=r"500.*96 samples"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), loader, num_samples=500)
    with pytest.raises(ValueError, match=r"500.*96 samples"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), iter(loader), num_samples=500)


@pytest.mark.parametrize("kw, key", [
    ({"size": 1}, "size"), ({"normalization": "bad"}, "normalization"), ({"ignore": "x"}, "ignore"),
    ({"seed": -1}, "seed"), ({"directions": "pca"}, "checkpoints"), ({"device_ids": [0, 0]}, "device_ids"),
    ({"device_ids": "0"}, "device_ids"), ({"eval_mode": 1}, "eval_mode"), ({"num_samples": 0}, "num_samples"),
])
def test_bad_parameters(trained, data, kw, key):
    net, _ = trained
    with pytest.raises(ValueError, match=key):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, **kw)


def test_checkpoint_key_mismatch(trained, data):
    net, traj = trained
    bad = dict(traj[-1])
    bad["extra.weight"] = bad.pop("fc1.weight")
    with pytest.raises(ValueError, match=r"missing keys \['fc1.weight'\].*unexpected keys \['extra.weight'\]"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, checkpoints=[bad], num_samples=10)


def test_ignore_biasbn_keeps_biases(trained, data):
    net, traj = trained
    names, still = moved_names(net, "biasbn")
    assert names == ["fc1.weight", "fc2.weight"] and "fc1.bias" in still and "bn.weight" in still


def test_train_mode_keeps_centre_running_stats_and_is_reproducible(trained, data):
    net, traj = trained
    kw = dict(checkpoints=[traj[-1]], size=3, num_samples=40, seed=0)
    a = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, eval_mode=False, **kw)
    b = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, eval_mode=False, **kw)
    np.testing.assert_array_equal(a.z, b.z)
    assert a.metadata["points_per_call"] == 1 and a.metadata["eval_mode"] is False
    # every point against a plain train-mode loop (batch norm on the 40 samples' own statistics) ...
    names, _ = moved_names(net, None)
    ref = [traj[-1][n].float() for n in names]
    v, w = random_directions(ref, 0, "layer", names=names)
    v, w = dict(zip(names, v)), dict(zip(names, w))
    _check_all(a, TinyMLP(), traj[-1], names, v, w, [data], 40, train=True)
    # ... which is not the eval-mode landscape: a forward that ignored eval_mode would not pass the loop above
    e = landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, **kw)
    assert np.abs(a.z - e.z).max() > 0.1
    from landscape.engine import Engine, EngineSpec, Samples
    from landscape.tasks import Supervised

    names, _ = moved_names(net, None)
    ref = [traj[-1][n].float() for n in names]
    samples = Samples([(data[0][:40], data[1][:40])], [40])
    eng = Engine(EngineSpec(net, Supervised(nn.CrossEntropyLoss()), {}, samples, names, traj[-1], ref, ref,
                            eval_mode=False))
    eng.evaluate(np.array([[0.1, 0.2], [0.3, -0.1]]))
    assert torch.equal(eng.net.bn.running_mean, traj[-1]["bn.running_mean"])


@pytest.mark.parametrize("ignore, loss_fn", [(None, nn.CrossEntropyLoss()), ("biasbn", nn.CrossEntropyLoss(reduction="sum")),
                                             (None, nn.CrossEntropyLoss(ignore_index=1)), (None, nn.MultiMarginLoss())])
def test_sequential_fast_path_matches_plain_loop(data, ignore, loss_fn):
    """A Sequential of Linear layers and activations is batched with baddbmm, not vmap."""
    from landscape.engine._batched import sequential_forward, sequential_weights

    x, y = data
    torch.manual_seed(0)
    make = lambda: nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.Tanh(),  # noqa: E731
                                 nn.Sequential(nn.Linear(16, 16), nn.ReLU()), nn.Linear(16, 3))
    net = make()
    names, _ = moved_names(net, ignore)
    assert sequential_forward(net, names, True) is not None
    # the weights the group takes as (p, in, out) on the CPU (the values below are read through them)
    assert sequential_weights(net, names) == {"1.weight", "3.0.weight", "4.weight"}
    ls = landscape.compute_landscape(net, loss_fn, (x, y), size=5, num_samples=70, seed=2, ignore=ignore)
    assert ls.metadata["points_per_call"] > 1
    ref = [net.state_dict()[n].float() for n in names]
    v, w = random_directions(ref, 2, "layer", names=names)
    centre = {k: t.clone() for k, t in net.state_dict().items()}
    ref_net = make()
    for i, b in enumerate(ls.y):
        for j, a in enumerate(ls.x):
            want = plain_loss(ref_net, point_state(centre, names, dict(zip(names, v)), dict(zip(names, w)), a, b),
                              [(x, y)], 70, loss_fn)
            want = want / 70 if getattr(loss_fn, "reduction", "") == "sum" else want
            assert math.isclose(ls.z[i, j], want, rel_tol=1e-5, abs_tol=1e-7), (i, j, ls.z[i, j], want)
