"""Slab memory for histogram snapshots: the rows a batch's copies of one parameter share.

A histogram value is copied when it is added (the optimizer may change the tensor
before it is written). Copies of CPU float tensors go into rows of 2-D "slabs", one per
dtype and element count, so that a batch's snapshots of one parameter are one block
that the writer sorts in place (:func:`collector.summary._histogram.encode_histogram_values`
with ``slab_rows``) instead of stacking them into fresh memory first: fresh pages cost
more than the sort.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

__all__ = ["SLAB_BYTES", "SnapshotSlabs"]

# The largest slab. Below 4 MiB, where numpy asks for transparent huge pages, whose
# allocation can stall.
SLAB_BYTES = 2 << 20


class SnapshotSlabs:
    """Hand out rows of 2-D slabs, one slab per (dtype, element count); thread-safe.

    The rows are uninitialised memory for the caller to copy into. :meth:`reset` starts
    new slabs: the writer sorts a written batch's rows in place, so the next batch's
    snapshots must not share their slabs.

    Parameters
    ----------
    max_rows : int
        The most rows of one slab: a batch holds at most that many records, so at most
        that many snapshots of one parameter.
    """

    def __init__(self, max_rows: int) -> None:
        if type(max_rows) is not int or max_rows < 1:
            raise ValueError(f"SnapshotSlabs: max_rows must be an int >= 1. Got {max_rows!r} instead.")
        self._max_rows = max_rows
        self._lock = threading.Lock()
        # (dtype, element count) -> [2-D slab, rows used].
        self._slabs: dict[tuple[np.dtype, int], list] = {}

    def __len__(self) -> int:
        """The number of slabs in use since the last :meth:`reset`."""
        return len(self._slabs)

    def row(self, src: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """The next free row for a copy of ``src`` (flat), its slab and the row's index.

        Parameters
        ----------
        src : numpy.ndarray
            A non-empty array; only its dtype and size are used.
        """
        with self._lock:
            return self._row_locked(src)

    def rows(self, srcs: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """:meth:`row` of each array, under one lock (SummaryCollector's parameters at each collection)."""
        with self._lock:
            return [self._row_locked(src) for src in srcs]

    def reset(self) -> None:
        """Start new slabs: the rows handed out so far stay valid, none is handed out again."""
        with self._lock:
            self._slabs = {}

    def _row_locked(self, src: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        n = src.size
        key = (src.dtype, n)
        slab = self._slabs.get(key)
        if slab is None or slab[1] == len(slab[0]):
            rows = max(1, min(self._max_rows, SLAB_BYTES // src.nbytes))
            # np.empty: rows not used yet cost no memory.
            slab = self._slabs[key] = [np.empty((rows, n), dtype=src.dtype), 0]
        index = slab[1]
        slab[1] += 1
        return slab[0][index], slab[0], index
