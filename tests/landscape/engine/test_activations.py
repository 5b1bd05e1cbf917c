"""Activation elements per sample (what the plan sizes its calls by): the meta device's count is the real
forward's, a network that does not run there runs itself, and the caller's network is left as it was."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from landscape.engine import _activations, activation_elements
from landscape.tasks import HuggingFace, Supervised


def _leaf_outputs(net: nn.Module, run) -> int:
    """Elements of every leaf module's tensor output in a plain forward (the independent count)."""
    total = [0]
    handles = [m.register_forward_hook(lambda _m, _i, out: total.__setitem__(0, total[0] + out.numel())
                                       if isinstance(out, torch.Tensor) else None)
               for m in net.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            run()
    finally:
        for h in handles:
            h.remove()
    return total[0]


class _Branchy(nn.Module):
    """Reads a value in its forward: it cannot run on the meta device."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.b(h if float(h.sum()) > 0 else -h)


def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Dropout(0.5), nn.Linear(4 * 6 * 6, 3))


@pytest.mark.parametrize("meta_from", [0, 1 << 40])
@pytest.mark.parametrize("case", ["cnn-eval", "cnn-train", "branchy", "gpt2"])
def test_activation_elements_count_the_real_forward(monkeypatch, case, meta_from):
    monkeypatch.setattr(_activations, "META_FROM", meta_from)  # 0: every network tries the meta device
    torch.manual_seed(0)
    if case == "gpt2":
        transformers = pytest.importorskip("transformers")
        config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=61, n_positions=16)
        net, task = transformers.GPT2LMHeadModel(config).eval(), HuggingFace()
        ids = torch.randint(0, 61, (2, 12))
        batch = {"input_ids": ids, "labels": ids}
        want = _leaf_outputs(net, lambda: net(**batch))
    else:
        net = _cnn() if case.startswith("cnn") else _Branchy()
        x = torch.randn(2, 3, 6, 6) if case.startswith("cnn") else torch.randn(2, 4)
        batch, task = (x, torch.tensor([0, 1])), Supervised(nn.CrossEntropyLoss())
        want = _leaf_outputs(net, lambda: net(x))
    net.train(case == "cnn-train")
    before = [(k, t.data_ptr(), t.device, t.clone()) for k, t in net.state_dict().items()]
    modes = [m.training for m in net.modules()]
    got = activation_elements(net, task, batch, 2, eval_mode=case != "cnn-train")
    assert got == want // 2
    # the caller's network: the same tensors, values (batch-norm statistics included), devices and modes
    after = list(net.state_dict().items())
    assert [(k, t.data_ptr(), t.device) for k, t in after] == [(k, p, d) for k, p, d, _ in before]
    assert all(torch.equal(t, c) for (_, t), (_, _, _, c) in zip(after, before))
    assert [m.training for m in net.modules()] == modes


def test_the_meta_device_runs_no_arithmetic(monkeypatch):
    """A large network's count comes from the meta copy: the network itself is never called."""
    monkeypatch.setattr(_activations, "META_FROM", 0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    seen: list[torch.device] = []
    net[0].register_forward_pre_hook(lambda _m, args: seen.append(args[0].device))
    got = activation_elements(net, Supervised(nn.CrossEntropyLoss()), (torch.randn(3, 4), torch.tensor([0, 1, 0])), 3)
    assert got == 8 + 8 + 2
    assert seen == [torch.device("meta")]  # the copy (which keeps the hook) ran, on meta; the network did not


class _Norms(nn.Module):
    """Every normalization layer the meta copy passes through (their outputs have their inputs' shapes)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.gn, self.bn2 = nn.GroupNorm(2, 4), nn.BatchNorm2d(4)
        self.bn3 = nn.BatchNorm3d(4)
        self.fc = nn.Linear(4 * 36, 5)
        self.bn1, self.ln = nn.BatchNorm1d(5), nn.LayerNorm(5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn2(self.gn(self.conv(x)))
        h = self.bn3(h.unsqueeze(2)).squeeze(2)
        return self.ln(self.bn1(self.fc(h.flatten(1))))


@pytest.mark.parametrize("meta_from", [0, 1 << 40])
def test_normalization_layers_count_as_in_the_real_forward(monkeypatch, meta_from):
    monkeypatch.setattr(_activations, "META_FROM", meta_from)
    torch.manual_seed(0)
    net = _Norms().eval()
    x = torch.randn(3, 3, 6, 6)
    want = _leaf_outputs(net, lambda: net(x))
    assert want == 3 * (144 + 144 + 144 + 144 + 5 + 5 + 5)  # the independent count, by hand
    assert activation_elements(net, Supervised(nn.CrossEntropyLoss()), (x, torch.tensor([0, 1, 2])), 3) == want // 3
    assert all("forward" not in vars(m) for m in net.modules())  # the meta copy's layers were passed on, not these


@pytest.mark.parametrize("layer, x", [(nn.BatchNorm2d(4), torch.randn(2, 4)),
                                      (nn.LayerNorm(5), torch.randn(2, 4)),
                                      (nn.GroupNorm(2, 4), torch.randn(2, 6, 3))])
def test_an_input_a_normalization_refuses_fails_as_in_the_real_forward(monkeypatch, layer, x):
    """The meta copy checks the input as the layer does: the count does not pass over what the forward refuses."""
    monkeypatch.setattr(_activations, "META_FROM", 0)
    net = nn.Sequential(nn.Identity(), layer).eval()
    with pytest.raises((ValueError, RuntimeError)) as real:
        net(x)
    with pytest.raises(type(real.value)) as got:
        activation_elements(net, Supervised(nn.MSELoss()), (x, x), 2)
    assert str(got.value) == str(real.value)  # the network's own error, from its real forward
