"""The reader and damaged content inside well-framed records (CRCs right): nothing raises from the reader or
its accessors, every damaged record or value is reported with its file (and tag and step), and strict mode
raises our error. The property test mutates the payload of one record of every plugin and frames it again.

Run more examples locally with ``READER_DAMAGE_EXAMPLES=5000 python -m pytest tests/collector/summary/test_reader_damage.py``.
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
import struct
from collections import Counter

import google_crc32c
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from collector import CorruptRecordError, SummaryReader, SummaryReadError, SummaryRecord, proto, read_events
from landscape import Landscape
from landscape.result import LossPath
from tests.collector.summary._wire import records as _records
from tests.collector.summary._wire import varint as _varint

EXAMPLES = int(os.environ.get("READER_DAMAGE_EXAMPLES", "300"))


# -- independent framing (TFRecord with masked CRC32C), written here from the format's definition -----------
def _masked(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _frame(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", _masked(header)) + payload + struct.pack("<I", _masked(payload))


def _payloads(path) -> list[bytes]:
    return list(_records(open(path, "rb").read()))


SUMMARY = "events.out.events.summary.1.host_MS"
LINEAGE = "events.out.events.summary.1.host_lineage"


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(4, 5), torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, tuple[str, bytes, bytes]]:
    """Plugin -> (file name, version record's payload, the plugin's record's payload), written by SummaryRecord."""
    folder = tmp_path_factory.mktemp("originals")
    rng = np.random.default_rng(0)
    ds = proto.DatasetGraph()
    ds.parameter.mapStr["op_type"] = "Batch"
    ds.parameter.mapInt["batch_size"] = 64
    ls = Landscape(x=np.linspace(-1, 1, 4), y=np.linspace(-1, 1, 3), z=rng.random((3, 4)),
                   path=LossPath(np.array([0.1, 0.0]), np.array([0.2, 0.0]), np.array([1.5, 1.0]), [1, 2]),
                   convergence_point=(0.0, 0.0, 1.0), metadata={"decomposition": "PCA", "unit": "step"})
    with SummaryRecord(folder, network=Net()) as rec:
        rec.add_value("scalar", "loss", 2.5)
        rec.record(1, train_network=Net())  # the graph event too
        rec.add_value("image", "img", rng.random((2, 3, 4, 5)).astype(np.float32))
        rec.record(2)
        rec.add_value("tensor", "t", torch.arange(12, dtype=torch.int64).reshape(3, 4))
        rec.record(3)
        rec.add_value("histogram", "w", rng.normal(size=200).astype(np.float32))
        rec.record(4)
        rec.add_value("landscape", "landscape_[1, 2]", ls)
        rec.record(5)
        train = proto.TrainLineage()
        train.hyper_parameters.optimizer = "SGD"
        train.algorithm.network = "Net"
        rec.add_value("train_lineage", "train_lineage", train)
        rec.add_value("eval_lineage", "eval_lineage", proto.EvaluationLineage(metric='{"acc": 0.5}'))
        rec.add_value("dataset_graph", "dataset_graph", ds)
        rec.add_value("custom_lineage_data", "custom", {"note": "digits", "seed": 3})
        rec.record(6)
        summary, lineage = rec.summary_file, rec.lineage_file
    out = {}
    s, ln = _payloads(summary), _payloads(lineage)
    for payload in s[1:]:
        ev = proto.Event.FromString(payload)
        kind = ev.WhichOneof("what") if ev.WhichOneof("what") != "summary" else ev.summary.value[0].WhichOneof("value")
        out[kind] = (SUMMARY, s[0], payload)
    for payload in ln[1:]:
        out[proto.LineageEvent.FromString(payload).WhichOneof("what")] = (LINEAGE, ln[0], payload)
    return out


PLUGINS = ["scalar_value", "image", "tensor", "histogram", "graph_def", "loss_landscape", "train_lineage",
           "evaluation_lineage", "dataset_graph", "user_defined_info"]


def test_every_plugin_has_an_original(originals):
    assert sorted(originals) == sorted(PLUGINS)


# -- the oracle: what makes content unusable, computed here without the reader ---------------------------
def _strings_are_utf8(descriptor, data: bytes) -> bool:
    """Walk the wire bytes (protobuf's re-serialisation of a parsed message): every string field decodes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
            continue
        if wire in (1, 5):
            i += 8 if wire == 1 else 4
            continue
        n, i = _varint(data, i)
        chunk, i = data[i:i + n], i + n
        fd = descriptor.fields_by_number.get(number)
        if fd is None:
            continue
        if fd.type == fd.TYPE_STRING:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                return False
        elif fd.message_type is not None and not _strings_are_utf8(fd.message_type, chunk):
            return False
    return True


def _declared_fields(descriptor, data: bytes, path: tuple = ()) -> Counter:
    """Every field of a declared number on the wire, by its path of field numbers."""
    out: Counter = Counter()
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        chunk = b""
        if wire == 0:
            _, i = _varint(data, i)
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            n, i = _varint(data, i)
            chunk, i = data[i:i + n], i + n
        fd = descriptor.fields_by_number.get(number)
        if fd is None:
            continue
        out[path + (number,)] += 1
        if fd.message_type is not None and wire == 2:
            out += _declared_fields(fd.message_type, chunk, path + (number,))
    return out


def _lost(message) -> bool:
    """Whether protobuf kept a field of a declared number among the unknown fields (its content is lost):
    the declared fields on the wire differ with and without the unknown fields."""
    clean = type(message)()
    clean.CopyFrom(message)
    clean.DiscardUnknownFields()
    d = message.DESCRIPTOR
    return _declared_fields(d, message.SerializeToString()) != _declared_fields(d, clean.SerializeToString())


_ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 2, 8: 4, 9: 8, 10: 2, 11: 4, 12: 8}


def _tensor_ok(t, allow_absent: bool = True) -> tuple[bool, int]:
    """Whether a TensorProto's values fill its dims; and its value count."""
    count = None
    for field in ("float_data", "double_data", "int32_data", "int64_data", "uint64_data"):
        if len(getattr(t, field)):
            count = len(getattr(t, field))
            break
    if count is None:
        size = _ITEMSIZE.get(t.data_type, 4)
        if len(t.raw_data) % size:
            return False, 0
        count = len(t.raw_data) // size
    dims = list(t.dims)
    if not dims and count == 0 and allow_absent:
        return True, 0
    return all(d >= 0 for d in dims) and math.prod(dims) == count, count


def _png_ok(image) -> bool:
    try:
        with Image.open(io.BytesIO(image.encoded_image)) as im:
            im.load()
            return im.format == "PNG" and im.size == (image.width, image.height)
    except Exception:
        return False


def _histogram_ok(h) -> bool:
    counts = [b.count for b in h.buckets]
    if any(c < 0 for c in counts + [h.nan_count, h.pos_inf_count, h.neg_inf_count, h.count]):
        return False
    if not all(np.isfinite([b.left, b.width]).all() and b.width >= 0 for b in h.buckets):
        return False
    return not h.HasField("count") or sum(counts) + h.nan_count + h.pos_inf_count + h.neg_inf_count == h.count


def _landscape_ok(ll) -> bool:
    (okx, nx), (oky, ny), (okz, nz) = (_tensor_ok(getattr(ll.landscape, a)) for a in "xyz")
    if not (okx and oky and okz) or nz != nx * ny:
        return False
    n = len(ll.loss_path.intervals)
    if n and ll.loss_path.HasField("points"):
        if not all(_tensor_ok(getattr(ll.loss_path.points, a)) == (True, n) for a in "xyz"):
            return False
    return all(_tensor_ok(getattr(ll.convergence_point, a))[0] for a in "xyz")


def _value_ok(v) -> bool:
    if not _strings_are_utf8(proto.Summary.Value.DESCRIPTOR, v.SerializeToString()) or _lost(v):
        return False
    kind = v.WhichOneof("value")
    return {"image": lambda: _png_ok(v.image), "tensor": lambda: _tensor_ok(v.tensor)[0],
            "histogram": lambda: _histogram_ok(v.histogram),
            "loss_landscape": lambda: _landscape_ok(v.loss_landscape)}.get(kind, lambda: True)()


def _expected(cls, payload: bytes):
    """None when the record itself is unusable, else the parsed event and the indices of its damaged values."""
    try:
        ev = cls.FromString(payload)
    except Exception:
        return None
    if not ev.IsInitialized():
        return None
    if cls is proto.Event and ev.WhichOneof("what") == "summary":
        rest = proto.Event()
        rest.CopyFrom(ev)
        del rest.summary.value[:]
        if _lost(rest):
            return None
        return ev, [j for j, v in enumerate(ev.summary.value) if not _value_ok(v)]
    if not _strings_are_utf8(cls.DESCRIPTOR, ev.SerializeToString()) or _lost(ev):
        return None
    return ev, []


def _mutate(payload: bytes, ops) -> bytes:
    b = bytearray(payload)
    for op in ops:
        pos = op[1] % (len(b) + 1)
        if op[0] == "xor" and b:
            b[pos % len(b)] ^= op[2]
        elif op[0] == "set" and b:
            b[pos % len(b)] = op[2]
        elif op[0] == "cut":
            del b[pos:]
        elif op[0] == "insert":
            b[pos:pos] = op[2]
        elif op[0] == "delete":
            del b[pos:pos + op[2]]
    return bytes(b)


def _ops(n: int):
    """1 to 4 edits anywhere in a payload of ``n`` bytes: byte changes, a cut, an insertion, a deletion."""
    pos = st.integers(0, n)
    byte = st.one_of(st.tuples(st.just("xor"), pos, st.integers(1, 255)),
                     st.tuples(st.just("set"), pos, st.integers(0, 255)))
    # Half the examples change one or two bytes in place: those mostly leave the message parseable and
    # reach the checks of its content; the others also cut, insert and delete.
    return st.one_of(st.lists(byte, min_size=1, max_size=2), st.lists(st.one_of(
        byte,
        st.tuples(st.just("cut"), pos),
        st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), pos, st.integers(1, 16)),
    ), min_size=1, max_size=4))


def _sentinel(file_name: str) -> bytes:
    """An intact record after the damaged one: reading must go on past the damage."""
    if file_name == LINEAGE:
        return proto.LineageEvent(wall_time=2.0, step=99, evaluation_lineage=proto.EvaluationLineage(
            metric="sentinel")).SerializeToString()
    ev = proto.Event(wall_time=2.0, step=99)
    ev.summary.value.add(tag="sentinel", scalar_value=7.0)
    return ev.SerializeToString()


def _check_reader(folder, file_name: str, version: bytes, mutated: bytes) -> tuple[SummaryReader, object]:
    cls = proto.LineageEvent if file_name == LINEAGE else proto.Event
    expected = _expected(cls, mutated)
    reader = SummaryReader(folder)  # never raises for damage
    # every accessor works on what the reader kept
    reader.tags(), reader.scalars(), reader.histograms(), reader.images(), reader.tensors()
    reader.landscapes(), reader.landscape_messages(), reader.graphs(), reader.lineage()
    for ev in reader.events + reader.lineage_events:
        ev.SerializeToString()  # only complete events (a missing required field would raise EncodeError)
    path = str(folder / file_name)
    offset = len(_frame(version))
    last = (reader.lineage_events if file_name == LINEAGE else reader.events)[-1]
    assert last.SerializeToString() == _sentinel(file_name)  # read on past the damage
    if expected is None:
        assert [(i.path, i.offset, i.tag) for i in reader.issues] == [(path, offset, None)]
        assert len(reader.events) + len(reader.lineage_events) == 2  # the version record and the sentinel
    else:
        ev, bad = expected
        values = ev.summary.value if bad else []
        tags = [v.tag if isinstance(v.tag, str) else bytes(v.tag).decode("utf-8", "replace") for v in values]
        assert [(i.path, i.offset, i.tag, i.step) for i in reader.issues] == [
            (path, offset, tags[j], ev.step) for j in bad]
        assert len(reader.events) + len(reader.lineage_events) == 3
    return reader, expected


@pytest.mark.parametrize("plugin", PLUGINS)
def test_mutated_payloads_never_raise_and_each_damage_is_reported(originals, tmp_path_factory, plugin):
    file_name, version, original = originals[plugin]
    folder = tmp_path_factory.mktemp(f"mutated_{plugin}")
    seen = {"record": 0, "value": 0, "intact": 0}

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(ops=_ops(len(original)))
    def check(ops):
        mutated = _mutate(original, ops)
        (folder / file_name).write_bytes(_frame(version) + _frame(mutated) + _frame(_sentinel(file_name)))
        _, expected = _check_reader(folder, file_name, version, mutated)
        seen["record" if expected is None else "value" if expected[1] else "intact"] += 1

    logging.disable(logging.WARNING)  # thousands of "skipped damaged data" lines
    try:
        check()
    finally:
        logging.disable(logging.NOTSET)
    assert seen["record"] > 0, seen  # the mutations do reach damage the reader must report
    if plugin in ("image", "tensor", "histogram", "loss_landscape"):
        assert seen["value"] > 0, seen


# -- each kind of damage, with its message ------------------------------------------------------------------
def _write(folder, *payloads, name=SUMMARY) -> str:
    version = proto.Event(wall_time=1.0, version="MindSpore.Event:1").SerializeToString()
    path = folder / name
    path.write_bytes(b"".join(_frame(p) for p in (version, *payloads)))
    return str(path)


def _event(step: int, **value) -> bytes:
    ev = proto.Event(wall_time=1.0, step=step)
    ev.summary.value.add(**value)
    return ev.SerializeToString()


def _png(h: int = 3, w: int = 4) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def test_event_missing_required_fields_is_skipped(tmp_path):
    path = _write(tmp_path, b"", _event(3, tag="ok", scalar_value=1.0))
    reader = SummaryReader(tmp_path)
    assert [str(i) for i in reader.issues] == [
        f"{path}: at byte {len(_frame(proto.Event(wall_time=1.0, version='MindSpore.Event:1').SerializeToString()))}: "
        "Event lacks required field(s) ['wall_time']"]
    assert [e.SerializeToString() for e in reader.events]  # all re-serialise
    assert reader.scalars()["ok"][1].tolist() == [1.0]
    with pytest.raises(CorruptRecordError, match="lacks required field"):
        SummaryReader(tmp_path, strict=True)


@pytest.mark.parametrize("value, accessor, words", [
    (dict(tag="img", image=proto.Summary.Image(height=3, width=4, colorspace=3,
                                               encoded_image=_png()[:40] + b"\0" * 30 + _png()[70:])),
     "images", "damaged image: its PNG does not decode"),
    (dict(tag="img", image=proto.Summary.Image(height=5, width=4, colorspace=3, encoded_image=_png())),
     "images", "damaged image: its PNG is 4x3 pixels; the record says 4x5"),
    (dict(tag="img", image=proto.Summary.Image(height=3, width=4, colorspace=3, encoded_image=b"GIF89a...")),
     "images", "damaged image: its image is not a PNG"),
    (dict(tag="t", tensor=proto.TensorProto(dims=[2, 3], data_type=proto.DT_FLOAT32, float_data=[1.0] * 5)),
     "tensors", r"damaged tensor: its tensor holds 5 values; its dims \[2, 3\] need 6"),
    (dict(tag="t", tensor=proto.TensorProto(dims=[3], data_type=proto.DT_FLOAT32, raw_data=b"\0" * 11)),
     "tensors", "damaged tensor: its tensor bytes cannot be read"),
    (dict(tag="h", histogram=proto.Summary.Histogram(
        buckets=[proto.Summary.Histogram.bucket(left=0.0, width=1.0, count=4)], count=5)),
     "histograms", "its histogram's buckets and NaN/inf counts add up to 4 values; its count is 5"),
    (dict(tag="h", histogram=proto.Summary.Histogram(
        buckets=[proto.Summary.Histogram.bucket(left=0.0, width=-1.0, count=4)], count=4)),
     "histograms", "width is negative"),
    (dict(tag="landscape_[1, 2]", loss_landscape=proto.LossLandscape(landscape=proto.LossLandscape.Point(
        x=proto.TensorProto(dims=[2], float_data=[0, 1]), y=proto.TensorProto(dims=[2], float_data=[0, 1]),
        z=proto.TensorProto(dims=[3], float_data=[1, 2, 3])))),
     "landscapes", r"its landscape's z holds 3 values; x \(2\) by y \(2\) need 4"),
    (dict(tag="line_[2]", loss_landscape=proto.LossLandscape(landscape=proto.LossLandscape.Point(
        x=proto.TensorProto(dims=[3], float_data=[0, 1, 2]), z=proto.TensorProto(dims=[2], float_data=[1, 2])))),
     "landscapes", r"its landscape's z holds 2 values; x \(3\) by y \(0\) need 3"),
])
def test_damaged_value_is_reported_with_file_tag_and_step(tmp_path, value, accessor, words):
    path = _write(tmp_path, _event(7, **value), _event(8, tag="loss", scalar_value=0.5))
    reader = SummaryReader(tmp_path)
    assert getattr(reader, accessor)() == {} and reader.scalars()["loss"][1].tolist() == [0.5]
    (issue,) = reader.issues
    assert (issue.path, issue.tag, issue.step) == (path, value["tag"], 7)
    assert f"tag {value['tag']!r} at step 7: " in str(issue) and path in str(issue)
    assert re.search(words, issue.reason)
    with pytest.raises(CorruptRecordError, match=words):
        SummaryReader(tmp_path, strict=True)


def test_landscape_damage_does_not_reach_viz(tmp_path):
    import viz

    good = Landscape(x=np.arange(2.0), y=np.arange(2.0), z=np.ones((2, 2)), convergence_point=(0, 0, 1)).to_proto()
    bad = proto.LossLandscape()
    bad.CopyFrom(good)
    del bad.landscape.z.float_data[:]
    _write(tmp_path, _event(0, tag="bad", loss_landscape=bad), _event(0, tag="good", loss_landscape=good))
    assert [ls.tag for ls in viz.load_landscapes(tmp_path)] == ["good"]


def test_a_line_is_not_damage(tmp_path):
    """A 1-D landscape (an empty y) holds one z per x (landscape gen --view line / interpolation)."""
    line = Landscape(x=np.linspace(-1, 1, 5), y=np.zeros(0), z=np.arange(5.0), convergence_point=(0, 0, 2)).to_proto()
    _write(tmp_path, _event(0, tag="line_[6]", loss_landscape=line))
    reader = SummaryReader(tmp_path)
    assert reader.issues == [] and list(reader.landscapes()) == ["line_[6]"]


def test_strings_that_are_not_utf8_are_reported(tmp_path):
    ev = proto.Event(wall_time=1.0, step=4)
    ev.summary.value.add(tag="abc", scalar_value=1.0)
    payload = ev.SerializeToString().replace(b"abc", b"\xffbc")
    lin = proto.LineageEvent(wall_time=1.0, step=1)
    lin.dataset_graph.parameter.mapStr["op_type"] = "Batch"
    lineage = lin.SerializeToString().replace(b"op_type", b"\xffp_type")
    _write(tmp_path, payload)
    _write(tmp_path, lineage, name=LINEAGE)
    reader = SummaryReader(tmp_path)
    reasons = sorted(i.reason for i in reader.issues)
    assert reasons[0].startswith("LineageEvent: ") and "UTF-8" in reasons[0] or "decode" in reasons[0]
    assert reasons[1] == "damaged scalar: mindspore.irpb.Summary.Value.tag is not valid UTF-8"
    assert reader.scalars() == {} and reader.lineage() == []


def _unreadable(path) -> None:
    """A summary file that cannot be read, root included: a link to /proc/self/mem (reading it gives EIO)."""
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("needs /proc/self/mem")
    os.symlink("/proc/self/mem", path)


def test_unreadable_file_in_a_directory_is_skipped_and_named(tmp_path):
    _write(tmp_path, _event(1, tag="loss", scalar_value=0.25))
    bad = tmp_path / "events.out.events.summary.2.host_MS"
    _unreadable(bad)
    reader = SummaryReader(tmp_path)
    assert reader.scalars()["loss"][1].tolist() == [0.25]
    (issue,) = reader.issues
    assert issue.path == str(bad) and "cannot be read" in issue.reason
    with pytest.raises(SummaryReadError, match=str(bad)):
        SummaryReader(bad)  # alone, it is the error
    with pytest.raises(SummaryReadError, match=str(bad)):
        SummaryReader(tmp_path, strict=True)
    assert isinstance(SummaryReadError("x"), OSError)


def test_read_events_reports_unreadable_files(tmp_path):
    _write(tmp_path, _event(1, tag="loss", scalar_value=0.25))
    _unreadable(tmp_path / "events.out.events.summary.2.host_MS")
    issues: list = []
    assert [k for k, _ in read_events(tmp_path, issues=issues)] == ["summary", "summary"]
    assert len(issues) == 1


def test_empty_histogram_warns_and_reads_back(tmp_path, caplog):
    with caplog.at_level(logging.WARNING), SummaryRecord(tmp_path) as rec:
        rec.add_value("histogram", "empty", torch.zeros(0, 3))
        rec.add_value("histogram", "all_nan", torch.full((4,), float("nan")))
        rec.record(1)
    text = caplog.text
    assert "add_value('histogram', 'empty'): the value is empty (shape (0, 3))" in text
    assert "histogram 'all_nan': no finite value among its 4 (NaN 4, +inf 0, -inf 0)" in text
    reader = SummaryReader(tmp_path)
    assert reader.issues == []
    hists = reader.histograms()
    assert (hists["empty"][0]["total"], hists["empty"][0]["count"].sum()) == (0, 0)
    assert (hists["all_nan"][0]["total"], hists["all_nan"][0]["nan_count"]) == (4, 4)
