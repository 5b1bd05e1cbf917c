"""The integrations are optional: importing the packages (and collecting without them) loads no framework."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_packages_load_no_framework(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        import collector, collector.integrations, collector.summary, landscape, viz
        from collector import SummaryCollector
        from landscape.examples import MLP
        import torch
        net = MLP()
        with SummaryCollector({str(tmp_path)!r}, collect_freq=1) as sc:
            sc.begin_train(network=net, epoch_num=1)
            sc.step(torch.tensor(1.0))
            sc.end()
        viz.load_landscapes  # the io layer
        loaded = sorted(m for m in ("lightning", "pytorch_lightning", "transformers", "tensorboard", "accelerate")
                        if m in sys.modules)
        print(loaded)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_missing_framework_is_named(monkeypatch):
    """Asking for a callback whose framework is not installed says which package to install."""
    import builtins

    import pytest

    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    monkeypatch.delitem(sys.modules, "collector.integrations._transformers", raising=False)
    import collector.integrations as ci

    monkeypatch.delitem(vars(ci), "HFCollector", raising=False)  # (hasattr would import it)
    with pytest.raises(ImportError, match="HFCollector needs Hugging Face transformers.*pip install transformers"):
        ci.HFCollector  # noqa: B018


def test_tensorboard_dir_without_tensorboard_says_so(tmp_path, monkeypatch):
    import importlib.util

    import pytest

    from collector import SummaryCollector

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with pytest.raises(ImportError, match="'tensorboard_dir' parameter of SummaryCollector needs the 'tensorboard'"):
        SummaryCollector(tmp_path / "run", tensorboard_dir=tmp_path / "tb")
    assert list(tmp_path.iterdir()) == []  # refused before touching the file system
