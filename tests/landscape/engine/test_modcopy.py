"""The engine's copy of the caller's modules is ``copy.deepcopy``'s copy (landscape/engine/_modcopy.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from landscape.engine._modcopy import copy_modules
from landscape.engine._placement import network_at
from landscape.examples import MLP, DigitsResNet


class _Odd(nn.Module):
    """State deepcopy must copy: a list, a dict of tensors, a non-persistent buffer, a tied weight,
    a tuple holding a tensor, a hook, and a child that copies itself its own way."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.b.weight = self.a.weight  # tied
        self.seen: list[int] = []
        self.extra = {"scale": torch.ones(4)}
        self.pair = (torch.zeros(4), 3)
        self.register_buffer("mask", torch.ones(4), persistent=False)
        self.custom = _OwnCopy()
        self.a.register_forward_hook(lambda m, i, o: None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(1)
        return self.custom(self.b(self.a(x) * self.extra["scale"] * self.mask) + self.pair[0])


class _OwnCopy(nn.Module):
    copies = 0

    def __deepcopy__(self, memo: dict) -> _OwnCopy:
        type(self).copies += 1
        return _OwnCopy()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class _Scale(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return 2 * w


def _networks() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    weight_param = nn.Linear(4, 4)
    parametrize.register_parametrization(weight_param, "weight", _Scale())  # its class defines __deepcopy__
    return {
        "mlp": MLP(),
        "resnet20": DigitsResNet(20, 16).eval(),
        "transformer": nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2).eval(),
        "lstm": nn.LSTM(8, 16, num_layers=2, batch_first=True),
        "odd": _Odd(),
        "parametrized": nn.Sequential(weight_param, nn.ReLU()),
    }


_INPUTS = {"mlp": (4, 64), "resnet20": (4, 1, 8, 8), "transformer": (2, 5, 16), "lstm": (2, 5, 8), "odd": (3, 4),
           "parametrized": (3, 4)}


def _memo(net: nn.Module) -> dict[int, Any]:
    """What network_at gives the copy: a parameter of its own over each tensor (tied ones once)."""
    memo: dict[int, Any] = {}
    for p in net.parameters():
        memo.setdefault(id(p), nn.Parameter(p.detach(), requires_grad=False))
    return memo


def _containers(obj: Any, seen: set[int]) -> set[int]:
    """The ids of the dicts, lists and sets reachable from ``obj``'s modules' state."""
    found: set[int] = set()
    stack = [obj]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, nn.Module):
            stack.extend(vars(x).values())
        elif isinstance(x, (dict, list, set, tuple)):
            if not isinstance(x, tuple):
                found.add(id(x))
            stack.extend(x.values() if isinstance(x, dict) else x)
    return found


def _outputs(net: nn.Module, name: str) -> Any:
    x = torch.randn(*_INPUTS[name], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = net(x)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", list(_INPUTS))
def test_the_copy_is_deepcopys(name: str) -> None:
    net = _networks()[name]
    ours, theirs = copy_modules(net, _memo(net)), copy.deepcopy(net, _memo(net))
    # the same tree: module types and names, each module's attributes and their values
    assert [(k, type(m)) for k, m in ours.named_modules()] == [(k, type(m)) for k, m in theirs.named_modules()]
    for (_, a), (_, b) in zip(ours.named_modules(), theirs.named_modules()):
        assert sorted(vars(a)) == sorted(vars(b))
        for key, value in vars(a).items():
            other = vars(b)[key]
            if isinstance(value, (int, float, str, bool, tuple)) and not any(isinstance(v, torch.Tensor)
                                                                             for v in (value if isinstance(value, tuple) else ())):
                assert value == other, key
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    for (k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert torch.equal(a, b), k
    # nothing mutable shared with the caller's network, and the outputs are the network's
    assert not _containers(ours, set()) & _containers(net, set())
    torch.testing.assert_close(_outputs(ours, name), _outputs(net, name), rtol=0, atol=0)


def test_the_memo_is_used_and_ties_stay_one_parameter() -> None:
    net = _Odd()
    memo = _memo(net)
    ours = copy_modules(net, memo)
    assert ours.a.weight is memo[id(net.a.weight)] and ours.b.weight is ours.a.weight
    assert ours.a.bias is memo[id(net.a.bias)]
    # tensors not in the memo are copies (a non-persistent buffer, a plain attribute), equal and apart
    for mine, caller in ((ours.mask, net.mask), (ours.extra["scale"], net.extra["scale"]), (ours.pair[0], net.pair[0])):
        assert torch.equal(mine, caller) and mine.data_ptr() != caller.data_ptr()
    ours(torch.zeros(2, 4))
    assert ours.seen == [1] and net.seen == []  # the forward's own state is the copy's
    before = _OwnCopy.copies
    copy_modules(net, _memo(net))
    assert _OwnCopy.copies == before + 1  # a class's own __deepcopy__ is called


def test_network_at_leaves_the_callers_modules_alone() -> None:
    net = DigitsResNet(20, 16).eval()
    centre = {k: v.clone() for k, v in net.state_dict().items()}
    copied = network_at(net, centre, torch.device("cpu"))
    copied.train()
    copied.get_submodule("blocks.0.bn1").running_mean.add_(1.0)
    assert all(not m.training for m in net.modules())
    assert torch.equal(net.get_submodule("blocks.0.bn1").running_mean, centre["blocks.0.bn1.running_mean"])
    assert copied.get_submodule("conv").weight.data_ptr() == centre["conv.weight"].data_ptr()  # the centre's own


def test_a_backward_pending_in_the_callers_process_survives_a_landscape(monkeypatch):
    """The engine's parametrizations (the "jit" form of a network beyond SMALL_NETWORK_BYTES) set_ their
    tensors; over the caller's storage they must not count as writes of the caller's parameters, or the
    caller's pending backward fails ("modified by an inplace operation") though no value changed."""
    import landscape
    from landscape.engine import _points

    monkeypatch.setattr(_points, "SMALL_NETWORK_BYTES", 0)  # the jit form, as for a large network
    torch.manual_seed(0)
    net = MLP(hidden=32)
    x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
    loss = nn.functional.cross_entropy(net(x), y)
    before = {k: (p._version, p.detach().clone()) for k, p in net.named_parameters()}
    ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=16)
    assert ls.metadata.get("points_per_call") == 1
    loss.backward()  # raised before: the parameters' version counters had moved
    for k, p in net.named_parameters():
        assert p._version == before[k][0] and torch.equal(p.detach(), before[k][1]) and p.grad is not None
