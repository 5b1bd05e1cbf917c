"""The summary-format messages (package ``mindspore.irpb``) as protobuf classes.

Use these to build values for ``SummaryRecord.add_value`` with the ``graph``,
``train_lineage``, ``eval_lineage``, ``dataset_graph``, ``custom_lineage_data`` and
``landscape`` plugins, or to inspect what :func:`collector.read_events` returns.

Examples
--------
>>> from collector import proto
>>> t = proto.TensorProto(dims=[2], data_type=proto.DT_FLOAT64, float_data=[1.0, 2.0])
>>> list(t.dims)
[2]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collector.summary._proto import *  # noqa: F403 - the message classes and DT_* constants
from collector.summary._proto import MESSAGES, DataType

if TYPE_CHECKING:
    from typing import Any

__all__ = [*MESSAGES, "DataType", *DataType]

if TYPE_CHECKING:
    # For type checkers: the names come from the .proto files at run time.
    def __getattr__(name: str) -> Any: ...
