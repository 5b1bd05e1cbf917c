"""docs/quickstart.ipynb runs top to bottom in a fresh kernel, shows the landscapes inline, and
the outputs saved in it (which the documentation site shows) are the current code's."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"


def _result(cell) -> str:
    """The text of a cell's value (its ``execute_result``)."""
    return next(out["data"]["text/plain"] for out in cell.outputs if out["output_type"] == "execute_result")


def _texts(cell) -> list[str]:
    """A cell's text outputs (what it prints and its value; not its warnings on stderr), numbers
    rounded to 4 significant digits: another thread count may round a landscape's last bits."""
    out = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream" and o.get("name") == "stderr":
            continue
        text = o.get("text") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain")
        if text is not None:
            text = "".join(text) if isinstance(text, list) else text
            text = re.sub(r"at 0x[0-9a-f]+", "at 0x...", text)
            out.append(re.sub(r"-?\d+\.\d+(?:e[-+]?\d+)?", lambda m: f"{float(m.group(0)):.4g}", text))
    return out


def _pngs(cell) -> list[bytes]:
    return [base64.b64decode(out["data"]["image/png"]) for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})]


@pytest.mark.slow
def test_quickstart_notebook_runs_and_shows_landscapes(tmp_path):
    saved = nbformat.read(NOTEBOOK, as_version=4)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    code = [c for c in nb.cells if c.cell_type == "code"]
    # the outputs the site shows are the ones this code gives (re-save the notebook executed otherwise)
    for old, new in zip([c for c in saved.cells if c.cell_type == "code"], code):
        assert _texts(old) == _texts(new), f"docs/quickstart.ipynb's saved outputs are stale at:\n{new.source}"
        assert len(_pngs(old)) == len(_pngs(new)), new.source
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
