"""Shared test fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._shared import shared_folder

DATA = Path(__file__).parent / "data"
MINDSPORE_RUN = DATA / "mindspore-2.10-mlp-digits"
MINDSPORE_PCA = DATA / "mindspore-2.10-pca-given-weights"


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


def _demo(folder: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "landscape", "demo", "--out", str(folder / "run"), "--size", "6"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert res.returncode == 0, res.stderr
    assert "landscape_[1, 5]" in res.stdout and "landscape_[10]" in res.stdout and "Done in" in res.stdout


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    """``landscape demo --size 6`` run once per test run (in a subprocess, as a user runs it; shared by the
    xdist workers) for the tests that read its output; read it, do not write into it."""
    return shared_folder(tmp_path_factory, "demo", _demo) / "run"
