"""A DataLoader as MindSpore's ``DatasetGraph``: the pipeline, last operation first.

MindSpore serializes a dataset pipeline from its last operation back to its source:
``Batch`` (batch_size, drop_remainder, num_parallel_workers) whose child is a ``Map``
(the transforms, as ``operations``) whose child is the source (``GeneratorDataset``,
``ImageFolderDataset``, ... with num_samples, shuffle and a ``sampler`` operation).
This module describes a ``torch.utils.data.DataLoader`` the same way:

* ``Batch``: ``batch_size``, ``drop_remainder`` (drop_last), ``num_parallel_workers``
  (num_workers), ``pin_memory``, ``prefetch_factor`` (when workers are used);
* ``Map`` (only when the dataset has transforms it can name): one operation per
  transform, ``tensor_op_name`` = the transform's class and its simple settings
  (``size``, ``mean``/``std`` as ``weights``, ...), and ``transform`` / ``target_transform``
  as the input columns;
* the source: ``op_type`` = the dataset's class, ``num_samples`` = its length,
  ``shuffle`` (a RandomSampler), ``dataset_dir`` when it has a root, and the
  ``sampler`` operation (``sampler_name``, ``num_samples``, ``replacement``);
  a ``Subset`` or ``ConcatDataset`` becomes a node (``Subset`` with its size,
  ``Concat``) over its dataset(s).

It extends ``collector.lineage._build.dataset_graph`` (same keys where both have them)
and falls back to that for anything that is not a DataLoader.
"""

from __future__ import annotations

import functools
import numbers
import types
from typing import Any

import torch
from torch.utils.data import ConcatDataset, DataLoader, RandomSampler, Subset

from collector import proto
from collector.lineage import dataset_graph as _basic_dataset_graph
from collector.lineage import dataset_path

__all__ = ["dataset_graph"]

_TRANSFORM_ATTRS = ("size", "degrees", "p", "padding", "fill", "interpolation", "scale", "ratio", "brightness",
                    "contrast", "saturation", "hue", "kernel_size", "sigma", "num_output_channels", "inplace")


def dataset_graph(loader: Any) -> Any:
    """Describe ``loader`` (a DataLoader, or any iterable) as a ``proto.DatasetGraph``.

    Parameters
    ----------
    loader : torch.utils.data.DataLoader or iterable
        Anything else than a DataLoader gets one node named after its class.

    Returns
    -------
    proto.DatasetGraph
    """
    if not isinstance(loader, DataLoader):
        return _basic_dataset_graph(loader)
    graph = proto.DatasetGraph()
    param = graph.parameter
    workers = int(loader.num_workers)
    param.mapStr["op_type"] = "Batch"
    if loader.batch_size is not None:
        param.mapInt["batch_size"] = int(loader.batch_size)
    elif getattr(loader, "batch_sampler", None) is not None:
        param.mapStr["batch_sampler"] = type(loader.batch_sampler).__name__
    param.mapBool["drop_remainder"] = bool(loader.drop_last)
    param.mapInt["num_parallel_workers"] = workers
    param.mapBool["pin_memory"] = bool(loader.pin_memory)
    if workers > 0 and loader.prefetch_factor is not None:
        param.mapInt["prefetch_factor"] = int(loader.prefetch_factor)
    collate = getattr(loader, "collate_fn", None)
    if collate is not None and getattr(collate, "__name__", "") != "default_collate":
        param.mapStr["per_batch_map"] = getattr(collate, "__qualname__", type(collate).__name__)

    child = graph.children.add()
    dataset = loader.dataset
    operations = _transform_operations(dataset)
    if operations:
        child.parameter.mapStr["op_type"] = "Map"
        child.parameter.mapInt["num_parallel_workers"] = workers
        columns = [attr for attr in ("transform", "target_transform", "transforms")
                   if getattr(dataset, attr, None) is not None]
        child.parameter.mapStrList["input_columns"].strValue.extend(columns)
        for op in operations:
            child.operations.add().CopyFrom(op)
        child = child.children.add()
    _describe_source(child, dataset, loader.sampler, workers)
    return graph


def _describe_source(node: Any, dataset: Any, sampler: Any, workers: int) -> None:
    param = node.parameter
    if isinstance(dataset, Subset):
        param.mapStr["op_type"] = "Subset"
        param.mapInt["num_samples"] = len(dataset.indices)
        _describe_source(node.children.add(), dataset.dataset, None, workers)
    elif isinstance(dataset, ConcatDataset):
        param.mapStr["op_type"] = "Concat"
        param.mapInt["num_samples"] = len(dataset)
        for part in dataset.datasets:
            _describe_source(node.children.add(), part, None, workers)
    else:
        param.mapStr["op_type"] = type(dataset).__name__
        param.mapInt["num_parallel_workers"] = workers
        try:
            param.mapInt["num_samples"] = len(dataset)
        except TypeError:  # an IterableDataset without __len__
            pass
        path = dataset_path(dataset)
        if path:
            param.mapStr["dataset_dir"] = path
    if sampler is None:
        return
    param.mapBool["shuffle"] = isinstance(sampler, RandomSampler)
    sp = node.sampler.operationParam
    sp.mapStr["sampler_name"] = type(sampler).__name__
    if isinstance(sampler, RandomSampler):
        sp.mapBool["replacement"] = bool(sampler.replacement)
    try:
        sp.mapInt["num_samples"] = len(sampler)
    except TypeError:
        pass


def _transform_operations(dataset: Any) -> list:
    """One ``Operation`` per nameable transform of ``dataset`` (torchvision style attributes)."""
    ops = []
    for attr in ("transform", "target_transform", "transforms"):
        transform = getattr(dataset, attr, None)
        if transform is None or not callable(transform):
            continue
        inner = getattr(transform, "transforms", None)  # Compose
        for t in inner if isinstance(inner, (list, tuple)) else [transform]:
            ops.append(_operation(t))
    return ops


def _operation(transform: Any) -> Any:
    op = proto.Operation()
    param = op.operationParam
    if isinstance(transform, (types.FunctionType, types.BuiltinFunctionType, functools.partial)):
        name = getattr(getattr(transform, "func", transform), "__name__", "function")
        name = "Lambda" if name == "<lambda>" else name
    else:
        name = type(transform).__name__
    param.mapStr["tensor_op_name"] = name
    for attr in _TRANSFORM_ATTRS:
        value = getattr(transform, attr, None)
        if value is None:
            continue
        if isinstance(value, bool):
            param.mapBool[attr] = value
        elif isinstance(value, numbers.Integral):
            param.mapInt[attr] = int(value)
        elif isinstance(value, numbers.Real):
            param.mapDouble[attr] = float(value)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, numbers.Integral) for v in value):
            op.size.extend(int(v) for v in value)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, numbers.Real) for v in value):
            param.mapStrList[attr].strValue.extend(str(v) for v in value)
        else:
            param.mapStr[attr] = str(value)
    for attr in ("mean", "std"):  # Normalize: MindSpore puts such lists in ``weights``
        value = getattr(transform, attr, None)
        if isinstance(value, torch.Tensor):
            value = value.flatten().tolist()
        if isinstance(value, (list, tuple)) and all(isinstance(v, numbers.Real) for v in value):
            op.weights.extend(float(v) for v in value)
            param.mapStrList[attr].strValue.extend(str(v) for v in value)
    return op
