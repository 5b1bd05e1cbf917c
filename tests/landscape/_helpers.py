"""Tiny models, data, trajectories and the plain reference loop for the landscape tests."""

from __future__ import annotations

import copy
import hashlib
import os

import numpy as np
import torch
from torch import nn


class TinyMLP(nn.Module):
    def __init__(self, d_in: int = 8, hidden: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def seeded_draw(seed: int, axis: int, name: str, shape: tuple[int, ...], *, block: int = 1 << 20,
                per_tensor: bool = False) -> torch.Tensor:
    """The documented draw of a random direction's tensor (axis 0: the first direction, 1: the second):
    its elements in C order cut into blocks of ``block`` (1,048,576) elements, block ``j`` standard normals
    (float32) from a CPU generator seeded by the first 63 bits (little-endian) of SHA-256("{seed}/{axis}/{name}")
    for ``j = 0``, of SHA-256("{seed}/{axis}/{name}\\0{j}") (a NUL between the name and the index) after it.
    ``per_tensor``: the draw of landscapes written before the blocks, one generator (the first) for it all."""
    def seed63(key: str) -> int:
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1

    numel = int(np.prod(shape, dtype=np.int64))
    if per_tensor or numel <= block:
        gen = torch.Generator().manual_seed(seed63(f"{seed}/{axis}/{name}"))
        return torch.randn(tuple(shape), generator=gen, dtype=torch.float32)
    parts = []
    for j, lo in enumerate(range(0, numel, block)):
        key = f"{seed}/{axis}/{name}" if j == 0 else f"{seed}/{axis}/{name}\0{j}"
        parts.append(torch.randn(min(block, numel - lo), generator=torch.Generator().manual_seed(seed63(key))))
    return torch.cat(parts).reshape(shape)


def make_data(n: int = 96, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return x, y


def train_trajectory(net: nn.Module, x: torch.Tensor, y: torch.Tensor, n_ckpt: int = 6,
                     steps: int = 4) -> list[dict]:
    opt = torch.optim.SGD(net.parameters(), lr=0.3, momentum=0.5)
    out = []
    for _ in range(n_ckpt):
        net.train()
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
        out.append({k: v.detach().clone() for k, v in net.state_dict().items()})
    return out


def plain_loss(net: nn.Module, state: dict, loader, num_samples: int, loss_fn=None, *, train: bool = False) -> float:
    """The independent reference: load_state_dict and a forward per point (``train``: in train mode, batch
    norm on each batch's own statistics)."""
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    net.load_state_dict(state)
    net.train(train)
    total, seen = 0.0, 0
    with torch.no_grad():
        for xb, yb in loader:
            take = min(len(xb), num_samples - seen)
            if take <= 0:
                break
            total += float(loss_fn(net(xb[:take]), yb[:take])) * take
            seen += take
    return total / seen


def point_state(centre: dict, names: list[str], v: dict, w: dict, a: float, b: float) -> dict:
    sd = {k: t.clone() for k, t in centre.items()}
    for n in names:
        sd[n] = centre[n].float() + float(a) * v[n] + float(b) * w[n]
    return sd




def children(pid: int) -> list[int]:
    """Child process ids of ``pid`` (every thread's children, from /proc)."""
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as fh:
            kids += [int(k) for k in fh.read().split()]
    return kids


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class FakeModel:  # duck-typed collector.Model
    def __init__(self, network, loss_fn):
        self.network, self.loss_fn, self.optimizer, self.metrics, self.eval_network = network, loss_fn, None, None, None


def tiny_callback(metrics: dict | None = None):
    """A ``callback_fn`` for SummaryLandscape: TinyMLP on make_data(), batches of 16."""
    net = TinyMLP()
    x, y = make_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    return FakeModel(net, nn.CrossEntropyLoss()), net, loader, dict(metrics or {})


def usage_error(argv: list[str], capsys) -> str:
    """``landscape ARGV``'s standard error, asserting exit code 2 (a usage error, argparse's included)."""
    from landscape.cli._main import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    return err


def naive_in_place(net: nn.Module, names: list[str], v: list[torch.Tensor], w: list[torch.Tensor], xs, ys,
                   loss_at) -> np.ndarray:
    """A copy of ``net`` moved in place to every point of the grid ``xs`` x ``ys``: ``(c + b w) + a v`` in
    float32 (each term added with one rounding, ``torch.add(..., alpha=)``) on the parameter's device,
    rounded once to its dtype; a bfloat16 or float16 parameter's directions rounded to its dtype first
    (they are held so). ``loss_at(model)``: the loss at the point."""
    model = copy.deepcopy(net).eval()
    params = dict(model.named_parameters())
    centre = [params[n].detach().clone() for n in names]
    out = np.empty((len(ys), len(xs)))
    with torch.no_grad():
        for i, b in enumerate(ys):
            for j, a in enumerate(xs):
                for n, c, dv, dw in zip(names, centre, v, w):
                    dv, dw = dv.to(c.device), dw.to(c.device)
                    if c.dtype in (torch.bfloat16, torch.float16):  # directions held in the model's dtype
                        dv, dw = dv.to(c.dtype), dw.to(c.dtype)
                    point = torch.add(torch.add(c.float(), dw, alpha=float(b)), dv, alpha=float(a))
                    params[n].copy_(point.to(c.dtype))
                out[i, j] = float(loss_at(model))
    return out
