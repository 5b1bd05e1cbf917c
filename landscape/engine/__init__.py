"""The evaluation engine: the loss (and metrics) at many points of a plane, on one device."""

from landscape.engine._data import Samples, collate, collect
from landscape.engine._engine import Engine, EngineSpec, activation_elements, is_batch_metric, plan
from landscape.engine._task import (
    HuggingFace,
    Supervised,
    Task,
    as_task,
    batch_size,
    classification,
    regression,
    slice_batch,
    to_device,
)

__all__ = ["Engine", "EngineSpec", "plan", "activation_elements", "is_batch_metric", "Samples", "collect", "collate",
           "Task", "Supervised", "HuggingFace", "classification", "regression", "as_task", "to_device",
           "batch_size", "slice_batch"]
