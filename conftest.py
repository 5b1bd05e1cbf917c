"""Collection of the doctests (``--doctest-modules``), and the test workers' OpenMP waiting.

A module that imports an optional framework at its top (Lightning, transformers,
tensorboard), and the tests' helper modules that do, are collected only where that
framework is installed; the test extra installs all of them, so CI collects everything.

Under pytest-xdist (``-n``, pyproject.toml) the workers share the CPUs, each with
PyTorch's threads: a thread spinning at the end of a kernel takes the core from another
worker's, so the workers wait passively (``OMP_WAIT_POLICY=PASSIVE``, read by libgomp
when torch is imported, after this file), as the ``landscape`` command does beside busy
processes (``landscape.threads``). The values are the same bits; a policy set by the
user is kept.
"""

from __future__ import annotations

import importlib.util
import os

if os.environ.get("PYTEST_XDIST_WORKER") and not (os.environ.get("OMP_WAIT_POLICY")
                                                  or os.environ.get("GOMP_SPINCOUNT")):
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def _missing(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is None for m in modules)


collect_ignore = []
if _missing("lightning", "pytorch_lightning"):
    collect_ignore += ["collector/integrations/_lightning.py", "tests/collector/integrations/_lit.py"]
if _missing("transformers"):
    collect_ignore.append("collector/integrations/_transformers.py")
if _missing("tensorboard"):
    collect_ignore += ["collector/summary/_tensorboard.py", "viz/tensorboard", "tests/collector/summary/_tb_compare.py"]
