"""Cost of a summary operator call when no SummaryRecord is open.

Compares, in one process, ``collector.summary.scalar/histogram`` with no record open
against a bare Python function call and against the forward of a small MLP
(64-128-128-10, batch 64, CPU), and shows the cost while a record is open for
reference. Prints one JSON line. Run: ``python benchmarks/bench_summary_ops.py``.
"""

from __future__ import annotations

import json
import logging
import tempfile
import timeit

import torch
from torch import nn

import collector.summary as summary
from collector import SummaryRecord


def _per_call_ns(stmt, number: int, repeat: int = 7) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e9


def _noop(name, value) -> None:
    return None


def main() -> None:
    logging.getLogger("collector.summary._operators").setLevel(logging.ERROR)  # the repeated name is intended here
    torch.manual_seed(0)
    x = torch.randn(64, 64)
    grad = torch.randn(128, 128)
    mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    n = 200_000
    bare = _per_call_ns(lambda: _noop("loss", x), n)
    scalar_off = _per_call_ns(lambda: summary.scalar("loss", x), n)
    hist_off = _per_call_ns(lambda: summary.histogram("fc1.weight.gradient", grad), n)
    with torch.no_grad():
        forward = _per_call_ns(lambda: mlp(x), 2_000)
    with tempfile.TemporaryDirectory() as tmp, SummaryRecord(tmp) as rec:
        loss = torch.tensor(0.5)
        scalar_on = _per_call_ns(lambda: summary.scalar("loss", loss), 20_000)
        hist_on = _per_call_ns(lambda: summary.histogram("fc1.weight.gradient", grad), 2_000)
        rec.set_mode("eval")
        scalar_eval = _per_call_ns(lambda: summary.scalar("loss", x), n)
    scalar_closed = _per_call_ns(lambda: summary.scalar("loss", x), n)  # the closed record still referenced
    print(json.dumps({
        "bench": "summary_ops_no_record",
        "bare_function_call_ns": round(bare, 1),
        "scalar_no_record_ns": round(scalar_off, 1),
        "histogram_no_record_ns": round(hist_off, 1),
        "overhead_vs_bare_call_ns": round(scalar_off - bare, 1),
        "mlp_forward_ns": round(forward, 1),
        "scalar_no_record_fraction_of_forward": round(scalar_off / forward, 6),
        "scalar_eval_mode_ns": round(scalar_eval, 1),
        "scalar_after_close_ns": round(scalar_closed, 1),
        "scalar_recording_ns": round(scalar_on, 1),
        "histogram_128x128_recording_ns": round(hist_on, 1),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
