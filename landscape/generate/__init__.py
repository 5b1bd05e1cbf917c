"""Generating landscapes: ``compute_landscape`` (any network and data) and ``SummaryLandscape``."""

from landscape.generate._compare import compare_runs
from landscape.generate._compute import compute_landscape
from landscape.generate._options import MAX_POINTS, TooManySamples, check_selection
from landscape.generate._summary_landscape import SummaryLandscape

# check_selection: the include / ignore check, for the entry points built on compute_landscape (connect)
__all__ = ["compute_landscape", "SummaryLandscape", "compare_runs", "TooManySamples", "check_selection", "MAX_POINTS"]
