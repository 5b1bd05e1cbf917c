"""The code blocks of a Markdown file (README.md, docs/*.md), as a reader would copy them.

Every ```python block runs **alone**: in a fresh namespace and a fresh working directory,
with nothing from the blocks before it, so that each can be pasted on its own. A block
preceded by a ``<!-- test: skip (reason) -->`` line is not run (it needs a cluster or a
service); the reason is required. A block preceded by ``<!-- test: needs module[, module]
-->`` (an optional integration) runs where those modules are installed (the test extra
installs them all, so CI runs every block). A block preceded by ``<!-- file: NAME -->`` is
the file ``NAME`` the page tells the reader to write (a ``--task`` module); it runs alone
too, and a test may write it out and use it. Every line of every fenced block, whatever
its language, fits the page's code width, :data:`WIDTH` columns.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

#: The widest line a code block may hold (the site's code column at a 1280-pixel window).
WIDTH = 79

_BLOCK = re.compile(r"(?:<!-- (?:test: (?:skip \((?P<why>[^)]+)\)|needs (?P<needs>[\w., ]+))"
                    r"|file: (?P<file>[\w.]+)) -->\n)?```python\n(?P<code>.*?)```", re.S)
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[^\n`]*)$")


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and why it is not run here (None: it runs)."""

    path: Path
    line: int
    code: str
    why: str | None
    file: str | None = None

    @property
    def name(self) -> str:
        """``page.md:line``, the block's name in test ids and messages."""
        return f"{self.path.name}:{self.line}"


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
        line = text[:m.start()].count("\n") + 1 + (m.group(0).startswith("<!--"))
        out.append(Block(path, line, m.group("code"), why, m.group("file")))
    return out


def code_lines(path: Path) -> list[tuple[int, str]]:
    """Every line inside a fenced code block of ``path``, with its line number."""
    out, fence = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group("fence")
        elif m and m.group("fence").startswith(fence) and not m.group("lang").strip():
            fence = None
        else:
            out.append((number, line))
    return out


def too_wide(path: Path, width: int = WIDTH) -> list[str]:
    """``page:line (columns)`` for every code line of ``path`` wider than ``width``."""
    return [f"{path.name}:{n} ({len(line)} columns)" for n, line in code_lines(path) if len(line) > width]


def run_block(block: Block, folder: Path) -> dict:
    """Run ``block`` alone: a fresh namespace, ``folder`` as the working directory; its namespace.

    A failure names the block (``page.md:line``) and the exception."""
    namespace: dict = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(block.code, block.name, "exec"), namespace)
    except Exception as exc:  # name the block that broke
        raise AssertionError(f"the example at {block.name} fails when run alone: "
                             f"{type(exc).__name__}: {exc}") from exc
    finally:
        os.chdir(here)
    return namespace
