"""Write docs/benchmarks.md and the README's headline table from ``benchmarks/results/*.json``.

The result files (``benchmarks/_results.py`` says their format) are the one source of every
number: a benchmark run with ``--results`` replaces its file, and this script writes the
page and the table between the README's ``<!-- headline -->`` markers again::

    python benchmarks/make_page.py           # write both
    python benchmarks/make_page.py --check   # exit 1 if either is out of date

``tests/test_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
START, END = "<!-- headline: start -->", "<!-- headline: end -->"

INTRO = """\
# Benchmarks

Ours against the tools and loops a user would otherwise run, end to end (directions,
planning, evaluation), each pair timed in one process or in alternating fresh processes
on the same machine: a ratio, not a time, is what carries from one machine to another.
A speed-up above 1 means ours is faster. Every number on this page comes from a result
file in `benchmarks/results/`, written by the command under its table; `python
benchmarks/make_page.py` writes this page and the README's headline table from them
(do not edit them by hand). Each table says the machine and the date it was measured on.
"""


def load(folder: Path = RESULTS) -> list[dict[str, Any]]:
    """Every result file, in the order its ``order`` says, with its name under ``"name"``."""
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        data["name"] = path.stem
        out.append(data)
    return sorted(out, key=lambda d: (d.get("order", 1000), d["name"]))


def number(x: float) -> str:
    """A ratio rounded for reading: three significant digits, at most two decimals."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _cell(row: dict[str, Any]) -> str:
    if "ratio" in row:
        return f"{number(row['ratio'])}×"
    return f"{row['value']} {row['unit']}".strip()


def _spread(row: dict[str, Any]) -> str:
    if "low" not in row:
        return ""
    if row.get("runs", 1) < 2 or row["low"] == row["high"]:
        return f"({row.get('runs', 1)} run{'s' if row.get('runs', 1) > 1 else ''})"
    if "ratio" not in row:
        span = f"{row['low']}–{row['high']} {row['unit']}".strip()
        return f"{span} ({row['runs']} runs)"
    return f"{number(row['low'])}–{number(row['high'])} ({row['runs']} runs)"


def table(data: dict[str, Any]) -> str:
    """A result file's table: what, the ratio (or value), its range where any row has one, the file's ``columns``."""
    rows, extra = data["rows"], data.get("columns", [])
    spread = any("low" in row for row in rows)
    head = ["what", "ratio" if any("ratio" in row for row in rows) else "value", *(["range"] if spread else []),
            *extra]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["what"], _cell(row), *([_spread(row)] if spread else []),
                 *(str(row.get("cells", {}).get(c, "")) for c in extra)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def wrapped(command: str, width: int = 79) -> str:
    """``command`` as shell lines of at most ``width`` columns, continued with backslashes."""
    lines, line = [], ""
    for word in command.split(" "):
        if line and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def _environment(env: dict[str, Any]) -> str:
    parts = [f"CPU: {env.get('cpu', 'not recorded')}", f"{env.get('cores', '?')} cores"]
    if env.get("gpu"):
        parts.append(f"GPU: {env['gpu']}")
    parts.append(f"torch {env.get('torch', '?')}")
    if env.get("python"):
        parts.append(f"Python {env['python']}")
    parts.append(f"measured {env.get('date', '?')}")
    text = ", ".join(parts) + "."
    if env.get("note"):
        text += f" {env['note']}"
    return text


def _fill(text: str) -> str:
    return textwrap.fill(text, width=92, break_long_words=False, break_on_hyphens=False)


def headline(results: list[dict[str, Any]]) -> str:
    """The README's table: one row per result row marked ``headline``."""
    lines = ["| against | what | ours |", "|---|---|---|"]
    for data in results:
        for row in data["rows"]:
            if row.get("headline"):
                lines.append(f"| {data['peer']} | {row['headline']} | **{_cell(row)}** |")
    return "\n".join(lines) + "\n"


def page(results: list[dict[str, Any]]) -> str:
    """docs/benchmarks.md."""
    out = [INTRO, "## Summary\n", "The README's headline table, from the sections below:\n", headline(results)]
    for data in results:
        out.append(f"## {data['title']}\n")
        kind = "ratio" if any("ratio" in row for row in data["rows"]) else "value"
        out.append(_fill(f"Against {data['peer']}; the {kind} is the {data['ratio']}.") + "\n")
        out.append(table(data))
        if data.get("notes"):
            out.append(_fill(data["notes"].strip()) + "\n")
        out.append(_fill(_environment(data.get("environment", {}))) + "\n")
        out.append(f"```bash\n{wrapped(data['command'])}\n```\n")
    return "\n".join(out).rstrip() + "\n"


def readme_with(text: str, table: str) -> str:
    """``text`` (the README) with ``table`` between its headline markers."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the page or the README is out of date")
    args = ap.parse_args()
    results = load()
    want_page = page(results)
    want_readme = readme_with(README.read_text(), headline(results))
    if args.check:
        stale = [p.name for p, want in ((PAGE, want_page), (README, want_readme)) if p.read_text() != want]
        if stale:
            print(f"out of date: {', '.join(stale)} (run python benchmarks/make_page.py)", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(want_page)
    README.write_text(want_readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
