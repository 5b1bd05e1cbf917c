"""SummaryCollector's parameter checks (``collect_specified_data``, ``custom_lineage_data``, ...)."""

from __future__ import annotations

import re
from typing import Any

from collector.common import (
    InstanceOf,
    InvalidParameterError,
    Options,
    check_param,
)
from collector.trajectory import validate_collect_landscape

__all__ = ["check_specified", "check_custom_lineage", "check_export_options", "BOOL_KEYS", "DEFAULTS"]

BOOL_KEYS = ("collect_metric", "collect_graph", "collect_train_lineage", "collect_eval_lineage",
             "collect_input_data", "collect_dataset_graph")
DEFAULTS: dict[str, Any] = {**dict.fromkeys(BOOL_KEYS, True), "histogram_regular": None, "collect_landscape": None}


def check_specified(data: Any, keep_default_action: bool, caller: str) -> dict[str, Any]:
    """Validate ``collect_specified_data``; return every key filled in (plus the private ``_histograms``)."""
    name = "collect_specified_data"
    check_param(name, data, [None, InstanceOf(dict, description="a dict")], caller=caller)
    data = data or {}
    unknown = [k for k in data if k not in DEFAULTS]
    if unknown:
        raise InvalidParameterError(
            f"The '{name}' parameter of {caller} has unknown key(s) {unknown}; the accepted keys are "
            f"{list(DEFAULTS)}. Got {data!r} instead."
        )
    out: dict[str, Any] = dict(DEFAULTS) if keep_default_action else dict.fromkeys(BOOL_KEYS, False)
    if not keep_default_action:
        # Only what was specified is collected: no histograms and no landscape by default.
        out["histogram_regular"] = None
        out["collect_landscape"] = None
        out["_histograms"] = "histogram_regular" in data
    else:
        out["_histograms"] = True
    for key in BOOL_KEYS:
        if key in data:
            out[key] = check_param(f"{name}[{key!r}]", data[key], ["boolean"], caller=caller)
    if "histogram_regular" in data:
        regular = check_param(f"{name}['histogram_regular']", data["histogram_regular"], [None, "nonempty_str"],
                              caller=caller)
        if regular is not None:
            try:
                re.compile(regular)
            except re.error as exc:
                raise InvalidParameterError(
                    f"The '{name}[{'histogram_regular'!r}]' parameter of {caller} must be a "
                    f"valid regular expression or None. Got {regular!r} instead ({exc})."
                ) from None
        out["histogram_regular"] = regular
    if data.get("collect_landscape") is not None:
        out["collect_landscape"] = validate_collect_landscape(
            data["collect_landscape"], caller, name=f"{name}['collect_landscape']")
    return out


def check_custom_lineage(data: Any, caller: str) -> dict[str, Any] | None:
    """Validate ``custom_lineage_data``: str keys, str/int/float values (bool refused)."""
    check_param("custom_lineage_data", data, [None, InstanceOf(dict, description="a dict")], caller=caller)
    if data is None:
        return None
    for key, value in data.items():
        check_param("custom_lineage_data key", key, ["nonempty_str"], caller=caller)
        # What UserDefinedInfo can hold (and MindSpore accepts); bool is refused as a likely mistake.
        check_param(f"custom_lineage_data[{key!r}]", value,
                    [InstanceOf(str, int, float, description="a str, an int or a float")], caller=caller,
                    hint="MindInsight's lineage page shows str, int and float values only.")
    return dict(data)


def check_export_options(options: Any, caller: str) -> dict | None:
    """Validate ``export_options`` before SummaryRecord sees it (so nothing is written on error)."""
    check_param("export_options", options, [None, InstanceOf(dict, description="a dict")], caller=caller)
    for key, value in (options or {}).items():
        check_param("export_options key", key, [Options(("tensor_format",))], caller=caller)
        check_param(f"export_options[{key!r}]", value, [Options(("npy",)), None], caller=caller)
    return dict(options) if options else None

