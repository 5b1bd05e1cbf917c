"""Barriers: the two definitions' arithmetic, only alpha in [0, 1] counting, the digits pairs
(naive against aligned), batch-norm statistics re-estimated against interpolated, a layer's
barrier, and the line landscape written and read back."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape import barrier, read_h5, write_h5
from landscape.connect import Barrier, barrier_height
from landscape.examples import MLP, DeepMLP
from tests.landscape.connect._models import digits_split, train_digits

CE = nn.CrossEntropyLoss()


def test_definitions_on_the_issues_numbers():
    assert barrier_height([0, 0.5, 1], [0.2, 1.0, 0.4], "mean") == pytest.approx(0.7, abs=1e-12)
    assert barrier_height([0, 0.5, 1], [0.2, 1.0, 0.4], "linear") == pytest.approx(0.7, abs=1e-12)
    assert barrier_height([0, 0.5, 1], [0.2, 0.5, 1.0], "mean") == pytest.approx(0.4, abs=1e-12)
    assert barrier_height([0, 0.5, 1], [0.2, 0.5, 1.0], "linear") == pytest.approx(0.0, abs=1e-12)


def test_alpha_outside_zero_one_never_counts():
    alphas = [-0.5, 0.0, 0.5, 1.0, 1.5]
    values = [50.0, 0.2, 1.0, 0.4, 80.0]
    assert barrier_height(alphas, values, "mean") == pytest.approx(0.7, abs=1e-12)
    assert barrier_height(alphas, values, "linear") == pytest.approx(0.7, abs=1e-12)
    assert np.isnan(barrier_height([0, 0.5, 1], [0.2, float("nan"), 0.4]))
    assert barrier_height([-0.5, 0, 0.5, 1], [float("nan"), 0.2, 1.0, 0.4]) == pytest.approx(0.7, abs=1e-12)


def test_a_non_finite_loss_makes_the_error_barrier_nan_too():
    got = Barrier(np.array([0.0, 0.5, 1.0]), np.array([0.1, np.nan, 0.2]), np.array([0.0, 0.9, 0.0]))
    assert np.isnan(got.height("mean", "loss")) and np.isnan(got.height("linear", "error"))
    assert "1 of 3 points non-finite" in got.summary() and "error nan" in got.summary()
    outside = Barrier(np.array([-0.5, 0.0, 0.5, 1.0]), np.array([np.nan, 0.1, 0.3, 0.2]),
                      np.array([0.9, 0.0, 0.1, 0.0]))  # alpha outside [0, 1] still never counts
    assert outside.height("mean", "error") == pytest.approx(0.1)


def test_grid_without_the_midpoint_is_refused():
    with pytest.raises(InvalidParameterError, match=r"lacks \[0.5\]"):
        barrier_height(np.linspace(0, 1, 4), [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(InvalidParameterError, match="'alphas' parameter of barrier_height must be a sequence or array "
                                                    "of real numbers. Got str 'abc'"):
        barrier_height("abc", [0.1, 0.2, 0.3])
    with pytest.raises(InvalidParameterError, match="'values' parameter of barrier_height .* real numbers"):
        barrier_height([0, 0.5, 1], [0.1, "high", 0.3])
    a = MLP(hidden=4)

    def exploding():
        raise AssertionError("data read before the input was checked")
        yield  # pragma: no cover

    with pytest.raises(InvalidParameterError, match="'points' parameter of barrier must be odd"):
        barrier(a, copy.deepcopy(a), CE, exploding(), points=24)
    with pytest.raises(InvalidParameterError, match="architecture"):
        barrier(a, DeepMLP(1, 4), CE, exploding())
    with pytest.raises(InvalidParameterError, match="'align' parameter"):
        barrier(a, copy.deepcopy(a), CE, exploding(), align="sinkhorn")
    with pytest.raises(InvalidParameterError, match="matches no"):
        barrier(a, copy.deepcopy(a), CE, exploding(), include="fc9")


def test_data_read_once_gives_what_a_list_gives():
    """A generator of batches is read once: the probe and the alignment take nothing from the line."""
    from landscape.examples import digits_tensors

    x, y = digits_tensors()
    torch.manual_seed(0)
    a, b = MLP(hidden=16), MLP(hidden=16)
    batches = [(x[i:i + 64], y[i:i + 64]) for i in range(0, 256, 64)]
    for align in (None, "weights"):
        listed = barrier(a, b, CE, batches, points=3, align=align, test_data=batches[:2])
        once = barrier(a, b, CE, iter(batches), points=3, align=align, test_data=iter(batches[:2]))
        assert once.landscape.metadata["num_samples"] == 256
        assert once.test_landscape.metadata["num_samples"] == 128
        np.testing.assert_array_equal(once.loss, listed.loss)
        np.testing.assert_array_equal(once.test_loss, listed.test_loss)
    # the midpoint's loss by a plain forward over all 256 samples
    assert listed.loss[1] == pytest.approx(_plain_loss(a, listed.alignment.apply(b), 0.5, x[:256], y[:256]),
                                           rel=1e-5)


def test_bad_test_data_refused_before_the_line():
    a = MLP(hidden=4)

    def exploding():
        raise AssertionError("data read before test_data was checked")
        yield  # pragma: no cover

    with pytest.raises(InvalidParameterError, match="'test_data' parameter of barrier.*Got str"):
        barrier(a, copy.deepcopy(a), CE, exploding(), test_data="test.csv")


@pytest.fixture(scope="module")
def pairs():
    return [(train_digits(s, lambda: MLP(128), 4), train_digits(s + 1, lambda: MLP(128), 4)) for s in (1, 3)]


def _plain_loss(a: nn.Module, b: nn.Module, alpha: float, x, y, only: str | None = None) -> float:
    """The loss of (1 - alpha) A + alpha B, computed with a plain forward (``only``: that module's tensors
    interpolated, the rest A's)."""
    net = copy.deepcopy(a)
    sa, sb = a.state_dict(), b.state_dict()
    net.load_state_dict({k: (1 - alpha) * t + alpha * sb[k] if only is None or k.startswith(only) else t
                         for k, t in sa.items()})
    with torch.no_grad():
        return float(CE(net(x), y))


def test_digits_pairs_barrier_drops_after_alignment(pairs):
    xtr, ytr, xte, yte = digits_split()
    for a, b in pairs:
        naive = barrier(a, b, CE, (xtr, ytr), test_data=(xte, yte))
        aligned = barrier(a, b, CE, (xtr, ytr), test_data=(xte, yte), align="weights")
        assert naive.height() > 0.2
        assert aligned.height() <= 0.25 * naive.height()
        assert aligned.height("mean", "error", "test") < 0.03
        assert aligned.alignment is not None and aligned.alignment.checked is not None
    # the line's values are the plain interpolation's (the first pair, naive)
    a, b = pairs[0]
    first = barrier(a, b, CE, (xtr, ytr), points=25)
    assert first.alphas[12] == 0.5
    for j in (0, 6, 12, 24):
        assert first.loss[j] == pytest.approx(_plain_loss(a, b, float(first.alphas[j]), xtr, ytr), rel=1e-5)
    with torch.no_grad():
        wrong = int((b(xtr).argmax(1) != ytr).sum())
    assert first.error[-1] == pytest.approx(wrong / len(ytr), abs=1e-12)


def test_narrow_mlps_keep_more_of_their_barrier_than_wide_ones():
    """Git Re-Basin's width ablation: 3 hidden layers of 16 keep more of their barrier after weight
    matching than 3 of 512 (4 epochs here: 0.4 against 0.1 of it)."""
    xtr, ytr, _, _ = digits_split()
    kept = {}
    for width in (16, 512):
        a, b = (train_digits(s, lambda: DeepMLP(2, width), 4) for s in (1, 2))
        naive = barrier(a, b, CE, (xtr, ytr)).height()
        kept[width] = barrier(a, b, CE, (xtr, ytr), align="weights").height() / naive
    assert kept[16] > 2 * kept[512]


def test_a_layers_barrier_holds_the_rest_at_a(pairs):
    xtr, ytr, _, _ = digits_split()
    a, b = pairs[1]
    layer = barrier(a, b, CE, (xtr, ytr), points=5, include="fc2")
    assert layer.loss[2] == pytest.approx(_plain_loss(a, b, 0.5, xtr, ytr, only="fc2."), rel=1e-5)
    assert layer.landscape.metadata["barrier"]["include"] == "fc2"


def _plain_midpoint(a: nn.Module, b: nn.Module, x, y, recompute: bool, on=None) -> float:
    """The loss at alpha = 0.5 by a plain forward: every floating tensor interpolated (running statistics
    too), or, with ``recompute``, the statistics reset and estimated on one train-mode pass over ``on``
    (default ``x``; momentum None), then the loss in eval mode on ``x``."""
    net = copy.deepcopy(a)
    sb = b.state_dict()
    net.load_state_dict({k: 0.5 * t + 0.5 * sb[k] if t.is_floating_point() else t for k, t in a.state_dict().items()})
    if recompute:
        for m in net.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.reset_running_stats()
                m.momentum = None
        with torch.no_grad():
            net.train()(x if on is None else on)
    with torch.no_grad():
        return float(CE(net.eval()(x), y))


def test_batch_norm_statistics_re_estimated_beat_interpolated():
    xtr, ytr, _, _ = digits_split()
    make = lambda: DeepMLP(2, 64, norm="batch")  # noqa: E731
    a, b = train_digits(1, make, 6), train_digits(2, make, 6)
    data = [(xtr, ytr)]  # one batch: the statistics estimated again are those of all the samples
    recomputed = barrier(a, b, CE, data, points=3, align="weights")
    interpolated = barrier(a, b, CE, data, points=3, align=recomputed.alignment, bn_statistics="clamped")
    assert recomputed.loss[1] <= interpolated.loss[1]
    assert recomputed.landscape.metadata["barrier"]["bn_statistics"] == "recompute"
    aligned_b = recomputed.alignment.apply(b)
    assert recomputed.loss[1] == pytest.approx(_plain_midpoint(a, aligned_b, xtr, ytr, True), rel=1e-5)
    assert interpolated.loss[1] == pytest.approx(_plain_midpoint(a, aligned_b, xtr, ytr, False), rel=1e-5)


def test_line_landscape_records_and_round_trips(pairs, tmp_path):
    xtr, ytr, xte, yte = digits_split()
    a, b = pairs[0]
    got = barrier(a, b, CE, (xtr[:256], ytr[:256]), test_data=(xte, yte), points=7, align="weights")
    md = got.landscape.metadata["barrier"]
    assert md["alignment_digest"] == got.alignment.digest and md["points"] == 7 and md["split"] == "train"
    assert md["loss_mean"] == pytest.approx(got.height("mean", "loss", "train"))
    assert got.test_landscape.metadata["barrier"]["split"] == "test"
    path = tmp_path / "landscapes.h5"
    write_h5(path, got.landscapes)
    back = read_h5(path)
    again = Barrier.from_landscape(back["barrier_train"], back["barrier_test"])
    assert again.height("linear", "error", "test") == pytest.approx(got.height("linear", "error", "test"))
    assert back["barrier_train"].metadata["barrier"]["alignment_digest"] == got.alignment.digest


def test_test_line_statistics_are_re_estimated_on_the_training_samples():
    """REPAIR and Garipov et al.: the test line is evaluated on the test samples with the batch-norm
    statistics of the training samples (never estimated on the test samples)."""
    xtr, ytr, xte, yte = digits_split()
    xtr, ytr = xtr[:200], ytr[:200]
    torch.manual_seed(0)
    a, b = DeepMLP(2, 16, norm="batch").eval(), DeepMLP(2, 16, norm="batch").eval()
    got = barrier(a, b, CE, [(xtr, ytr)], points=3, test_data=[(xte, yte)])
    assert got.test_loss[1] == pytest.approx(_plain_midpoint(a, b, xte, yte, True, on=xtr), rel=1e-5)
    assert got.test_loss[1] != pytest.approx(_plain_midpoint(a, b, xte, yte, True), rel=1e-5)
    md, train_md = got.test_landscape.metadata, got.landscape.metadata
    assert md["bn_samples_digest"] == train_md["samples_digest"] != md["samples_digest"]
    assert md["bn_num_samples"] == 200 and md["num_samples"] == len(yte)


def test_a_generator_of_few_samples_is_read_once():
    """A generator of 100 samples for barrier (weight matching checked on its first 32), and one of 20
    (fewer than the 32 an alignment is checked on) for align: each read once, as the same list gives."""
    from landscape import align
    from landscape.examples import digits_tensors

    x, y = digits_tensors()
    torch.manual_seed(0)
    a, b = MLP(hidden=16), MLP(hidden=16)
    batches = [(x[i:i + 25], y[i:i + 25]) for i in range(0, 100, 25)]
    once = barrier(a, b, CE, (bt for bt in batches), points=3, align="weights")
    listed = barrier(a, b, CE, batches, points=3, align="weights")
    assert once.landscape.metadata["num_samples"] == 100
    np.testing.assert_array_equal(once.loss, listed.loss)
    assert once.loss[1] == pytest.approx(_plain_loss(a, listed.alignment.apply(b), 0.5, x[:100], y[:100]), rel=1e-5)
    twenty = [(x[i:i + 10], y[i:i + 10]) for i in (0, 10)]
    for method in ("weights", "activations"):
        few = align(a, b, data=(bt for bt in twenty), method=method, loss_fn=CE)
        same = align(a, b, data=twenty, method=method, loss_fn=CE)
        assert few.checked is not None and few.digest == same.digest
