"""Reading summary and lineage files back: events, and plain numpy structures.

The reader verifies every CRC. On a torn tail or a damaged record it keeps everything
intact before it and reports what it skipped in ``issues`` (or raises
:class:`CorruptRecordError` when asked with ``strict=True``); it never raises anything
else for damaged content. A record whose CRC is right but whose payload is not a valid
message is skipped and reported the same way.
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
from collector.summary._framing import (
    CorruptRecordError,
    RecordIssue,
    iter_records,
)
from collector.summary._packing import tensor_to_numpy

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
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"no summary file or directory at {str(p)!r}")
    files = [f for f in p.iterdir() if f.is_file() and _SUMMARY_RE.search(f.name)]
    return sorted(files, key=lambda f: (_file_seconds(f.name), f.name))


def read_events(
    path: str | os.PathLike, *, issues: list[RecordIssue] | None = None, strict: bool = False
) -> Iterator[tuple[str, object]]:
    """Yield ``(kind, event)`` for every intact record of a file or a directory.

    ``kind`` is ``"summary"`` (``event`` is a :class:`collector.proto.Event`) or
    ``"lineage"`` (a :class:`collector.proto.LineageEvent`).

    Parameters
    ----------
    path : str or os.PathLike
        A summary/lineage file, or a directory holding them.
    issues : list, optional
        Receives a :class:`RecordIssue` for every damaged or undecodable part skipped.
    strict : bool, default=False
        Raise :class:`CorruptRecordError` at the first damage instead (after yielding
        the intact records before it).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    CorruptRecordError
        Only with ``strict=True``.
    """
    found: list[RecordIssue] = []
    for file in summary_files(path):
        kind = "lineage" if file.name.endswith("_lineage") else "summary"
        cls = proto.LineageEvent if kind == "lineage" else proto.Event
        start = len(found)
        for offset, payload in iter_records(file, found):
            try:
                event = cls.FromString(payload)
            except (DecodeError, ValueError) as exc:
                found.append(RecordIssue(str(file), offset, f"undecodable {cls.__name__}: {exc}"))
                if strict:
                    break
                continue
            yield kind, event
        for issue in found[start:]:
            logger.warning("skipped damaged data: %s", issue)
            if issues is not None:
                issues.append(issue)
        if strict and len(found) > start:
            raise CorruptRecordError(str(found[start]))


class SummaryReader:
    """Load a summary file or directory into plain numpy structures.

    Everything is read once, at construction. ``issues`` lists what was skipped.

    Examples
    --------
    >>> reader = SummaryReader("runs/run1")                       # doctest: +SKIP
    >>> steps, values = reader.scalars()["loss/auto"]             # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, *, strict: bool = False) -> None:
        self.path = os.fspath(path)
        self.issues: list[RecordIssue] = []
        self.events: list = []
        self.lineage_events: list = []
        for kind, event in read_events(path, issues=self.issues, strict=strict):
            (self.lineage_events if kind == "lineage" else self.events).append(event)

    def _values(self, field: str) -> Iterator[tuple[int, float, Any]]:
        for ev in self.events:
            if ev.WhichOneof("what") == "summary":
                for v in ev.summary.value:
                    if v.WhichOneof("value") == field:
                        yield ev.step, ev.wall_time, v

    def tags(self) -> dict[str, list[str]]:
        """Plugin name ('scalar', 'image', 'tensor', 'histogram', 'landscape') to tags, in order."""
        names = {"scalar_value": "scalar", "image": "image", "tensor": "tensor", "histogram": "histogram",
                 "loss_landscape": "landscape"}
        out: dict[str, list[str]] = {}
        for ev in self.events:
            if ev.WhichOneof("what") == "summary":
                for v in ev.summary.value:
                    tags = out.setdefault(names.get(v.WhichOneof("value"), "unknown"), [])
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
        for step, _, v in self._values("histogram"):
            h = v.histogram
            out.setdefault(v.tag, []).append(
                {
                    "step": step,
                    "left": np.array([b.left for b in h.buckets], dtype=np.float64),
                    "width": np.array([b.width for b in h.buckets], dtype=np.float64),
                    "count": np.array([b.count for b in h.buckets], dtype=np.int64),
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
            out.setdefault(v.tag, []).append((step, tensor_to_numpy(v.tensor)))
        return out

    def landscape_messages(self) -> list[tuple[int, str, Any]]:
        """``(step, tag, proto.LossLandscape)`` for every landscape, in file order."""
        return [(step, v.tag, v.loss_landscape) for step, _, v in self._values("loss_landscape")]

    def landscapes(self) -> dict[str, dict]:
        """Tag to a dict of numpy arrays: x, y, z, path_x/path_y/path_z/intervals, convergence, metadata."""
        out = {}
        for step, tag, ll in self.landscape_messages():
            f64 = np.float64
            item = {
                "step": step,
                "x": tensor_to_numpy(ll.landscape.x, f64),
                "y": tensor_to_numpy(ll.landscape.y, f64),
                "z": tensor_to_numpy(ll.landscape.z, f64),
                "intervals": np.array(ll.loss_path.intervals, dtype=np.int64),
                "decomposition": ll.metadata.decomposition,
                "unit": ll.metadata.unit,
                "step_per_epoch": ll.metadata.step_per_epoch,
                "convergence_point": np.array([_first(getattr(ll.convergence_point, a)) for a in "xyz"]),
            }
            if ll.HasField("loss_path") and len(ll.loss_path.intervals):
                for a in "xyz":
                    item[f"path_{a}"] = tensor_to_numpy(getattr(ll.loss_path.points, a), f64).reshape(-1)
            out[tag] = item
        return out

    def graphs(self) -> list[tuple[int, object]]:
        """``(step, proto.GraphProto)`` for every graph event."""
        return [(ev.step, ev.graph_def) for ev in self.events if ev.WhichOneof("what") == "graph_def"]

    def lineage(self) -> list:
        """Every LineageEvent except the version record."""
        return [ev for ev in self.lineage_events if ev.WhichOneof("what") != "version"]


def _first(tensor) -> float:
    values = tensor_to_numpy(tensor, np.float64).reshape(-1)
    return float(values[0]) if values.size else float("nan")


def decode_png(data: bytes) -> np.ndarray:
    """Decode a PNG to an HxWxC uint8 array (Pillow, installed with matplotlib)."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        arr = np.asarray(im)
    return arr[:, :, None] if arr.ndim == 2 else arr

