"""SummaryCollector end to end: Model.train / Model.eval and a plain loop, read back independently."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector import (
    Accuracy,
    Callback,
    CheckpointConfig,
    Loss,
    Model,
    ModelCheckpoint,
    SummaryCollector,
    SummaryReader,
    read_events,
)
from collector.collect._plan import plan_collections

SPEC_KEYS = {"epoch_group", "model_params_file_map", "step_per_epoch", "unit", "num_samples",
             "landscape_size", "create_landscape"}


class MLP(nn.Module):
    """64-32-16-10: six parameters, so "the first five" leaves one out."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 16)
        self.fc3 = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    return TensorDataset(torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y))


class Capture(Callback):
    """Independent record of what the network was before training (number 0), at every step and epoch end."""

    def __init__(self) -> None:
        self.step_states, self.epoch_states, self.losses = {}, {}, {}

    def begin(self, run_context):
        p = run_context.original_args()
        if p.mode == "train":
            self.step_states[0] = self.epoch_states[0] = {k: v.detach().clone()
                                                          for k, v in p.network.state_dict().items()}

    def step_end(self, run_context):
        p = run_context.original_args()
        if p.mode != "train":
            return
        self.step_states[p.cur_step_num] = {k: v.detach().clone() for k, v in p.network.state_dict().items()}
        self.losses[p.cur_step_num] = float(p.net_outputs)

    def epoch_end(self, run_context):
        p = run_context.original_args()
        self.epoch_states[p.cur_epoch_num] = {k: v.detach().clone() for k, v in p.network.state_dict().items()}


def _check_checkpoints(summary_dir, states, numbers, unit):
    """The interval checkpoints of ``numbers`` and the initial weights' (0), equal to ``states`` bit for bit."""
    ckpt_dir = os.path.join(summary_dir, "ckpt_dir")
    expected_files = {f"MLP_{n}_{unit}.pt" for n in [0, *numbers]}
    assert {f for f in os.listdir(ckpt_dir) if f.endswith(".pt")} == expected_files
    for n in [0, *numbers]:
        saved = torch.load(os.path.join(ckpt_dir, f"MLP_{n}_{unit}.pt"), weights_only=True)
        assert saved.keys() == states[n].keys()
        for key, value in states[n].items():
            torch.testing.assert_close(saved[key], value, rtol=0, atol=0)


def _sha256_and_size(path):
    data = open(path, "rb").read()
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _metadata(summary_dir):
    path = os.path.join(summary_dir, "ckpt_dir", "train_metadata.json")
    assert not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_model_train_with_landscape_steps(tmp_path, digits):
    torch.manual_seed(0)
    loader = DataLoader(digits, batch_size=64, shuffle=True)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                  metrics={"Accuracy": Accuracy(), "Loss": Loss()})
    intervals = [[1, 2, 3, 4], [30, 45, 60]]
    sc = SummaryCollector(str(tmp_path), collect_freq=10, custom_lineage_data={"note": "digits", "seed": 0},
                          collect_specified_data={"collect_landscape": {
                              "landscape_size": 10, "num_samples": 512, "intervals": intervals}})
    capture = Capture()
    model.train(3, loader, callbacks=[capture, sc])

    steps = sorted(capture.losses)
    assert steps == list(range(1, 3 * 29 + 1))
    _check_checkpoints(tmp_path, capture.step_states, [1, 2, 3, 4, 30, 45, 60], "step")
    meta = _metadata(tmp_path)
    # our keys beyond MindSpore's: each checkpoint's SHA-256 and size, as hashlib sees the files; the initial
    # weights' checkpoint apart from the intervals'; num_samples given, so recorded as given
    assert meta.pop("model_params_file_digest") == {
        str(n): _sha256_and_size(tmp_path / "ckpt_dir" / f"MLP_{n}_step.pt") for n in [1, 2, 3, 4, 30, 45, 60]}
    assert meta.pop("initial_checkpoint") == {"file": "MLP_0_step.pt",
                                              **_sha256_and_size(tmp_path / "ckpt_dir" / "MLP_0_step.pt")}
    assert meta.pop("num_samples_default") is False
    assert meta == {
        "epoch_group": {"0": [1, 2, 3, 4], "1": [30, 45, 60]},
        "model_params_file_map": {str(n): f"MLP_{n}_step.pt" for n in [1, 2, 3, 4, 30, 45, 60]},
        "step_per_epoch": 29,
        "unit": "step",
        "num_samples": 512,
        "landscape_size": 10,
        "create_landscape": {"train": True, "result": True},
    }
    assert set(meta) == SPEC_KEYS

    reader = SummaryReader(tmp_path)
    loss_steps, loss_values = reader.scalars()["loss/auto"]
    expected_steps = [1] + list(range(10, 88, 10))
    np.testing.assert_array_equal(loss_steps, expected_steps)
    np.testing.assert_allclose(loss_values, [capture.losses[s] for s in expected_steps], rtol=1e-6)

    assert [step for step, _ in reader.graphs()] == [1]  # collect_graph: once, through SummaryRecord
    hists = reader.histograms()
    names = [n for n, _ in net.named_parameters()][:5]
    assert list(hists) == [f"{n}/auto" for n in names]
    first = hists["fc1.weight/auto"][0]
    assert first["step"] == 1
    w = capture.step_states[1]["fc1.weight"].double().numpy()
    assert first["total"] == w.size and first["count"].sum() == w.size
    np.testing.assert_allclose([first["min"], first["max"], first["sum"]], [w.min(), w.max(), w.sum()], rtol=1e-5)

    result = model.eval(DataLoader(digits, batch_size=128), callbacks=[sc])
    kinds = {}
    for ev in SummaryReader(tmp_path).lineage():
        kinds.setdefault(ev.WhichOneof("what"), []).append(ev)
    assert set(kinds) == {"dataset_graph", "user_defined_info", "train_lineage", "evaluation_lineage"}
    train = kinds["train_lineage"][0].train_lineage
    assert train.hyper_parameters.optimizer == "SGD"
    assert train.hyper_parameters.learning_rate == pytest.approx(0.1)
    assert train.hyper_parameters.loss_function == "CrossEntropyLoss"
    assert (train.hyper_parameters.epoch, train.hyper_parameters.batch_size) == (3, 64)
    assert (train.hyper_parameters.parallel_mode, train.hyper_parameters.device_num) == ("stand_alone", 1)
    assert train.train_dataset.train_dataset_size == len(digits)
    assert train.algorithm.network == "MLP"
    assert train.algorithm.loss == pytest.approx(capture.losses[87], rel=1e-6)
    assert json.loads(train.model.path) == {"ckpt": None}
    assert train.model.size == sum(p.numel() * 4 for p in net.parameters())
    evaluation = kinds["evaluation_lineage"][0].evaluation_lineage
    assert json.loads(evaluation.metric) == pytest.approx(result)
    assert evaluation.valid_dataset.valid_dataset_size == len(digits)
    graph = kinds["dataset_graph"][0].dataset_graph
    assert graph.parameter.mapStr["op_type"] == "Batch"
    assert graph.parameter.mapInt["batch_size"] == 64 and not graph.parameter.mapBool["drop_remainder"]
    assert graph.children[0].parameter.mapStr["op_type"] == "TensorDataset"
    assert graph.children[0].parameter.mapBool["shuffle"]
    user = kinds["user_defined_info"][0].user_defined_info
    assert {k: v for u in user.user_info for k, v in [*u.map_str.items(), *u.map_int32.items()]} == \
        {"note": "digits", "seed": 0}


def test_unit_epoch_and_checkpoint_path_in_lineage(tmp_path, digits):
    torch.manual_seed(1)
    loader = DataLoader(digits, batch_size=64, shuffle=True, drop_last=True)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.05))
    ckpt = ModelCheckpoint(prefix="mlp", directory=tmp_path / "ck", config=CheckpointConfig(save_checkpoint_steps=28))
    sc = SummaryCollector(tmp_path / "run", collect_freq=28, collect_specified_data={"collect_landscape": {
        "unit": "epoch", "intervals": [[1, 2, 3], [2, 3, 4]], "create_landscape": {"result": False}}})
    capture = Capture()
    model.train(4, loader, callbacks=[capture, ckpt, sc])
    _check_checkpoints(tmp_path / "run", capture.epoch_states, [1, 2, 3, 4], "epoch")
    meta = _metadata(tmp_path / "run")
    assert meta["epoch_group"] == {"0": [1, 2, 3], "1": [2, 3, 4]}
    assert meta["step_per_epoch"] == 28 and meta["unit"] == "epoch"
    assert meta["create_landscape"] == {"train": True, "result": False}
    # num_samples left at its default 2048: the dataset's 1797 samples are recorded, and that it was the default
    assert (meta["landscape_size"], meta["num_samples"], meta["num_samples_default"]) == (40, len(digits), True)
    (train,) = [e.train_lineage for e in SummaryReader(tmp_path / "run").lineage() if e.HasField("train_lineage")]
    assert train.train_dataset.train_dataset_size == 28 * 64  # drop_last, as MindSpore counts it
    path = json.loads(train.model.path)["ckpt"]
    assert os.path.basename(path) == "mlp-4_28.pt" and train.model.size == os.path.getsize(path)


def test_plain_loop(tmp_path, digits):
    torch.manual_seed(2)
    loader = DataLoader(digits, batch_size=64, shuffle=True)
    net, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    states, losses = {0: {k: v.clone() for k, v in net.state_dict().items()}}, {}
    with SummaryCollector(tmp_path, collect_freq=5, collect_specified_data={
            "histogram_regular": r"^fc3\.", "collect_landscape": {"intervals": [[3, 6, 9]]}}) as sc:
        sc.begin_train(network=net, optimizer=opt, loss_fn=loss_fn, train_dataset=loader, epoch_num=2)
        step = 0
        for _ in range(2):
            for x, y in loader:
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
                step += 1
                sc.step(loss, inputs=x)
                states[step] = {k: v.clone() for k, v in net.state_dict().items()}
                losses[step] = loss.item()
            sc.epoch_end()
        sc.end()
    _check_checkpoints(tmp_path, states, [3, 6, 9], "step")
    meta = _metadata(tmp_path)
    assert meta["epoch_group"] == {"0": [3, 6, 9]} and meta["step_per_epoch"] == 29
    reader = SummaryReader(tmp_path)
    loss_steps, values = reader.scalars()["loss/auto"]
    np.testing.assert_array_equal(loss_steps, [1] + list(range(5, 59, 5)))
    np.testing.assert_allclose(values, [losses[s] for s in loss_steps], rtol=1e-6)
    assert list(reader.histograms()) == ["fc3.weight/auto", "fc3.bias/auto"]
    (train,) = [e.train_lineage for e in reader.lineage() if e.HasField("train_lineage")]
    assert (train.hyper_parameters.optimizer, train.hyper_parameters.epoch) == ("Adam", 2)
    assert train.algorithm.loss == pytest.approx(losses[58], rel=1e-6)

    # An evaluation done by hand: its lineage through log_eval (opens and closes its own record).
    evaluator = SummaryCollector(tmp_path / "eval")
    evaluator.log_eval({"acc": 0.75}, valid_dataset=DataLoader(digits, batch_size=100))
    assert evaluator.summary_record is None
    (ev,) = SummaryReader(tmp_path / "eval").lineage()
    assert json.loads(ev.evaluation_lineage.metric) == {"acc": 0.75}
    assert ev.evaluation_lineage.valid_dataset.valid_dataset_size == len(digits)


@pytest.mark.parametrize("total_steps, n_other, n_tensor", [(600, 61, 20), (20, 3, 3)])
def test_collect_freq_and_tensor_freq_default_rule(tmp_path, total_steps, n_other, n_tensor):
    """The seed's worked example, through real training: collect_freq=10."""
    assert tuple(map(len, plan_collections(total_steps, 10))) == (n_other, n_tensor)
    torch.manual_seed(3)
    batch_num = total_steps // 10
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(batch_num)]
    net = nn.Linear(3, 1)
    sc = SummaryCollector(tmp_path, collect_freq=10, collect_specified_data={"collect_dataset_graph": False})

    class AddTensor(Callback):
        def step_end(self, run_context):
            sc.add_value("tensor", "w", run_context.original_args().network.weight.detach())

    Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(
        10, data, callbacks=[AddTensor(), sc])
    reader = SummaryReader(tmp_path)
    loss_steps = reader.scalars()["loss/auto"][0]
    tensor_steps = [s for s, _ in reader.tensors()["w"]]
    assert len(loss_steps) == n_other and len(tensor_steps) == n_tensor
    assert loss_steps[0] == 1 and tensor_steps[0] == 1
    assert list(reader.histograms()) == ["weight/auto", "bias/auto"]


def test_collect_tensor_freq_explicit(tmp_path):
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(10)]
    net = nn.Linear(3, 1)
    sc = SummaryCollector(tmp_path, collect_freq=4, collect_tensor_freq=3)

    class AddTensor(Callback):
        def step_end(self, run_context):
            sc.add_value("tensor", "w", torch.ones(2))

    Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(
        2, data, callbacks=[AddTensor(), sc])
    reader = SummaryReader(tmp_path)
    assert [s for s, _ in reader.tensors()["w"]] == [1, 3, 6, 9, 12, 15, 18]
    assert list(reader.scalars()["loss/auto"][0]) == [1, 4, 8, 12, 16, 20]


def test_keep_default_action_false_and_input_images(tmp_path):
    images = [(torch.rand(4, 1, 8, 8), torch.randint(0, 2, (4,))) for _ in range(3)]
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 2))
    sc = SummaryCollector(tmp_path, collect_freq=1, keep_default_action=False,
                          collect_specified_data={"collect_input_data": True})
    Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1)).train(1, images, callbacks=sc)
    reader = SummaryReader(tmp_path)
    assert reader.tags() == {"image": ["input_data/auto"]} and reader.graphs() == []
    assert [s for s, _ in reader.images()["input_data/auto"]] == [1, 2, 3]
    assert reader.lineage() == []


def test_request_stop_writes_complete_intervals_only(tmp_path, caplog):
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(5)]
    net = nn.Linear(3, 1)

    class StopAt7(Callback):
        def step_end(self, run_context):
            if run_context.original_args().cur_step_num == 7:
                run_context.request_stop()

    sc = SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3], [6, 7, 8]]}})
    Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(3, data, callbacks=[StopAt7(), sc])
    meta = _metadata(tmp_path)
    assert meta["epoch_group"] == {"0": [1, 2, 3]}
    assert sorted(meta["model_params_file_map"], key=int) == ["1", "2", "3", "6", "7"]
    assert "[6, 7, 8]" in caplog.text


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_exception_still_writes_metadata_and_closes(tmp_path, exc):
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)]
    net = nn.Linear(3, 1)

    class Boom(Callback):
        def step_end(self, run_context):
            if run_context.original_args().cur_step_num == 6:
                raise exc("boom")

    sc = SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": {
        "unit": "step", "intervals": [[2, 3, 4], [5, 6, 7]]}})
    with pytest.raises(exc):
        Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(2, data, callbacks=[sc, Boom()])
    meta = _metadata(tmp_path)
    assert meta["epoch_group"] == {"0": [2, 3, 4]} and meta["step_per_epoch"] == 4
    assert sc.summary_record is None
    # The record was closed: a new one can open in this process.
    assert any(kind == "summary" for kind, _ in read_events(tmp_path))
    Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(
        1, data, callbacks=[SummaryCollector(tmp_path / "again")])


def test_two_collectors_refused(tmp_path):
    net = nn.Linear(3, 1)
    model = Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01))
    with pytest.raises(ValueError, match="at most one SummaryCollector"):
        model.train(1, [(torch.randn(2, 3), torch.randn(2, 1))],
                    callbacks=[SummaryCollector(tmp_path / "a"), SummaryCollector(tmp_path / "b")])
    assert not list((tmp_path / "a").iterdir())


def test_compiled_and_wrapped_network_names(tmp_path):
    class Wrapper(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self._orig_mod = inner  # what torch.compile's OptimizedModule holds

        def forward(self, x):
            return self._orig_mod(x)

    inner = nn.Linear(3, 1)
    net = nn.DataParallel(Wrapper(inner))
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(3)]
    sc = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data={"collect_landscape": {
        "intervals": [[1, 2, 3]]}})
    Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(1, data, callbacks=sc)
    saved = torch.load(tmp_path / "ckpt_dir" / "Linear_3_step.pt", weights_only=True)
    assert set(saved) == {"weight", "bias"}
    torch.testing.assert_close(saved["weight"], inner.weight.detach())
    assert list(SummaryReader(tmp_path).histograms()) == ["weight/auto", "bias/auto"]


def test_summary_operators_follow_collect_freq_and_tensor_freq(tmp_path):
    import collector.summary as summary

    class Net(nn.Linear):
        def forward(self, x):
            out = super().forward(x)
            summary.tensor("out", out.detach())
            summary.scalar("mean", out.detach().mean())
            return out

    net = Net(3, 1)
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(10)]
    Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01)).train(
        2, data, callbacks=SummaryCollector(tmp_path, collect_freq=4, collect_tensor_freq=3))
    reader = SummaryReader(tmp_path)
    assert [s for s, _ in reader.tensors()["out"]] == [1, 3, 6, 9, 12, 15, 18]
    assert list(reader.scalars()["mean"][0]) == [1, 4, 8, 12, 16, 20]


@pytest.mark.parametrize("batch_records", [512, 3], ids=["one-batch", "writer-thread-batches"])
def test_every_histogram_matches_the_parameters_at_its_step(tmp_path, digits, monkeypatch, batch_records):
    """Histograms (batched, snapshot slabs sorted in place) against numpy on independent copies."""
    from collector.summary import _writer
    monkeypatch.setattr(_writer, "BATCH_RECORDS", batch_records)
    torch.manual_seed(1)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9))
    capture = Capture()
    model.train(2, DataLoader(digits, batch_size=64), callbacks=[capture, SummaryCollector(str(tmp_path),
                                                                                           collect_freq=5)])
    hists = SummaryReader(tmp_path).histograms()
    others, _ = plan_collections(2 * 29, 5)
    names = [n for n, _ in net.named_parameters()][:5]
    assert list(hists) == [f"{n}/auto" for n in names]
    for name in names:
        assert [h["step"] for h in hists[f"{name}/auto"]] == others
        for h in hists[f"{name}/auto"]:
            values = capture.step_states[h["step"]][name].numpy().reshape(-1)
            lo, hi = values.min(), values.max()
            bins = values.size // 10 + 1 if values.size <= 880 else 90
            edges = np.linspace(lo, hi, bins + 1, dtype=np.float32)
            np.testing.assert_array_equal(h["count"], np.histogram(values, bins=edges)[0])
            np.testing.assert_array_equal(h["left"], edges[:-1].astype(np.float64))
            assert (h["min"], h["max"], h["total"]) == (float(lo), float(hi), values.size)
            assert h["sum"] == pytest.approx(values.astype(np.float64).sum(), rel=1e-9, abs=1e-9)


def test_steps_between_collections_are_skipped_exactly(tmp_path):
    """Without values added by hand, the collected steps and checkpoint steps are exactly the plan's, run after run."""
    torch.manual_seed(5)
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(37)]
    net = nn.Linear(3, 1)
    wanted = [[5, 6, 50], [100, 110, 111]]
    sc = SummaryCollector(tmp_path / "a", collect_freq=7, collect_specified_data={
        "collect_landscape": {"unit": "step", "intervals": wanted}})
    model = Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.01))
    model.train(3, data, callbacks=sc)
    others, _ = plan_collections(111, 7)
    assert list(SummaryReader(tmp_path / "a").scalars()["loss/auto"][0]) == others
    assert sorted(os.listdir(tmp_path / "a" / "ckpt_dir")) == sorted(
        [f"Linear_{n}_step.pt" for iv in [[0], *wanted] for n in iv] + ["train_metadata.json"])
    # A second run with the same collector starts again from step 1.
    sc2 = SummaryCollector(tmp_path / "b", collect_freq=5)
    model.train(1, data, callbacks=sc2)
    model.train(1, data, callbacks=sc2)
    steps = list(SummaryReader(tmp_path / "b").scalars()["loss/auto"][0])
    assert steps == plan_collections(37, 5)[0] * 2


def test_histograms_of_parameters_in_every_float_dtype(tmp_path):
    """float32/float64 parameters take the slab path, float16/bfloat16 the general one: all match numpy."""

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(4)
            self.a = nn.Parameter(torch.randn(40, 30, generator=g))
            self.b = nn.Parameter(torch.randn(500, generator=g, dtype=torch.float64))
            self.c = nn.Parameter(torch.randn(300, generator=g).to(torch.float16))
            self.d = nn.Parameter(torch.randn(64, generator=g).to(torch.bfloat16))

        def forward(self, x):
            return x

    net = Mixed()
    with SummaryCollector(tmp_path, collect_freq=1, collect_specified_data={"collect_graph": False}) as sc:
        sc.begin_train(network=net, epoch_num=1)
        sc.step(torch.tensor(0.5))
        sc.step(torch.tensor(0.25))
        sc.end()
    hists = SummaryReader(tmp_path).histograms()
    assert list(hists) == ["a/auto", "b/auto", "c/auto", "d/auto"]
    for name, param in net.named_parameters():
        values = param.detach().float().numpy().reshape(-1) if param.dtype == torch.bfloat16 \
            else param.detach().numpy().reshape(-1)
        edge_dtype = values.dtype
        bins = values.size // 10 + 1 if values.size <= 880 else 90
        edges = np.linspace(values.min(), values.max(), bins + 1, dtype=edge_dtype)
        expected = np.histogram(values, bins=edges)[0]
        assert [h["step"] for h in hists[f"{name}/auto"]] == [1, 2]
        for h in hists[f"{name}/auto"]:
            np.testing.assert_array_equal(h["count"], expected, err_msg=name)
            assert (h["min"], h["max"], h["total"]) == (float(values.min()), float(values.max()), values.size)
