"""glibc malloc thresholds: raised once per process by a CPU engine, never when opted out."""

from __future__ import annotations

import subprocess
import sys

import pytest

from landscape.engine import _malloc

CHECK = """
import resource, sys, torch
from torch import nn
from landscape.engine import _malloc
from landscape import compute_landscape
x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
for _ in range(2):
    compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=6, num_samples=512, plan={"points_per_call": 1})
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=6, num_samples=512, plan={"points_per_call": 1})
print(_malloc._done, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(env_value: str | None) -> tuple[str, int]:
    import os

    env = dict(os.environ)
    env.pop("LANDSCAPE_MALLOC_TUNING", None)
    if env_value is not None:
        env["LANDSCAPE_MALLOC_TUNING"] = env_value
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, check=True)
    done, faults = out.stdout.split()
    return done, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_cpu_landscape_raises_the_thresholds_unless_opted_out():
    done, _faults = _run(None)
    off, _faults_off = _run("0")
    # mallopt accepted both thresholds (glibc), and the opt-out leaves malloc alone. The page faults
    # themselves (1 against 250-2,000 for this landscape here) vary too much between runs to assert;
    # benchmarks/bench_peers.py measures the time they cost.
    assert (done, off) == ("True", "False")


def test_tuning_is_done_once():
    first = _malloc.tune_malloc()
    assert _malloc.tune_malloc() is first
