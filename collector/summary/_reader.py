"""Reading summary and lineage files back: events, and plain numpy structures.

The reader verifies every CRC. On a torn tail or a damaged record it keeps everything
intact before it and reports what it skipped in ``issues`` (or raises
:class:`CorruptRecordError` when asked with ``strict=True``); it never raises anything
else for damaged content. A record whose CRC is right but whose payload is not a valid
message, lacks a required field or holds a string that is not UTF-8 is skipped and
reported the same way; so is a value whose content cannot be used (a PNG that does not
decode, tensor bytes that do not fit their dims, histogram counts that do not add up, a
landscape that does not fit its axes: see ``_damage``), with its tag and step. In a
directory, a file that cannot be read at all is reported and skipped.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from collector.summary import _proto as proto
from collector.summary._damage import (
    decode_png,
    has_unknown_fields,
    histogram_buckets,
    lost_field,
    lost_here,
    tensor_array,
    text_damage,
    value_damage,
)
from collector.summary._framing import (
    CorruptRecordError,
    RecordIssue,
    SummaryReadError,
    iter_records,
)

logger = logging.getLogger(__name__)

__all__ = ["read_events", "SummaryReader", "summary_files", "is_summary_file", "is_lineage_file"]

# MindInsight's rule: a run's file names contain "summary." followed by digits.
_SUMMARY_RE = re.compile(r"summary\.(\d+)")


def _file_seconds(name: str) -> int:
    """The creation second in a summary file's name (0 when it has none)."""
    m = _SUMMARY_RE.search(name)
    return int(m.group(1)) if m else 0


def is_lineage_file(name: str) -> bool:
    return bool(_SUMMARY_RE.search(name)) and name.endswith("_lineage")


def is_summary_file(name: str) -> bool:
    return bool(_SUMMARY_RE.search(name)) and not name.endswith("_lineage")


def summary_files(path: str | os.PathLike) -> list[Path]:
    """The summary and lineage files of a directory (not recursive), oldest first.

    A file path is returned as the only element. Order: the timestamp in the name,
    then the name, which is the order the files were written in.

    Parameters
    ----------
    path : str or os.PathLike
        A summary folder, or one summary or lineage file.

    Returns
    -------
    list of Path
        The files, oldest first.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    SummaryReadError
        ``path`` is a directory that cannot be listed.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"no summary file or directory at {str(p)!r}")
    try:
        files = [f for f in p.iterdir() if f.is_file() and _SUMMARY_RE.search(f.name)]
    except OSError as exc:
        raise SummaryReadError(f"The summary directory {str(p)!r} cannot be listed: {exc.strerror or exc}.") from None
    return sorted(files, key=lambda f: (_file_seconds(f.name), f.name))


def read_events(
    path: str | os.PathLike, *, issues: list[RecordIssue] | None = None, strict: bool = False
) -> Iterator[tuple[str, object]]:
    """Yield ``(kind, event)`` for every intact record of a file or a directory.

    ``kind`` is ``"summary"`` (``event`` is a :class:`collector.proto.Event`) or
    ``"lineage"`` (a :class:`collector.proto.LineageEvent`). Every event yielded parsed,
    carries its required fields and holds only UTF-8 strings (a re-serialisation
    succeeds); the values inside a summary event are checked by :class:`SummaryReader`.

    Parameters
    ----------
    path : str or os.PathLike
        A summary/lineage file, or a directory holding them.
    issues : list, optional
        Receives a :class:`RecordIssue` for every damaged or undecodable part skipped,
        and for every file of a directory that cannot be read.
    strict : bool, default=False
        Raise :class:`CorruptRecordError` at the first damage instead (after yielding
        the intact records before it).

    Yields
    ------
    kind : {"summary", "lineage"}
    event : collector.proto.Event or collector.proto.LineageEvent

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    SummaryReadError
        ``path`` is a file that cannot be read, or a directory that cannot be listed;
        with ``strict=True``, also a file of a directory that cannot be read.
    CorruptRecordError
        Only with ``strict=True``.
    """
    for kind, event, _, _ in _read(path, issues, strict):
        yield kind, event


def _read(path: str | os.PathLike, issues: list[RecordIssue] | None,
          strict: bool) -> Iterator[tuple[str, Any, str, int]]:
    """:func:`read_events` with each event's file and byte offset."""
    files = summary_files(path)
    single = Path(path).is_file()
    for file in files:
        kind = "lineage" if file.name.endswith("_lineage") else "summary"
        cls = proto.LineageEvent if kind == "lineage" else proto.Event
        found: list[RecordIssue] = []
        try:
            for offset, payload in iter_records(file, found):
                event, reason = _event_damage(cls, payload)
                if reason is not None:
                    found.append(RecordIssue(str(file), offset, reason))
                    if strict:
                        break
                    continue
                yield kind, event, str(file), offset
        except OSError as exc:
            # One unreadable file does not hide the others of a directory; alone, it is the error.
            message = f"The summary file {str(file)!r} cannot be read: {exc.strerror or exc}."
            if single or strict:
                raise SummaryReadError(message) from None
            found.append(RecordIssue(str(file), 0, f"cannot be read: {exc.strerror or exc}"))
        for issue in found:
            logger.warning("skipped damaged data: %s", issue)
            if issues is not None:
                issues.append(issue)
        if strict and found:
            raise CorruptRecordError(str(found[0]))


def _event_damage(cls: Any, payload: bytes) -> tuple[Any, str | None]:
    """``(event, None)``, or ``(None, why)`` when the record cannot be used.

    A summary event's own fields are checked here, its values by :class:`SummaryReader`,
    value by value: one bad value then names its tag and step, and the values of a plugin
    nobody asks for are not checked.
    """
    try:
        event = cls.FromString(payload)
    except (DecodeError, ValueError) as exc:
        return None, f"undecodable {cls.__name__}: {exc}"
    if not event.IsInitialized():
        return None, f"{cls.__name__} lacks required field(s) {event.FindInitializationErrors()}"
    if cls is proto.Event and event.WhichOneof("what") == "summary":
        text = lost_here(event) or lost_here(event.summary)  # its own fields; its values: see above
    else:
        text = text_damage(event) or (lost_field(event) if has_unknown_fields(event) else None)
    return (None, f"{cls.__name__}: {text}") if text else (event, None)


class SummaryReader:
    """Load a summary file or directory into plain numpy structures.

    The records are read once, at construction; a record that cannot be used is skipped
    and reported in ``issues``. The values of a plugin are checked when its accessor first
    needs them (all of them when ``issues`` is read): a damaged one is left out and
    reported with its file, byte offset, tag and step. The accessors return only usable
    values and never raise for damaged content; with ``strict=True`` the construction
    checks everything and raises :class:`CorruptRecordError` at the first damage instead.

    Parameters
    ----------
    path : str or os.PathLike
        A summary or lineage file, or a directory holding them (a file of it that cannot
        be read is reported in ``issues`` and skipped).
    strict : bool, default=False

    Attributes
    ----------
    events : list of proto.Event
        Every summary event that parsed with its required fields (a value of one may
        still be damaged: the accessors leave it out).
    lineage_events : list of proto.LineageEvent
    issues : list of RecordIssue
        What was skipped (reading it checks every value not checked yet).

    Examples
    --------
    >>> reader = SummaryReader("runs/run1")                       # doctest: +SKIP
    >>> steps, values = reader.scalars()["loss/auto"]             # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, *, strict: bool = False) -> None:
        self.path = os.fspath(path)
        self._issues: list[RecordIssue] = []
        self.events: list = []
        self.lineage_events: list = []
        self._origin: list[tuple[str, int]] = []  # file and offset of each event's record
        self._damaged: set[tuple[int, int]] = set()  # (event, value) indices of damaged values
        self._checked: set[str] = set()  # the plugins (Summary.Value fields) whose values were checked
        self._histograms: dict[tuple[int, int], tuple[list, list, list]] = {}  # buckets, read by the check
        self._strict = strict
        for kind, event, file, offset in _read(path, self._issues, strict):
            if kind == "lineage":
                self.lineage_events.append(event)
            else:
                self.events.append(event)
                self._origin.append((file, offset))
        if strict:
            self._check(None)

    @property
    def issues(self) -> list[RecordIssue]:
        """Every record skipped and every damaged value (all values are checked first)."""
        self._check(None)
        return self._issues

    def _check(self, fields: tuple[str, ...] | None) -> None:
        """Check the values of these ``Summary.Value`` fields (None: all) not checked yet."""
        todo = None if fields is None else [f for f in fields if f not in self._checked]
        if todo == [] or (todo is None and "*" in self._checked):
            return
        for i, ev in enumerate(self.events):
            if ev.WhichOneof("what") != "summary":
                continue
            for j, v in enumerate(ev.summary.value):
                kind = v.WhichOneof("value") or ""
                if kind in self._checked or (todo is not None and kind not in todo) or (i, j) in self._damaged:
                    continue
                self._check_value(i, j, ev, v, kind)
        self._checked.update(_PLUGIN if todo is None else todo)
        if todo is None:
            self._checked.update(("*", ""))

    def _check_value(self, i: int, j: int, ev: Any, v: Any, kind: str) -> None:
        file, offset = self._origin[i]
        buckets = histogram_buckets(v.histogram) if kind == "histogram" else None
        reason = value_damage(v, histogram=buckets)
        if reason is None:
            if buckets is not None:
                self._histograms[(i, j)] = buckets
            return
        tag = v.tag if isinstance(v.tag, str) else bytes(v.tag).decode("utf-8", "replace")
        self._report(RecordIssue(file, offset, f"damaged {_PLUGIN.get(kind, 'value')}: {reason}", tag=tag,
                                 step=int(ev.step)))
        self._damaged.add((i, j))

    def _report(self, issue: RecordIssue) -> None:
        if self._strict:
            raise CorruptRecordError(str(issue))
        logger.warning("skipped damaged data: %s", issue)
        self._issues.append(issue)

    def _usable(self, fields: tuple[str, ...] | None) -> Iterator[tuple[int, int, Any, Any]]:
        """``(event index, value index, event, value)`` of the checked, usable values of these fields."""
        self._check(fields)
        for i, ev in enumerate(self.events):
            if ev.WhichOneof("what") == "summary":
                for j, v in enumerate(ev.summary.value):
                    if (i, j) not in self._damaged and (fields is None or v.WhichOneof("value") in fields):
                        yield i, j, ev, v

    def _values(self, field: str) -> Iterator[tuple[int, float, Any]]:
        for _, _, ev, v in self._usable((field,)):
            yield ev.step, ev.wall_time, v

    def tags(self) -> dict[str, list[str]]:
        """Plugin name ('scalar', 'image', 'tensor', 'histogram', 'landscape') to tags, in order."""
        out: dict[str, list[str]] = {}
        for _, _, _, v in self._usable(None):
            tags = out.setdefault(_PLUGIN.get(v.WhichOneof("value") or "", "unknown"), [])
            if v.tag not in tags:
                tags.append(v.tag)
        return out

    def scalars(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Tag to ``(steps int64, values float64)`` in file order."""
        acc: dict[str, tuple[list, list]] = {}
        for step, _, v in self._values("scalar_value"):
            s, x = acc.setdefault(v.tag, ([], []))
            s.append(step)
            x.append(v.scalar_value)
        return {t: (np.asarray(s, dtype=np.int64), np.asarray(x, dtype=np.float64)) for t, (s, x) in acc.items()}

    def histograms(self) -> dict[str, list[dict]]:
        """Tag to a list of dicts: step, left, width, count (arrays), min, max, sum, and counts."""
        out: dict[str, list[dict]] = {}
        for i, j, ev, v in self._usable(("histogram",)):
            h = v.histogram
            left, width, count = self._histograms[(i, j)]
            out.setdefault(v.tag, []).append(
                {
                    "step": ev.step,
                    "left": np.array(left, dtype=np.float64),
                    "width": np.array(width, dtype=np.float64),
                    "count": np.array(count, dtype=np.int64),
                    "min": h.min, "max": h.max, "sum": h.sum, "total": h.count,
                    "nan_count": h.nan_count, "pos_inf_count": h.pos_inf_count, "neg_inf_count": h.neg_inf_count,
                }
            )
        return out

    def images(self) -> dict[str, list[tuple[int, np.ndarray]]]:
        """Tag to a list of ``(step, HxWxC uint8 array)``, decoded from PNG."""
        out: dict[str, list[tuple[int, np.ndarray]]] = {}
        for step, _, v in self._values("image"):
            out.setdefault(v.tag, []).append((step, decode_png(v.image.encoded_image)))
        return out

    def tensors(self) -> dict[str, list[tuple[int, np.ndarray]]]:
        """Tag to a list of ``(step, array)`` with the recorded shape and dtype."""
        out: dict[str, list[tuple[int, np.ndarray]]] = {}
        for step, _, v in self._values("tensor"):
            out.setdefault(v.tag, []).append((step, _array(v.tensor)))
        return out

    def landscape_messages(self) -> list[tuple[int, str, Any]]:
        """``(step, tag, proto.LossLandscape)`` for every usable landscape, in file order."""
        return [(step, v.tag, v.loss_landscape) for step, _, v in self._values("loss_landscape")]

    def landscapes(self) -> dict[str, dict]:
        """Tag to a dict of numpy arrays: x, y, z, path_x/path_y/path_z/intervals, convergence, metadata."""
        out = {}
        for step, tag, ll in self.landscape_messages():
            f64 = np.float64
            item = {
                "step": step,
                "x": _array(ll.landscape.x, f64),
                "y": _array(ll.landscape.y, f64),
                "z": _array(ll.landscape.z, f64),
                "intervals": np.array(ll.loss_path.intervals, dtype=np.int64),
                "decomposition": ll.metadata.decomposition,
                "unit": ll.metadata.unit,
                "step_per_epoch": ll.metadata.step_per_epoch,
                "convergence_point": np.array([_first(getattr(ll.convergence_point, a)) for a in "xyz"]),
            }
            if ll.HasField("loss_path") and len(ll.loss_path.intervals):
                for a in "xyz":
                    item[f"path_{a}"] = _array(getattr(ll.loss_path.points, a), f64).reshape(-1)
            out[tag] = item
        return out

    def graphs(self) -> list[tuple[int, object]]:
        """``(step, proto.GraphProto)`` for every graph event."""
        return [(ev.step, ev.graph_def) for ev in self.events if ev.WhichOneof("what") == "graph_def"]

    def lineage(self) -> list:
        """Every LineageEvent except the version record."""
        return [ev for ev in self.lineage_events if ev.WhichOneof("what") != "version"]


#: The plugin of each ``Summary.Value`` field, as ``tags()`` and messages name it.
_PLUGIN = {"scalar_value": "scalar", "image": "image", "tensor": "tensor", "histogram": "histogram",
           "loss_landscape": "landscape"}


def _array(tensor: Any, dtype: Any = None) -> np.ndarray:
    """A tensor already checked at construction (``value_damage``)."""
    arr, why = tensor_array(tensor, dtype)
    if arr is None:  # pragma: no cover - checked when the reader was built
        raise AssertionError(why)
    return arr


def _first(tensor: Any) -> float:
    values = _array(tensor, np.float64).reshape(-1)
    return float(values[0]) if values.size else float("nan")
