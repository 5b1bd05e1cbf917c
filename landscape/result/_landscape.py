"""The ``Landscape`` result and its LossLandscape message (private)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collector import proto
from landscape.result._display import png_renderer
from landscape.topology import Topology, grid_topology

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
    """A loss landscape: ``z[i, j]`` is the loss at ``(x[j], y[i])``; a line: ``z[j]`` at ``x[j]``.

    One type holds the planes (``z`` of shape (len(y), len(x)), square or not), the lines
    (random lines, interpolations between models: ``z`` of shape (len(x),) and ``y`` empty)
    and the n-D grids (``z[k, i, j]`` at ``(x[j], y[i], extra_axes[0][k])``, the later axes
    first), so that loading, writing, exporting and plotting take them; ``dims`` tells them
    apart.

    Attributes
    ----------
    x : ndarray of shape (nx,)
        The first axis.
    y : ndarray of shape (ny,)
        The second axis; empty (shape (0,)) for a line.
    z : ndarray of shape (ny, nx), (nx,) for a line, (..., n3, ny, nx) for an n-D grid
        The loss (NaN/inf kept).
    path : LossPath or None
        The training path (PCA landscapes).
    convergence_point : tuple of float
        ``(x, y, z)`` of the convergence point (``y`` is 0 on a line).
    metadata : dict
        ``decomposition`` ("PCA", "Random", "Given", "Interpolation", "Plane", "Target"),
        ``unit``, ``step_per_epoch``, ``normalization``, ``seed``, ``num_samples`` and more.
    surfaces : dict of str to ndarray
        Extra metrics, shaped like ``z``.
    tag : str or None
        The summary tag, e.g. ``"landscape_[1, 5]"``.
    markers : dict of str to (float, float, float)
        Named points of the view, ``label -> (x, y, loss)``: the models an interpolation
        or a plane passes through (``"A"``, ``"B"``, ``"C"``), each evaluated at exactly
        its coordinates.
    paths : dict of str to LossPath
        Several runs' paths on one plane, by run name (``path`` is the first of them);
        ``metadata["path_distance"]`` holds each checkpoint's distance from the plane,
        relative to its distance from the centre.
    clamped : ndarray of int, shaped like ``z``, or None
        On a view through models with ``bn_statistics="clamped"``: at each point, how many
        batch-norm running-variance channels came out negative when carried with the weights
        and were clamped at zero (values there are the clamped network's, not the models');
        None where nothing can be clamped. Counted in :attr:`clamped_points` and
        :meth:`summary`, marked by the plots and the report.
    directions_source : object or None
        Where :meth:`directions` gets the directions: ``landscapes.h5`` (read when asked for), or
        memory for a landscape computed in this process; None when they were not kept. Set by
        ``landscape.io`` and ``landscape.generate``; ``None`` frees what it holds.
    extra_axes : tuple of ndarray
        The third and later axes of an n-D grid (empty for a line or a plane).
    """

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    path: LossPath | None = None
    convergence_point: tuple[float, float, float] = (0.0, 0.0, float("nan"))
    metadata: dict[str, Any] = field(default_factory=dict)
    surfaces: dict[str, np.ndarray] = field(default_factory=dict)
    tag: str | None = None
    markers: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    paths: dict[str, LossPath] = field(default_factory=dict)
    clamped: np.ndarray | None = None
    directions_source: Any = field(default=None, repr=False, compare=False)
    extra_axes: tuple[np.ndarray, ...] = ()

    def directions(self, centre: Any = None) -> tuple[dict[str, Any] | None, ...]:
        """The landscape's directions ``(v, w)``: float32 CPU tensors by moved parameter name, ``w`` None
        for a line; the point ``(a, b)`` of the grid (``a = x[j]``, ``b = y[i]`` for random, PCA, given and
        Hessian planes) is ``centre + a*v + b*w``. An n-D grid gives one per axis, ``(v, w, u3, ..., un)``,
        in the order of :attr:`axes`: its point ``(a, b, c3, ...)`` is ``centre + a*v + b*w + c3*u3 + ...``.

        PCA, given and Hessian directions and those of views through models are read from
        ``landscapes.h5`` (or kept in memory for a landscape computed in this process), checked against
        the SHA-256 recorded with them. Random directions are their recipe, drawn again and checked
        against the digest of the original draw: a torch that draws other numbers is refused, saying so.

        Parameters
        ----------
        centre : mapping of str to Tensor, nn.Module or checkpoint path, optional
            The weights the landscape is centred on: needed for random directions normalized against
            them (every normalization but "none", "dlayer" and "dfilter"), and checked against the
            recorded digest of the centre.

        Returns
        -------
        tuple of dict of str to Tensor
            ``(v, w)`` for a line (``w`` None) or a plane; ``(v, w, u3, ...)``, ``dims`` of them, for an
            n-D grid, every one checked against its digest.

        Raises
        ------
        ValueError
            The directions were not kept (a file written before they were, a model over the size
            limit, a sharded network), do not match their digests, or ``centre`` is needed or wrong
            (``InvalidParameterError``, naming it).
        """
        if self.directions_source is None:
            raise ValueError(
                f"{self.tag or 'This landscape'} holds no directions: it was read from a summary file, an export "
                "or a landscapes.h5 written before directions were kept, or made by a rank other than 0. HINT: "
                "generate it again (landscape gen --restart, or compute_landscape), which keeps them.")
        return self.directions_source.load(centre)

    @property
    def dims(self) -> int:
        """1 for a line (``z`` of shape (len(x),)), 2 for a plane, n for an n-D grid."""
        return max(1, int(np.ndim(self.z)))

    @property
    def axes(self) -> list[np.ndarray]:
        """The axes in order: ``[x]`` for a line, ``[x, y]`` for a plane, ``[x, y, *extra_axes]``."""
        return [self.x] if self.dims == 1 else [self.x, self.y, *self.extra_axes]

    def topology(self, connectivity: str = "axis", threshold: float = 0.0) -> Topology:
        """The topology of the loss over the grid: minima, saddles, persistence pairs, merge tree, SMAD.

        :func:`landscape.topology.grid_topology` of ``z`` (no new evaluation): the positions are
        indices into ``z`` (array order: ``(i, j)`` is ``(y[i], x[j])``), their ``coordinates`` the
        axes' values in the same order, and :meth:`~landscape.topology.Topology.basin` is about
        the grid point nearest the centre (the trained weights, model A) by default. On a line
        (a random line, an interpolation) :meth:`~landscape.topology.Topology.barriers` lists
        the barriers along it. Non-finite losses are left out and counted.

        Parameters
        ----------
        connectivity : {"axis", "full"}, default="axis"
            Neighbours along the axes (Landscaper's graph) or all around (gudhi's, TTK's).
        threshold : float, default=0.0
            Pairs of persistence at most this (a loss difference) are simplified away.

        Returns
        -------
        landscape.topology.Topology

        Examples
        --------
        >>> import numpy as np
        >>> from landscape import Landscape
        >>> x = np.linspace(-1, 1, 21)
        >>> ls = Landscape(x=x, y=x, z=(x[None, :] ** 2 - 0.5) ** 2 + x[:, None] ** 2)
        >>> topo = ls.topology()
        >>> len(topo.minima), topo.minima.coordinates.round(3).tolist(), round(topo.smad(), 4)
        (2, [[0.0, 0.7], [0.0, -0.7]], 0.2499)
        """
        axes = self.axes[::-1]
        where = [0.0] * self.dims
        centre = self.metadata.get("centre")
        if isinstance(centre, (list, tuple)) and len(centre) >= 2:
            where[0] = float(centre[0])
            if self.dims > 1:
                where[1] = float(centre[1])
        middle = tuple(int(np.argmin(np.abs(np.asarray(ax, dtype=np.float64) - c)))
                       for ax, c in zip(axes, where[::-1]))
        return grid_topology(self.z, connectivity=connectivity, threshold=threshold, axes=axes, centre=middle)

    @property
    def non_finite(self) -> tuple[int, int]:
        """``(non-finite, all)``: how many of the evaluated points (the grid and the path) have a NaN
        or infinite loss, of how many. Such values are kept (never dropped or filled), counted here
        and in :meth:`summary`, and marked by the plots."""
        paths = list(self.paths.values()) or ([self.path] if self.path is not None else [])
        values = [np.ravel(self.z)] + [np.ravel(p.z) for p in paths]
        flat = np.concatenate(values) if values else np.zeros(0)
        return int(np.count_nonzero(~np.isfinite(flat))), int(flat.size)

    @property
    def clamped_points(self) -> tuple[int, int]:
        """``(points, channels)``: how many grid points had batch-norm running variances clamped at
        zero (:attr:`clamped`), and the most channels clamped at one of them; ``(0, 0)`` when none."""
        if self.clamped is None:
            return 0, 0
        c = np.asarray(self.clamped)
        return int(np.count_nonzero(c)), int(c.max()) if c.size else 0

    def summary(self) -> str:
        """One line: ``tag: NXxNY, min loss ..., A <loss of A> ..., k of n points non-finite``."""
        finite = self.z[np.isfinite(self.z)]
        low = float(finite.min()) if finite.size else float("nan")
        shape = "x".join(str(n) for n in np.shape(self.z)[::-1])  # points along x, then y
        marks = "".join(f", {k} {v[2]:.6g}" for k, v in self.markers.items())
        bad, total = self.non_finite
        tail = f", {bad} of {total} points non-finite" if bad else ""
        clamped, channels = self.clamped_points
        if clamped:
            tail += (f", {clamped} of {np.size(self.z)} points with batch-norm variances clamped at zero "
                     f"(up to {channels} channels)")
        return f"{self.tag or 'landscape'}: {shape}, min loss {low:.6g}{marks}{tail}"

    def to_proto(self) -> Any:
        """The ``proto.LossLandscape`` message, filled as MindSpore 2.10 fills it.

        A plane of any shape keeps MindSpore's layout (``z`` of dims ``[len(y), len(x)]``);
        a line has an empty ``y`` (dims ``[0]``) and ``z`` of dims ``[len(x)]``. MindSpore's
        message has no place for markers: they follow the convergence point in its ``x``,
        ``y`` and ``z`` tensors (MindInsight reads the first value of each), and read back
        labelled "A", "B", "C", ... in order. An n-D grid has no such message (``landscapes.h5``
        holds it): refused with a ``ValueError``.
        """
        if self.dims > 2:
            raise ValueError(f"{self.tag or 'This landscape'} is a grid of {self.dims} directions; MindSpore's "
                             "LossLandscape message holds lines and planes. HINT: landscape.write_h5 keeps it "
                             "(landscapes.h5).")

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
            # MindSpore writes the PCA origin (0, 0) as int64; markers' coordinates are not integers
            xy_type = proto.DT_FLOAT64 if self.markers else proto.DT_INT64
        else:
            xy_type = proto.DT_FLOAT64
        marks = list(self.markers.values())
        msg.convergence_point.x.CopyFrom(tensor([cx, *(m[0] for m in marks)], xy_type))
        msg.convergence_point.y.CopyFrom(tensor([cy, *(m[1] for m in marks)], xy_type))
        msg.convergence_point.z.CopyFrom(tensor([cz, *(m[2] for m in marks)], proto.DT_FLOAT64))
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
        if y.size and z.ndim != 2 and z.size == x.size * y.size:
            z = z.reshape(y.size, x.size)
        path = None
        if msg.HasField("loss_path") and len(msg.loss_path.intervals):
            pts = msg.loss_path.points
            path = LossPath(arr(pts.x), arr(pts.y), arr(pts.z), [int(i) for i in msg.loss_path.intervals])
        cp = msg.convergence_point

        def first(t: Any) -> float:
            a = arr(t).reshape(-1)
            return float(a[0]) if a.size else float("nan")

        cps = [arr(t).reshape(-1) for t in (cp.x, cp.y, cp.z)]
        n_marks = min(a.size for a in cps) - 1
        markers = {_label(k): (float(cps[0][k + 1]), float(cps[1][k + 1]), float(cps[2][k + 1]))
                   for k in range(max(0, n_marks))}

        md: dict[str, Any] = {}
        if msg.metadata.HasField("decomposition"):
            md["decomposition"] = msg.metadata.decomposition
        if msg.metadata.HasField("unit"):
            md["unit"] = msg.metadata.unit
        if msg.metadata.HasField("step_per_epoch"):
            md["step_per_epoch"] = int(msg.metadata.step_per_epoch)
        return cls(x=x, y=y, z=z, path=path, convergence_point=(first(cp.x), first(cp.y), first(cp.z)),
                   metadata=md, tag=tag, markers=markers)


def _label(k: int) -> str:
    """The k-th marker's label when read back from a message: "A", "B", ..., "Z", "M26", ..."""
    return chr(ord("A") + k) if k < 26 else f"M{k}"
