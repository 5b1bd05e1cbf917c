"""CITATION.cff is a valid Citation File Format 1.2.0 file, and the Citing page agrees with it.

Validated offline against the format's JSON schema (tests/data, as cffconvert ships it),
with jsonschema; a broken copy must fail the same check.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml")

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "tests" / "data" / "citation-file-format-1.2.0.schema.json").read_text())


def _cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def test_citation_cff_is_valid_cff_1_2_0():
    cff = _cff()
    assert cff["cff-version"] == "1.2.0"
    jsonschema.validate(cff, SCHEMA)


@pytest.mark.parametrize("damage", ["no authors", "a wrong type", "an unknown key"])
def test_the_schema_check_refuses_a_broken_file(damage):
    cff = copy.deepcopy(_cff())
    if damage == "no authors":
        del cff["authors"]
    elif damage == "a wrong type":
        cff["type"] = "a program"
    else:
        cff["citation"] = "twice"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(cff, SCHEMA)


def test_the_citation_has_the_projects_version_and_the_citing_page_agrees():
    cff = _cff()
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert str(cff["version"]) == tomllib.load(f)["project"]["version"]
    page = (ROOT / "docs" / "citing.md").read_text()
    assert cff["title"] in page and f"version = {{{cff['version']}}}" in page
    assert cff["preferred-citation"]["title"] in page
