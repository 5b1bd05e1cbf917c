"""Model.train / eval / predict against a hand-written PyTorch loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector import Accuracy, Callback, InvalidParameterError, Loss, Model


def _net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _dataset(n=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g))


def test_train_equals_manual_loop():
    ds = _dataset()
    net_a, net_b = _net(), _net()
    opt_a = torch.optim.SGD(net_a.parameters(), lr=0.1, momentum=0.9)
    opt_b = torch.optim.SGD(net_b.parameters(), lr=0.1, momentum=0.9)
    Model(net_a, nn.CrossEntropyLoss(), opt_a).train(3, DataLoader(ds, batch_size=16))
    for _ in range(3):
        for x, y in DataLoader(ds, batch_size=16):
            opt_b.zero_grad()
            nn.functional.cross_entropy(net_b(x), y).backward()
            opt_b.step()
    for a, b in zip(net_a.parameters(), net_b.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_run_context_arguments():
    ds = _dataset()
    loader = DataLoader(ds, batch_size=16)
    net, loss_fn = _net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    seen = []

    class Look(Callback):
        def begin(self, run_context):
            self.params = run_context.original_args()

        def step_end(self, run_context):
            p = run_context.original_args()
            assert isinstance(p.net_outputs, torch.Tensor) and p.net_outputs.requires_grad is False
            seen.append((p.cur_epoch_num, p.cur_step_num, p.cur_step_in_epoch))

    look = Look()
    Model(net, loss_fn, opt).train(4, loader, callbacks=[look], initial_epoch=2)
    p = look.params
    assert p.train_network is net and p.network is net and p.optimizer is opt and p.loss_fn is loss_fn
    assert (p.epoch_num, p.batch_num, p.batch_size, p.mode) == (4, 4, 16, "train")
    assert (p.device_number, p.parallel_mode) == (1, "stand_alone")
    assert p.train_dataset is loader and p.list_callback == [look]
    assert seen[0] == (3, 9, 1) and seen[-1] == (4, 16, 4) and len(seen) == 8


def test_request_stop_and_unsized_iterable():
    ds = _dataset()
    batches = list(DataLoader(ds, batch_size=10))
    counts = []

    class Stop(Callback):
        def step_end(self, run_context):
            p = run_context.original_args()
            if p.cur_step_num == 7:
                run_context.request_stop()

        def end(self, run_context):
            p = run_context.original_args()
            counts.append((p.cur_step_num, p.cur_epoch_num, p.batch_num, p.batch_size))

    net = _net()
    Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1)).train(
        5, _Unsized(batches), callbacks=Stop())
    assert counts == [(7, 2, 5, 10)]


class _Unsized:
    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


def test_loss_fn_none_network_returns_loss():
    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _net()

        def forward(self, x, y):
            return nn.functional.cross_entropy(self.net(x), y)

    net = WithLoss()
    before = net.net[0].weight.detach().clone()
    Model(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1)).train(1, DataLoader(_dataset(), batch_size=8))
    assert not torch.equal(before, net.net[0].weight)


def test_eval_metrics_match_independent_computation():
    ds = _dataset(n=45)
    loader = DataLoader(ds, batch_size=10)
    net = _net()
    net.train()

    class Recall:  # any object with clear/update/eval
        def clear(self):
            self.hits = 0

        def update(self, y_pred, y):
            self.hits += int((y_pred.argmax(1) == y).sum())

        def eval(self):
            return self.hits

    model = Model(net, nn.CrossEntropyLoss(), metrics={"acc": Accuracy(), "loss": Loss(), "hits": Recall()})
    result = model.eval(loader)
    assert net.training  # mode restored
    with torch.no_grad():
        logits = net(ds.tensors[0])
        batch_losses = [nn.functional.cross_entropy(net(x), y).item() for x, y in loader]
    pred = logits.argmax(1).numpy()
    assert result["acc"] == pytest.approx(accuracy_score(ds.tensors[1].numpy(), pred))
    assert result["loss"] == pytest.approx(np.mean(batch_losses), rel=1e-6)
    assert result["hits"] == int((pred == ds.tensors[1].numpy()).sum())
    assert Model(net, metrics={"accuracy", "loss"}, loss_fn=nn.CrossEntropyLoss()).eval(loader)["accuracy"] == \
        pytest.approx(result["acc"])


def test_eval_callbacks_get_eval_mode_and_metrics():
    got = {}

    class Look(Callback):
        def end(self, run_context):
            p = run_context.original_args()
            got.update(mode=p.mode, metrics=p.metrics, steps=p.cur_step_num, ds=p.valid_dataset)

    loader = DataLoader(_dataset(n=30), batch_size=10)
    result = Model(_net(), metrics={"acc": Accuracy()}).eval(loader, callbacks=Look())
    assert got == {"mode": "eval", "metrics": result, "steps": 3, "ds": loader}


def test_predict():
    net = _net()
    net.train()
    x = torch.randn(5, 4)
    out = Model(net).predict(x)
    assert not out.requires_grad and net.training
    torch.testing.assert_close(out, net(x).detach())


def test_moves_batches_to_network_device():
    net = _net().to(torch.float64)
    seen = []

    class Look(Callback):
        def step_end(self, run_context):
            seen.append(run_context.original_args().train_dataset_element[0].device)

    data = [(torch.randn(4, 4, dtype=torch.float64), torch.tensor([0, 1, 2, 0]))]
    Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1)).train(1, data, callbacks=Look())
    assert seen == [next(net.parameters()).device]


@pytest.mark.parametrize("call, pattern", [
    (lambda: Model("net"), r"'network' parameter of Model must be an instance of 'Module'"),
    (lambda: Model(_net(), loss_fn=3), r"'loss_fn' parameter of Model must be None or a callable"),
    (lambda: Model(_net(), optimizer="sgd"), r"'optimizer' parameter of Model"),
    (lambda: Model(_net(), metrics={"a": 3}), r"'metrics\['a'\]' parameter of Model must be an object with clear"),
    (lambda: Model(_net(), metrics={"f1"}), r"metric name 'f1' is not known"),
    (lambda: Model(_net()).train(1, []), r"Model.train needs an optimizer"),
    (lambda: Model(_net()).eval([]), r"Model.eval needs metrics"),
    (lambda: Model(_net(), nn.MSELoss(), torch.optim.SGD(_net().parameters(), lr=1)).train(0, []),
     r"'epoch' parameter of Model.train must be an int in the range \[1, inf\)\. Got 0"),
    (lambda: Model(_net(), nn.MSELoss(), torch.optim.SGD(_net().parameters(), lr=1)).train(2, [], initial_epoch=2),
     r"'initial_epoch' parameter of Model.train must be an int in the range \[0, 1\]\. Got 2 instead\. HINT"),
    (lambda: Model(_net(), nn.MSELoss(), torch.optim.SGD(_net().parameters(), lr=1)).train(1, 5),
     r"'train_dataset' parameter of Model.train must be an iterable of batches"),
])
def test_validation(call, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        call()
