"""The heap room of the engine's calls in the caller's process (landscape/engine/_heap.py): made in a fresh
process for the activations of repeated calls, glibc's settings not touched, what is kept between landscapes
one room, at most MAX_BYTES, given back on request, its pieces never mmapped.

The pages these scenarios fault in depend on the machine (the kernel's huge pages, glibc, the load): they are
measured by benchmarks/bench_heap_faults.py, each against the same scenario without the room, not asserted
here."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch

from landscape.engine import _heap, _malloc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
glibc = pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"),
                           reason="glibc's heap on Linux")

# A fresh process calls "a network" 200 times: each call holds three 2 MB activations at once, then
# frees them (as an MLP's out-of-place ReLUs at 8 points x 512 samples do); minor faults are counted.
CALLS = textwrap.dedent("""
    import resource, sys, torch
    from landscape.engine._heap import Room
    def call():
        a = torch.ones(512 * 1024)
        b = torch.relu(a)
        c = torch.relu(b)
        return float(c[-1])
    room = Room(torch.device("cpu"))
    use_room = sys.argv[1] == "room"
    for _ in range(3):  # the first calls: glibc's dynamic mmap threshold rises as in any process
        room.watch(); call()
        if use_room:
            room.check()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(200):
        call()
        if use_room:
            room.check()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, room.bytes)
""")


def _faults_in_a_fresh_process(script: str, mode: str, tuning: str | None = None) -> tuple[int, ...]:
    """The integers ``script`` prints, run with ``mode`` in a fresh process under glibc's own settings
    (``tuning``: ``LANDSCAPE_MALLOC_TUNING``, unset by default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LANDSCAPE_MALLOC_TUNING")}
    if tuning is not None:
        env["LANDSCAPE_MALLOC_TUNING"] = tuning
    env["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", script, mode], env=env, capture_output=True, text=True,
                         check=True, timeout=300).stdout.split()
    return tuple(int(v) for v in out)


@glibc
def test_a_fresh_process_makes_a_room_for_the_activations_of_its_calls():
    _, room_bytes = _faults_in_a_fresh_process(CALLS, "room")
    assert room_bytes >= 4 << 20  # made for the calls' activations (three of 2 MB held at once)


@glibc
def test_the_room_is_placed_below_a_pin_and_given_back(monkeypatch):
    monkeypatch.setattr(_malloc, "_done", False)  # as in a process whose thresholds are glibc's own
    room = _heap.Room(torch.device("cpu"))
    assert room.enabled
    room._make(4 << 20)
    assert room.bytes >= 4 << 20 and room._pin is not None
    room._make(8 << 20)  # made again, larger: the first is given back
    assert room.bytes >= 8 << 20
    room.close()
    assert room.bytes == 0 and room._pin is None


def test_no_room_on_a_gpu_or_where_the_thresholds_are_tuned(monkeypatch):
    assert not _heap.Room(torch.device("cuda", 0)).enabled
    monkeypatch.setattr(_malloc, "_done", True)
    assert not _heap.Room(torch.device("cpu")).enabled


@glibc
def test_no_room_at_all_where_malloc_measures_are_turned_off(monkeypatch):
    """LANDSCAPE_MALLOC_TUNING=0 is the switch benchmarks/bench_heap.py compares against: no room is
    made during an evaluation either, and no glibc setting changes."""
    monkeypatch.setattr(_malloc, "_done", False)
    monkeypatch.setattr(_heap, "_KEPT", [])
    monkeypatch.setenv("LANDSCAPE_MALLOC_TUNING", "0")
    room = _heap.Room(torch.device("cpu"))
    assert not room.enabled
    room.watch()
    _ = torch.ones(4 << 20, dtype=torch.uint8)  # a call that faults pages in
    room.check()
    assert room.bytes == 0 and _heap.kept_bytes() == 0
    monkeypatch.delenv("LANDSCAPE_MALLOC_TUNING")
    assert _heap.Room(torch.device("cpu")).enabled


@glibc
def test_a_released_room_is_kept_for_the_next_engine_and_given_back_on_request(monkeypatch):
    monkeypatch.setattr(_malloc, "_done", False)
    monkeypatch.setattr(_heap, "_KEPT", [])
    monkeypatch.delenv("LANDSCAPE_MALLOC_TUNING", raising=False)
    room = _heap.Room(torch.device("cpu"))
    room._make(4 << 20)
    made = room.bytes
    room.keep()  # the evaluation ended: its room is kept, not given back
    assert _heap.kept_bytes() == made >= 4 << 20 and room.bytes == 0
    small = _heap.Room(torch.device("cpu"))
    small.watch()
    assert small.bytes == made and _heap.kept_bytes() == 0  # the next evaluation starts on it
    other = _heap.Room(torch.device("cpu"))
    other._make(8 << 20)
    del small, other  # released engines keep theirs too: the larger of two is kept, never both
    assert _heap.kept_bytes() >= 8 << 20
    _heap.release_room()
    assert _heap.kept_bytes() == 0
    monkeypatch.setenv("LANDSCAPE_MALLOC_TUNING", "0")  # nothing kept where malloc work is turned off
    room = _heap.Room(torch.device("cpu"))
    room._make(4 << 20)
    del room
    assert _heap.kept_bytes() == 0


# Three landscapes of the digits MLP (8 points per call, 512 samples: 2 MB activations) in a fresh
# process; the minor faults of the third, with the room kept and with it given back before it.
THREE_LANDSCAPES = textwrap.dedent("""
    import resource, sys, torch
    from torch import nn
    from landscape import compute_landscape
    from landscape.engine import kept_bytes, release_room
    from landscape.examples import MLP, digits_tensors
    torch.manual_seed(0)
    x, y = digits_tensors()
    net = MLP().eval()
    def one():
        return compute_landscape(net, nn.CrossEntropyLoss(), (x[:512], y[:512]), size=12, num_samples=512)
    one()
    one()  # the room is made in the first landscape; the second faults in what the first mmapped
    if sys.argv[1] == "release":
        release_room()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    one()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, kept_bytes())
""")


@glibc
def test_the_room_is_kept_for_the_next_landscape_in_a_process():
    _, kept_room = _faults_in_a_fresh_process(THREE_LANDSCAPES, "keep")
    assert kept_room > 0


# A language model's head, one point per call: each call holds 8 MB of logits and 8 MB of their
# log-softmax (64 sequences of 32 tokens, 1,000 words). Three 81-point landscapes in a fresh process;
# the minor faults of the third.
LOGITS = textwrap.dedent("""
    import resource, sys, torch
    from torch import nn
    from landscape import compute_landscape
    from landscape.engine import kept_bytes
    torch.manual_seed(0)
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.mid, self.head = nn.Embedding(1000, 64), nn.Linear(64, 64), nn.Linear(64, 1000)
        def forward(self, ids):
            return self.head(torch.relu(self.mid(self.emb(ids))))
    def task(model, batch):
        ids, labels = batch
        return nn.functional.cross_entropy(model(ids).flatten(0, 1), labels.flatten())
    ids = torch.randint(0, 1000, (64, 32), generator=torch.Generator().manual_seed(0))
    net = LM().eval()
    def one():
        return compute_landscape(net, data=[(ids, ids)], task=task, size=9, num_samples=64,
                                 plan={"points_per_call": 1})
    one(); one()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    one()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, kept_bytes())
""")


@glibc
def test_one_point_per_call_keeps_a_room():
    """The points' losses go into one buffer made before the calls (kept one by one as 0-d tensors they
    were cut from the heap between the calls' activations, which then no longer fitted in the room: the
    pages benchmarks/bench_heap_faults.py counts)."""
    _, room = _faults_in_a_fresh_process(LOGITS, "")
    assert room > 0


# A room of 8 MiB made in a fresh process: after glibc's mmap threshold has risen above a large piece
# (a 2 MiB tensor allocated and freed, as a first call's activations are), or at the threshold glibc
# starts with (128 KiB). Prints the room's bytes, the pages its making faulted in, and the mmapped chunks
# it added.
PIECES = textwrap.dedent("""
    import resource, sys, torch
    from landscape.engine import _heap
    if sys.argv[1] == "raised":
        x = torch.empty(2 << 20, dtype=torch.uint8)
        del x
    room = _heap.Room(torch.device("cpu"))
    before, f0 = _heap._mmapped(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    room._make(8 << 20)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    print(room.bytes, faults, _heap._mmapped() - before)
""")


@glibc
@pytest.mark.skipif(_heap._mmapped() is None, reason="glibc's mallinfo2 (2.33 and later)")
def test_the_room_is_made_of_large_pieces_where_glibc_lets_them_come_from_the_heap():
    """1 MiB pieces where the mmap threshold has risen above them, 96 KiB pieces (always under it) otherwise;
    no piece is ever mmapped (each piece costs a fresh page, glibc writes its header there: the pages
    benchmarks/bench_heap_faults.py counts)."""
    for mode, piece in (("raised", _heap.BIG_PIECE_BYTES), ("initial", _heap.PIECE_BYTES)):
        room, faults, mmapped = _faults_in_a_fresh_process(PIECES, mode)
        assert room >= 8 << 20 and room % piece == 0, (mode, room)
        assert mmapped == 0, mode
