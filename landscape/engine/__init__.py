"""The evaluation engine: the loss (and metrics) at many points of a plane, on one device."""

from landscape.engine._data import collate
from landscape.engine._engine import Engine, EngineSpec, activation_elements, plan

__all__ = ["Engine", "EngineSpec", "plan", "activation_elements", "collate"]
