"""``landscape gen`` refuses bad options before any work, naming them as typed.

"Before any work" is proven without timing: the task module writes a marker file when it is
imported and another when its function is called; a refused command leaves neither, creates
no output folder, and (in a fresh interpreter) never imports torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.landscape._helpers import usage_error

ROOT = Path(__file__).resolve().parents[3]

_TASK_SOURCE = """
import os, pathlib
pathlib.Path(os.environ["MARKER_DIR"], "imported").touch()

def task():
    pathlib.Path(os.environ["MARKER_DIR"], "called").touch()
    from tests.landscape._gen_task import task as real
    return real()
"""


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working directory holding ``marker_task.py``; the markers go to ``tmp_path/markers``."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "marker_task.py").write_text(_TASK_SOURCE)
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MARKER_DIR", str(markers))
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the current directory on it
    monkeypatch.delitem(sys.modules, "marker_task", raising=False)
    return work


def _refused(argv: list[str], capsys) -> str:
    err = usage_error(argv, capsys)
    assert len(err.strip().splitlines()) == 1, err  # one line
    return err


def _cases(summary_dir: Path, tmp_path: Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    return [
        (["--size", "1"], "argument --size: expected an int in [3, 256] (points per side); got 1"),
        (["--size", "257"], "argument --size: expected an int in [3, 256] (points per side); got 257"),
        (["--output", str(a_file)], f"The '--output' parameter of landscape gen must be a directory (created if "
                                    f"missing). Got {str(a_file)!r}, which is an existing file"),
        (["--output", str(a_file / "sub")], f"but {str(a_file)!r} is an existing file"),
        (["--between", "1,6"], "--between 1,6 needs --view interpolation, plane or target (got no --view)"),
        (["--view", "line", "--between", "1,6"], "--between 1,6 needs --view interpolation, plane or target "
                                                 "(got --view line"),
        (["--view", "plane", "--between", "1,6"], "--between must be 3 checkpoints for --view plane; got 2 (1,6)"),
        (["--view", "interpolation", "--between", "1,99"],
         "--between 1,99: no checkpoint of epoch 99 was collected; collected: 1,2,3,4,5,6."),
        (["--view", "interpolation", "--between", f"1,{tmp_path / 'gone.pt'}"], "no checkpoint file"),
        (["--second", "pca"], "--second pca is the second axis of --view target; got no --view"),
        (["--view", "target", "--second", "pca", "--between", f"1,{a_file}"],
         "--second pca needs --between as two checkpoint numbers"),
        (["--view", "interpolation", "--y", "-1:1:5"], "--y does not apply to --view interpolation"),
        (["--x", "1:0:5"], "argument --x: expected MIN:MAX:NUM with finite MIN < MAX and NUM >= 2 points"),
        (["--x", "-1:1:1"], "argument --x: expected MIN:MAX:NUM with finite MIN < MAX and NUM >= 2 points"),
        (["--ignore", ""], "--ignore takes a glob pattern; got an empty one"),
        (["--devices", "0,1", "--distributed"], "--devices does not apply with --distributed"),
    ]


def test_bad_options_are_refused_before_the_task_module_is_imported(work, summary_dir, tmp_path, capsys):
    out = tmp_path / "out"
    for extra, fragment in _cases(summary_dir, tmp_path):
        err = _refused(["gen", str(summary_dir), "--task", "marker_task:task", "--output", str(out), *extra]
                       if "--output" not in extra else ["gen", str(summary_dir), "--task", "marker_task:task", *extra],
                       capsys)
        assert fragment in err, (extra, err)
        assert "collect_landscape" not in err  # named as typed, not as the API's keys
        assert not out.exists() and "marker_task" not in sys.modules, extra
    assert not list((tmp_path / "markers").iterdir())  # never imported, never called
    assert not list((summary_dir).glob("*.h5")) and sorted(p.name for p in summary_dir.iterdir()) == ["ckpt_dir"]


def test_the_task_and_the_summary_dir_are_checked_before_their_use(work, summary_dir, tmp_path, capsys):
    out = str(tmp_path / "out")
    err = _refused(["gen", str(summary_dir), "--task", "marker_task:tsak", "--output", out], capsys)
    assert f"--task: module 'marker_task' ({work / 'marker_task.py'}) defines no 'tsak'" in err
    err = _refused(["gen", str(summary_dir), "--task", "marker_tsak:task", "--output", out], capsys)
    assert "--task: cannot import module 'marker_tsak': no such module in the current directory" in err
    err = _refused(["gen", str(summary_dir), "--task", "marker_task", "--output", out], capsys)
    assert "--task must be MODULE:FUNCTION" in err
    err = _refused(["gen", str(tmp_path / "nowhere"), "--task", "marker_task:task", "--output", out], capsys)
    assert "SUMMARY_DIR" in err and "is not a directory" in err
    err = _refused(["gen", str(work), "--task", "marker_task:task", "--output", out], capsys)
    assert "holds no ckpt_dir/train_metadata.json" in err
    assert not list((tmp_path / "markers").iterdir()) and not os.path.exists(out)


def test_refusals_never_import_torch(summary_dir, tmp_path):
    """In a fresh interpreter, as the console script runs: the checks import neither torch nor the task."""
    probe = textwrap.dedent("""
        import json, sys
        from landscape.cli._main import main
        codes = [main(json.loads(arg)) for arg in sys.argv[1:]]
        print(json.dumps({"codes": codes, "torch": "torch" in sys.modules, "task": "marker_task" in sys.modules}))
    """)
    (tmp_path / "marker_task.py").write_text(_TASK_SOURCE)
    (tmp_path / "markers").mkdir()
    base = ["gen", str(summary_dir), "--task", "marker_task:task", "--output", str(tmp_path / "out")]
    argvs = [base + ["--output", str(tmp_path / "marker_task.py")], base + ["--between", "1,6"],
             base + ["--view", "plane", "--between", "1,2"], base[:3] + ["marker_task:nope"]]
    res = subprocess.run([sys.executable, "-c", probe, *(json.dumps(a) for a in argvs)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), MARKER_DIR=str(tmp_path / "markers")))
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report == {"codes": [2, 2, 2, 2], "torch": False, "task": False}, res.stderr
    assert not list((tmp_path / "markers").iterdir()) and not (tmp_path / "out").exists()


_DICT_TASK = """
import os, pathlib, torch
from torch import nn
from tests.landscape._helpers import TinyMLP, make_data

class Net(TinyMLP):
    def forward(self, x):
        pathlib.Path(os.environ["MARKER_DIR"], "forward").touch()
        return super().forward(x)

class Model:
    loss_fn = nn.CrossEntropyLoss()

def task():
    x, y = make_data()
    return Model(), Net(), [{"input_ids": x[i:i + 32], "labels": y[i:i + 32]} for i in range(0, 96, 32)], None
"""


def test_dict_batches_without_a_task_are_refused_before_any_folder(work, summary_dir, tmp_path, capsys):
    (work / "dict_batches_task.py").write_text(_DICT_TASK)
    out = tmp_path / "out"
    err = _refused(["gen", str(summary_dir), "--task", "dict_batches_task:task", "--output", str(out)], capsys)
    assert ("The batches of the dataset callback_fn returned (its third item) are dicts with the keys "
            "['input_ids', 'labels'], which the task Supervised(CrossEntropyLoss()) cannot take apart") in err
    assert ("HINT: return a task as the fifth item of callback_fn's result, (model, network, dataset, metrics, "
            "task): landscape.tasks.HuggingFace()") in err
    assert "Supervised(loss_fn, inputs='input_ids', targets='labels')" in err
    assert not out.exists()  # no folder created
    assert not (tmp_path / "markers" / "forward").exists()  # no point evaluated


@pytest.mark.parametrize("source, defined", [
    ("def task():\n    pass\n", True),
    ("from tests.landscape._gen_task import task\n", True),
    ("try:\n    from a import task\nexcept ImportError:\n    task = None\n", True),
    ("if True:\n    def task():\n        pass\n", True),
    ("with open('f') as task:\n    pass\n", True),
    ("(task := 3)\n", True),
    ("def other():\n    task = 1\n", False),
    ("class A:\n    task = 1\n", False),
    ("from a import *\n", None),  # cannot be told: never refused
    ("globals()['task'] = lambda: None\n", None),
    ("def __getattr__(name):\n    return None\n", None),
    ("def task(:\n", None),
])
def test_a_task_function_is_refused_only_when_surely_undefined(source, defined):
    from landscape.cli._gen_check import _defines

    assert _defines(source, "task") is defined
