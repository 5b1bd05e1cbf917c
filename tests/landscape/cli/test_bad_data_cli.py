"""The commands refuse bad data before any point: ``landscape gen``, ``landscape compare`` and
``landscape curvature`` exit non-zero with the cause and the fix, after one forward pass (the check's),
and leave the run's and the output's folders as they were."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.landscape import _bad_data as bad

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _files(folder):
    return sorted(os.path.relpath(os.path.join(r, f), folder) for r, _, fs in os.walk(folder) for f in fs)


def _command(tmp_path, *args):
    forwards = tmp_path / "forwards"
    env = dict(os.environ, LANDSCAPE_TEST_FORWARDS=str(forwards))
    res = subprocess.run([sys.executable, "-m", "landscape", *map(str, args)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    return res, len(forwards.read_text()) if forwards.exists() else 0


@pytest.mark.parametrize("kind", bad.CASES)
def test_gen_refuses_bad_data_and_writes_nothing(kind, tmp_path):
    run = bad.write_run(tmp_path / "run")
    before = _files(run)
    res, forwards = _command(tmp_path, "gen", run, "--task", f"tests.landscape._bad_data:{kind}", "--output",
                             tmp_path / "out")
    assert res.returncode != 0
    assert re.search(bad.MESSAGES[kind], res.stderr), res.stderr
    assert forwards == 1  # the check's forward over the 96 samples; no point
    assert _files(run) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", bad.CASES)
def test_compare_refuses_bad_data_and_writes_nothing(kind, tmp_path):
    runs = [bad.write_run(tmp_path / "a"), bad.write_run(tmp_path / "b", seed=1)]
    before = [_files(r) for r in runs]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("kept")
    res, forwards = _command(tmp_path, "compare", *runs, "--task", f"tests.landscape._bad_data:{kind}", "-o",
                             tmp_path / "out")
    assert res.returncode != 0 and re.search(bad.MESSAGES[kind], res.stderr), res.stderr
    assert forwards == 1  # the check's forward; no point
    assert _files(tmp_path / "out") == ["notes.txt"] and [_files(r) for r in runs] == before


def test_curvature_refuses_nan_data_and_writes_nothing(tmp_path):
    run = bad.write_run(tmp_path / "a")
    before = _files(run)
    res, forwards = _command(tmp_path, "curvature", run, "--task", "tests.landscape._bad_data:nan", "--what",
                             "eigs")
    assert res.returncode != 0 and "the inputs hold 1 NaN value(s) (sample 70)" in res.stderr, res.stderr
    assert "LinAlgError" not in res.stderr and forwards == 1
    assert _files(run) == before
