"""A damaged checkpoint never becomes a wrong landscape: refused before any point is evaluated, the output
folder untouched, the error naming the file (issue 19)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import zipfile
from collections.abc import Callable

import h5py
import pytest
import torch
from torch import nn

import collector
from collector import Model, SummaryCollector
from collector.common import InvalidDirectoryError, InvalidParameterError
from collector.trajectory import CheckpointError
from landscape import SummaryLandscape, compute_landscape
from landscape.engine import _engine
from tests.landscape._helpers import TinyMLP, make_data


def _loader(shuffle: bool = False):
    x, y = make_data()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=shuffle)


def callback():
    net = TinyMLP()
    return Model(net, nn.CrossEntropyLoss()), net, _loader(), None


def _counted(calls: list) -> Callable[[], tuple]:
    """``callback`` that marks each call in ``calls`` (a refusal before any work never calls the user's task)."""
    def cb() -> tuple:
        calls.append("callback_fn")
        return callback()
    return cb


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A tiny run trained with SummaryCollector(collect_landscape): 6 epochs, intervals [1, 2, 3], [4, 5, 6]."""
    run = tmp_path_factory.mktemp("trained") / "run"
    torch.manual_seed(0)
    net = TinyMLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.3, momentum=0.5))
    sc = SummaryCollector(run, collect_freq=2, collect_specified_data={"collect_landscape": {
        "unit": "epoch", "intervals": [[1, 2, 3], [4, 5, 6]], "landscape_size": 4, "num_samples": 32}})
    model.train(6, _loader(shuffle=True), callbacks=[sc])
    return run


@pytest.fixture
def run(trained_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    for root, _, files in os.walk(copy):  # read-only as written; the tests damage them on purpose
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return copy


@pytest.fixture
def engine_calls(monkeypatch):
    """Every Engine built or asked for points in this process (the tests assert there was none)."""
    calls: list[str] = []
    init, evaluate = _engine.Engine.__init__, _engine.Engine.evaluate

    def spy_init(self, *args, **kwargs):
        calls.append("Engine()")
        init(self, *args, **kwargs)

    def spy_evaluate(self, *args, **kwargs):
        calls.append("evaluate")
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(_engine.Engine, "__init__", spy_init)
    monkeypatch.setattr(_engine.Engine, "evaluate", spy_evaluate)
    return calls


def _tree(folder) -> dict[str, tuple[int, int]]:
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.stat(path)
            out[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns)
    return out


def _storage_start(path, index: int = 0) -> int:
    """First byte of the storage data/{index} in torch.save's zip archive (local header read by hand)."""
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(f"/data/{index}"))
    data = open(path, "rb").read()
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len


def _damage(path, how: str) -> None:
    data = bytearray(open(path, "rb").read())
    if how == "flipped bit":
        data[_storage_start(path) + 5] ^= 0x10  # one bit of a float of fc1.weight
    elif how == "truncated":
        del data[len(data) * 2 // 3:]
    elif how == "other bytes":
        data[:] = bytes((i * 7 + 3) % 256 for i in range(len(data)))
    elif how == "another valid checkpoint":
        sd = torch.load(path, weights_only=True)
        sd["fc1.bias"] += 1.0
        torch.save(sd, path)
        return
    open(path, "wb").write(bytes(data))


def _drop_digests(run) -> None:
    """What MindSpore's metadata looks like: no model_params_file_digest."""
    path = run / "ckpt_dir" / "train_metadata.json"
    md = json.loads(path.read_text())
    del md["model_params_file_digest"]
    path.write_text(json.dumps(md))


def _refused(call, match: str):
    """The CheckpointError ``call`` raises (the callers show "before any work" with their spies: no Engine
    built or asked for points, the user's task not called where it is not needed, the folder unchanged)."""
    with pytest.raises(CheckpointError, match=match) as info:
        call()
    assert "weights_only=False" not in str(info.value)
    return str(info.value)


DAMAGE = ["flipped bit", "truncated", "other bytes", "another valid checkpoint"]


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("to_output", [False, True])
def test_damaged_checkpoint_is_refused_before_any_evaluation(run, tmp_path, engine_calls, how, to_output):
    target = run / "ckpt_dir" / "TinyMLP_2_epoch.pt"
    written = json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())["model_params_file_digest"]["2"]
    _damage(target, how)
    found = hashlib.sha256(target.read_bytes()).hexdigest()
    before = _tree(run)
    out = tmp_path / "out"
    task_calls: list[str] = []
    msg = _refused(lambda: SummaryLandscape(run).gen_landscapes_with_multi_process(
        _counted(task_calls), output=out if to_output else None), "is not the file training wrote")
    assert engine_calls == [] and task_calls == []
    assert f"the checkpoint of epoch 2: checkpoint file {str(target)!r}" in msg
    assert f"expected SHA-256 {written['sha256']} ({written['size']} bytes" in msg
    assert f"found SHA-256 {found} ({target.stat().st_size} bytes)" in msg and "HINT: restore" in msg
    assert _tree(run) == before  # no landscapes.h5, summary file or lock file left
    assert not out.exists()


@pytest.mark.parametrize("how, words", [("flipped bit", "do not match the CRC-32"),
                                        ("truncated", "truncated or damaged"),
                                        ("other bytes", "not a PyTorch checkpoint")])
def test_without_recorded_digests_the_archive_is_checked(run, engine_calls, how, words):
    _drop_digests(run)  # MindSpore's metadata records no digest
    target = run / "ckpt_dir" / "TinyMLP_5_epoch.pt"
    _damage(target, how)
    before = _tree(run)
    task_calls: list[str] = []
    msg = _refused(lambda: SummaryLandscape(run).gen_landscapes_with_multi_process(_counted(task_calls)), words)
    assert engine_calls == [] and _tree(run) == before
    # the archive's CRCs refuse before the task is called; a file that is no zip archive (torch.save's legacy
    # format is none either) is known bad only when loaded, after the task gave the network
    assert task_calls == ([] if how != "other bytes" else ["callback_fn"])
    assert "the checkpoint of epoch 5" in msg and str(target) in msg


def test_intact_run_generates_and_keeps_the_recorded_digests_in_the_fingerprint(run, engine_calls):
    res = SummaryLandscape(run).gen_landscapes_with_multi_process(callback)
    assert [ls.tag for ls in res] == ["landscape_[1, 3]", "landscape_[4, 6]", "landscape_[6]"]
    assert "evaluate" in engine_calls  # the spy sees evaluations when there are some
    with h5py.File(run / "landscapes.h5", "r") as fh:
        fp = json.loads(fh["landscape_[1, 3]"].attrs["fingerprint"])
    for n in (1, 2, 3):
        data = (run / "ckpt_dir" / f"TinyMLP_{n}_epoch.pt").read_bytes()
        assert fp[f"checkpoint epoch {n}"] == hashlib.sha256(data).hexdigest()


def test_digestless_metadata_still_generates_with_digests_in_the_fingerprint(run):
    _drop_digests(run)
    SummaryLandscape(run).gen_landscapes_with_multi_process(callback, collect_landscape={
        "create_landscape": {"train": True, "result": False}, "intervals": [[4, 5, 6]]})
    with h5py.File(run / "landscapes.h5", "r") as fh:
        fp = json.loads(fh["landscape_[4, 6]"].attrs["fingerprint"])
    data = (run / "ckpt_dir" / "TinyMLP_6_epoch.pt").read_bytes()
    assert fp["checkpoint epoch 6"] == hashlib.sha256(data).hexdigest()


class Wider(TinyMLP):
    def __init__(self) -> None:
        super().__init__(hidden=20)


def test_checkpoint_of_another_architecture_names_file_and_keys(run, engine_calls):
    def cb():
        net = Wider()
        return Model(net, nn.CrossEntropyLoss()), net, _loader(), None

    before = _tree(run)
    msg = _refused(lambda: SummaryLandscape(run).gen_landscapes_with_multi_process(cb),
                   "The parameters of the network do not match the checkpoint of epoch 1")
    assert str(run / "ckpt_dir" / "TinyMLP_1_epoch.pt") in msg
    assert "'bn.bias' has shape (16,) in the checkpoint and (20,) in the network" in msg
    assert engine_calls == [] and _tree(run) == before


@pytest.mark.parametrize("metrics", ["accuracy", 3])
def test_metrics_given_as_a_string_are_refused_listing_the_forms(run, engine_calls, metrics):
    def cb():
        net = TinyMLP()
        return Model(net, nn.CrossEntropyLoss()), net, _loader(), metrics

    before = _tree(run)
    with pytest.raises(InvalidParameterError, match=r"metrics \(callback_fn's fourth item\).*must be None, a dict"):
        SummaryLandscape(run).gen_landscapes_with_multi_process(cb)
    with pytest.raises(InvalidParameterError, match=r"'metrics' parameter of compute_landscape must be None, a dict "
                                                    r"of name to metric.*a list, tuple or set of metric names"):
        compute_landscape(TinyMLP(), nn.CrossEntropyLoss(), _loader(), metrics=metrics)
    assert engine_calls == [] and _tree(run) == before


def test_output_or_summary_dir_that_is_a_file(run, tmp_path, engine_calls):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    before = _tree(run)
    with pytest.raises(InvalidDirectoryError, match="The 'output' parameter of SummaryLandscape"):
        SummaryLandscape(run).gen_landscapes_with_multi_process(callback, output=a_file)
    with pytest.raises(InvalidDirectoryError, match="The 'summary_dir' parameter of SummaryLandscape must be a "
                                                    "directory. Got"):
        SummaryLandscape(a_file)
    assert isinstance(InvalidDirectoryError("x"), NotADirectoryError)
    assert engine_calls == [] and _tree(run) == before and a_file.read_text() == "x"


# -- compute_landscape(checkpoints=[paths]) ---------------------------------------------------
def _paths(run, numbers=(1, 2, 3)):
    return [str(run / "ckpt_dir" / f"TinyMLP_{n}_epoch.pt") for n in numbers]


@pytest.mark.parametrize("how", DAMAGE)
def test_compute_landscape_verifies_against_the_recorded_digest(run, engine_calls, how):
    paths = _paths(run)
    _damage(paths[1], how)
    msg = _refused(lambda: compute_landscape(TinyMLP(), nn.CrossEntropyLoss(), _loader(), directions="pca",
                                             checkpoints=paths, size=3, num_samples=16),
                   "is not the file training wrote")
    assert msg.startswith(f"checkpoints[1] of compute_landscape: checkpoint file {paths[1]!r}")
    assert str(run / "ckpt_dir" / "train_metadata.json") in msg
    assert engine_calls == []


@pytest.mark.parametrize("how, words", [("flipped bit", "CRC-32"), ("truncated", "truncated or damaged"),
                                        ("other bytes", "not a PyTorch checkpoint")])
def test_compute_landscape_without_metadata_checks_each_file(run, tmp_path, engine_calls, how, words):
    elsewhere = tmp_path / "copies"
    elsewhere.mkdir()
    paths = [shutil.copy(p, elsewhere) for p in _paths(run)]
    _damage(paths[2], how)
    msg = _refused(lambda: compute_landscape(TinyMLP(), nn.CrossEntropyLoss(), _loader(), directions="pca",
                                             checkpoints=paths, size=3, num_samples=16), words)
    assert msg.startswith(f"checkpoints[2] of compute_landscape: checkpoint file {paths[2]!r}")
    assert engine_calls == []


def test_compute_landscape_with_a_checkpoint_of_another_network(run, tmp_path, engine_calls):
    other = tmp_path / "other.pt"
    torch.save(Wider().state_dict(), other)
    msg = _refused(lambda: compute_landscape(TinyMLP(), nn.CrossEntropyLoss(), _loader(), directions="pca",
                                             checkpoints=_paths(run, (1, 2)) + [str(other)], size=3, num_samples=16),
                   r"do not match checkpoints\[2\] of compute_landscape")
    assert repr(str(other)) in msg and "'bn.bias' has shape (20,) in the checkpoint and (16,) in the network" in msg
    assert engine_calls == []


def test_compute_landscape_with_intact_paths_matches_state_dicts(run):
    paths = _paths(run)
    by_path = compute_landscape(TinyMLP(), nn.CrossEntropyLoss(), _loader(), directions="pca", checkpoints=paths,
                                size=3, num_samples=16)
    dicts = [torch.load(p, weights_only=True) for p in paths]
    by_dict = compute_landscape(TinyMLP(), nn.CrossEntropyLoss(), _loader(), directions="pca", checkpoints=dicts,
                                size=3, num_samples=16)
    assert (by_path.z == by_dict.z).all()


def test_checkpoint_error_is_public():
    assert collector.CheckpointError is CheckpointError and issubclass(CheckpointError, (ValueError, OSError))
