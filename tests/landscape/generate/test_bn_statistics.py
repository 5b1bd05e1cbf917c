"""Views through models with batch norm: a running variance carried affinely past the models can
turn negative and the loss NaN; the default estimates the statistics again at every point, and the
other options (clamped and counted, as they are, A's) each equal a plain loop that forms every
point the same way."""

from __future__ import annotations

import copy
import logging

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from collector.common import InvalidParameterError

X_RANGE = (-0.5, 1.5, 9)


class BNCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.bn2(self.conv2(h)) + h)  # a residual block
        return self.fc(h.mean((2, 3)))


@pytest.fixture
def models():
    """Two epochs of one run: B's running variances grew fourfold, so at alpha = -0.5 the affine
    carry gives 1.5 var_A - 0.5 var_B < 0."""
    torch.manual_seed(0)
    x, y = torch.randn(32, 1, 6, 6), torch.randint(0, 3, (32,))
    net = BNCNN()
    net.train()
    for _ in range(3):
        net(x)
    a = copy.deepcopy(net.state_dict())
    b = {k: v.clone() for k, v in a.items()}
    g = torch.Generator().manual_seed(1)
    for k in b:
        if k.endswith("running_var"):
            b[k] *= 4.0
        elif b[k].is_floating_point():
            b[k] += 0.05 * torch.randn(b[k].shape, generator=g)
    return net, a, b, (x, y)


def _loop(net, a, b, x, y, rule):
    """Each alpha's state formed by hand, then the network's own eval forward."""
    model = copy.deepcopy(net)
    out = []
    for alpha in np.linspace(*X_RANGE):
        state = {}
        for k, va in a.items():
            if not va.is_floating_point():
                state[k] = va
            elif "running" in k and rule in ("a", "recompute"):
                state[k] = va
            else:
                state[k] = (1 - alpha) * va + alpha * b[k]
                if rule == "clamped" and k.endswith("running_var"):
                    state[k] = state[k].clamp_min(0.0)
        model.load_state_dict(state)
        if rule == "recompute":  # Garipov et al.'s bn_update: the samples' own statistics
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.reset_running_stats()
                    m.momentum = None
            model.train()
            with torch.no_grad():
                model(x)
        model.eval()
        with torch.no_grad():
            out.append(float(nn.functional.cross_entropy(model(x), y)))
    return np.array(out)


def _view(net, a, b, data, rule=None, **kw):
    if rule is not None:
        kw["bn_statistics"] = rule
    return landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, between=(a, b), x=X_RANGE,
                                       num_samples=32, **kw)


def _negative_channels(a, b):
    """Per alpha, the running-variance channels the affine carry makes negative (counted by hand)."""
    return np.array([sum(int(((1 - alpha) * a[k] + alpha * b[k] < 0).sum()) for k in a if k.endswith("running_var"))
                     for alpha in np.linspace(*X_RANGE)])


def test_the_default_estimates_the_statistics_again_at_every_point(models):
    net, a, b, (x, y) = models
    ls = _view(net, a, b, (x, y))
    assert ls.metadata["bn_statistics"] == "recompute"
    assert np.isfinite(ls.z).all()
    np.testing.assert_allclose(ls.z, _loop(net, a, b, x, y, "recompute"), rtol=1e-5)
    assert ls.clamped is None and "clamped" not in ls.summary()


# several points per call (the 9 points are too few for plan="auto" to batch them: given here), and one
@pytest.mark.parametrize("plan", [{"points_per_call": 9, "batching": "vmap"}, {"points_per_call": 1}])
def test_clamped_statistics_are_counted_per_point_and_said(models, caplog, tmp_path, plan):
    net, a, b, (x, y) = models
    with caplog.at_level(logging.WARNING, logger="landscape"):
        ls = _view(net, a, b, (x, y), "clamped", plan=plan)
    assert ls.metadata["points_per_call"] == plan["points_per_call"]
    assert np.isfinite(ls.z).all()
    np.testing.assert_allclose(ls.z, _loop(net, a, b, x, y, "clamped"), rtol=1e-5)
    # the models themselves are untouched by the clamp: A and B are their own losses
    assert ls.markers["A"][2] == pytest.approx(_loop(net, a, b, x, y, "clamped")[2], rel=1e-6)
    expected = _negative_channels(a, b)
    assert expected[0] > 0 and expected[2:].sum() == 0  # alpha = -0.5 (and -0.25) only
    np.testing.assert_array_equal(ls.clamped, expected)
    points, most = int((expected > 0).sum()), int(expected.max())
    assert ls.clamped_points == (points, most)
    said = f"{points} of 9 points with batch-norm variances clamped at zero (up to {most} channels)"
    assert said in ls.summary()
    assert f"{points} of 9 points with batch-norm running variances clamped at zero" in caplog.text
    # landscapes.h5 keeps the counts
    from landscape.io import read_h5, write_h5
    write_h5(tmp_path / "l.h5", [ls])
    back = next(iter(read_h5(tmp_path / "l.h5").values()))
    np.testing.assert_array_equal(back.clamped, expected)
    assert said in back.summary()


def test_the_affine_carry_gives_nan_counted_and_metrics_nan_there(models, caplog):
    net, a, b, (x, y) = models
    with caplog.at_level(logging.WARNING, logger="landscape"):
        raw = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), between=(a, b), x=X_RANGE,
                                          num_samples=32, bn_statistics="affine", metrics=["accuracy"])
    bad = ~np.isfinite(raw.z)
    assert bad.any() and bad[0]  # alpha = -0.5: a negative variance
    np.testing.assert_allclose(raw.z[~bad], _loop(net, a, b, x, y, "affine")[~bad], rtol=1e-5)
    assert raw.non_finite == (int(bad.sum()), 9)
    assert f"{int(bad.sum())} of 9 points non-finite" in raw.summary()
    assert f"{int(bad.sum())} of 9 points non-finite" in caplog.text
    # the accuracy of NaN logits (their argmax, class 0) is no value: NaN where the loss is
    acc = raw.surfaces["accuracy"]
    assert np.isnan(acc[bad]).all() and np.isfinite(acc[~bad]).all()


@pytest.mark.parametrize("rule", ["a", "recompute"])
def test_statistics_kept_at_a_or_estimated_again_equal_the_plain_loop(models, rule):
    net, a, b, (x, y) = models
    ls = _view(net, a, b, (x, y), rule)
    assert np.isfinite(ls.z).all()
    np.testing.assert_allclose(ls.z, _loop(net, a, b, x, y, rule), rtol=1e-5)


def test_a_bad_option_is_refused():
    net = BNCNN()
    with pytest.raises(InvalidParameterError, match="bn_statistics.*clamped.*recompute"):
        landscape.compute_landscape(net, nn.CrossEntropyLoss(), (torch.randn(4, 1, 6, 6), torch.zeros(4).long()),
                                    between=(net, net), bn_statistics="mean")


def test_bn_data_only_where_statistics_are_estimated_again_and_fingerprinted(models):
    net, a, b, (x, y) = models

    def exploding():
        raise AssertionError("data read before bn_data was checked")
        yield  # pragma: no cover

    for kw, why in ((dict(between=(a, b), bn_statistics="clamped"), "bn_statistics is 'recompute'"),
                    (dict(), "between is given")):
        with pytest.raises(InvalidParameterError, match=f"'bn_data' parameter.*unless {why}"):
            landscape.compute_landscape(net, nn.CrossEntropyLoss(), exploding(), bn_data=(x, y), **kw)
    with pytest.raises(InvalidParameterError, match="'bn_data' parameter.*unless the network has batch norm"):
        landscape.compute_landscape(nn.Linear(36, 3), nn.CrossEntropyLoss(), exploding(), between=(a, b),
                                    bn_data=(x, y))
    with pytest.raises(InvalidParameterError, match=r"larger than 'bn_data' \(8 samples\)"):
        _view(net, a, b, (x, y), bn_data=(x[:8], y[:8]))
    # a store's fingerprint holds the statistics' samples: a resume with others is refused
    from landscape.engine import collect
    from landscape.io import Fingerprints

    task, samples = nn.CrossEntropyLoss(), collect((x, y), None, caller="t")
    prints = [Fingerprints(net, task, samples, {}, True, bn_samples=bn).common
              for bn in (None, collect((x[:16], y[:16]), None, caller="t"), collect((x[16:], y[16:]), None, caller="t"))]
    assert "bn_data" not in prints[0] and prints[1]["bn_data"] != prints[2]["bn_data"]
