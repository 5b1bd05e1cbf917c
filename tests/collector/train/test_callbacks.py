"""Callback, RunContext, LambdaCallback, History, LearningRateScheduler, LossMonitor."""

from __future__ import annotations

import logging
import math

import pytest
import torch
from torch import nn

from collector import (
    Callback,
    History,
    InvalidParameterError,
    LambdaCallback,
    LearningRateScheduler,
    LossMonitor,
    Model,
    RunContext,
)
from collector.train._callbacks import CallbackParams, _CallbackList

HOOKS = ["begin", "epoch_begin", "epoch_end", "step_begin", "step_end", "end"]


def _data(n_batches=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(3, 2, generator=g), torch.randn(3, 1, generator=g)) for _ in range(n_batches)]


def _model(lr=0.1):
    torch.manual_seed(0)
    net = nn.Linear(2, 1)
    return Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=lr))


def test_base_callback_hooks_do_nothing_and_context_manager():
    cb = Callback()
    ctx = RunContext({"cur_step_num": 1})
    for hook in HOOKS:
        assert getattr(cb, hook)(ctx) is None
    with cb as entered:
        assert entered is cb
    assert cb.__exit__(ValueError, ValueError("x"), None) is None  # never swallows exceptions


def test_run_context():
    ctx = RunContext({"cur_step_num": 3})
    args = ctx.original_args()
    assert isinstance(args, CallbackParams) and args.cur_step_num == 3 and args["cur_step_num"] == 3
    args.extra = 5
    assert ctx.original_args()["extra"] == 5
    with pytest.raises(AttributeError, match="no 'missing'"):
        _ = args.missing
    assert ctx.get_stop_requested() is False
    ctx.request_stop()
    assert ctx.get_stop_requested() is True
    with pytest.raises(InvalidParameterError, match="'original_args' parameter of RunContext"):
        RunContext([1, 2])


def test_hook_order_and_lambda_callback():
    calls = []
    cb = LambdaCallback(**{h: (lambda ctx, h=h: calls.append((h, ctx.original_args().get("cur_step_num"))))
                           for h in HOOKS})
    _model().train(2, _data(2), callbacks=cb)
    assert calls == [("begin", 0), ("epoch_begin", 0), ("step_begin", 1), ("step_end", 1), ("step_begin", 2),
                     ("step_end", 2), ("epoch_end", 2), ("epoch_begin", 2), ("step_begin", 3), ("step_end", 3),
                     ("step_begin", 4), ("step_end", 4), ("epoch_end", 4), ("end", 4)]
    with pytest.raises(InvalidParameterError, match="'step_end' parameter of LambdaCallback must be None or a callable"):
        LambdaCallback(step_end=3)


def test_callbacks_entered_and_exited_even_on_error():
    events = []

    class Res(Callback):
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            events.append(("enter", self.name))
            return self

        def __exit__(self, exc_type, *rest):
            events.append(("exit", self.name, exc_type))

        def step_end(self, run_context):
            if self.name == "b":
                raise RuntimeError("fail")

    with pytest.raises(RuntimeError, match="fail"):
        _model().train(1, _data(), callbacks=[Res("a"), Res("b")])
    assert events == [("enter", "a"), ("enter", "b"), ("exit", "b", RuntimeError), ("exit", "a", RuntimeError)]


def test_callback_list_calls_only_hooks_that_do_something():
    calls = []

    class StepEnd(Callback):
        def step_end(self, run_context):
            calls.append("class step_end")

    class Inherits(StepEnd):
        pass

    lam = LambdaCallback(step_begin=lambda ctx: calls.append("lambda step_begin"))
    plain = Callback()
    cbs = _CallbackList([plain, StepEnd(), Inherits(), lam])
    with cbs:
        assert [type(cb) for cb in cbs._active["step_end"]] == [StepEnd, Inherits]
        assert cbs._active["step_begin"] == [lam] and cbs._active["epoch_end"] == []
        ctx = RunContext({"cur_step_num": 1})
        cbs.step_begin(ctx)
        cbs.step_end(ctx)
    assert calls == ["lambda step_begin", "class step_end", "class step_end"]
    assert cbs._active is None  # outside a run every callback is called, as before
    cbs.step_begin(RunContext({}))
    assert calls[-1] == "lambda step_begin"


def test_callback_list_validation():
    with pytest.raises(InvalidParameterError, match=r"'callbacks\[1\]' parameter of Model must be an instance of "
                                                    r"'Callback'.*HINT: subclass collector.Callback"):
        _CallbackList([Callback(), print])
    with pytest.raises(InvalidParameterError, match="'callbacks' parameter of Model"):
        _CallbackList("cb")


def test_history_records_loss_per_epoch():
    losses = {}

    class Last(Callback):
        def step_end(self, run_context):
            p = run_context.original_args()
            losses[p.cur_epoch_num] = float(p.net_outputs)

    history = History()
    _model().train(3, _data(), callbacks=[Last(), history])
    assert history.epoch == [1, 2, 3]
    assert history.history["net_output"] == pytest.approx([losses[1], losses[2], losses[3]])


def test_learning_rate_scheduler_matches_manual_schedule():
    def schedule(lr, step):
        return lr * 0.5 if step % 3 == 0 else lr

    seen = []
    model = _model(lr=0.8)
    model.optimizer.add_param_group({"params": [nn.Parameter(torch.zeros(1))], "lr": 0.4})

    class Watch(Callback):
        def step_begin(self, run_context):
            seen.append([g["lr"] for g in run_context.original_args().optimizer.param_groups])

    model.train(2, _data(4), callbacks=[Watch(), LearningRateScheduler(schedule)])
    expected, lrs = [], [0.8, 0.4]
    for step in range(1, 9):
        expected.append(list(lrs))
        lrs = [schedule(lr, step) for lr in lrs]
    assert seen == expected
    assert [g["lr"] for g in model.optimizer.param_groups] == lrs
    with pytest.raises(InvalidParameterError, match="'learning_rate_function' parameter of LearningRateScheduler"):
        LearningRateScheduler(0.1)


def test_loss_monitor_logs_and_stops_on_nan(caplog):
    lines = []
    _model().train(2, _data(4), callbacks=LossMonitor(2, print_fn=lines.append))
    assert len(lines) == 4 and lines[0].startswith("epoch: 1 step: 2, loss is ")
    with caplog.at_level(logging.INFO, logger="collector.train._callbacks"):
        _model().train(1, _data(2), callbacks=LossMonitor())
    assert "epoch: 1 step: 1, loss is" in caplog.text
    bad = [(torch.full((3, 2), math.nan), torch.zeros(3, 1))]
    with pytest.raises(ValueError, match="epoch: 1 step: 1. Invalid loss nan, terminating training."):
        _model().train(1, bad, callbacks=LossMonitor())
    _model().train(1, bad, callbacks=LossMonitor(0))  # 0: never checks
    with pytest.raises(InvalidParameterError, match=r"'per_print_times' parameter of LossMonitor must be an int in "
                                                    r"the range \[0, inf\)\. Got -1"):
        LossMonitor(-1)
