"""TensorBoard's own reader against ours: every kind a summary directory holds, value by value.

``assert_same_as_ours(summary_dir, tb_dir)`` reads the summaries with our
:class:`SummaryReader` and the TensorBoard files with TensorBoard's ``EventAccumulator``
and compares scalars, histograms, images, tensors, landscapes (mesh, grid tensor,
picture) and the lineage (hyper-parameters and metrics), so the converter is checked
against the reader, not against itself.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.util import tensor_util

from collector import SummaryReader, get_summary_lineage


def accumulator(tb_dir) -> EventAccumulator:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def _tensor(acc: EventAccumulator, tag: str) -> np.ndarray:
    (event,) = acc.Tensors(tag)
    return tensor_util.make_ndarray(event.tensor_proto)


def _scaled(x: np.ndarray, y: np.ndarray, z: np.ndarray):
    """The mesh's documented frame, computed here: the plane's longer side to 2, the finite loss range to 1."""
    finite = z[np.isfinite(z)]
    side = max(x.max() - x.min(), y.max() - y.min())
    s = 2.0 / side if side > 0 else 1.0
    sz = 1.0 / (finite.max() - finite.min()) if finite.max() > finite.min() else 1.0

    def scaled(px, py, pz):
        return np.stack([(px - (x.min() + x.max()) / 2) * s, (py - (y.min() + y.max()) / 2) * s,
                         (pz - finite.min()) * sz], axis=1).astype(np.float32)

    return scaled


def _assert_line(acc: EventAccumulator, tag: str, x: np.ndarray, z: np.ndarray) -> None:
    points = acc.Scalars(f"{tag}/loss")
    assert [e.step for e in points] == list(range(x.size))
    np.testing.assert_array_equal(np.float32([e.value for e in points]), z.astype(np.float32))
    np.testing.assert_array_equal(_tensor(acc, f"{tag}/grid"), np.stack([x, z], axis=1))
    assert "(the step is k; x[k] = " in acc.SummaryMetadata(f"{tag}/loss").summary_description
    if f"{tag}/line" in acc.Tags()["images"]:
        (picture,) = acc.Images(f"{tag}/line")
        assert Image.open(io.BytesIO(picture.encoded_image_string)).format == "PNG"


def hparams(acc: EventAccumulator) -> tuple[dict, list[str]]:
    """The session's hyper-parameters (name -> value) and the experiment's metric tags."""
    content = acc.PluginTagToContent("hparams")
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
    values = {}
    for name, value in session.session_start_info.hparams.items():
        values[name] = getattr(value, value.WhichOneof("kind"))
    return values, [m.name.tag for m in experiment.experiment.metric_infos]


def assert_same_as_ours(summary_dir, tb_dir) -> set[str]:
    """Compare everything; return the kinds found (scalar, histogram, image, tensor, landscape, lineage)."""
    ours = SummaryReader(summary_dir)
    acc = accumulator(tb_dir)
    tags = acc.Tags()
    kinds = set()
    for tag, (steps, values) in ours.scalars().items():
        kinds.add("scalar")
        got = acc.Scalars(tag)
        assert [e.step for e in got] == steps.tolist(), tag
        np.testing.assert_array_equal(np.float32([e.value for e in got]), values.astype(np.float32), err_msg=tag)
    for tag, items in ours.histograms().items():
        nonempty = [h for h in items if h["count"].sum()]  # one without a finite value is left out
        if not nonempty:
            assert tag not in tags["histograms"]
            continue
        kinds.add("histogram")
        events = acc.Histograms(tag)
        assert [e.step for e in events] == [h["step"] for h in nonempty], tag
        for event, h in zip(events, nonempty):
            tb = event.histogram_value
            np.testing.assert_array_equal(tb.bucket_limit, h["left"] + h["width"], err_msg=tag)
            np.testing.assert_array_equal(tb.bucket, h["count"].astype(np.float64), err_msg=tag)
            assert (tb.min, tb.max, tb.sum, tb.num) == (h["min"], h["max"], h["sum"], float(h["count"].sum())), tag
    for tag, items in ours.images().items():
        kinds.add("image")
        got = acc.Images(tag)
        assert [e.step for e in got] == [s for s, _ in items], tag
        for event, (_, array) in zip(got, items):
            decoded = np.asarray(Image.open(io.BytesIO(event.encoded_image_string)))
            np.testing.assert_array_equal(decoded.reshape(array.shape), array, err_msg=tag)
            assert (event.height, event.width) == array.shape[:2]
    for tag, items in ours.tensors().items():
        kinds.add("tensor")
        got = acc.Tensors(tag)
        assert [e.step for e in got] == [s for s, _ in items], tag
        for event, (_, array) in zip(got, items):
            tb = tensor_util.make_ndarray(event.tensor_proto)
            assert tb.dtype == array.dtype and tb.shape == array.shape, tag
            np.testing.assert_array_equal(tb, array, err_msg=tag)
    for tag, ls in ours.landscapes().items():
        kinds.add("landscape")
        if ls["y"].size == 0:  # a line: the values as a scalar series, (x, loss) as a tensor, a line chart
            _assert_line(acc, tag, ls["x"], ls["z"].reshape(-1))
            continue
        x, y, z = ls["x"], ls["y"], ls["z"].reshape(ls["y"].size, ls["x"].size)
        grid = _tensor(acc, f"{tag}/grid")
        assert grid.shape == (y.size, x.size, 3)
        np.testing.assert_array_equal(grid[..., 0], np.broadcast_to(x, z.shape))
        np.testing.assert_array_equal(grid[..., 1], np.broadcast_to(y[:, None], z.shape))
        np.testing.assert_array_equal(grid[..., 2], z)
        vertices = _tensor(acc, f"{tag}/surface_VERTEX")[0]
        finite = np.isfinite(z)
        lifted = np.where(finite, z, z[finite].max())
        scaled = _scaled(x, y, z)
        want = scaled(np.broadcast_to(x, z.shape).ravel(), np.broadcast_to(y[:, None], z.shape).ravel(),
                      lifted.ravel())
        np.testing.assert_allclose(vertices, want, rtol=0, atol=1e-6)
        # framed: the plane's longer side spans 2, the finite loss 1 (when they are not flat)
        if max(np.ptp(x), np.ptp(y)) > 0:
            assert max(np.ptp(vertices[:, 0]), np.ptp(vertices[:, 1])) == np.float32(2.0)
        if np.ptp(z[finite]) > 0:
            assert np.ptp(vertices[:, 2]) == np.float32(1.0)
        description = acc.SummaryMetadata(f"{tag}/surface_VERTEX").summary_description
        assert "vertices scaled to fill the view" in description and f"tensor {tag}/grid" in description
        faces = _tensor(acc, f"{tag}/surface_FACE")[0]
        cells = finite[:-1, :-1] & finite[:-1, 1:] & finite[1:, :-1] & finite[1:, 1:]
        assert faces.shape[0] >= 2 * cells.sum() and faces.max() < x.size * y.size
        colors = _tensor(acc, f"{tag}/surface_COLOR")[0]
        assert colors.shape == (x.size * y.size, 3) and colors.dtype == np.uint8
        # darker where the loss is lower (viridis runs from dark blue to yellow)
        assert colors[np.nanargmin(np.where(finite, z, np.inf))].sum() < colors[np.nanargmax(lifted)].sum()
        if "path_x" in ls:
            path = _tensor(acc, f"{tag}/path_VERTEX")[0]
            np.testing.assert_allclose(path, scaled(ls["path_x"], ls["path_y"], ls["path_z"]), rtol=0, atol=1e-6)
        if f"{tag}/filled_contour" in tags["images"]:
            (picture,) = acc.Images(f"{tag}/filled_contour")
            im = Image.open(io.BytesIO(picture.encoded_image_string))
            assert im.format == "PNG" and im.size == (picture.width, picture.height) and picture.step == ls["step"]
    lineage = get_summary_lineage(str(summary_dir)) if ours.lineage() else None
    if lineage is not None:
        kinds.add("lineage")
        values, metrics = hparams(acc)
        for key, value in {**lineage.get("hyper_parameters", {}), **lineage.get("train_dataset", {})}.items():
            if isinstance(value, float):
                assert np.float32(values[key]) == np.float32(value), key
            else:
                assert values[key] == value, key
        if lineage.get("algorithm", {}).get("network"):
            assert values["network"] == lineage["algorithm"]["network"]
        loss = lineage.get("algorithm", {}).get("loss")
        if loss is not None:
            assert "lineage/loss" in metrics
            assert np.float32(acc.Scalars("lineage/loss")[-1].value) == np.float32(loss)
        for name, value in (lineage.get("metric") or {}).items():
            if not isinstance(value, (int, float)):
                assert f"lineage/metric/{name}" not in metrics  # only numbers are metrics
                continue
            assert f"lineage/metric/{name}" in metrics
            assert np.float32(acc.Scalars(f"lineage/metric/{name}")[-1].value) == np.float32(value)
    return kinds
