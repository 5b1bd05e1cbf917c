"""What several commands share: usage errors, output folders, file names from tags."""

from __future__ import annotations

import argparse
import datetime as _dt
import re
from pathlib import Path
from typing import Any

from collector.common import check_directory

__all__ = ["UsageError", "fresh_dir", "safe_name", "describe", "non_negative", "positive"]


class UsageError(Exception):
    """Bad usage detected after parsing (a bad value, an existing output folder): exit status 2."""


def _int_from(text: str, lo: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= {lo}; got {text!r}") from None
    if value < lo:
        raise argparse.ArgumentTypeError(f"expected an int >= {lo}; got {value}")
    return value


def non_negative(text: str) -> int:
    """An argparse type: an int >= 0 (every subcommand's ``--seed``), refused by the parser naming the option."""
    return _int_from(text, 0)


def positive(text: str) -> int:
    """An argparse type: an int >= 1 (``--num-samples``, epochs, ...)."""
    return _int_from(text, 1)


def fresh_dir(requested: Path | None, stem: str) -> Path:
    """The output folder: the one asked for if new or empty, else a fresh timestamped one."""
    if requested is not None:
        check_directory("--out", requested, caller="landscape", hint="choose a new folder (nothing is overwritten).")
        if requested.exists() and any(requested.iterdir()):
            raise UsageError(f"--out {str(requested)!r} already exists and is not empty; "
                             "choose a new folder (nothing is overwritten)")
        return requested
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, k = Path.cwd() / f"{stem}_{stamp}", 1
    while path.exists():
        path, k = Path.cwd() / f"{stem}_{stamp}-{k}", k + 1
    return path


def safe_name(tag: str) -> str:
    """A file-name stem from a tag: 'landscape_[1, 5]' -> 'landscape_1_5'."""
    return re.sub(r"[^A-Za-z0-9-]+", "_", tag).strip("_")


def describe(ls: Any) -> str:
    """``tag: NXxNY, min loss ..., A <loss of A> ..., k of n points non-finite``: how ``gen``
    reports a landscape (:meth:`landscape.result.Landscape.summary`)."""
    return str(ls.summary())
