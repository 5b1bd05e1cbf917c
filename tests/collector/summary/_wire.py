"""Summary files read by hand, independently of the reader: the record framing (a little-endian uint64
length, its masked CRC-32C, the payload, the payload's masked CRC-32C) and protobuf's wire format (varint
keys, wire types 0, 1, 2 and 5), with the field numbers of MindSpore's summary.proto and anf_ir.proto."""

from __future__ import annotations

import struct
from collections.abc import Iterator


def varint(b: bytes, i: int) -> tuple[int, int]:
    """The varint at ``b[i:]`` and the index after it."""
    shift = result = 0
    while True:
        byte = b[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def records(data: bytes) -> Iterator[bytes]:
    """The payloads of a summary file's records, in order (the CRCs not checked)."""
    pos = 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 8], "little")
        yield data[pos + 12:pos + 12 + n]
        pos += 16 + n


def fields(msg: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(number, wire type, value)`` of each field of one message: an int for types 0, 1 and 5 (the raw
    little-endian bits for 1 and 5), the bytes for type 2."""
    i = 0
    while i < len(msg):
        key, i = varint(msg, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(msg, i)
            yield number, wire, value
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield number, wire, int.from_bytes(msg[i:i + size], "little")
            i += size
        elif wire == 2:
            n, i = varint(msg, i)
            yield number, wire, msg[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire} at byte {i}")


def field(msg: bytes, number: int) -> list[int | bytes]:
    """Every value of field ``number`` in ``msg``."""
    return [v for n, _, v in fields(msg) if n == number]


def summary_values(payload: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """``(step, tag, Value bytes)`` of an Event's Summary (Event: step 2, summary 5; Summary: value 1;
    Value: tag 1)."""
    steps = field(payload, 2)
    for summary in field(payload, 5):
        assert isinstance(summary, bytes)
        for value in field(summary, 1):
            assert isinstance(value, bytes)
            (tag,) = field(value, 1)
            assert isinstance(tag, bytes)
            yield int(steps[0]) if steps else 0, tag, value


def tensor_values(tensor: bytes) -> list[float]:
    """A TensorProto's values: float_data (3) or double_data (6), packed."""
    out: list[float] = []
    for number, fmt in ((3, "<f"), (6, "<d")):
        for packed in field(tensor, number):
            assert isinstance(packed, bytes)
            out += [v for (v,) in struct.iter_unpack(fmt, packed)]
    return out
