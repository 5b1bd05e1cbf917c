"""Spreading chunks of points over devices: worker processes, joblib backends, torch.distributed.

The other subpackages use one thing: an :class:`Executor` (``with executor(...) as ex``),
whatever runs the points underneath.
"""

from landscape.execution._devices import Chunk
from landscape.execution._executor import Executor, check_devices, check_placed_devices, executor

__all__ = ["Executor", "executor", "check_devices", "check_placed_devices", "Chunk"]
