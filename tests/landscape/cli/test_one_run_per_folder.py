"""One run's landscapes per output folder: ``landscape gen RUN_B --output DIR`` into a folder of run A's
landscapes is refused before any work (the task module neither imported nor called, no checkpoint
loaded), naming both runs and the ways out, with nothing written; ``--restart`` replaces them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from collector.trajectory import TrainMetadata, file_digest
from landscape import SummaryLandscape, read_h5
from landscape.cli._main import main
from landscape.generate import _summary_landscape
from landscape.io import read_run
from tests.landscape._helpers import FakeModel, TinyMLP, make_data, tiny_callback, train_trajectory, usage_error
from tests.landscape.cli.test_gen_refusals import work  # noqa: F401  (the fixture: a folder with marker_task.py)


@pytest.fixture
def markers(request, tmp_path):
    """The markers ``marker_task`` leaves when imported and when called, in the working directory that
    test_gen_refusals's ``work`` makes."""
    request.getfixturevalue("work")
    return tmp_path / "markers"


@pytest.fixture
def run_b(tmp_path):
    """Another run of TinyMLP (other initial weights), its checkpoints' SHA-256 recorded as training records them."""
    torch.manual_seed(1)
    traj = train_trajectory(TinyMLP(), *make_data())
    ckpt = tmp_path / "run_b" / "ckpt_dir"
    ckpt.mkdir(parents=True)
    files, digests = {}, {}
    for i, sd in enumerate(traj, start=1):
        files[i] = f"TinyMLP_{i}_epoch.pt"
        torch.save(sd, ckpt / files[i])
        digests[i] = file_digest(ckpt / files[i])
    TrainMetadata(intervals=[[1, 2, 3], [4, 5, 6]], files=files, step_per_epoch=4, unit="epoch", num_samples=64,
                  landscape_size=4, digests=digests).write(ckpt)
    return tmp_path / "run_b"


def _gen(run: Path, out: Path, *extra: str) -> list[str]:
    return ["gen", str(run), "--task", "marker_task:task", "--output", str(out), *extra]


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_another_run_into_the_same_output_exits_2_naming_both_and_writes_nothing(markers, summary_dir, run_b,
                                                                                 tmp_path, capsys):
    out = tmp_path / "out"
    assert main(_gen(summary_dir, out)) == 0
    assert read_run(out / "landscapes.h5")["name"] == str(summary_dir.resolve())
    capsys.readouterr()
    assert main(["ls", str(tmp_path), "--json"]) == 0  # ls says whose landscapes the folder holds
    (row,) = json.loads(capsys.readouterr().out)
    assert row["run"] == "out" and row["generated_from"] == str(summary_dir.resolve())
    assert main(["ls", str(tmp_path)]) == 0
    assert f"\tlandscapes of run {summary_dir.resolve()}\n" in capsys.readouterr().out
    for marker in markers.iterdir():
        marker.unlink()
    sys.modules.pop("marker_task", None)
    before = _state(out)
    err = usage_error(_gen(run_b, out), capsys)
    assert f"holds the landscapes of another run, {str(summary_dir.resolve())!r}" in err
    assert f"made from other inputs than this call's run {str(run_b.resolve())!r}" in err
    assert "checkpoints in common differ (checkpoint epoch 1: SHA-256" in err
    assert "landscape gen --output DIR" in err and "landscape gen --restart" in err
    assert "Nothing was written" in err
    assert _state(out) == before  # every file of the folder: same bytes, same modification time
    assert not list(markers.iterdir())  # the task module was never imported: refused before any work

    # --restart replaces run A's landscapes.h5 by run B's, the same as B's into a fresh folder
    assert main(_gen(run_b, out, "--restart")) == 0
    assert read_run(out / "landscapes.h5")["name"] == str(run_b.resolve())
    assert main(_gen(run_b, tmp_path / "fresh")) == 0
    replaced, fresh = read_h5(out / "landscapes.h5"), read_h5(tmp_path / "fresh" / "landscapes.h5")
    assert sorted(replaced) == sorted(fresh)
    for tag in fresh:
        np.testing.assert_array_equal(replaced[tag].z, fresh[tag].z)
    # and run A is now the other run
    assert "holds the landscapes of another run" in usage_error(_gen(summary_dir, out), capsys)


def test_the_api_refuses_naming_its_parameter_before_calling_back(summary_dir, run_b, tmp_path):
    out = tmp_path / "out"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(tiny_callback, output=out,
                                                                    collect_landscape={"landscape_size": 3})
    calls = []

    def callback():
        calls.append(1)
        return tiny_callback()

    stamp = os.stat(out / "landscapes.h5").st_mtime_ns
    with pytest.raises(InvalidParameterError, match="The 'output' parameter of SummaryLandscape.gen_landscapes_"
                                                    "with_multi_process must be a folder holding no other run's"):
        SummaryLandscape(run_b).gen_landscapes_with_multi_process(callback, output=out)
    assert not calls and os.stat(out / "landscapes.h5").st_mtime_ns == stamp


def test_another_task_on_the_same_checkpoints_is_refused_before_they_are_loaded(summary_dir, tmp_path, monkeypatch):
    out = tmp_path / "out"
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(tiny_callback, output=out,
                                                                    collect_landscape={"landscape_size": 3})

    def other_loss():
        model, net, data, metrics = tiny_callback()
        return FakeModel(net, nn.MultiMarginLoss()), net, data, metrics

    def not_now(*args, **kwargs):
        raise AssertionError("a checkpoint was loaded")

    monkeypatch.setattr(_summary_landscape, "load_checkpoint", not_now)
    monkeypatch.setattr(_summary_landscape, "CheckpointReader", not_now)
    with pytest.raises(InvalidParameterError, match='task: "CrossEntropyLoss\\(\\)" then, "MultiMarginLoss\\(\\)" now'):
        SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(other_loss, output=out)


def test_a_file_written_before_runs_were_recorded_is_accepted_and_gets_the_record(summary_dir, run_b, tmp_path):
    out = tmp_path / "out"
    sl = SummaryLandscape(summary_dir)
    sl.gen_landscapes_with_multi_process(tiny_callback, output=out, collect_landscape={"landscape_size": 3})
    with h5py.File(out / "landscapes.h5", "r+") as fh:
        del fh.attrs["run"]  # as written before
    sl.gen_landscapes_with_multi_process(tiny_callback, output=out, view="line", x=(-1, 1, 3))
    record = read_run(out / "landscapes.h5")
    assert record["name"] == str(summary_dir.resolve()) and len(record["checkpoints"]) == 6
    assert record["task"] == "CrossEntropyLoss()" and record["network_class"].endswith("TinyMLP")
    assert sorted(read_h5(out / "landscapes.h5")) == ["landscape_[1, 3]", "landscape_[4, 6]", "landscape_[6]",
                                                      "line_[6]"]
    with pytest.raises(InvalidParameterError, match="holds the landscapes of another run"):
        SummaryLandscape(run_b).gen_landscapes_with_multi_process(tiny_callback, output=out)
