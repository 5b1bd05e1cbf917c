"""SummaryRecord: round trips for every plugin, files, limits, errors."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from collector import InvalidParameterError, SummaryReader, SummaryRecord, proto, read_events


def _landscape_message():
    ll = proto.LossLandscape()
    ll.landscape.x.dims.append(3)
    ll.landscape.x.data_type = proto.DT_FLOAT64
    ll.landscape.x.float_data.extend([-1.0, 0.0, 1.0])
    ll.landscape.y.CopyFrom(ll.landscape.x)
    ll.landscape.z.dims.extend([3, 3])
    ll.landscape.z.data_type = proto.DT_FLOAT64
    ll.landscape.z.float_data.extend([float(i) for i in range(9)])
    ll.loss_path.intervals.extend([1, 2, 3])
    ll.metadata.decomposition = "PCA"
    ll.metadata.unit = "step"
    ll.metadata.step_per_epoch = 7
    return ll


def test_file_names_lazy_creation_and_read_only(tmp_path):
    rec = SummaryRecord(tmp_path, file_prefix="xx", file_suffix="_yy")
    assert os.listdir(tmp_path) == []  # lazily created
    rec.add_value("scalar", "loss", 0.5)
    rec.record(1)
    rec.flush()
    names = os.listdir(tmp_path)
    assert len(names) == 1
    host = re.escape(socket.gethostname())
    assert re.fullmatch(rf"xx\.out\.events\.summary\.\d+\.{host}_yy", names[0])
    rec.add_value("train_lineage", "t", proto.TrainLineage())
    rec.record(2)
    rec.close()
    names = sorted(os.listdir(tmp_path))
    assert any(n.endswith("_lineage") for n in names) and len(names) == 2
    stamps = {re.search(r"summary\.(\d+)\.", n).group(1) for n in names}
    assert len(stamps) == 1  # one timestamp for the pair, as MindSpore names them
    for n in names:
        assert stat.S_IMODE(os.stat(tmp_path / n).st_mode) == 0o400


def test_first_record_is_version_event(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("scalar", "a", 1.0)
        rec.add_value("eval_lineage", "e", proto.EvaluationLineage(metric='{"acc": 1}'))
        rec.record(3)
    kinds = {}
    for kind, ev in read_events(tmp_path):
        kinds.setdefault(kind, []).append(ev)
    for kind in ("summary", "lineage"):
        first = kinds[kind][0]
        assert first.WhichOneof("what") == "version" and first.version == "MindSpore.Event:1" and first.step == 0
    assert kinds["lineage"][1].evaluation_lineage.metric == '{"acc": 1}'
    assert kinds["lineage"][1].step == 3


def test_round_trip_every_plugin(tmp_path):
    rng = np.random.default_rng(0)
    hist = rng.normal(size=1000).astype(np.float32)
    img = rng.random((2, 3, 4, 5)).astype(np.float32)
    tens = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    graph = proto.GraphProto(name="g")
    graph.node.add(name="1", op_type="MatMul", scope="Default/fc1-Dense")
    train = proto.TrainLineage()
    train.hyper_parameters.optimizer = "SGD"
    train.hyper_parameters.learning_rate = 0.125
    ds = proto.DatasetGraph()
    ds.parameter.mapStr["op_type"] = "Batch"
    ds.parameter.mapInt["batch_size"] = 64
    ll = _landscape_message()
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("scalar", "loss", torch.tensor([2.5]))
        rec.add_value("histogram", "w", torch.from_numpy(hist))
        rec.add_value("image", "img", img)
        rec.add_value("tensor", "t", tens)
        rec.add_value("graph", "graph", graph)
        rec.add_value("train_lineage", "tl", train)
        rec.add_value("eval_lineage", "el", proto.EvaluationLineage(metric="{}"))
        rec.add_value("dataset_graph", "dg", ds)
        rec.add_value("custom_lineage_data", "c", {"name": "run", "n": 3, "lr": 0.5})
        rec.add_value("LANDSCAPE", "landscape_[1, 3]", ll)
        assert rec.record(5) is True
    reader = SummaryReader(tmp_path)
    assert reader.issues == []
    steps, values = reader.scalars()["loss"]
    assert steps.tolist() == [5] and values.tolist() == [2.5]
    h = reader.histograms()["w"][0]
    assert h["total"] == 1000 and h["min"] == pytest.approx(hist.min()) and h["max"] == pytest.approx(hist.max())
    assert h["count"].sum() == 1000 and len(h["count"]) == 90
    (step, decoded), = reader.images()["img"]
    # two 4x5 images side by side; floats in [0, 1] scaled by 255
    assert step == 5 and decoded.shape == (4, 10, 3)
    expected = np.concatenate([img[0], img[1]], axis=2).transpose(1, 2, 0) * 255
    np.testing.assert_array_equal(decoded, np.round(expected).astype(np.uint8))
    (step, t), = reader.tensors()["t"]
    np.testing.assert_array_equal(t, tens.numpy())
    assert t.dtype == np.int64
    (gstep, g), = reader.graphs()
    assert g.name == "g" and g.node[0].scope == "Default/fc1-Dense"
    lineage = {ev.WhichOneof("what"): ev for ev in reader.lineage()}
    assert lineage["train_lineage"].train_lineage.hyper_parameters.learning_rate == pytest.approx(0.125)
    assert lineage["dataset_graph"].dataset_graph.parameter.mapInt["batch_size"] == 64
    # one user_info entry per item, as MindSpore packs it (MindInsight reads only those)
    entries = lineage["user_defined_info"].user_defined_info.user_info
    assert [dict(e.map_str) for e in entries if e.map_str] == [{"name": "run"}]
    assert [dict(e.map_int32) for e in entries if e.map_int32] == [{"n": 3}]
    assert [dict(e.map_double) for e in entries if e.map_double] == [{"lr": 0.5}]
    (lstep, tag, msg), = reader.landscape_messages()
    assert (lstep, tag) == (5, "landscape_[1, 3]") and msg == ll
    assert reader.landscapes()["landscape_[1, 3]"]["z"].tolist() == np.arange(9.0).reshape(3, 3).tolist()


def test_values_are_copied_at_add_time(tmp_path):
    t = torch.zeros(4)
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("tensor", "t", t)
        t += 1  # an optimizer step changing the tensor before the writer thread runs
        rec.record(1)
    (_, arr), = SummaryReader(tmp_path).tensors()["t"]
    assert arr.tolist() == [0, 0, 0, 0]


def test_one_event_per_record_and_plugin_filter(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        for step in range(1, 4):
            rec.add_value("scalar", "a", float(step))
            rec.add_value("histogram", "h", np.arange(10.0))
            rec.record(step, plugin_filter=lambda p: p != "histogram")
    reader = SummaryReader(tmp_path)
    assert "histogram" not in reader.tags()
    assert [e.step for e in reader.events[1:]] == [1, 2, 3]


def test_second_open_record_is_refused(tmp_path):
    with SummaryRecord(tmp_path / "a"):
        with pytest.raises(RuntimeError, match="Only one may be open"):
            SummaryRecord(tmp_path / "b")
    with SummaryRecord(tmp_path / "b"):  # fine once the first is closed
        pass


def test_same_second_records_do_not_clobber(tmp_path):
    for i in range(3):
        with SummaryRecord(tmp_path) as rec:
            rec.add_value("scalar", "x", float(i))
            rec.record(i)
    assert len(os.listdir(tmp_path)) == 3
    assert SummaryReader(tmp_path).scalars()["x"][1].tolist() == [0.0, 1.0, 2.0]


def test_max_file_size_never_tears_and_logs(tmp_path, caplog):
    with SummaryRecord(tmp_path, max_file_size=400) as rec:
        for step in range(50):
            rec.add_value("scalar", "loss", float(step))
            rec.record(step)
    path = tmp_path / os.listdir(tmp_path)[0]
    assert os.path.getsize(path) <= 400
    reader = SummaryReader(tmp_path)
    assert reader.issues == []  # whole records only
    steps = reader.scalars()["loss"][0]
    assert 0 < len(steps) < 50 and steps.tolist() == list(range(len(steps)))
    assert "max_file_size" in caplog.text


def test_max_file_size_raises_when_asked(tmp_path):
    rec = SummaryRecord(tmp_path, max_file_size=100, raise_exception=True)
    rec.add_value("histogram", "h", np.arange(1000.0))
    rec.record(1)
    with pytest.raises(OSError, match="max_file_size"):
        rec.flush()
    rec.close()


def test_export_npy_quotes_tags(tmp_path):
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    with SummaryRecord(tmp_path, export_options={"tensor_format": "npy"}) as rec:
        rec.add_value("tensor", "../../evil/name", arr)
        rec.record(7)
    exports = [d for d in os.listdir(tmp_path) if d.startswith("export_")]
    assert len(exports) == 1 and re.fullmatch(r"export_\d+", exports[0])
    folder = tmp_path / exports[0] / "tensor"
    assert os.listdir(folder) == ["..%2F..%2Fevil%2Fname_7.npy"]
    np.testing.assert_array_equal(np.load(folder / "..%2F..%2Fevil%2Fname_7.npy"), arr)
    assert not (tmp_path.parent / "evil").exists()


def test_set_mode_and_record_after_close(tmp_path, caplog):
    rec = SummaryRecord(tmp_path)
    rec.set_mode("eval")
    assert rec.mode == "eval"
    rec.close()
    assert rec.record(1) is False
    assert "after close" in caplog.text


def test_process_exits_without_close(tmp_path):
    script = textwrap.dedent(
        f"""
        from collector import SummaryRecord
        rec = SummaryRecord({str(tmp_path)!r})
        rec.add_value("scalar", "loss", 1.5)
        rec.record(1)
        # no close(): the process must still exit, with the data written
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert SummaryReader(tmp_path).scalars()["loss"][1].tolist() == [1.5]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"file_prefix": 3}, "'file_prefix' parameter of SummaryRecord must be an instance of 'str'"),
        ({"file_suffix": None}, "'file_suffix' parameter of SummaryRecord must be an instance of 'str'"),
        ({"file_prefix": "a/b"}, "'file_prefix' parameter"),
        ({"max_file_size": -1}, r"'max_file_size' parameter of SummaryRecord must be an int in the range \[0, inf\) or None. Got -1"),
        ({"max_file_size": 1.5}, "'max_file_size'"),
        ({"max_file_size": True}, "'max_file_size'"),
        ({"raise_exception": 1}, "'raise_exception' parameter of SummaryRecord must be a bool"),
        ({"export_options": {"tensor_format": "csv"}}, r"'export_options\['tensor_format'\]' parameter .* one of 'npy' or None"),
        ({"export_options": {"format": "npy"}}, "'export_options key' parameter .* one of 'tensor_format'. Got 'format'"),
        ({"export_options": "npy"}, "'export_options'"),
        ({"network": "net"}, "'network' parameter of SummaryRecord must be a torch.nn.Module"),
    ],
)
def test_bad_constructor_arguments(tmp_path, kwargs, match):
    target = tmp_path / "never"
    with pytest.raises(InvalidParameterError, match=match):
        SummaryRecord(target, **kwargs)
    assert not target.exists()  # refused before anything was created


@pytest.mark.parametrize(
    "plugin, name, value, exc, match",
    [
        ("scalars", "a", 1.0, InvalidParameterError, "'plugin' parameter of SummaryRecord.add_value must be one of 'scalar'"),
        ("scalar", "", 1.0, InvalidParameterError, "'name' parameter .* must be a non-empty str"),
        ("scalar", 3, 1.0, InvalidParameterError, "'name' parameter"),
        ("scalar", "a", "1.0", TypeError, "must be a torch.Tensor, a numpy.ndarray or a Python number. Got str"),
        ("scalar", "a", torch.zeros(0), ValueError, "empty"),
        ("histogram", "a", [1, 2], TypeError, "Got list"),
        ("image", "a", torch.zeros(3, 8, 8), ValueError, "4-D NCHW"),
        ("image", "a", torch.zeros(1, 2, 8, 8), ValueError, "1 or 3 channels"),
        ("tensor", "a", {"x": 1}, TypeError, "Got dict"),
        ("graph", "a", "graph", TypeError, "collector.proto.GraphProto"),
        ("train_lineage", "a", proto.EvaluationLineage(), TypeError, "collector.proto.TrainLineage"),
        ("eval_lineage", "a", {}, TypeError, "collector.proto.EvaluationLineage"),
        ("dataset_graph", "a", None, TypeError, "collector.proto.DatasetGraph"),
        ("custom_lineage_data", "a", {"k": [1]}, InvalidParameterError, r"custom_lineage_data\['k'\]"),
        ("landscape", "a", np.zeros(3), TypeError, "collector.proto.LossLandscape"),
    ],
)
def test_bad_add_value(tmp_path, plugin, name, value, exc, match):
    with SummaryRecord(tmp_path) as rec:
        with pytest.raises(exc, match=match):
            rec.add_value(plugin, name, value)


@pytest.mark.parametrize("step", [1.0, "1", None, True])
def test_bad_step(tmp_path, step):
    with SummaryRecord(tmp_path) as rec:
        with pytest.raises(InvalidParameterError, match="'step' parameter of SummaryRecord.record must be an int"):
            rec.record(step)


def test_bad_mode_and_train_network(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        with pytest.raises(InvalidParameterError, match="'mode' parameter .* one of 'train', 'eval'. Got 'test'"):
            rec.set_mode("test")
        with pytest.raises(InvalidParameterError, match="'train_network'"):
            rec.record(1, train_network=object())
        with pytest.raises(InvalidParameterError, match="'plugin_filter'"):
            rec.record(1, plugin_filter="scalar")


# ----------------------------------------------------------------- batched writing
def _payloads(path):
    from collector.summary._framing import iter_records

    return [payload for _, payload in iter_records(path)]


def test_event_bytes_are_protobufs_own_serialization(tmp_path):
    """Events assembled from per-value bytes equal protobuf's serialization of the whole Event."""
    rng = np.random.default_rng(1)
    with SummaryRecord(tmp_path) as rec:
        for step in (0, 1, 2**40, -3):
            rec.add_value("scalar", "loss", float(step) / 7)
            rec.add_value("histogram", "w", torch.from_numpy(rng.normal(size=(33, 7)).astype(np.float32)))
            rec.add_value("histogram", "b", rng.integers(0, 5, size=40))
            rec.add_value("tensor", "t", np.arange(6.0).reshape(2, 3))
            rec.add_value("image", "i", rng.random((1, 1, 3, 3)))
            rec.add_value("landscape", "l", _landscape_message())
            rec.record(step)
        summary_file = rec.summary_file
    payloads = _payloads(summary_file)[1:]
    assert len(payloads) == 4
    for payload in payloads:
        event = proto.Event.FromString(payload)
        assert [v.tag for v in event.summary.value] == ["loss", "w", "b", "t", "i", "l"]
        assert event.SerializeToString() == payload


def test_records_wait_in_a_batch_until_flush_with_their_own_wall_time(tmp_path):
    import time

    rec = SummaryRecord(tmp_path)
    times = []
    for step in range(1, 4):
        before = time.time()
        rec.add_value("scalar", "x", float(step))
        rec.record(step)
        times.append((before, time.time()))
        time.sleep(0.01)
    assert not os.path.exists(rec.summary_file)  # nothing written yet: one batch at flush
    rec.flush()
    events = read_events(tmp_path)
    summary = [ev for kind, ev in events if kind == "summary" and ev.HasField("summary")]
    assert [ev.step for ev in summary] == [1, 2, 3]
    for ev, (before, after) in zip(summary, times):
        assert before <= ev.wall_time <= after  # recorded at record(), not at the later write
    rec.close()


def test_full_batch_goes_to_the_writer_thread(tmp_path, monkeypatch):
    from collector.summary import _writer
    monkeypatch.setattr(_writer, "BATCH_RECORDS", 3)
    rec = SummaryRecord(tmp_path)
    for step in range(1, 5):
        rec.add_value("histogram", "h", torch.arange(10.0) * step)
        rec.record(step)
    rec._writer.join()  # the first three were handed over; the fourth waits
    assert rec._writer.files.summary.size > 0 and rec._writer.pending_records == 1
    rec.close()
    hist = SummaryReader(tmp_path).histograms()["h"]
    assert [h["step"] for h in hist] == [1, 2, 3, 4]
    for h in hist:
        assert h["max"] == 9.0 * h["step"] and h["count"].sum() == 10


def test_old_batch_is_written_by_the_idle_writer_thread(tmp_path, monkeypatch):
    import time

    from collector.summary import _writer
    monkeypatch.setattr(_writer, "BATCH_RECORDS", 1)
    monkeypatch.setattr(_writer, "BATCH_SECONDS", 0.05)
    rec = SummaryRecord(tmp_path)
    rec.add_value("scalar", "x", 1.0)
    rec.record(1)  # a full batch: starts the writer thread
    monkeypatch.setattr(_writer, "BATCH_RECORDS", 100)
    rec.add_value("scalar", "x", 2.0)
    rec.record(2)  # waits in the batch ...
    deadline = time.monotonic() + 10
    while rec._writer.pending_records and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not rec._writer.pending_records  # ... until the idle thread wrote it, without flush or another record
    rec.close()
    assert SummaryReader(tmp_path).scalars()["x"][1].tolist() == [1.0, 2.0]


def test_histogram_snapshots_are_private_and_exact(tmp_path):
    """Snapshots share slabs and are sorted in place when written: values must not leak between steps."""
    rng = np.random.default_rng(2)
    weight = torch.from_numpy(rng.normal(size=(40, 30)).astype(np.float32))
    bias = torch.zeros(30)
    snapshots = []
    with SummaryRecord(tmp_path) as rec:
        for step in range(1, 8):
            rec.add_value("histogram", "w", weight)
            rec.add_value("histogram", "b", bias)
            snapshots.append((weight.clone().numpy(), bias.clone().numpy()))
            weight.mul_(1.5).add_(0.25)  # an optimizer step after the collection
            bias.add_(torch.from_numpy(rng.normal(size=30).astype(np.float32)))
            rec.record(step)
        assert len(rec._slabs) == 2  # one slab per (dtype, size), shared by the steps
    hists = SummaryReader(tmp_path).histograms()
    for tag, index in (("w", 0), ("b", 1)):
        for h, snap in zip(hists[tag], snapshots):
            values = snap[index].reshape(-1)
            lo, hi = values.min(), values.max()
            first, last = (lo, hi) if lo < hi else (lo - 0.5, hi + 0.5)
            bins = values.size // 10 + 1 if values.size <= 880 else 90  # MindSpore's rule
            edges = np.linspace(first, last, bins + 1, dtype=np.float32)
            np.testing.assert_array_equal(h["count"], np.histogram(values, bins=edges)[0])
            np.testing.assert_array_equal(h["left"], edges[:-1].astype(np.float64))
            assert (h["min"], h["max"]) == (float(lo), float(hi))
            assert h["sum"] == pytest.approx(values.astype(np.float64).sum(), rel=1e-9, abs=1e-9)


def test_errors_of_a_batch_stay_with_their_records(tmp_path, caplog):
    with SummaryRecord(tmp_path, max_file_size=600) as rec:
        for step in range(20):
            rec.add_value("scalar", "loss", float(step))
            if step == 3:
                rec.add_value("histogram", "big", np.arange(5000.0))  # too large: this record only
            rec.record(step)
    steps = SummaryReader(tmp_path).scalars()["loss"][0].tolist()
    assert steps[:3] == [0, 1, 2] and 3 not in steps and 4 in steps
    assert "max_file_size" in caplog.text


# ------------------------------------------------- what the operators and SummaryCollector use
def test_add_histograms_writes_what_add_value_writes(tmp_path):
    rng = np.random.default_rng(3)
    w = torch.from_numpy(rng.normal(size=(30, 40)).astype(np.float32))
    items = [("w", w), ("h16", torch.randn(50).half()), ("i", torch.arange(12)), ("empty", torch.zeros(0)),
             ("d", torch.from_numpy(rng.normal(size=17)))]
    with SummaryRecord(tmp_path / "a") as rec:
        for step in (1, 2):
            rec.add_histograms(items)
            rec.record(step)
    with SummaryRecord(tmp_path / "b") as rec:
        for step in (1, 2):
            for tag, value in items:
                rec.add_value("histogram", tag, value)
            rec.record(step)
    a, b = SummaryReader(tmp_path / "a").histograms(), SummaryReader(tmp_path / "b").histograms()
    assert set(a) == {"w", "h16", "i", "empty", "d"} and a.keys() == b.keys()
    for tag in a:
        for ha, hb in zip(a[tag], b[tag]):
            assert ha.keys() == hb.keys()
            for key in ha:
                np.testing.assert_array_equal(ha[key], hb[key])


def test_add_histograms_copies_at_the_call(tmp_path):
    w = torch.arange(20.0)
    with SummaryRecord(tmp_path) as rec:
        rec.add_histograms([("w", w)])
        w.mul_(100)  # an optimizer step before the record
        rec.record(1)
    assert SummaryReader(tmp_path).histograms()["w"][0]["max"] == 19.0


@pytest.mark.parametrize("items, exc, match", [
    ([("", torch.ones(3))], InvalidParameterError, "'name' parameter of SummaryRecord.add_value"),
    ([(3, torch.ones(3))], InvalidParameterError, "'name' parameter"),
    ([("x", [1.0, 2.0])], TypeError, "Got list"),
])
def test_add_histograms_refuses_what_add_value_refuses(tmp_path, items, exc, match):
    with SummaryRecord(tmp_path) as rec, pytest.raises(exc, match=match):
        rec.add_histograms(items)


def test_buffer_operator_value_reports_a_name_buffered_twice(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        assert not rec.has_operator_values
        assert rec.buffer_operator_value("scalar", "loss", 1.0) is False
        assert rec.has_operator_values
        assert rec.buffer_operator_value("scalar", "loss", torch.tensor(2.0)) is True
        assert rec.buffer_operator_value("histogram", "loss", torch.arange(4.0)) is False  # another plugin
        rec.record(1)
        assert not rec.has_operator_values
        assert rec.buffer_operator_value("scalar", "loss", 3.0) is False  # a new step
        rec.record(2)
    reader = SummaryReader(tmp_path)
    assert reader.scalars()["loss"][1].tolist() == [2.0, 3.0]
    assert [h["step"] for h in reader.histograms()["loss"]] == [1]


@pytest.mark.parametrize("plugin, name, value, exc, match", [
    ("graph", "g", proto.GraphProto(), InvalidParameterError,
     ("'plugin' parameter of SummaryRecord.buffer_operator_value must be one of 'scalar', 'image', 'tensor', "
      "'histogram'")),
    ("scalar", "", 1.0, InvalidParameterError, "'name' parameter of SummaryRecord.buffer_operator_value"),
    ("scalar", None, 1.0, InvalidParameterError, "'name' parameter"),
    ("scalar", "a", "1.0", TypeError, "Got str"),
    ("image", "a", torch.zeros(3, 8, 8), ValueError, "4-D NCHW"),
])
def test_buffer_operator_value_refuses_wrong_input(tmp_path, plugin, name, value, exc, match):
    with SummaryRecord(tmp_path) as rec:
        with pytest.raises(exc, match=match):
            rec.buffer_operator_value(plugin, name, value)
        assert not rec.has_operator_values


def test_operator_values_are_recorded_in_train_mode_only_and_can_be_discarded(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        rec.buffer_operator_value("scalar", "x", 1.0)
        rec.discard_operator_values()
        assert not rec.has_operator_values
        rec.buffer_operator_value("scalar", "x", 2.0)
        rec.record(1)
        rec.set_mode("eval")
        rec.buffer_operator_value("scalar", "x", 3.0)  # taken, but an eval record drops it
        rec.record(2)
        rec.set_mode("train")
        rec.add_value("scalar", "x", 4.0)
        rec.buffer_operator_value("scalar", "x", 5.0)  # the operator's value wins over add_value's
        rec.record(3)
    assert SummaryReader(tmp_path).scalars()["x"][1].tolist() == [2.0, 5.0]


def test_closed_graph_written_and_the_open_record(tmp_path):
    from collector.summary import _record

    assert _record.open_record() is None and _record.open_record_ref is None
    rec = SummaryRecord(tmp_path, network=torch.nn.Linear(2, 1))
    assert _record.open_record() is rec and _record.open_record_ref() is rec
    assert not rec.closed and not rec.graph_written
    assert _record.operator_record() is rec
    rec.set_mode("eval")
    assert _record.operator_record() is None and _record.open_record() is rec  # open, but takes no operator values
    rec.set_mode("train")
    rec.record(1)
    assert rec.graph_written
    rec.close()
    assert rec.closed
    assert _record.open_record() is None and _record.open_record_ref is None  # the operators' no-record path
    assert _record.operator_record() is None
    rec.close()  # a second close does nothing
    with SummaryRecord(tmp_path / "b") as other:
        assert _record.open_record() is other
        rec.close()  # closing an old record leaves the open one alone
        assert _record.open_record() is other


def test_an_unclosed_record_is_collected_and_closed(tmp_path):
    import gc

    from collector.summary import _record

    rec = SummaryRecord(tmp_path)
    rec.add_value("scalar", "x", 1.0)
    rec.record(1)
    del rec
    gc.collect()
    assert _record.open_record() is None
    assert SummaryReader(tmp_path).scalars()["x"][1].tolist() == [1.0]
    with SummaryRecord(tmp_path / "b"):  # the finalizer let go of the one-open rule
        pass
