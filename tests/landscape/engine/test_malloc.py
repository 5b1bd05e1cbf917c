"""glibc malloc thresholds: raised only in processes the library owns, or when asked for.

Whether a 16 MB or 31 MB allocation is served by ``mmap`` tells the thresholds apart: glibc's
default mmap threshold starts at 128 KB and only grows, dynamically, up to the size of mmapped
chunks freed before (the landscape below frees none that big), while the tuned one is 32 MB.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys, torch
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
if sys.argv[1] == "landscape":
    import landscape
    landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=4, num_samples=32)
elif sys.argv[1] == "command":
    from landscape.engine import tune_malloc
    tune_malloc(owned=True)  # what the landscape command and the worker processes call first
else:  # the same kind of work without the library
    with torch.no_grad():
        for _ in range(16):
            nn.CrossEntropyLoss()(net(x), y)

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
mapped = []
for mb in (16, 31):
    before = libc.mallinfo2().hblks
    p = libc.malloc(mb << 20)
    mapped.append(libc.mallinfo2().hblks - before)
    libc.free(p)
print(mapped)
"""


def _mapped(mode: str, setting: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LANDSCAPE_MALLOC_TUNING"}
    if setting is not None:
        env["LANDSCAPE_MALLOC_TUNING"] = setting
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, env=env, timeout=300,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_a_landscape_in_the_callers_process_leaves_malloc_as_it_was():
    control = _mapped("control")
    assert control == "[1, 1]"  # glibc's defaults: large blocks come from mmap
    assert _mapped("landscape") == control
    # asked for (LANDSCAPE_MALLOC_TUNING=1) the thresholds are raised, so the probe sees the difference
    assert _mapped("landscape", "1") == "[0, 0]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_processes_the_library_owns_raise_the_thresholds_unless_opted_out():
    assert _mapped("command") == "[0, 0]"
    assert _mapped("command", "0") == "[1, 1]"
