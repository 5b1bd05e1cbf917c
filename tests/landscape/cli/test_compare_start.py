"""``landscape compare --centre start`` of SummaryCollector runs: centred on the runs' true start, the
initial weights the collector saved before the first step, and saying which start it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from matplotlib.figure import Figure

import viz
from landscape import compare_runs, read_h5
from tests.landscape.cli import _start_task
from tests.landscape.cli.test_compare import _run as hand_written_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _compare(runs, out, centre_file, *extra):
    cmd = [sys.executable, "-m", "landscape", "compare", *map(str, runs), "--task",
           "tests.landscape.cli._start_task:task", "-o", str(out), "--size", "5", "--centre", "start", *extra]
    env = {**os.environ, "LANDSCAPE_TEST_CENTRE": str(centre_file)}
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _assert_same_bits(used: dict, path) -> None:
    saved = torch.load(path, weights_only=True)
    assert used.keys() == saved.keys()
    for key, value in saved.items():
        assert used[key].dtype == value.dtype and torch.equal(used[key], value), key


@pytest.fixture(scope="module")
def one_seed(tmp_path_factory):
    """SGD and Adam from one seed: the same initial weights."""
    root = tmp_path_factory.mktemp("one_seed")
    _start_task.train(root / "sgd", 0, "sgd")
    _start_task.train(root / "adam", 0, "adam")
    return root


def test_runs_from_one_seed_are_centred_on_their_shared_initial_weights(tmp_path, one_seed):
    runs = [one_seed / "sgd", one_seed / "adam"]
    done = _compare(runs, tmp_path / "cmp", tmp_path / "centre.pt")
    # the centre the command used is the saved step-0 checkpoint, bit for bit (and so the other run's too)
    used = torch.load(tmp_path / "centre.pt", weights_only=True)
    for run in runs:
        _assert_same_bits(used, run / "ckpt_dir" / "TinyMLP_0_epoch.pt")
    epoch1 = torch.load(one_seed / "sgd" / "ckpt_dir" / "TinyMLP_1_epoch.pt", weights_only=True)
    assert not torch.equal(used["fc1.weight"], epoch1["fc1.weight"])  # not the first saved checkpoint any more
    assert "centre: the runs' shared initial weights" in done.stdout
    (ls,) = read_h5(tmp_path / "cmp" / "landscapes.h5").values()
    assert ls.metadata["centre_on"] == "start"
    assert ls.metadata["centre_description"] == "the runs' shared initial weights"
    # the paths are the intervals' checkpoints only: the initial weights are not one of them
    assert ls.metadata["runs"] == {"sgd": 3, "adam": 3}
    # and the picture's legend says so
    ax = Figure().add_subplot()
    viz.plot_filled_contour(ls, ax=ax)
    assert any(t.get_text().startswith("shared centre: the runs' shared initial weights (loss ")
               for t in ax.get_legend().get_texts())


def test_runs_from_two_seeds_are_centred_on_the_first_runs_initial_weights(tmp_path, one_seed):
    _start_task.train(tmp_path / "other", 1, "sgd")
    runs = [one_seed / "sgd", tmp_path / "other"]
    done = _compare(runs, tmp_path / "cmp", tmp_path / "centre.pt")
    _assert_same_bits(torch.load(tmp_path / "centre.pt", weights_only=True),
                      one_seed / "sgd" / "ckpt_dir" / "TinyMLP_0_epoch.pt")
    words = "run sgd's initial weights (run(s) other started from others)"
    assert f"centre: {words}" in done.stdout
    (ls,) = read_h5(tmp_path / "cmp" / "landscapes.h5").values()
    assert ls.metadata["centre_description"] == words


def test_runs_without_initial_weights_keep_their_first_checkpoint_and_say_so(tmp_path):
    """Runs written before the initial weights were saved: the first run's first saved checkpoint, labelled so."""
    runs = [hand_written_run(tmp_path / "first", 0), hand_written_run(tmp_path / "second", 1)]
    ls = compare_runs(runs, _start_task.task, tmp_path / "cmp", centre="start", size=5)
    assert ls.metadata["centre_description"] == ("run first's first saved checkpoint, epoch 0: the initial weights "
                                                 "were not saved")
    assert ls.paths["first"].x[0] == ls.paths["first"].y[0] == 0.0  # that checkpoint is the centre, as before


def test_a_changed_initial_weights_file_is_refused_before_any_work(tmp_path, one_seed):
    runs = {name: tmp_path / name for name in ("sgd", "adam")}
    for name, folder in runs.items():
        (folder / "ckpt_dir").mkdir(parents=True)
        for f in (one_seed / name / "ckpt_dir").iterdir():
            (folder / "ckpt_dir" / f.name).write_bytes(f.read_bytes())
    initial = runs["adam"] / "ckpt_dir" / "TinyMLP_0_epoch.pt"
    data = bytearray(initial.read_bytes())
    data[-30] ^= 1
    initial.write_bytes(bytes(data))
    called = []

    def task():
        called.append(1)
        return _start_task.task()

    with pytest.raises(ValueError, match="the initial weights of run 'adam': checkpoint file .* is not the file "
                                         "training wrote"):
        compare_runs(runs, task, tmp_path / "cmp", centre="start", size=5)
    assert not called and not (tmp_path / "cmp").exists()
    # another centre does not use that file
    md = json.loads((runs["adam"] / "ckpt_dir" / "train_metadata.json").read_text())
    assert md["initial_checkpoint"]["file"] == "TinyMLP_0_epoch.pt"
    compare_runs(runs, task, tmp_path / "mean", centre="mean", size=5)
