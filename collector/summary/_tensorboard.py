"""TensorBoard event files: the one module that writes them (with the ``tensorboard`` package).

:class:`TensorBoardWriter` turns our events (MindSpore's ``Event`` and ``LineageEvent``
messages, as SummaryRecord writes and :func:`collector.summary.read_events` reads them) into
TensorBoard's, written by TensorBoard's own ``EventFileWriter``:

* scalars as ``simple_value``; images with the same PNG bytes; tensors of the same dtype and
  shape;
* histograms as ``HistogramProto`` (the buckets' right edges and counts, min, max, sum and
  count; NaN and infinite values left out, and a histogram with no finite value);
* a plane ``T`` as a mesh (``T/surface``: a vertex per grid point scaled to fill the viewer,
  the scale in the description, colours from the loss on viridis; ``T/path``: the training
  path as points) and ``T/grid``, a tensor of the unscaled ``(x, y, loss)``; a line ``T`` as
  the scalar series ``T/loss`` (step k: point k) and ``T/grid``;
* lineage as HParams hyper-parameters and metrics, written when the writer closes;
* graphs and dataset graphs are not converted (TensorBoard's graphs are TensorFlow's).

docs/pictures.md has the same as a table. Importing this module needs ``tensorboard`` (an
optional dependency); only the code that writes TensorBoard files imports it:
``SummaryRecord(tensorboard_dir=...)`` and ``landscape export RUN --format tensorboard``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.proto.summary_pb2 import HistogramProto
    from tensorboard.plugins.hparams import summary_v2 as hparams_summary
    from tensorboard.plugins.mesh import metadata as mesh_metadata
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util
except ImportError as exc:  # pragma: no cover - exercised only without tensorboard
    raise ImportError(
        "Writing TensorBoard files needs the 'tensorboard' package, which is not installed. "
        "HINT: pip install tensorboard (or pip install 'torch-landscape[tensorboard]')."
    ) from exc

from collector.summary import _proto as proto
from collector.summary._packing import tensor_to_numpy
from collector.summary._tb_geometry import MESH_CONFIG, landscape_mesh, mesh_frame

__all__ = ["TensorBoardWriter", "lineage_hparams", "TB_FILE_MARKER", "LINE_SCALAR_SUFFIX"]

logger = logging.getLogger(__name__)

#: What every TensorBoard event file name contains (``events.out.tfevents.{seconds}.{host}...``).
TB_FILE_MARKER = "tfevents"
#: Colour of the training path (red).
_PATH_RGB = (228, 26, 28)
#: A line's values (random line, interpolation) as a scalar series: its tag plus this.
LINE_SCALAR_SUFFIX = "/loss"


class TensorBoardWriter:
    """Write our summary and lineage events as TensorBoard events in ``log_dir``.

    Parameters
    ----------
    log_dir : str or os.PathLike
        The TensorBoard run directory (created if missing); one events file per writer.
    flush_secs : float, default=10
        How often TensorBoard's writer thread flushes its file, so a running job shows up.

    Examples
    --------
    >>> import tempfile
    >>> from collector import proto
    >>> ev = proto.Event(step=3, wall_time=1.0)
    >>> ev.summary.value.add(tag="loss", scalar_value=0.5)  # doctest: +ELLIPSIS
    tag: "loss"...
    >>> with TensorBoardWriter(tempfile.mkdtemp()) as tb:
    ...     tb.add_event(ev)
    """

    def __init__(self, log_dir: str | os.PathLike, *, flush_secs: float = 10.0) -> None:
        self.log_dir = os.fspath(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        self._writer = EventFileWriter(self.log_dir, flush_secs=flush_secs)
        self._hparams: dict[str, Any] = {}
        self._metrics: dict[str, tuple[int, float, float]] = {}  # tag -> (step, wall_time, value)
        self._start_time: float | None = None
        self._closed = False

    # ------------------------------------------------------------------ generic
    def add_summary_values(self, values: list[Any], step: int, wall_time: float) -> None:
        """Write TensorBoard ``Summary.Value`` messages as one event."""
        if values:
            self._writer.add_event(event_pb2.Event(wall_time=wall_time, step=int(step),
                                                   summary=summary_pb2.Summary(value=values)))

    def add_image_png(self, tag: str, png: bytes, step: int, wall_time: float, *, height: int, width: int,
                      channels: int = 4) -> None:
        """An image from PNG bytes (``channels``: 1 grey, 3 RGB, 4 RGBA)."""
        image = summary_pb2.Summary.Image(height=int(height), width=int(width), colorspace=int(channels),
                                          encoded_image_string=png)
        self.add_summary_values([summary_pb2.Summary.Value(tag=tag, image=image)], step, wall_time)

    def add_tensor(self, tag: str, array: np.ndarray, step: int, wall_time: float) -> None:
        """A tensor, dtype and shape kept."""
        self.add_summary_values([summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(array))],
                                step, wall_time)

    def add_mesh(self, tag: str, vertices: np.ndarray, colors: np.ndarray, faces: np.ndarray | None,
                 step: int, wall_time: float, *, description: str = "",
                 config: Mapping[str, Any] | None = None) -> None:
        """A mesh (or a point cloud without ``faces``) for the Mesh dashboard, as its plugin defines it.

        Parameters
        ----------
        vertices : array of shape (N, 3)
            float32 in the file.
        colors : array of shape (N, 3)
            uint8 RGB per vertex.
        faces : array of shape (F, 3) or None
            Vertex indices of triangles (int32).
        config : dict, optional
            The viewer's scene (three.js camera, lights, material), as the plugin's ``config_dict``.
        """
        parts: list[tuple[np.ndarray, Any]] = [(np.asarray(vertices, np.float32), MeshPluginData.VERTEX),
                                               (np.asarray(colors, np.uint8), MeshPluginData.COLOR)]
        if faces is not None:
            parts.insert(1, (np.asarray(faces, np.int32), MeshPluginData.FACE))
        components = mesh_metadata.get_components_bitmask([kind for _, kind in parts])
        out = []
        for array, kind in parts:
            batched = array.reshape(1, *array.shape)  # the plugin wants (batch, N, 3)
            md = mesh_metadata.create_summary_metadata(tag, tag, kind, components, list(batched.shape),
                                                       description or None, json_config=json.dumps(dict(config or {})))
            out.append(summary_pb2.Summary.Value(tag=mesh_metadata.get_instance_name(tag, kind), metadata=md,
                                                 tensor=tensor_util.make_tensor_proto(batched)))
        self.add_summary_values(out, step, wall_time)

    # ------------------------------------------------------------------ our events
    def add_payload(self, kind: str, payload: bytes) -> None:
        """Convert one serialized event of ours: ``kind`` "summary" (an Event) or "lineage" (a LineageEvent)."""
        if kind == "lineage":
            self.add_lineage_event(proto.LineageEvent.FromString(payload))
        else:
            self.add_event(proto.Event.FromString(payload))

    def add_event(self, event: Any) -> None:
        """Convert a summary ``Event`` of ours (see the module docstring); graphs and versions are skipped."""
        if event.WhichOneof("what") != "summary":
            return
        step, wall_time = int(event.step), float(event.wall_time)
        if self._start_time is None:
            self._start_time = wall_time
        values = []
        for value in event.summary.value:
            which = value.WhichOneof("value")
            if which == "scalar_value":
                values.append(summary_pb2.Summary.Value(tag=value.tag, simple_value=value.scalar_value))
            elif which == "histogram":
                histo = histogram_proto(value.histogram)
                if histo is not None:
                    values.append(summary_pb2.Summary.Value(tag=value.tag, histo=histo))
            elif which == "image":
                im = value.image
                values.append(summary_pb2.Summary.Value(tag=value.tag, image=summary_pb2.Summary.Image(
                    height=im.height, width=im.width, colorspace=im.colorspace, encoded_image_string=im.encoded_image)))
            elif which == "tensor":
                values.append(summary_pb2.Summary.Value(
                    tag=value.tag, tensor=tensor_util.make_tensor_proto(tensor_to_numpy(value.tensor))))
            elif which == "loss_landscape":
                self._add_landscape(value.tag, value.loss_landscape, step, wall_time)
        self.add_summary_values(values, step, wall_time)

    def _add_landscape(self, tag: str, ll: Any, step: int, wall_time: float) -> None:
        f64 = np.float64
        x = tensor_to_numpy(ll.landscape.x, f64).reshape(-1)
        y = tensor_to_numpy(ll.landscape.y, f64).reshape(-1)
        z = tensor_to_numpy(ll.landscape.z, f64)
        md = ll.metadata
        what = f"{md.decomposition or 'landscape'} landscape {tag}" + (f", unit {md.unit}" if md.unit else "")
        if not y.size and x.size and z.size == x.size:
            self._add_line(tag, x, z.reshape(-1), what, step, wall_time)
            return
        if z.size != x.size * y.size or not x.size:
            logger.warning("landscape %r: a %s grid over %d x values and %d y values; not converted.",
                           tag, z.shape, x.size, y.size)
            return
        z = z.reshape(y.size, x.size)
        frame = mesh_frame(x, y, z)
        vertices, faces, colors = landscape_mesh(x, y, z, frame)
        self.add_mesh(f"{tag}/surface", vertices, colors, faces, step, wall_time, config=MESH_CONFIG,
                      description=f"{what}: (x, y, loss) per grid point, coloured by the loss; {frame.describe(tag)}")
        if ll.HasField("loss_path") and len(ll.loss_path.intervals):
            path = np.stack([tensor_to_numpy(getattr(ll.loss_path.points, a), f64).reshape(-1) for a in "xyz"], 1)
            finite = np.isfinite(path).all(axis=1)
            if finite.any():
                self.add_mesh(f"{tag}/path", frame.apply(*path[finite].T),
                              np.tile(np.array(_PATH_RGB, np.uint8), (finite.sum(), 1)), None, step, wall_time,
                              config={**MESH_CONFIG, "material": {"cls": "PointsMaterial", "size": 0.08}},
                              description=f"the training path of {what}; {frame.describe(tag)}")
        grid = np.stack(np.broadcast_arrays(x[None, :], y[:, None], z), axis=-1)
        self.add_tensor(f"{tag}/grid", grid, step, wall_time)

    def _add_line(self, tag: str, x: np.ndarray, z: np.ndarray, what: str, step: int, wall_time: float) -> None:
        """A line: its values as a scalar series (step k: point k, NaN kept) and the tensor ``{tag}/grid``."""
        n = x.size
        spacing = f"x[k] = {x[0]:.6g} + k * {(x[-1] - x[0]) / (n - 1):.6g}" if n > 1 else f"x[0] = {x[0]:.6g}"
        metadata = summary_pb2.SummaryMetadata(
            summary_description=f"{what}: the loss at point k of {n} (the step is k; {spacing}); the "
                                f"(x, loss) pairs are in the tensor {tag}/grid",
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
        for k, value in enumerate(z):
            self.add_summary_values([summary_pb2.Summary.Value(
                tag=tag + LINE_SCALAR_SUFFIX, simple_value=float(value), metadata=metadata if k == 0 else None)],
                k, wall_time)
        self.add_tensor(f"{tag}/grid", np.stack([x, z], axis=1), step, wall_time)

    def add_lineage_event(self, event: Any) -> None:
        """Collect the hyper-parameters and metrics of a ``LineageEvent`` (written by :meth:`close`)."""
        which = event.WhichOneof("what")
        if which not in ("train_lineage", "evaluation_lineage", "user_defined_info"):
            return
        hparams, metrics = lineage_hparams(getattr(event, which))
        self._hparams.update(hparams)
        for name, value in metrics.items():
            self._metrics[name] = (int(event.step), float(event.wall_time), value)
        if self._start_time is None:
            self._start_time = float(event.wall_time)

    # ------------------------------------------------------------------ life cycle
    def _write_hparams(self) -> None:
        """The HParams dashboard's session: hyper-parameters, then the metrics as scalars."""
        if not self._hparams and not self._metrics:
            return
        start = self._start_time or 0.0
        config = hparams_summary.hparams_config_pb(
            [hparams_summary.HParam(name) for name in sorted(self._hparams)],
            [hparams_summary.Metric(tag) for tag in sorted(self._metrics)], time_created_secs=start)
        session = hparams_summary.hparams_pb(dict(self._hparams), trial_id=os.path.basename(self.log_dir) or "run",
                                             start_time_secs=start)
        for summary in (config, session):
            self._writer.add_event(event_pb2.Event(wall_time=start, step=0, summary=summary))
        for tag, (step, wall_time, value) in sorted(self._metrics.items()):
            self.add_summary_values([summary_pb2.Summary.Value(tag=tag, simple_value=value)], step, wall_time)

    def flush(self) -> None:
        """Write what TensorBoard's writer holds to the file."""
        if not self._closed:
            self._writer.flush()

    def close(self) -> None:
        """Write the lineage's hyper-parameters and metrics, then close the file."""
        if self._closed:
            return
        self._closed = True
        try:
            self._write_hparams()
        finally:
            self._writer.close()

    def __enter__(self) -> TensorBoardWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def histogram_proto(h: Any) -> Any:
    """A MindSpore ``Summary.Histogram`` as TensorBoard's ``HistogramProto`` (None without a finite value).

    MindSpore's buckets are ``(left, width, count)``, contiguous from ``min`` to ``max``;
    TensorBoard's are right edges (``bucket_limit``) and counts, the first starting at
    ``min``. NaN and infinite values, which MindSpore counts apart, are left out.
    """
    counts = [float(b.count) for b in h.buckets]
    if not sum(counts):
        return None  # no finite value (MindSpore: one empty bucket, min and max NaN): nothing to draw
    limits = [b.left + b.width for b in h.buckets]
    return HistogramProto(min=h.min, max=h.max, num=float(sum(counts)), sum=h.sum, sum_squares=0.0,
                          bucket_limit=limits, bucket=counts)


def _float32(value: float) -> float:
    """A float32 field's value as its shortest decimal (0.05, not 0.05000000074505806), as MindInsight shows it."""
    return float(str(np.float32(value)))


def lineage_hparams(message: Any) -> tuple[dict[str, Any], dict[str, float]]:
    """The hyper-parameters and metrics of a TrainLineage, EvaluationLineage or UserDefinedInfo.

    Names are those of MindInsight's lineage page: ``learning_rate``, ``optimizer``,
    ``loss_function``, ``epoch``, ``batch_size``, ``parallel_mode``, ``device_num``,
    ``network``, ``train_dataset_size`` (and ``..._path``), ``model_size``,
    ``valid_dataset_size``, ``user_defined/{key}``; metrics ``lineage/loss`` (the
    final training loss) and ``lineage/metric/{name}`` (each numeric eval metric).
    """
    hp: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    name = message.DESCRIPTOR.name
    if name == "TrainLineage":
        for group in (message.hyper_parameters, message.train_dataset, message.algorithm, message.model):
            for field, value in group.ListFields():
                if field.type == field.TYPE_FLOAT:
                    value = _float32(value)
                if group is message.algorithm and field.name == "loss":
                    metrics["lineage/loss"] = float(value)
                elif group is message.model and field.name == "path":
                    continue  # a JSON string of the checkpoint path: not a hyper-parameter
                else:
                    hp[f"model_{field.name}" if group is message.model else field.name] = value
    elif name == "EvaluationLineage":
        for field, value in message.valid_dataset.ListFields():
            hp[field.name] = value
        try:
            parsed = json.loads(message.metric) if message.metric else {}
        except ValueError:
            parsed = {}
        if isinstance(parsed, Mapping):
            for key, value in parsed.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    metrics[f"lineage/metric/{key}"] = float(value)
    elif name == "UserDefinedInfo":
        for entry in message.user_info:
            for field in ("map_str", "map_int32", "map_double"):
                for key, value in getattr(entry, field).items():
                    hp[f"user_defined/{key}"] = value
    for key, value in list(hp.items()):
        if isinstance(value, float) and not math.isfinite(value):
            hp[key] = str(value)
    return hp, metrics
