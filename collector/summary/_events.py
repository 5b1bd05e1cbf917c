"""The Event bytes of recorded values: pack prepared values, assemble each record's events.

Pure functions the writer calls (:class:`collector.summary._writer.EventWriter`, on its
thread or in ``flush``/``close``): they take prepared values
(:mod:`collector.summary._values`) and return wire bytes; the only side effect is the
optional npy export of tensor values (:func:`export_npy`).

A record's summary Event is assembled from each value's own wire bytes (a repeated
message field is its elements, each key- and length-prefixed, in order), so histograms
can be encoded together, straight to bytes, without building protobuf objects; the
result equals ``Event(wall_time, step, summary=Summary(value=[...])).SerializeToString()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np

from collector.summary import _histogram
from collector.summary import _packing as packing
from collector.summary import _proto as proto

__all__ = ["LINEAGE_FIELD", "Record", "TensorExport", "values_nbytes", "pack_value", "record_events",
           "batch_histograms", "export_npy"]

#: Lineage plugin -> the LineageEvent field that holds its message.
LINEAGE_FIELD = {
    "train_lineage": "train_lineage",
    "eval_lineage": "evaluation_lineage",
    "dataset_graph": "dataset_graph",
    "custom_lineage_data": "user_defined_info",
}

#: One recorded event: (step, wall time, [(plugin, tag, prepared value), ...]).
Record = tuple[int, float, list[tuple[str, str, Any]]]
#: Called with (tag, step, array) for each tensor value packed (the npy export).
TensorExport = Callable[[str, int, np.ndarray], None]


def values_nbytes(values: Sequence[tuple[str, str, Any]]) -> int:
    """The bytes the array copies among prepared values take (the batching policy counts them)."""
    # A loop, not sum() over a generator: this runs at every record, and for the usual
    # few values the generator's set-up cost several times the additions.
    nbytes = 0
    for _, _, data in values:
        if type(data) is tuple:
            nbytes += data[0].nbytes
    return nbytes


def pack_value(plugin: str, tag: str, data: Any, step: int, export: TensorExport | None = None) -> Any:
    """The ``Summary.Value`` of one prepared value of a summary plugin (not graph or lineage).

    Parameters
    ----------
    plugin : {"scalar", "image", "tensor", "histogram", "landscape"}
    tag : str
    data
        The prepared value.
    step : int
        The record's step, for ``export``.
    export : callable, optional
        Called as ``export(tag, step, array)`` for a tensor value, after packing it.
    """
    if plugin == "scalar":
        value = packing.pack_scalar(data)
    elif plugin == "landscape":
        value = proto.Summary.Value(loss_landscape=data)
    else:
        arr, bf16 = data[0], data[1]
        if plugin == "histogram":
            value = packing.pack_histogram(arr)
        elif plugin == "image":
            value = packing.pack_image(arr)
        else:
            value = packing.pack_tensor(arr, bf16)
            if export is not None:
                export(tag, step, arr)
    value.tag = tag
    return value


def record_events(step: int, wall_time: float, values: Sequence[tuple[str, str, Any]],
                  histograms: Sequence[bytes] | None = None,
                  export: TensorExport | None = None) -> list[tuple[str, bytes]]:
    """The events of one record, as ``(file, Event or LineageEvent bytes)``; file is "summary" or "lineage".

    A graph is an Event of its own and each lineage value a LineageEvent of its own, in
    the order of ``values``; the other values make one summary Event, last.

    Parameters
    ----------
    step : int
    wall_time : float
    values : sequence of (plugin, tag, prepared value)
    histograms : sequence of bytes, optional
        The encoded ``Summary.Value`` of each histogram among ``values``, in order
        (:func:`batch_histograms`); None: encoded here.
    export : callable, optional
        See :func:`pack_value`.
    """
    summary: list[bytes | None] = []
    pending: list[tuple[int, str, np.ndarray]] = []
    events: list[tuple[str, bytes]] = []
    for plugin, tag, data in values:
        if plugin == "graph":
            events.append(("summary", proto.Event(wall_time=wall_time, step=step, graph_def=data).SerializeToString()))
        elif plugin in LINEAGE_FIELD:
            ev = proto.LineageEvent(wall_time=wall_time, step=step)
            getattr(ev, LINEAGE_FIELD[plugin]).CopyFrom(data)
            events.append(("lineage", ev.SerializeToString()))
        elif plugin == "histogram":
            pending.append((len(summary), tag, data[0]))
            summary.append(None)  # filled below, in its place
        else:
            summary.append(pack_value(plugin, tag, data, step, export).SerializeToString())
    if pending:
        encoded = histograms
        if encoded is None:
            encoded = _histogram.encode_histogram_values([(tag, arr) for _, tag, arr in pending])
        for (index, _, _), value in zip(pending, encoded):
            summary[index] = value
    if summary:
        # Event fields in number order: wall_time (1), step (2), then summary (5).
        head = proto.Event(wall_time=wall_time, step=step).SerializeToString()
        body = b"".join(_histogram.encode_len_field(1, value) for value in summary if value is not None)
        events.append(("summary", head + _histogram.encode_len_field(5, body)))
    return events


def batch_histograms(batch: Sequence[Record]) -> list[list[bytes] | None]:
    """The encoded histogram values of each record of a batch, all encoded together.

    Snapshots of one parameter across the batch are bucketed as one block, sorted in
    place (they are the records' private copies, written once); those in slab rows are
    used where they are. Returns, for each record, its histograms' bytes in order, or
    None for every record when the joint encoding failed: :func:`record_events` then
    encodes each record's own, so the error is reported with the record it concerns.
    """
    histograms = [(tag, data) for _, _, values in batch for plugin, tag, data in values if plugin == "histogram"]
    if not histograms:
        return [None] * len(batch)
    try:
        encoded = _histogram.encode_histogram_values(
            [(tag, data[0]) for tag, data in histograms], overwrite=True,
            slab_rows=[data[2:] if len(data) == 4 else None for _, data in histograms])
    except Exception:
        # (Some snapshots may be sorted by then: same buckets, the sum's last bits may differ.)
        return [None] * len(batch)
    out: list[list[bytes] | None] = []
    position = 0
    for _, _, values in batch:
        count = sum(1 for plugin, _, _ in values if plugin == "histogram")
        out.append(encoded[position:position + count])
        position += count
    return out


def export_npy(folder: str, tag: str, step: int, arr: np.ndarray) -> None:
    """Save a tensor value as ``{folder}/{url-quoted tag}_{step}.npy`` (the folder is created if missing)."""
    os.makedirs(folder, exist_ok=True)
    # quote(safe="") turns every "/" into %2F, so no tag can leave this folder.
    path = os.path.join(folder, f"{quote(tag, safe='')}_{step}.npy")
    np.save(path, arr, allow_pickle=False)
