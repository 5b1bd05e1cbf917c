"""Turning user values (torch tensors, numpy arrays, numbers) into summary messages.

Two halves, because ``SummaryRecord`` splits the work between threads (plus
``custom_lineage``, a dict packed as a ``UserDefinedInfo``, used by both SummaryRecord and
the lineage builders):

* ``to_numpy`` / ``check_*`` run on the caller's thread: they validate and take a
  private copy (a tensor may be changed in place by the next optimizer step);
* ``pack_*`` / ``encode_*`` run when the record writes (its writer thread, or
  ``flush``/``close``): histogram binning, PNG encoding and protobuf filling, which
  are the expensive parts; histograms of a batch of records are binned and encoded
  together, straight to wire bytes.

The packing rules are MindSpore 2.10's (``../shared/spec/summary-format.md``).
"""

from __future__ import annotations

import logging
import math
import numbers
import struct
import sys
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from collector.summary import _proto as proto
from collector.summary._histogram import histogram_bins, histogram_stats

logger = logging.getLogger(__name__)

__all__ = [
    "to_numpy",
    "check_scalar",
    "check_image",
    "pack_scalar",
    "pack_histogram",
    "pack_image",
    "pack_tensor",
    "encode_png",
    "histogram_bins",
    "tensor_to_numpy",
    "make_canvas",
    "custom_lineage",
    "NUMPY_TO_DT",
    "DT_TO_NUMPY",
]

NUMPY_TO_DT = {
    np.dtype(np.bool_): proto.DT_BOOL,
    np.dtype(np.int8): proto.DT_INT8,
    np.dtype(np.int16): proto.DT_INT16,
    np.dtype(np.int32): proto.DT_INT32,
    np.dtype(np.int64): proto.DT_INT64,
    np.dtype(np.uint8): proto.DT_UINT8,
    np.dtype(np.uint16): proto.DT_UINT16,
    np.dtype(np.uint32): proto.DT_UINT32,
    np.dtype(np.uint64): proto.DT_UINT64,
    np.dtype(np.float16): proto.DT_FLOAT16,
    np.dtype(np.float32): proto.DT_FLOAT32,
    np.dtype(np.float64): proto.DT_FLOAT64,
}
DT_TO_NUMPY = {v: k for k, v in NUMPY_TO_DT.items()}
DT_TO_NUMPY[proto.DT_BFLOAT16] = np.dtype(np.float32)  # values travel in float_data


def to_numpy(value, *, what: str) -> tuple[np.ndarray, bool]:
    """Return a private numpy copy of a tensor, array or Python number, and a bf16 flag.

    Raises ``TypeError`` naming ``what`` for any other type.
    """
    # A torch tensor exists only once torch is imported; asking sys.modules keeps the reader
    # (which uses this module) from importing torch, 1.5 s that viz and the CLI do not need.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach()
        bf16 = t.dtype == torch.bfloat16
        if bf16:
            t = t.float()
        # .cpu() of a CPU tensor is the tensor itself, so copy explicitly: the caller's
        # optimizer may change it before the writer thread reads it.
        return t.cpu().numpy().copy() if t.device.type == "cpu" else t.cpu().numpy(), bf16
    if isinstance(value, np.ndarray):
        if value.dtype not in NUMPY_TO_DT:
            raise TypeError(f"{what}: numpy dtype {value.dtype} is not supported; use a bool, int, uint or float dtype")
        return value.copy(), False
    if isinstance(value, np.generic) and np.dtype(value.dtype) in NUMPY_TO_DT:
        return np.asarray(value).copy(), False
    if isinstance(value, (bool, numbers.Integral, numbers.Real)) and not isinstance(value, complex):
        return np.asarray(value, dtype=np.float64 if not isinstance(value, numbers.Integral) else np.int64), False
    raise TypeError(
        f"{what}: the value must be a torch.Tensor, a numpy.ndarray or a Python number. "
        f"Got {type(value).__name__} instead."
    )


def check_scalar(arr: np.ndarray, *, tag: str) -> float:
    """Reduce a value to one float as MindSpore does (first element of a larger tensor)."""
    if arr.size == 0:
        raise ValueError(f"scalar {tag!r}: the value is empty; a scalar needs at least one element")
    if arr.size > 1:
        logger.warning("scalar %r: value has %d elements, recording the first one", tag, arr.size)
    return float(arr.reshape(-1)[0])


def check_image(arr: np.ndarray, *, tag: str) -> None:
    """Refuse anything that is not NCHW with C in {1, 3}."""
    if arr.ndim != 4 or arr.shape[1] not in (1, 3):
        raise ValueError(
            f"image {tag!r}: the value must be a 4-D NCHW tensor with 1 or 3 channels. "
            f"Got shape {tuple(arr.shape)} instead."
        )
    if arr.shape[0] == 0 or arr.shape[2] == 0 or arr.shape[3] == 0:
        raise ValueError(f"image {tag!r}: the value has an empty dimension (shape {tuple(arr.shape)})")


def pack_scalar(value: float):
    return proto.Summary.Value(scalar_value=value)


def pack_histogram(arr: np.ndarray):
    """Fill a ``Summary.Histogram`` the way MindSpore 2.10 does (see :func:`histogram_stats`)."""
    st = histogram_stats(arr)
    hist = proto.Summary.Histogram(nan_count=st.nan_count, pos_inf_count=st.pos_inf_count,
                                   neg_inf_count=st.neg_inf_count, max=st.max, min=st.min, sum=st.sum,
                                   count=st.count)
    for lft, wid, cnt in zip(st.left.tolist(), st.width.tolist(), st.counts.tolist()):
        hist.buckets.add(left=lft, width=wid, count=cnt)
    return proto.Summary.Value(histogram=hist)


def _to_uint8(arr: np.ndarray) -> np.ndarray:
    if arr.dtype == np.uint8:
        return arr
    a = arr.astype(np.float64)
    finite = a[np.isfinite(a)]
    if finite.size == 0:
        return np.zeros(arr.shape, dtype=np.uint8)
    lo, hi = float(finite.min()), float(finite.max())
    if lo >= 0.0 and hi <= 1.0:
        scaled = a * 255.0
    elif hi > lo:
        scaled = (a - lo) * (255.0 / (hi - lo))
    else:
        scaled = np.zeros_like(a)
    return np.clip(np.nan_to_num(scaled, nan=0.0, posinf=255.0, neginf=0.0), 0, 255).round().astype(np.uint8)


def make_canvas(arr: np.ndarray) -> np.ndarray:
    """Tile an NCHW batch into one HWC uint8 image, row-major, nearly square."""
    img = _to_uint8(arr)
    n, c, h, w = img.shape
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    canvas = np.zeros((rows * h, cols * w, c), dtype=np.uint8)
    for k in range(n):
        r, q = divmod(k, cols)
        canvas[r * h : (r + 1) * h, q * w : (q + 1) * w] = img[k].transpose(1, 2, 0)
    return canvas


def encode_png(canvas: np.ndarray) -> bytes:
    """Encode an HWC uint8 image (C = 1 or 3) as PNG with the standard library's zlib."""
    h, w, c = canvas.shape
    color_type = 0 if c == 1 else 2
    raw = np.empty((h, 1 + w * c), dtype=np.uint8)
    raw[:, 0] = 0  # filter type "None" for every row
    raw[:, 1:] = canvas.reshape(h, w * c)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
            + chunk(b"IEND", b""))


def pack_image(arr: np.ndarray):
    canvas = make_canvas(arr)
    h, w, c = canvas.shape
    image = proto.Summary.Image(height=h, width=w, colorspace=c, encoded_image=encode_png(canvas))
    return proto.Summary.Value(image=image)


def pack_tensor(arr: np.ndarray, bf16: bool = False):
    """Fill a ``TensorProto``: dims, data_type and the typed repeated field."""
    t = proto.TensorProto(dims=list(arr.shape))
    t.data_type = proto.DT_BFLOAT16 if bf16 else NUMPY_TO_DT[arr.dtype]
    flat = arr.reshape(-1)
    kind = arr.dtype.kind
    if kind == "f":
        t.float_data.extend(flat.astype(np.float32).tolist())
    elif arr.dtype in (np.dtype(np.int64),):
        t.int64_data.extend(flat.tolist())
    elif arr.dtype in (np.dtype(np.uint32), np.dtype(np.uint64)):
        t.uint64_data.extend(flat.tolist())
    else:  # bool, int8/16/32, uint8/16
        t.int32_data.extend(flat.astype(np.int32).tolist())
    return proto.Summary.Value(tensor=t)


def custom_lineage(data: Mapping[str, Any]) -> proto.UserDefinedInfo:
    """UserDefinedInfo with one ``user_info`` entry per item, as MindSpore packs it.

    Parameters
    ----------
    data : Mapping of str to str, int or float
        The custom lineage (``SummaryCollector(custom_lineage_data=...)``, or
        ``SummaryRecord.add_value("custom_lineage_data", ...)``); not validated here.

    Returns
    -------
    collector.proto.UserDefinedInfo
        An int in int32's range goes to ``map_int32``, a larger one and a float to
        ``map_double``, anything else to ``map_str``.
    """
    info = proto.UserDefinedInfo()
    for key, value in data.items():
        entry = info.user_info.add()
        if isinstance(value, int) and -(2**31) <= value < 2**31:
            entry.map_int32[key] = value
        elif isinstance(value, int):
            entry.map_double[key] = float(value)  # beyond int32: the closest field that holds it
        elif isinstance(value, float):
            entry.map_double[key] = value
        else:
            entry.map_str[key] = value
    return info


def tensor_to_numpy(t, dtype=None) -> np.ndarray:
    """Inverse of :func:`pack_tensor` for readers (any typed field MindSpore may use).

    ``dtype`` overrides the declared ``data_type``; landscape readers pass float64
    because MindSpore labels some float values DT_INT64 (its convergence point).
    """
    declared = DT_TO_NUMPY.get(t.data_type, np.dtype(np.float32))
    for field in ("float_data", "double_data", "int32_data", "int64_data", "uint64_data"):
        values = getattr(t, field)
        if len(values):
            arr = np.asarray(values)
            break
    else:
        arr = np.frombuffer(t.raw_data, dtype=declared) if t.raw_data else np.zeros(0)
    arr = arr.astype(dtype or declared, copy=False)
    dims = [int(d) for d in t.dims]
    # A value whose element count disagrees with its dims is returned flat rather
    # than refused: the reader reports data, it does not judge it.
    return arr.reshape(dims) if int(np.prod(dims)) == arr.size else arr
