"""SummaryCollector's hooks for integrations: resumed runs, a loss logged apart from the steps, evaluation between epochs."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from collector import InvalidParameterError, Model, SummaryCollector, SummaryReader, get_summary_lineage


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _batches(n: int = 6):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 4, generator=g), torch.randint(0, 3, (5,), generator=g)) for _ in range(n)]


def _train_plain(sc, net, epochs, *, initial_epoch=0, batches=None):
    batches = batches or _batches()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sc.begin_train(network=net, optimizer=opt, loss_fn=nn.CrossEntropyLoss(), train_dataset=batches,
                   epoch_num=epochs, initial_step=initial_epoch * len(batches), initial_epoch=initial_epoch)
    for _ in range(initial_epoch, epochs):
        for x, y in batches:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            sc.step(loss)
        sc.epoch_end()
    sc.end()


def _metadata(run):
    return json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())


@pytest.mark.parametrize("unit, intervals, first_part", [
    ("epoch", [[1, 2, 3], [3, 4, 5]], 2),
    ("step", [[6, 12, 18], [20, 24, 30]], 2),
])
def test_a_resumed_plain_loop_continues_numbers_and_keeps_earlier_checkpoints(tmp_path, unit, intervals, first_part):
    run = tmp_path / "run"
    specified = {"collect_landscape": {"unit": unit, "intervals": intervals}}
    net = _net()
    _train_plain(SummaryCollector(run, collect_freq=6, collect_specified_data=specified), net, first_part)
    assert _metadata(run)["epoch_group"] == {}  # no interval complete after the first part
    first_files = sorted(p.name for p in (run / "ckpt_dir").glob("*.pt"))
    _train_plain(SummaryCollector(run, collect_freq=6, collect_specified_data=specified), net, 5,
                 initial_epoch=first_part)
    md = _metadata(run)
    assert md["epoch_group"] == {"0": intervals[0], "1": intervals[1]}
    assert sorted(map(int, md["model_params_file_map"])) == sorted({n for iv in intervals for n in iv})
    assert set(first_files) <= {p.name for p in (run / "ckpt_dir").glob("*.pt")}
    steps, _ = SummaryReader(run).scalars()["loss/auto"]
    resumed = first_part * 6 + 1  # the first step of the resumed part is collected, as any first step
    assert steps.tolist() == [s for s in range(1, 31) if s == 1 or s % 6 == 0 or s == resumed]


def test_model_train_with_initial_epoch_keeps_the_checkpoints_of_the_first_part(tmp_path):
    run = tmp_path / "run"
    specified = {"collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3, 4]]}}
    net = _net()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
    model.train(2, _batches(), callbacks=[SummaryCollector(run, collect_specified_data=specified)])
    model.train(4, _batches(), callbacks=[SummaryCollector(run, collect_specified_data=specified)], initial_epoch=2)
    assert _metadata(run)["epoch_group"] == {"0": [1, 2, 3, 4]}


def test_a_fresh_run_does_not_adopt_old_checkpoints(tmp_path):
    run = tmp_path / "run"
    specified = {"collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]]}}
    _train_plain(SummaryCollector(run, collect_specified_data=specified), _net(), 2)
    _train_plain(SummaryCollector(run, collect_specified_data=specified), _net(), 1)  # starts over at epoch 1
    assert sorted(map(int, _metadata(run)["model_params_file_map"])) == [1]


def test_log_loss_records_at_its_step_and_is_the_final_loss(tmp_path):
    net = _net()
    sc = SummaryCollector(tmp_path, collect_freq=100)
    sc.begin_train(network=net, epoch_num=1, batch_num=4)
    for step in range(1, 5):
        sc.step(None)
        if step % 2 == 0:
            sc.log_loss(torch.tensor([1.0, 2.0]) / step, step=step)  # a tensor is averaged
    sc.epoch_end()
    sc.end()
    steps, values = SummaryReader(tmp_path).scalars()["loss/auto"]
    assert steps.tolist() == [2, 4] and values.tolist() == [0.75, 0.375]
    assert get_summary_lineage(str(tmp_path))["algorithm"]["loss"] == 0.375


def test_log_loss_follows_collect_metric_and_checks_its_arguments(tmp_path):
    sc = SummaryCollector(tmp_path, collect_specified_data={"collect_metric": False})
    sc.begin_train(network=_net(), epoch_num=1)
    sc.step(None)
    sc.log_loss(0.5)
    with pytest.raises(InvalidParameterError, match="'loss' parameter of SummaryCollector.log_loss must be"):
        sc.log_loss("0.5")
    with pytest.raises(InvalidParameterError, match="'step' parameter of SummaryCollector.log_loss must be"):
        sc.log_loss(0.5, step=-1)
    sc.end()
    assert "loss/auto" not in SummaryReader(tmp_path).scalars()


def test_log_eval_between_epochs_keeps_collecting_operator_values(tmp_path):
    """Evaluating between epochs (validation loops) must not leave the record in eval mode."""
    from collector import summary

    net = _net()
    sc = SummaryCollector(tmp_path, collect_freq=1)
    sc.begin_train(network=net, epoch_num=2, batch_num=2)
    for epoch in range(2):
        for _ in range(2):
            summary.scalar("from_forward", torch.tensor(float(epoch)))
            sc.step(torch.tensor(1.0))
        sc.epoch_end()
        sc.log_eval({"accuracy": 0.5 + epoch / 4})
    sc.end()
    steps, values = SummaryReader(tmp_path).scalars()["from_forward"]
    assert steps.tolist() == [1, 2, 3, 4] and values.tolist() == [0, 0, 1, 1]
    assert get_summary_lineage(str(tmp_path))["metric"] == {"accuracy": 0.75}


def test_begin_train_checks_initial_numbers(tmp_path):
    sc = SummaryCollector(tmp_path)
    with pytest.raises(InvalidParameterError, match="'initial_step' parameter of SummaryCollector.begin_train"):
        sc.begin_train(network=_net(), initial_step=-1)
    with pytest.raises(InvalidParameterError, match="'initial_epoch' parameter of SummaryCollector.begin_train"):
        sc.begin_train(network=_net(), initial_epoch=1.5)
