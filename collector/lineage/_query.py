"""Read lineage files back and query them across runs (``get_summary_lineage``, ``filter_summary_lineage``).

Semantics follow MindInsight 2.3.1's ``lineagemgr``:

* A run is a directory holding a file whose name contains ``summary.`` and digits; its
  lineage files (``..._lineage``) are read oldest first. In each file the latest train
  lineage, the latest evaluation lineage and the latest dataset graph count; a file with
  a train lineage or a dataset graph starts the run's lineage afresh (so an evaluation
  recorded before a new training is dropped), a file with only an evaluation adds it.
  Custom lineage (``user_defined``) is merged from the files applied since then.
* Runs are listed as ``"./relative/path"`` and, unless sorted otherwise, most recently
  updated first. Unlike MindInsight (which looks one level down) runs are found at any
  depth, up to ``MAX_SUMMARY_DIRS`` of them.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import operator
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict

from collector.lineage._callbacks import (
    LineageFileNotFoundError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
    LineageSearchConditionParamError,
    LineageSummaryParseException,
)
from collector.summary import is_lineage_file, read_events, summary_files

__all__ = ["get_summary_lineage", "filter_summary_lineage", "FILTER_KEYS", "MAX_SUMMARY_DIRS", "INT_FIELDS",
           "condition_key"]

logger = logging.getLogger(__name__)

#: The ``keys`` of :func:`get_summary_lineage` (``user_defined`` is this project's addition).
FILTER_KEYS = ("metric", "hyper_parameters", "algorithm", "train_dataset", "model", "valid_dataset",
               "dataset_graph", "user_defined")
_TIMESTAMP = re.compile(r"summary\.(\d+)")


def _seconds(name: str) -> int:
    """The creation second in a lineage file's name (0 when it has none)."""
    m = _TIMESTAMP.search(name)
    return int(m.group(1)) if m else 0
#: At most this many summary directories are listed under a base directory (MindInsight's limit).
MAX_SUMMARY_DIRS = 999


# ------------------------------------------------------------------------------------- reading
def _check_dir(path: Any, name: str, caller: str) -> str:
    """The real path of an existing directory, or :class:`LineageParamSummaryPathError`."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path) or "\0" in os.fspath(path):
        raise LineageParamSummaryPathError(
            f"The '{name}' parameter of {caller} must be a non-empty directory path (str or os.PathLike). "
            f"Got {path!r} instead.")
    real = os.path.realpath(os.fspath(path))
    if not os.path.isdir(real):
        what = "is not a directory" if os.path.exists(real) else "does not exist"
        raise LineageParamSummaryPathError(
            f"The '{name}' parameter of {caller} must be an existing directory. Got {os.fspath(path)!r}, "
            f"which {what}, instead.")
    return real


def _dataset_graph(graph: Any) -> dict[str, Any]:
    """A DatasetGraph as MindInsight shows it: parameters flattened, then operations, sampler, children."""
    out = _parameters(graph.parameter)
    if len(graph.operations):
        out["operations"] = [_operation(op) for op in graph.operations]
    if graph.HasField("sampler") and _operation(graph.sampler):
        out["sampler"] = _operation(graph.sampler)
    out["children"] = [_dataset_graph(child) for child in graph.children]
    return out


def _operation(op: Any) -> dict[str, Any]:
    out = _parameters(op.operationParam)
    if len(op.size):
        out["size"] = list(op.size)
    if len(op.weights):
        out["weights"] = list(op.weights)
    return out


def _parameters(param: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in ("mapStr", "mapBool", "mapInt", "mapDouble"):
        out.update({k: (None if v == "None" else v) for k, v in getattr(param, field).items()})
    out.update({k: [s or None for s in v.strValue] for k, v in param.mapStrList.items()})
    return out


def _user_defined(info: Any) -> dict[str, Any]:
    """UserDefinedInfo to a dict: each ``user_info`` entry's first item (MindInsight), then top-level maps."""
    out: dict[str, Any] = {}
    for entry in info.user_info:
        for field in ("map_dict", "map_int32", "map_str", "map_double"):
            items = getattr(entry, field)
            if len(items):
                key = next(iter(items))
                out[key] = _user_defined(items[key]) if field == "map_dict" else items[key]
                break
    for field in ("map_int32", "map_str", "map_double"):
        out.update(getattr(info, field).items())
    return out


def _empty_lineage() -> dict[str, Any]:
    return {"model": {}, "algorithm": {}, "hyper_parameters": {}, "train_dataset": {}, "metric": {},
            "valid_dataset": {}, "dataset_graph": {}, "user_defined": {}}


def _apply_file(lineage: dict[str, Any] | None, events: list[Any], path: Path) -> dict[str, Any] | None:
    """Fold one lineage file's events into a run's lineage (None: nothing yet)."""
    latest: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for event in events:
        what = event.WhichOneof("what")
        if what in ("train_lineage", "evaluation_lineage", "dataset_graph"):
            latest[what] = event
        elif what == "user_defined_info":
            user.update(_user_defined(event.user_defined_info))
    if not latest:
        logger.info("no train, evaluation or dataset-graph lineage in %s; file skipped", path)
        return lineage
    if lineage is None or "train_lineage" in latest or "dataset_graph" in latest:
        lineage = _empty_lineage()
    lineage["user_defined"].update(user)
    if "train_lineage" in latest:
        train = MessageToDict(latest["train_lineage"].train_lineage, preserving_proto_field_name=True)
        if train.get("model", {}).get("size") is not None:
            train["model"]["size"] = int(train["model"]["size"])  # int64 comes back as a str
        lineage.update(train)
    if "evaluation_lineage" in latest:
        ev = MessageToDict(latest["evaluation_lineage"].evaluation_lineage, preserving_proto_field_name=True)
        lineage.update(ev)
        try:
            lineage["metric"] = json.loads(ev["metric"]) if ev.get("metric") else {}
        except ValueError:
            logger.warning("%s: the evaluation metric is not JSON (%r); ignored", path, ev.get("metric"))
            lineage["metric"] = {}
    if "dataset_graph" in latest:
        lineage["dataset_graph"] = _dataset_graph(latest["dataset_graph"].dataset_graph)
    return lineage


def _load_run(directory: str) -> tuple[dict[str, Any], float]:
    """``(lineage, update_time)`` of one run directory.

    Raises
    ------
    LineageFileNotFoundError
        No lineage file in the directory.
    LineageSummaryParseException
        Lineage files, but no train/evaluation/dataset-graph lineage in them.
    LineageQuerySummaryDataError
        A file could not be read (an OSError).
    """
    try:
        files = summary_files(directory)
        # MindInsight's order: timestamp ascending, then name descending.
        lineage_files = sorted(sorted((f for f in files if is_lineage_file(f.name)), key=lambda f: f.name,
                                      reverse=True), key=lambda f: _seconds(f.name))
        if not lineage_files:
            raise LineageFileNotFoundError(
                f"There is no lineage file (*.summary.<seconds>.*_lineage) in {directory!r}.")
        lineage = None
        for path in lineage_files:
            lineage = _apply_file(lineage, [ev for _, ev in read_events(path)], path)
        update_time = max(f.stat().st_mtime for f in files)
    except LineageFileNotFoundError:
        raise
    except OSError as exc:
        raise LineageQuerySummaryDataError(f"Reading the lineage files of {directory!r} failed: {exc}") from exc
    if lineage is None:
        raise LineageSummaryParseException(
            f"The lineage files of {directory!r} hold no train, evaluation or dataset-graph lineage.")
    return lineage, update_time


def get_summary_lineage(summary_dir: str | os.PathLike, keys: list[str] | None = None) -> dict[str, Any]:
    """Get the lineage of one training from its summary directory, optionally only some parts.

    Parameters
    ----------
    summary_dir : str or os.PathLike
        The run's directory (it holds the ``..._lineage`` files of one training).
    keys : list of str, default=None
        Parts to return, among ``metric``, ``hyper_parameters``, ``algorithm``,
        ``train_dataset``, ``model``, ``valid_dataset``, ``dataset_graph`` and
        ``user_defined``. None returns them all.

    Returns
    -------
    dict
        ``summary_dir`` (the absolute path) and the requested parts, e.g.
        ``{"summary_dir": ..., "hyper_parameters": {"optimizer": "Momentum", "learning_rate": 0.05, ...}}``.

    Raises
    ------
    LineageParamSummaryPathError
        If ``summary_dir`` is not an existing directory.
    LineageParamTypeError, LineageParamValueError
        If ``keys`` is not a list of the accepted names.
    LineageFileNotFoundError
        If the directory holds no lineage file.
    LineageQuerySummaryDataError
        If the lineage files cannot be read or hold no lineage.

    Examples
    --------
    >>> get_summary_lineage("runs/run1", keys=["hyper_parameters"])        # doctest: +SKIP
    {'summary_dir': '/.../runs/run1', 'hyper_parameters': {'optimizer': 'SGD', ...}}
    """
    caller = "get_summary_lineage"
    directory = _check_dir(summary_dir, "summary_dir", caller)
    if keys is not None:
        if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
            raise LineageParamTypeError(f"The 'keys' parameter of {caller} must be a list of str or None. "
                                        f"Got {keys!r} instead.")
        unknown = [k for k in keys if k not in FILTER_KEYS]
        if unknown:
            raise LineageParamValueError(f"The 'keys' parameter of {caller} must list names among "
                                         f"{', '.join(FILTER_KEYS)}. Got {unknown!r} instead.")
    try:
        lineage, _ = _load_run(directory)
    except LineageSummaryParseException as exc:
        raise LineageQuerySummaryDataError(str(exc)) from exc
    result: dict[str, Any] = {"summary_dir": directory}
    for key in (FILTER_KEYS if keys is None else keys):
        result[key] = lineage[key]
    return result


# ---------------------------------------------------------------------------- search condition
#: Filterable field -> (lineage part, key in it); ``summary_dir`` and ``dataset_mark`` are the run's own.
FIELDS: dict[str, tuple[str | None, str | None]] = {
    "summary_dir": (None, None),
    "loss_function": ("hyper_parameters", "loss_function"),
    "train_dataset_path": ("train_dataset", "train_dataset_path"),
    "train_dataset_count": ("train_dataset", "train_dataset_size"),
    "test_dataset_path": ("valid_dataset", "valid_dataset_path"),
    "test_dataset_count": ("valid_dataset", "valid_dataset_size"),
    "network": ("algorithm", "network"),
    "optimizer": ("hyper_parameters", "optimizer"),
    "learning_rate": ("hyper_parameters", "learning_rate"),
    "epoch": ("hyper_parameters", "epoch"),
    "batch_size": ("hyper_parameters", "batch_size"),
    "device_num": ("hyper_parameters", "device_num"),
    "loss": ("algorithm", "loss"),
    "model_size": ("model", "size"),
    "dataset_mark": (None, None),
}
STR_FIELDS = ("summary_dir", "loss_function", "train_dataset_path", "test_dataset_path", "network", "optimizer",
              "dataset_mark")
INT_FIELDS = ("train_dataset_count", "test_dataset_count", "epoch", "batch_size", "device_num", "model_size")
OPERATORS = ("eq", "lt", "gt", "le", "ge", "in", "not_in")
OPTIONS = ("sorted_name", "sorted_type", "offset", "limit", "lineage_type")
_PREFIXES = (("metric_", "metric"), ("metric/", "metric"), ("user_defined_", "user_defined"),
             ("user_defined/", "user_defined"))


def condition_key(key: str) -> tuple[str, str]:
    """``("field", name)``, ``("metric", name)`` or ``("user_defined", name)``; ValueError if unknown."""
    if key in FIELDS:
        return "field", key
    for prefix, kind in _PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            return kind, key[len(prefix):]
    raise ValueError(key)


def _bad(what: str, must: str, got: Any) -> LineageSearchConditionParamError:
    return LineageSearchConditionParamError(
        f"The {what} of filter_summary_lineage's search_condition must be {must}. Got {got!r} instead.")


def _check_value(key: str, kind: str, op: str, value: Any) -> None:
    what = f"value of {key!r} {op!r}"
    if op in ("in", "not_in"):
        if not isinstance(value, (list, tuple)):
            raise _bad(what, "a list or tuple", value)
        for item in value:
            _check_value(key, kind, "eq", item)
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "user_defined":
        if not (number or isinstance(value, str)):
            raise _bad(what, "a str, int or float", value)
    elif kind == "metric" or key in ("learning_rate", "loss"):
        if not number or (isinstance(value, float) and math.isnan(value)):
            raise _bad(what, "an int or float (not NaN)", value)
    elif key in INT_FIELDS:
        if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**63 - 1):
            raise _bad(what, "an int in the range [0, 2**63 - 1]", value)
    elif not isinstance(value, str):
        raise _bad(what, "a str", value)


def _int_option(condition: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    if name not in condition:
        return None
    value = condition[name]
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise _bad(f"{name!r}", f"an int in the range [{low}, {high}]", value)
    return value


def check_search_condition(condition: Any, base: str) -> dict[str, Any]:
    """Validate ``search_condition`` and normalise it (``summary_dir`` values become ``"./rel"``)."""
    if condition is None:
        condition = {}
    if not isinstance(condition, Mapping):
        raise LineageSearchConditionParamError(
            "The 'search_condition' parameter of filter_summary_lineage must be a dict or None. "
            f"Got {type(condition).__name__} instead.")
    fields: dict[str, dict[str, Any]] = {}
    for key, ops in condition.items():
        if key in OPTIONS:
            continue
        try:
            kind, _ = condition_key(key) if isinstance(key, str) else condition_key("")
        except ValueError:
            raise _bad("field names", f"among {', '.join(FIELDS)}, metric_<name>, user_defined_<name> or the "
                       f"options {', '.join(OPTIONS)}", key) from None
        if not isinstance(ops, Mapping) or not ops:
            raise _bad(f"condition of {key!r}", "a non-empty dict of operator to value, e.g. {'ge': 0.9}", ops)
        for op, value in ops.items():
            if op not in OPERATORS:
                raise _bad(f"operator of {key!r}", f"one of {', '.join(OPERATORS)}", op)
            if kind == "field" and key in STR_FIELDS and op not in ("eq", "in", "not_in"):
                raise _bad(f"operator of {key!r} (a str field)", "one of eq, in, not_in", op)
            _check_value(key, kind, op, value)
        if key == "summary_dir":
            ops = {op: ([_relative(v, base) for v in value] if op in ("in", "not_in") else _relative(value, base))
                   for op, value in ops.items()}
        fields[key] = dict(ops)

    sorted_name = condition.get("sorted_name")
    if "sorted_name" in condition:
        try:
            if not isinstance(sorted_name, str):
                raise ValueError(sorted_name)
            condition_key(sorted_name)
        except ValueError:
            raise _bad("'sorted_name'", f"a field among {', '.join(FIELDS)}, metric_<name> or user_defined_<name>",
                       sorted_name) from None
    sorted_type = condition.get("sorted_type")
    if "sorted_type" in condition:
        if "sorted_name" not in condition:
            raise _bad("'sorted_type'", "given together with 'sorted_name'", sorted_type)
        if sorted_type not in ("ascending", "descending", None):
            raise _bad("'sorted_type'", "'ascending', 'descending' or None", sorted_type)
    offset = _int_option(condition, "offset", 0, 100000)
    limit = _int_option(condition, "limit", 1, 100)
    if offset is not None and limit is None:
        limit = 10  # MindInsight's page size when only the page number is given
    return {"fields": fields, "sorted_name": sorted_name, "sorted_type": sorted_type, "offset": offset or 0,
            "limit": limit, "lineage_type": _lineage_type(condition.get("lineage_type"))}


def _lineage_type(value: Any) -> tuple[str, ...]:
    """Which parts to return: a str per the seed ("model": all), or MindInsight 2.x's {"eq"|"in": ...}."""
    if value is None or value == "model":
        return ("model", "dataset")
    if value == "dataset":
        return ("dataset",)
    if isinstance(value, Mapping) and len(value) == 1:
        op, types = next(iter(value.items()))
        types = [types] if op == "eq" else types if op == "in" else None
        if isinstance(types, (list, tuple)) and types and all(t in ("model", "dataset") for t in types):
            return tuple(types)
    raise _bad("'lineage_type'", "'model', 'dataset', None, or {'eq': type} / {'in': [types]}", value)


def _relative(value: str, base: str) -> str:
    """A summary_dir condition value as a run id: absolute paths under the base become "./rel"."""
    if os.path.isabs(value):
        rel = os.path.relpath(os.path.realpath(value), base)
        if not rel.startswith(".."):
            return "./" if rel == "." else "./" + rel.replace(os.sep, "/")
    return value


# ------------------------------------------------------------------------------------ querying
def _list_runs(base: str) -> list[tuple[str, str]]:
    """``(relative "./x", absolute path)`` of summary directories under ``base``, recursively, capped."""
    runs: list[tuple[str, str]] = []
    for root, dirs, _files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        try:
            has_summary = bool(summary_files(root))
        except OSError:
            has_summary = False
        if has_summary:
            if len(runs) == MAX_SUMMARY_DIRS:
                logger.warning("More than %d summary directories under %s: only the first %d (in path order) "
                               "are searched; the others, from %s on, are left out.",
                               MAX_SUMMARY_DIRS, base, MAX_SUMMARY_DIRS, root)
                break
            rel = os.path.relpath(root, base)
            runs.append(("./" if rel == "." else "./" + rel.replace(os.sep, "/"), root))
    return runs


def _flat(summary_dir: str, lineage: dict[str, Any]) -> dict[str, Any]:
    """The filterable fields of one run (MindInsight's ``model_lineage`` plus summary_dir/dataset_graph)."""
    flat: dict[str, Any] = {"summary_dir": summary_dir}
    for name, (part, key) in FIELDS.items():
        if part is not None:
            flat[name] = lineage[part].get(key)
    flat["metric"] = lineage["metric"]
    flat["user_defined"] = lineage["user_defined"]
    flat["dataset_graph"] = lineage["dataset_graph"]
    return flat


def _value(flat: dict[str, Any], key: str) -> Any:
    kind, name = condition_key(key)
    if kind == "field":
        return flat.get(name)
    return (flat.get(kind) or {}).get(name)


def _matches(op: str, expected: Any, actual: Any) -> bool:
    if op in ("in", "not_in"):
        return (actual in expected) == (op == "in")
    if actual is None and op != "eq":
        return False
    try:
        return bool(getattr(operator, op)(actual, expected))
    except TypeError:
        return False


def _cmp(a: Any, b: Any) -> int:
    """None first, then by value; values of different types by type name (as MindInsight)."""
    if a is None or b is None:
        return (a is not None) - (b is not None)
    try:
        return (a > b) - (a < b)
    except TypeError:
        ta, tb = type(a).__name__, type(b).__name__
        return (ta > tb) - (ta < tb)


def _type_name(values: set[str]) -> str:
    if len(values) == 1:
        return next(iter(values))
    return "float" if values <= {"int", "float"} else "mixed"


def filter_summary_lineage(summary_base_dir: str | os.PathLike,
                           search_condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Filter, sort and page the lineage of every run under a base directory.

    Parameters
    ----------
    summary_base_dir : str or os.PathLike
        The base directory; runs are found recursively below it (at most
        ``MAX_SUMMARY_DIRS`` = 999 summary directories; a warning says when it cuts).
    search_condition : dict, default=None
        Field conditions and options. Fields: ``summary_dir`` (``"./run1"`` or an
        absolute path under the base), ``loss_function``, ``train_dataset_path``,
        ``train_dataset_count``, ``test_dataset_path``, ``test_dataset_count``,
        ``network``, ``optimizer``, ``learning_rate``, ``epoch``, ``batch_size``,
        ``device_num``, ``loss``, ``model_size``, ``dataset_mark``, ``metric_<name>``
        (also ``metric/<name>``) and ``user_defined_<name>`` (also
        ``user_defined/<name>``); each maps to ``{op: value}`` with ops ``eq``, ``lt``,
        ``gt``, ``le``, ``ge``, ``in``, ``not_in`` (all must hold). Options:
        ``sorted_name`` (a field), ``sorted_type`` ("ascending"/"descending"),
        ``offset`` (page number, [0, 100000]), ``limit`` (page size, [1, 100]; 10
        when only ``offset`` is given), ``lineage_type`` ("model": everything,
        "dataset": only the dataset graph).

    Returns
    -------
    dict
        ``{"customized": {label: {"label", "required", "type"}}, "object": [{"summary_dir":
        "./run1", "model_lineage": {...}, "dataset_graph": {...}, "added_info": {}}, ...],
        "count": number of matching runs before paging}``.

    Raises
    ------
    LineageSearchConditionParamError
        If ``search_condition`` is invalid.
    LineageParamSummaryPathError
        If ``summary_base_dir`` is not an existing directory.
    LineageFileNotFoundError
        If no lineage file is found under ``summary_base_dir``.
    LineageQuerySummaryDataError
        If reading a lineage file fails.

    Examples
    --------
    >>> filter_summary_lineage("runs", {"optimizer": {"eq": "SGD"}, "metric_accuracy": {"ge": 0.9},
    ...                                  "sorted_name": "metric_accuracy", "sorted_type": "descending",
    ...                                  "limit": 5})                              # doctest: +SKIP
    """
    caller = "filter_summary_lineage"
    base = _check_dir(summary_base_dir, "summary_base_dir", caller)
    condition = check_search_condition(search_condition, base)

    loaded: list[tuple[dict[str, Any], float]] = []
    found_file = False
    for rel, path in _list_runs(base):
        try:
            lineage, update_time = _load_run(path)
        except LineageFileNotFoundError:
            continue
        except LineageSummaryParseException as exc:
            found_file = True
            logger.warning("%s", exc)
            continue
        found_file = True
        loaded.append((_flat(rel, lineage), update_time))
    if not found_file:
        raise LineageFileNotFoundError(f"There is no lineage file under {os.fspath(summary_base_dir)!r}.")

    runs = [flat for flat, _ in sorted(loaded, key=lambda item: (-item[1], item[0]["summary_dir"]))]
    # dataset_mark: runs with the same dataset graph share a mark, numbered "2", "3", ... newest run first,
    # as MindInsight's lineage API numbers them.
    graphs: list[Any] = []
    for flat in runs:
        if flat["dataset_graph"] not in graphs:
            graphs.append(flat["dataset_graph"])
        flat["dataset_mark"] = str(graphs.index(flat["dataset_graph"]) + 2)
    filters = [(key, ops) for key, ops in condition["fields"].items()]
    runs = [r for r in runs if all(_matches(op, v, _value(r, key)) for key, ops in filters for op, v in ops.items())]
    if condition["sorted_name"] is not None:
        name = condition["sorted_name"]
        runs.sort(key=functools.cmp_to_key(lambda a, b: _cmp(_value(a, name), _value(b, name))),
                  reverse=condition["sorted_type"] == "descending")
    count = len(runs)
    if condition["limit"] is not None:
        start = condition["offset"] * condition["limit"]
        runs = runs[start:start + condition["limit"]]

    customized: dict[str, dict[str, Any]] = {}
    for run in runs:
        for part, required in (("metric", True), ("user_defined", False)):
            for key, value in run[part].items():
                item = customized.setdefault(f"{part}/{key}", {"label": f"{part}/{key}", "required": required,
                                                               "type": set()})
                item["type"].add(type(value).__name__)
    for item in customized.values():
        item["type"] = _type_name(item["type"])

    objects = []
    for run in runs:
        obj: dict[str, Any] = {"summary_dir": run["summary_dir"]}
        if "model" in condition["lineage_type"]:
            obj["model_lineage"] = {name: run[name] for name in FIELDS if name != "summary_dir"}
            obj["model_lineage"].update(metric=run["metric"], user_defined=run["user_defined"])
        if "dataset" in condition["lineage_type"]:
            obj["dataset_graph"] = run["dataset_graph"]
        obj["added_info"] = {}
        objects.append(obj)
    return {"customized": customized, "object": objects, "count": count}

