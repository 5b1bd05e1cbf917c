"""Build the lineage messages SummaryCollector records (TrainLineage, EvaluationLineage, ...).

Field by field what MindSpore 2.10 fills, so MindInsight's lineage page shows our runs
like MindSpore's (see the fixture ``mindspore-2.10-mlp-digits``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import torch

from collector import proto
from collector.common import unwrap_module

# Re-exported: packing a dict as a UserDefinedInfo is the summary layer's (SummaryRecord needs it).
from collector.summary import custom_lineage
from collector.train import run_network

__all__ = ["train_lineage", "eval_lineage", "dataset_graph", "custom_lineage", "dataset_size", "dataset_path"]


def _class_name(obj: Any) -> str:
    return "" if obj is None else type(obj).__name__


def dataset_path(dataset: Any) -> str | None:
    """The directory or file a dataset reads from, when it says (``root``, ``path``, ...)."""
    for holder in (dataset, getattr(dataset, "dataset", None)):
        if holder is None:
            continue
        for attr in ("root", "path", "dataset_dir", "data_dir", "root_dir"):
            value = getattr(holder, attr, None)
            if isinstance(value, (str, os.PathLike)):
                return os.fspath(value)
    return None


def dataset_size(dataset: Any, batch_num: int | None, batch_size: int | None) -> int | None:
    """Samples per epoch: what the DataLoader's sampler yields, minus a dropped last batch."""
    inner = getattr(dataset, "dataset", None)
    if inner is not None and batch_size:
        sampler = getattr(dataset, "sampler", None)
        n = None
        for source in (sampler, inner):
            try:
                n = len(source)  # type: ignore[arg-type]  # sampler may be None: the TypeError below
                break
            except TypeError:
                continue
        if n is not None:
            return (n // batch_size) * batch_size if getattr(dataset, "drop_last", False) else n
    if batch_num and batch_size:
        return batch_num * batch_size
    return None


def _first_loss(outputs: Any) -> float | None:
    if outputs is None:
        return None
    if isinstance(outputs, (tuple, list)):
        outputs = outputs[0]
    if isinstance(outputs, torch.Tensor):
        return float(outputs.detach().float().mean())
    return float(outputs)


def _learning_rate(optimizer: Any) -> float | None:
    groups = getattr(optimizer, "param_groups", None)
    if not groups:
        return None
    lr = groups[0].get("lr")
    return float(lr) if lr is not None else None


def train_lineage(cb_params: Mapping[str, Any], *, learning_rate: float | None, ckpt_path: str | None) -> Any:
    """A TrainLineage from the run-context arguments at the end of training."""
    msg = proto.TrainLineage()
    hp = msg.hyper_parameters
    optimizer = cb_params.get("optimizer")
    if optimizer is not None:
        hp.optimizer = _class_name(optimizer)
    lr = learning_rate if learning_rate is not None else _learning_rate(optimizer)
    if lr is not None:
        hp.learning_rate = lr
    if cb_params.get("loss_fn") is not None:
        hp.loss_function = _class_name(cb_params["loss_fn"])
    if cb_params.get("epoch_num") is not None:
        hp.epoch = int(cb_params["epoch_num"])
    hp.parallel_mode = str(cb_params.get("parallel_mode", "stand_alone"))
    hp.device_num = int(cb_params.get("device_number", 1))
    if cb_params.get("batch_size"):
        hp.batch_size = int(cb_params["batch_size"])

    _fill_dataset(msg.train_dataset, "train_dataset", cb_params.get("train_dataset"), cb_params)

    network = run_network(cb_params)
    if network is not None:
        msg.algorithm.network = _class_name(unwrap_module(network))
    loss = _first_loss(cb_params.get("net_outputs"))
    if loss is not None:
        msg.algorithm.loss = loss

    # MindSpore writes the path as JSON ({"ckpt": path-or-null}); MindInsight shows it verbatim.
    msg.model.path = json.dumps({"ckpt": ckpt_path})
    if ckpt_path and os.path.exists(ckpt_path):
        msg.model.size = os.path.getsize(ckpt_path)
    elif network is not None:
        # No checkpoint file: the size the parameters and buffers take in memory.
        module = unwrap_module(network)
        msg.model.size = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    return msg


def eval_lineage(cb_params: Mapping[str, Any]) -> Any:
    """An EvaluationLineage: the metrics as JSON and the validation set's size and path."""
    msg = proto.EvaluationLineage()
    metrics = cb_params.get("metrics") or {}
    msg.metric = json.dumps({str(k): _jsonable(v) for k, v in metrics.items()})
    _fill_dataset(msg.valid_dataset, "valid_dataset", cb_params.get("valid_dataset"), cb_params)
    return msg


def _fill_dataset(target: Any, prefix: str, dataset: Any, cb_params: Mapping[str, Any]) -> None:
    """Set ``{prefix}_size`` and ``{prefix}_path`` of a TrainDataset/ValidDataset message."""
    size = dataset_size(dataset, cb_params.get("batch_num"), cb_params.get("batch_size"))
    if size is not None:
        setattr(target, f"{prefix}_size", int(size))
    path = dataset_path(dataset)
    if path:
        setattr(target, f"{prefix}_path", path)


def _jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def dataset_graph(dataset: Any) -> Any:
    """Describe a DataLoader as MindSpore describes its pipeline: a Batch op over the dataset.

    Other iterables become one node whose ``op_type`` is their class name.
    """
    graph = proto.DatasetGraph()
    batch_size = getattr(dataset, "batch_size", None)
    inner = getattr(dataset, "dataset", None)
    if inner is None or not hasattr(dataset, "num_workers"):
        graph.parameter.mapStr["op_type"] = _class_name(dataset)
        return graph
    param = graph.parameter
    param.mapStr["op_type"] = "Batch"
    if isinstance(batch_size, int):
        param.mapInt["batch_size"] = batch_size
    param.mapBool["drop_remainder"] = bool(getattr(dataset, "drop_last", False))
    param.mapInt["num_parallel_workers"] = int(getattr(dataset, "num_workers", 0))

    child = graph.children.add()
    cparam = child.parameter
    cparam.mapStr["op_type"] = _class_name(inner)
    cparam.mapInt["num_parallel_workers"] = int(getattr(dataset, "num_workers", 0))
    sampler = getattr(dataset, "sampler", None)
    cparam.mapBool["shuffle"] = isinstance(sampler, torch.utils.data.RandomSampler)
    try:
        cparam.mapInt["num_samples"] = len(inner)
    except TypeError:
        pass
    path = dataset_path(dataset)
    if path:
        cparam.mapStr["dataset_dir"] = path
    if sampler is not None:
        sp = child.sampler.operationParam
        sp.mapStr["sampler_name"] = _class_name(sampler)
        if isinstance(sampler, torch.utils.data.RandomSampler):
            sp.mapBool["replacement"] = bool(sampler.replacement)
        try:
            sp.mapInt["num_samples"] = len(sampler)
        except TypeError:
            pass
    return graph
