"""What makes a decoded summary message unusable (private): the reader's checks.

A record whose CRCs are right can still carry content that cannot be used: a string
that is not UTF-8 (protobuf hands it back as bytes, or raises when a map holding it is
read), a PNG that does not decode, tensor bytes that do not fill their dims, histogram
counts that do not add up, a landscape whose z does not fit its axes. Each check returns
None for usable content, else a reason; none of them raises.
"""

from __future__ import annotations

import io
import math
import re
import struct
import warnings
from functools import cache
from typing import Any

import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.unknown_fields import UnknownFieldSet

from collector.summary._packing import tensor_to_numpy

__all__ = ["text_damage", "value_damage", "lost_field", "lost_here", "has_unknown_fields", "tensor_array",
           "histogram_buckets", "decode_png"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def decode_png(data: bytes) -> np.ndarray:
    """Decode a PNG to an HxWxC uint8 array (Pillow, installed with matplotlib)."""
    from PIL import Image  # Pillow loads only for files that hold images

    with Image.open(io.BytesIO(data)) as im:
        arr = np.asarray(im)
    return arr[:, :, None] if arr.ndim == 2 else arr


@cache
def _has_text(descriptor: Descriptor) -> bool:
    """Whether a message type holds a string field, itself or in any message it contains."""
    seen: set[str] = set()
    stack = [descriptor]
    while stack:
        d = stack.pop()
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        for fd in d.fields:
            if fd.type == FieldDescriptor.TYPE_STRING:
                return True
            if fd.message_type is not None:
                stack.append(fd.message_type)
    return False


def text_damage(message: Any) -> str | None:
    """The first string field of ``message`` (nested messages and maps included) that is not valid UTF-8."""
    if not _has_text(message.DESCRIPTOR):
        return None
    name = message.DESCRIPTOR.name
    try:
        for fd, value in message.ListFields():
            name = fd.full_name
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                value_type = fd.message_type.fields_by_name["value"]
                for key in value:  # iterating raises UnicodeDecodeError for a key that is not UTF-8
                    item = value[key]
                    if isinstance(key, bytes) or (value_type.type == FieldDescriptor.TYPE_STRING
                                                  and isinstance(item, bytes)):
                        return f"{name} holds a string that is not valid UTF-8"
                    if value_type.message_type is not None:
                        found = text_damage(item)
                        if found:
                            return found
            elif fd.type == FieldDescriptor.TYPE_STRING:
                items = value if fd.is_repeated else [value]
                if any(not isinstance(item, str) for item in items):
                    return f"{name} is not valid UTF-8"
            elif fd.message_type is not None:
                for item in (value if fd.is_repeated else [value]):
                    found = text_damage(item)
                    if found:
                        return found
    except (UnicodeDecodeError, ValueError) as exc:
        return f"{name} cannot be read: {exc}"
    return None


def lost_field(message: Any) -> str | None:
    """A field that protobuf parsed into the unknown fields although its number is declared, or None.

    A field of a declared number whose bytes its type cannot hold (a wrong wire type, an
    enum value not declared, a map entry whose key is not UTF-8) is not an error to
    protobuf: it keeps the bytes as an unknown field and the field looks absent, so the
    content is silently lost. Fields of numbers not declared (a newer writer's) are fine.
    """
    try:
        here = lost_here(message)
        if here:
            return here
        for fd, value in message.ListFields():
            if fd.message_type is None:
                continue
            if fd.message_type.GetOptions().map_entry:
                items = list(value.values()) if fd.message_type.fields_by_name["value"].message_type else []
            else:
                items = list(value) if fd.is_repeated else [value]
            for item in items:
                found = lost_field(item)
                if found:
                    return found
    except (UnicodeDecodeError, ValueError) as exc:
        return f"{message.DESCRIPTOR.full_name} cannot be read: {exc}"
    return None


def has_unknown_fields(message: Any) -> bool:
    """Whether ``message`` or a message inside it holds unknown fields: a quick test, in C.

    Only then is :func:`lost_field`'s walk (in Python) needed.
    """
    probe = type(message)()
    probe.CopyFrom(message)
    probe.DiscardUnknownFields()
    return probe.ByteSize() != message.ByteSize()


def lost_here(message: Any) -> str | None:
    """:func:`lost_field` for the fields of ``message`` itself (not of the messages inside it)."""
    declared = message.DESCRIPTOR.fields_by_number
    for field in UnknownFieldSet(message):
        if field.field_number in declared:
            return (f"{declared[field.field_number].full_name} holds bytes its type cannot hold "
                    f"(wire type {field.wire_type})")
    return None


def tensor_array(t: Any, dtype: Any = None) -> tuple[np.ndarray | None, str | None]:
    """``(array, None)`` for a usable ``TensorProto``, else ``(None, reason)``."""
    try:
        arr = tensor_to_numpy(t, dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        return None, f"its tensor bytes cannot be read ({exc})"
    dims = [int(d) for d in t.dims]
    if not dims and arr.size == 0:
        return arr, None  # no dims and no values: an absent tensor (MindSpore's result landscape has such paths)
    if any(d < 0 for d in dims):
        return None, f"its tensor has negative dims {dims}"
    need = math.prod(dims)
    if need != arr.size:
        return None, f"its tensor holds {arr.size} values; its dims {dims} need {need}"
    return arr.reshape(dims), None


def _image_damage(image: Any) -> str | None:
    data = bytes(image.encoded_image)
    # Compare the PNG's own header with the record before decoding, so a damaged size
    # never makes the decoder allocate a huge image.
    if len(data) < 24 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return "its image is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    if (width, height) != (image.width, image.height):
        return f"its PNG is {width}x{height} pixels; the record says {image.width}x{image.height}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's warnings about odd chunks: the outcome is what counts
            arr = decode_png(data)
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, zlib.error... for damaged PNGs
        why = re.sub(r" <_io\.BytesIO object at 0x[0-9a-fA-F]+>", "", str(exc))  # Pillow names its buffer
        return f"its PNG does not decode ({type(exc).__name__}: {why})"
    if arr.shape[:2] != (image.height, image.width):
        return f"its PNG decodes to {arr.shape[1]}x{arr.shape[0]} pixels; the record says {image.width}x{image.height}"
    return None


def histogram_buckets(h: Any) -> tuple[list[float], list[float], list[int]]:
    """A ``Summary.Histogram``'s buckets as three lists: left edges, widths and counts."""
    buckets = h.buckets
    return [b.left for b in buckets], [b.width for b in buckets], [b.count for b in buckets]


def _histogram_damage(h: Any, buckets: tuple[list[float], list[float], list[int]]) -> str | None:
    # Python's builtins on the lists: for ~90 buckets, faster than making numpy arrays first.
    left, width, counts = buckets
    others = (h.nan_count, h.pos_inf_count, h.neg_inf_count, h.count)
    if min(counts, default=0) < 0 or min(others) < 0:
        return "its histogram has a negative count"
    if not (all(map(math.isfinite, left)) and all(map(math.isfinite, width)) and min(width, default=0.0) >= 0):
        return "its histogram has a bucket whose left edge or width is not finite, or whose width is negative"
    total = sum(counts) + others[0] + others[1] + others[2]
    if h.HasField("count") and total != h.count:
        return (f"its histogram's buckets and NaN/inf counts add up to {total} values; its count is {h.count}")
    return None


def _landscape_damage(ll: Any) -> str | None:
    f64 = np.float64
    axes = {}
    for name in ("x", "y", "z"):
        arr, why = tensor_array(getattr(ll.landscape, name), f64)
        if arr is None:
            return f"its landscape's {name}: {why}"
        axes[name] = arr
    x, y, z = axes["x"], axes["y"], axes["z"]
    need = x.size * y.size if y.size else x.size  # an empty y: a line (1-D landscape), one value per x
    if z.size != need:
        return f"its landscape's z holds {z.size} values; x ({x.size}) by y ({y.size}) need {need}"
    n = len(ll.loss_path.intervals)
    if n and ll.loss_path.HasField("points"):  # intervals without points: a path not drawn, not a damaged one
        for name in ("x", "y", "z"):
            arr, why = tensor_array(getattr(ll.loss_path.points, name), f64)
            if arr is None:
                return f"its loss path's {name}: {why}"
            if arr.size != n:
                return f"its loss path's {name} holds {arr.size} values for {n} intervals"
    for name in ("x", "y", "z"):
        arr, why = tensor_array(getattr(ll.convergence_point, name), f64)
        if arr is None:
            return f"its convergence point's {name}: {why}"
    return None


def value_damage(value: Any, *, histogram: tuple[list[float], list[float], list[int]] | None = None) -> str | None:
    """Why a ``Summary.Value`` cannot be used, or None.

    ``histogram``: its :func:`histogram_buckets`, if the caller has them.
    """
    try:
        kind = value.WhichOneof("value")
        if not isinstance(value.tag, str):
            return f"{value.DESCRIPTOR.fields_by_name['tag'].full_name} is not valid UTF-8"
        text = text_damage(getattr(value, kind)) if kind in ("image", "tensor", "histogram", "loss_landscape") \
            else None
        text = text or (lost_field(value) if has_unknown_fields(value) else None)
        if text:
            return text
        if kind == "image":
            return _image_damage(value.image)
        if kind == "tensor":
            return tensor_array(value.tensor)[1]
        if kind == "histogram":
            return _histogram_damage(value.histogram, histogram or histogram_buckets(value.histogram))
        if kind == "loss_landscape":
            return _landscape_damage(value.loss_landscape)
        return None
    except Exception as exc:  # a check never raises: whatever it did not foresee is damage too
        return f"it cannot be read ({type(exc).__name__}: {exc})"
