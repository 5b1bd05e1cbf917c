"""SummaryLandscape end to end, and every refusal before any work."""

import json
import os

import numpy as np
import pytest
import torch
from torch import nn

import landscape
from landscape import Landscape, SummaryLandscape
from tests.landscape._helpers import FakeModel, TinyMLP, make_data, tiny_callback


def callback():
    acc = lambda out, lab: (out.argmax(1) == lab).float().mean()  # noqa: E731
    return tiny_callback({"accuracy": acc})


def test_end_to_end_summary_and_h5(summary_dir, tmp_path):
    from collector import SummaryReader

    md_before = (summary_dir / "ckpt_dir" / "train_metadata.json").read_text()
    sl = SummaryLandscape(summary_dir)
    res = sl.gen_landscapes_with_multi_process(callback, device_ids=[0, 1])
    assert [r.tag for r in res] == ["landscape_[1, 3]", "landscape_[4, 6]", "landscape_[6]"]
    assert (summary_dir / "ckpt_dir" / "train_metadata.json").read_text() == md_before
    msgs = SummaryReader(str(summary_dir)).landscape_messages()
    assert [(s, t) for s, t, _ in msgs] == [(0, r.tag) for r in res]
    h5 = landscape.read_h5(summary_dir / "landscapes.h5")
    for (_, tag, msg), ours in zip(msgs, res):
        a, b = Landscape.from_proto(msg, tag=tag), h5[tag]
        np.testing.assert_allclose(a.z, b.z, rtol=1e-6)
        np.testing.assert_allclose(a.x, b.x, rtol=1e-6)
        np.testing.assert_array_equal(b.z, ours.z)
        assert b.surfaces["accuracy"].shape == (4, 4)
        assert a.metadata["unit"] == "epoch" and a.metadata["step_per_epoch"] == 4
    assert h5["landscape_[1, 3]"].path.intervals == [1, 2, 3]
    # an override for this call only: no intervals piled up, metadata file untouched
    out = tmp_path / "out"
    res2 = sl.gen_landscapes_with_multi_process(
        callback, collect_landscape={"intervals": [[2, 3, 4, 5]], "landscape_size": 3,
                                     "create_landscape": {"result": False}}, output=out)
    assert [r.tag for r in res2] == ["landscape_[2, 5]"] and res2[0].z.shape == (3, 3)
    res3 = sl.gen_landscapes_with_multi_process(callback, output=tmp_path / "out3")
    assert [r.tag for r in res3] == [r.tag for r in res]
    np.testing.assert_array_equal(res3[0].z, res[0].z)
    assert (summary_dir / "ckpt_dir" / "train_metadata.json").read_text() == md_before
    sl.clean_ckpt()
    assert not (summary_dir / "ckpt_dir").exists()


GEN = "gen_landscapes_with_multi_process"


@pytest.mark.parametrize("override, key", [
    ("x", "collect_landscape"),
    ({"bogus": 1}, "bogus"),
    ({"landscape_size": 2}, "landscape_size"),
    ({"landscape_size": 257}, "landscape_size"),
    ({"landscape_size": 4.0}, "landscape_size"),
    ({"unit": "batch"}, "unit"),
    ({"num_samples": 0}, "num_samples"),
    ({"create_landscape": {"train": 1}}, "train"),
    ({"create_landscape": {"other": True}}, "create_landscape"),
    ({"create_landscape": True}, "create_landscape"),
    ({"intervals": [[1, 2]]}, "intervals"),
    ({"intervals": []}, "intervals"),
    ({"intervals": [[1, 2, "3"]]}, "intervals"),
    ({"intervals": [[0, 1, 2]]}, "intervals"),
    ({"intervals": 5}, "intervals"),
])
def test_collect_landscape_rules(summary_dir, override, key):
    called = []
    with pytest.raises(ValueError, match=key):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
            lambda: called.append(1) or callback(), collect_landscape=override)
    assert not called  # refused before any work


def _rewrite(summary_dir, **changes):
    p = summary_dir / "ckpt_dir" / "train_metadata.json"
    md = json.loads(p.read_text())
    for k, v in changes.items():
        if v is None:
            md.pop(k)
        else:
            md[k] = v
    os.chmod(p, 0o644)
    p.write_text(json.dumps(md))


def test_missing_and_malformed_metadata(summary_dir):
    sl = SummaryLandscape(summary_dir)
    p = summary_dir / "ckpt_dir" / "train_metadata.json"
    os.chmod(p, 0o644)
    p.write_text("{not json")
    with pytest.raises(ValueError, match="train_metadata.json.*not valid JSON"):
        sl.gen_landscapes_with_multi_process(callback)
    p.write_text(json.dumps({"epoch_group": {}}))
    with pytest.raises(ValueError, match="model_params_file_map"):
        sl.gen_landscapes_with_multi_process(callback)
    p.unlink()
    with pytest.raises(FileNotFoundError, match="train_metadata.json"):
        sl.gen_landscapes_with_multi_process(callback)


def test_bad_metadata_value(summary_dir):
    _rewrite(summary_dir, unit="hour")
    with pytest.raises(ValueError, match="unit"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(callback)


def test_missing_checkpoint_names_step_and_file(summary_dir):
    os.remove(summary_dir / "ckpt_dir" / "TinyMLP_5_epoch.pt")
    with pytest.raises(FileNotFoundError, match=r"epoch 5.*TinyMLP_5_epoch.pt"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(callback)
    with pytest.raises(FileNotFoundError, match=r"epoch 7"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
            callback, collect_landscape={"intervals": [[7, 8, 9]]})


class Other(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.fc1(x))


def test_network_checkpoint_mismatch(summary_dir):
    def cb():
        m, _, d, met = callback()
        return m, Other(), d, met

    with pytest.raises(ValueError, match=r"missing keys \['head.bias', 'head.weight'\].*unexpected keys \["):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(cb)


def test_checkpoints_over_the_keep_budget_are_matched_unread_and_give_the_same_landscapes(summary_dir, tmp_path,
                                                                                           monkeypatch):
    """A large model's checkpoints are matched against the network from their structure, never loaded
    whole before the work (the PCA streams them); the landscapes are those of kept checkpoints."""
    from landscape.generate import _summary_landscape

    kept = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(callback, output=tmp_path / "kept")
    monkeypatch.setattr(_summary_landscape, "KEEP_CHECKPOINT_BYTES", 0)
    loads = []
    original = _summary_landscape.load_checkpoint
    monkeypatch.setattr(_summary_landscape, "load_checkpoint", lambda *a, **k: loads.append(a) or original(*a, **k))
    streamed = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(callback, output=tmp_path / "read")
    assert loads == []
    for a, b in zip(kept, streamed):
        assert a.tag == b.tag
        np.testing.assert_array_equal(a.z, b.z)

    def cb():
        m, _, d, met = callback()
        return m, Other(), d, met

    with pytest.raises(ValueError, match=r"missing keys \['head.bias', 'head.weight'\].*unexpected keys \["):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(cb, output=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("bad", [lambda: None, lambda: (1, 2, 3), lambda: (None, TinyMLP(), [], None),
                                 lambda: (FakeModel(TinyMLP(), None), TinyMLP(), [], None),
                                 lambda: (FakeModel(TinyMLP(), nn.MSELoss()), "net", [], None)])
def test_callback_wrong_shape(summary_dir, bad):
    with pytest.raises(ValueError, match="callback_fn"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(bad)


def test_num_samples_larger_than_dataset(summary_dir):
    with pytest.raises(ValueError, match=r"num_samples.*1000.*96 samples"):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
            callback, collect_landscape={"num_samples": 1000})


@pytest.mark.parametrize("kw, key", [({"device_ids": [-1]}, "device_ids"), ({"output": 3}, "output"),
                                     ({"normalization": "x"}, "normalization"), ({"callback_fn": 3}, "callback_fn")])
def test_other_parameters(summary_dir, kw, key):
    args = {"callback_fn": callback, **kw}
    with pytest.raises(ValueError, match=key):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(**args)


def test_checkpoints_of_an_interval_feed_compute_landscape(summary_dir, tmp_path):
    from landscape import compute_landscape

    sl = SummaryLandscape(summary_dir)
    assert sl.intervals and all(len(iv) >= 3 for iv in sl.intervals)
    first = sl.checkpoints(0)
    assert [os.path.basename(p).split("_")[1] for p in first] == [str(n) for n in sl.intervals[0]]
    assert all(os.path.isfile(p) for p in first) and len(sl.checkpoints()) >= len(first)
    assert sl.checkpoints(sl.intervals[0][:2]) == first[:2]
    ls = compute_landscape(TinyMLP(), torch.nn.CrossEntropyLoss(), make_data(), directions="pca", checkpoints=first,
                           size=4, num_samples=32)
    assert ls.path is not None and len(ls.path.z) == len(first)
    with pytest.raises(ValueError, match="'interval' parameter of SummaryLandscape.checkpoints must be an index"):
        sl.checkpoints(99)


def test_dict_batches_without_a_task_are_refused_before_any_folder(summary_dir, tmp_path):
    calls = []

    class Net(TinyMLP):
        def forward(self, x):
            calls.append(1)
            return super().forward(x)

    def cb():
        x, y = make_data()
        return FakeModel(None, nn.CrossEntropyLoss()), Net(), [{"x": x, "labels": y}], None

    out = tmp_path / "out"
    with pytest.raises(ValueError) as info:
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(cb, output=out)
    msg = str(info.value)
    assert msg.startswith("The batches of the dataset callback_fn returned (its third item) are dicts with the keys "
                          "['x', 'labels']")
    assert ("HINT: return a task as the fifth item of callback_fn's result, (model, network, dataset, metrics, "
            "task): landscape.tasks.HuggingFace()") in msg and "Supervised(loss_fn, inputs='x', targets='labels')" in msg
    assert not out.exists() and not calls
