"""Training-time side of the toolkit: summary files, callbacks, Model, SummaryCollector.

Public names are re-exported here from the layer subpackages (bottom to top):

- :mod:`collector.common` -- parameter validation, atomic file writes, the background
  writer thread (shared by every layer and by ``landscape`` and ``viz``);
- :mod:`collector.summary` -- the summary file format, ``SummaryRecord``, the reader and
  the summary operators;
- :mod:`collector.trajectory` -- interval checkpoints and ``train_metadata.json``;
- :mod:`collector.train` -- ``Model``, callbacks, metrics, ``ModelCheckpoint``;
- :mod:`collector.lineage` -- train/eval lineage and its queries;
- :mod:`collector.collect` -- ``SummaryCollector`` (with ``Model`` or a plain loop);
- :mod:`collector.integrations` -- ``LightningCollector`` and ``HFCollector``, the same
  collection from PyTorch Lightning and Hugging Face trainers (each framework imported
  only when its callback is used).

Names are imported on first use (PEP 562): ``import collector.common`` from ``viz``
does not load the summary format, torch's fx tracer or the protobuf classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "proto", "summary", "lineage", "InvalidParameterError",
    "SummaryRecord", "SummaryReader", "read_events", "summary_files", "SummaryReadError",
    "CorruptRecordError", "RecordIssue", "CheckpointError",
    "Callback", "RunContext", "LambdaCallback", "History", "LearningRateScheduler", "LossMonitor",
    "CheckpointConfig", "ModelCheckpoint", "Model", "Accuracy", "Loss", "Metric", "SummaryCollector",
    "TrainLineage", "EvalLineage", "get_summary_lineage", "filter_summary_lineage", "LineageError",
]

# Where each public name is defined: the subpackage that re-exports it.
_WHERE = {
    "InvalidParameterError": "collector.common",
    **dict.fromkeys(("SummaryRecord", "SummaryReader", "read_events", "summary_files", "SummaryReadError",
                     "CorruptRecordError", "RecordIssue"), "collector.summary"),
    **dict.fromkeys(("Callback", "RunContext", "LambdaCallback", "History", "LearningRateScheduler",
                     "LossMonitor", "CheckpointConfig", "ModelCheckpoint", "Model", "Accuracy", "Loss",
                     "Metric"), "collector.train"),
    "CheckpointError": "collector.trajectory",
    "SummaryCollector": "collector.collect",
    **dict.fromkeys(("TrainLineage", "EvalLineage", "get_summary_lineage", "filter_summary_lineage",
                     "LineageError"), "collector.lineage"),
}
_SUBMODULES = ("proto", "summary", "lineage", "common", "trajectory", "train", "collect", "integrations")


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"collector.{name}")
    else:
        raise AttributeError(f"module 'collector' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from collector import lineage, proto, summary
    from collector.collect import SummaryCollector
    from collector.common import InvalidParameterError
    from collector.lineage import (
        EvalLineage,
        LineageError,
        TrainLineage,
        filter_summary_lineage,
        get_summary_lineage,
    )
    from collector.summary import (
        CorruptRecordError,
        RecordIssue,
        SummaryReader,
        SummaryReadError,
        SummaryRecord,
        read_events,
        summary_files,
    )
    from collector.train import (
        Accuracy,
        Callback,
        CheckpointConfig,
        History,
        LambdaCallback,
        LearningRateScheduler,
        Loss,
        LossMonitor,
        Metric,
        Model,
        ModelCheckpoint,
        RunContext,
    )
    from collector.trajectory import CheckpointError
