"""`landscape gen` on a run this same command finished: answered from the stamp in
landscapes.h5 without torch or callback_fn; anything changed takes the full path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from landscape import read_h5

ROOT = Path(__file__).resolve().parents[3]
TASK = "tests.landscape._gen_task:task"
# runs the command in a fresh interpreter and says whether torch was imported
_PROBE = ("import sys; from landscape.cli._main import main; rc = main(sys.argv[1:]); "
          "print('TORCH', 'torch' in sys.modules); sys.exit(rc)")


def _gen(summary_dir, out, *extra, cwd=ROOT, task=TASK):
    # the probe is a script in a folder of its own, as the `landscape` console script is: the current
    # directory is not on sys.path unless the command puts it there
    probe = Path(str(out) + "_probe") / "probe.py"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(_PROBE.replace("; ", "\n"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(probe), "gen", str(summary_dir), "--task", task, "--output",
                          str(out), "--size", "5", *extra], capture_output=True, text=True, cwd=cwd, timeout=300,
                         env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_a_task_module_in_the_current_directory_is_stamped(summary_dir, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mytask.py").write_text("from tests.landscape._gen_task import task\n")
    out = tmp_path / "out"
    assert "evaluated 25 of 25" in _gen(summary_dir, out, cwd=work, task="mytask:task")
    again = _gen(summary_dir, out, cwd=work, task="mytask:task")
    assert "Nothing to do" in again and "TORCH False" in again
    (work / "mytask.py").write_text("from tests.landscape._gen_task import task  # edited\n")
    assert "Nothing to do" not in _gen(summary_dir, out, cwd=work, task="mytask:task")


def test_a_finished_run_is_answered_without_torch_and_changes_are_not(summary_dir, tmp_path):
    out = tmp_path / "out"
    first = _gen(summary_dir, out)
    assert "evaluated 25 of 25 points" in first and "TORCH True" in first
    before = read_h5(out / "landscapes.h5")
    events = sorted(os.listdir(out))
    again = _gen(summary_dir, out)
    assert "Nothing to do: 3 landscape(s)" in again and "TORCH False" in again
    assert "landscape_[6]: 5x5, min loss" in again
    assert sorted(os.listdir(out)) == events  # nothing written
    for tag, ls in read_h5(out / "landscapes.h5").items():
        np.testing.assert_array_equal(ls.z, before[tag].z)

    # --verify, another option, a touched checkpoint: the full path (which finds the run complete)
    verified = _gen(summary_dir, out, "--verify")
    assert "Nothing to do" not in verified and "evaluated 0 of" in verified and "TORCH True" in verified
    other = _gen(summary_dir, out, "--seed", "3", "--output", str(tmp_path / "other"))
    assert "Nothing to do" not in other
    ckpt = summary_dir / "ckpt_dir" / "TinyMLP_6_epoch.pt"
    st = ckpt.stat()
    os.utime(ckpt, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    touched = _gen(summary_dir, out)
    assert "Nothing to do" not in touched and "TORCH True" in touched
    # which stamps again: the next rerun is answered at once
    assert "Nothing to do" in _gen(summary_dir, out)


def test_a_landscape_redone_by_another_command_voids_the_stamp(summary_dir, tmp_path):
    out = tmp_path / "out"
    _gen(summary_dir, out)
    with h5py.File(out / "landscapes.h5", "r+") as fh:  # as if restarted from other inputs
        fh["landscape_[6]"].attrs["fingerprint"] = '{"other": 1}'
    res = subprocess.run([sys.executable, "-c", _PROBE, "gen", str(summary_dir), "--task", TASK, "--output",
                          str(out), "--size", "5"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "Nothing to do" not in res.stdout
    assert res.returncode == 1 and "made from other inputs" in res.stderr  # the full check refuses it
