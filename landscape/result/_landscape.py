"""The ``Landscape`` result and its LossLandscape message (private)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collector import proto
from landscape.result._display import png_renderer

__all__ = ["Landscape", "LossPath"]


@dataclass
class LossPath:
    """The training path projected on the plane: coordinates, losses and step numbers."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    intervals: list[int]


@dataclass
class Landscape:
    """A loss landscape: ``z[i, j]`` is the loss at ``(x[j], y[i])``.

    Attributes
    ----------
    x, y : ndarray of shape (size,)
        The axes.
    z : ndarray of shape (size, size)
        The loss grid (NaN/inf kept).
    path : LossPath or None
        The training path (PCA landscapes).
    convergence_point : tuple of float
        ``(x, y, z)`` of the convergence point.
    metadata : dict
        ``decomposition`` ("PCA"/"Random"), ``unit``, ``step_per_epoch``,
        ``normalization``, ``seed``, ``num_samples`` and more.
    surfaces : dict of str to ndarray
        Extra metrics on the same grid.
    tag : str or None
        The summary tag, e.g. ``"landscape_[1, 5]"``.
    """

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    path: LossPath | None = None
    convergence_point: tuple[float, float, float] = (0.0, 0.0, float("nan"))
    metadata: dict[str, Any] = field(default_factory=dict)
    surfaces: dict[str, np.ndarray] = field(default_factory=dict)
    tag: str | None = None

    def to_proto(self) -> Any:
        """The ``proto.LossLandscape`` message, filled as MindSpore 2.10 fills it."""
        def tensor(values: Any, dtype: int, dims: list[int] | None = None) -> Any:
            arr = np.asarray(values, dtype=np.float64)
            return proto.TensorProto(dims=list(arr.shape) if dims is None else dims, data_type=dtype,
                                     float_data=arr.reshape(-1).tolist())

        msg = proto.LossLandscape()
        msg.landscape.x.CopyFrom(tensor(self.x, proto.DT_FLOAT64))
        msg.landscape.y.CopyFrom(tensor(self.y, proto.DT_FLOAT64))
        msg.landscape.z.CopyFrom(tensor(self.z, proto.DT_FLOAT64))
        cx, cy, cz = self.convergence_point
        if self.path is not None:
            msg.loss_path.intervals.extend(int(i) for i in self.path.intervals)
            msg.loss_path.points.x.CopyFrom(tensor(self.path.x, proto.DT_FLOAT32))
            msg.loss_path.points.y.CopyFrom(tensor(self.path.y, proto.DT_FLOAT32))
            msg.loss_path.points.z.CopyFrom(tensor(self.path.z, proto.DT_FLOAT64))
            xy_type = proto.DT_INT64  # MindSpore writes the PCA origin (0, 0) as int64
        else:
            xy_type = proto.DT_FLOAT64
        msg.convergence_point.x.CopyFrom(tensor([cx], xy_type))
        msg.convergence_point.y.CopyFrom(tensor([cy], xy_type))
        msg.convergence_point.z.CopyFrom(tensor([cz], proto.DT_FLOAT64))
        md = self.metadata
        if md.get("decomposition"):
            msg.metadata.decomposition = str(md["decomposition"])
        if md.get("unit"):
            msg.metadata.unit = str(md["unit"])
        if md.get("step_per_epoch") is not None:
            msg.metadata.step_per_epoch = int(md["step_per_epoch"])
        return msg

    def _repr_png_(self) -> bytes | None:
        """Jupyter shows a Landscape as its filled-contour plot (drawn by the renderer ``viz`` registers)."""
        render = png_renderer()
        return None if render is None else render(self)

    @classmethod
    def from_proto(cls, msg: Any, tag: str | None = None) -> Landscape:
        """Build a Landscape from a ``proto.LossLandscape`` (or its serialized bytes)."""
        if isinstance(msg, (bytes, bytearray)):
            msg = proto.LossLandscape.FromString(bytes(msg))

        def arr(t: Any) -> np.ndarray:
            vals = list(t.float_data) or list(t.double_data)
            a = np.asarray(vals, dtype=np.float64)
            dims = [int(d) for d in t.dims]
            return a.reshape(dims) if dims and int(np.prod(dims)) == a.size else a

        x, y = arr(msg.landscape.x), arr(msg.landscape.y)
        z = arr(msg.landscape.z)
        if z.ndim != 2 and z.size == x.size * y.size:
            z = z.reshape(y.size, x.size)
        path = None
        if msg.HasField("loss_path") and len(msg.loss_path.intervals):
            pts = msg.loss_path.points
            path = LossPath(arr(pts.x), arr(pts.y), arr(pts.z), [int(i) for i in msg.loss_path.intervals])
        cp = msg.convergence_point

        def first(t: Any) -> float:
            a = arr(t).reshape(-1)
            return float(a[0]) if a.size else float("nan")

        md: dict[str, Any] = {}
        if msg.metadata.HasField("decomposition"):
            md["decomposition"] = msg.metadata.decomposition
        if msg.metadata.HasField("unit"):
            md["unit"] = msg.metadata.unit
        if msg.metadata.HasField("step_per_epoch"):
            md["step_per_epoch"] = int(msg.metadata.step_per_epoch)
        return cls(x=x, y=y, z=z, path=path, convergence_point=(first(cp.x), first(cp.y), first(cp.z)),
                   metadata=md, tag=tag)
