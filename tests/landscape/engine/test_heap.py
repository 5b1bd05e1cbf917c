"""The heap room of the engine's calls in the caller's process (landscape/engine/_heap.py): in a
fresh process the activations of repeated calls no longer fault their pages in again, glibc's
settings are not touched, and nothing is kept after the engine."""

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


@glibc
def test_a_fresh_process_stops_faulting_the_same_activations_in():
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LANDSCAPE_MALLOC_TUNING")}
    env["PYTHONPATH"] = ROOT

    def run(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", CALLS, mode], env=env, capture_output=True, text=True,
                             check=True, timeout=120).stdout.split()
        return int(out[0]), int(out[1])

    without, _ = run("none")
    with_room, room_bytes = run("room")
    # without the room each call's 6 MB usually go back to the system and come back: ~1,500 pages a
    # call (300,000 here; where the kernel backs the heap with huge pages it can be far fewer). With
    # it, at most 20 pages a call whatever the kernel does.
    assert room_bytes >= 4 << 20
    assert with_room < 200 * 20, (with_room, without)


@glibc
def test_the_room_is_placed_below_a_pin_and_given_back(monkeypatch):
    monkeypatch.setattr(_malloc, "_done", False)  # as in a process whose thresholds are glibc's own
    room = _heap.Room(torch.device("cpu"))
    assert room.enabled
    room._make(4 << 20)
    assert room.bytes >= 4 << 20 and room._pin is not None
    room._make(8 << 20)  # made larger: the first is given back first
    assert room.bytes >= 8 << 20
    room.close()
    assert room.bytes == 0 and room._pin is None


def test_no_room_on_a_gpu_or_where_the_thresholds_are_tuned(monkeypatch):
    assert not _heap.Room(torch.device("cuda", 0)).enabled
    monkeypatch.setattr(_malloc, "_done", True)
    assert not _heap.Room(torch.device("cpu")).enabled
