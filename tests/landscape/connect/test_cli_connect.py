"""``landscape connect A B --task ... -o DIR``: barriers before and after alignment and a curve, into
landscapes.h5 and PNGs with one summary line; a run's last checkpoint; ``landscape report`` shows the
barriers; bad input is refused with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from landscape import barrier, read_h5
from landscape.cli._main import main
from landscape.examples import MLP
from tests.landscape.connect._connect_task import task
from tests.landscape.connect._models import train_digits

TASK = "tests.landscape.connect._connect_task:task"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpts")
    a, b = train_digits(1, lambda: MLP(16), 2), train_digits(2, lambda: MLP(16), 2)
    torch.save(a.state_dict(), folder / "a.pt")
    run = folder / "run_b" / "ckpt_dir"  # a SummaryCollector run: its last checkpoint is B
    run.mkdir(parents=True)
    torch.save(MLP(16).state_dict(), run / "MLP_1_epoch.pt")
    torch.save(b.state_dict(), run / "MLP_2_epoch.pt")
    md = {"epoch_group": {"0": [1, 2]}, "model_params_file_map": {"1": "MLP_1_epoch.pt", "2": "MLP_2_epoch.pt"},
          "step_per_epoch": 4, "unit": "epoch", "num_samples": 64, "landscape_size": 4,
          "create_landscape": {"train": True, "result": True}}
    (run / "train_metadata.json").write_text(json.dumps(md))
    return folder / "a.pt", folder / "run_b", a, b


def test_connect_writes_barriers_curve_and_pictures(checkpoints, tmp_path, capsys):
    path_a, run_b, a, b = checkpoints
    out = tmp_path / "out"
    code = main(["connect", str(path_a), str(run_b), "--task", TASK, "-o", str(out), "--points", "5",
                 "--curve", "bezier", "--curve-epochs", "1", "--size", "3"])
    assert code == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("barrier loss (mean / linear): naive ") and ", aligned (weights) " in line
    assert "along the bezier curve" in line
    got = read_h5(out / "landscapes.h5")
    assert set(got) == {"naive_train", "aligned_weights_train", "curve_bezier_train", "curve_bezier_plane"}
    assert {p.name for p in out.glob("*.png")} == {f"{t}.png" for t in got}
    # the naive line is B's last checkpoint's: the same values in Python
    _, network, data, _ = task()
    again = barrier(a, b, torch.nn.CrossEntropyLoss(), data, points=5)
    np.testing.assert_allclose(got["naive_train"].z, again.loss, rtol=1e-6)
    assert f"{again.height():.4g} / " in line
    # the report shows the barriers
    html = tmp_path / "report.html"
    pytest.importorskip("plotly")
    assert main(["report", str(out), "-o", str(html)]) == 0
    text = html.read_text(encoding="utf-8")
    assert 'id="barrier-table"' in text and "aligned (weights)" in text and "along a bezier curve" in text


def test_connect_refuses_bad_input_and_writes_nothing(checkpoints, tmp_path, capsys):
    path_a, run_b, _, _ = checkpoints
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        main(["connect", str(path_a), str(run_b), "--task", TASK, "-o", str(out), "--points", "4"])
    other = tmp_path / "other.pt"
    torch.save(MLP(8).state_dict(), other)
    assert main(["connect", str(path_a), str(other), "--task", TASK, "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert "do not match B" in err and str(other) in err and "shape (8,) in the checkpoint and (16,)" in err
    assert main(["connect", str(path_a), str(tmp_path / "nothing"), "--task", TASK, "-o", str(out)]) == 2
    assert not out.exists()


def test_connect_refuses_more_samples_than_the_dataset_naming_num_samples(checkpoints, tmp_path, capsys):
    path_a, run_b, _, _ = checkpoints
    out = tmp_path / "out"
    assert main(["connect", str(path_a), str(run_b), "--task", TASK, "-o", str(out), "--num-samples", "300"]) == 2
    err = capsys.readouterr().err
    assert "--num-samples 300 asks for more samples than the dataset --task returned holds (256 samples)" in err
    assert not out.exists()
