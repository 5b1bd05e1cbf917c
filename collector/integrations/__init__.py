"""Collecting from the frameworks people train with: PyTorch Lightning and Hugging Face.

- :class:`LightningCollector` -- a ``lightning.pytorch.Callback`` for ``Trainer.fit``;
- :class:`HFCollector` -- a ``transformers.TrainerCallback`` for ``Trainer.train``.

Both drive one :class:`~collector.SummaryCollector` through its plain-loop API, so they
write the same files (MindInsight's format, the landscape checkpoints and
``train_metadata.json``). Each is loaded on first use (PEP 562) and needs its framework
then; importing this package needs neither.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["LightningCollector", "HFCollector"]

# optional dependencies: each framework is imported only when its callback is asked for
_WHERE = {"LightningCollector": "collector.integrations._lightning",
          "HFCollector": "collector.integrations._transformers"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'collector.integrations' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from collector.integrations._lightning import LightningCollector
    from collector.integrations._transformers import HFCollector
