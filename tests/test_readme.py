"""The README's Python examples run, in order, as a reader would paste them.

Every ```python block of README.md runs in one namespace (later blocks use what earlier
ones defined, as in one notebook), in a fresh working directory. A block preceded by a
``<!-- readme-test: skip (reason) -->`` line is not run (it needs a cluster or a
service); the reason is required. A block preceded by ``<!-- readme-test: needs
module[, module] -->`` (an optional integration) runs where those modules are installed
(the test extra installs them all, so CI runs every block). A README example that no
longer runs fails here.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import matplotlib
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"(?:(?P<skip><!-- readme-test: skip \((?P<why>[^)]+)\) -->\n)"
                    r"|<!-- readme-test: needs (?P<needs>[\w., ]+) -->\n)?```python\n(?P<code>.*?)```", re.S)


def _missing(needs: str | None) -> list[str]:
    names = [n.strip() for n in (needs or "").split(",") if n.strip()]
    return [n for n in names if importlib.util.find_spec(n) is None]


def _blocks() -> list[tuple[int, str, str | None]]:
    """``(line, code, why not run)``: why is None for a block that runs here."""
    text = README.read_text()
    out = []
    for m in _BLOCK.finditer(text):
        why = m.group("why")
        missing = _missing(m.group("needs"))
        if why is None and missing:
            why = f"needs {', '.join(missing)}"
        out.append((text[:m.start()].count("\n") + 1, m.group("code"), why))
    return out


def test_the_readme_has_python_examples():
    blocks = _blocks()
    assert len(blocks) >= 6
    assert all(why is None or why.strip() for _, _, why in blocks)


@pytest.mark.slow
def test_readme_python_examples_run(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme"}
    ran = 0
    for line, code, why in _blocks():
        if why is not None:
            continue
        try:
            exec(compile(code, f"README.md:{line}", "exec"), namespace)
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"the README example at line {line} fails: {type(exc).__name__}: {exc}") from exc
        ran += 1
    assert ran >= 6
    # what the examples promise they leave behind
    assert (tmp_path / "runs" / "mlp" / "landscapes.h5").is_file()
    assert (tmp_path / "runs" / "plain" / "ckpt_dir" / "train_metadata.json").is_file()
    assert len(namespace["landscapes"]) == 3
    assert os.listdir(tmp_path / "runs" / "exp1")
