"""Summary values on the caller's thread: validate a value and take a private copy of it.

``SummaryRecord`` buffers *prepared values*, which its writer later packs
(:mod:`collector.summary._events`). By plugin:

* ``scalar``: a ``float``;
* ``image``, ``tensor``, ``histogram``: ``(array, bf16)``, a private numpy copy and whether
  the tensor was bfloat16 (its values travel as float32); a histogram of a CPU float
  tensor is ``(array, False, slab, row)`` instead, its copy being row ``row`` of ``slab``
  (:class:`collector.summary._slabs.SnapshotSlabs`);
* the message plugins: a private copy of the message.

The copy is taken at once because the caller (an optimizer step, say) may change the
value before the writer reads it; validating here makes a wrong value raise at the call.
Nothing here keeps state: the slabs are passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from collector.common import check_param
from collector.summary import _packing as packing
from collector.summary import _proto as proto
from collector.summary._slabs import SnapshotSlabs

logger = logging.getLogger(__name__)

__all__ = ["PLUGINS", "PLUGIN_SET", "TENSOR_PLUGINS", "MESSAGE_PLUGINS", "FLOAT_DTYPES", "prepare_value",
           "snapshot", "user_defined_info"]

#: Plugins whose value is a tensor, an array or a number.
TENSOR_PLUGINS = ("scalar", "image", "tensor", "histogram")
#: Plugins whose value is a message: plugin -> (message class name, file it goes to).
MESSAGE_PLUGINS = {
    "graph": ("GraphProto", "summary"),
    "train_lineage": ("TrainLineage", "lineage"),
    "eval_lineage": ("EvaluationLineage", "lineage"),
    "dataset_graph": ("DatasetGraph", "lineage"),
    "custom_lineage_data": ("UserDefinedInfo", "lineage"),
    "landscape": ("LossLandscape", "summary"),
}
#: Every plugin ``SummaryRecord.add_value`` accepts ("LANDSCAPE" is MindSpore's spelling of "landscape").
PLUGINS = TENSOR_PLUGINS + tuple(MESSAGE_PLUGINS) + ("LANDSCAPE",)
PLUGIN_SET = frozenset(PLUGINS)
#: Histograms of CPU tensors of these dtypes are copied into slab rows (the fast path).
FLOAT_DTYPES = frozenset((torch.float16, torch.float32, torch.float64))


def prepare_value(plugin: str, name: str, value: Any, slabs: SnapshotSlabs) -> Any:
    """Validate ``value`` for ``plugin`` and return a private copy of it (a prepared value).

    Parameters
    ----------
    plugin : str
        One of :data:`PLUGINS` other than "LANDSCAPE" (the caller maps it to "landscape").
    name : str
        The tag, used in error messages.
    value
        See :meth:`collector.SummaryRecord.add_value`.
    slabs : SnapshotSlabs
        Where a histogram of a CPU float tensor is copied.

    Raises
    ------
    TypeError, ValueError
        A value the plugin does not take, naming ``add_value(plugin, name)``.
    """
    if plugin == "scalar":  # fast paths: one number needs no numpy copy
        if type(value) is float:
            return value
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return float(value.item())
    elif plugin == "histogram" and isinstance(value, torch.Tensor) and value.dtype in FLOAT_DTYPES \
            and value.device.type == "cpu" and value.numel():
        # What to_numpy and the dtype check below come to for a CPU float tensor (the
        # parameters SummaryCollector collects at every collection), in fewer calls,
        # copied into a slab row.
        return snapshot(value.detach().numpy(), slabs)
    what = f"add_value({plugin!r}, {name!r})"
    if plugin in TENSOR_PLUGINS:
        arr, bf16 = packing.to_numpy(value, what=what)
        if plugin == "scalar":
            return packing.check_scalar(arr, tag=name)
        if plugin == "image":
            packing.check_image(arr, tag=name)
        if plugin == "histogram" and not np.issubdtype(arr.dtype, np.number) and arr.dtype != np.bool_:
            raise TypeError(f"{what}: a histogram needs numeric values, got dtype {arr.dtype}")
        if plugin == "histogram" and arr.size == 0:
            # MindSpore warns and records it; so do we (count 0, one empty bucket, min and max NaN).
            logger.warning("%s: the value is empty (shape %s); an empty histogram is recorded.", what,
                           tuple(arr.shape))
        return (arr, bf16)
    type_name, _ = MESSAGE_PLUGINS[plugin]
    cls = getattr(proto, type_name)
    if plugin == "custom_lineage_data" and isinstance(value, dict):
        value = user_defined_info(value)
    if plugin == "landscape" and not isinstance(value, cls) and hasattr(value, "to_proto"):
        value = value.to_proto()
    if not isinstance(value, cls):
        raise TypeError(
            f"{what}: the value must be a collector.proto.{type_name}"
            + (" or a dict of str to str/int/float" if plugin == "custom_lineage_data" else "")
            + (" or an object with to_proto() (landscape.Landscape)" if plugin == "landscape" else "")
            + f". Got {type(value).__name__} instead."
        )
    copy = cls()
    copy.CopyFrom(value)
    return copy


def snapshot(src: np.ndarray, slabs: SnapshotSlabs) -> tuple:
    """A histogram value: a private copy of ``src`` in the next free row of its slab.

    Returns ``(copy, False, slab, row index)``, or ``(copy, False)`` for an empty array
    (no slab holds zero-size rows).
    """
    if src.size == 0:
        return (src.copy(), False)
    row, slab, index = slabs.row(src)
    np.copyto(row, src.reshape(-1))  # outside the slabs' lock: the copy is the long part
    return (row.reshape(src.shape), False, slab, index)


def user_defined_info(data: Mapping[str, Any]) -> proto.UserDefinedInfo:
    """Validate a dict of custom lineage and pack it as MindSpore does (one ``user_info`` entry each).

    Raises
    ------
    collector.InvalidParameterError
        A key that is not a non-empty str, or a value that is not a str, int or float
        (naming ``custom_lineage_data[key]``).
    """
    for key, value in data.items():
        check_param("custom_lineage_data key", key, ["nonempty_str"], caller="SummaryRecord.add_value")
        check_param(f"custom_lineage_data[{key!r}]", value, [str, "int", float], caller="SummaryRecord.add_value")
    return packing.custom_lineage(data)
