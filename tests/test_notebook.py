"""docs/quickstart.ipynb runs top to bottom in a fresh kernel and shows the landscapes inline."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"


def _result(cell) -> str:
    """The text of a cell's value (its ``execute_result``)."""
    return next(out["data"]["text/plain"] for out in cell.outputs if out["output_type"] == "execute_result")


def _pngs(cell) -> list[bytes]:
    return [base64.b64decode(out["data"]["image/png"]) for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})]


@pytest.mark.slow
def test_quickstart_notebook_runs_and_shows_landscapes(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    code = [c for c in nb.cells if c.cell_type == "code"]
    # the cell ending in a Landscape shows it as a picture (viz's renderer), with its tag as text
    shown = next(c for c in code if c.source.rstrip().endswith('landscapes["lr 0.05"][0]'))
    (png,) = _pngs(shown)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "landscape_[1, 5]" in _result(shown)
    # the surface and the comparison are figures drawn inline too
    assert len(_pngs(next(c for c in code if '"surface"' in c.source))) == 1
    assert len(_pngs(next(c for c in code if "viz.compare" in c.source))) == 1
    tags = _result(next(c for c in code if "gen_landscapes_with_multi_process" in c.source))
    assert tags.count("landscape_[1, 5]") == 2 and tags.count("landscape_[5]") == 2
    assert (tmp_path / "runs" / "lr_0.3" / "landscapes.h5").is_file()
