"""A library does not change its caller's process: importing landscape and viz, computing and
plotting a landscape leaves matplotlib's backend as the caller had it (glibc's malloc
settings: tests/landscape/engine/test_malloc.py), imports nothing the landscape does not use and
leaves no thread running."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import sys
import matplotlib
from matplotlib import rcsetup
before = dict.__getitem__(matplotlib.rcParams, "backend")
import torch
from torch import nn
import landscape, viz
import viz.plots
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=4, num_samples=32)
after_compute = dict.__getitem__(matplotlib.rcParams, "backend")
print(before is rcsetup._auto_backend_sentinel, after_compute is before)
print(*(m in sys.modules for m in ("torch.distributed.fsdp", "sympy")))
import threading
print(len(threading.enumerate()), *(t.name for t in threading.enumerate()))
"""


@pytest.fixture(scope="module")
def printed() -> list[list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "DISPLAY")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300,
                         check=True)
    return [line.split() for line in out.stdout.splitlines()]


def test_importing_and_computing_leave_matplotlibs_backend_unresolved(printed):
    assert printed[0] == ["True", "True"]


def test_a_landscape_of_a_network_not_sharded_does_not_import_fsdp(printed):
    """Whether a network is sharded is read without importing FSDP (and sympy with it): half a second of a
    process's first landscape on a 2-core CPU, three seconds on a GPU host without compiled bytecode."""
    assert printed[1] == ["False", "False"]


def test_a_landscape_leaves_no_thread_running(printed):
    """tqdm starts a monitor thread with its first bar, which then runs for the rest of the process (3 ms of a
    process's first landscape, and a thread the caller did not ask for): the library's bars have none."""
    assert printed[2] == ["1", "MainThread"]
