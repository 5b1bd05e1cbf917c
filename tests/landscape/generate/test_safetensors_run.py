"""A run whose interval checkpoints are safetensors files: SummaryLandscape gives the landscapes of torch files."""

import numpy as np

from collector.trajectory import TrainMetadata, read_train_metadata, save_file
from landscape import SummaryLandscape
from tests.landscape._helpers import tiny_callback


def callback():
    return tiny_callback()


def test_safetensors_checkpoints_give_the_landscapes_of_torch_checkpoints(summary_dir, tmp_path, trained):
    _, traj = trained
    torch_md = read_train_metadata(summary_dir / "ckpt_dir")
    run = tmp_path / "st"
    (run / "ckpt_dir").mkdir(parents=True)
    files, digests = {}, {}
    for n, sd in enumerate(traj, start=1):
        files[n] = f"TinyMLP_{n}_epoch.safetensors"
        digests[n] = save_file(sd, str(run / "ckpt_dir" / files[n]), file_format="safetensors")
    TrainMetadata(intervals=torch_md.intervals, files=files, step_per_epoch=torch_md.step_per_epoch, unit="epoch",
                  num_samples=torch_md.num_samples, landscape_size=torch_md.landscape_size,
                  digests=digests).write(run / "ckpt_dir")
    one = {"intervals": [[1, 2, 3]], "landscape_size": 3, "create_landscape": {"result": False}}
    want = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(callback, one, output=tmp_path / "a")
    got = SummaryLandscape(run).gen_landscapes_with_multi_process(callback, one, output=tmp_path / "b")
    assert [r.tag for r in got] == [r.tag for r in want] == ["landscape_[1, 3]"]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.z, b.z)
        np.testing.assert_array_equal(a.x, b.x)
