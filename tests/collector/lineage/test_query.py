"""get_summary_lineage / filter_summary_lineage: reading, the search-condition grammar, every error."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from collector import InvalidParameterError, SummaryRecord, proto
from collector.lineage import (
    LineageError,
    LineageFileNotFoundError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
    LineageSearchConditionParamError,
    MindInsightException,
    filter_summary_lineage,
    get_summary_lineage,
)
from collector.lineage import _query as _lineage_query


# ------------------------------------------------------------------------------------ helpers
def train_msg(optimizer="SGD", lr=0.1, batch_size=32, epoch=5, network="MLP", loss=0.5, loss_fn="CrossEntropyLoss",
              train_size=1000, model_size=4096, dataset_path=None):
    msg = proto.TrainLineage()
    hp = msg.hyper_parameters
    hp.optimizer, hp.learning_rate, hp.loss_function = optimizer, lr, loss_fn
    hp.epoch, hp.batch_size, hp.device_num, hp.parallel_mode = epoch, batch_size, 1, "stand_alone"
    msg.train_dataset.train_dataset_size = train_size
    if dataset_path:
        msg.train_dataset.train_dataset_path = dataset_path
    msg.algorithm.network, msg.algorithm.loss = network, loss
    msg.model.path, msg.model.size = json.dumps({"ckpt": None}), model_size
    return msg


def eval_msg(metrics, valid_size=200):
    msg = proto.EvaluationLineage(metric=json.dumps(metrics))
    msg.valid_dataset.valid_dataset_size = valid_size
    return msg


def graph_msg(batch_size):
    graph = proto.DatasetGraph()
    graph.parameter.mapStr["op_type"] = "Batch"
    graph.parameter.mapInt["batch_size"] = batch_size
    child = graph.children.add()
    child.parameter.mapStr["op_type"] = "TensorDataset"
    return graph


def write_run(path, *, metrics=None, user=None, mtime=None, **train):
    """One run written through SummaryRecord: dataset graph, train lineage, then (optionally) eval lineage."""
    with SummaryRecord(path) as rec:
        rec.add_value("dataset_graph", "train_dataset", graph_msg(train.get("batch_size", 32)))
        if user:
            info = proto.UserDefinedInfo()
            for key, value in user.items():
                entry = info.user_info.add()
                field = "map_str" if isinstance(value, str) else "map_int32" if isinstance(value, int) else "map_double"
                getattr(entry, field)[key] = value
            rec.add_value("custom_lineage_data", "custom", info)
        rec.record(0)
        rec.add_value("train_lineage", "train", train_msg(**train))
        rec.record(10)
        if metrics is not None:
            rec.add_value("eval_lineage", "eval", eval_msg(metrics))
            rec.record(10)
    if mtime is not None:
        for f in Path(path).iterdir():
            os.utime(f, (mtime, mtime))
    return Path(path)


RUNS = {  # name: (optimizer, lr, batch size, epoch, accuracy, loss)
    "run_a": ("SGD", 0.1, 32, 5, 0.9, 0.30),
    "run_b": ("Adam", 0.01, 64, 10, 0.95, 0.20),
    "run_c": ("Momentum", 0.05, 128, 5, 0.8, 0.45),
    "group/run_d": ("SGD", 0.001, 64, 20, 0.7, 0.60),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lineage_base")
    for i, (name, (opt, lr, bs, epoch, acc, loss)) in enumerate(RUNS.items()):
        write_run(root / name, optimizer=opt, lr=lr, batch_size=bs, epoch=epoch, loss=loss,
                  metrics={"accuracy": acc, "top5": 1 if acc > 0.85 else 0.99}, mtime=1_700_000_000 + 100 * i,
                  user={"owner": "ana" if i % 2 else "bo", "seed": i})
    (root / "not_a_run").mkdir()
    (root / "not_a_run" / "notes.txt").write_text("nothing here")
    return root


def dirs(result) -> list[str]:
    return [o["summary_dir"] for o in result["object"]]


# ------------------------------------------------------------------------ the MindSpore fixture
def test_mindspore_fixture_lineage(mindspore_run):
    lin = get_summary_lineage(mindspore_run)
    assert lin["summary_dir"] == os.path.realpath(mindspore_run)
    assert lin["algorithm"]["network"] == "MLP"
    hp = lin["hyper_parameters"]
    assert (hp["optimizer"], hp["learning_rate"], hp["epoch"], hp["batch_size"]) == ("Momentum", 0.05, 10, 64)
    assert hp["loss_function"] == "SoftmaxCrossEntropyWithLogits"
    assert lin["train_dataset"] == {"train_dataset_size": 1792}
    assert lin["dataset_graph"]["op_type"] == "Batch"
    assert lin["dataset_graph"]["children"][0]["op_type"] == "GeneratorDataset"
    assert lin["metric"] == {} and lin["valid_dataset"] == {}
    only = get_summary_lineage(str(mindspore_run), keys=["hyper_parameters", "model"])
    assert set(only) == {"summary_dir", "hyper_parameters", "model"}
    assert only["model"] == {"path": '{"ckpt": null}', "size": 0}


def test_mindspore_fixture_filter(tmp_path, mindspore_run):
    shutil.copytree(mindspore_run, tmp_path / "ms")
    res = filter_summary_lineage(tmp_path)
    assert res["count"] == 1 and res["customized"] == {}
    obj = res["object"][0]
    assert obj["summary_dir"] == "./ms"
    ml = obj["model_lineage"]
    assert (ml["network"], ml["optimizer"], ml["learning_rate"], ml["epoch"], ml["batch_size"]) == \
        ("MLP", "Momentum", 0.05, 10, 64)
    assert ml["loss"] == pytest.approx(0.0515810587) and ml["train_dataset_count"] == 1792
    assert list(ml) == ["loss_function", "train_dataset_path", "train_dataset_count", "test_dataset_path",
                        "test_dataset_count", "network", "optimizer", "learning_rate", "epoch", "batch_size",
                        "device_num", "loss", "model_size", "dataset_mark", "metric", "user_defined"]
    assert set(obj) == {"summary_dir", "model_lineage", "dataset_graph", "added_info"}


# --------------------------------------------------------------------------- filter and sort
def test_everything_newest_first(base):
    res = filter_summary_lineage(base)
    assert res["count"] == 4
    assert dirs(res) == ["./group/run_d", "./run_c", "./run_b", "./run_a"]  # update time, newest first
    b = next(o for o in res["object"] if o["summary_dir"] == "./run_b")["model_lineage"]
    assert (b["optimizer"], b["learning_rate"], b["batch_size"], b["epoch"]) == ("Adam", 0.01, 64, 10)
    assert b["metric"] == {"accuracy": 0.95, "top5": 1} and b["user_defined"] == {"owner": "ana", "seed": 1}
    assert b["test_dataset_count"] == 200 and b["model_size"] == 4096


@pytest.mark.parametrize("condition, expected", [
    ({"optimizer": {"eq": "SGD"}}, {"./run_a", "./group/run_d"}),
    ({"optimizer": {"in": ["Adam", "Momentum"]}}, {"./run_b", "./run_c"}),
    ({"optimizer": {"not_in": ["SGD"]}}, {"./run_b", "./run_c"}),
    ({"learning_rate": {"gt": 0.01}}, {"./run_a", "./run_c"}),
    ({"learning_rate": {"ge": 0.01}}, {"./run_a", "./run_b", "./run_c"}),
    ({"learning_rate": {"lt": 0.05}}, {"./run_b", "./group/run_d"}),
    ({"learning_rate": {"le": 0.05}}, {"./run_b", "./run_c", "./group/run_d"}),
    ({"batch_size": {"ge": 64, "le": 100}}, {"./run_b", "./group/run_d"}),
    ({"batch_size": {"in": [32, 128]}}, {"./run_a", "./run_c"}),
    ({"epoch": {"eq": 5}, "optimizer": {"eq": "SGD"}}, {"./run_a"}),
    ({"metric_accuracy": {"ge": 0.9}}, {"./run_a", "./run_b"}),
    ({"metric/accuracy": {"lt": 0.9}}, {"./run_c", "./group/run_d"}),
    ({"metric_top5": {"eq": 1}}, {"./run_a", "./run_b"}),
    ({"metric_missing": {"gt": 0}}, set()),
    ({"loss": {"lt": 0.4}, "batch_size": {"lt": 64}}, {"./run_a"}),
    ({"user_defined_owner": {"eq": "ana"}}, {"./run_b", "./group/run_d"}),
    ({"user_defined/seed": {"ge": 2}}, {"./run_c", "./group/run_d"}),
    ({"network": {"eq": "MLP"}, "loss_function": {"eq": "CrossEntropyLoss"}},
     {"./run_a", "./run_b", "./run_c", "./group/run_d"}),
    ({"summary_dir": {"in": ["./run_a", "./group/run_d"]}}, {"./run_a", "./group/run_d"}),
    ({"train_dataset_count": {"eq": 1000}, "test_dataset_count": {"eq": 200}, "model_size": {"ge": 4096},
      "device_num": {"eq": 1}}, {"./run_a", "./run_b", "./run_c", "./group/run_d"}),
    ({"train_dataset_path": {"eq": "/data"}}, set()),
])
def test_filter(base, condition, expected):
    res = filter_summary_lineage(base, condition)
    assert set(dirs(res)) == expected and res["count"] == len(expected)


def test_summary_dir_absolute_paths_as_in_the_seed_example(base):
    cond = {"summary_dir": {"in": [os.path.join(base, "run_b"), os.path.join(base, "run_c")]},
            "sorted_name": "summary_dir", "sorted_type": "descending"}
    assert dirs(filter_summary_lineage(base, cond)) == ["./run_c", "./run_b"]


@pytest.mark.parametrize("name, kind, expected", [
    ("learning_rate", "ascending", ["./group/run_d", "./run_b", "./run_c", "./run_a"]),
    ("learning_rate", "descending", ["./run_a", "./run_c", "./run_b", "./group/run_d"]),
    ("metric_accuracy", "descending", ["./run_b", "./run_a", "./run_c", "./group/run_d"]),
    ("metric/accuracy", None, ["./group/run_d", "./run_c", "./run_a", "./run_b"]),
    ("batch_size", "ascending", ["./run_a", "./group/run_d", "./run_b", "./run_c"]),  # ties: newest first
    ("summary_dir", "ascending", ["./group/run_d", "./run_a", "./run_b", "./run_c"]),
])
def test_sort(base, name, kind, expected):
    assert dirs(filter_summary_lineage(base, {"sorted_name": name, "sorted_type": kind})) == expected


def test_sort_puts_missing_values_first_ascending(base, tmp_path):
    shutil.copytree(base, tmp_path / "b")
    write_run(tmp_path / "b" / "no_eval", optimizer="SGD", lr=0.2, mtime=1_600_000_000)
    asc = dirs(filter_summary_lineage(tmp_path / "b", {"sorted_name": "metric_accuracy"}))
    assert asc[0] == "./no_eval"
    desc = dirs(filter_summary_lineage(tmp_path / "b", {"sorted_name": "metric_accuracy",
                                                         "sorted_type": "descending"}))
    assert desc[-1] == "./no_eval"


def test_paging(base):
    cond = {"sorted_name": "learning_rate", "sorted_type": "ascending", "limit": 3}
    pages = [filter_summary_lineage(base, {**cond, "offset": k}) for k in range(3)]
    assert [dirs(p) for p in pages] == [["./group/run_d", "./run_b", "./run_c"], ["./run_a"], []]
    assert all(p["count"] == 4 for p in pages)
    one = filter_summary_lineage(base, {"optimizer": {"eq": "SGD"}, "limit": 1, "offset": 1,
                                        "sorted_name": "epoch"})
    assert dirs(one) == ["./group/run_d"] and one["count"] == 2
    assert len(filter_summary_lineage(base, {"offset": 0})["object"]) == 4  # offset alone: pages of 10


def test_lineage_type(base):
    res = filter_summary_lineage(base, {"lineage_type": "dataset", "limit": 1})
    assert set(res["object"][0]) == {"summary_dir", "dataset_graph", "added_info"}
    assert res["object"][0]["dataset_graph"]["op_type"] == "Batch"
    res = filter_summary_lineage(base, {"lineage_type": "model", "limit": 1})
    assert set(res["object"][0]) == {"summary_dir", "model_lineage", "dataset_graph", "added_info"}
    res = filter_summary_lineage(base, {"lineage_type": {"eq": "model"}, "limit": 1})  # MindInsight 2.x form
    assert set(res["object"][0]) == {"summary_dir", "model_lineage", "added_info"}
    res = filter_summary_lineage(base, {"lineage_type": {"in": ["model", "dataset"]}, "limit": 1})
    assert set(res["object"][0]) == {"summary_dir", "model_lineage", "dataset_graph", "added_info"}


def test_customized_fields_and_dataset_mark(base):
    res = filter_summary_lineage(base)
    assert res["customized"] == {
        "metric/accuracy": {"label": "metric/accuracy", "required": True, "type": "float"},
        "metric/top5": {"label": "metric/top5", "required": True, "type": "float"},  # 1 and 0.99: int+float
        "user_defined/owner": {"label": "user_defined/owner", "required": False, "type": "str"},
        "user_defined/seed": {"label": "user_defined/seed", "required": False, "type": "int"},
    }
    only_a = filter_summary_lineage(base, {"summary_dir": {"eq": "./run_a"}})
    assert only_a["customized"]["metric/top5"]["type"] == "int"
    marks = {o["summary_dir"]: o["model_lineage"]["dataset_mark"] for o in res["object"]}
    assert marks["./run_b"] == marks["./group/run_d"]  # same dataset graph (batch size 64)
    assert len(set(marks.values())) == 3
    same = filter_summary_lineage(base, {"dataset_mark": {"eq": marks["./run_b"]}})
    assert set(dirs(same)) == {"./run_b", "./group/run_d"}


# ------------------------------------------------------------------------ which lineage wins
def _write_events(path, *events, seconds=None):
    """Write a lineage file through SummaryRecord: each event is (plugin, message)."""
    with SummaryRecord(path) as rec:
        for step, (plugin, msg) in enumerate(events):
            rec.add_value(plugin, plugin, msg)
            rec.record(step)


def test_latest_train_and_eval_win(tmp_path):
    run = tmp_path / "base" / "run"
    _write_events(run, ("train_lineage", train_msg(lr=0.1)), ("eval_lineage", eval_msg({"acc": 0.5})),
                  ("train_lineage", train_msg(lr=0.2)), ("eval_lineage", eval_msg({"acc": 0.7})))
    lin = get_summary_lineage(run)
    assert lin["hyper_parameters"]["learning_rate"] == pytest.approx(0.2) and lin["metric"] == {"acc": 0.7}
    # A later file with only an evaluation adds it to the training before it.
    _write_events(run, ("eval_lineage", eval_msg({"acc": 0.9})))
    lin = get_summary_lineage(run)
    assert lin["hyper_parameters"]["learning_rate"] == pytest.approx(0.2) and lin["metric"] == {"acc": 0.9}
    # A later file with a new training starts afresh: the old evaluation no longer describes the model.
    _write_events(run, ("train_lineage", train_msg(lr=0.3)))
    lin = get_summary_lineage(run)
    assert lin["hyper_parameters"]["learning_rate"] == pytest.approx(0.3) and lin["metric"] == {}
    assert filter_summary_lineage(tmp_path / "base")["object"][0]["model_lineage"]["metric"] == {}


def test_runs_without_lineage_are_skipped(base, tmp_path, caplog):
    shutil.copytree(base, tmp_path / "b")
    with SummaryRecord(tmp_path / "b" / "scalars_only") as rec:
        rec.add_value("scalar", "loss", 1.0)
        rec.record(1)
    with SummaryRecord(tmp_path / "b" / "empty_lineage") as rec:
        rec.add_value("custom_lineage_data", "c", {"k": 1})  # lineage file, but no train/eval/graph
        rec.record(1)
    with caplog.at_level(logging.WARNING, logger="collector.lineage._query"):
        res = filter_summary_lineage(tmp_path / "b")
    assert res["count"] == 4 and "empty_lineage" in caplog.text


def test_damaged_tail_keeps_intact_records(tmp_path):
    run = write_run(tmp_path / "run", metrics={"acc": 0.5})
    (lineage,) = [f for f in run.iterdir() if f.name.endswith("_lineage")]
    os.chmod(lineage, 0o600)
    with open(lineage, "ab") as fh:
        fh.write(b"\x10\x00\x00")  # a torn record header
    assert get_summary_lineage(run)["metric"] == {"acc": 0.5}


def test_at_most_max_summary_dirs_are_listed(base, monkeypatch, caplog):
    monkeypatch.setattr(_lineage_query, "MAX_SUMMARY_DIRS", 2)
    with caplog.at_level(logging.WARNING, logger="collector.lineage._query"):
        res = filter_summary_lineage(base)
    assert res["count"] == 2
    assert "More than 2 summary directories" in caplog.text and "left out" in caplog.text


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("path", [3, "", None, "/nonexistent/lineage/dir"])
def test_get_summary_lineage_bad_path(path):
    with pytest.raises(LineageParamSummaryPathError, match="'summary_dir' parameter of get_summary_lineage"):
        get_summary_lineage(path)


def test_get_summary_lineage_path_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(LineageParamSummaryPathError, match="is not a directory"):
        get_summary_lineage(tmp_path / "f")


def test_get_summary_lineage_no_lineage_file(tmp_path):
    with pytest.raises(LineageFileNotFoundError, match="no lineage file"):
        get_summary_lineage(tmp_path)


def test_get_summary_lineage_no_lineage_in_files(tmp_path):
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("custom_lineage_data", "c", {"k": 1})
        rec.record(1)
    with pytest.raises(LineageQuerySummaryDataError, match="hold no train, evaluation or dataset-graph"):
        get_summary_lineage(tmp_path)


def test_query_summary_data_error_when_reading_fails(base, monkeypatch):
    def broken(path, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(_lineage_query, "read_events", broken)
    with pytest.raises(LineageQuerySummaryDataError, match="Permission denied"):
        get_summary_lineage(base / "run_a")
    with pytest.raises(LineageQuerySummaryDataError, match="Reading the lineage files of"):
        filter_summary_lineage(base)


@pytest.mark.parametrize("keys, error, match", [
    ("metric", LineageParamTypeError, "'keys' parameter of get_summary_lineage must be a list of str"),
    ([1], LineageParamTypeError, "must be a list of str"),
    (["metric", "hyper"], LineageParamValueError, r"names among metric, hyper_parameters.*Got \['hyper'\]"),
])
def test_get_summary_lineage_bad_keys(base, keys, error, match):
    with pytest.raises(error, match=match):
        get_summary_lineage(base / "run_a", keys=keys)


@pytest.mark.parametrize("path", [3, "", "/nonexistent/lineage/base"])
def test_filter_bad_base_dir(path):
    with pytest.raises(LineageParamSummaryPathError, match="'summary_base_dir' parameter of filter_summary_lineage"):
        filter_summary_lineage(path)


def test_filter_no_lineage_file(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(LineageFileNotFoundError, match="no lineage file under"):
        filter_summary_lineage(tmp_path)


BAD_CONDITIONS = [
    (["optimizer"], "'search_condition' parameter of filter_summary_lineage must be a dict or None"),
    ({"optimiser": {"eq": "SGD"}}, r"field names .* must be among summary_dir, .*Got 'optimiser'"),
    ({"metric_": {"gt": 1}}, "Got 'metric_'"),
    ({1: {"eq": 1}}, "field names"),
    ({"optimizer": "SGD"}, r"condition of 'optimizer' .* must be a non-empty dict"),
    ({"optimizer": {}}, "must be a non-empty dict"),
    ({"optimizer": {"like": "SG"}}, r"operator of 'optimizer' .* must be one of eq, lt, gt, le, ge, in, not_in"),
    ({"optimizer": {"gt": "SGD"}}, r"operator of 'optimizer' \(a str field\) .* one of eq, in, not_in"),
    ({"optimizer": {"eq": 1}}, r"value of 'optimizer' 'eq' .* must be a str\. Got 1"),
    ({"optimizer": {"in": "SGD"}}, r"must be a list or tuple\. Got 'SGD'"),
    ({"batch_size": {"eq": 32.0}}, r"must be an int in the range \[0, 2\*\*63 - 1\]\. Got 32\.0"),
    ({"batch_size": {"ge": -1}}, r"Got -1 instead"),
    ({"epoch": {"eq": True}}, r"Got True instead"),
    ({"batch_size": {"in": [32, "64"]}}, r"Got '64' instead"),
    ({"learning_rate": {"gt": "0.1"}}, r"value of 'learning_rate' 'gt' .* an int or float \(not NaN\)"),
    ({"loss": {"lt": float("nan")}}, "not NaN"),
    ({"metric_accuracy": {"ge": "0.9"}}, r"value of 'metric_accuracy' 'ge'"),
    ({"user_defined_owner": {"eq": ["ana"]}}, r"must be a str, int or float"),
    ({"limit": 0}, r"'limit' .* must be an int in the range \[1, 100\]\. Got 0"),
    ({"limit": 101}, r"Got 101"),
    ({"limit": True}, r"Got True"),
    ({"offset": -1}, r"'offset' .* must be an int in the range \[0, 100000\]\. Got -1"),
    ({"offset": 100001}, r"Got 100001"),
    ({"offset": "1"}, r"Got '1'"),
    ({"sorted_name": "accuracy"}, r"'sorted_name' .* must be a field among summary_dir.*Got 'accuracy'"),
    ({"sorted_name": 3}, r"Got 3"),
    ({"sorted_type": "ascending"}, r"'sorted_type' .* must be given together with 'sorted_name'"),
    ({"sorted_name": "epoch", "sorted_type": "up"}, r"'ascending', 'descending' or None\. Got 'up'"),
    ({"lineage_type": "graph"}, r"'lineage_type' .* must be 'model', 'dataset', None"),
    ({"lineage_type": {"in": ["model", "x"]}}, r"Got \{'in': \['model', 'x'\]\}"),
]


@pytest.mark.parametrize("condition, match", BAD_CONDITIONS)
def test_filter_bad_search_condition(base, condition, match):
    with pytest.raises(LineageSearchConditionParamError, match=match) as info:
        filter_summary_lineage(base, condition)
    assert isinstance(info.value, (LineageError, InvalidParameterError, ValueError, TypeError))


def test_exception_hierarchy():
    assert MindInsightException is LineageError
    for cls in (LineageParamTypeError, LineageParamValueError, LineageParamSummaryPathError,
                LineageSearchConditionParamError):
        assert issubclass(cls, LineageError) and issubclass(cls, InvalidParameterError)
    assert issubclass(LineageFileNotFoundError, FileNotFoundError)


# ----------------------------------------------------------------- the same answer as MindInsight
MI_PYTHON = Path(os.environ.get("MINDINSIGHT_VENV", "/opt/mi-venv")) / "bin" / "python"


@pytest.mark.skipif(not MI_PYTHON.exists(), reason="MindInsight venv not installed")
def test_same_result_as_mindinsight(base, tmp_path, mindspore_run):
    shutil.copytree(base, tmp_path / "b")
    shutil.copytree(mindspore_run, tmp_path / "b" / "ms")
    conditions = [
        {},
        {"optimizer": {"in": ["SGD", "Momentum"]}, "sorted_name": "learning_rate", "sorted_type": "descending"},
        {"metric_accuracy": {"ge": 0.8}, "sorted_name": "metric_accuracy", "limit": 2, "offset": 0},
        {"batch_size": {"ge": 64, "le": 128}, "lineage_type": {"eq": "model"}},
    ]
    mi_conditions = [json.loads(json.dumps(c).replace('"metric_', '"metric/')) for c in conditions]
    script = ("import json,sys\nfrom mindinsight.lineagemgr.model import filter_summary_lineage as f\n"
              "print(json.dumps([f(summary_base_dir=sys.argv[1], search_condition=c) "
              "for c in json.loads(sys.argv[2])]))")
    out = subprocess.run([str(MI_PYTHON), "-c", script, str(tmp_path / "b"), json.dumps(mi_conditions)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    ours = [json.loads(json.dumps(filter_summary_lineage(tmp_path / "b", c))) for c in conditions]
    for mine, mi in zip(ours, theirs):
        # Our nested run may be extra; MindInsight's Python API numbers dataset marks in directory-listing
        # order (its REST API, like us, newest first: see test_lineage.py), so marks are left out here.
        mi_objects = {o["summary_dir"]: o for o in mi["object"]}
        for obj in mine["object"]:
            if obj["summary_dir"] == "./group/run_d":
                continue
            theirs_obj = mi_objects[obj["summary_dir"]]
            for o in (obj, theirs_obj):
                o.get("model_lineage", {}).pop("dataset_mark", None)
            assert obj == theirs_obj
        assert [d for d in dirs(mine) if d != "./group/run_d"] == [d for d in dirs(mi) if d != "./group/run_d"]
