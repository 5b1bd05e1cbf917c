"""``landscape lineage BASE_DIR``: filter, sort and print the lineage of the runs under a directory.

``--where`` takes ``FIELD OP VALUE`` (quote it for the shell), several times for AND::

    landscape lineage runs --where 'learning_rate>0.01' --where optimizer=SGD \\
        --where 'metric_accuracy>=0.9' --where 'batch_size in 32,64' --sort metric_accuracy --desc

OP is one of ``=`` (or ``==``), ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in`` and ``not in``
(comma-separated values). FIELD is one of filter_summary_lineage's fields (``optimizer``,
``learning_rate``, ``batch_size``, ``epoch``, ``loss``, ``network``, ``summary_dir``, ...),
``metric_<name>`` or ``user_defined_<name>``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

from collector.lineage import (
    INT_FIELDS,
    LineageFileNotFoundError,
    LineageParamSummaryPathError,
    LineageQuerySummaryDataError,
    LineageSearchConditionParamError,
    condition_key,
    filter_summary_lineage,
)

__all__ = ["run_lineage", "parse_where", "format_table", "WhereError"]

_OPS = {"=": "eq", "==": "eq", "!=": "not_in", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "in": "in",
        "not in": "not_in"}
_WHERE = re.compile(r"^\s*(?P<field>[A-Za-z_][\w/.\-]*?)\s*"
                    r"(?P<op>>=|<=|!=|==|=|>|<|\s+not\s+in\s+|\s+in\s+)\s*(?P<value>.*?)\s*$")
_CORE_COLUMNS = ("summary_dir", "network", "optimizer", "learning_rate", "batch_size", "epoch", "loss_function",
                 "loss", "train_dataset_count", "test_dataset_count", "model_size")


class WhereError(ValueError):
    """A ``--where`` expression that cannot be parsed."""


def _typed(field: str, text: str) -> Any:
    """The condition value for ``field``: int, float or str as filter_summary_lineage expects."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    kind, _ = condition_key(field)
    try:
        if kind == "field" and field in INT_FIELDS:
            return int(text)
        if kind == "metric" or field in ("learning_rate", "loss"):
            return float(text)
    except ValueError:
        raise WhereError(f"{field} needs a number; got {text!r}") from None
    if kind == "user_defined":
        for convert in (int, float):
            try:
                return convert(text)
            except ValueError:
                continue
    return text


def parse_where(expressions: list[str]) -> dict[str, dict[str, Any]]:
    """Turn ``--where`` expressions into filter_summary_lineage's field conditions.

    Examples
    --------
    >>> parse_where(["learning_rate>0.01", "batch_size in 32,64", "optimizer=SGD"])
    {'learning_rate': {'gt': 0.01}, 'batch_size': {'in': [32, 64]}, 'optimizer': {'eq': 'SGD'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for expr in expressions:
        m = _WHERE.match(expr)
        if not m or not m.group("value"):
            raise WhereError(f"--where {expr!r}: expected FIELD OP VALUE with OP one of "
                             "=, !=, <, <=, >, >=, in, not in (e.g. 'learning_rate>0.01', 'batch_size in 32,64')")
        field, op = m.group("field"), " ".join(m.group("op").split())
        try:
            condition_key(field)
        except ValueError:
            raise WhereError(f"--where {expr!r}: unknown field {field!r}; use optimizer, learning_rate, batch_size, "
                             "epoch, loss, network, summary_dir, ... or metric_<name> / user_defined_<name>") from None
        key = _OPS[op]
        try:
            if op in ("in", "not in", "!="):
                parts = [m.group("value")] if op == "!=" else m.group("value").split(",")
                value: Any = [_typed(field, p) for p in parts if p.strip()]
            else:
                value = _typed(field, m.group("value"))
        except WhereError as exc:
            raise WhereError(f"--where {expr!r}: {exc}") from None
        ops = out.setdefault(field, {})
        if key in ops:
            if key == "not_in":
                value = list(ops[key]) + list(value)
            else:
                raise WhereError(f"--where {expr!r}: {field} already has a {op!r} condition")
        ops[key] = value
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table of filter_summary_lineage's result (core columns that have a value, then metrics)."""
    rows = [{"summary_dir": o["summary_dir"], **o.get("model_lineage", {})} for o in result["object"]]
    columns = [c for c in _CORE_COLUMNS if any(r.get(c) is not None for r in rows) or c == "summary_dir"]
    extra = sorted(result.get("customized", {}), key=lambda k: (not k.startswith("metric/"), k))
    header = columns + [k.replace("/", "_", 1) for k in extra]
    table = [header]
    for r in rows:
        line = [_fmt(r.get(c)) for c in columns]
        for k in extra:
            part, name = k.split("/", 1)
            line.append(_fmt((r.get(part) or {}).get(name)))
        table.append(line)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def run_lineage(args: argparse.Namespace) -> int:
    """Run ``landscape lineage``: 0 on success, 1 when nothing can be read, 2 on bad usage."""
    def usage(message: str) -> int:
        print(f"landscape lineage: error: {message}", file=sys.stderr)
        return 2

    try:
        condition: dict[str, Any] = dict(parse_where(list(args.where or [])))
    except WhereError as exc:
        return usage(str(exc))
    if args.sort:
        condition["sorted_name"] = args.sort
        condition["sorted_type"] = "descending" if args.desc else "ascending"
    elif args.desc:
        return usage("--desc needs --sort FIELD")
    if args.limit is not None:
        condition["limit"] = args.limit
    if args.offset is not None:
        if args.limit is None:
            return usage("--offset needs --limit N")
        condition["offset"] = args.offset
    try:
        result = filter_summary_lineage(args.base_dir, condition)
    except (LineageSearchConditionParamError, LineageParamSummaryPathError) as exc:
        return usage(str(exc))
    except LineageFileNotFoundError as exc:
        print(f"landscape lineage: {exc}", file=sys.stderr)
        return 1
    except LineageQuerySummaryDataError as exc:
        print(f"landscape lineage: failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=False))
        return 0
    print(format_table(result))
    shown = len(result["object"])
    print(f"\n{shown} of {result['count']} matching run(s)" if shown != result["count"]
          else f"\n{result['count']} matching run(s)")
    return 0
