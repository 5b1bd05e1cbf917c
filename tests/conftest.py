"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
MINDSPORE_RUN = DATA / "mindspore-2.10-mlp-digits"


@pytest.fixture(autouse=True)
def _close_leftover_summary_records():
    """A test that fails mid-way must not leave a SummaryRecord open for the next one."""
    yield
    from collector.summary import _record as _summary_record
    for rec in list(_summary_record._live_records):
        rec._close_quietly()


@pytest.fixture
def mindspore_run() -> Path:
    """The summary directory MindSpore 2.10 wrote (see tests/data/README-fixtures.md)."""
    return MINDSPORE_RUN
