"""Landscape <-> LossLandscape message <-> landscapes.h5, and MindSpore's own file."""

import numpy as np
import pytest
from torch import nn

import landscape
from landscape import Landscape
from tests.conftest import MINDSPORE_RUN


@pytest.fixture
def pca(trained, data):
    net, traj = trained
    return landscape.compute_landscape(net, nn.CrossEntropyLoss(), data, directions="pca", checkpoints=traj,
                                       size=4, num_samples=32, tag="landscape_[1, 6]")


def test_proto_round_trip(pca):
    from collector import proto

    msg = pca.to_proto()
    assert list(msg.landscape.z.dims) == [4, 4] and msg.landscape.z.data_type == proto.DT_FLOAT64
    assert list(msg.landscape.x.dims) == [4] and msg.metadata.decomposition == "PCA"
    back = Landscape.from_proto(msg.SerializeToString(), tag=pca.tag)
    np.testing.assert_array_equal(back.z, pca.z)  # float_data is float32: exact for these values?
    np.testing.assert_array_equal(back.x, np.float32(pca.x))
    assert back.path.intervals == pca.path.intervals == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(back.path.x, pca.path.x, rtol=1e-6, atol=1e-12)
    assert back.convergence_point[:2] == (0.0, 0.0)


def test_h5_round_trip(pca, tmp_path):
    path = tmp_path / "landscapes.h5"
    landscape.write_h5(path, [pca])
    back = landscape.read_h5(path)[pca.tag]
    np.testing.assert_array_equal(back.z, pca.z)
    np.testing.assert_array_equal(back.x, pca.x)
    np.testing.assert_array_equal(back.path.z, pca.path.z)
    assert back.metadata["normalization"] == "layer" and back.metadata["num_samples"] == 32
    assert len(back.metadata["explained_variance_ratio"]) == 2
    import h5py

    with h5py.File(path) as fh:
        assert {"xcoordinates", "ycoordinates", "train_loss"} <= set(fh[pca.tag])


def test_from_proto_mindspore_fixture():
    from collector import SummaryReader

    files = sorted(MINDSPORE_RUN.glob("*1795297598*_MS"))
    msgs = SummaryReader(str(files[0])).landscape_messages()
    tags = [t for _, t, _ in msgs]
    assert tags == ["landscape_[1, 5]", "landscape_[6, 10]", "landscape_[10]"]
    result = {t: Landscape.from_proto(m, tag=t) for _, t, m in msgs}
    for tag in tags:
        ls = result[tag]
        assert ls.z.shape == (10, 10) and ls.x.shape == (10,) and ls.y.shape == (10,)
        assert ls.metadata["unit"] == "epoch" and ls.metadata["step_per_epoch"] == 28
    assert result["landscape_[1, 5]"].path.intervals == [1, 2, 3, 4, 5]
    assert result["landscape_[6, 10]"].convergence_point[:2] == (0.0, 0.0)
    assert result["landscape_[6, 10]"].metadata["decomposition"] == "PCA"
    rnd = result["landscape_[10]"]
    assert rnd.path is None and rnd.metadata["decomposition"] == "Random"
    assert rnd.convergence_point[0] == pytest.approx(1 / 9, rel=1e-6)
    # our message for the same values has the same layout as MindSpore's
    again = rnd.to_proto()
    assert again.landscape.z.dims == msgs[2][2].landscape.z.dims
    assert again.convergence_point.x.data_type == msgs[2][2].convergence_point.x.data_type
    pca_again = result["landscape_[1, 5]"].to_proto()
    ms = msgs[0][2]
    for a, b in ((pca_again.loss_path.points.x, ms.loss_path.points.x),
                 (pca_again.convergence_point.x, ms.convergence_point.x)):
        assert a.data_type == b.data_type and list(a.dims) == list(b.dims)
