"""Checkpoint integrity in collector.trajectory: digests recorded as files are written, files checked
before use, and every failure to use a checkpoint one CheckpointError naming the file and its origin."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import struct
import threading
import zipfile

import pytest
import torch
from torch import nn

import collector
from collector.common import InvalidDirectoryError, InvalidParameterError
from collector.trajectory import (
    DIGEST_KEY,
    CheckpointError,
    FileDigest,
    TrainMetadata,
    _checkpoints,
    check_checkpoints,
    load_checkpoint,
    read_train_metadata,
    recorded_digest,
    save_file,
    validate_collect_landscape,
    verify_checkpoint_file,
)


class Net(nn.Module):
    def __init__(self, hidden: int = 6) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.fc2 = nn.Linear(hidden, 3)


def _sha256(path) -> FileDigest:
    data = open(path, "rb").read()
    return FileDigest(hashlib.sha256(data).hexdigest(), len(data))


def _storage_offset(path, record: str = "data/0") -> int:
    """Where the bytes of one tensor storage start in torch.save's archive (its local header read by hand)."""
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(record))
    data = open(path, "rb").read()
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len


def _flip_bit(path, offset: int, bit: int = 0) -> None:
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 1 << bit
    os.chmod(path, 0o644)
    open(path, "wb").write(bytes(data))


@pytest.fixture
def ckpt(tmp_path):
    torch.manual_seed(0)
    path = str(tmp_path / "net.pt")
    torch.save(Net().state_dict(), path)
    return path


def _refused(call, match=None, *, unpickled=None):
    """CheckpointError (a ValueError and an OSError), never a hint to load untrusted pickles. ``unpickled``
    False: refused before the file was given to ``torch.load`` (a spy records its calls)."""
    real, loads = torch.load, []

    def spy(*args, **kwargs):
        loads.append(args[0] if args else kwargs.get("f"))
        return real(*args, **kwargs)

    torch.load = spy
    try:
        with pytest.raises(CheckpointError, match=match) as info:
            call()
    finally:
        torch.load = real
    assert isinstance(info.value, ValueError) and isinstance(info.value, OSError)
    assert "weights_only=False" not in str(info.value)
    if unpickled is False:
        assert loads == [], "the checkpoint was loaded before it was refused"
    return str(info.value)


# -- writing: the digest of what was written -------------------------------------------
@pytest.mark.parametrize("in_memory", [True, False])
def test_save_file_returns_the_digest_of_the_file(tmp_path, monkeypatch, in_memory):
    if not in_memory:  # the streamed path (large checkpoints): torch.save to the file, hashed back
        monkeypatch.setattr(_checkpoints, "IN_MEMORY_SAVE_BYTES", -1)
    path = str(tmp_path / "a.pt")
    digest = save_file(Net().state_dict(), path)
    assert digest == _sha256(path)


def test_collector_records_each_checkpoint_digest(tmp_path):
    from collector import Model, SummaryCollector

    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
    sc = SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": {
        "unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 3, "num_samples": 8}})
    model.train(3, loader, callbacks=[sc])
    md = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    files = md["model_params_file_map"]
    assert md[DIGEST_KEY] == {n: {"sha256": _sha256(tmp_path / "ckpt_dir" / f).sha256,
                                  "size": _sha256(tmp_path / "ckpt_dir" / f).size} for n, f in files.items()}
    assert read_train_metadata(tmp_path / "ckpt_dir").digests == {
        int(n): _sha256(tmp_path / "ckpt_dir" / f) for n, f in files.items()}


# -- the metadata key: optional, validated ---------------------------------------------
def test_mindspore_metadata_without_digests_reads(mindspore_run):
    md = read_train_metadata(mindspore_run / "train_metadata.json")
    assert md.digests == {} and DIGEST_KEY not in md.to_json()
    assert set(md.to_json()) == set(json.loads((mindspore_run / "train_metadata.json").read_text()))


def test_digests_round_trip_and_bad_ones_are_refused(tmp_path):
    d = FileDigest("ab" * 32, 12)
    md = TrainMetadata(intervals=[[1, 2, 3]], files={1: "a.pt", 2: "b.pt", 3: "c.pt"}, step_per_epoch=2,
                       unit="epoch", num_samples=4, landscape_size=3, digests={2: d})
    md.write(tmp_path)
    assert read_train_metadata(tmp_path).digests == {2: d}
    raw = json.loads((tmp_path / "train_metadata.json").read_text())
    for bad in ({"2": {"sha256": "xyz", "size": 1}}, {"2": {"sha256": "ab" * 32, "size": -1}}, [1]):
        raw[DIGEST_KEY] = bad
        path = tmp_path / f"bad{len(str(bad))}.json"
        path.write_text(json.dumps(raw))
        with pytest.raises(ValueError, match=DIGEST_KEY):
            read_train_metadata(path)


# -- verification before use -------------------------------------------------------------
def test_verify_with_digest(ckpt):
    good = _sha256(ckpt)
    assert verify_checkpoint_file(ckpt, what="the checkpoint of epoch 1", digest=good) == good
    _flip_bit(ckpt, _storage_offset(ckpt) + 3, bit=5)
    found = _sha256(ckpt)
    msg = _refused(lambda: verify_checkpoint_file(ckpt, what="the checkpoint of epoch 1", digest=good,
                                                  recorded_in="/x/train_metadata.json"), unpickled=False)
    assert "the checkpoint of epoch 1" in msg and repr(ckpt) in msg and "HINT" in msg
    assert good.sha256 in msg and found.sha256 in msg and "/x/train_metadata.json" in msg


def test_verify_without_digest_checks_each_record_crc(ckpt):
    assert verify_checkpoint_file(ckpt, what="checkpoints[0] of f") is None
    _flip_bit(ckpt, _storage_offset(ckpt, "data/1") + 1)
    msg = _refused(lambda: verify_checkpoint_file(ckpt, what="checkpoints[0] of f"), match="CRC-32", unpickled=False)
    assert "checkpoints[0] of f" in msg and repr(ckpt) in msg and "data/1" in msg


def test_torch_load_accepts_a_flipped_bit_that_verification_refuses(ckpt):
    before = torch.load(ckpt, weights_only=True)
    _flip_bit(ckpt, _storage_offset(ckpt) + 2, bit=6)
    after = torch.load(ckpt, weights_only=True)  # what made a wrong landscape silently
    assert not torch.equal(before["fc1.weight"], after["fc1.weight"])
    _refused(lambda: load_checkpoint(ckpt, what="checkpoints[0] of f", verify=True), match="CRC-32", unpickled=False)


def test_archive_without_crcs_is_not_refused(tmp_path):
    from torch.utils.serialization import config

    path = str(tmp_path / "nocrc.pt")
    old = config.save.compute_crc32
    config.save.compute_crc32 = False
    try:
        torch.save(Net().state_dict(), path)
    finally:
        config.save.compute_crc32 = old
    assert verify_checkpoint_file(path, what="c") is None
    assert set(load_checkpoint(path, what="c", verify=True)) == set(Net().state_dict())


# -- every failure of loading: CheckpointError naming the file and its origin -----------------
class Foo:
    pass


def _make(kind: str, path: str) -> None:
    sd = Net().state_dict()
    if kind in ("truncated", "truncated_large"):
        if kind == "truncated_large":  # torch.load's own failure is then a bare OSError (EINVAL)
            sd = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 10)).state_dict()
        buf = io.BytesIO()
        torch.save(sd, buf)
        open(path, "wb").write(buf.getvalue()[: len(buf.getvalue()) // 2])
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "random":
        open(path, "wb").write(bytes(range(256)) * 8)
    elif kind == "text":
        open(path, "w").write("not a checkpoint at all")
    elif kind == "custom_class":
        torch.save({"a": Foo()}, path)
    elif kind == "plain_pickle":
        with open(path, "wb") as fh:
            pickle.dump({"fc1.weight": [1.0, 2.0]}, fh, protocol=4)
    elif kind == "not_a_dict":
        torch.save([torch.zeros(2)], path)
    elif kind == "folder":
        os.mkdir(path)


@pytest.mark.parametrize("kind, words", [
    ("missing", "does not exist"),
    ("folder", "is a folder"),
    ("truncated", "truncated or damaged"),
    ("truncated_large", r"is truncated or damaged: its zip archive cannot be read \(\d+ bytes; File is not a zip"),
    ("empty", "empty or truncated|not a PyTorch checkpoint"),
    ("random", "not a PyTorch checkpoint"),
    ("text", "not a PyTorch checkpoint"),
    ("custom_class", r"objects other than tensors.*Foo"),
    ("plain_pickle", "not a PyTorch checkpoint|objects other than tensors"),
    ("not_a_dict", "holds a list, not a state dict"),
])
@pytest.mark.parametrize("verify", [False, True])
def test_every_load_failure_is_one_error_naming_file_and_origin(tmp_path, kind, words, verify):
    path = str(tmp_path / f"{kind}.pt")
    if kind != "missing":
        _make(kind, path)
    msg = _refused(lambda: load_checkpoint(path, what="checkpoints[2] of compute_landscape", verify=verify),
                       match=words)
    assert "checkpoints[2] of compute_landscape" in msg and repr(path) in msg
    assert "HINT" in msg or kind in ("missing", "folder")


def test_missing_file_is_also_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "nope.pt", what="c")


def test_keys_and_shapes_that_do_not_fit_the_network(tmp_path):
    path = str(tmp_path / "other.pt")
    torch.save(Net(hidden=9).state_dict(), path)
    msg = _refused(lambda: load_checkpoint(path, what="checkpoints[1] of compute_landscape", network=Net()))
    # the first key in sorted order whose shape differs, with both shapes (computed here from the modules)
    assert "'fc1.bias' has shape (9,) in the checkpoint and (6,) in the network" in msg
    assert "(2 more differ: ['fc1.weight', 'fc2.weight'])" in msg and repr(path) in msg and "checkpoints[1] of compute_landscape" in msg

    wide = nn.Sequential(*[nn.Linear(2, 2) for _ in range(8)])
    torch.save(wide.state_dict(), path)
    msg = _refused(lambda: load_checkpoint(path, what="checkpoints[1] of f", network=Net()))
    assert "missing keys ['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight']" in msg
    assert "unexpected keys ['0.bias', '0.weight', '1.bias', '1.weight', '2.bias'] and 11 more" in msg


class _Wrapper(nn.Module):
    """What a LightningModule holding the network as ``self.net`` saves: ``net.fc1.weight``, ..."""

    def __init__(self) -> None:
        super().__init__()
        self.net = Net()
        self.loss_fn = nn.CrossEntropyLoss()


def test_keys_that_differ_by_a_prefix_say_so_and_the_printed_fix_works(tmp_path):
    path = str(tmp_path / "lit.pt")
    torch.save(_Wrapper().state_dict(), path)
    msg = _refused(lambda: load_checkpoint(path, what="checkpoints[0] of compute_landscape", network=Net()))
    assert "missing keys ['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight']" in msg
    assert "HINT: the checkpoint's keys are the network's with the prefix 'net.'" in msg and "self.net" in msg
    assert "callback_fn" not in msg
    fix = msg.split("strip the prefix: ", 1)[1].split(", or use", 1)[0]
    state = torch.load(path, weights_only=True)
    stripped = eval(fix, {"state": state})  # the expression as printed
    assert load_checkpoint(stripped, what="c", network=Net()).keys() == Net().state_dict().keys()

    torch.save(Net().state_dict(), path)  # the other way round: the network wraps the one saved
    msg = _refused(lambda: load_checkpoint(path, what="c", network=_Wrapper()))
    assert "HINT: the network's keys are the checkpoint's with the prefix 'net.'" in msg and "network.net" in msg
    fix = msg.split("add the prefix: ", 1)[1].rstrip(".")
    added = eval(fix, {"state": torch.load(path, weights_only=True)})
    assert load_checkpoint(added, what="c", network=_Wrapper()).keys() == _Wrapper().state_dict().keys()

    torch.save({"state_dict": Net().state_dict(), "epoch": 3}, path)  # a training checkpoint's dict
    msg = _refused(lambda: load_checkpoint(path, what="c", network=Net()))
    assert "HINT: this is a training checkpoint (a dict holding 'state_dict')" in msg

    torch.save(nn.Sequential(nn.Linear(4, 6)).state_dict(), path)  # no prefix explains it: another architecture
    msg = _refused(lambda: load_checkpoint(path, what="c", network=Net()))
    assert msg.endswith("HINT: the network must be the architecture that was trained.")


def test_state_dict_items_are_checked_too():
    bad = Net().state_dict()
    bad["extra"] = bad.pop("fc2.bias")
    msg = _refused(lambda: check_checkpoints([Net().state_dict(), bad], Net(), name="checkpoints",
                                                 caller="compute_landscape"))
    assert msg.startswith("The parameters of the network do not match checkpoints[1] of compute_landscape:")
    with pytest.raises(InvalidParameterError, match="checkpoints\\[0\\] of compute_landscape"):
        check_checkpoints([42], Net(), name="checkpoints", caller="compute_landscape")


def test_recorded_digest_is_found_next_to_the_file(tmp_path, ckpt):
    assert recorded_digest(ckpt) is None  # no metadata in its folder
    digest = _sha256(ckpt)
    TrainMetadata(intervals=[], files={7: os.path.basename(ckpt)}, step_per_epoch=1, unit="step", num_samples=1,
                  landscape_size=3, digests={7: digest}).write(tmp_path)
    assert recorded_digest(ckpt) == (digest, str(tmp_path / "train_metadata.json"))
    assert recorded_digest(tmp_path / "elsewhere.pt") is None


def test_checkpoint_error_is_exported():
    assert collector.CheckpointError is CheckpointError


# -- the remaining validation gaps of collect_landscape -------------------------------------
@pytest.mark.parametrize("intervals, words", [
    ([[1, 2, 2, 3]], r"'collect_landscape\['intervals'\]\[0\]'.*\[1, 2, 2, 3\].*2 at position 2 repeats 2"),
    ([[1, 2, 3], [6, 5, 4]], r"'collect_landscape\['intervals'\]\[1\]'.*5 at position 1 comes after the larger 6"),
])
def test_intervals_must_be_strictly_increasing(intervals, words):
    with pytest.raises(InvalidParameterError, match=words):
        validate_collect_landscape({"intervals": intervals}, name="collect_landscape")
    assert validate_collect_landscape({"intervals": [[1, 2, 3], [3, 4, 5]]})["intervals"] == [[1, 2, 3], [3, 4, 5]]


def test_summary_collector_refuses_repeated_intervals(tmp_path):
    from collector import SummaryCollector

    with pytest.raises(InvalidParameterError, match=r"\[1, 2, 2, 3\]"):
        SummaryCollector(tmp_path / "run", collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 2, 3]]}})
    assert not (tmp_path / "run").exists()


# -- folders that are files ---------------------------------------------------------------
@pytest.mark.parametrize("make, name", [
    (lambda p: collector.SummaryRecord(p), "log_dir"),
    (lambda p: collector.SummaryCollector(p), "summary_dir"),
    (lambda p: collector.ModelCheckpoint(directory=p), "directory"),
])
@pytest.mark.parametrize("inside", [False, True])
def test_folder_parameters_that_are_files(tmp_path, make, name, inside):
    target = tmp_path / "a_file"
    target.write_text("x")
    path = target / "sub" if inside else target
    before, threads = sorted(os.listdir(tmp_path)), set(threading.enumerate())
    with pytest.raises(InvalidDirectoryError, match=f"The '{name}' parameter of .* must be a directory") as info:
        make(path)
    assert set(threading.enumerate()) <= threads  # no writer thread started: refused before any work
    assert isinstance(info.value, NotADirectoryError) and isinstance(info.value, InvalidParameterError)
    assert repr(str(target)) in str(info.value) and "HINT" in str(info.value)
    assert sorted(os.listdir(tmp_path)) == before and target.read_text() == "x"


def test_collector_hashes_checkpoints_on_the_writer_thread(tmp_path, monkeypatch):
    """save_file (which hashes) runs on the collector's writer thread, never on the training thread."""
    from collector import Model, SummaryCollector
    from collector.collect import _landscape

    threads = []
    real = _landscape.save_file

    def spy(state, path, **kw):
        threads.append(threading.current_thread().name)
        return real(state, path, **kw)

    monkeypatch.setattr(_landscape, "save_file", spy)
    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
    sc = SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": {
        "unit": "step", "intervals": [[1, 2, 3], [10, 11, 12]], "landscape_size": 3, "num_samples": 8}})
    model.train(3, loader, callbacks=[sc])
    # six interval checkpoints and the initial weights'
    assert threads == ["landscape-ckpt"] * 7 and threading.current_thread().name not in threads
    md = read_train_metadata(tmp_path / "ckpt_dir")
    initial = (tmp_path / "ckpt_dir" / md.initial).read_bytes()
    assert len(md.digests) == 6 and md.initial_digest == FileDigest(hashlib.sha256(initial).hexdigest(), len(initial))
