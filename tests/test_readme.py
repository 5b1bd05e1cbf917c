"""The README's Python example runs alone, as a reader would paste it, and does what it says.

The block runs in a fresh namespace and working directory, by the machinery the docs'
examples use too (tests/_codeblocks.py, which says how a block is marked to be skipped or
to need an optional module); its lines fit the page (tests/test_docs.py checks every page).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

from tests._codeblocks import python_blocks, run_block

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_has_its_notebook_example():
    blocks = python_blocks(README)
    assert len(blocks) >= 1 and all(b.why is None for b in blocks)
    # a notebook example of at most 15 lines
    assert len(blocks[0].code.rstrip("\n").split("\n")) <= 15


@pytest.mark.slow
def test_readme_python_example_runs_alone(tmp_path):
    matplotlib.use("Agg")
    (block,) = python_blocks(README)
    namespace = run_block(block, tmp_path)
    # what the example promises: a 21x21 random plane around the trained network, drawn to a PNG
    ls = namespace["ls"]
    assert ls.z.shape == (21, 21) and np.isfinite(ls.z).all()
    assert (tmp_path / "landscape.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # its centre is the trained network's own loss on all 1,797 digits (num_samples="auto"), by hand
    inputs, labels = namespace["inputs"], namespace["labels"]
    assert len(inputs) == ls.metadata["num_samples"] == 1797
    with torch.no_grad():
        own = torch.nn.functional.cross_entropy(namespace["network"](inputs), labels).item()
    assert ls.z[10, 10] == pytest.approx(own, rel=1e-6)
