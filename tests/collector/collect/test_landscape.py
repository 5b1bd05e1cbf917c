"""collect_landscape validation (shared with SummaryLandscape) and its messages."""

from __future__ import annotations

import re

import pytest

from collector import InvalidParameterError, SummaryCollector
from collector.trajectory import LANDSCAPE_DEFAULTS, validate_collect_landscape

KEY = "collect_specified_data['collect_landscape']"
GOOD = {"intervals": [[1, 2, 3]]}


def test_defaults_filled_and_copied():
    value = {"intervals": [[1, 2, 3], [4, 5, 6, 7]]}
    out = validate_collect_landscape(value)
    assert out == {"landscape_size": 40, "unit": "step", "create_landscape": {"train": True, "result": True},
                   "num_samples": 2048, "intervals": [[1, 2, 3], [4, 5, 6, 7]]}
    out["create_landscape"]["train"] = False
    assert LANDSCAPE_DEFAULTS["create_landscape"]["train"] is True


def test_override_mode_keeps_only_given_keys():
    out = validate_collect_landscape({"landscape_size": 5, "create_landscape": {"train": False}},
                                     caller="SummaryLandscape", name="collect_landscape",
                                     require_intervals=False, fill_defaults=False)
    assert out == {"landscape_size": 5, "create_landscape": {"train": False, "result": True}}
    with pytest.raises(InvalidParameterError, match=re.escape("'collect_landscape['unit']' parameter of "
                                                              "SummaryLandscape")):
        validate_collect_landscape({"unit": "day"}, caller="SummaryLandscape", name="collect_landscape",
                                   require_intervals=False)


def test_boundaries_accepted():
    for size in (3, 256):
        assert validate_collect_landscape({**GOOD, "landscape_size": size})["landscape_size"] == size
    assert validate_collect_landscape({**GOOD, "num_samples": 1, "unit": "epoch"})["unit"] == "epoch"


BAD = [
    ("not a dict", [1, 2, 3], rf"'{re.escape(KEY)}' parameter of SummaryCollector must be a dict\. Got \[1, 2, 3\]"),
    ("unknown key", {**GOOD, "size": 3}, r"unknown key\(s\) \['size'\]; the accepted keys are \['landscape_size', "
                                         r"'unit', 'create_landscape', 'num_samples', 'intervals'\]"),
    ("size too small", {**GOOD, "landscape_size": 2},
     re.escape(f"'{KEY}['landscape_size']' parameter of SummaryCollector must be an int in the range [3, 256]. "
               "Got 2 instead")),
    ("size too large", {**GOOD, "landscape_size": 257}, r"\[3, 256\]\. Got 257 instead"),
    ("size float", {**GOOD, "landscape_size": 10.0}, r"\['landscape_size'\]' .*\[3, 256\]\. Got 10\.0 instead"),
    ("size bool", {**GOOD, "landscape_size": True}, r"\[3, 256\]\. Got True instead"),
    ("unit", {**GOOD, "unit": "steps"},
     re.escape(f"'{KEY}['unit']' parameter of SummaryCollector must be one of 'step', 'epoch'. Got 'steps'")),
    ("create not dict", {**GOOD, "create_landscape": True},
     re.escape(f"'{KEY}['create_landscape']' parameter of SummaryCollector must be a dict with bool values "
               "for 'train' and 'result'. Got True")),
    ("create unknown key", {**GOOD, "create_landscape": {"final": True}},
     r"\['create_landscape'\]' parameter of SummaryCollector has unknown key\(s\) \['final'\]; the accepted keys "
     r"are \['train', 'result'\]"),
    ("create non-bool", {**GOOD, "create_landscape": {"train": 1}},
     re.escape(f"'{KEY}['create_landscape']['train']' parameter of SummaryCollector must be a bool. Got 1")),
    ("num_samples 0", {**GOOD, "num_samples": 0},
     re.escape(f"'{KEY}['num_samples']' parameter of SummaryCollector must be an int in the range [1, inf). "
               "Got 0 instead")),
    ("num_samples str", {**GOOD, "num_samples": "512"}, r"\['num_samples'\]' .* Got '512' instead"),
    ("intervals missing", {"unit": "step"},
     re.escape(f"'{KEY}['intervals']' parameter of SummaryCollector is required: a list of lists of at least "
               "three")),
    ("intervals empty", {"intervals": []}, r"\['intervals'\]' parameter of SummaryCollector must be a non-empty "
                                           r"list of lists of at least three ints in the range \[1, inf\)\. Got \[\]"),
    ("intervals flat", {"intervals": [1, 2, 3]}, r"\['intervals'\]\[0\]' parameter .* at least three ints .* Got 1 "),
    ("interval too short", {"intervals": [[1, 2, 3], [4, 5]]},
     r"\['intervals'\]\[1\]' parameter of SummaryCollector must be a list of at least three ints in the range "
     r"\[1, inf\)\. Got \[4, 5\] instead"),
    ("interval zero", {"intervals": [[0, 1, 2]]},
     re.escape(f"'{KEY}['intervals'][0][0]' parameter of SummaryCollector must be an int in the range [1, inf). "
               "Got 0 instead")),
    ("interval negative", {"intervals": [[1, 2, -3]]}, r"\[0\]\[2\]' .* Got -3 instead"),
    ("interval float", {"intervals": [[1, 2, 3.5]]}, r"\[0\]\[2\]' .* Got 3\.5 instead"),
    ("interval str", {"intervals": "1,2,3"}, r"\['intervals'\]' .* Got '1,2,3' instead"),
]


@pytest.mark.parametrize("value, pattern", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_every_rule_refused_and_nothing_written(tmp_path, value, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        validate_collect_landscape(value)
    target = tmp_path / "run"
    with pytest.raises(InvalidParameterError, match=pattern):
        SummaryCollector(target, collect_specified_data={"collect_landscape": value})
    assert not target.exists()


def test_none_means_no_landscape(tmp_path):
    sc = SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": None})
    assert sc.collect_specified_data["collect_landscape"] is None


def _tiny_net():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


@pytest.mark.parametrize("batch_bytes", [64 << 20, 0], ids=["batched", "one-by-one"])
def test_checkpoints_are_snapshots_written_before_the_metadata(tmp_path, monkeypatch, batch_bytes):
    import json
    import os

    import torch

    from collector.collect import _landscape as _landscape_collect
    from collector.collect._landscape import LandscapeCollector

    monkeypatch.setattr(_landscape_collect, "CKPT_BATCH_BYTES", batch_bytes)
    net = _tiny_net()
    collector = LandscapeCollector(str(tmp_path / "ckpt_dir"), validate_collect_landscape(
        {"unit": "epoch", "intervals": [[1, 2, 3]]}))
    expected = {}
    for epoch in (1, 2, 3):
        assert collector.maybe_save(net, epoch)
        expected[epoch] = {k: v.clone() for k, v in net.state_dict().items()}
        with torch.no_grad():
            for p in net.parameters():
                p.add_(1.0)  # training goes on while the checkpoints wait
    assert not collector.maybe_save(net, 4)
    if batch_bytes == 0:
        collector._writer.wait()  # each was handed to the writer thread as it came
        assert len([f for f in os.listdir(tmp_path / "ckpt_dir") if f.endswith(".pt")]) == 3
    path = collector.write_metadata(step_per_epoch=5)
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["model_params_file_map"] == {str(n): f"Sequential_{n}_epoch.pt" for n in (1, 2, 3)}
    for epoch, state in expected.items():
        saved = torch.load(tmp_path / "ckpt_dir" / f"Sequential_{epoch}_epoch.pt", weights_only=True)
        assert saved.keys() == state.keys()
        assert all(torch.equal(saved[k], state[k]) for k in state)
    assert not [f for f in os.listdir(tmp_path / "ckpt_dir") if ".tmp" in f]


@pytest.mark.parametrize("in_memory", [True, False])
def test_save_file_in_memory_and_streamed_load_the_same(tmp_path, monkeypatch, in_memory):
    import torch

    from collector.trajectory import _checkpoints as _state_io
    monkeypatch.setattr(_state_io, "IN_MEMORY_SAVE_BYTES", 1 << 30 if in_memory else 0)
    state = {"w": torch.arange(12.0).reshape(3, 4), "n": torch.tensor(7), "nested": {"b": torch.ones(2)}}
    path = str(tmp_path / "x.pt")
    _state_io.save_file(state, path)
    loaded = torch.load(path, weights_only=True)
    assert torch.equal(loaded["w"], state["w"]) and int(loaded["n"]) == 7 and torch.equal(loaded["nested"]["b"],
                                                                                           torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]


def test_safetensors_checkpoints_are_recorded_and_read_back(tmp_path):
    import hashlib

    import torch

    from collector.trajectory import load_checkpoint, read_train_metadata

    net = _tiny_net()
    x, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    states = {}
    with SummaryCollector(tmp_path, checkpoint_format="safetensors", collect_specified_data={
            "collect_landscape": {"unit": "step", "intervals": [[1, 2, 3]], "landscape_size": 3}}) as sc:
        sc.begin_train(network=net, optimizer=opt, loss_fn=torch.nn.CrossEntropyLoss(), epoch_num=1)
        for step in (1, 2, 3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            sc.step(loss)
            states[step] = {k: v.clone() for k, v in net.state_dict().items()}
        sc.epoch_end()
        sc.end()
    md = read_train_metadata(tmp_path / "ckpt_dir")
    assert md.files == {n: f"Sequential_{n}_step.safetensors" for n in (1, 2, 3)}
    for n, state in states.items():
        path = tmp_path / "ckpt_dir" / md.files[n]
        data = path.read_bytes()
        assert md.digests[n].sha256 == hashlib.sha256(data).hexdigest() and md.digests[n].size == len(data)
        assert data[8:9] == b"{"  # a safetensors header, not a zip of pickles
        loaded = load_checkpoint(path, what="c", network=_tiny_net(), digest=md.digests[n])
        assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_checkpoint_format_is_validated(tmp_path):
    with pytest.raises(InvalidParameterError, match=re.escape(
            "The 'checkpoint_format' parameter of SummaryCollector must be one of 'torch', 'safetensors'. "
            "Got 'npz' instead")):
        SummaryCollector(tmp_path / "x", checkpoint_format="npz")
    assert not (tmp_path / "x").exists()


def test_a_large_network_is_copied_again_only_once_its_previous_copy_is_written(tmp_path, monkeypatch):
    """Memory holds the network and one copy: the next copy waits for the write of the previous one."""
    import threading

    from collector.collect import _landscape as _landscape_collect
    from collector.collect._landscape import LandscapeCollector

    monkeypatch.setattr(_landscape_collect, "CKPT_BATCH_BYTES", 0)  # handed off at once
    monkeypatch.setattr(_landscape_collect, "CKPT_PENDING_BYTES", 1)  # any network is "large"
    release, writing = threading.Event(), threading.Event()
    real = _landscape_collect.save_file
    copies_alive = []

    def slow(state, path, **kw):
        writing.set()
        release.wait(10)
        return real(state, path, **kw)

    monkeypatch.setattr(_landscape_collect, "save_file", slow)
    real_copy = _landscape_collect.cpu_state_dict
    monkeypatch.setattr(_landscape_collect, "cpu_state_dict",
                        lambda m: copies_alive.append(release.is_set()) or real_copy(m))
    net = _tiny_net()
    collector = LandscapeCollector(str(tmp_path / "ckpt_dir"), validate_collect_landscape(
        {"unit": "step", "intervals": [[1, 2, 3]]}))
    assert collector.maybe_save(net, 1)
    assert writing.wait(10)
    second = threading.Thread(target=collector.maybe_save, args=(net, 2))
    second.start()
    second.join(0.3)
    assert second.is_alive() and copies_alive == [False]  # waiting, not copying, while the first is written
    release.set()
    second.join(10)
    assert copies_alive == [False, True]
    collector.maybe_save(net, 3)
    assert collector.write_metadata(step_per_epoch=3) is not None
    assert sorted(collector.digests) == [1, 2, 3]
