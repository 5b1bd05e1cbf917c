"""Collection of the doctests (``--doctest-modules``): modules of the optional integrations.

A module that imports an optional framework at its top (Lightning, transformers,
tensorboard), and the tests' helper modules that do, are collected only where that
framework is installed; the test extra installs all of them, so CI collects everything.
"""

from __future__ import annotations

import importlib.util


def _missing(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is None for m in modules)


collect_ignore = []
if _missing("lightning", "pytorch_lightning"):
    collect_ignore += ["collector/integrations/_lightning.py", "tests/collector/integrations/_lit.py"]
if _missing("transformers"):
    collect_ignore.append("collector/integrations/_transformers.py")
if _missing("tensorboard"):
    collect_ignore += ["collector/summary/_tensorboard.py", "viz/tensorboard", "tests/collector/summary/_tb_compare.py"]
