"""Tasks: any batch structure and model output, checked against a plain load_state_dict loop.

Every landscape here uses given directions with no normalization, so an independent
evaluation can rebuild each point's weights itself: ``centre + a * dv + b * dw`` loaded
into a fresh copy of the network, then one forward over all samples at once.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from collector.common import InvalidParameterError
from landscape import compute_landscape, hessian_eigs
from landscape.engine import Samples, collect
from landscape.tasks import HuggingFace, Supervised, batch_size, regression, slice_batch, to_device

SIZE = 5


def _directions(net: nn.Module, seed: int = 1) -> tuple[dict, dict]:
    g = torch.Generator().manual_seed(seed)
    names = [k for k, p in net.named_parameters() if p.is_floating_point()]
    params = dict(net.named_parameters())
    dv = {k: 0.3 * torch.randn(params[k].shape, generator=g) for k in names}
    dw = {k: 0.3 * torch.randn(params[k].shape, generator=g) for k in names}
    return dv, dw


def _reference(net: nn.Module, dv: dict, dw: dict, loss_of, ls) -> np.ndarray:
    """The loss at every grid point by load_state_dict + one forward (independent of the engine)."""
    centre = {k: v.detach().clone() for k, v in net.state_dict().items()}
    z = np.empty((len(ls.y), len(ls.x)))
    model = copy.deepcopy(net).eval()
    with torch.no_grad():
        for i, b in enumerate(ls.y):
            for j, a in enumerate(ls.x):
                state = {k: (v + float(a) * dv[k] + float(b) * dw[k]) if k in dv else v for k, v in centre.items()}
                model.load_state_dict(state)
                z[i, j] = float(loss_of(model))
    return z


def _check(ls, ref: np.ndarray, rtol: float = 1e-5) -> None:
    np.testing.assert_allclose(ls.z, ref, rtol=rtol, atol=1e-7)


# -- models of every shape ------------------------------------------------------------
class TokenClassifier(nn.Module):
    """Integer token ids and a mask in, class logits out (an embedding that moves)."""

    def __init__(self, vocab: int = 50, dim: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(6, dim) * 0.1)  # a learned positional embedding
        self.head = nn.Linear(dim, 3)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids) + self.pos[: input_ids.shape[1]]
        m = attention_mask.unsqueeze(-1).float()
        return self.head((h * m).sum(1) / m.sum(1).clamp_min(1.0))


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(3, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.a(x) + self.b(z)))


class TupleOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.aux = nn.Linear(5, 4), nn.Linear(5, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.fc(x), self.aux(x)


@dataclass
class Output:
    loss: torch.Tensor | None
    logits: torch.Tensor


class HFLike(nn.Module):
    """A Hugging Face-style model: keyword inputs, labels in, an output object with .loss."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 6)
        self.lm = nn.Linear(6, 30)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Output:
        logits = self.lm(torch.relu(self.emb(input_ids)))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, 30), labels.reshape(-1))
        return Output(loss, logits)


def _tokens(n: int = 48, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 50, (n, 6), generator=g)
    mask = (torch.rand(n, 6, generator=g) > 0.2).long()
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (n,), generator=g)}


def test_dict_batches_with_token_ids_and_a_moving_positional_embedding():
    torch.manual_seed(0)
    net = TokenClassifier()
    data = _tokens()
    loader = DataLoader([{k: v[i] for k, v in data.items()} for i in range(48)], batch_size=16)

    def task(model, batch):
        return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]), batch["labels"])

    dv, dw = _directions(net)
    ls = compute_landscape(net, data=loader, task=task, directions=(dv, dw), normalization="none", size=SIZE,
                           num_samples=40)
    assert "pos" in ls.metadata["moved_parameters"]  # not named weight/bias, and it moves
    ref = _reference(net, dv, dw, lambda m: task(m, {k: v[:40] for k, v in data.items()}), ls)
    _check(ls, ref)


def test_two_inputs_and_a_tuple_output():
    torch.manual_seed(0)
    net2, net_t = TwoInputs(), TupleOut()
    x, z, y = torch.randn(30, 4), torch.randn(30, 3), torch.randint(0, 2, (30,))
    task2 = Supervised(nn.CrossEntropyLoss(), inputs=lambda b: (b[0], b[1]), targets=2)
    dv, dw = _directions(net2)
    ls = compute_landscape(net2, data=[(x, z, y)], task=task2, directions=(dv, dw), normalization="none",
                           size=SIZE, num_samples=30)
    _check(ls, _reference(net2, dv, dw, lambda m: F.cross_entropy(m(x, z), y), ls))

    xt, yt = torch.randn(25, 5), torch.randint(0, 4, (25,))
    task_t = Supervised(nn.CrossEntropyLoss(), output=0)
    dv, dw = _directions(net_t)
    ls = compute_landscape(net_t, data=(xt, yt), task=task_t, directions=(dv, dw), normalization="none",
                           size=SIZE, num_samples=25)
    _check(ls, _reference(net_t, dv, dw, lambda m: F.cross_entropy(m(xt)[0], yt), ls))


def test_hugging_face_style_output_with_loss():
    torch.manual_seed(0)
    net = HFLike()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 30, (20, 7), generator=g)
    batch = {"input_ids": ids, "labels": torch.roll(ids, -1, dims=1)}
    dv, dw = _directions(net)
    ls = compute_landscape(net, data=[batch], task=HuggingFace(), directions=(dv, dw), normalization="none",
                           size=SIZE, num_samples=20)
    _check(ls, _reference(net, dv, dw, lambda m: m(**batch).loss, ls))


def test_regression_with_a_dataset_and_the_whole_dataset():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    x = torch.randn(70, 3)
    y = x.sum(1, keepdim=True) ** 2

    class Pairs(Dataset):
        def __len__(self) -> int:
            return 70

        def __getitem__(self, i: int):
            return x[i], y[i]

    dv, dw = _directions(net)
    ls = compute_landscape(net, data=Pairs(), task=regression(), directions=(dv, dw), normalization="none",
                           size=SIZE, num_samples=None)
    assert ls.metadata["num_samples"] == 70
    _check(ls, _reference(net, dv, dw, lambda m: F.mse_loss(m(x), y), ls))


def test_streaming_batches_equals_one_batch():
    """Batches of different token lengths (not mergeable) and merged batches give the one-batch loss."""
    torch.manual_seed(0)
    net = TokenClassifier()
    data = _tokens(60)

    def task(model, batch):
        return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]), batch["labels"])

    # three batches of 20 whose sequences are cut to different lengths: every batch is kept as it is
    ragged = [{"input_ids": data["input_ids"][s:s + 20, :L], "attention_mask": data["attention_mask"][s:s + 20, :L],
               "labels": data["labels"][s:s + 20]} for s, L in ((0, 6), (20, 5), (40, 4))]
    samples = collect(ragged, 60, task, caller="test")
    assert not samples.merged and samples.sizes == [20, 20, 20]
    dv, dw = _directions(net)
    ls = compute_landscape(net, data=ragged, task=task, directions=(dv, dw), normalization="none", size=SIZE,
                           num_samples=60)

    def whole(m):  # each sample with its own batch's length, all at once: the sample-weighted mean
        return sum(task(m, b) * 20 for b in ragged) / 60

    _check(ls, _reference(net, dv, dw, whole, ls))


def test_samples_merge_into_one_copy_and_rebatch_as_views():
    x, y = torch.randn(50, 4), torch.arange(50)
    loader = DataLoader(list(zip(x, y)), batch_size=16)
    s = collect(loader, 45, caller="test")
    assert s.merged and s.sizes == [16, 16, 13] and s.n == 45
    whole = s.tensors()
    assert torch.equal(whole[0], x[:45]) and torch.equal(whole[1], y[:45])
    r = s.rebatch(20)
    assert r.sizes == [20, 20, 5]
    assert r.batches[1][0].data_ptr() == whole[0][20:].data_ptr()  # a view, no copy
    with pytest.raises(ValueError, match="num_samples.*larger than the dataset"):
        collect(loader, 60, caller="test")


def test_device_and_slicing_rules_reach_every_tensor():
    batch = {"a": (torch.ones(4, 2), [torch.zeros(4)]), "n": 3, "fixed": torch.ones(2)}
    moved = to_device(batch, "cpu")
    assert moved["n"] == 3 and isinstance(moved["a"], tuple) and isinstance(moved["a"][1], list)
    assert batch_size(batch) == 4
    half = slice_batch(batch, 2)
    assert half["a"][0].shape == (2, 2) and half["a"][1][0].shape == (2,) and half["fixed"].shape == (2,)
    with pytest.raises(ValueError, match="sample dimension"):
        batch_size({"n": 3})


def test_bad_task_arguments_are_refused_before_work():
    net = nn.Linear(3, 2)
    data = (torch.randn(8, 3), torch.randint(0, 2, (8,)))
    with pytest.raises(ValueError, match="either loss_fn or task"):
        compute_landscape(net, nn.CrossEntropyLoss(), data, task=HuggingFace(), size=3, num_samples=8)
    with pytest.raises(TypeError, match="'task' parameter of compute_landscape must be a callable"):
        compute_landscape(net, data=data, task="loss", size=3, num_samples=8)
    with pytest.raises(ValueError, match="'metrics' parameter of compute_landscape.*outputs, targets"):
        compute_landscape(net, data=data, task=lambda m, b: m(b[0]).sum(), metrics={"acc": lambda o, t: 0.0},
                          size=3, num_samples=8)
    with pytest.raises(ValueError, match="'data' parameter of compute_landscape is required"):
        compute_landscape(net, nn.CrossEntropyLoss(), size=3)


@pytest.mark.parametrize("size", [3, 20])  # one point per call, and the batched way's first-group check
def test_a_task_that_does_not_return_one_number_is_said(size):
    """A task returning per-sample losses (or no tensor) is refused before any point, named in the error
    with what it returned and how to reduce it; one of shape (1,) is a loss like a 0-d one."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    data = (torch.randn(16, 3), torch.randint(0, 2, (16,)))
    per_sample = lambda m, b: F.cross_entropy(m(b[0]), b[1], reduction="none")  # noqa: E731
    with pytest.raises(InvalidParameterError, match=r"task .* must return a batch's loss as a tensor of one element"
                                                    r".*shape \(16,\).*HINT: reduce it"):
        compute_landscape(net, data=data, task=per_sample, size=size, num_samples=16)
    with pytest.raises(InvalidParameterError, match=r"task .* must return.*Got float 0\.5"):
        compute_landscape(net, data=data, task=lambda m, b: 0.5, size=size, num_samples=16)
    mean = compute_landscape(net, data=data, task=lambda m, b: F.cross_entropy(m(b[0]), b[1]), size=size,
                             num_samples=16)
    one = compute_landscape(net, data=data, task=lambda m, b: F.cross_entropy(m(b[0]), b[1]).reshape(1),
                            size=size, num_samples=16)
    # the same bits one point per call; batched, a (1,) loss is refused by vmap's check (it gives (p, 1)),
    # so the one-point values of the plain loss's batched ones, within float32 rounding
    np.testing.assert_allclose(one.z, mean.z, rtol=0 if size == 3 else 1e-6)


def test_batch_metrics_with_any_task():
    torch.manual_seed(0)
    net = TokenClassifier()
    data = _tokens(32)

    def task(model, batch):
        return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]), batch["labels"])

    def accuracy(model, batch):
        return (model(batch["input_ids"], batch["attention_mask"]).argmax(1) == batch["labels"]).float().mean()

    accuracy.metric_inputs = "batch"
    dv, dw = _directions(net)
    ls = compute_landscape(net, data=[data], task=task, metrics={"accuracy": accuracy}, directions=(dv, dw),
                           normalization="none", size=SIZE, num_samples=32)
    ref = _reference(net, dv, dw, lambda m: accuracy(m, data), ls)
    np.testing.assert_allclose(ls.surfaces["accuracy"], ref, rtol=1e-6)


def test_samples_are_a_dataclass_of_host_batches():
    s = Samples([(torch.zeros(3, 2), torch.zeros(3))], [3])
    assert s.n == 3 and not s.merged and s.rebatch(1) is s


class _CountingMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.calls = 0

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc(input_ids)


def test_dict_batches_without_a_task_are_refused_before_any_point_and_the_hinted_task_works():
    torch.manual_seed(0)
    net = _CountingMLP()
    x, y = torch.randn(12, 3), torch.randint(0, 2, (12,))
    batches = [{"input_ids": x[:6], "labels": y[:6]}, {"input_ids": x[6:], "labels": y[6:]}]
    with pytest.raises(InvalidParameterError) as info:
        compute_landscape(net, nn.CrossEntropyLoss(), batches, size=3, num_samples=12)
    msg = str(info.value)
    assert msg.startswith("The batches of the 'data' parameter of compute_landscape are dicts with the keys "
                          "['input_ids', 'labels'], which the task Supervised(CrossEntropyLoss()) cannot take apart")
    assert "HINT: pass compute_landscape a task (task=...): landscape.tasks.HuggingFace()" in msg
    assert "callback_fn" not in msg  # the entry point the user called, not another one
    assert net.calls == 0
    # the task the hint names gives the landscape of the same samples as (inputs, labels) pairs
    hinted = compute_landscape(net, data=batches, task=Supervised(nn.CrossEntropyLoss(), inputs="input_ids",
                                                                  targets="labels"), size=3, num_samples=12)
    pairs = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=3, num_samples=12)
    np.testing.assert_allclose(hinted.z, pairs.z, rtol=1e-6)


@pytest.mark.parametrize("data, what", [
    ([torch.randn(6, 3)], "single tensors (shape (6, 3))"),
    ([(torch.randn(6, 3),)], "tuples of 1 item(s)"),
])
def test_batches_a_plain_loss_fn_cannot_split_are_refused(data, what):
    net = _CountingMLP()
    with pytest.raises(InvalidParameterError, match=re.escape(f"are {what}, which the task")):
        compute_landscape(net, nn.CrossEntropyLoss(), data, size=3, num_samples=6)
    with pytest.raises(InvalidParameterError, match="pass hessian_eigs a task"):
        hessian_eigs(net, nn.CrossEntropyLoss(), data, num_samples=6)
    assert net.calls == 0
