"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

Every file the project writes in place of another (checkpoints, ``train_metadata.json``,
``landscapes.h5``, exports) goes through :func:`atomic_path`: the content is written to a
temporary name in the same folder, then renamed over the target with ``os.replace``
(atomic on POSIX). A failure removes the temporary file and leaves the target as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["atomic_path", "temporary_name", "fsync_path"]


def temporary_name(path: str) -> str:
    """``{path}.tmp-{pid}``: the temporary name :func:`atomic_path` writes to.

    The process id lets a later process recognise (and remove) the copy of a process
    that was killed mid-write.
    """
    return f"{path}.tmp-{os.getpid()}"


def fsync_path(path: str) -> None:
    """``fsync`` a file or a directory by name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, durable: bool = False) -> Iterator[str]:
    """Yield a temporary path to write; on success it replaces ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace.
    durable : bool, default=False
        Also ``fsync`` the file before the rename and the folder after it, so the new
        content survives a machine crash (not only a process crash).

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> with atomic_path(target) as tmp:
    ...     with open(tmp, "w") as fh:
    ...         _ = fh.write("whole")
    >>> open(target).read()
    'whole'
    """
    target = os.fspath(path)
    tmp = temporary_name(target)
    try:
        yield tmp
        if durable:
            fsync_path(tmp)
        os.replace(tmp, target)
        if durable:
            fsync_path(os.path.dirname(os.path.abspath(target)))
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
