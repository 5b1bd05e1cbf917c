"""Generating landscapes: ``compute_landscape`` (any network and data) and ``SummaryLandscape``."""

from landscape.generate._compare import compare_runs
from landscape.generate._compute import compute_landscape
from landscape.generate._options import TooManySamples
from landscape.generate._summary_landscape import SummaryLandscape

__all__ = ["compute_landscape", "SummaryLandscape", "compare_runs", "TooManySamples"]
