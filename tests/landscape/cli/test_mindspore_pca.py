"""``landscape gen`` against MindSpore 2.10's own PCA landscapes of the same weights (tests/data/
mindspore-2.10-pca-given-weights, see tests/data/README-fixtures.md): the weights saved as this project's
checkpoints with MindSpore's train_metadata, the same task (the first 512 digits, unshuffled, batches of 64,
mean cross-entropy), run as a user runs the command; x, y, z, the loss path and the convergence point of
both landscapes equal MindSpore's to 1e-6 relative."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from collector import SummaryReader
from landscape import Landscape, read_h5
from tests.conftest import MINDSPORE_PCA

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TAGS = ["landscape_[1, 5]", "landscape_[6, 10]"]

# MindSpore's callback_fn, as this project's --task: the network whose layers MindSpore's nn.Dense mirror
TASK = textwrap.dedent("""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from collector import Model
    from landscape.examples import MLP, digits_tensors


    def task():
        x, y = digits_tensors()
        net = MLP()
        data = DataLoader(TensorDataset(x[:512], y[:512]), batch_size=64, shuffle=False)
        return Model(net, nn.CrossEntropyLoss()), net, data, None
""")


def _run_from_the_weights(run) -> None:
    """The fixture's weights as this project's checkpoints, with the metadata MindSpore was given."""
    ckpt = run / "ckpt_dir"
    ckpt.mkdir(parents=True)
    files = {}
    with np.load(MINDSPORE_PCA / "weights.npz", allow_pickle=False) as weights:
        for epoch in range(1, 11):
            state = {name: torch.from_numpy(weights[f"{epoch}/{name}"].copy())
                     for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")}
            files[str(epoch)] = f"MLP_{epoch}_epoch.pt"
            torch.save(state, ckpt / files[str(epoch)])
    md = {"epoch_group": {"0": [1, 2, 3, 4, 5], "1": [6, 7, 8, 9, 10]}, "model_params_file_map": files,
          "step_per_epoch": 28, "unit": "epoch", "num_samples": 512, "landscape_size": 10,
          "create_landscape": {"train": True, "result": False}}
    (ckpt / "train_metadata.json").write_text(json.dumps(md))


def _mindspore() -> dict[str, Landscape]:
    """MindSpore's landscapes, read back with the project's own summary reader."""
    (events,) = MINDSPORE_PCA.glob("events.out.events.summary.*_MS")
    return {tag: Landscape.from_proto(msg, tag=tag) for _, tag, msg in SummaryReader(str(events)).landscape_messages()}


def test_landscape_gen_equals_mindspores_pca_landscapes(tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    _run_from_the_weights(run)
    (tmp_path / "ms_task.py").write_text(TASK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    res = subprocess.run([sys.executable, "-m", "landscape", "gen", str(run), "--task", "ms_task:task",
                          "--output", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    ours, theirs = read_h5(out / "landscapes.h5"), _mindspore()
    assert sorted(ours) == sorted(theirs) == TAGS
    for tag in TAGS:
        a, b = ours[tag], theirs[tag]
        assert a.metadata["decomposition"] == b.metadata["decomposition"] == "PCA"
        assert a.path.intervals == b.path.intervals
        for what, got, want in (("x", a.x, b.x), ("y", a.y, b.y), ("z", a.z, b.z),
                                ("path x", a.path.x, b.path.x), ("path y", a.path.y, b.path.y),
                                ("path z", a.path.z, b.path.z),
                                ("convergence point", a.convergence_point, b.convergence_point)):
            got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
            assert got.shape == want.shape, (tag, what)
            # relative to the array's scale: the path's last point and the convergence point's x, y are 0
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max(), err_msg=f"{tag} {what}")


@pytest.mark.parametrize("tag", TAGS)
def test_the_fixture_holds_what_its_readme_says(tag):
    ls = _mindspore()[tag]
    first = int(tag.split("[")[1].split(",")[0])
    assert ls.z.shape == (10, 10) and ls.path.intervals == list(range(first, first + 5))
    assert ls.metadata["unit"] == "epoch" and ls.metadata["step_per_epoch"] == 28
    assert ls.convergence_point[:2] == (0.0, 0.0)
