"""The evaluation engine: the loss (and metrics) at many points of a plane, on one device.

What the other subpackages use: :class:`Engine` and its :class:`EngineSpec`, the samples
(:class:`Samples`, :func:`collect`; the one rule on a DataLoader's order, :func:`check_order`; their
SHA-256, :func:`samples_digest`) and the check of the task's loss on them before any point
(:func:`check_loss`), the evaluation plan (:class:`Plan`, :func:`choose_plan`)
and the ways a group of points runs (``BATCHINGS``), how the directions are kept
(``MEMORY_SETTINGS``, :func:`choose_memory`) and a point's tensors formed (:func:`point_value`;
all at once, :func:`point_values`), the engine's copy of a network's modules (:func:`network_at`),
the engine of an FSDP2 network sharded over a process group (:class:`ShardedEngine`,
:func:`is_sharded`), :func:`tune_malloc` for the processes the library owns, the heap room kept
between landscapes in the caller's process (:func:`kept_bytes`, :func:`release_room`), batch-norm
statistics estimated again at a point (:func:`reestimate_bn_statistics`, also for the curves of
:mod:`landscape.connect`), and the :class:`ProgressMeter` of long work (points, Lanczos iterations,
probes). Tasks live in :mod:`landscape.tasks`.
"""

from landscape.engine._activations import activation_elements
from landscape.engine._batching import BATCHINGS
from landscape.engine._check import CHECK_BATCH, check_loss
from landscape.engine._data import AUTO_SAMPLES, Samples, TooFewSamples, check_order, collate, collect
from landscape.engine._digest import hash_tensor, samples_digest, tensor_digest
from landscape.engine._engine import (
    CLAMPED,
    MEMORY_FORMATS,
    Engine,
    EngineSpec,
    Progress,
    WayRefused,
    is_batch_metric,
    is_point_metric,
    reestimate_bn_statistics,
)
from landscape.engine._heap import kept_bytes, release_room
from landscape.engine._malloc import tune_malloc
from landscape.engine._placement import keeps_placement, network_at
from landscape.engine._planner import PLAN_MODES, Plan, choose_plan, plan_key
from landscape.engine._points import MEMORY_SETTINGS, choose_memory, point_value, point_values
from landscape.engine._probe import shared_probes, verify_way
from landscape.engine._progress import PROGRESS_LOGGER, ProgressMeter
from landscape.engine._sharded import ShardedEngine, is_sharded

__all__ = ["Engine", "EngineSpec", "Progress", "Plan", "choose_plan", "plan_key", "verify_way", "shared_probes",
           "PLAN_MODES", "BATCHINGS", "MEMORY_FORMATS", "activation_elements", "is_batch_metric", "is_point_metric",
           "Samples", "collect", "collate", "tune_malloc", "release_room", "kept_bytes", "MEMORY_SETTINGS",
           "choose_memory", "point_value", "point_values", "network_at", "keeps_placement", "ShardedEngine",
           "is_sharded", "CLAMPED", "TooFewSamples", "ProgressMeter", "PROGRESS_LOGGER", "WayRefused",
           "reestimate_bn_statistics",

           "hash_tensor", "tensor_digest", "samples_digest", "check_loss", "CHECK_BATCH", "check_order",
           "AUTO_SAMPLES"]
