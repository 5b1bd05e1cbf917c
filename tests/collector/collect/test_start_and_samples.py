"""What collect_landscape records besides the intervals: the initial weights' checkpoint (the run's
true start) and a ``num_samples`` that fits the training data."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest
import torch
from sklearn.datasets import load_breast_cancer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector import Model, SummaryCollector
from collector.trajectory import CheckpointError, FileDigest, TrainMetadata, check_checkpoints, read_train_metadata


@pytest.fixture(scope="module")
def cancer() -> TensorDataset:
    x, y = load_breast_cancer(return_X_y=True)
    xt = torch.tensor(x, dtype=torch.float32)
    return TensorDataset((xt - xt.mean(0)) / xt.std(0), torch.tensor(y))


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(30, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))


def _train(summary_dir, data, landscape, how="model", epochs=3, net=None, batch_size=64):
    """Train ``net`` (a seeded one by default) with SummaryCollector, by Model or by a plain loop."""
    torch.manual_seed(0)
    net = net if net is not None else _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(data, batch_size=batch_size, shuffle=True) if isinstance(data, TensorDataset) else data
    sc = SummaryCollector(summary_dir, collect_freq=100, collect_specified_data={"collect_landscape": landscape})
    if how == "model":
        Model(net, loss_fn, opt).train(epochs, loader, callbacks=[sc])
        return net
    with sc:
        sc.begin_train(network=net, optimizer=opt, loss_fn=loss_fn, train_dataset=loader, epoch_num=epochs)
        for _ in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
                sc.step(loss)
            sc.epoch_end()
        sc.end()
    return net


def _json(summary_dir) -> dict:
    with open(os.path.join(summary_dir, "ckpt_dir", "train_metadata.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.mark.parametrize("how", ["model", "plain"])
def test_num_samples_left_at_its_default_records_the_datasets_size(tmp_path, cancer, how):
    """569 samples, fewer than the default 2048: 569 is recorded, and that it was the default."""
    _train(tmp_path, cancer, {"unit": "epoch", "intervals": [[1, 2, 3]]}, how)
    meta = _json(tmp_path)
    assert meta["num_samples"] == len(load_breast_cancer()["target"]) == 569
    assert meta["num_samples_default"] is True
    assert read_train_metadata(tmp_path / "ckpt_dir").num_samples_default is True


@pytest.mark.parametrize("how", ["model", "plain"])
@pytest.mark.parametrize("given", [4096, 2048, 100])
def test_num_samples_given_is_recorded_as_given(tmp_path, cancer, how, given):
    _train(tmp_path, cancer, {"unit": "epoch", "intervals": [[1, 2, 3]], "num_samples": given}, how, batch_size=200)
    meta = _json(tmp_path)
    assert (meta["num_samples"], meta["num_samples_default"]) == (given, False)


def test_num_samples_stays_the_default_when_the_size_is_unknown_or_larger(tmp_path):
    torch.manual_seed(0)
    batches = [(torch.randn(8, 30), torch.randint(0, 2, (8,))) for _ in range(4)]  # a list of batches: no size
    _train(tmp_path / "list", batches, {"unit": "epoch", "intervals": [[1, 2, 3]]}, "plain")
    big = TensorDataset(torch.randn(3000, 30), torch.randint(0, 2, (3000,)))
    _train(tmp_path / "big", big, {"unit": "epoch", "intervals": [[1, 2, 3]]}, "plain", batch_size=1000)
    for run in ("list", "big"):
        meta = _json(tmp_path / run)
        assert (meta["num_samples"], meta["num_samples_default"]) == (2048, True), run


@pytest.mark.parametrize("how", ["model", "plain"])
def test_the_initial_weights_are_saved_before_the_first_step_apart_from_the_intervals(tmp_path, cancer, how):
    torch.manual_seed(1)
    net = _net()
    before = copy.deepcopy(net.state_dict())  # what the network is before any step, copied independently
    _train(tmp_path, cancer, {"unit": "step", "intervals": [[1, 2, 3]]}, how, epochs=1, net=net)
    ckpt_dir = tmp_path / "ckpt_dir"
    meta = _json(tmp_path)
    data = (ckpt_dir / "Sequential_0_step.pt").read_bytes()
    assert meta["initial_checkpoint"] == {"file": "Sequential_0_step.pt", "sha256": hashlib.sha256(data).hexdigest(),
                                          "size": len(data)}
    # not an interval's checkpoint: MindSpore's keys (and so every PCA) see the intervals only
    assert meta["epoch_group"] == {"0": [1, 2, 3]}
    assert sorted(meta["model_params_file_map"]) == ["1", "2", "3"] and sorted(meta["model_params_file_digest"]) == [
        "1", "2", "3"]
    saved = torch.load(ckpt_dir / "Sequential_0_step.pt", weights_only=True)
    assert saved.keys() == before.keys()
    for key, value in before.items():
        assert torch.equal(saved[key], value), key
    step1 = torch.load(ckpt_dir / "Sequential_1_step.pt", weights_only=True)
    assert not torch.equal(step1["0.weight"], before["0.weight"])  # a step was taken after it
    md = read_train_metadata(ckpt_dir)
    assert md.initial_path(ckpt_dir) == str(ckpt_dir / "Sequential_0_step.pt") and 0 not in md.files


def test_the_initial_weights_checkpoint_is_verified_by_its_digest(tmp_path, cancer):
    _train(tmp_path, cancer, {"unit": "epoch", "intervals": [[1, 2, 3]]}, batch_size=200)
    path = tmp_path / "ckpt_dir" / "Sequential_0_epoch.pt"
    check_checkpoints([path], _net(), name="checkpoints", caller="test")  # the file training wrote: accepted
    data = bytearray(path.read_bytes())
    data[-30] ^= 1  # one bit of the archive's end: only the recorded digest can tell
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is not the file training wrote: expected SHA-256"):
        check_checkpoints([path], _net(), name="checkpoints", caller="test")


def test_a_resumed_run_keeps_the_first_parts_initial_weights(tmp_path, cancer):
    """The second part of a run starts from a checkpoint: its start is the first part's initial weights."""
    landscape = {"unit": "epoch", "intervals": [[1, 2, 3, 4]]}
    torch.manual_seed(0)
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    loader = DataLoader(cancer, batch_size=200)
    for part, (first, last) in enumerate([(0, 2), (2, 4)]):
        with SummaryCollector(tmp_path, collect_freq=100, collect_specified_data={"collect_landscape": landscape}) as sc:
            sc.begin_train(network=net, optimizer=opt, train_dataset=loader, epoch_num=4, initial_epoch=first,
                           initial_step=first * len(loader))
            for _ in range(first, last):
                for x, y in loader:
                    opt.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
                    sc.step(0.0)
                sc.epoch_end()
            sc.end()
        if part == 0:
            initial = (tmp_path / "ckpt_dir" / "Sequential_0_epoch.pt").read_bytes()
    md = read_train_metadata(tmp_path / "ckpt_dir")
    assert md.intervals == [[1, 2, 3, 4]] and md.initial == "Sequential_0_epoch.pt"
    assert (tmp_path / "ckpt_dir" / md.initial).read_bytes() == initial  # not overwritten by the second part
    assert md.initial_digest is None  # this process did not write it: no digest is made up for it


def test_the_new_keys_round_trip_and_are_validated(tmp_path):
    digest = FileDigest("ab" * 32, 10)
    md = TrainMetadata(intervals=[[1, 2, 3]], files={1: "a.pt", 2: "b.pt", 3: "c.pt"}, step_per_epoch=4, unit="epoch",
                       num_samples=569, landscape_size=5, initial="z.pt", initial_digest=digest,
                       num_samples_default=True)
    md.write(tmp_path)
    back = read_train_metadata(tmp_path)
    assert (back.initial, back.initial_digest, back.num_samples_default) == ("z.pt", digest, True)
    with open(tmp_path / "train_metadata.json", encoding="utf-8") as fh:
        raw = json.load(fh)
    # a file without them (MindSpore's, ours before them) still reads: nothing is said
    plain = {k: v for k, v in raw.items() if k not in ("initial_checkpoint", "num_samples_default")}
    bad = [({"initial_checkpoint": "z.pt"}, "'initial_checkpoint' key of .* must be an object"),
           ({"initial_checkpoint": {"file": "z.pt", "sha256": "x", "size": 1}}, "'initial_checkpoint' key"),
           ({"initial_checkpoint": {"file": ""}}, "'initial_checkpoint' key"),
           ({"num_samples_default": "yes"}, "'num_samples_default' key of .* must be true or false; got 'yes'")]
    for i, (extra, pattern) in enumerate([({}, None), *bad]):
        folder = tmp_path / str(i)
        folder.mkdir()
        with open(folder / "train_metadata.json", "w", encoding="utf-8") as fh:
            json.dump({**plain, **extra}, fh)
        if pattern is None:
            got = read_train_metadata(folder)
            assert (got.initial, got.initial_digest, got.num_samples_default) == (None, None, None)
            assert got.initial_path(folder) is None
        else:
            with pytest.raises(ValueError, match=pattern):
                read_train_metadata(folder)
