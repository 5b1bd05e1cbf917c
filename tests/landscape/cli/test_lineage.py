"""``landscape lineage``: the --where grammar, the table, --json, paging and exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from landscape.cli._lineage import WhereError, format_table, parse_where, run_lineage
from landscape.cli._main import build_parser
from tests.collector.lineage.test_query import write_run

RUNS = {  # name: optimizer, lr, batch size, accuracy
    "sgd_fast": ("SGD", 0.1, 32, 0.91),
    "adam": ("Adam", 0.001, 64, 0.95),
    "sgd_slow": ("SGD", 0.01, 64, 0.85),
    "momentum": ("Momentum", 0.05, 128, 0.80),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli_lineage")
    for i, (name, (opt, lr, bs, acc)) in enumerate(RUNS.items()):
        write_run(root / name, optimizer=opt, lr=lr, batch_size=bs, metrics={"accuracy": acc},
                  mtime=1_700_000_000 + i, user={"owner": "ana"})
    return root


def _run(*argv: str) -> int:
    args = build_parser().parse_args(["lineage", *argv])
    return run_lineage(args)


def _table_dirs(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines()[2:] if line.startswith("./")]


@pytest.mark.parametrize("exprs, expected", [
    (["learning_rate>0.01"], {"learning_rate": {"gt": 0.01}}),
    (["optimizer=SGD"], {"optimizer": {"eq": "SGD"}}),
    (["optimizer == 'SGD'"], {"optimizer": {"eq": "SGD"}}),
    (["metric_accuracy>=0.9"], {"metric_accuracy": {"ge": 0.9}}),
    (["batch_size in 32,64"], {"batch_size": {"in": [32, 64]}}),
    (["batch_size not in 32"], {"batch_size": {"not_in": [32]}}),
    (["optimizer!=SGD", "optimizer!=Adam"], {"optimizer": {"not_in": ["SGD", "Adam"]}}),
    (["batch_size>=32", "batch_size<=64", "epoch<10"], {"batch_size": {"ge": 32, "le": 64}, "epoch": {"lt": 10}}),
    (["user_defined_seed=3", "user_defined_owner=ana", "user_defined_w=0.5"],
     {"user_defined_seed": {"eq": 3}, "user_defined_owner": {"eq": "ana"}, "user_defined_w": {"eq": 0.5}}),
    (["summary_dir=./run1"], {"summary_dir": {"eq": "./run1"}}),
])
def test_parse_where(exprs, expected):
    assert parse_where(exprs) == expected


@pytest.mark.parametrize("expr, match", [
    ("learning_rate", "expected FIELD OP VALUE"),
    ("learning_rate>", "expected FIELD OP VALUE"),
    ("lr>0.1", "unknown field 'lr'"),
    ("batch_size>big", "batch_size needs a number; got 'big'"),
    ("metric_accuracy>=high", "metric_accuracy needs a number"),
])
def test_parse_where_errors(expr, match):
    with pytest.raises(WhereError, match=match):
        parse_where([expr])


def test_parse_where_same_operator_twice():
    with pytest.raises(WhereError, match="already has a '>' condition"):
        parse_where(["epoch>1", "epoch>2"])


def test_table(base, capsys):
    assert _run(str(base)) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header[:4] == ["summary_dir", "network", "optimizer", "learning_rate"]
    assert "metric_accuracy" in header and "user_defined_owner" in header
    assert "train_dataset_path" not in header  # columns empty in every run are left out
    assert _table_dirs(out) == ["./momentum", "./sgd_slow", "./adam", "./sgd_fast"]
    assert out.rstrip().endswith("4 matching run(s)")


def test_where_sort_limit(base, capsys):
    assert _run(str(base), "--where", "optimizer in SGD,Adam", "--where", "metric_accuracy>=0.85",
                "--sort", "learning_rate", "--desc") == 0
    out = capsys.readouterr().out
    assert _table_dirs(out) == ["./sgd_fast", "./sgd_slow", "./adam"]
    assert _run(str(base), "--sort", "metric_accuracy", "--desc", "--limit", "2") == 0
    out = capsys.readouterr().out
    assert _table_dirs(out) == ["./adam", "./sgd_fast"] and "2 of 4 matching run(s)" in out
    assert _run(str(base), "--sort", "metric_accuracy", "--desc", "--limit", "2", "--offset", "1") == 0
    assert _table_dirs(capsys.readouterr().out) == ["./sgd_slow", "./momentum"]


def test_json(base, capsys):
    assert _run(str(base), "--where", "batch_size=64", "--sort", "summary_dir", "--json") == 0
    res = json.loads(capsys.readouterr().out)
    assert res["count"] == 2 and [o["summary_dir"] for o in res["object"]] == ["./adam", "./sgd_slow"]
    assert res["object"][0]["model_lineage"]["optimizer"] == "Adam"


@pytest.mark.parametrize("argv, match", [
    (["--where", "lr>1"], "unknown field 'lr'"),
    (["--desc"], "--desc needs --sort FIELD"),
    (["--offset", "1"], "--offset needs --limit N"),
    (["--limit", "0"], r"'limit' .* must be an int in the range \[1, 100\]"),
    (["--sort", "accuracy"], "'sorted_name'"),
    (["--where", "optimizer>SGD"], r"a str field"),
])
def test_usage_errors_exit_2(base, capsys, argv, match):
    assert _run(str(base), *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("landscape lineage: error:")
    assert __import__("re").search(match, err)


def test_missing_base_dir_exits_2(tmp_path, capsys):
    assert _run(str(tmp_path / "missing")) == 2
    assert "does not exist" in capsys.readouterr().err


def test_no_lineage_exits_1(tmp_path, capsys):
    assert _run(str(tmp_path)) == 1
    assert "no lineage file" in capsys.readouterr().err


def test_format_table_marks_missing_values():
    res = {"customized": {"metric/acc": {}}, "count": 1,
           "object": [{"summary_dir": "./r", "model_lineage": {"optimizer": "SGD", "metric": {}}}]}
    lines = format_table(res).splitlines()
    assert lines[0].split() == ["summary_dir", "optimizer", "metric_acc"]
    assert lines[2].split() == ["./r", "SGD", "-"]


def test_landscape_command(base, mindspore_run, tmp_path):
    shutil.copytree(base, tmp_path / "b")
    shutil.copytree(mindspore_run, tmp_path / "b" / "ms")
    out = subprocess.run([sys.executable, "-m", "landscape", "lineage", str(tmp_path / "b"),
                          "--where", "network=MLP", "--where", "optimizer=Momentum", "--where", "batch_size in 64",
                          "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert [o["summary_dir"] for o in res["object"]] == ["./ms"]
    ml = res["object"][0]["model_lineage"]
    assert (ml["learning_rate"], ml["epoch"], ml["batch_size"]) == (0.05, 10, 64)
