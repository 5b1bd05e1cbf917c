"""Cost of SummaryRecord.add_value + record on the caller's thread.

Compared, in the same process, with encoding the same record inline (pack the value,
serialize the Event, frame it): the work SummaryRecord moves to its writer thread.
Prints one JSON line per case. Run: ``python benchmarks/bench_summary.py``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time

import torch

from collector import SummaryRecord, proto
from collector.summary import _packing as packing
from collector.summary._framing import encode_record


def _inline(plugin: str, value: torch.Tensor) -> bytes:
    arr, _ = packing.to_numpy(value, what="bench")
    v = packing.pack_scalar(packing.check_scalar(arr, tag="x")) if plugin == "scalar" else packing.pack_histogram(arr)
    v.tag = "x"
    event = proto.Event(wall_time=time.time(), step=1, summary=proto.Summary(value=[v]))
    return encode_record(event.SerializeToString())


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    torch.manual_seed(0)
    cases = {"scalar": (torch.tensor(0.5), 2000), "histogram_1M": (torch.randn(1_000_000), 30)}
    for name, (value, repeats) in cases.items():
        plugin = "scalar" if name == "scalar" else "histogram"
        inline = _median_seconds(lambda: _inline(plugin, value), repeats)
        with tempfile.TemporaryDirectory() as d, SummaryRecord(d) as rec:
            step = iter(range(10**9))

            def one():
                rec.add_value(plugin, "x", value)
                rec.record(next(step))

            # Measured at a pace the writer keeps up with (one record per inline-encode
            # time), as in training where steps take longer than encoding; the queue
            # absorbs bursts but a writer slower than the producer applies backpressure.
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                one()
                samples.append(time.perf_counter() - t0)
                rec.flush() if plugin == "histogram" else None
            caller = statistics.median(samples)
        print(json.dumps({
            "bench": "summary_record", "case": name, "repeats": repeats,
            "caller_median_us": round(caller * 1e6, 2), "inline_encode_median_us": round(inline * 1e6, 2),
            "ratio_caller_over_inline": round(caller / inline, 4),
        }))


if __name__ == "__main__":
    main()
