"""``landscape gen`` stopped by Ctrl-C: what was kept and the command that resumes (private).

The generation keeps what it evaluated: finished landscapes and the finished points of
the unfinished one are in ``{output}/landscapes.h5`` before the interrupt reaches the
command (see ``landscape/io/_store.py``). This module reads that file (without torch)
and says what it holds and the command line that resumes: the same one, without
``--restart`` (which would start over).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from landscape.io import H5_NAME, stored_landscapes

__all__ = ["interrupted_report", "resume_command", "progress_lines", "reports_here"]


def reports_here() -> bool:
    """Whether this process reports (not a torch.distributed rank other than 0: rank 0 reports)."""
    return os.environ.get("RANK", "0") == "0"


def _program() -> str:
    """How the command was started: ``python -m landscape`` (the interpreter that ran it), else the
    ``landscape`` console script."""
    if os.path.basename(sys.argv[0]) == "__main__.py":
        return f"{shlex.quote(sys.executable)} -m landscape"
    return "landscape"


def resume_command(argv: Sequence[str]) -> str:
    """The command line of ``argv`` (``gen ...``) as a shell command, without ``--restart`` (or an
    abbreviation argparse accepted for it)."""
    kept = [a for a in argv if not (len(a) > 2 and "--restart".startswith(a))]
    return f"{_program()} {shlex.join(kept)}"


def progress_lines(h5: Path) -> list[str]:
    """One line per landscape of ``h5``: finished, or ``done of total points``; [] when unreadable."""
    try:
        stored = stored_landscapes(h5)
    except (OSError, KeyError, ValueError):
        return []
    lines = [f"{tag}: finished" for tag in stored.finished]
    lines += [f"{tag}: unfinished, {done} of {total} points" for tag, (done, total) in stored.unfinished.items()]
    return lines


def interrupted_report(args: argparse.Namespace, argv: Sequence[str]) -> str:
    """What the interrupted ``gen`` kept in its output's ``landscapes.h5`` and how to resume."""
    out = Path(args.output or args.summary_dir)
    h5 = out / H5_NAME
    kept = progress_lines(h5) if h5.is_file() else []
    lines = ["landscape gen: interrupted."]
    if kept:
        lines.append(f"Kept in {h5}:")
        lines += [f"  {line}" for line in kept]
    else:
        lines.append(f"Nothing was kept in {h5} yet (no point had been evaluated).")
    lines.append(f"To resume (only the missing points are evaluated), run the same command again in {os.getcwd()}:")
    lines.append(f"  {resume_command(argv)}")
    return "\n".join(lines)
