"""``SummaryRecord``: buffer values, then write them as one Event per ``record(step)``."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import numpy as np
import torch

from collector.common import BackgroundWriter
from collector.common._validation import (
    InstanceOf,
    Interval,
    Options,
    Predicate,
    check_param,
)
from collector.summary import _histogram
from collector.summary import _packing as packing
from collector.summary import _proto as proto
from collector.summary._files import EventFileSet

logger = logging.getLogger(__name__)

__all__ = ["SummaryRecord", "PLUGINS"]

_TENSOR_PLUGINS = ("scalar", "image", "tensor", "histogram")
_MESSAGE_PLUGINS = {
    "graph": ("GraphProto", "summary"),
    "train_lineage": ("TrainLineage", "lineage"),
    "eval_lineage": ("EvaluationLineage", "lineage"),
    "dataset_graph": ("DatasetGraph", "lineage"),
    "custom_lineage_data": ("UserDefinedInfo", "lineage"),
    "landscape": ("LossLandscape", "summary"),
}
_LINEAGE_FIELD = {
    "train_lineage": "train_lineage",
    "eval_lineage": "evaluation_lineage",
    "dataset_graph": "dataset_graph",
    "custom_lineage_data": "user_defined_info",
}
PLUGINS = _TENSOR_PLUGINS + tuple(_MESSAGE_PLUGINS) + ("LANDSCAPE",)
_PLUGIN_SET = frozenset(PLUGINS)
_FLOAT_DTYPES = frozenset((torch.float16, torch.float32, torch.float64))  # histogram fast path

_open_lock = threading.Lock()
_open_record: weakref.ref | None = None

# Recorded events wait in a batch until one of these is reached (or flush/close), then
# the writer thread encodes and writes the whole batch. Encoding each record as it came
# cost two to three times more: every one ran with cold caches between training steps
# and woke the writer thread to compete with the training loop for the GIL. The limits
# keep memory bounded (values are private copies) and the files at most a few seconds
# behind the training, as a viewer of a running job expects.
BATCH_RECORDS = 512
BATCH_BYTES = 32 << 20
BATCH_SECONDS = 2.0
# Histogram snapshots of CPU float tensors are copied into rows of 2-D "slabs" of at most
# this size, one per dtype and element count: a batch's snapshots of one parameter are
# then one block that the writer sorts in place (_histogram.histogram_stats_many), instead
# of being stacked into fresh memory first -- fresh pages cost more than the sort. (Below
# 4 MiB, where numpy asks for transparent huge pages, whose allocation can stall.)
SLAB_BYTES = 2 << 20


class SummaryRecord:
    """Write scalars, images, tensors, histograms, graphs, lineage and landscapes.

    Values added with :meth:`add_value` are buffered and written by :meth:`record`
    as one Event at the given step. Files are created lazily in ``log_dir``:
    ``{prefix}.out.events.summary.{seconds}.{host}{suffix}`` for summary data and
    ``...{host}_lineage`` for lineage, both made read-only when closed. Recorded
    events are encoded and written in batches: a background thread writes a batch when
    it holds ``BATCH_RECORDS`` records or ``BATCH_BYTES`` bytes of values, or when its
    oldest record is ``BATCH_SECONDS`` old (checked at each record; the running thread
    also looks that often);
    :meth:`flush` and :meth:`close` write the rest themselves, since their caller waits
    for it anyway (handing it to the thread would only add two thread wake-ups). The
    thread starts with the first batch handed to it; until then a batch that grew old
    is handed over by the next :meth:`record`.

    Only one SummaryRecord may be open at a time in a process: two writers corrupt
    each other's data (MindSpore's notice), so a second one is refused.

    Parameters
    ----------
    log_dir : str or os.PathLike
        Directory for the files; created if missing.
    file_prefix : str, default="events"
    file_suffix : str, default="_MS"
    network : torch.nn.Module, optional
        Its graph is written with the first record.
    max_file_size : int, optional
        Largest size of each file in bytes; a record that would pass it is not
        written. None means no limit.
    raise_exception : bool, default=False
        If True, an OSError/RuntimeError while recording is raised (from the next
        ``record``, ``flush`` or ``close``, since writing happens in the background);
        if False it is logged.
    export_options : dict, optional
        ``{"tensor_format": "npy"}`` also writes every tensor value as
        ``export_{seconds}/tensor/{url-quoted tag}_{step}.npy`` under ``log_dir``.

    Examples
    --------
    >>> import tempfile
    >>> from collector import SummaryRecord
    >>> with SummaryRecord(tempfile.mkdtemp()) as rec:
    ...     rec.add_value("scalar", "loss", 0.25)
    ...     rec.record(1)
    True
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        file_prefix: str = "events",
        file_suffix: str = "_MS",
        network: Any = None,
        max_file_size: int | None = None,
        raise_exception: bool = False,
        export_options: dict | None = None,
    ) -> None:
        caller = "SummaryRecord"
        check_param("log_dir", log_dir, ["path"], caller=caller)
        check_param("file_prefix", file_prefix, [str], caller=caller)
        check_param("file_suffix", file_suffix, [str], caller=caller)
        check_param("max_file_size", max_file_size, [Interval(int, 0, None), None], caller=caller)
        check_param("raise_exception", raise_exception, ["boolean"], caller=caller)
        _check_network("network", network, caller)
        self._export_format = _check_export_options(export_options, caller)
        no_sep = Predicate(lambda v: not any(c in v for c in ("/", os.sep, "\0")), "a str without path separators")
        check_param("file_prefix", file_prefix, [no_sep], caller=caller)
        check_param("file_suffix", file_suffix, [no_sep], caller=caller)

        global _open_record
        with _open_lock:
            other = _open_record() if _open_record is not None else None
            if other is not None and not other._closed:
                raise RuntimeError(
                    f"Another SummaryRecord is already open (log_dir={other.log_dir!r}). Only one may be open at "
                    "a time: two writers corrupt each other's data. Close the other one first (use `with` or close())."
                )
            os.makedirs(log_dir, exist_ok=True)
            self._log_dir = os.path.realpath(os.fspath(log_dir))
            self._files = EventFileSet(self._log_dir, file_prefix, file_suffix, max_file_size)
            self._closed = False
            _open_record = weakref.ref(self)
        self._raise = raise_exception
        self._network = network
        self._graph_written = False
        self._mode = "train"
        self._lock = threading.Lock()
        self._buffer: dict[tuple[str, str], tuple[str, str, Any]] = {}
        # Filled by the collector.summary._operators operators, keyed (plugin, name): newest value wins.
        self._operator_values: dict[tuple[str, str], tuple[str, str, Any]] = {}
        self._errors: list[BaseException] = []
        # Recorded events not yet handed to the writer: (step, wall_time, values).
        self._batch: list[tuple[int, float, list]] = []
        self._batch_bytes = 0
        self._batch_since = 0.0
        # Held while a batch is taken and written: batches reach the files whole and in order,
        # whichever thread writes them.
        self._write_lock = threading.Lock()
        # (dtype, element count) -> [2-D slab, rows used] for the batch being recorded.
        self._slabs: dict[tuple[np.dtype, int], list] = {}
        self._writer = BackgroundWriter("summary-writer", on_error=self._on_error,
                                        idle=(BATCH_SECONDS, self._write_stale_batch))
        _live_records.add(self)

    # ------------------------------------------------------------------ properties
    @property
    def log_dir(self) -> str:
        """The absolute path of the summary directory."""
        return self._log_dir

    @property
    def summary_file(self) -> str:
        """Path of the summary file (it exists once something was written)."""
        return self._files.summary.path

    @property
    def lineage_file(self) -> str:
        """Path of the lineage file (it exists once lineage was written)."""
        return self._files.lineage.path

    @property
    def mode(self) -> str:
        return self._mode

    # ------------------------------------------------------------------ API
    def set_mode(self, mode: str) -> None:
        """Set 'train' or 'eval'; in 'eval' values from summary operators are not recorded."""
        check_param("mode", mode, [Options(["train", "eval"])], caller="SummaryRecord.set_mode")
        self._mode = mode

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        """Buffer a value to be written by the next :meth:`record`.

        Parameters
        ----------
        plugin : str
            One of 'scalar', 'image', 'tensor', 'histogram' (value: torch tensor, numpy
            array or Python number), 'graph' (proto.GraphProto), 'train_lineage'
            (proto.TrainLineage), 'eval_lineage' (proto.EvaluationLineage),
            'dataset_graph' (proto.DatasetGraph), 'custom_lineage_data'
            (proto.UserDefinedInfo or a dict of str to str/int/float), 'landscape' or
            'LANDSCAPE' (proto.LossLandscape or an object with ``to_proto()``).
        name : str
            The tag, non-empty.
        value
            See ``plugin``.
        """
        if plugin not in _PLUGIN_SET or type(name) is not str or not name:  # fast path: valid input
            caller = "SummaryRecord.add_value"
            check_param("plugin", plugin, [Options(PLUGINS)], caller=caller)
            check_param("name", name, ["nonempty_str"], caller=caller)
        plugin = "landscape" if plugin == "LANDSCAPE" else plugin
        data = self._prepare(plugin, name, value)
        with self._lock:
            self._put(plugin, name, data)

    def _put(self, plugin: str, name: str, data: Any) -> None:
        """Buffer a prepared value for the next record (``_lock`` held); the last one of a tag wins."""
        key = (plugin, name)
        if key in self._buffer:
            logger.warning("add_value: %s %r was already added for this step; the last value is kept", plugin, name)
        self._buffer[key] = (plugin, name, data)

    def _add_histograms(self, items: list[tuple[str, torch.Tensor]]) -> None:
        """``add_value("histogram", tag, tensor)`` for each ``(tag, tensor)``, in fewer steps.

        SummaryCollector's parameter histograms, at every collection: CPU float tensors
        are copied into their slab rows under one lock; anything else goes through
        :meth:`add_value`.
        """
        slow = []
        rows = []
        with self._lock:
            for tag, tensor in items:
                if tensor.device.type == "cpu" and tensor.dtype in _FLOAT_DTYPES and tensor.numel() and tag:
                    src = tensor.detach().numpy()
                    rows.append((tag, src, *self._slab_row(src)))
                else:
                    slow.append((tag, tensor))
        for _, src, row, _, _ in rows:
            np.copyto(row, src.reshape(-1))  # outside the lock: the writer thread never waits for copies
        with self._lock:
            for tag, src, row, slab, index in rows:
                self._put("histogram", tag, (row.reshape(src.shape), False, slab, index))
        for tag, tensor in slow:
            self.add_value("histogram", tag, tensor)

    def record(self, step: int, train_network: Any = None, plugin_filter: Callable[[str], bool] | None = None) -> bool:
        """Write everything buffered as one Event at ``step``; return whether it was queued."""
        caller = "SummaryRecord.record"
        if type(step) is not int:
            check_param("step", step, ["int"], caller=caller)
        # isinstance/callable first: SummaryCollector calls this at every collection, and
        # check_param is only needed to word the error.
        if train_network is not None and not isinstance(train_network, torch.nn.Module):
            _check_network("train_network", train_network, caller)
        if plugin_filter is not None and not callable(plugin_filter):
            check_param("plugin_filter", plugin_filter, ["callable"], caller=caller)
        if self._closed:
            logger.error("SummaryRecord.record(step=%d) called after close(); nothing written", step)
            return False
        self._raise_pending()
        with self._lock:
            buffered, self._buffer = self._buffer, {}
            operator_values, self._operator_values = self._operator_values, {}
        if self._mode == "train" and operator_values:  # summary operators (collector.summary._operators)
            for plugin, name in buffered.keys() & operator_values.keys():
                logger.warning("%r has duplicate values (add_value and a summary operator). Only the newest one, "
                               "the operator's, will be recorded.", f"{name}/{plugin}")
            buffered.update(operator_values)
        values = list(buffered.values())
        network = train_network if train_network is not None else self._network
        if network is not None and not self._graph_written:
            graph = _build_graph(network)
            self._graph_written = True
            if graph is not None:
                values.insert(0, ("graph", "graph", graph))
        if plugin_filter is not None:
            values = [v for v in values if plugin_filter(v[0])]
        if values:
            nbytes = sum(data[0].nbytes for _, _, data in values if type(data) is tuple)
            now = time.monotonic()
            with self._lock:
                if not self._batch:
                    self._batch_since = now
                # The wall time of the record() call, not of the (later) write.
                self._batch.append((int(step), time.time(), values))
                self._batch_bytes += nbytes
                full = (len(self._batch) >= BATCH_RECORDS or self._batch_bytes >= BATCH_BYTES
                        or now - self._batch_since >= BATCH_SECONDS)
            if full:
                self._hand_off()
        return not self._errors

    def flush(self) -> None:
        """Wait until everything recorded so far is written and flushed to the OS."""
        if self._closed:
            return
        # The batches handed to the writer thread before (record() hands them over from the
        # recording thread, the one that flushes), then one it may write while idle.
        self._writer.join()
        with self._write_lock:
            self._write_batch_locked(self._take_batch())
            for f in self._files.files():
                f.flush()
        self._raise_pending()

    def close(self) -> None:
        """Flush, close both files (read-only afterwards) and stop the writer thread."""
        if self._closed:
            return
        try:
            self._writer.join()
            with self._write_lock:
                self._write_batch_locked(self._take_batch())
        finally:
            self._writer.stop()  # the thread ends after the jobs queued before (an idle batch included)
            for f in self._files.files():
                try:
                    f.close()
                except OSError as exc:
                    self._on_error(exc)
            self._closed = True
            _live_records.discard(self)
        self._raise_pending()

    def __enter__(self) -> SummaryRecord:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:  # an unclosed record still leaves complete files
        try:
            if not getattr(self, "_closed", True):
                self._raise = False
                self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    # ------------------------------------------------------------------ internals
    def _prepare(self, plugin: str, name: str, value: Any) -> Any:
        """Validate on the caller's thread and take a private copy of the value."""
        if plugin == "scalar":  # fast paths: one number needs no numpy copy
            if type(value) is float:
                return value
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                return float(value.item())
        elif plugin == "histogram" and isinstance(value, torch.Tensor) and value.dtype in _FLOAT_DTYPES \
                and value.device.type == "cpu":
            # What to_numpy and the dtype check below come to for a CPU float tensor (the
            # parameters SummaryCollector collects at every collection), in fewer calls,
            # copied into a slab row.
            return self._snapshot(value.detach().numpy())
        what = f"add_value({plugin!r}, {name!r})"
        if plugin in _TENSOR_PLUGINS:
            arr, bf16 = packing.to_numpy(value, what=what)
            if plugin == "scalar":
                return packing.check_scalar(arr, tag=name)
            if plugin == "image":
                packing.check_image(arr, tag=name)
            if plugin == "histogram" and not np.issubdtype(arr.dtype, np.number) and arr.dtype != np.bool_:
                raise TypeError(f"{what}: a histogram needs numeric values, got dtype {arr.dtype}")
            return (arr, bf16)
        type_name, _ = _MESSAGE_PLUGINS[plugin]
        cls = getattr(proto, type_name)
        if plugin == "custom_lineage_data" and isinstance(value, dict):
            value = _user_defined_info(value)
        if plugin == "landscape" and not isinstance(value, cls) and hasattr(value, "to_proto"):
            value = value.to_proto()
        if not isinstance(value, cls):
            raise TypeError(
                f"{what}: the value must be a collector.proto.{type_name}"
                + (" or a dict of str to str/int/float" if plugin == "custom_lineage_data" else "")
                + (" or an object with to_proto() (landscape.Landscape)" if plugin == "landscape" else "")
                + f". Got {type(value).__name__} instead."
            )
        copy = cls()
        copy.CopyFrom(value)
        return copy

    def _snapshot(self, src: np.ndarray) -> tuple:
        """A histogram value: a private copy of ``src`` in the next free row of its slab (see
        ``SLAB_BYTES``), as ``(copy, False, slab, row index)``."""
        if src.size == 0:
            return (src.copy(), False)
        with self._lock:
            row, slab, index = self._slab_row(src)
        np.copyto(row, src.reshape(-1))
        return (row.reshape(src.shape), False, slab, index)

    def _slab_row(self, src: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """The next free row of ``src``'s slab (a new slab when none is left), the slab and
        the row's index (``_lock`` held)."""
        n = src.size
        key = (src.dtype, n)
        slab = self._slabs.get(key)
        if slab is None or slab[1] == len(slab[0]):
            rows = max(1, min(BATCH_RECORDS, SLAB_BYTES // src.nbytes))
            # np.empty: rows not used yet cost no memory.
            slab = self._slabs[key] = [np.empty((rows, n), dtype=src.dtype), 0]
        index = slab[1]
        slab[1] += 1
        return slab[0][index], slab[0], index

    def _take_batch(self) -> list[tuple[int, float, list]]:
        with self._lock:
            batch, self._batch, self._batch_bytes = self._batch, [], 0
            if batch:
                # The next batch's snapshots go to new slabs: this batch's are sorted in place.
                self._slabs = {}
        return batch

    def _hand_off(self) -> None:
        """Queue the batch of recorded events for the writer thread."""
        batch = self._take_batch()
        if batch:
            self._writer.submit(lambda: self._write_batch(batch))

    def _write_stale_batch(self) -> None:
        """Runs on the writer thread when it was idle for ``BATCH_SECONDS``: write what waits."""
        with self._write_lock:
            with self._lock:
                stale = bool(self._batch) and time.monotonic() - self._batch_since >= BATCH_SECONDS
            if stale:
                self._write_batch_locked(self._take_batch())

    def _write_batch(self, batch: list[tuple[int, float, list]]) -> None:
        with self._write_lock:
            self._write_batch_locked(batch)

    def _write_batch_locked(self, batch: list[tuple[int, float, list]]) -> None:
        """Write the records of a batch, in order (``_write_lock`` held).

        The histograms of every record are encoded together; each record is then
        framed and written on its own, so an error (a full file, say) loses only the
        records it concerns, as when they were written one by one.
        """
        histograms = [(tag, data) for _, _, values in batch for plugin, tag, data in values if plugin == "histogram"]
        items = [(tag, data[0]) for tag, data in histograms]
        encoded: list[bytes] | None = None
        if items:
            try:
                # overwrite: the snapshots are this record's private copies, written once; most are
                # rows of a slab (data[2], row data[3]), bucketed in place.
                encoded = _histogram.encode_histogram_values(
                    items, overwrite=True, slab_rows=[data[2:] if len(data) == 4 else None for _, data in histograms])
            except Exception:  # noqa: BLE001 - encoded again per record, where the error is reported
                # (Some snapshots may be sorted by then: same buckets, the sum's last bits may differ.)
                encoded = None
        position = 0
        for step, wall_time, values in batch:
            count = sum(1 for plugin, _, _ in values if plugin == "histogram")
            mine = encoded[position:position + count] if encoded is not None else None
            position += count
            try:
                self._write(step, wall_time, values, mine)
            except Exception as exc:  # noqa: BLE001 - reported like a failed job
                self._on_error(exc)

    def _write(self, step: int, wall_time: float, values: list, histograms_encoded: list[bytes] | None = None) -> None:
        """Pack, serialize, frame and write one record (``_write_lock`` held).

        The Summary is assembled from each value's own wire bytes (a repeated message
        field is its elements, each key- and length-prefixed, in order), so histograms can
        be encoded together without building protobuf objects; the Event bytes are those
        of ``Event(wall_time, step, summary=Summary(value=[...]))`` serialized whole.
        """
        summary: list[bytes | None] = []
        histograms: list[tuple[int, str, np.ndarray]] = []
        events: list[tuple[str, bytes]] = []
        for plugin, tag, data in values:
            if plugin == "graph":
                events.append(("summary", proto.Event(wall_time=wall_time, step=step, graph_def=data).SerializeToString()))
            elif plugin in _LINEAGE_FIELD:
                ev = proto.LineageEvent(wall_time=wall_time, step=step)
                getattr(ev, _LINEAGE_FIELD[plugin]).CopyFrom(data)
                events.append(("lineage", ev.SerializeToString()))
            elif plugin == "histogram":
                histograms.append((len(summary), tag, data[0]))
                summary.append(None)  # filled below, in its place
            else:
                summary.append(self._pack(plugin, tag, data, step).SerializeToString())
        if histograms:
            encoded = histograms_encoded
            if encoded is None:
                encoded = _histogram.encode_histogram_values([(tag, arr) for _, tag, arr in histograms])
            for (index, _, _), value in zip(histograms, encoded):
                summary[index] = value
        if summary:
            # Event fields in number order: wall_time (1), step (2), then summary (5).
            head = proto.Event(wall_time=wall_time, step=step).SerializeToString()
            body = b"".join(_histogram.encode_len_field(1, value) for value in summary)
            events.append(("summary", head + _histogram.encode_len_field(5, body)))
        for kind, payload in events:
            (self._files.summary if kind == "summary" else self._files.lineage).write(payload)

    def _pack(self, plugin: str, tag: str, data: Any, step: int):
        if plugin == "scalar":
            value = packing.pack_scalar(data)
        elif plugin == "landscape":
            value = proto.Summary.Value(loss_landscape=data)
        else:
            arr, bf16 = data
            if plugin == "histogram":
                value = packing.pack_histogram(arr)
            elif plugin == "image":
                value = packing.pack_image(arr)
            else:
                value = packing.pack_tensor(arr, bf16)
                if self._export_format == "npy":
                    self._export_npy(tag, step, arr)
        value.tag = tag
        return value

    def _export_npy(self, tag: str, step: int, arr: np.ndarray) -> None:
        folder = os.path.join(self._log_dir, f"export_{self._files.seconds}", "tensor")
        os.makedirs(folder, exist_ok=True)
        # quote(safe="") turns every "/" into %2F, so no tag can leave this folder.
        path = os.path.join(folder, f"{quote(tag, safe='')}_{step}.npy")
        np.save(path, arr, allow_pickle=False)

    def _on_error(self, exc: BaseException) -> None:
        if self._raise:
            self._errors.append(exc)
        else:
            logger.error("SummaryRecord (%s): %s", self._log_dir, exc)

    def _raise_pending(self) -> None:
        if self._errors:
            exc = self._errors.pop(0)
            self._errors.clear()
            if isinstance(exc, (OSError, RuntimeError)):
                raise exc
            raise RuntimeError(f"SummaryRecord failed while writing: {exc!r}") from exc


def _check_network(name: str, network: Any, caller: str) -> None:
    if network is None:
        return
    import torch

    check_param(name, network, [InstanceOf(torch.nn.Module, description="a torch.nn.Module"), None], caller=caller)


def _check_export_options(options: dict | None, caller: str) -> str | None:
    check_param("export_options", options, [dict, None], caller=caller)
    if not options:
        return None
    for key in options:
        check_param("export_options key", key, [Options(["tensor_format"])], caller=caller)
    check_param("export_options['tensor_format']", options["tensor_format"], [Options(["npy"]), None], caller=caller)
    return options["tensor_format"]


def _user_defined_info(data: dict):
    """Validate a dict of custom lineage and pack it as MindSpore does (one user_info entry each)."""
    from collector.lineage._build import custom_lineage

    for key, value in data.items():
        check_param("custom_lineage_data key", key, ["nonempty_str"], caller="SummaryRecord.add_value")
        check_param(f"custom_lineage_data[{key!r}]", value, [str, "int", float], caller="SummaryRecord.add_value")
    return custom_lineage(data)


def _build_graph(network: Any):
    """The network's GraphProto, or None (with one log line) while no builder exists."""
    try:
        from collector.summary._graph import (
            build_graph,  # the graph issue provides this
        )
    except ImportError:
        logger.info("Graph collection is not available yet in this version; no graph was written.")
        return None
    return build_graph(network)


_live_records: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close records left open so the process exits with complete files."""
    for rec in list(_live_records):
        try:
            rec._raise = False
            rec.close()
        except Exception:  # noqa: BLE001
            pass
