"""glibc malloc thresholds for the CPU engine (private).

A landscape evaluates the same calls hundreds of times, each allocating and freeing the same
activations (a group of 8 points of the digits MLP at 512 samples: five tensors of 2 MB).
glibc serves allocations above ``M_MMAP_THRESHOLD`` (128 KB at start, raised as mmapped
chunks are freed) with fresh ``mmap`` pages and gives the top of the heap back to the system
past ``M_TRIM_THRESHOLD``; either way the next call faults its pages in again and the kernel
zeroes them. Measured in a fresh process: 50,000 minor page faults for one 20x20 landscape of
the MLP, about half of its 190 ms. Raising both thresholds keeps the freed pages in the heap
for the next call (the same landscape then takes about half the time).

This is process-wide, so the library does it only in processes it owns: its worker
processes and the ``landscape`` command (:func:`tune_malloc` with ``owned=True``), never in
the caller's process (a notebook, a training script) unless asked with
``LANDSCAPE_MALLOC_TUNING=1``; ``LANDSCAPE_MALLOC_TUNING=0`` turns it off everywhere. Only
on Linux with glibc, once per process. The cost: memory freed by the process stays
reserved by malloc (up to :data:`TRIM_BYTES` at the top of the heap) instead of being
returned to the system.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

__all__ = ["tune_malloc", "turned_off", "MMAP_BYTES", "TRIM_BYTES"]

_log = logging.getLogger("landscape")

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Allocations up to this size come from the heap (glibc's largest allowed value on 64-bit).
MMAP_BYTES = 32 << 20
#: Free memory at the top of the heap kept for reuse.
TRIM_BYTES = 256 << 20

_done: bool | None = None


def _setting() -> str:
    """``LANDSCAPE_MALLOC_TUNING`` as set ("" when unset): "1" asks for the tuning, "0" turns every
    malloc measure of the library off (the tuning and the heap room, in a landscape and between them)."""
    return os.environ.get("LANDSCAPE_MALLOC_TUNING", "")


def turned_off() -> bool:
    """Whether ``LANDSCAPE_MALLOC_TUNING=0`` turns the library's malloc measures off."""
    return _setting() == "0"


def tune_malloc(owned: bool = False) -> bool:
    """Raise glibc's mmap and trim thresholds once per process, when this process is the
    library's own (``owned``: a worker, the command) or ``LANDSCAPE_MALLOC_TUNING=1`` asks for
    it, and ``LANDSCAPE_MALLOC_TUNING`` is not ``0``; whether they are raised."""
    global _done
    if _done:
        return True
    setting = _setting()
    if setting == "0" or not (owned or setting == "1") or not sys.platform.startswith("linux"):
        return False
    _done = False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))
    _log.debug("malloc thresholds %s", "raised" if _done else "left as they were")
    return _done
