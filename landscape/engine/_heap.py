"""Room in the heap for the activations of an evaluation's calls, in the caller's process (private).

A landscape calls the network hundreds of times, and every call allocates and frees the same
activations. With glibc's defaults, once the first of them is freed, its dynamic mmap threshold
puts the next ones on the heap; freed together they push the top of the heap past the trim
threshold, it is given back to the system, and the next call faults the same pages in again.
The library does not change glibc's settings in a process it does not own
(:func:`landscape.engine.tune_malloc`); instead it keeps room for those activations below a
small allocation at the top of the heap (the *pin*): pieces under glibc's mmap threshold
(:func:`_pieces`) are allocated, the highest kept as the pin, the others freed into one chunk
the next calls' activations are cut from, so the top of the heap stays below the trim
threshold. No setting is changed, and untouched pages of the room are never faulted in.

The room (:data:`MAX_BYTES`) is made once, whole, after the first call that faulted in
:data:`MIN_BYTES` or more, and kept between landscapes for the next evaluation of the process
(:func:`kept_bytes`); :func:`release_room` gives it back (glibc then trims it as it would have),
and ``LANDSCAPE_MALLOC_TUNING=0`` makes none. Only on Linux with glibc, on the CPU, and not
where :func:`tune_malloc` has already raised the thresholds. It speeds up the calls of
networks whose activations are megabytes each, freed and allocated again at every call (a
small transformer, a ViT), and changes nothing where they are mmapped whole either way (a
ResNet-18 on 64 samples): ``benchmarks/bench_heap.py``, on the Benchmarks page.
"""

from __future__ import annotations

import ctypes
import platform
import resource
import sys
from typing import Any

import torch

from landscape.engine import _malloc

__all__ = ["Room", "MAX_BYTES", "PIECE_BYTES", "kept_bytes", "release_room"]

#: The most room kept. A single activation over 32 MiB is mmapped anyway (where glibc's dynamic mmap threshold
#: stops), but a call's live activations together may take more (a small GPT-2's logits and the rest).
MAX_BYTES = 64 << 20
#: Each piece of the room: under glibc's initial mmap threshold (128 KiB), so always on the heap.
PIECE_BYTES = 96 << 10
#: Each piece of the room where glibc's mmap threshold has risen above it (see :func:`_pieces`).
BIG_PIECE_BYTES = 1 << 20
#: The least memory a call faults in that makes room (or more room) worth keeping.
MIN_BYTES = 1 << 20
_PAGE = resource.getpagesize()
_GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Room:
    """Room in the heap for an engine's calls (see the module docstring), kept while the engine lives.

    ``watch()`` before the calls of an evaluation, ``check()`` after each: when the call faulted in
    :data:`MIN_BYTES` or more and no room is held, the room is made (:data:`MAX_BYTES`). ``keep()``
    after the calls hands the room to the next evaluation of the process (which takes it at its
    ``watch()``), ``close()`` gives it back. ``bytes`` is the room held (0: none)."""

    def __init__(self, device: torch.device) -> None:
        # LANDSCAPE_MALLOC_TUNING=0 turns every malloc measure off, this room included
        self.enabled = _GLIBC and device.type == "cpu" and not _malloc._done and not _malloc.turned_off()
        self.bytes = 0
        self._pin: torch.Tensor | None = None
        self._mark = 0

    def __del__(self) -> None:
        try:
            self.keep()
        except Exception:  # at interpreter shutdown the module's globals may be gone: nothing to keep then
            pass

    def keep(self) -> None:
        """Hand the room to the next evaluation of the process (see the module docstring) instead of giving
        it back; the larger of it and a room kept already is kept."""
        pin, size = self._pin, self.bytes
        self._pin, self.bytes = None, 0
        if pin is None or _malloc.turned_off():
            return
        if _KEPT and _KEPT[0][1] >= size:
            return
        _KEPT[:] = [(pin, size)]

    def watch(self) -> None:
        if self.enabled:
            if self._pin is None and _KEPT:  # the room an earlier evaluation left: its pages are in
                self._pin, self.bytes = _KEPT.pop()
            self._mark = _faults()

    def check(self) -> None:
        if not self.enabled:
            return
        now = _faults()
        faulted = (now - self._mark) * _PAGE
        if faulted >= MIN_BYTES and self.bytes < MAX_BYTES:
            self._make(MAX_BYTES)
            now = _faults()  # the room's own pages are not the next call's
        self._mark = now

    def _make(self, want: int) -> None:
        self.close()
        pieces = _pieces(want)
        # the highest piece is the pin: every other piece lies below it, those that extended the heap
        # contiguously (in a fragmented heap some fill older free chunks and go back there)
        addresses = [p.data_ptr() for p in pieces]
        top = addresses.index(max(addresses))
        self._pin = pieces.pop(top)
        self.bytes = sum(p.nbytes for p in pieces)
        del pieces  # freed under the pin: one free chunk the next calls' activations are cut from

    def close(self) -> None:
        self._pin, self.bytes = None, 0


def _pieces(want: int) -> list[torch.Tensor]:
    """Pieces of at least ``want`` bytes in all, and one more (the pin), all from the heap: of
    :data:`BIG_PIECE_BYTES` where glibc's mmap threshold has risen above that size (no piece is then
    mmapped: :func:`_mmapped` counts them), else of :data:`PIECE_BYTES`. glibc writes a chunk's header
    into a fresh page of each piece, so fewer, larger pieces fault fewer pages in."""
    before = _mmapped()
    if before is not None:
        pieces = [torch.empty(BIG_PIECE_BYTES, dtype=torch.uint8)]
        if _mmapped() == before:
            pieces += [torch.empty(BIG_PIECE_BYTES, dtype=torch.uint8) for _ in range(-(-want // BIG_PIECE_BYTES))]
            if _mmapped() == before:
                return pieces
        del pieces
    return [torch.empty(PIECE_BYTES, dtype=torch.uint8) for _ in range(-(-want // PIECE_BYTES) + 1)]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2() -> Any:
    """glibc's ``mallinfo2`` (2.33 and later), or None."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = _MallInfo2, []
    return fn


_MALLINFO2 = _mallinfo2() if _GLIBC else None


def _mmapped() -> int | None:
    """How many chunks glibc holds mmapped now (``hblks``), or None where ``mallinfo2`` is not to be had."""
    return None if _MALLINFO2 is None else int(_MALLINFO2().hblks)


#: The room kept between evaluations: at most one ``(pin, bytes)`` (see the module docstring).
_KEPT: list[tuple[torch.Tensor, int]] = []


def kept_bytes() -> int:
    """The heap room the process keeps between landscapes (bytes; 0: none)."""
    return _KEPT[0][1] if _KEPT else 0


def release_room() -> None:
    """Give back the heap room kept between landscapes (glibc trims it as it would have)."""
    _KEPT.clear()
