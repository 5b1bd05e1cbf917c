"""Model lineage: record train/eval lineage and query it across runs (MindInsight's ``lineagemgr``).

Record with the :class:`TrainLineage` / :class:`EvalLineage` callbacks (or
:class:`collector.SummaryCollector`), then ask which hyper-parameters gave which results::

    from collector.lineage import filter_summary_lineage
    best = filter_summary_lineage("runs", {"sorted_name": "metric_accuracy",
                                           "sorted_type": "descending", "limit": 3})

The exceptions keep the names MindInsight gives them; :class:`LineageError` (alias
``MindInsightException``) is their base, and the parameter errors are also
:class:`collector.InvalidParameterError` (so ``ValueError`` and ``TypeError``).
"""

from collector.lineage import _callbacks as _lineage
from collector.lineage._build import dataset_graph, dataset_path
from collector.lineage._callbacks import *  # noqa: F403 - the callbacks and MindInsight's exception names
from collector.lineage._query import (
    FILTER_KEYS,
    INT_FIELDS,
    MAX_SUMMARY_DIRS,
    condition_key,
    filter_summary_lineage,
    get_summary_lineage,
)

__all__ = [*_lineage.__all__, "get_summary_lineage", "filter_summary_lineage", "FILTER_KEYS", "MAX_SUMMARY_DIRS",
           "INT_FIELDS", "condition_key", "dataset_graph", "dataset_path"]
