"""What a user's process sees of the collector: importing it loads no compiler, and ordinary
training prints nothing (each in a fresh process, as a user runs it)."""

from __future__ import annotations

import subprocess
import sys

#: Imported by ``torch.compiler.disable`` (torch._dynamo pulls in sympy and FSDP): 1.7 s of a fresh
#: process on a 2-core CPU, which ``import collector`` took before the summary operators made it lazily.
HEAVY = ("torch._dynamo", "sympy", "torch.distributed.fsdp", "torch._inductor")

IMPORT = f"""
import sys
import collector
collector.SummaryCollector, collector.Model, collector.SummaryRecord
import collector.summary
print(*(m for m in {HEAVY!r} if m in sys.modules))
"""

# README "### 2. A plain PyTorch loop" on a batch-norm network and scikit-learn's breast-cancer data
PLAIN_LOOP = """
import sys
import torch
from sklearn.datasets import load_breast_cancer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from collector import SummaryCollector

x, y = load_breast_cancer(return_X_y=True)
x = torch.tensor(x, dtype=torch.float32)
loader = DataLoader(TensorDataset((x - x.mean(0)) / x.std(0), torch.tensor(y)), batch_size=64, shuffle=True)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(30, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
with SummaryCollector(sys.argv[1], collect_freq=10, collect_specified_data={
        "collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]]}}) as sc:
    sc.begin_train(network=net, optimizer=opt, loss_fn=loss_fn, train_dataset=loader, epoch_num=3)
    for epoch in range(3):
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(net(xb), yb)
            loss.backward()
            opt.step()
            sc.step(loss, inputs=xb)
        sc.epoch_end()
    sc.end()
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    # -W default: the warnings Python hides by default (DeprecationWarning, ...) are shown, as in a user's tests
    return subprocess.run([sys.executable, "-W", "default", "-c", code, *args], capture_output=True, text=True,
                          timeout=300, check=True)


def test_importing_the_collector_loads_no_compiler():
    """``torch.compiler.disable`` is applied to the summary operators on first need, not at import."""
    assert _run(IMPORT).stdout.split() == []


def test_training_a_batch_norm_network_in_a_plain_loop_prints_nothing(tmp_path):
    """The graph's shapes were propagated through torch.fx's ShapeProp, which printed a 24-line traceback for a
    batch norm given one sample; now no traceback, warning or log line reaches stderr."""
    done = _run(PLAIN_LOOP, str(tmp_path))
    assert done.stderr == ""
    assert (tmp_path / "ckpt_dir" / "train_metadata.json").is_file()
