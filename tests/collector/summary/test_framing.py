"""Record framing: byte-exact against an independent CRC32C and TFRecord layout."""

from __future__ import annotations

import struct

import pytest

from collector.summary._framing import encode_record, iter_records, masked_crc32c


def _crc32c_reference(data: bytes) -> int:
    """Bit-by-bit CRC32C (Castagnoli, reflected polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_crc32c_known_vector():
    # RFC 3720 test vector: 32 bytes of zeros -> 0x8A9136AA
    assert _crc32c_reference(bytes(32)) == 0x8A9136AA
    assert masked_crc32c(bytes(32)) == _mask(0x8A9136AA)


@pytest.mark.parametrize("payload", [b"", b"a", b"hello summary" * 50, bytes(range(256))])
def test_encode_record_is_tfrecord_layout(payload):
    rec = encode_record(payload)
    header = struct.pack("<Q", len(payload))
    expected = header + struct.pack("<I", _mask(_crc32c_reference(header))) + payload
    expected += struct.pack("<I", _mask(_crc32c_reference(payload)))
    assert rec == expected


def test_iter_records_reads_back_in_order(tmp_path):
    payloads = [b"one", b"", b"three" * 100]
    path = tmp_path / "f.summary.1"
    path.write_bytes(b"".join(encode_record(p) for p in payloads))
    assert [p for _, p in iter_records(path)] == payloads


def test_torn_tail_keeps_prefix_and_reports(tmp_path):
    path = tmp_path / "f.summary.1"
    data = encode_record(b"first") + encode_record(b"second")
    path.write_bytes(data[:-3])
    issues = []
    assert [p for _, p in iter_records(path, issues)] == [b"first"]
    assert len(issues) == 1 and issues[0].offset == len(encode_record(b"first"))
    assert "torn" in issues[0].reason


def test_payload_crc_mismatch_stops(tmp_path):
    path = tmp_path / "f.summary.1"
    good = encode_record(b"first")
    bad = bytearray(encode_record(b"second"))
    bad[14] ^= 0xFF  # inside the payload
    path.write_bytes(good + bytes(bad) + encode_record(b"third"))
    issues = []
    assert [p for _, p in iter_records(path, issues)] == [b"first"]
    assert "payload CRC" in issues[0].reason


def test_header_crc_mismatch_stops(tmp_path):
    path = tmp_path / "f.summary.1"
    bad = bytearray(encode_record(b"x"))
    bad[0] ^= 0x01  # the length
    path.write_bytes(encode_record(b"ok") + bytes(bad))
    issues = []
    assert [p for _, p in iter_records(path, issues)] == [b"ok"]
    assert "header CRC" in issues[0].reason
