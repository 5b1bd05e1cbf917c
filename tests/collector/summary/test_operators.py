"""Summary operators (collector.summary): inside forward, a loss and an optimizer step."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

import collector.summary as summary
from collector import SummaryReader, SummaryRecord
from collector.summary._operators import discard_pending


class _Untouchable:
    """A value whose every attribute access fails: proves the operator never looked at it."""

    def __getattribute__(self, name):
        raise AssertionError(f"the operator touched the value ({name})")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x):
        summary.image("input", x.view(-1, 1, 2, 2))
        h = torch.relu(self.fc1(x))
        summary.tensor("after_fc1", h)
        return self.fc2(h)


class RecordingLoss(nn.Module):
    def forward(self, logits, target):
        loss = nn.functional.cross_entropy(logits, target)
        summary.scalar("loss", loss)
        return loss


class GradientSGD(torch.optim.SGD):
    """The tutorial's tip: inherit the optimizer and record the gradients in its step."""

    def __init__(self, named_params, **kwargs):
        named_params = list(named_params)
        super().__init__([p for _, p in named_params], **kwargs)
        self.gradient_names = [name + ".gradient" for name, _ in named_params]

    def step(self, closure=None):
        params = self.param_groups[0]["params"]
        for name, p in zip(self.gradient_names, params):
            summary.histogram(name, p.grad)
        summary.scalar("learning_rate", self.param_groups[0]["lr"])
        return super().step(closure)


def _train(net, loss_fn, opt, rec, steps, *, start=1):
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    for step in range(start, start + steps):
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        rec.record(step)


def test_values_from_forward_loss_and_optimizer_arrive_with_tags_and_steps(tmp_path):
    torch.manual_seed(0)
    net = Net()
    opt = GradientSGD(net.named_parameters(), lr=0.1)
    with SummaryRecord(tmp_path) as rec:
        _train(net, RecordingLoss(), opt, rec, 3)
    reader = SummaryReader(tmp_path)
    tags = reader.tags()
    assert tags["scalar"] == ["loss", "learning_rate"]  # the name, without MindSpore's internal "[:Scalar]"
    assert tags["image"] == ["input"]
    assert tags["tensor"] == ["after_fc1"]
    assert set(tags["histogram"]) == {"fc1.weight.gradient", "fc1.bias.gradient", "fc2.weight.gradient",
                                      "fc2.bias.gradient"}
    steps, losses = reader.scalars()["loss"]
    assert steps.tolist() == [1, 2, 3]
    assert np.all(np.isfinite(losses)) and losses[2] < losses[0]  # SGD made progress
    assert reader.scalars()["learning_rate"][1].tolist() == [pytest.approx(0.1)] * 3
    assert [h["step"] for h in reader.histograms()["fc2.bias.gradient"]] == [1, 2, 3]
    assert [h["total"] for h in reader.histograms()["fc1.weight.gradient"]] == [12, 12, 12]
    (step, tensor), *_ = reader.tensors()["after_fc1"]
    assert step == 1 and tensor.shape == (8, 3)
    assert [s for s, _ in reader.images()["input"]] == [1, 2, 3]


def test_gradient_histogram_matches_the_gradient(tmp_path):
    torch.manual_seed(1)
    net = Net()
    opt = GradientSGD(net.named_parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    with SummaryRecord(tmp_path) as rec:
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        expected = net.fc2.weight.grad.clone()
        opt.step()
        rec.record(1)
    hist = SummaryReader(tmp_path).histograms()["fc2.weight.gradient"][0]
    assert hist["min"] == pytest.approx(float(expected.min()))
    assert hist["max"] == pytest.approx(float(expected.max()))
    assert hist["sum"] == pytest.approx(float(expected.sum()), abs=1e-6)


def test_nothing_is_buffered_without_an_open_record(tmp_path):
    for op in (summary.scalar, summary.tensor, summary.image, summary.histogram):
        op("x", _Untouchable())  # returns before looking at the value
        op(None, _Untouchable())  # even a wrong name: nothing is checked when nothing collects
    assert not summary.is_recording()
    rec = SummaryRecord(tmp_path)
    assert summary.is_recording()
    rec.close()
    summary.scalar("late", torch.tensor(1.0))  # a closed record takes nothing
    assert not rec.has_operator_values
    assert not summary.is_recording()
    with SummaryRecord(tmp_path / "b") as rec2:
        assert not rec2.has_operator_values  # nothing from before it was opened
        rec2.record(1)
    assert SummaryReader(tmp_path / "b").tags() == {}


def test_nothing_is_recorded_in_eval_mode(tmp_path):
    net, loss_fn = Net(), RecordingLoss()
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    with SummaryRecord(tmp_path) as rec:
        loss_fn(net(x), y)
        rec.record(1)
        rec.set_mode("eval")
        summary.scalar("eval_only", _Untouchable())
        with torch.no_grad():
            loss_fn(net(x), y)
        assert not rec.has_operator_values
        rec.record(2)
        rec.set_mode("train")
        loss_fn(net(x), y)
        rec.record(3)
    reader = SummaryReader(tmp_path)
    assert reader.scalars()["loss"][0].tolist() == [1, 3]
    assert "eval_only" not in reader.scalars()


def test_values_buffered_before_eval_are_dropped_by_an_eval_record(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        summary.scalar("loss", 1.0)
        rec.set_mode("eval")
        rec.record(1)
        rec.set_mode("train")
        rec.record(2)
    assert SummaryReader(tmp_path).tags() == {}


def test_name_reused_in_one_step_keeps_the_newest_and_warns_once(tmp_path, caplog):
    with SummaryRecord(tmp_path) as rec, caplog.at_level(logging.WARNING, logger="collector.summary._operators"):
        summary.scalar("loss", 1.0)
        summary.scalar("loss", 2.0)
        summary.histogram("loss", torch.arange(4.0))  # another plugin: another value
        rec.record(1)
        summary.scalar("loss", 3.0)  # a new step: no duplicate
        rec.record(2)
        summary.scalar("loss", 4.0)
        summary.scalar("loss", 5.0)  # reused again: kept, but not reported a second time
        rec.record(3)
    warnings = [r.getMessage() for r in caplog.records if r.name == "collector.summary._operators"]
    assert len(warnings) == 1
    assert "'loss/scalar' has duplicate values. Only the newest one will be recorded." in warnings[0]
    reader = SummaryReader(tmp_path)
    steps, values = reader.scalars()["loss"]
    assert steps.tolist() == [1, 2, 3] and values.tolist() == [2.0, 3.0, 5.0]
    assert [h["step"] for h in reader.histograms()["loss"]] == [1]


def test_add_value_and_operator_with_one_name_keep_the_operator(tmp_path, caplog):
    with SummaryRecord(tmp_path) as rec, caplog.at_level(logging.WARNING):
        rec.add_value("scalar", "loss", 1.0)
        summary.scalar("loss", 2.0)
        rec.record(1)
    assert SummaryReader(tmp_path).scalars()["loss"][1].tolist() == [2.0]
    assert any("'loss/scalar' has duplicate values" in r.getMessage() for r in caplog.records)


def test_discard_pending_drops_an_uncollected_step(tmp_path):
    discard_pending()  # nothing open: nothing to do
    with SummaryRecord(tmp_path) as rec:
        summary.scalar("loss", 1.0)
        discard_pending()  # what SummaryCollector does at a step it does not collect
        summary.scalar("loss", 2.0)
        rec.record(2)
    assert SummaryReader(tmp_path).scalars()["loss"][1].tolist() == [2.0]


def test_wrong_values_raise_at_the_call_while_recording(tmp_path):
    with SummaryRecord(tmp_path):
        with pytest.raises(ValueError, match="non-empty str"):
            summary.scalar("", 1.0)
        with pytest.raises(ValueError, match="NCHW"):
            summary.image("img", torch.zeros(3, 4))
        with pytest.raises(TypeError, match="torch.Tensor"):
            summary.tensor("t", "text")


def test_operator_value_is_a_copy(tmp_path):
    t = torch.zeros(3)
    with SummaryRecord(tmp_path) as rec:
        summary.tensor("t", t)
        t += 1  # changed in place after the call, as an optimizer does
        rec.record(1)
    np.testing.assert_array_equal(SummaryReader(tmp_path).tensors()["t"][0][1], np.zeros(3, dtype=np.float32))


@pytest.mark.parametrize("traced_before", [True, False], ids=["traced-without-record", "first-trace-recording"])
def test_operators_in_a_compiled_model_record_the_real_values(tmp_path, monkeypatch, traced_before):
    """Under torch.compile the operator is a graph break: each step's value is the eager one. The disabled
    function is made on first need (here inside the first trace, or before it when the first trace ran
    without a record)."""
    from collector.summary import _operators
    monkeypatch.setattr(_operators, "_disabled_buffer", None)
    torch._dynamo.reset()
    torch.manual_seed(0)
    net = Net()
    compiled = torch.compile(net, backend="eager")
    xs = [torch.randn(8, 4) for _ in range(3)]
    if traced_before:
        compiled(xs[0])
    with SummaryRecord(tmp_path) as rec:
        for step, x in enumerate(xs, 1):
            compiled(x)
            rec.record(step)
    recorded = SummaryReader(tmp_path).tensors()["after_fc1"]
    assert [s for s, _ in recorded] == [1, 2, 3]
    for (_, value), x in zip(recorded, xs):
        np.testing.assert_array_equal(value, torch.relu(net.fc1(x)).detach().numpy())
    torch._dynamo.reset()


def test_operators_in_a_compiled_model_do_not_break_it(tmp_path):
    torch._dynamo.reset()
    net = Net()
    compiled = torch.compile(net, backend="eager")
    x = torch.randn(8, 4)
    compiled(x)  # no record open: traced without the operators
    with SummaryRecord(tmp_path) as rec:
        out = compiled(x)
        rec.record(1)
    torch.testing.assert_close(out, net(x))
    reader = SummaryReader(tmp_path)
    assert reader.tags().get("tensor") == ["after_fc1"]
    torch._dynamo.reset()
