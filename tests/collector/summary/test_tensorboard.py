"""TensorBoardWriter and SummaryRecord(tensorboard_dir=...): TensorBoard's reader sees what ours sees."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytest.importorskip("tensorboard")

from collector import SummaryCollector, SummaryReader, SummaryRecord, proto  # noqa: E402
from collector.summary import TensorBoardWriter  # noqa: E402
from collector.summary._tb_geometry import landscape_mesh, mesh_frame  # noqa: E402
from tests.collector.summary._tb_compare import accumulator, assert_same_as_ours, hparams  # noqa: E402


def _landscape(z):
    z = np.asarray(z, dtype=np.float64)
    ll = proto.LossLandscape()
    for axis, n in ((ll.landscape.x, z.shape[1]), (ll.landscape.y, z.shape[0])):
        axis.dims.append(n)
        axis.data_type = proto.DT_FLOAT64
        axis.float_data.extend(np.linspace(-1, 1, n).tolist())
    ll.landscape.z.dims.extend(z.shape)
    ll.landscape.z.data_type = proto.DT_FLOAT64
    ll.landscape.z.float_data.extend(z.ravel().tolist())
    ll.loss_path.intervals.extend([1, 2, 3])
    for axis, values in zip((ll.loss_path.points.x, ll.loss_path.points.y, ll.loss_path.points.z),
                            ([-0.5, 0.0, 0.5], [0.2, 0.1, 0.0], [3.0, 2.0, 1.0])):
        axis.dims.append(3)
        axis.data_type = proto.DT_FLOAT64
        axis.float_data.extend(values)
    ll.metadata.decomposition = "PCA"
    ll.metadata.unit = "step"
    return ll


def test_mirror_of_every_kind_reads_back_equal(tmp_path):
    """SummaryRecord(tensorboard_dir=...): scalars, histograms (with non-finite values), images, tensors,
    a landscape (with a NaN point) and the lineage, as TensorBoard's EventAccumulator reads them."""
    rng = np.random.default_rng(0)
    z = rng.random((4, 5)) + 1.0
    z[2, 3] = np.nan
    with SummaryRecord(tmp_path / "run", tensorboard_dir=tmp_path / "tb") as rec:
        for step in (1, 5, 9):
            rec.add_value("scalar", "loss", 1.0 / step)
            rec.add_value("histogram", "w", torch.tensor([0.5, -1.0, 2.0, float("nan"), float("inf"), 0.25 * step]))
            rec.add_value("histogram", "empty", torch.tensor([float("nan")]))
            rec.add_value("image", "img", torch.rand(2, 3, 6, 4))
            rec.add_value("tensor", "t64", np.arange(6, dtype=np.float64).reshape(2, 3) * step)
            rec.add_value("tensor", "i32", torch.arange(4, dtype=torch.int32) * step)
            rec.record(step)
        rec.add_value("landscape", "landscape_[1, 3]", _landscape(z))
        rec.add_value("train_lineage", "train_lineage", _train_lineage())
        rec.add_value("eval_lineage", "eval_lineage", proto.EvaluationLineage(metric='{"accuracy": 0.75, "name": "x"}'))
        rec.add_value("custom_lineage_data", "custom_lineage_data", {"note": "digits", "seed": 3})
        rec.record(9)
    kinds = assert_same_as_ours(tmp_path / "run", tmp_path / "tb")
    assert kinds == {"scalar", "histogram", "image", "tensor", "landscape", "lineage"}
    values, metrics = hparams(accumulator(tmp_path / "tb"))
    assert values["user_defined/note"] == "digits" and values["user_defined/seed"] == 3
    assert values["optimizer"] == "Momentum" and values["learning_rate"] == 0.05  # float32 shown as MindInsight shows it
    assert sorted(metrics) == ["lineage/loss", "lineage/metric/accuracy"]  # the non-numeric "name" is no metric


def _train_lineage():
    msg = proto.TrainLineage()
    msg.hyper_parameters.optimizer = "Momentum"
    msg.hyper_parameters.learning_rate = 0.05
    msg.hyper_parameters.epoch = 10
    msg.hyper_parameters.batch_size = 64
    msg.train_dataset.train_dataset_size = 1792
    msg.algorithm.network = "MLP"
    msg.algorithm.loss = 0.125
    return msg


def test_landscape_mesh_by_hand():
    x, y = np.array([0.0, 1.0, 2.0]), np.array([10.0, 20.0])
    z = np.array([[1.0, 2.0, 3.0], [4.0, np.inf, 6.0]])
    vertices, faces, colors = landscape_mesh(x, y, z)
    # vertex i * 3 + j is (x[j], y[i], z[i, j]); the inf is drawn at the largest finite loss
    assert vertices.tolist() == [[0, 10, 1], [1, 10, 2], [2, 10, 3], [0, 20, 4], [1, 20, 6], [2, 20, 6]]
    # two cells, two triangles each; only the one not touching vertex 4 (the inf) is kept
    assert faces.tolist() == [[1, 2, 5]]
    assert tuple(colors[4]) == (128, 128, 128)  # grey where the loss is not finite
    assert tuple(colors[0]) == (68, 1, 84) and tuple(colors[5]) == (253, 231, 37)  # viridis' two ends
    z[1, 1] = 5.0
    _, faces, _ = landscape_mesh(x, y, z)
    assert sorted(map(sorted, faces.tolist())) == [[0, 1, 4], [0, 3, 4], [1, 2, 5], [1, 4, 5]]


def test_mesh_frame_by_hand():
    """A plane 0.1 x 0.05 whose loss spans 2: scaled so its longer side is 2 and the loss range 1."""
    x, y = np.array([0.2, 0.25, 0.3]), np.array([-0.05, 0.0])
    z = np.array([[0.5, 1.0, 2.5], [1.5, np.nan, 0.5]])
    frame = mesh_frame(x, y, z)
    assert (frame.cx, frame.cy, frame.z0) == (0.25, -0.025, 0.5)
    assert frame.s == pytest.approx(20.0) and frame.sz == pytest.approx(0.5)
    vertices, _, _ = landscape_mesh(x, y, z, frame)
    np.testing.assert_allclose(vertices[:3], [[-1, -0.5, 0], [0, -0.5, 0.25], [1, -0.5, 1]], atol=1e-12)
    assert vertices[4].tolist() == pytest.approx([0, 0.5, 1.0])  # the NaN at the top, as unscaled
    assert "x' = (x - 0.25) * 20, y' = (y - -0.025) * 20, loss' = (loss - 0.5) * 0.5" in frame.describe("T")
    flat = mesh_frame(np.array([1.0]), np.array([2.0]), np.array([[np.nan]]))  # nothing to scale by
    assert (flat.s, flat.sz) == (1.0, 1.0)


def test_mirror_failure_leaves_our_files_intact(tmp_path, caplog):
    class Broken:
        def add_payload(self, kind, payload):
            raise OSError("disk full (on purpose)")

        def flush(self):
            pass

        def close(self):
            pass

    with SummaryRecord(tmp_path) as rec:
        rec._writer._mirror = Broken()
        rec.add_value("scalar", "loss", 0.5)
        rec.record(1)
    assert SummaryReader(tmp_path).scalars()["loss"][1].tolist() == [0.5]
    assert "the event mirror (Broken) failed" in caplog.text


def test_writer_is_a_context_manager_and_writes_one_file(tmp_path):
    with TensorBoardWriter(tmp_path / "tb") as tb:
        ev = proto.Event(step=2, wall_time=5.0)
        ev.summary.value.add(tag="a", scalar_value=1.5)
        tb.add_event(ev)
        tb.add_event(proto.Event(step=0, wall_time=1.0, version="Mindspore.Event:2"))  # skipped
    (name,) = os.listdir(tmp_path / "tb")
    assert name.startswith("events.out.tfevents.")
    got = accumulator(tmp_path / "tb").Scalars("a")
    assert [(e.step, e.wall_time, e.value) for e in got] == [(2, 5.0, 1.5)]


def test_summary_collector_mirrors_a_training_run(tmp_path):
    from landscape.examples import MLP, digits_loader

    torch.manual_seed(0)
    net, loader = MLP(), digits_loader(64, image=False)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    with SummaryCollector(tmp_path / "run", collect_freq=5, tensorboard_dir=tmp_path / "tb") as sc:
        sc.begin_train(network=net, optimizer=opt, loss_fn=torch.nn.CrossEntropyLoss(), train_dataset=loader,
                       epoch_num=1)
        for i, (x, y) in enumerate(loader):
            if i == 12:
                break
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            sc.step(loss, inputs=x)
        sc.epoch_end()
        sc.log_eval({"accuracy": 0.5})
        sc.end()
    assert assert_same_as_ours(tmp_path / "run", tmp_path / "tb") == {"scalar", "histogram", "lineage"}
    assert SummaryReader(tmp_path / "run").scalars()["loss/auto"][0].tolist() == [1, 5, 10]


def test_summary_collector_refuses_a_bad_tensorboard_dir(tmp_path):
    from collector import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'tensorboard_dir' parameter of SummaryCollector"):
        SummaryCollector(tmp_path, tensorboard_dir=3)
