"""LightningCollector: Trainer.fit collects what SummaryCollector collects, checked against a plain loop."""

import json
import os
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("lightning")

from collector import InvalidParameterError, Model, SummaryReader, get_summary_lineage  # noqa: E402
from collector.integrations import LightningCollector  # noqa: E402
from landscape import SummaryLandscape  # noqa: E402
from landscape.examples import digits_loader  # noqa: E402
from tests.collector.integrations import _lit  # noqa: E402
from tests.collector.integrations._reference import assert_grid_values, load  # noqa: E402
from tests.landscape._helpers import plain_loss  # noqa: E402

INTERVALS = [[4, 8, 12], [16, 20, 24, 28]]
# Lightning's own notices about these small test set-ups
pytestmark = [pytest.mark.filterwarnings("ignore:.*LeafSpec.*is deprecated"),
              pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`"),
              pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty")]


def _collector(path, **kwargs):
    specified = {"collect_landscape": {"unit": "step", "landscape_size": 7, "num_samples": 256,
                                       "intervals": INTERVALS}}
    return LightningCollector(path, collect_freq=4, collect_specified_data=specified, **kwargs)


def _metadata(run):
    return json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """Two epochs of the digits MLP with accumulate_grad_batches=2 (28 batches: 14 steps per epoch)."""
    run = tmp_path_factory.mktemp("lit") / "run"
    torch.manual_seed(0)
    model = _lit.LitMLP()
    trainer = _lit.trainer(max_epochs=2, accumulate_grad_batches=2, callbacks=[_collector(run)])
    # unshuffled: the plain-loop replica sees the same batches (Lightning draws from a shuffling
    # loader's generator more often than one loop over it does)
    trainer.fit(model, digits_loader(64, shuffle=False), digits_loader(256, shuffle=False))
    return run, trainer


def test_fit_with_accumulation_collects_steps_as_optimizer_steps(fitted):
    run, trainer = fitted
    want_losses, want_states = _lit.replica(epochs=2, accumulate=2)
    assert trainer.global_step == len(want_losses) == 28
    reader = SummaryReader(run)
    assert not reader.issues
    steps, values = reader.scalars()["loss/auto"]
    assert steps.tolist() == [1, 4, 8, 12, 16, 20, 24, 28]  # the first step, then every collect_freq
    np.testing.assert_allclose(values, [want_losses[s - 1] for s in steps], rtol=1e-5)
    hist = reader.histograms()
    assert list(hist) == ["net.fc1.weight/auto", "net.fc1.bias/auto", "net.fc2.weight/auto", "net.fc2.bias/auto",
                          "net.fc3.weight/auto"]
    assert [h["step"] for h in hist["net.fc3.weight/auto"]] == steps.tolist()
    last = hist["net.fc1.bias/auto"][-1]
    bias = want_states[27]["net.fc1.bias"].numpy()
    assert last["total"] == bias.size and last["min"] == pytest.approx(bias.min(), rel=1e-6)
    assert len(reader.graphs()) == 1
    # the interval checkpoints are the weights after those optimizer steps
    md = _metadata(run)
    assert md["epoch_group"] == {"0": INTERVALS[0], "1": INTERVALS[1]}
    assert md["step_per_epoch"] == 14 and md["unit"] == "step"
    for n in (4, 12, 28):
        saved = load(run / "ckpt_dir" / md["model_params_file_map"][str(n)])
        assert md["model_params_file_map"][str(n)] == f"LitMLP_{n}_step.pt"
        for k, t in want_states[n - 1].items():
            torch.testing.assert_close(saved[k], t, rtol=1e-5, atol=1e-6)


def test_lineage_from_fit_and_validation(fitted):
    run, trainer = fitted
    lin = get_summary_lineage(str(run))
    hp = lin["hyper_parameters"]
    assert hp["optimizer"] == "SGD" and hp["learning_rate"] == pytest.approx(0.05)
    assert hp["epoch"] == 2 and hp["batch_size"] == 64 and hp["loss_function"] == "CrossEntropyLoss"
    assert hp["parallel_mode"] == "stand_alone" and hp["device_num"] == 1
    assert lin["algorithm"]["network"] == "LitMLP"
    # the eval lineage: the metrics of the last validation, as Lightning reports them
    assert lin["metric"]["val_acc"] == pytest.approx(float(trainer.callback_metrics["val_acc"]), rel=1e-6)
    assert lin["valid_dataset"]["valid_dataset_size"] == 1792


def test_landscapes_from_a_lightning_fit_match_a_plain_evaluation(fitted, tmp_path):
    run, _ = fitted

    def callback_fn():
        net = _lit.LitMLP()
        return Model(net, torch.nn.CrossEntropyLoss()), net, digits_loader(256, shuffle=False), None

    out = tmp_path / "landscapes"
    landscapes = SummaryLandscape(run).gen_landscapes_with_multi_process(callback_fn, output=out)
    assert [ls.tag for ls in landscapes] == ["landscape_[4, 12]", "landscape_[16, 28]", "landscape_[28]"]
    md = _metadata(run)
    loader = digits_loader(256, shuffle=False)
    ref_net = _lit.LitMLP()

    def loss_at(state):
        return plain_loss(ref_net, state, loader, 256)

    for ls, numbers in zip(landscapes, [*INTERVALS, [28]]):
        states = [load(run / "ckpt_dir" / md["model_params_file_map"][str(n)]) for n in numbers]
        assert ls.metadata["decomposition"] == ("Random" if len(numbers) == 1 else "PCA")
        assert_grid_values(ls, states, loss_at, [(0, 0), (3, 3), (6, 2)])
    assert [tag for _, tag, _ in SummaryReader(out).landscape_messages()] == [ls.tag for ls in landscapes]


def test_max_steps_cuts_an_epoch_short(tmp_path):
    """unit "epoch": an epoch stopped by max_steps is no epoch; the complete intervals are kept."""
    run = tmp_path / "run"
    torch.manual_seed(0)
    cb = LightningCollector(run, collect_freq=10, collect_specified_data={"collect_landscape": {
        "unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 5, "num_samples": 64}})
    trainer = _lit.trainer(max_epochs=3, max_steps=70, callbacks=[cb])
    trainer.fit(_lit.LitMLP(), digits_loader(64))
    assert trainer.global_step == 70
    steps, _ = SummaryReader(run).scalars()["loss/auto"]
    assert steps.tolist() == [1, 10, 20, 30, 40, 50, 60, 70]
    assert sorted(os.listdir(run / "ckpt_dir")) == ["LitMLP_0_epoch.pt", "LitMLP_1_epoch.pt", "LitMLP_2_epoch.pt",
                                                    "train_metadata.json"]
    md = _metadata(run)
    assert md["epoch_group"] == {} and sorted(md["model_params_file_map"]) == ["1", "2"]
    assert get_summary_lineage(str(run))["hyper_parameters"]["epoch"] == 3  # ceil(70 / 28)


def test_resumed_fit_continues_numbers_and_intervals(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    run, ckpts = tmp_path / "run", tmp_path / "lightning_ckpts"
    intervals = [[10, 20, 30], [40, 50, 56]]
    specified = {"collect_landscape": {"unit": "step", "intervals": intervals, "landscape_size": 5}}
    torch.manual_seed(0)
    first = _lit.trainer(max_epochs=1, enable_checkpointing=True,
                         callbacks=[LightningCollector(run, collect_freq=10, collect_specified_data=specified),
                                    ModelCheckpoint(dirpath=ckpts, save_last=True)])
    first.fit(_lit.LitMLP(), digits_loader(64))
    assert first.global_step == 28
    assert _metadata(run)["epoch_group"] == {}  # nothing complete yet
    before = (run / "ckpt_dir" / "LitMLP_10_step.pt").read_bytes()

    second = _lit.trainer(max_epochs=2, enable_checkpointing=True,
                          callbacks=[LightningCollector(run, collect_freq=10, collect_specified_data=specified),
                                     ModelCheckpoint(dirpath=ckpts, save_last=True)])
    second.fit(_lit.LitMLP(), digits_loader(64), ckpt_path=str(ckpts / "last.ckpt"))
    assert second.global_step == 56
    steps, _ = SummaryReader(run).scalars()["loss/auto"]
    # the first fit's steps, then the resumed fit's: its first step (29) and every tenth
    assert steps.tolist() == [1, 10, 20, 29, 30, 40, 50]
    md = _metadata(run)
    assert md["epoch_group"] == {"0": intervals[0], "1": intervals[1]}
    assert sorted(map(int, md["model_params_file_map"])) == [10, 20, 30, 40, 50, 56]
    assert (run / "ckpt_dir" / "LitMLP_10_step.pt").read_bytes() == before
    # the resumed fit's checkpoint 56 holds the weights the trainer ended with
    final = load(run / "ckpt_dir" / "LitMLP_56_step.pt")
    module = second.lightning_module
    for k, t in module.state_dict().items():
        torch.testing.assert_close(final[k], t)
    assert get_summary_lineage(str(run))["hyper_parameters"]["epoch"] == 2


def test_a_failed_fit_keeps_the_complete_intervals(tmp_path):
    run = tmp_path / "run"
    torch.manual_seed(0)
    cb = _collector(run)
    with pytest.raises(RuntimeError, match="on purpose"):
        _lit.trainer(max_epochs=2, callbacks=[cb]).fit(_lit.LitMLP(fail_at_step=20), digits_loader(64))
    md = _metadata(run)
    assert md["epoch_group"] == {"0": INTERVALS[0]}
    assert sorted(map(int, md["model_params_file_map"])) == [4, 8, 12, 16, 20]
    assert not SummaryReader(run).issues  # the files were closed properly


def test_other_ranks_create_nothing(tmp_path, monkeypatch):
    """Only global rank 0 writes: a process launched as rank 1 builds no collector and its hooks do nothing."""
    monkeypatch.setenv("RANK", "1")
    cb = _collector(tmp_path / "run")
    assert not (tmp_path / "run").exists()
    trainer = SimpleNamespace(is_global_zero=False, sanity_checking=False)
    cb.on_train_start(trainer, None)
    cb.on_train_batch_end(trainer, None, {"loss": torch.tensor(1.0)}, (torch.zeros(2, 64),), 0)
    cb.on_train_epoch_end(trainer, None)
    cb.on_validation_end(trainer, None)
    cb.on_test_end(trainer, None)
    cb.on_train_end(trainer, None)
    assert list(tmp_path.iterdir()) == []


def test_pickled_copies_carry_only_the_arguments(tmp_path):
    cb = _collector(tmp_path / "run", tensorboard_dir=None)
    copy = pickle.loads(pickle.dumps(cb))  # what ddp_spawn sends to its processes
    assert copy._sc is None and copy.summary_dir == cb.summary_dir
    assert copy.collector().collect_specified_data == cb.collector().collect_specified_data


def test_invalid_arguments_name_the_parameter(tmp_path):
    with pytest.raises(InvalidParameterError, match="'collect_freq' parameter of SummaryCollector must be an int"):
        LightningCollector(tmp_path / "run", collect_freq=0)
    with pytest.raises(InvalidParameterError, match="intervals"):
        LightningCollector(tmp_path / "run", collect_specified_data={"collect_landscape": {"intervals": [[1, 2]]}})
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_ddp_spawn_writes_on_global_rank_zero_only(tmp_path):
    """Two CPU processes (gloo): one set of files, the lineage of a data-parallel run."""
    # this machine's shared memory refuses file-descriptor sharing of the loader's tensors
    torch.multiprocessing.set_sharing_strategy("file_system")
    try:
        for attempt in range(2):
            run = tmp_path / f"run{attempt}"
            torch.manual_seed(0)
            cb = LightningCollector(run, collect_freq=5, collect_specified_data={"collect_landscape": {
                "unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 5, "num_samples": 64}})
            trainer = _lit.trainer(max_epochs=3, devices=2, strategy="ddp_spawn", callbacks=[cb])
            try:
                trainer.fit(_lit.LitMLP(), digits_loader(64))
                break
            except torch.multiprocessing.ProcessExitedException as exc:
                # Seen once in three full CI runs on 2026-11-24: rank 1 aborted at interpreter exit, after
                # `Trainer.fit` had finished ("terminate called without an active exception": gloo's
                # teardown). One more whole run; a second abort fails the test.
                if attempt or "SIGABRT" not in str(exc):
                    raise
    finally:
        torch.multiprocessing.set_sharing_strategy("file_descriptor")
    files = sorted(p.name for p in run.iterdir() if p.is_file())
    assert len(files) == 2 and files[0].endswith("_MS") and files[1].endswith("_lineage"), files
    md = _metadata(run)
    assert md["step_per_epoch"] == 14 and md["epoch_group"] == {"0": [1, 2, 3]}  # 28 batches shared by 2 ranks
    hp = get_summary_lineage(str(run))["hyper_parameters"]
    assert hp["parallel_mode"] == "data_parallel" and hp["device_num"] == 2
    steps, _ = SummaryReader(run).scalars()["loss/auto"]
    assert steps.tolist() == [1, 5, 10, 15, 20, 25, 30, 35, 40]


def _layout(run):
    """The summary files' name suffixes (_MS / _lineage), their version records' strings, and the
    kinds of summary values (scalar, histogram, graph, ...) the run holds."""
    files = {p.name.rsplit("_", 1)[-1] for p in run.iterdir() if ".summary." in p.name}
    reader = SummaryReader(run, strict=True)  # every record's framing and CRCs as MindSpore writes them
    versions = {e.version for e in reader.events + reader.lineage_events if e.HasField("version")}
    kinds = {v.WhichOneof("value") for e in reader.events if e.HasField("summary") for v in e.summary.value}
    return files, versions, kinds


def test_summary_files_have_mindspores_layout(fitted, mindspore_run):
    """MindInsight reads a Lightning run as it reads MindSpore's: the same file names, version
    record and framing (strict reader: every CRC checked), and the fixture's value kinds."""
    run, _ = fitted
    files, versions, kinds = _layout(run)
    ms_files, ms_versions, ms_kinds = _layout(mindspore_run)
    assert files == ms_files == {"MS", "lineage"}
    assert versions == ms_versions
    assert {"scalar_value", "histogram"} <= kinds and kinds <= ms_kinds | {"image", "tensor"}
