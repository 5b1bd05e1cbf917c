"""The README's Python examples run, in order, as a reader would paste them.

Every ```python block of README.md runs in one namespace, in a fresh working directory, by
the machinery the docs' examples use too (tests/_codeblocks.py, which says how a block is
marked to be skipped or to need an optional module). A README example that no longer runs
fails here.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

from tests._codeblocks import python_blocks, run_blocks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_has_python_examples():
    blocks = python_blocks(README)
    assert len(blocks) >= 6
    assert all(b.why is None or b.why.strip() for b in blocks)


@pytest.mark.slow
def test_readme_python_examples_run(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme"}
    assert run_blocks(python_blocks(README), namespace) >= 6
    # what the examples promise they leave behind
    assert (tmp_path / "runs" / "mlp" / "landscapes.h5").is_file()
    assert (tmp_path / "runs" / "plain" / "ckpt_dir" / "train_metadata.json").is_file()
    assert len(namespace["landscapes"]) == 3
    assert os.listdir(tmp_path / "runs" / "exp1")
