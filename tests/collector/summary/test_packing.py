"""Packing rules (MindSpore 2.10): histograms, images, tensors, scalars."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collector import SummaryReader, SummaryRecord
from collector.summary import _histogram as histogram
from collector.summary import _packing as packing
from collector.summary._packing import histogram_bins


@pytest.mark.parametrize("n, bins", [(0, 1), (1, 2), (5, 2), (6, 3), (10, 3), (11, 2), (128, 13), (880, 89), (881, 90), (10**6, 90)])
def test_histogram_bin_rule(n, bins):
    assert histogram_bins(n) == bins


def _expected_histogram(values: np.ndarray):
    finite = values[np.isfinite(values)]
    n = finite.size
    bins = 1 if n == 0 else 2 if n <= 5 else 3 if n <= 10 else n // 10 + 1 if n <= 880 else 90
    lo, hi = finite.min(), finite.max()
    if not lo < hi:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1, dtype=values.dtype)
    counts, _ = np.histogram(finite, bins=edges)
    return edges, counts


@pytest.mark.parametrize("n", [3, 7, 128, 5000])
def test_histogram_matches_numpy(tmp_path, n):
    values = np.random.default_rng(n).normal(size=n).astype(np.float32)
    values[0] = np.nan
    if n > 3:
        values[1], values[2] = np.inf, -np.inf
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("histogram", "h", torch.from_numpy(values))
        rec.record(1)
    (h,) = SummaryReader(tmp_path).histograms()["h"]
    edges, counts = _expected_histogram(values)
    np.testing.assert_array_equal(h["count"], counts)
    np.testing.assert_array_equal(h["left"], edges[:-1].astype(np.float64))
    np.testing.assert_array_equal(h["width"], np.diff(edges).astype(np.float64))
    finite = values[np.isfinite(values)]
    assert h["total"] == n and h["nan_count"] == 1
    assert (h["pos_inf_count"], h["neg_inf_count"]) == ((1, 1) if n > 3 else (0, 0))
    assert h["min"] == finite.min() and h["max"] == finite.max()
    assert h["sum"] == pytest.approx(finite.astype(np.float64).sum())


def test_histogram_constant_and_all_nan(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("histogram", "const", np.full(4, 2.0))
        rec.add_value("histogram", "nan", np.full(3, np.nan))
        rec.record(1)
    hs = SummaryReader(tmp_path).histograms()
    const = hs["const"][0]
    assert const["left"][0] == 1.5 and const["left"][0] + const["width"].sum() == pytest.approx(2.5)
    assert const["count"].sum() == 4
    nan = hs["nan"][0]
    assert nan["nan_count"] == 3 and len(nan["count"]) == 1 and nan["count"][0] == 0


def test_image_ranges(tmp_path):
    u8 = np.arange(16, dtype=np.uint8).reshape(1, 1, 4, 4)
    wide = np.linspace(-2.0, 6.0, 16).reshape(1, 1, 4, 4)
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("image", "u8", u8)
        rec.add_value("image", "wide", wide)
        rec.add_value("image", "batch", torch.ones(5, 1, 2, 3))
        rec.record(1)
    images = SummaryReader(tmp_path).images()
    np.testing.assert_array_equal(images["u8"][0][1][:, :, 0], u8[0, 0])  # uint8 kept
    expected = np.round((wide[0, 0] + 2.0) * 255.0 / 8.0).astype(np.uint8)  # mapped linearly to [0, 255]
    np.testing.assert_array_equal(images["wide"][0][1][:, :, 0], expected)
    # 5 images tile into 3 columns x 2 rows, empty cells black
    canvas = images["batch"][0][1][:, :, 0]
    assert canvas.shape == (4, 9)
    assert (canvas[:2, :] == 255).all() and (canvas[2:, :6] == 255).all() and (canvas[2:, 6:] == 0).all()


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.float32, torch.float64, torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool]
)
def test_tensor_dtypes_round_trip(tmp_path, dtype):
    t = (torch.arange(6) % 3).to(dtype).reshape(2, 3)
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("tensor", "t", t)
        rec.record(1)
    (_, arr), = SummaryReader(tmp_path).tensors()["t"]
    assert arr.shape == (2, 3)
    np.testing.assert_array_equal(arr, t.numpy())
    assert arr.dtype == t.numpy().dtype


def test_bfloat16_tensor(tmp_path):
    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("tensor", "t", t)
        rec.record(1)
    event = SummaryReader(tmp_path).events[1]
    assert event.summary.value[0].tensor.data_type == 46  # DT_BFLOAT16
    assert list(event.summary.value[0].tensor.float_data) == [1.5, -2.0]


def test_scalar_takes_first_element_with_warning(tmp_path, caplog):
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("scalar", "s", torch.tensor([3.0, 4.0]))
        rec.add_value("scalar", "n", np.float32(1.25))
        rec.add_value("scalar", "i", 7)
        rec.record(1)
    scalars = SummaryReader(tmp_path).scalars()
    assert scalars["s"][1].tolist() == [3.0] and scalars["n"][1].tolist() == [1.25] and scalars["i"][1].tolist() == [7.0]
    assert "recording the first one" in caplog.text


# ----------------------------------------------------------------- direct histogram encoding
def _arrays_for_histograms():
    """Values that take every branch: dtypes, NaN/inf, signed zeros, constants, huge counts."""
    rng = np.random.default_rng(7)
    out = []
    for n in (1, 2, 5, 6, 11, 128, 881, 5000, 16384, 70000):
        base = rng.normal(size=n) * 3.0
        for dtype in (np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_):
            out.append(base > 0 if dtype is np.bool_ else np.abs(base).astype(dtype) if dtype is np.uint8
                       else base.astype(dtype))
        a = base.astype(np.float32)
        a[:: max(1, n // 3)] = np.nan
        out.append(a)
        b = base.copy()
        b[0], b[-1] = np.inf, -np.inf
        out.append(b)
        z = np.abs(np.round(base)).astype(np.float32)  # zeros at the minimum, some of them -0.0
        z[rng.random(n) < 0.3] = -0.0
        out.append(z)
        out.append(-z)  # zeros at the maximum
        out.append(np.full(n, 2.5, dtype=np.float32))
    out.append(np.full(100, 3e38, dtype=np.float32))  # lo - 0.5 == lo: np.linspace's zero-step branch
    out.append(np.full(200, np.nan))
    out.append(np.zeros(70000, dtype=np.float32))  # one bucket of 70000: a three-byte varint
    out.append(np.array([2**62, 3, 7, 2**40, 1, 5, 9], dtype=np.int64))
    out.append(np.zeros(0, dtype=np.float32))
    return out


def _protobuf_bytes(tag, arr):
    value = packing.pack_histogram(arr)
    value.tag = tag
    return value.SerializeToString()


def test_histogram_wire_bytes_equal_protobuf_serialization():
    arrays = _arrays_for_histograms()
    for i, arr in enumerate(arrays):
        assert histogram.encode_histogram_value(f"t{i}/auto", arr) == _protobuf_bytes(f"t{i}/auto", arr), (arr.dtype, arr.size)
    encoded = histogram.encode_histogram_values([(f"t{i}", a) for i, a in enumerate(arrays)])
    assert encoded == [_protobuf_bytes(f"t{i}", a) for i, a in enumerate(arrays)]


def test_histogram_stats_against_numpy_histogram():
    for arr in _arrays_for_histograms():
        flat = arr.reshape(-1).astype(np.uint8) if arr.dtype == np.bool_ else arr.reshape(-1)
        finite = flat[np.isfinite(flat)] if flat.dtype.kind == "f" else flat
        st = histogram.histogram_stats(arr)
        assert st.count == flat.size
        if finite.size == 0:
            assert st.counts.tolist() == [0] and np.isnan(st.min) and np.isnan(st.max)
            continue
        lo, hi = finite.min(), finite.max()
        first, last = (lo, hi) if lo < hi else (lo - 0.5, hi + 0.5)
        edges = np.linspace(first, last, histogram_bins(finite.size) + 1,
                            dtype=finite.dtype if finite.dtype.kind == "f" else np.float64)
        counts, _ = np.histogram(finite, bins=edges)
        np.testing.assert_array_equal(st.counts, counts)
        np.testing.assert_array_equal(st.left, edges[:-1].astype(np.float64))
        np.testing.assert_array_equal(st.width, np.diff(edges).astype(np.float64))
        # min/max: the same value and the same sign of zero as numpy's own min()/max()
        assert (st.min, np.signbit(st.min)) == (float(lo), np.signbit(lo))
        assert (st.max, np.signbit(st.max)) == (float(hi), np.signbit(hi))
        assert st.sum == pytest.approx(math.fsum(finite.astype(np.float64).tolist()), rel=1e-9, abs=1e-9)
        assert st.nan_count == (int(np.isnan(flat).sum()) if flat.dtype.kind == "f" else 0)


def test_histogram_stats_many_equals_one_by_one():
    rng = np.random.default_rng(3)
    arrays = [a for a in _arrays_for_histograms() if a.size]
    # Snapshots of the same "parameter": several arrays of one dtype and size, some with NaN.
    for n, dtype in ((16384, np.float32), (128, np.float32), (1280, np.float64)):
        for k in range(4):
            a = (rng.normal(size=n) * (k + 1)).astype(dtype)
            if k == 2:
                a[5] = np.nan
            arrays.append(a)
    expected = [histogram.histogram_stats(a.copy()) for a in arrays]
    for got, want in zip(histogram.histogram_stats_many([a.copy() for a in arrays]), expected):
        assert _same_stats(got, want)
    # Rows of one 2-D array ("slab" rows), sorted in place when overwrite=True.
    slab = rng.normal(size=(6, 1000)).astype(np.float32)
    slab[3, 7] = np.inf
    slab[4] = np.abs(slab[4])
    slab[4, [1, 2]] = 0.0, -0.0
    rows = [slab[r].reshape(10, 100) for r in range(6)]
    want = [histogram.histogram_stats(r.copy()) for r in rows]
    got = histogram.histogram_stats_many(rows[:1] + rows[2:] + rows[1:2], overwrite=True)
    for g, w in zip(got, want[:1] + want[2:] + want[1:2]):
        assert _same_stats(g, w)
    assert histogram._slab_blocks(rows, list(range(6))) != []


def _same_stats(a, b) -> bool:
    scalars = [(x, y) for x, y in zip(a[:7], b[:7])]
    same = all((x == y and np.signbit(x) == np.signbit(y)) or (x != x and y != y) for x, y in scalars)
    return same and all(np.array_equal(x, y) for x, y in zip(a[7:], b[7:]))


def test_histogram_wire_bytes_of_slab_rows_equal_protobuf_serialization():
    # SummaryRecord's snapshots: rows of 2-D slabs named by (slab, row), bucketed in place.
    rng = np.random.default_rng(11)
    slab = (rng.normal(size=(7, 1280)) * 0.05).astype(np.float32)
    slab[2, 9] = np.nan  # a row left to the one-by-one path
    slab[5] = 1.5  # a constant row: np.linspace's zero-step branch
    wide = rng.normal(size=(3, 16384))  # float64, counts above 127: two-byte varints
    other = rng.normal(size=300).astype(np.float32)  # not a slab row
    # Rows 0-2 and 4-6 of the first slab (row 3 asked for by nobody), in a shuffled order.
    entries = [(slab, r) for r in (4, 0, 6, 1, 2, 5)] + [(wide, r) for r in range(3)] + [None]
    arrays = [s[r].reshape(32, 40) if s is slab else s[r] for s, r in entries[:-1]] + [other]
    expected = [_protobuf_bytes(f"p{i}/auto", a.copy()) for i, a in enumerate(arrays)]
    got = histogram.encode_histogram_values([(f"p{i}/auto", a) for i, a in enumerate(arrays)], overwrite=True,
                                            slab_rows=entries)
    assert got == expected
    with pytest.raises(ValueError, match="slab_rows"):
        histogram.encode_histogram_values([("t", other)], slab_rows=[None])
