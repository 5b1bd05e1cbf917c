"""The reader: MindSpore's own files, and damaged files (property test)."""

from __future__ import annotations

import json
import math
import shutil
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector import CorruptRecordError, SummaryReader, SummaryRecord, read_events
from tests.collector.summary import _wire


def test_mindspore_landscapes(mindspore_run):
    reader = SummaryReader(mindspore_run)
    assert reader.issues == []
    lands = reader.landscapes()
    assert list(lands) == ["landscape_[1, 5]", "landscape_[6, 10]", "landscape_[10]"]
    for tag, item in lands.items():
        assert item["step"] == 0
        assert item["x"].shape == (10,) and item["y"].shape == (10,) and item["z"].shape == (10, 10)
        assert np.isfinite(item["z"]).all() and (item["z"] > 0).all()
        assert item["unit"] == "epoch" and item["step_per_epoch"] == 28
    pca1, pca2, rnd = lands.values()
    assert pca1["decomposition"] == "PCA" and rnd["decomposition"] == "Random"
    assert pca1["intervals"].tolist() == [1, 2, 3, 4, 5] and pca2["intervals"].tolist() == [6, 7, 8, 9, 10]
    assert rnd["intervals"].size == 0 and "path_x" not in rnd
    # PCA: the last checkpoint sits at the origin; its loss is the convergence point's z
    assert pca1["path_x"][-1] == 0 and pca1["path_y"][-1] == 0
    assert pca1["convergence_point"][:2].tolist() == [0.0, 0.0]
    # the values MindSpore wrote, decoded here by hand from the file's bytes (tests/collector/summary/_wire.py)
    (written_by_ms,) = [p for p in mindspore_run.iterdir() if p.name.endswith("1795297598.0.vm_MS")]
    for tag, item in lands.items():
        value = _wire_value(written_by_ms, tag)
        (landscape,) = _wire.field(value, 10)  # Value.loss_landscape
        (point,) = _wire.field(landscape, 4)  # LossLandscape.convergence_point
        written = [_wire.tensor_values(t)[0] for k in (1, 2, 3) for t in _wire.field(point, k)]
        assert item["convergence_point"].tolist() == written, tag
        (grid,) = _wire.field(landscape, 1)  # LossLandscape.landscape: x 1, y 2, z 3
        for k, key in ((1, "x"), (2, "y"), (3, "z")):
            (tensor,) = _wire.field(grid, k)
            assert item[key].ravel().tolist() == _wire.tensor_values(tensor), (tag, key)
    assert pca1["path_z"][-1] == pytest.approx(pca1["convergence_point"][2], rel=1e-6)
    # Random: axes linspace(-1, 1, 10); convergence point at index (5, 5)
    np.testing.assert_allclose(rnd["x"], np.linspace(-1, 1, 10), rtol=1e-6)
    np.testing.assert_allclose(rnd["convergence_point"], [rnd["x"][5], rnd["y"][5], rnd["z"][5, 5]], rtol=1e-6)


def test_mindspore_scalars_histograms_lineage(mindspore_run):
    reader = SummaryReader(mindspore_run)
    steps, loss = reader.scalars()["loss/auto"]
    # 28 steps x 10 epochs with collect_freq=1; MindSpore records each epoch's last step twice
    assert sorted(set(steps.tolist())) == list(range(1, 281)) and len(steps) == 290
    # every value as MindSpore wrote it (Value.scalar_value, field 3, a float32), decoded here by hand
    (training,) = [p for p in mindspore_run.iterdir() if p.name.endswith("1795297579.0.vm_MS")]
    written = [(step, struct.unpack("<f", int(v).to_bytes(4, "little"))[0])
               for payload in _wire.records(training.read_bytes())
               for step, tag, value in _wire.summary_values(payload) if tag == b"loss/auto"
               for v in _wire.field(value, 3)]
    assert list(zip(steps.tolist(), loss.tolist())) == written
    # an untrained network's loss on ten classes is about ln 10; a trained one's far lower
    assert loss[0] == pytest.approx(math.log(10), rel=0.01) and loss[-1] < 0.1
    hists = reader.histograms()
    assert sorted(hists) == sorted(["fc1.weight/auto", "fc1.bias/auto", "fc2.weight/auto", "fc2.bias/auto", "fc3.weight/auto"])
    h = hists["fc1.weight/auto"][0]
    assert h["total"] == 64 * 128 and h["count"].sum() == 64 * 128 and len(h["count"]) == 90
    lineage = {ev.WhichOneof("what"): ev for ev in reader.lineage()}
    hp = lineage["train_lineage"].train_lineage.hyper_parameters
    assert (hp.optimizer, hp.epoch, hp.batch_size) == ("Momentum", 10, 64)
    assert hp.learning_rate == pytest.approx(0.05)
    assert lineage["train_lineage"].train_lineage.algorithm.network == "MLP"
    graph = lineage["dataset_graph"].dataset_graph
    assert graph.parameter.mapStr["op_type"] == "Batch" and graph.parameter.mapInt["batch_size"] == 64
    assert graph.children[0].parameter.mapStr["op_type"] == "GeneratorDataset"


def _wire_value(path, tag: str) -> bytes:
    """The Value of ``tag`` in the summary file ``path``, found by hand."""
    found = [value for payload in _wire.records(path.read_bytes())
             for _, t, value in _wire.summary_values(payload) if t == tag.encode()]
    assert len(found) == 1, (tag, len(found))
    return found[0]


def test_mindspore_metadata_json(mindspore_run):
    meta = json.loads((mindspore_run / "train_metadata.json").read_text())
    assert meta["epoch_group"] == {"0": [1, 2, 3, 4, 5], "1": [6, 7, 8, 9, 10]}


def test_missing_path_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        SummaryReader(tmp_path / "nope")


def _written_file(directory) -> bytes:
    with SummaryRecord(directory) as rec:
        for step in range(1, 6):
            rec.add_value("scalar", "loss", float(step))
            rec.add_value("histogram", "w", np.arange(20.0) * step)
            rec.record(step)
        path = rec.summary_file
    return open(path, "rb").read()


@pytest.fixture(scope="module")
def clean_bytes(tmp_path_factory):
    return _written_file(tmp_path_factory.mktemp("clean"))


def _record_ends(data: bytes) -> list[int]:
    ends, pos = [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 8], "little")
        pos += 16 + n
        ends.append(pos)
    return ends


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_return_intact_prefix(tmp_path_factory, clean_bytes, data):
    ends = _record_ends(clean_bytes)
    damaged = bytearray(clean_bytes)
    action = data.draw(st.sampled_from(["truncate", "flip", "both", "garbage"]))
    first_bad = len(damaged)
    clean_cut = False  # a file cut exactly between records is shorter, not damaged
    if action in ("truncate", "both"):
        cut = data.draw(st.integers(0, len(damaged) - 1))
        del damaged[cut:]
        first_bad = min(first_bad, cut)
        clean_cut = cut == 0 or cut in ends
    if action in ("flip", "both") and damaged:
        pos = data.draw(st.integers(0, len(damaged) - 1))
        damaged[pos] ^= data.draw(st.integers(1, 255))
        clean_cut = False
        first_bad = min(first_bad, pos)
    if action == "garbage":
        pos = data.draw(st.integers(0, len(damaged)))
        damaged[pos:pos] = data.draw(st.binary(min_size=1, max_size=64))
        first_bad = min(first_bad, pos)
    folder = tmp_path_factory.mktemp("damaged")
    (folder / "events.out.events.summary.1.host_MS").write_bytes(bytes(damaged))
    reader = SummaryReader(folder)  # must never raise for damage
    intact = sum(1 for e in ends if e <= first_bad)  # records wholly before the damage
    assert len(reader.events) >= intact
    steps = reader.scalars().get("loss", (np.array([], dtype=int), None))[0]
    assert steps.tolist() == list(range(1, len(steps) + 1))
    if first_bad < len(clean_bytes) and not clean_cut:
        assert reader.issues, "damage must be reported"
        with pytest.raises(CorruptRecordError):
            list(read_events(folder, strict=True))


def test_lineage_and_summary_files_both_read(tmp_path, mindspore_run):
    shutil.copytree(mindspore_run, tmp_path / "run")
    kinds = [k for k, _ in read_events(tmp_path / "run")]
    assert kinds.count("lineage") == 2 and kinds.count("summary") == 291 + 4
