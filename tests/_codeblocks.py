"""The Python examples of a Markdown file (README.md, docs/*.md), run as a reader would paste them.

Every ```python block of a file runs in one namespace (later blocks use what earlier ones
defined, as in one notebook), in the caller's working directory. A block preceded by a
``<!-- test: skip (reason) -->`` line is not run (it needs a cluster or a service); the
reason is required. A block preceded by ``<!-- test: needs module[, module] -->`` (an
optional integration) runs where those modules are installed (the test extra installs them
all, so CI runs every block). ``readme-test:`` is the same marker's older spelling.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(r"(?:<!-- (?:readme-)?test: (?:skip \((?P<why>[^)]+)\)|needs (?P<needs>[\w., ]+)) -->\n)?"
                    r"```python\n(?P<code>.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and why it is not run here (None: it runs)."""

    path: Path
    line: int
    code: str
    why: str | None


def _missing(needs: str | None) -> list[str]:
    names = [n.strip() for n in (needs or "").split(",") if n.strip()]
    return [n for n in names if importlib.util.find_spec(n) is None]


def python_blocks(path: Path) -> list[Block]:
    """The ```python blocks of ``path`` in order; ``why`` is None for a block that runs here."""
    text = path.read_text()
    out = []
    for m in _BLOCK.finditer(text):
        why = m.group("why")
        missing = _missing(m.group("needs"))
        if why is None and missing:
            why = f"needs {', '.join(missing)}"
        out.append(Block(path, text[:m.start()].count("\n") + 1, m.group("code"), why))
    return out


def run_blocks(blocks: list[Block], namespace: dict) -> int:
    """Run every block that runs here in ``namespace``; the number run. A failure names its block."""
    ran = 0
    for block in blocks:
        if block.why is not None:
            continue
        where = f"{block.path.name}:{block.line}"
        try:
            exec(compile(block.code, where, "exec"), namespace)
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"the example at {where} fails: {type(exc).__name__}: {exc}") from exc
        ran += 1
    return ran
