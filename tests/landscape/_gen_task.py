"""``--task`` functions for the ``landscape gen`` subprocess tests (resume, torchrun).

``LANDSCAPE_TEST_SLOW`` (seconds) makes every forward call sleep that long;
``LANDSCAPE_TEST_ONE_POINT=1`` evaluates one point per call (many small chunks), so a test
can stop a generation in the middle of a landscape; ``LANDSCAPE_TEST_FAIL_RANK=k`` makes
the forward of a point on torch.distributed rank k raise.
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

from tests.landscape._helpers import TinyMLP, make_data


class SlowMLP(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(float(os.environ.get("LANDSCAPE_TEST_SLOW", "0")))
        # a point's forward (the engine's run in inference mode), not the check of the data before any point
        if os.environ.get("LANDSCAPE_TEST_FAIL_RANK") == os.environ.get("RANK", "-") and \
                torch.is_inference_mode_enabled():
            raise RuntimeError("forward failed on purpose")
        return super().forward(x)


class _Model:
    loss_fn = nn.CrossEntropyLoss()


def task():
    if os.environ.get("LANDSCAPE_TEST_ONE_POINT") == "1":
        from landscape.engine import _planner as _evaluate
        _evaluate.CALL_BYTES = 0  # one point per call: many small chunks
    torch.manual_seed(0)
    x, y = make_data()
    return _Model(), SlowMLP(), [(x[i:i + 32], y[i:i + 32]) for i in range(0, len(x), 32)], None
