"""TrainLineage / EvalLineage callbacks: what they record, where, and every error of the seed's Raises."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from collector import (
    Accuracy,
    CheckpointConfig,
    InvalidParameterError,
    Model,
    ModelCheckpoint,
    RunContext,
    SummaryCollector,
    SummaryReader,
    SummaryRecord,
)
from collector.lineage import (
    EvalLineage,
    LineageLogError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    MindInsightException,
    TrainLineage,
    filter_summary_lineage,
    get_summary_lineage,
)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


class Digits(Dataset):
    """A dataset that says where it reads from (``root``), as torchvision datasets do."""

    root = "/data/digits"

    def __init__(self, n: int = 48) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def _model(optimizer="SGD", lr=0.1):
    torch.manual_seed(0)
    net = Net()
    opt = getattr(torch.optim, optimizer)(net.parameters(), lr=lr)
    return Model(net, torch.nn.CrossEntropyLoss(), opt, metrics={"accuracy": Accuracy()}), net


def _train_lineage(run):
    (ev,) = [e for e in SummaryReader(run).lineage() if e.WhichOneof("what") == "train_lineage"]
    return ev.train_lineage


def test_train_and_eval_through_a_summary_record(tmp_path):
    model, net = _model("SGD", 0.1)
    train = DataLoader(Digits(), batch_size=16)
    losses = []
    from collector import LambdaCallback

    record_loss = LambdaCallback(step_end=lambda rc: losses.append(float(rc.original_args().net_outputs)))
    ckpt = ModelCheckpoint(directory=tmp_path / "ckpt", config=CheckpointConfig(save_checkpoint_steps=3))
    with SummaryRecord(tmp_path / "run") as rec:
        model.train(2, train, callbacks=[ckpt, record_loss, TrainLineage(rec)])
        metrics = model.eval(DataLoader(Digits(32), batch_size=8), callbacks=[EvalLineage(rec)])
    msg = _train_lineage(tmp_path / "run")
    hp = msg.hyper_parameters
    assert (hp.optimizer, hp.loss_function, hp.epoch, hp.batch_size) == ("SGD", "CrossEntropyLoss", 2, 16)
    assert hp.learning_rate == pytest.approx(0.1) and (hp.device_num, hp.parallel_mode) == (1, "stand_alone")
    assert msg.algorithm.network == "Net" and msg.algorithm.loss == pytest.approx(losses[-1], rel=1e-6)
    assert msg.train_dataset.train_dataset_size == 48 and msg.train_dataset.train_dataset_path == "/data/digits"
    ckpt_path = json.loads(msg.model.path)["ckpt"]
    assert ckpt_path == os.path.realpath(ckpt.latest_ckpt_file_name)
    assert msg.model.size == os.path.getsize(ckpt_path)

    lin = get_summary_lineage(tmp_path / "run")
    assert lin["metric"] == {"accuracy": metrics["accuracy"]}
    assert lin["valid_dataset"] == {"valid_dataset_path": "/data/digits", "valid_dataset_size": 32}
    assert lin["dataset_graph"]["op_type"] == "Batch" and lin["dataset_graph"]["batch_size"] == 16
    assert lin["hyper_parameters"]["optimizer"] == "SGD"


def test_directory_mode_beside_a_summary_collector(tmp_path):
    """Given a path, the callbacks write their own lineage file, so a SummaryCollector can run too."""
    model, net = _model("Adam", 0.01)
    train = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)
    collector = SummaryCollector(tmp_path / "run", collect_specified_data={"collect_train_lineage": False,
                                                                           "collect_eval_lineage": False})
    model.train(3, train, callbacks=[collector, TrainLineage(str(tmp_path / "run"))])
    model.eval(train, callbacks=[EvalLineage(tmp_path / "run")])
    names = sorted(f.name for f in (tmp_path / "run").iterdir() if f.name.endswith("_lineage"))
    assert any(n.startswith("lineage.out.events.summary.") for n in names), names
    res = filter_summary_lineage(tmp_path)
    (obj,) = res["object"]
    ml = obj["model_lineage"]
    assert (obj["summary_dir"], ml["optimizer"], ml["learning_rate"], ml["epoch"], ml["batch_size"]) == \
        ("./run", "Adam", 0.01, 3, 8)
    assert ml["model_size"] == sum(p.numel() * 4 for p in net.parameters())  # no checkpoint: parameter bytes
    assert set(ml["metric"]) == {"accuracy"} and ml["test_dataset_count"] == 32


def test_directory_is_created(tmp_path):
    cb = TrainLineage(tmp_path / "new" / "run")
    model, _ = _model()
    model.train(1, [(torch.randn(4, 4), torch.tensor([0, 1, 0, 1]))], callbacks=[cb])
    assert get_summary_lineage(tmp_path / "new" / "run")["hyper_parameters"]["epoch"] == 1


def test_initial_learning_rate_is_recorded(tmp_path):
    model, net = _model("SGD", 0.5)
    from collector import LearningRateScheduler

    decay = LearningRateScheduler(lambda lr, step: lr * 0.5)
    model.train(2, [(torch.randn(4, 4), torch.tensor([0, 1, 0, 1]))] * 2, callbacks=[decay, TrainLineage(tmp_path)])
    assert model.optimizer.param_groups[0]["lr"] < 0.5
    assert _train_lineage(tmp_path).hyper_parameters.learning_rate == pytest.approx(0.5)


def test_hand_made_run_context(tmp_path):
    """The callbacks only need the run-context arguments (as a plain training loop can provide them)."""
    net = Net()
    opt = torch.optim.Momentum if hasattr(torch.optim, "Momentum") else torch.optim.SGD
    args = {"train_network": net, "optimizer": opt(net.parameters(), lr=0.05, momentum=0.9),
            "loss_fn": torch.nn.MSELoss(), "epoch_num": 4, "batch_num": 10, "batch_size": 64, "cur_step_num": 40,
            "device_number": 2, "parallel_mode": "data_parallel", "net_outputs": torch.tensor(0.25),
            "train_dataset": None, "list_callback": []}
    cb = TrainLineage(tmp_path)
    cb.begin(RunContext(args))
    cb.end(RunContext(args))
    EvalLineage(tmp_path).end(RunContext({"metrics": {"mse": 0.125, "r2": 1}, "valid_dataset": None,
                                          "batch_num": 5, "batch_size": 20}))
    lin = get_summary_lineage(tmp_path)
    assert lin["hyper_parameters"] == {"optimizer": "SGD", "learning_rate": 0.05, "loss_function": "MSELoss",
                                       "epoch": 4, "parallel_mode": "data_parallel", "device_num": 2,
                                       "batch_size": 64}
    assert lin["algorithm"] == {"network": "Net", "loss": 0.25}
    assert lin["train_dataset"] == {"train_dataset_size": 640}
    assert lin["metric"] == {"mse": 0.125, "r2": 1} and lin["valid_dataset"] == {"valid_dataset_size": 100}


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("cls", [TrainLineage, EvalLineage])
@pytest.mark.parametrize("kwargs, match", [
    (dict(summary_record=3), r"'summary_record' parameter of (Train|Eval)Lineage must be a collector.SummaryRecord "
                             r"or a non-empty directory path .*Got 3 instead"),
    (dict(summary_record=""), r"Got '' instead"),
    (dict(summary_record="run", raise_exception="yes"),
     r"'raise_exception' parameter of (Train|Eval)Lineage must be a bool\. Got 'yes' instead"),
])
def test_invalid_parameters(cls, kwargs, match):
    with pytest.raises(MindInsightException, match=match) as info:
        cls(**kwargs)
    assert isinstance(info.value, (LineageParamTypeError, InvalidParameterError))


def test_summary_record_path_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(LineageParamSummaryPathError, match="an existing file"):
        TrainLineage(tmp_path / "f")


@pytest.mark.parametrize("hook", ["begin", "end"])
def test_bad_run_context(tmp_path, hook, caplog):
    cb = TrainLineage(tmp_path, raise_exception=True)
    with pytest.raises(MindInsightException, match=rf"'run_context' parameter of TrainLineage\.{hook} must be"):
        getattr(cb, hook)({"epoch_num": 1})
    with caplog.at_level(logging.ERROR, logger="collector.lineage._callbacks"):
        getattr(TrainLineage(tmp_path), hook)(None)  # raise_exception=False: logged, training goes on
    assert f"TrainLineage.{hook}" in caplog.text


@pytest.mark.parametrize("args, match", [
    ({"epoch_num": 1}, r"'run_context.original_args\(\)\['train_network'\]' parameter of TrainLineage must be a "
                       r"torch.nn.Module\. Got None"),
    ({"train_network": Net(), "epoch_num": 0}, r"\['epoch_num'\]' .* must be an int >= 1\. Got 0"),
    ({"train_network": Net(), "epoch_num": 1, "optimizer": "SGD"}, r"\['optimizer'\]' .* Got 'SGD'"),
])
def test_train_end_validates_run_context(tmp_path, args, match, caplog):
    with pytest.raises(MindInsightException, match=match):
        TrainLineage(tmp_path, raise_exception=True).end(RunContext(args))
    with caplog.at_level(logging.ERROR, logger="collector.lineage._callbacks"):
        TrainLineage(tmp_path).end(RunContext(args))
    assert "TrainLineage.end" in caplog.text
    assert not any(f.name.endswith("_lineage") for f in tmp_path.iterdir())


def test_eval_end_validates_metrics(tmp_path):
    with pytest.raises(MindInsightException, match=r"\['metrics'\]' parameter of EvalLineage must be a dict"):
        EvalLineage(tmp_path, raise_exception=True).end(RunContext({"metrics": [0.5]}))


def _args():
    net = Net()
    return {"train_network": net, "optimizer": torch.optim.SGD(net.parameters(), lr=0.1), "epoch_num": 1,
            "batch_num": 1, "batch_size": 4, "cur_step_num": 1}


@pytest.mark.parametrize("cls, args", [(TrainLineage, _args()), (EvalLineage, {"metrics": {"acc": 1.0}})])
def test_log_error_when_the_record_is_closed(tmp_path, cls, args, caplog):
    rec = SummaryRecord(tmp_path)
    rec.close()
    with pytest.raises(LineageLogError, match="did not write the (train|eval)_lineage"):
        cls(rec, raise_exception=True).end(RunContext(args))
    with caplog.at_level(logging.ERROR, logger="collector.lineage._callbacks"):
        cls(rec).end(RunContext(args))
    assert "did not write" in caplog.text


def test_log_error_when_the_directory_cannot_be_made(tmp_path):
    (tmp_path / "file").write_text("x")
    cb = TrainLineage(tmp_path / "file" / "run", raise_exception=True)
    with pytest.raises(LineageLogError, match="writing the train_lineage lineage to .* failed"):
        cb.end(RunContext(_args()))
    assert isinstance(LineageLogError("x"), MindInsightException)


MI_PYTHON = __import__("pathlib").Path(os.environ.get("MINDINSIGHT_VENV", "/opt/mi-venv")) / "bin" / "python"


@pytest.mark.skipif(not MI_PYTHON.exists(), reason="MindInsight venv not installed")
def test_mindinsight_reads_the_callbacks_lineage_alike(tmp_path):
    """Runs from the callbacks, alone and beside a SummaryCollector: MindInsight's query gives our answer."""
    import subprocess

    data = DataLoader(Digits(), batch_size=16)
    model, _ = _model("SGD", 0.1)
    with SummaryRecord(tmp_path / "base" / "record") as rec:
        model.train(2, data, callbacks=[TrainLineage(rec)])
        model.eval(data, callbacks=[EvalLineage(rec)])
    model, _ = _model("Adam", 0.01)
    model.train(1, data, callbacks=[SummaryCollector(tmp_path / "base" / "both"),
                                    TrainLineage(tmp_path / "base" / "both")])
    model.eval(data, callbacks=[EvalLineage(tmp_path / "base" / "both")])
    script = ("import json,sys\nfrom mindinsight.lineagemgr.model import filter_summary_lineage as f\n"
              "print(json.dumps(f(summary_base_dir=sys.argv[1], search_condition={'sorted_name': 'summary_dir'})))")
    out = subprocess.run([str(MI_PYTHON), "-c", script, str(tmp_path / "base")], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    ours = json.loads(json.dumps(filter_summary_lineage(tmp_path / "base", {"sorted_name": "summary_dir"})))
    assert ours == theirs
    both = ours["object"][0]["model_lineage"]
    assert (both["optimizer"], both["epoch"], set(both["metric"])) == ("Adam", 1, {"accuracy"})


SCRIPT = __import__("pathlib").Path(__file__).resolve().parents[3] / "tools" / "mindinsight_check.sh"


def _free_port() -> int:
    """The first of this test's ports (18085..18089) that nothing listens on."""
    import socket

    for port in range(18085, 18090):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    pytest.skip("ports 18085..18089 are all in use")


@pytest.mark.skipif(not (MI_PYTHON.parent / "mindinsight").exists() or shutil.which("curl") is None,
                    reason="MindInsight venv or curl not installed")
def test_mindinsight_lineage_api_returns_our_values(tmp_path, mindspore_run):
    """POST /v1/mindinsight/lineagemgr/lineages on runs from the callbacks answers what filter_summary_lineage does."""
    import subprocess

    data = DataLoader(Digits(), batch_size=16)
    model, _ = _model("SGD", 0.1)
    with SummaryRecord(tmp_path / "base" / "record") as rec:
        model.train(2, data, callbacks=[ModelCheckpoint(directory=tmp_path / "base" / "record" / "ckpt"),
                                        TrainLineage(rec)])
        model.eval(data, callbacks=[EvalLineage(rec)])
    model, _ = _model("Adam", 0.01)
    model.train(1, DataLoader(Digits(), batch_size=24), callbacks=[TrainLineage(tmp_path / "base" / "dir")])
    model.eval(data, callbacks=[EvalLineage(tmp_path / "base" / "dir")])
    shutil.copytree(mindspore_run, tmp_path / "base" / "ms")
    port = _free_port()
    res = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "base"), str(port)], capture_output=True, text=True,
                         timeout=180, env={**os.environ, "MI_MAX_CHARS": "0"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    lines = res.stdout.splitlines()
    theirs = json.loads(lines[lines.index(next(x for x in lines if x.startswith("### lineagemgr/lineages"))) + 1])
    # the script asks what MindInsight's lineage page asks: model lineages
    ours = json.loads(json.dumps(filter_summary_lineage(tmp_path / "base", {"lineage_type": {"in": ["model"]}})))
    assert ours == theirs
    assert {o["summary_dir"] for o in ours["object"]} == {"./record", "./dir", "./ms"}
