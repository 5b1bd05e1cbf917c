"""A num_samples beyond the dataset (569 samples of scikit-learn's breast-cancer data): the default
recorded when training takes the whole dataset and says so; a number asked for, or chosen when
training, is refused before any checkpoint is loaded, naming the option as the user gives it."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
import torch
from torch import nn

from landscape import read_h5
from landscape.cli._main import main
from landscape.generate import SummaryLandscape, TooManySamples, _summary_landscape
from tests.landscape.cli import _cancer_run

TASK = "tests.landscape.cli._cancer_run:task"


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory):
    """A run the collector wrote, num_samples left at its default."""
    run = tmp_path_factory.mktemp("cancer") / "run"
    _cancer_run.train(run)
    return run


def _run_with(fresh_run, tmp_path, **recorded):
    """A copy of the run whose train_metadata.json records ``recorded`` (a key given None is left out)."""
    run = tmp_path / "run"
    shutil.copytree(fresh_run, run)
    path = run / "ckpt_dir" / "train_metadata.json"
    md = json.loads(path.read_text())
    for key, value in recorded.items():
        md.pop(key, None)
        if value is not None:
            md[key] = value
    os.chmod(path, 0o644)
    path.write_text(json.dumps(md))
    return run


def _plain_loss_of_all(state: dict) -> float:
    """The mean loss over all 569 samples, one forward (independent of the library)."""
    net = _cancer_run.network()
    net.load_state_dict(state)
    net.eval()
    x, y = _cancer_run.data().tensors
    with torch.no_grad():
        return float(nn.functional.cross_entropy(net(x), y))


def _assert_all_samples_used(run, out):
    got = read_h5(out / "landscapes.h5")
    assert sorted(got) == ["landscape_[1, 3]", "landscape_[3]"]
    last = torch.load(run / "ckpt_dir" / "Sequential_3_epoch.pt", weights_only=True)
    for ls in got.values():
        assert ls.metadata["num_samples"] == _cancer_run.SIZE
    assert got["landscape_[1, 3]"].path.z[-1] == pytest.approx(_plain_loss_of_all(last), rel=1e-5)


@pytest.fixture
def no_checkpoint_loaded(monkeypatch):
    """Fails the test if a checkpoint is loaded for the points (the refusal must come first)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a checkpoint was loaded before the refusal")

    monkeypatch.setattr(_summary_landscape, "_kept_states", refuse)


def test_a_fresh_run_without_num_samples_uses_the_whole_dataset(fresh_run, tmp_path, capsys):
    assert main(["gen", str(fresh_run), "--task", TASK, "--output", str(tmp_path / "out")]) == 0
    _assert_all_samples_used(fresh_run, tmp_path / "out")


def test_num_samples_beyond_the_dataset_is_refused_naming_the_option(fresh_run, tmp_path, capsys,
                                                                      no_checkpoint_loaded):
    out = tmp_path / "out"
    code = main(["gen", str(fresh_run), "--task", TASK, "--output", str(out), "--num-samples", "1000"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("landscape gen: error: --num-samples 1000 asks for more samples than the dataset --task "
                          "returned holds (569 samples). HINT: pass --num-samples 569 or fewer"), err
    assert "collect_landscape" not in err and "SummaryLandscape" not in err
    assert not out.exists() and not (fresh_run / "landscapes.h5").exists()  # nothing written


@pytest.mark.parametrize("recorded", [
    {"num_samples": 2048, "num_samples_default": None},  # a run written before the key: the default was 2048
    {"num_samples": 4096, "num_samples_default": True},  # the key the collector writes
])
def test_a_recorded_default_beyond_the_dataset_takes_it_whole_and_says_so(fresh_run, tmp_path, capsys, caplog,
                                                                          recorded):
    run = _run_with(fresh_run, tmp_path, **recorded)
    assert main(["gen", str(run), "--task", TASK, "--output", str(tmp_path / "out")]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    n = recorded["num_samples"]
    assert any(f"records num_samples={n}, the collector's default" in w and "use all 569" in w for w in warned), warned
    _assert_all_samples_used(run, tmp_path / "out")


@pytest.mark.parametrize("default", [False, None])
def test_a_recorded_choice_beyond_the_dataset_is_refused_naming_the_way_out(fresh_run, tmp_path, capsys,
                                                                            no_checkpoint_loaded, default):
    run = _run_with(fresh_run, tmp_path, num_samples=1000, num_samples_default=default)
    code = main(["gen", str(run), "--task", TASK, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "records num_samples=1000 (chosen when training)" in err and "(569 samples)" in err, err
    assert "HINT: pass --num-samples 569 or fewer" in err
    assert not (tmp_path / "out").exists()


def test_the_python_api_names_its_parameter(fresh_run, tmp_path, no_checkpoint_loaded):
    sl = SummaryLandscape(fresh_run)
    with pytest.raises(TooManySamples, match=r"^SummaryLandscape\.gen_landscapes_with_multi_process: "
                                             r"collect_landscape=\{'num_samples': 1000\} asks for more samples than "
                                             r"the dataset \(callback_fn\) holds \(569 samples\)\. HINT: pass "
                                             r"collect_landscape=\{'num_samples': 569\} or fewer"):
        sl.gen_landscapes_with_multi_process(_cancer_run.task, collect_landscape={"num_samples": 1000},
                                             output=tmp_path / "out")
    run = _run_with(fresh_run, tmp_path, num_samples=1000, num_samples_default=False)
    with pytest.raises(TooManySamples, match=r"records num_samples=1000 .*569 samples.*collect_landscape="
                                             r"\{'num_samples': 569\}"):
        SummaryLandscape(run).gen_landscapes_with_multi_process(_cancer_run.task, output=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_python_api_takes_a_recorded_default_whole(fresh_run, tmp_path, caplog):
    run = _run_with(fresh_run, tmp_path, num_samples=2048, num_samples_default=True)
    got = SummaryLandscape(run).gen_landscapes_with_multi_process(_cancer_run.task, output=tmp_path / "out")
    assert [ls.metadata["num_samples"] for ls in got] == [569, 569]
    assert any("use all 569" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    _assert_all_samples_used(run, tmp_path / "out")
