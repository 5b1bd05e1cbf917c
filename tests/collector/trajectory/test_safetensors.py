"""safetensors checkpoints: written as the reference writes them, read without pickles, checked like torch's."""

import hashlib
import json
import os
import sys

import pytest
import torch
from torch import nn

from collector.trajectory import (
    CheckpointError,
    CheckpointReader,
    FileDigest,
    check_checkpoints,
    load_checkpoint,
    save_file,
    verify_checkpoint_file,
)

safetensors_torch = pytest.importorskip("safetensors.torch")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 4)
        self.bn = nn.BatchNorm1d(4)
        self.fc2 = nn.Linear(4, 3)


def _header(path):
    with open(path, "rb") as fh:
        return json.loads(fh.read(int.from_bytes(fh.read(8), "little")))


def _mixed():
    torch.manual_seed(0)
    return {"w": torch.randn(5, 3), "half": torch.randn(4).to(torch.bfloat16), "d": torch.randn(2, 2).double(),
            "n": torch.tensor(7), "flag": torch.tensor([True, False]), "empty": torch.ones(0, 2),
            "t": torch.randn(3, 4).t()}  # not contiguous


def test_written_bytes_are_the_reference_writers_and_the_digest_is_the_files(tmp_path):
    state = _mixed()
    path = tmp_path / "m.safetensors"
    digest = save_file(state, str(path), file_format="safetensors")
    data = path.read_bytes()
    assert data == safetensors_torch.save({k: v.contiguous() for k, v in state.items()})
    assert digest == FileDigest(hashlib.sha256(data).hexdigest(), len(data))
    loaded = load_checkpoint(path, what="m")
    assert set(loaded) == set(state)
    for k, v in state.items():
        assert loaded[k].dtype == v.dtype and torch.equal(loaded[k], v)


def test_a_hugging_face_model_safetensors_loads_with_its_tied_weights(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=50, n_positions=16)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    model.save_pretrained(tmp_path, safe_serialization=True)
    path = tmp_path / "model.safetensors"
    header = _header(path)  # what Hugging Face writes: the tied head once
    assert "lm_head.weight" not in header and "transformer.wte.weight" in header
    fresh = transformers.GPT2LMHeadModel(config)
    state = load_checkpoint(path, what="model", network=fresh, verify=True)
    want = model.state_dict()
    assert set(state) == set(want)
    for k, v in want.items():
        assert torch.equal(state[k], v), k
    check_checkpoints([path], fresh, name="checkpoints", caller="test")
    reader = CheckpointReader(path, what="model", network=fresh)
    assert torch.equal(reader.read([("lm_head.weight", 3, 7)])[0], want["lm_head.weight"][3:7])


def _damaged(tmp_path, how):
    path = tmp_path / f"{how}.safetensors"
    save_file(Net().state_dict(), str(path), file_format="safetensors")
    data = bytearray(path.read_bytes())
    n = int.from_bytes(data[:8], "little")
    if how == "truncated":
        data = data[:-5]
    elif how == "appended":
        data += b"\0" * 4
    elif how == "not_json":
        data[9] = ord("#")
    elif how == "long_header":
        data[:8] = (len(data) + 1).to_bytes(8, "little")
    elif how == "overlap":
        header = json.loads(data[8:8 + n])
        name = next(k for k in header if k != "__metadata__" and header[k]["data_offsets"][0] > 0)
        b, e = header[name]["data_offsets"]
        header[name]["data_offsets"] = [b - 4, e - 4]
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (n - len(text))
        data[8:8 + n] = text
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how, message", [
    ("truncated", r"its header describes \d+ bytes but the file has \d+"),
    ("appended", r"its header describes \d+ bytes but the file has \d+"),
    ("not_json", r"its \d+-byte header is not JSON"),
    ("long_header", "its header length .* does not fit a file"),
    ("overlap", r"tensor '[\w.]+' at bytes \[\d+, \d+\) overlaps the tensor before it"),
])
def test_a_damaged_file_is_refused_by_its_structure_before_loading(tmp_path, how, message):
    path = _damaged(tmp_path, how)
    with pytest.raises(CheckpointError, match="checkpoints\\[0\\] of test: checkpoint file .* is not a whole "
                                              "safetensors file: " + message):
        check_checkpoints([str(path)], Net(), name="checkpoints", caller="test")
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path, what="c", network=Net())


def test_a_changed_tensor_is_found_by_the_recorded_digest(tmp_path):
    path = tmp_path / "c.safetensors"
    digest = save_file(Net().state_dict(), str(path), file_format="safetensors")
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10  # a bit of the last tensor: the structure is intact
    path.write_bytes(bytes(data))
    verify_checkpoint_file(path, what="c")  # no checksum in the format: the structure alone passes
    with pytest.raises(CheckpointError, match="is not the file training wrote: expected SHA-256"):
        verify_checkpoint_file(path, what="c", digest=digest)


def test_keys_of_a_wrapped_network_and_wrong_shapes(tmp_path):
    net = Net()
    path = tmp_path / "ddp.safetensors"
    save_file({"module." + k: v for k, v in net.state_dict().items()}, str(path), file_format="safetensors")
    state = load_checkpoint(path, what="c", network=Net())
    assert set(state) == set(net.state_dict())
    bad = tmp_path / "bad.safetensors"
    save_file({**net.state_dict(), "fc2.weight": torch.zeros(3, 5)}, str(bad), file_format="safetensors")
    with pytest.raises(CheckpointError, match=r"'fc2.weight' has shape \(3, 5\) in the checkpoint and \(3, 4\)"):
        check_checkpoints([str(bad)], Net(), name="checkpoints", caller="test")


@pytest.mark.parametrize("kind", ["pt", "safetensors", "legacy", "memory"])
def test_the_reader_returns_the_rows_asked_for(tmp_path, kind):
    net = Net()
    state = {k: torch.randn(v.shape) if v.is_floating_point() else v for k, v in net.state_dict().items()}
    if kind == "memory":
        item = state
    else:
        item = str(tmp_path / f"c.{'safetensors' if kind == 'safetensors' else 'pt'}")
        if kind == "safetensors":
            save_file(state, item, file_format="safetensors")
        else:
            torch.save(state, item, _use_new_zipfile_serialization=kind == "pt")
    reader = CheckpointReader(item, what="c", network=net)
    got = reader.read([("fc1.weight", 1, 3), ("bn.num_batches_tracked", 0, 1), ("fc2.bias", 0, 3)])
    assert torch.equal(got[0], state["fc1.weight"][1:3])
    assert torch.equal(got[1], state["bn.num_batches_tracked"])
    assert torch.equal(got[2], state["fc2.bias"])


def test_a_renamed_safetensors_file_is_recognised_by_its_content(tmp_path):
    path = tmp_path / "checkpoint.bin"
    save_file(Net().state_dict(), str(path), file_format="safetensors")
    assert set(load_checkpoint(path, what="c", network=Net())) == set(Net().state_dict())


def test_without_the_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    save_file(Net().state_dict(), str(path), file_format="safetensors")  # writing needs no package
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)
    with pytest.raises(ImportError, match="needs the 'safetensors' package.*pip install safetensors"):
        load_checkpoint(path, what="c")
    assert os.path.getsize(path) > 0


def test_a_torch_checkpoint_is_read_by_offsets_without_loading_it_again(tmp_path, monkeypatch):
    """After the reader is made, rows come from plain file reads: no torch.load per block."""
    from collector.trajectory import _loading

    net = Net()
    state = {k: torch.randn(v.shape) if v.is_floating_point() else v for k, v in net.state_dict().items()}
    path = tmp_path / "c.pt"
    torch.save(state, path)
    reader = CheckpointReader(path, what="c", network=net)

    def no_load(*args, **kw):
        raise AssertionError("torch.load called for a block")

    monkeypatch.setattr(_loading, "torch_load", no_load)
    for name, t in state.items():
        rows = t.shape[0] if t.dim() else 1
        for a, b in ((0, rows), (rows // 2, rows)):
            got = reader.read([(name, a, b)])[0]
            assert got.dtype == t.dtype and torch.equal(got, t[a:b] if t.dim() else t)
