"""The README's Python example runs as a reader would paste it.

Every ```python block of README.md runs in one namespace, in a fresh working directory, by
the machinery the docs' examples use too (tests/_codeblocks.py, which says how a block is
marked to be skipped or to need an optional module). A README example that no longer runs
fails here; the examples of the user guide run from docs/ (tests/test_docs.py).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

from tests._codeblocks import python_blocks, run_blocks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_has_its_notebook_example():
    blocks = python_blocks(README)
    assert len(blocks) >= 1 and all(b.why is None for b in blocks)
    # the README promises a 15-line notebook example
    assert len(blocks[0].code.rstrip("\n").split("\n")) <= 15


@pytest.mark.slow
def test_readme_python_examples_run(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme"}
    assert run_blocks(python_blocks(README), namespace) >= 1
    # what the example promises: a 21x21 random plane around the trained network, drawn to a PNG
    ls = namespace["ls"]
    assert ls.z.shape == (21, 21) and np.isfinite(ls.z).all()
    assert (tmp_path / "landscape.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # its centre is the trained network's own loss on the first 512 samples, computed here by hand
    inputs, labels = namespace["inputs"][:512], namespace["labels"][:512]
    with torch.no_grad():
        own = torch.nn.functional.cross_entropy(namespace["network"](inputs), labels).item()
    assert ls.z[10, 10] == pytest.approx(own, rel=1e-6)
