"""The evaluation engine: the loss (and metrics) at many points of a plane, on one device.

What the other subpackages use: :class:`Engine` and its :class:`EngineSpec`, the samples
(:class:`Samples`, :func:`collect`), the evaluation plan (:class:`Plan`, :func:`choose_plan`)
and the ways a group of points runs (``BATCHINGS``), and :func:`tune_malloc` for the processes
the library owns. Tasks live in :mod:`landscape.tasks`.
"""

from landscape.engine._batching import BATCHINGS
from landscape.engine._data import Samples, collate, collect
from landscape.engine._engine import MEMORY_FORMATS, Engine, EngineSpec, Progress, is_batch_metric, is_point_metric
from landscape.engine._malloc import tune_malloc
from landscape.engine._planner import PLAN_MODES, Plan, activation_elements, choose_plan, plan_key, verify_way

__all__ = ["Engine", "EngineSpec", "Progress", "Plan", "choose_plan", "plan_key", "verify_way", "PLAN_MODES",
           "BATCHINGS", "MEMORY_FORMATS", "activation_elements", "is_batch_metric", "is_point_metric", "Samples",
           "collect", "collate", "tune_malloc"]
