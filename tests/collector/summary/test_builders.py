"""The parts SummaryRecord is built from: SnapshotSlabs, prepared values, Event bytes, EventWriter."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch

from collector import SummaryReader, proto, read_events
from collector.summary import _events, _values, _writer
from collector.summary._slabs import SLAB_BYTES, SnapshotSlabs
from collector.summary._writer import EventWriter


# ------------------------------------------------------------------ SnapshotSlabs
def test_slabs_hand_out_consecutive_rows_per_dtype_and_size():
    slabs = SnapshotSlabs(max_rows=4)
    a32 = np.zeros(10, dtype=np.float32)
    rows = [slabs.row(a32) for _ in range(5)]
    assert [index for _, _, index in rows] == [0, 1, 2, 3, 0]  # four rows, then a new slab
    assert rows[0][1] is rows[3][1] and rows[4][1] is not rows[0][1]
    for row, slab, index in rows:
        assert row.shape == (10,) and row.dtype == np.float32 and np.shares_memory(row, slab[index])
    slabs.row(np.zeros(10, dtype=np.float64))
    slabs.row(np.zeros(11, dtype=np.float32))
    assert len(slabs) == 3  # one per (dtype, size)
    many = slabs.rows([a32, np.zeros(11, dtype=np.float32)])
    assert [index for _, _, index in many] == [1, 1]
    slabs.reset()
    assert len(slabs) == 0
    assert slabs.row(a32)[2] == 0  # new slabs after a reset


def test_slabs_stay_under_slab_bytes():
    slabs = SnapshotSlabs(max_rows=10**6)
    _, slab, _ = slabs.row(np.zeros(1000, dtype=np.float32))
    assert slab.nbytes <= SLAB_BYTES and slab.shape[0] == SLAB_BYTES // 4000
    _, big, _ = slabs.row(np.zeros(SLAB_BYTES, dtype=np.float32))  # larger than a slab: one row
    assert big.shape[0] == 1


@pytest.mark.parametrize("max_rows", [0, -1, 1.5, None])
def test_slabs_refuse_a_wrong_max_rows(max_rows):
    with pytest.raises(ValueError, match="max_rows must be an int >= 1"):
        SnapshotSlabs(max_rows)


# ------------------------------------------------------------------ prepared values
def test_prepare_value_copies_and_uses_slabs_for_cpu_floats():
    slabs = SnapshotSlabs(max_rows=8)
    t = torch.arange(6.0).reshape(2, 3)
    data = _values.prepare_value("histogram", "h", t, slabs)
    assert len(data) == 4 and data[0].shape == (2, 3) and data[3] == 0
    t.add_(1)
    np.testing.assert_array_equal(data[0], np.arange(6.0).reshape(2, 3))  # a private copy
    ints = _values.prepare_value("histogram", "i", torch.arange(3), slabs)
    assert len(ints) == 2 and ints[0].dtype == np.int64
    assert _values.prepare_value("scalar", "s", torch.tensor([0.5]), slabs) == 0.5
    bf = _values.prepare_value("tensor", "b", torch.ones(2, dtype=torch.bfloat16), slabs)
    assert bf[1] is True and bf[0].dtype == np.float32
    info = _values.prepare_value("custom_lineage_data", "c", {"n": 1, "big": 2**40, "s": "x"}, slabs)
    assert isinstance(info, proto.UserDefinedInfo) and len(info.user_info) == 3
    assert info.user_info[1].map_double["big"] == 2.0**40


def test_values_nbytes_counts_the_array_copies():
    values = [("scalar", "s", 1.0), ("tensor", "t", (np.zeros(10), False)),
              ("histogram", "h", (np.zeros(4, dtype=np.float32), False, None, 0)), ("graph", "g", proto.GraphProto())]
    assert _events.values_nbytes(values) == 80 + 16


# ------------------------------------------------------------------ Event bytes
def test_record_events_orders_graph_lineage_then_summary():
    values = [("scalar", "s", 0.5), ("train_lineage", "tl", proto.TrainLineage()),
              ("graph", "graph", proto.GraphProto(name="g")), ("tensor", "t", (np.arange(3.0), False))]
    events = _events.record_events(4, 12.5, values)
    assert [kind for kind, _ in events] == ["lineage", "summary", "summary"]
    lineage = proto.LineageEvent.FromString(events[0][1])
    assert lineage.HasField("train_lineage") and (lineage.step, lineage.wall_time) == (4, 12.5)
    assert proto.Event.FromString(events[1][1]).graph_def.name == "g"
    summary = proto.Event.FromString(events[2][1])
    assert [v.tag for v in summary.summary.value] == ["s", "t"]
    assert summary.SerializeToString() == events[2][1]


def test_record_events_exports_tensors_only():
    exported = []
    values = [("tensor", "t", (np.arange(3.0), False)), ("scalar", "s", 1.0),
              ("image", "i", (np.zeros((1, 1, 2, 2)), False))]
    _events.record_events(7, 0.0, values, export=lambda tag, step, arr: exported.append((tag, step, arr.tolist())))
    assert exported == [("t", 7, [0.0, 1.0, 2.0])]


def test_batch_histograms_match_one_by_one_and_fall_back_on_error(monkeypatch):
    rng = np.random.default_rng(4)
    slabs = SnapshotSlabs(max_rows=8)
    batch = []
    for step in range(3):
        values = [("scalar", "s", 1.0),
                  ("histogram", "w", _values.prepare_value("histogram", "w", torch.from_numpy(
                      rng.normal(size=(20, 5)).astype(np.float32)), slabs)),
                  ("histogram", "i", (rng.integers(0, 9, 30), False))]
        batch.append((step, 1.0, values))
    alone = [_events.record_events(step, t, values) for step, t, values in batch]
    encoded = _events.batch_histograms(batch)
    assert [len(e) for e in encoded] == [2, 2, 2]
    assert [_events.record_events(step, t, values, e) for (step, t, values), e in zip(batch, encoded)] == alone
    assert _events.batch_histograms([(1, 1.0, [("scalar", "s", 1.0)])]) == [None]

    def fail(*args, **kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(_events._histogram, "encode_histogram_values", fail)
    assert _events.batch_histograms(batch) == [None, None, None]


# ------------------------------------------------------------------ EventWriter
def _writer_in(tmp_path, **kwargs):
    return EventWriter(str(tmp_path), "events", "_MS", kwargs.pop("max_file_size", None), **kwargs)


def test_event_writer_batches_until_flush_and_closes_read_only(tmp_path):
    taken = []
    w = _writer_in(tmp_path, on_batch_taken=lambda: taken.append(1))
    for step in (1, 2):
        w.add(step, 5.0, [("scalar", "x", float(step))])
    assert w.pending_records == 2 and not os.path.exists(w.summary_path) and taken == []
    w.flush()
    assert w.pending_records == 0 and taken == [1]
    w.flush()
    assert taken == [1]  # an empty batch is not "taken"
    w.add(3, 5.0, [("eval_lineage", "e", proto.EvaluationLineage(metric="{}"))])
    w.close()
    assert SummaryReader(tmp_path).scalars()["x"][1].tolist() == [1.0, 2.0]
    assert [kind for kind, _ in read_events(tmp_path)].count("lineage") == 2  # version + the record
    assert os.stat(w.summary_path).st_mode & 0o777 == 0o400


def test_event_writer_hands_full_batches_to_its_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(_writer, "BATCH_RECORDS", 2)
    w = _writer_in(tmp_path)
    for step in range(5):
        w.add(step, 1.0, [("scalar", "x", float(step))])
    w.join()
    assert w.pending_records == 1 and w.files.summary.size > 0
    w.close()
    assert SummaryReader(tmp_path).scalars()["x"][0].tolist() == [0, 1, 2, 3, 4]


def test_event_writer_keeps_or_logs_errors(tmp_path, caplog):
    w = _writer_in(tmp_path / "a", max_file_size=120, raise_exception=True)
    os.makedirs(tmp_path / "a", exist_ok=True)
    w.add(1, 1.0, [("tensor", "big", (np.arange(100.0), False))])
    w.add(2, 1.0, [("scalar", "x", 1.0)])
    with pytest.raises(OSError, match="max_file_size"):
        w.flush()
    assert not w.has_errors  # raised once, then forgotten
    w.close()
    assert SummaryReader(tmp_path / "a").scalars()["x"][1].tolist() == [1.0]  # only the failed record is lost

    os.makedirs(tmp_path / "b")
    w = EventWriter(str(tmp_path / "b"), "events", "_MS", 120)
    with caplog.at_level(logging.ERROR, logger="collector.summary._writer"):
        w.add(1, 1.0, [("tensor", "big", (np.arange(100.0), False))])
        w.close()
    assert not w.has_errors and "max_file_size" in caplog.text


def test_event_writer_wraps_other_errors(tmp_path):
    w = _writer_in(tmp_path, raise_exception=True)
    w.add(1, 1.0, [("scalar", "x", "not a float")])  # fails when packed
    with pytest.raises(RuntimeError, match="SummaryRecord failed while writing: TypeError"):
        w.close()


def test_event_writer_exports_npy(tmp_path):
    w = _writer_in(tmp_path, export_format="npy")
    w.add(3, 1.0, [("tensor", "a/b", (np.arange(4.0), False))])
    w.close()
    folder = tmp_path / f"export_{w.files.seconds}" / "tensor"
    np.testing.assert_array_equal(np.load(folder / "a%2Fb_3.npy"), np.arange(4.0))
    with pytest.raises(ValueError, match="export_format must be 'npy' or None"):
        _writer_in(tmp_path, export_format="csv")
