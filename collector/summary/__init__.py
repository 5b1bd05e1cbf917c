"""Summaries: the file format, ``SummaryRecord``, the reader and the summary operators.

The summary operators record a value from anywhere in the training code with one line
(``summary.histogram("fc1_out", h)`` in a ``forward``); they buffer into the open
:class:`SummaryRecord` and cost nothing when none is open (see
:mod:`collector.summary._operators` for the rules).

Inside, bottom to top: ``_proto`` (message classes built from ``_protos/*.proto``),
``_framing`` (the record framing with masked CRC32C: the one module that reads and
writes it), ``_files`` (file names, lazy creation, size limit), ``_histogram`` and
``_packing`` (values to messages and wire bytes), ``_graph`` (a network as a
GraphProto), ``_slabs`` (the memory of histogram snapshots), ``_values`` (validate and
copy a value on the caller's thread), ``_events`` (a record's Event bytes, the npy
export), ``_writer`` (``EventWriter``: the files, the writer thread, batching and write
errors), ``_record`` (``SummaryRecord``, the API over them), ``_reader`` and ``_operators``;
``_tensorboard`` (``TensorBoardWriter``: our events as TensorBoard's, with the optional
``tensorboard`` package) beside them.

Examples
--------
>>> import tempfile, torch
>>> from collector import summary, SummaryRecord, SummaryReader
>>> summary.scalar("loss", torch.tensor(0.5))  # nothing open: returns at once
>>> with SummaryRecord(tempfile.mkdtemp()) as rec:
...     summary.scalar("loss", torch.tensor(0.25))
...     _ = rec.record(1)
>>> SummaryReader(rec.log_dir).scalars()["loss"][1].tolist()
[0.25]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["scalar", "tensor", "image", "histogram", "is_recording",
           "SummaryRecord", "PLUGINS", "SummaryReader", "read_events", "summary_files",
           "SummaryReadError", "CorruptRecordError", "RecordIssue", "TensorBoardWriter",
           "VERSION", "EventFile", "lineage_filename", "discard_pending", "custom_lineage", "is_lineage_file",
           "open_record"]

# Loaded on first use (PEP 562): ``collector.proto`` and the reader need only the message
# classes, not SummaryRecord's torch and fx tracer.
_WHERE = {
    **dict.fromkeys(("scalar", "tensor", "image", "histogram", "is_recording"), "collector.summary._operators"),
    **dict.fromkeys(("SummaryRecord", "PLUGINS", "open_record"), "collector.summary._record"),
    **dict.fromkeys(("SummaryReader", "read_events", "summary_files"), "collector.summary._reader"),
    **dict.fromkeys(("SummaryReadError", "CorruptRecordError", "RecordIssue"), "collector.summary._framing"),
    # what the sibling subpackages (lineage, collect) use
    **dict.fromkeys(("VERSION", "EventFile", "lineage_filename"), "collector.summary._files"),
    "discard_pending": "collector.summary._operators",
    "custom_lineage": "collector.summary._packing",
    "is_lineage_file": "collector.summary._reader",
    # needs the optional tensorboard package, imported only here (on first use)
    "TensorBoardWriter": "collector.summary._tensorboard",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'collector.summary' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from collector.summary._files import VERSION, EventFile, lineage_filename
    from collector.summary._framing import CorruptRecordError, RecordIssue, SummaryReadError
    from collector.summary._operators import discard_pending, histogram, image, is_recording, scalar, tensor
    from collector.summary._packing import custom_lineage
    from collector.summary._reader import SummaryReader, is_lineage_file, read_events, summary_files
    from collector.summary._record import PLUGINS, SummaryRecord, open_record
    from collector.summary._tensorboard import TensorBoardWriter
