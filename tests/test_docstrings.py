"""The docstrings say what and why in a few lines, and the reference has what a reader needs.

- no module docstring of ``collector``, ``landscape`` or ``viz`` holds more than 25 lines
  of prose (its Examples section aside): a measurement's history belongs in the
  benchmarks and the commit messages, not in the code;
- every public function the reference documents has a Parameters section (when it takes
  any) and a Returns or Yields section (when it returns something);
- the main entry points have an Examples section (run as doctests) and link to the guide.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collector", "landscape", "viz")
#: the modules whose ``__all__`` the API reference documents (tests/test_docs.py)
DOCUMENTED = ("collector", "landscape", "viz", "collector.integrations", "landscape.tasks", "landscape.examples",
              "landscape.threads", "landscape.curvature")
ENTRY_POINTS = ("landscape.compute_landscape", "landscape.SummaryLandscape", "landscape.compare_runs",
                "landscape.hessian_eigs", "viz.plot")
MAX_PROSE = 25


def prose_lines(doc: str) -> int:
    """The docstring's non-blank lines before its Examples section, doctest lines left out."""
    lines = doc.splitlines()
    count = 0
    for i, line in enumerate(lines):
        if line.strip() == "Examples" and i + 1 < len(lines) and re.fullmatch(r"\s*-{3,}\s*", lines[i + 1]):
            break
        text = line.strip()
        if text and not text.startswith((">>>", "...")):
            count += 1
    return count


def test_the_prose_count_stops_at_examples():
    doc = "One line.\n\nTwo\nthree.\n\nExamples\n--------\n>>> 1 + 1\n2\nmore text\n"
    assert prose_lines(doc) == 3


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_no_module_docstring_is_longer_than_25_lines_of_prose():
    long = []
    for path in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if doc and (n := prose_lines(doc)) > MAX_PROSE:
            long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"module docstrings over {MAX_PROSE} lines of prose: {long}"


def _public_functions() -> list[tuple[str, object]]:
    seen, out = set(), []
    for name in DOCUMENTED:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if inspect.isfunction(obj) and id(obj) not in seen:
                seen.add(id(obj))
                out.append((f"{name}.{attr}", obj))
    return out


def _has(doc: str, *sections: str) -> bool:
    return any(re.search(rf"^{s}\n-{{3,}}$", doc, re.M) for s in sections)


@pytest.mark.parametrize(("name", "function"), _public_functions(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_function_says_its_parameters_and_what_it_returns(name, function):
    doc = inspect.getdoc(function) or ""
    signature = inspect.signature(function)
    if signature.parameters:
        assert _has(doc, "Parameters"), f"{name} has no Parameters section"
    if signature.return_annotation not in (None, "None", inspect.Signature.empty):
        assert _has(doc, "Returns", "Yields"), f"{name} has no Returns section"


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_the_main_entry_points_have_examples_and_link_to_the_guide(name):
    module, attr = name.rsplit(".", 1)
    doc = inspect.getdoc(getattr(importlib.import_module(module), attr)) or ""
    assert _has(doc, "Examples") and ">>> " in doc, f"{name} has no Examples section"
    assert re.search(r"user guide: \[[^\]]+\]\(\.\./[\w-]+\.md", doc), f"{name} does not link to the user guide"
