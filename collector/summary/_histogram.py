"""Histograms as MindSpore 2.10 bins them, and their protobuf wire bytes.

``histogram_stats`` buckets one array; ``histogram_stats_many`` buckets a batch of
arrays (the same parameters at many steps) with a few numpy calls per parameter;
``encode_histogram_values`` writes ``Summary.Value`` bytes directly, equal to what
protobuf serializes for the message ``collector.summary._packing.pack_histogram`` fills (the
tests compare the two). ``SummaryRecord`` uses the batch path when it writes.
"""

from __future__ import annotations

import logging
import math
import struct
from typing import Any, NamedTuple

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "histogram_bins",
    "HistogramStats",
    "histogram_stats",
    "histogram_stats_many",
    "encode_histogram_value",
    "encode_histogram_values",
    "encode_varint",
    "encode_len_field",
]


def histogram_bins(count: int) -> int:
    """MindSpore's bucket count for ``count`` finite values."""
    if count == 0:
        return 1
    if count <= 5:
        return 2
    if count <= 10:
        return 3
    if count <= 880:
        return count // 10 + 1
    return 90


class HistogramStats(NamedTuple):
    """What a ``Summary.Histogram`` holds: computed once, for the message builder or the wire bytes."""

    count: int  # type: ignore[assignment]  # MindSpore's field name; shadows tuple.count
    nan_count: int
    pos_inf_count: int
    neg_inf_count: int
    max: float
    min: float
    sum: float
    left: np.ndarray  # float64, one per bucket
    width: np.ndarray  # float64
    counts: np.ndarray  # int64


def histogram_stats(arr: np.ndarray) -> HistogramStats:
    """Bucket ``arr`` the way MindSpore 2.10 does (``histogram_bins`` equal-width buckets).

    The counts are those of ``np.histogram(finite, bins=edges)`` with ``edges =
    np.linspace(min, max, bins + 1)`` in the value's float dtype, and min/max/sum those of
    ``finite.min()``, ``finite.max()`` and ``finite.sum(dtype=np.float64)``.

    For float32, float64 and integers the counts come from the sort and ``searchsorted``
    calls ``np.histogram`` makes for explicit edges, but with one sort that also gives
    the minimum and maximum and shows whether any value is not finite (NaN sorts last,
    -inf first, +inf before NaN): a few numpy calls instead of ``np.histogram``'s many
    (the writer shares the GIL with training). float16 keeps ``np.histogram`` itself:
    numpy's float16 sort does not always order its values, so one sort of the whole
    array would not bucket them as ``np.histogram``'s sorts of 65536-value blocks do.
    """
    flat = arr.reshape(-1)
    if flat.dtype == np.bool_:
        flat = flat.astype(np.uint8)
    count = int(flat.size)
    if count == 0:
        return _empty_histogram(0, 0, 0, 0)
    is_float = flat.dtype.kind == "f"
    finite, nan, pos, neg = flat, 0, 0, 0
    sort_once = not is_float or flat.dtype.itemsize >= 4
    if sort_once:
        ordered = np.sort(flat)
        lo, hi = ordered[0], ordered[-1]
        all_finite = not is_float or (math.isfinite(lo) and math.isfinite(hi))
    else:
        all_finite = bool(np.isfinite(flat).all())
    if not all_finite:
        finite = flat[np.isfinite(flat)]
        nan = int(np.count_nonzero(np.isnan(flat)))
        pos = int(np.count_nonzero(np.isposinf(flat)))
        neg = count - int(finite.size) - nan - pos
        if finite.size == 0:
            return _empty_histogram(count, nan, pos, neg)
        if sort_once:
            ordered = np.sort(finite)
            lo, hi = ordered[0], ordered[-1]
    if not sort_once:
        lo, hi = finite.min(), finite.max()
    else:
        # -0.0 and 0.0 sort in either order; min()/max() decide which one a zero extreme is.
        if lo == 0:
            lo = finite.min()
        if hi == 0:
            hi = finite.max()
    # The sum over the values in their own order (not the sorted copy): its rounding does
    # not depend on how the counts are found.
    total = float(finite.sum(dtype=np.float64))
    first, last = lo, hi
    if not first < last:
        first, last = first - 0.5, last + 0.5
    # Edges in the value's own float dtype, as MindSpore computes them (bucket widths
    # then differ in the last bits, exactly as in MindSpore's own files).
    edge_dtype = finite.dtype if is_float else np.float64
    edges = np.linspace(first, last, histogram_bins(int(finite.size)) + 1, dtype=edge_dtype)
    if sort_once:
        # np.histogram's explicit-edges rule: [e_i, e_i+1) per bucket, the last one closed
        # (and the last edge is the maximum, so it holds every value).
        below = np.empty(edges.size, dtype=np.int64)
        below[:-1] = ordered.searchsorted(edges[:-1], "left")
        below[-1] = ordered.size
        counts = below[1:] - below[:-1]
    else:
        counts, _ = np.histogram(finite, bins=edges)
    return HistogramStats(count, nan, pos, neg, float(hi), float(lo), total, edges[:-1].astype(np.float64),
                          (edges[1:] - edges[:-1]).astype(np.float64), counts.astype(np.int64, copy=False))


def histogram_stats_many(arrays: list[np.ndarray], overwrite: bool = False) -> list[HistogramStats]:
    """:func:`histogram_stats` of each array, the same parameter's snapshots computed together.

    SummaryRecord writes a batch of records at once, so the same parameter arrives once
    per record: float32/float64 arrays of one dtype and size are taken as the rows of one
    2-D array and summed, bounded, sorted and bucketed with one numpy call each instead
    of one per array. Row-wise ``sum(axis=1, dtype=np.float64)``, ``min``/``max``,
    ``sort`` and ``np.linspace`` with array endpoints give each row exactly what the 1-D
    calls give it (tests compare the results with :func:`histogram_stats`). Rows with a
    value that is not finite, and every other array, go through :func:`histogram_stats`.

    Parameters
    ----------
    arrays : list of numpy.ndarray
    overwrite : bool, default=False
        Allow sorting the arrays' memory in place. Consecutive rows of one 2-D array
        (SummaryRecord's snapshot slabs) are then used as they are, without stacking
        them into a new array (whose fresh pages cost more than the sort).
    """
    out: list[HistogramStats | None] = [None] * len(arrays)
    for values, members in _blocks(arrays, overwrite, None):
        for i, st in zip(members, _histogram_rows(values)):
            out[i] = st
    return [got if got is not None else histogram_stats(arrays[i]) for i, got in enumerate(out)]


def _blocks(arrays: list[np.ndarray], overwrite: bool,
            slab_rows: list[tuple[np.ndarray, int] | None] | None) -> list[tuple[np.ndarray, list[int]]]:
    """The 2-D blocks that arrays of one float dtype and size are bucketed in together.

    Returns ``(block, members)``: ``members[j]`` is the index in ``arrays`` of the
    block's row ``j``. With ``slab_rows`` (item
    ``i``: ``arrays[i]`` is row ``r`` of the 2-D array ``slab``, SummaryRecord's
    snapshots) runs of consecutive rows of a slab are used in place; with
    ``overwrite`` alone such runs are found by address (:func:`_slab_blocks`); the
    other arrays of one dtype and size are stacked into a new block. An array in no
    block of at least two rows is left to :func:`histogram_stats`.
    """
    blocks: list[tuple[np.ndarray, list[int]]] = []
    placed: set[int] = set()
    if slab_rows is not None:
        by_slab: dict[int, tuple[np.ndarray, dict[int, int]]] = {}
        for i, entry in enumerate(slab_rows):
            if entry is not None and _batchable(arrays[i]):
                slab, r = entry
                by_slab.setdefault(id(slab), (slab, {}))[1][r] = i
        for slab, rows in by_slab.values():
            if slab.ndim == 2 and slab.flags.c_contiguous:
                found = _row_runs(slab, rows)
                blocks.extend(found)
                placed.update(i for _, members in found for i in members)
    groups: dict[tuple[str, int], list[int]] = {}
    for i, arr in enumerate(arrays):
        if i not in placed and _batchable(arr):
            groups.setdefault((arr.dtype.str, arr.size), []).append(i)
    for indices in groups.values():
        found = _slab_blocks(arrays, indices) if overwrite and slab_rows is None else []
        blocks.extend(found)
        in_blocks = {i for _, members in found for i in members}
        loose = [i for i in indices if i not in in_blocks]
        if len(loose) > 1:
            blocks.append((np.stack([arrays[i].reshape(-1) for i in loose]), loose))
    return blocks


def _batchable(arr: np.ndarray) -> bool:
    return arr.dtype.kind == "f" and arr.dtype.itemsize >= 4 and arr.size > 0


def _slab_blocks(arrays: list[np.ndarray], indices: list[int]) -> list[tuple[np.ndarray, list[int]]]:
    """Runs of at least two arrays (in ``indices`` order) that are consecutive rows of one 2-D array.

    Returns ``(rows view, indices)`` for each run. A row of a C-contiguous 2-D array is
    itself contiguous and found by its address; anything else is left out.
    """
    by_base: dict[int, tuple[np.ndarray, list[int]]] = {}
    for i in indices:
        arr = arrays[i]
        base = arr.base
        if type(base) is np.ndarray and base.ndim == 2 and base.shape[1] == arr.size and arr.flags.c_contiguous:
            by_base.setdefault(id(base), (base, []))[1].append(i)
    blocks = []
    for base, members in by_base.values():
        if len(members) < 2 or not base.flags.c_contiguous:
            continue
        start, stride = base.__array_interface__["data"][0], base.strides[0]
        blocks.extend(_row_runs(base, {(arrays[i].__array_interface__["data"][0] - start) // stride: i
                                       for i in members}))
    return blocks


def _row_runs(slab: np.ndarray, rows: dict[int, int]) -> list[tuple[np.ndarray, list[int]]]:
    """``(slab[a:b], members)`` for each run of at least two consecutive rows of ``slab``;
    ``rows`` maps a row to the index of the array it holds."""
    order = sorted(rows)
    runs = []
    first = 0
    for j in range(1, len(order) + 1):
        if j == len(order) or order[j] != order[j - 1] + 1:
            if j - first > 1:
                runs.append((slab[order[first]:order[j - 1] + 1], [rows[r] for r in order[first:j]]))
            first = j
    return runs


class _Rows(NamedTuple):
    """Histograms of the rows of a 2-D block: ``rows`` computed together, ``single`` one by one."""

    n: int
    rows: list[int]  # block rows computed together, in order
    hi: list[float]
    lo: list[float]
    sums: list[float]
    left: np.ndarray  # (len(rows), bins) float64
    width: np.ndarray
    counts: np.ndarray  # (len(rows), bins) int64
    single: dict[int, HistogramStats]


def _row_stats(values: np.ndarray) -> _Rows:
    """Histograms of each row of the 2-D float array ``values``, which is sorted in place."""
    k, n = values.shape
    single: dict[int, HistogramStats] = {}
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the rows left to histogram_stats
        sums = values.sum(axis=1, dtype=np.float64)  # before sorting: in the values' own order
    lo, hi = values.min(axis=1), values.max(axis=1)  # NaN comes through both, and +-inf shows
    usable = np.isfinite(lo) & np.isfinite(hi)
    for r in np.flatnonzero(~usable).tolist():
        single[r] = histogram_stats(values[r])  # before the rows are sorted (it sorts a copy)
    rows = np.flatnonzero(usable)
    # The sign of a zero extreme depends on the order min()/max() see the values in:
    # take it from the row's own 1-D call, as histogram_stats does.
    for r in rows[lo[rows] == 0].tolist():
        lo[r] = values[r].min()
    for r in rows[hi[rows] == 0].tolist():
        hi[r] = values[r].max()
    bins = histogram_bins(n)
    empty = np.zeros((0, bins))
    if rows.size < k:
        lo, hi, sums = lo[rows], hi[rows], sums[rows]
    spread = lo < hi
    first = np.where(spread, lo, lo - 0.5)
    last = np.where(spread, hi, hi + 0.5)
    with np.errstate(over="ignore"):  # (np.linspace below warns as the 1-D call would)
        zero_step = rows.size and not ((last - first) / bins).all()
    if zero_step or rows.size == 0:
        # A zero step takes another branch of np.linspace: row by row then.
        for r in rows.tolist():
            single[r] = histogram_stats(values[r])
        return _Rows(n, [], [], [], [], empty, empty, empty.astype(np.int64), single)
    values.sort(axis=1)
    edges = np.linspace(first, last, bins + 1, dtype=values.dtype, axis=1)
    below = np.empty(edges.shape, dtype=np.int64)
    row_list = rows.tolist()
    for j, r in enumerate(row_list):
        below[j, :-1] = values[r].searchsorted(edges[j, :-1], "left")
    below[:, -1] = n
    counts = below[:, 1:] - below[:, :-1]
    left = edges[:, :-1].astype(np.float64)
    width = (edges[:, 1:] - edges[:, :-1]).astype(np.float64)
    return _Rows(n, row_list, hi.astype(np.float64).tolist(), lo.astype(np.float64).tolist(),
                 sums.tolist(), left, width, counts, single)


def _histogram_rows(values: np.ndarray) -> list[HistogramStats]:
    """:class:`HistogramStats` of each row of the 2-D float array ``values``, which is sorted in place."""
    st = _row_stats(values)
    result: list[HistogramStats | None] = [None] * values.shape[0]
    for r, h in st.single.items():
        result[r] = h
    for j, r in enumerate(st.rows):
        result[r] = HistogramStats(st.n, 0, 0, 0, st.hi[j], st.lo[j], st.sums[j], st.left[j], st.width[j],
                                   st.counts[j])
    return result  # type: ignore[return-value]


def _empty_histogram(count: int, nan: int, pos: int, neg: int) -> HistogramStats:
    """No finite value: one empty bucket at 0, min and max NaN (MindSpore's choice)."""
    zero = np.zeros(1, dtype=np.float64)
    return HistogramStats(count, nan, pos, neg, math.nan, math.nan, 0.0, zero, zero.copy(), np.zeros(1, dtype=np.int64))


# ---------------------------------------------------------------- direct wire encoding
# Histograms are encoded straight to protobuf wire bytes: filling one ``bucket`` message
# per bucket from Python was most of the writer's time (up to 90 buckets for each of
# five parameters per collection), and the writer shares the GIL with the training loop.
# The bytes are those protobuf itself gives for the same message
# (tests/collector/test_packing.py compares them with ``pack_histogram(...).SerializeToString()``).


def encode_varint(n: int) -> bytes:
    """Protobuf varint of an int64 (negative values as their 64-bit two's complement)."""
    if 0 <= n < 0x80:
        return _SMALL_VARINTS[n]
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = [bytes((i,)) for i in range(0x80)]


def encode_len_field(field: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): key, length, payload."""
    return encode_varint((field << 3) | 2) + encode_varint(len(payload)) + payload


_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)  # 2**7 .. 2**63
_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)  # the ten 7-bit groups of a uint64
_COLUMNS = np.arange(31)
_BUCKET_HEAD = 21  # 0x0a, length, 0x09, 8 bytes, 0x11, 8 bytes, 0x18


def _bucket_rows(left: np.ndarray, width: np.ndarray, counts: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Histogram ``buckets`` entries (field 1) for every bucket at once, and each one's length.

    Each bucket is ``0x0a len 0x09 <left> 0x11 <width> 0x18 <varint count>``: 21 bytes plus
    the count's varint. The rows are laid out in a (buckets, 21 + longest varint) array
    and, when the varints differ in length, the unused tail of the shorter rows is
    dropped with one boolean mask.
    """
    n = counts.size
    if n and counts.min() >= 0 and counts.max() < 1 << 14:
        return _bucket_rows_short(left, width, counts)
    c = counts.astype(np.uint64)
    vlen = _VARINT_LIMITS.searchsorted(c, "right") + 1
    vmax = int(vlen.max())
    groups = (c[:, None] >> _SHIFTS[:vmax]) & np.uint64(0x7F)
    groups[_COLUMNS[:vmax] < (vlen - 1)[:, None]] |= np.uint64(0x80)  # "more bytes follow"
    rows = _bucket_head(left, width, _BUCKET_HEAD - 2 + vlen, vmax)
    rows[:, 21:] = groups
    lengths = _BUCKET_HEAD + vlen
    if vmax == 1:
        return rows.tobytes(), lengths
    return rows[_COLUMNS[: _BUCKET_HEAD + vmax] < lengths[:, None]].tobytes(), lengths


def _bucket_head(left: np.ndarray, width: np.ndarray, body_len: Any, varint_room: int) -> np.ndarray:
    """Rows of ``21 + varint_room`` bytes with each bucket's fixed part filled in: the
    bucket's tag and length (``body_len``), ``left`` and ``width`` as little-endian doubles,
    and the count's tag; the caller writes the count's varint."""
    n = left.size
    rows = np.empty((n, _BUCKET_HEAD + varint_room), dtype=np.uint8)
    rows[:, 0] = 0x0A
    rows[:, 1] = body_len
    rows[:, 2] = 0x09
    rows[:, 3:11] = left.astype("<f8", copy=False).view(np.uint8).reshape(n, 8)
    rows[:, 11] = 0x11
    rows[:, 12:20] = width.astype("<f8", copy=False).view(np.uint8).reshape(n, 8)
    rows[:, 20] = 0x18
    return rows


def _bucket_rows_short(left: np.ndarray, width: np.ndarray, counts: np.ndarray) -> tuple[bytes, np.ndarray]:
    """:func:`_bucket_rows` when every count is below 2**14: a varint of one or two bytes.

    The usual case (a bucket holds fewer than 16384 values): the same bytes with a few
    1-D operations instead of the general 10-group varint arithmetic.
    """
    two = counts >= 0x80
    rows = _bucket_head(left, width, _BUCKET_HEAD - 1 + two, 2)
    rows[:, 21] = (counts & 0x7F) | (two << 7)
    rows[:, 22] = counts >> 7
    lengths = _BUCKET_HEAD + 1 + two
    if not two.any():
        return rows[:, :_BUCKET_HEAD + 1].tobytes(), lengths
    keep = np.ones(rows.shape, dtype=bool)
    keep[:, _BUCKET_HEAD + 1] = two
    return rows[keep].tobytes(), lengths


def encode_histogram_values(items: list[tuple[str, np.ndarray]], overwrite: bool = False,
                            slab_rows: list[tuple[np.ndarray, int] | None] | None = None) -> list[bytes]:
    """The wire bytes of ``Summary.Value(tag=tag, histogram=...)`` for each ``(tag, arr)``.

    Equal to ``pack_histogram(arr)`` with ``tag`` set, serialized by protobuf: fields in
    number order, every Histogram field present (MindSpore sets them all). Arrays of one
    float dtype and size are bucketed together as the rows of one block (see
    :func:`histogram_stats_many`) and each block's buckets encoded with one set of numpy
    calls; everything else one by one.

    Parameters
    ----------
    items : list of (str, numpy.ndarray)
    overwrite : bool, default=False
        Allow sorting the arrays' memory in place (see :func:`histogram_stats_many`).
    slab_rows : list of (numpy.ndarray, int) or None, optional
        With ``overwrite``: item ``i``'s array is row ``r`` of the C-contiguous 2-D
        array ``slab`` (``slab_rows[i] == (slab, r)``), None when it is not. Saves
        finding the rows by address; SummaryRecord knows them.
    """
    if slab_rows is not None and (not overwrite or len(slab_rows) != len(items)):
        raise ValueError("slab_rows needs overwrite=True and one entry per item")
    arrays = [arr for _, arr in items]
    out: list[bytes | None] = [None] * len(items)
    for values, members in _blocks(arrays, overwrite, slab_rows):
        for i, encoded in zip(members, _encode_rows(values, [items[i][0] for i in members])):
            out[i] = encoded
    rest = [i for i, encoded in enumerate(out) if encoded is None]
    for i, encoded in zip(rest, _encode_stats([items[i][0] for i in rest], [histogram_stats(arrays[i]) for i in rest])):
        out[i] = encoded
    return out  # type: ignore[return-value]


def _value_bytes(tag_field: bytes, buckets: bytes, non_finite: bytes, hi: float, lo: float, total: float,
                 count_field: bytes) -> bytes:
    """``Summary.Value`` bytes: the tag field, then the histogram (field 9) with its buckets and fields 2-8."""
    hist = b"".join((buckets, non_finite, _DOUBLES.pack(0x29, hi, 0x31, lo, 0x39, total), count_field))
    return b"".join((tag_field, b"\x4a", encode_varint(len(hist)), hist))


def _encode_rows(values: np.ndarray, tags: list[str]) -> list[bytes]:
    """The ``Summary.Value`` bytes of each row of a 2-D float block (sorted in place), tagged ``tags``."""
    st = _row_stats(values)
    out: list[bytes | None] = [None] * len(tags)
    if st.single:
        rows = list(st.single)
        for r, encoded in zip(rows, _encode_stats([tags[r] for r in rows], [st.single[r] for r in rows])):
            out[r] = encoded
    if st.rows:
        blob, lengths = _bucket_rows(st.left.reshape(-1), st.width.reshape(-1), st.counts.reshape(-1))
        bins = st.counts.shape[1]
        ends = np.cumsum(lengths)[bins - 1::bins].tolist()  # where each row's buckets end
        count_field = b"\x40" + encode_varint(st.n)
        tag_fields: dict[str, bytes] = {}
        start = 0
        for j, r in enumerate(st.rows):
            tag = tags[r]
            tag_field = tag_fields.get(tag)
            if tag_field is None:
                tag_field = tag_fields[tag] = encode_len_field(1, tag.encode("utf-8"))
            end = ends[j]
            out[r] = _value_bytes(tag_field, blob[start:end], _NO_NON_FINITE, st.hi[j], st.lo[j], st.sums[j],
                                  count_field)
            start = end
    return out  # type: ignore[return-value]


def _encode_stats(tags: list[str], stats: list[HistogramStats]) -> list[bytes]:
    """The ``Summary.Value`` bytes of each ``(tag, stats)``; their buckets are encoded together."""
    if not stats:
        return []
    blob, lengths = _bucket_rows(np.concatenate([st.left for st in stats]),
                                 np.concatenate([st.width for st in stats]),
                                 np.concatenate([st.counts for st in stats]))
    # Byte offset where each value's buckets end.
    ends = np.cumsum(lengths)[np.cumsum([st.counts.size for st in stats]) - 1].tolist()
    out, start = [], 0
    for tag, st, end in zip(tags, stats, ends):
        if st.count and st.nan_count + st.pos_inf_count + st.neg_inf_count == st.count:
            # As MindSpore does (an empty value was warned about when it was added).
            logger.warning("histogram %r: no finite value among its %d (NaN %d, +inf %d, -inf %d); recorded with "
                           "one empty bucket and min and max NaN.", tag, st.count, st.nan_count, st.pos_inf_count,
                           st.neg_inf_count)
        if st.nan_count or st.pos_inf_count or st.neg_inf_count:
            non_finite = b"".join((b"\x10", encode_varint(st.nan_count), b"\x18", encode_varint(st.pos_inf_count),
                                   b"\x20", encode_varint(st.neg_inf_count)))
        else:
            non_finite = _NO_NON_FINITE
        out.append(_value_bytes(encode_len_field(1, tag.encode("utf-8")), blob[start:end], non_finite, st.max,
                                st.min, st.sum, b"\x40" + encode_varint(st.count)))
        start = end
    return out


def encode_histogram_value(tag: str, arr: np.ndarray) -> bytes:
    """The wire bytes of ``Summary.Value(tag=tag, histogram=...)`` (see :func:`encode_histogram_values`)."""
    return encode_histogram_values([(tag, arr)])[0]


_DOUBLES = struct.Struct("<BdBdBd")
_NO_NON_FINITE = b"\x10\x00\x18\x00\x20\x00"  # nan_count, pos_inf_count, neg_inf_count = 0
