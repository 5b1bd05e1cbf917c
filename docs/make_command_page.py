"""Write docs/command.md from the ``landscape`` command's own ``--help`` texts.

The page is the command's synopsis as ``landscape --help`` and ``landscape COMMAND
--help`` print it in a terminal 79 columns wide, so it cannot drift from the parser:
``tests/test_docs.py`` compares the page with :func:`page`. Run it after changing an
option::

    python docs/make_command_page.py
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import cast

from landscape.cli._main import build_parser

PAGE = Path(__file__).resolve().parent / "command.md"
COLUMNS = 79

INTRO = """\
# The `landscape` command

Everything the Python API does for a collected run, from a shell: train and collect
(`demo`, `run`), generate (`gen`, `compare`, `curvature`), look (`plot`, `ls`, `report`,
`lineage`) and convert (`export`). Every option is checked before any work, and a
refusal names the option as you typed it. This page is the command's own help, as
`landscape --help` and `landscape COMMAND --help` print it; the user guide shows each
subcommand at work ([Generating](generating.md), [Pictures](pictures.md),
[Curvature](curvature.md)).
"""


def _help(parser: argparse.ArgumentParser) -> str:
    """``parser``'s help as a terminal :data:`COLUMNS` wide shows it."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(COLUMNS)
    try:
        return parser.format_help().rstrip() + "\n"
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def page() -> str:
    """docs/command.md's text."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = [INTRO, "```text", _help(parser) + "```", ""]
    for name, command in sub.choices.items():
        out += [f"## landscape {name}", "", "```text", _help(cast(argparse.ArgumentParser, command)) + "```", ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    PAGE.write_text(page())
