"""Collecting during training: ``SummaryCollector`` with ``Model`` or a plain PyTorch loop."""

from collector.collect._collector import SummaryCollector

__all__ = ["SummaryCollector"]
