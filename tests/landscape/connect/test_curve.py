"""Curves between models: the ends are the models bit for bit, a trained curve on a digits pair
is as low as its ends (within a tenth of the naive barrier), training resumes to the same bits,
and the curve is drawn on the plane through A, the bend and B."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape import barrier, fit_curve
from landscape.examples import MLP, DeepMLP
from tests.landscape.connect._models import digits_split, train_digits

CE = nn.CrossEntropyLoss()


@pytest.fixture(scope="module")
def pair():
    return train_digits(1, lambda: MLP(64), 4), train_digits(2, lambda: MLP(64), 4)


@pytest.mark.parametrize("kind", ["bezier", "polychain"])
def test_ends_are_the_models_bit_for_bit(pair, kind):
    xtr, ytr, _, _ = digits_split()
    a, b = pair
    curve = fit_curve(a, b, CE, (xtr[:128], ytr[:128]), kind=kind, bends=2, epochs=1)
    for t, model in ((0.0, a), (1.0, b)):
        at = curve.model_at(t).state_dict()
        for k, v in model.state_dict().items():
            assert torch.equal(at[k], v), (t, k)


def _bezier_point(a: nn.Module, bend: dict, b: nn.Module, t: float) -> nn.Module:
    """The quadratic Bezier point computed by hand: (1-t)^2 A + 2t(1-t) M + t^2 B."""
    net = MLP(64)
    sa, sb = a.state_dict(), b.state_dict()
    net.load_state_dict({k: (1 - t) ** 2 * sa[k] + 2 * t * (1 - t) * bend[k] + t ** 2 * sb[k] for k in sa})
    return net.eval()


def test_trained_curve_is_as_low_as_its_ends(pair):
    xtr, ytr, _, _ = digits_split()
    a, b = pair
    naive = barrier(a, b, CE, (xtr, ytr), points=5)
    curve = fit_curve(a, b, CE, (xtr, ytr), epochs=8, lr=0.05, seed=1)
    along = curve.barrier(points=61)
    assert along.alphas.size == 61 and along.path == "bezier"
    ends = max(along.loss[0], along.loss[-1])
    assert along.loss.max() <= ends + 0.1 * naive.height()
    # the values are the plain forward's at the curve's points
    for j in (15, 30):
        t = float(along.alphas[j])
        with torch.no_grad():
            plain = float(CE(_bezier_point(a, curve.bends[0], b, t)(xtr), ytr))
        assert along.loss[j] == pytest.approx(plain, rel=1e-5)
    assert along.landscape.metadata["decomposition"] == "Curve"
    assert along.error is not None and 0 <= along.error.min()


def test_training_resumes_to_the_same_bits(pair, tmp_path):
    xtr, ytr, _, _ = digits_split()
    a, b = pair
    data = (xtr[:256], ytr[:256])
    straight = fit_curve(a, b, CE, data, epochs=3, seed=2)
    path = tmp_path / "curve.pt"
    fit_curve(a, b, CE, data, epochs=2, seed=2, checkpoint=path)
    resumed = fit_curve(a, b, CE, data, epochs=3, seed=2, checkpoint=path)
    assert resumed.epochs == 3 and resumed.history == straight.history
    for k, v in straight.bends[0].items():
        assert torch.equal(resumed.bends[0][k], v), k
    with pytest.raises(InvalidParameterError, match="other settings"):
        fit_curve(a, b, CE, data, epochs=3, seed=2, lr=0.01, checkpoint=path)


def test_a_checkpoint_of_other_settings_is_refused_before_the_alignment(pair, tmp_path, monkeypatch):
    """Every setting but B's digest is compared before the data is read or B aligned (spies); B, as
    aligned, after the alignment."""
    from landscape.connect import _curve

    xtr, ytr, _, _ = digits_split()
    a, b = pair
    data = (xtr[:64], ytr[:64])
    path = tmp_path / "curve.pt"
    fit_curve(a, b, CE, data, epochs=1, checkpoint=path, align="weights")
    aligned = []
    real = _curve.resolve_alignment
    monkeypatch.setattr(_curve, "resolve_alignment", lambda *args: aligned.append(1) or real(*args))

    def exploding():
        raise AssertionError("data read before the checkpoint's settings were compared")
        yield  # pragma: no cover

    with pytest.raises(InvalidParameterError, match=r"other settings or models \(lr differ\)"):
        fit_curve(a, b, CE, exploding(), epochs=2, lr=0.01, checkpoint=path, align="weights")
    with pytest.raises(InvalidParameterError, match=r"other settings or models \(a differ\)"):
        fit_curve(b, a, CE, exploding(), epochs=2, checkpoint=path, align="weights")
    assert aligned == []
    with pytest.raises(InvalidParameterError, match=r"other settings or models \(b differ\)"):  # not aligned now
        fit_curve(a, b, CE, data, epochs=2, checkpoint=path)
    assert aligned == [1]


def test_curve_drawn_on_the_plane_through_a_bend_and_b(pair):
    xtr, ytr, _, _ = digits_split()
    a, b = pair
    curve = fit_curve(a, b, CE, (xtr[:256], ytr[:256]), epochs=1)
    plane = curve.plane(size=5, points=11)
    assert set(plane.markers) == {"A", "B", "C"}
    assert plane.path is not None and len(plane.path.z) == 11
    # the curve starts at A and ends at B: on the plane at their markers, with their losses
    for k, label in ((0, "A"), (-1, "B")):
        assert plane.path.x[k] == pytest.approx(plane.markers[label][0], abs=1e-5)
        assert plane.path.y[k] == pytest.approx(plane.markers[label][1], abs=1e-5)
        assert plane.path.z[k] == pytest.approx(plane.markers[label][2], rel=1e-5)


def test_data_read_once_gives_what_a_list_gives(pair):
    """A generator of batches: the alignment and the curve's samples are the same as from a list."""
    xtr, ytr, _, _ = digits_split()
    a, b = pair
    batches = [(xtr[i:i + 64], ytr[i:i + 64]) for i in range(0, 192, 64)]
    listed = fit_curve(a, b, CE, batches, epochs=1, align="weights")
    once = fit_curve(a, b, CE, iter(batches), epochs=1, align="weights")
    assert once.samples.n == 192 and once.alignment.digest == listed.alignment.digest
    for k, v in listed.bends[0].items():
        assert torch.equal(once.bends[0][k], v), k
    assert "\n" not in repr(once) and "tensor" not in repr(once)  # the bends are not printed
    plane = once.plane(iter(batches), size=3, points=3)
    assert plane.metadata["num_samples"] == 192


def test_batch_norm_statistics_estimated_at_every_t():
    xtr, ytr, _, _ = digits_split()
    make = lambda: DeepMLP(1, 16, norm="batch")  # noqa: E731
    a, b = train_digits(1, make, 1), train_digits(2, make, 1)
    curve = fit_curve(a, b, CE, (xtr[:256], ytr[:256]), epochs=1)
    mid = curve.model_at(0.5)
    # the running mean is the mean of the layer's inputs over the samples (estimated again here)
    with torch.no_grad():
        h = mid.blocks[0].fc(mid.relu(mid.inp(xtr[:256])))
    assert torch.allclose(mid.blocks[0].bn.running_mean, h.mean(0), atol=1e-5)
    along = curve.barrier(points=3)
    assert along.bn_statistics == "recompute" and math.isfinite(along.height())


def test_bad_input_refused_before_any_work():
    a = MLP(hidden=4)

    def exploding():
        raise AssertionError("data read before the input was checked")
        yield  # pragma: no cover

    with pytest.raises(InvalidParameterError, match="'kind' parameter"):
        fit_curve(a, MLP(hidden=4), CE, exploding(), kind="spline")
    with pytest.raises(InvalidParameterError, match="shapes"):
        fit_curve(a, MLP(hidden=8), CE, exploding())
    with pytest.raises(InvalidParameterError, match="'bends' parameter"):
        fit_curve(a, MLP(hidden=4), CE, exploding(), bends=0)
    with pytest.raises(InvalidParameterError, match="'lr' parameter of fit_curve must be finite"):
        fit_curve(a, MLP(hidden=4), CE, exploding(), lr=float("inf"))
    with pytest.raises(InvalidParameterError, match="'weight_decay' parameter of fit_curve must be finite"):
        fit_curve(a, MLP(hidden=4), CE, exploding(), weight_decay=float("inf"))


def test_checkpoint_in_a_missing_folder_refused_before_any_work(tmp_path):
    def exploding():
        raise AssertionError("data read before the input was checked")
        yield  # pragma: no cover

    with pytest.raises(InvalidParameterError, match="'checkpoint' parameter of fit_curve.*no folder"):
        fit_curve(MLP(hidden=4), MLP(hidden=4), CE, exploding(), checkpoint=tmp_path / "nope" / "curve.pt")
    assert list(tmp_path.iterdir()) == []
