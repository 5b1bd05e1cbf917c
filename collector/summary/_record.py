"""``SummaryRecord``: buffer values, then write them as one Event per ``record(step)``.

A thin API: values are validated and copied by :mod:`collector.summary._values` (on the
caller's thread), packed into Event bytes by :mod:`collector.summary._events` and
written in batches by :class:`collector.summary._writer.EventWriter`.

The summary operators (:mod:`collector.summary`) buffer into *the open
record*: :data:`open_record_ref` (read on their fast path), :func:`open_record` and
:func:`operator_record` (the open record while it takes their values).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from collector.common import (
    InstanceOf,
    Interval,
    Options,
    Predicate,
    check_directory,
    check_param,
)
from collector.summary import _writer
from collector.summary._graph import build_graph
from collector.summary._slabs import SnapshotSlabs
from collector.summary._values import (
    FLOAT_DTYPES,
    PLUGIN_SET,
    PLUGINS,
    TENSOR_PLUGINS,
    prepare_value,
)
from collector.summary._writer import EventWriter

logger = logging.getLogger(__name__)

_OPERATOR_PLUGINS = frozenset(TENSOR_PLUGINS)

__all__ = ["SummaryRecord", "PLUGINS", "open_record", "open_record_ref", "operator_record"]

# Reentrant: close() takes it too, and a record's finalizer (which closes it) may run from
# the garbage collector while this thread constructs another record under the lock.
_open_lock = threading.RLock()

#: A weak reference to the open SummaryRecord (at most one is open per process), or None
#: when none is open. Set by the constructor, cleared by :meth:`SummaryRecord.close`; the
#: referent may still be closed or gone, so use :func:`open_record` unless a plain global
#: read matters: the summary operators test ``open_record_ref is not None`` first, their
#: whole cost when nothing records (and a guard torch.compile can trace).
open_record_ref: weakref.ref | None = None


def open_record() -> SummaryRecord | None:
    """The SummaryRecord that is open in this process, or None."""
    ref = open_record_ref
    rec = ref() if ref is not None else None
    return rec if rec is not None and not rec._closed else None


def operator_record() -> SummaryRecord | None:
    """The open SummaryRecord if it takes summary operators' values now (it is in train mode), or None.

    What a summary operator buffers into, after its ``open_record_ref is not None`` test.
    """
    ref = open_record_ref
    rec = ref() if ref is not None else None
    if rec is None or rec._closed or rec._mode != "train":
        return None
    return rec


class SummaryRecord:
    """Write scalars, images, tensors, histograms, graphs, lineage and landscapes.

    Values added with :meth:`add_value` are buffered and written by :meth:`record`
    as one Event at the given step. Files are created lazily in ``log_dir``:
    ``{prefix}.out.events.summary.{seconds}.{host}{suffix}`` for summary data and
    ``...{host}_lineage`` for lineage, both made read-only when closed. Recorded
    events are encoded and written in batches: a background thread writes a batch when
    it holds ``BATCH_RECORDS`` records or ``BATCH_BYTES`` bytes of values, or when its
    oldest record is ``BATCH_SECONDS`` old (see :mod:`collector.summary._writer`);
    :meth:`flush` and :meth:`close` write the rest themselves.

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
    tensorboard_dir : str or os.PathLike, optional
        Also write everything recorded as TensorBoard events in this directory, as it
        is written (see :class:`collector.summary.TensorBoardWriter` for what becomes
        what); needs the ``tensorboard`` package. Not MindSpore's: a keyword of ours.

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
        *,
        tensorboard_dir: str | os.PathLike | None = None,
    ) -> None:
        caller = "SummaryRecord"
        check_param("tensorboard_dir", tensorboard_dir, [None, "path"], caller=caller)
        check_directory("log_dir", log_dir, caller=caller,
                        hint="pass the folder the summary files go to (a file of that name is in the way).")
        check_param("file_prefix", file_prefix, [str], caller=caller)
        check_param("file_suffix", file_suffix, [str], caller=caller)
        check_param("max_file_size", max_file_size, [Interval(int, 0, None), None], caller=caller)
        check_param("raise_exception", raise_exception, ["boolean"], caller=caller)
        _check_network("network", network, caller)
        export_format = _check_export_options(export_options, caller)
        no_sep = Predicate(lambda v: not any(c in v for c in ("/", os.sep, "\0")), "a str without path separators")
        check_param("file_prefix", file_prefix, [no_sep], caller=caller)
        check_param("file_suffix", file_suffix, [no_sep], caller=caller)

        # A batch holds at most BATCH_RECORDS records, so a slab needs no more rows.
        self._slabs = SnapshotSlabs(max_rows=_writer.BATCH_RECORDS)
        global open_record_ref
        with _open_lock:
            other = open_record()
            if other is not None:
                raise RuntimeError(
                    f"Another SummaryRecord is already open (log_dir={other.log_dir!r}). Only one may be open at "
                    "a time: two writers corrupt each other's data. Close the other one first (use `with` or close())."
                )
            os.makedirs(log_dir, exist_ok=True)
            self._log_dir = os.path.realpath(os.fspath(log_dir))
            mirror = None
            if tensorboard_dir is not None:
                # optional dependency: tensorboard is imported only when its files are asked for
                from collector.summary._tensorboard import TensorBoardWriter

                mirror = TensorBoardWriter(tensorboard_dir)
            self._writer = EventWriter(self._log_dir, file_prefix, file_suffix, max_file_size,
                                       raise_exception=raise_exception, export_format=export_format,
                                       on_batch_taken=self._slabs.reset, mirror=mirror)
            self._closed = False
            open_record_ref = weakref.ref(self)
        self._network = network
        self._graph_written = False
        self._mode = "train"
        # Guards the two buffers below (filled from any thread, emptied by record()).
        self._lock = threading.Lock()
        self._buffer: dict[tuple[str, str], tuple[str, str, Any]] = {}
        # Filled by the summary operators (buffer_operator_value), keyed (plugin, name): newest value wins.
        self._operator_values: dict[tuple[str, str], tuple[str, str, Any]] = {}
        _live_records.add(self)

    # ------------------------------------------------------------------ properties
    @property
    def log_dir(self) -> str:
        """The absolute path of the summary directory."""
        return self._log_dir

    @property
    def summary_file(self) -> str:
        """Path of the summary file (it exists once something was written)."""
        return self._writer.summary_path

    @property
    def lineage_file(self) -> str:
        """Path of the lineage file (it exists once lineage was written)."""
        return self._writer.lineage_path

    @property
    def mode(self) -> str:
        """'train' or 'eval' (see :meth:`set_mode`)."""
        return self._mode

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def graph_written(self) -> bool:
        """Whether the network's graph was built (and written with a record) already; it is written once."""
        return self._graph_written

    @property
    def has_operator_values(self) -> bool:
        """Whether summary operators buffered values since the last :meth:`record` or discard."""
        return bool(self._operator_values)

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
        if plugin not in PLUGIN_SET or type(name) is not str or not name:  # fast path: valid input
            caller = "SummaryRecord.add_value"
            check_param("plugin", plugin, [Options(PLUGINS)], caller=caller)
            check_param("name", name, ["nonempty_str"], caller=caller)
        plugin = "landscape" if plugin == "LANDSCAPE" else plugin
        data = prepare_value(plugin, name, value, self._slabs)
        key = (plugin, name)
        with self._lock:  # (no helper method: this runs for every value added)
            duplicate = key in self._buffer
            self._buffer[key] = (plugin, name, data)
        if duplicate:
            _warn_duplicate(plugin, name)

    def add_histograms(self, items: Iterable[tuple[str, torch.Tensor]]) -> None:
        """``add_value("histogram", tag, tensor)`` for each ``(tag, tensor)``, in fewer steps.

        SummaryCollector's parameter histograms, at every collection: non-empty CPU float
        tensors are copied into their snapshot rows with one lock for all; anything else
        goes through :meth:`add_value` (and its validation), after them.

        Parameters
        ----------
        items : iterable of (str, torch.Tensor)
            Tags and values.
        """
        fast: list[tuple[str, np.ndarray]] = []
        slow = []
        for tag, tensor in items:
            if (isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu" and tensor.dtype in FLOAT_DTYPES
                    and tensor.numel() and type(tag) is str and tag):
                fast.append((tag, tensor.detach().numpy()))
            else:
                slow.append((tag, tensor))
        rows = self._slabs.rows([src for _, src in fast])
        for (_, src), (row, _, _) in zip(fast, rows):
            np.copyto(row, src.reshape(-1))  # outside any lock: the writer thread never waits for copies
        duplicates = []
        with self._lock:
            buffer = self._buffer
            for (tag, src), (row, slab, index) in zip(fast, rows):
                key = ("histogram", tag)
                if key in buffer:
                    duplicates.append(tag)
                buffer[key] = ("histogram", tag, (row.reshape(src.shape), False, slab, index))
        for tag in duplicates:
            _warn_duplicate("histogram", tag)
        for tag, tensor in slow:
            self.add_value("histogram", tag, tensor)

    def buffer_operator_value(self, plugin: str, name: str, value: Any) -> bool:
        """Validate, copy and buffer a summary operator's value; return whether ``(plugin, name)`` was buffered already.

        The values of summary operators (:mod:`collector.summary`) are kept
        apart from :meth:`add_value`'s: the newest value of a name wins silently (the
        operators warn once per name), and at :meth:`record` an operator's value
        replaces an ``add_value`` value of the same plugin and name. They are recorded
        only in train mode; :meth:`discard_operator_values` drops them.

        Parameters
        ----------
        plugin : {"scalar", "tensor", "image", "histogram"}
        name : str
            The tag, non-empty.
        value
            As for :meth:`add_value`.

        Raises
        ------
        collector.InvalidParameterError
            A wrong ``plugin`` or ``name``.
        TypeError, ValueError
            A value the plugin does not take.
        """
        if plugin not in _OPERATOR_PLUGINS or type(name) is not str or not name:  # fast path: valid input
            caller = "SummaryRecord.buffer_operator_value"
            check_param("plugin", plugin, [Options(TENSOR_PLUGINS)], caller=caller)
            check_param("name", name, ["nonempty_str"], caller=caller)
        data = prepare_value(plugin, name, value, self._slabs)
        key = (plugin, name)
        with self._lock:
            duplicate = key in self._operator_values
            self._operator_values[key] = (plugin, name, data)
        return duplicate

    def discard_operator_values(self) -> None:
        """Drop the summary operators' values buffered since the last :meth:`record`.

        For a step that is not recorded: a value then reaches the file only with the
        step that produced it (SummaryCollector does this at the steps it does not collect).
        """
        with self._lock:
            self._operator_values = {}

    def record(self, step: int, train_network: Any = None, plugin_filter: Callable[[str], bool] | None = None) -> bool:
        """Write everything buffered as one Event at ``step``; return whether it was queued.

        Parameters
        ----------
        step : int
        train_network : torch.nn.Module, optional
            Its graph is written with this record if no graph was written yet (it
            takes the place of the constructor's ``network``).
        plugin_filter : callable, optional
            ``plugin_filter(plugin)``: whether to write the buffered values of that
            plugin; the others are dropped.

        Returns
        -------
        bool
            False after :meth:`close`, or while writing errors wait to be raised.
        """
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
        writer = self._writer
        writer.raise_pending()
        with self._lock:
            buffered, self._buffer = self._buffer, {}
            operator_values, self._operator_values = self._operator_values, {}
        if self._mode == "train" and operator_values:  # summary operators (collector.summary)
            for plugin, name in buffered.keys() & operator_values.keys():
                logger.warning("%r has duplicate values (add_value and a summary operator). Only the newest one, "
                               "the operator's, will be recorded.", f"{name}/{plugin}")
            buffered.update(operator_values)
        values = list(buffered.values())
        network = train_network if train_network is not None else self._network
        if network is not None and not self._graph_written:
            graph = build_graph(network)
            self._graph_written = True
            if graph is not None:
                values.insert(0, ("graph", "graph", graph))
        if plugin_filter is not None:
            values = [v for v in values if plugin_filter(v[0])]
        if values:
            # The wall time of the record() call, not of the (later) write.
            return writer.add(int(step), time.time(), values)
        return not writer.has_errors

    def flush(self) -> None:
        """Wait until everything recorded so far is written and flushed to the OS."""
        if self._closed:
            return
        self._writer.flush()

    def close(self) -> None:
        """Flush, close both files (read-only afterwards) and stop the writer thread."""
        global open_record_ref
        if self._closed:
            return
        try:
            self._writer.close()
        finally:
            self._closed = True
            _live_records.discard(self)
            with _open_lock:
                if open_record_ref is not None and open_record_ref() is self:
                    # The operators' fast path is then the no-record one.
                    open_record_ref = None

    def __enter__(self) -> SummaryRecord:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:  # an unclosed record still leaves complete files
        try:
            if not getattr(self, "_closed", True):
                self._close_quietly()
        except Exception:
            pass

    def _close_quietly(self) -> None:
        """:meth:`close`, logging the errors of writing from now on instead of keeping them (atexit, finalizer)."""
        self._writer.raise_exception = False
        self.close()


def _warn_duplicate(plugin: str, name: str) -> None:
    logger.warning("add_value: %s %r was already added for this step; the last value is kept", plugin, name)


def _check_network(name: str, network: Any, caller: str) -> None:
    if network is None:
        return
    check_param(name, network, [InstanceOf(torch.nn.Module, description="a torch.nn.Module"), None], caller=caller)


def _check_export_options(options: dict | None, caller: str) -> str | None:
    check_param("export_options", options, [dict, None], caller=caller)
    if not options:
        return None
    for key in options:
        check_param("export_options key", key, [Options(["tensor_format"])], caller=caller)
    check_param("export_options['tensor_format']", options["tensor_format"], [Options(["npy"]), None], caller=caller)
    return options["tensor_format"]


_live_records: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close records left open so the process exits with complete files."""
    for rec in list(_live_records):
        try:
            rec._close_quietly()
        except Exception:
            pass
