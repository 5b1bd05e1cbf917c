"""SharpnessCallback: lambda_max every k steps as summary scalars, through Model, a plain loop, Lightning and
the Hugging Face Trainer, read back with the project's reader and compared with hessian_eigs at those weights
and with a dense (preconditioned) Hessian."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from collector import LambdaCallback, Model, SummaryCollector, SummaryReader, SummaryRecord, summary
from collector.common import InvalidParameterError
from landscape.curvature import SharpnessCallback, hessian_eigs
from landscape.curvature._callback import adam_preconditioner
from landscape.examples import MLP, digits_tensors

TAG = "sharpness/lambda_max"
PRE = TAG + "_preconditioned"
SETTINGS = dict(tol=1e-4, max_iter=100, dtype="float32", seed=0)


def _digits(n: int = 256):
    x, y = digits_tensors()
    return x[:n], y[:n]


def _batches(x, y, size: int = 64):
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def _eigs_at(state: dict, data, net: nn.Module | None = None, **kw) -> float:
    net = net or MLP()
    net.load_state_dict(state)
    return float(hessian_eigs(net, nn.CrossEntropyLoss(), data, k=1, num_samples=None, progress=False, **SETTINGS,
                              **kw).eigenvalues[0])


def test_model_records_lambda_max_every_k_steps(tmp_path):
    """Model, Adam: steps 4 and 8 of 10 (every=4), the values hessian_eigs gives at the weights after
    those steps; the preconditioned sharpness beside them."""
    torch.manual_seed(0)
    net = MLP()
    x, y = _digits(640)
    states = {}
    keep = LambdaCallback(step_end=lambda ctx: states.__setitem__(
        ctx.original_args().cur_step_num, {k: t.detach().clone() for k, t in net.state_dict().items()}))
    sharp = SharpnessCallback(every=4, data=(x[:256], y[:256]), loss_fn=nn.CrossEntropyLoss(), num_samples=None,
                              **SETTINGS)
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.Adam(net.parameters(), lr=1e-3))
    model.train(1, _batches(x, y), callbacks=[SummaryCollector(tmp_path / "run", collect_freq=5), sharp, keep])
    reader = SummaryReader(tmp_path / "run")
    assert not reader.issues
    scalars = reader.scalars()
    steps, values = scalars[TAG]
    assert steps.tolist() == [4, 8]
    want = [_eigs_at(states[s], (x[:256], y[:256])) for s in (4, 8)]
    np.testing.assert_allclose(values, want, rtol=1e-6)  # float32 in the file
    assert [h["lambda_max"] for h in sharp.history] == want  # the same bits as hessian_eigs
    assert scalars[PRE][0].tolist() == [4, 8] and np.all(scalars[PRE][1] > 0)
    assert scalars["loss/auto"][0].tolist() == [1, 5, 10]  # the collector's steps, untouched


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 5), nn.Linear(5, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def _dense_hessian(net: _Tiny, x, y) -> np.ndarray:
    """The loss's Hessian in the flat parameters (fc1.weight, fc1.bias, fc2.weight, fc2.bias), by hand."""
    shapes = [p.shape for p in net.parameters()]
    sizes = [int(np.prod(s)) for s in shapes]

    def f(flat):
        w1, b1, w2, b2 = (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))
        return F.cross_entropy(torch.tanh(x.double() @ w1.T + b1) @ w2.T + b2, y)

    flat = torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])
    h = torch.autograd.functional.hessian(f, flat).numpy()
    return (h + h.T) / 2


def _adam_p(opt: torch.optim.Adam, net: nn.Module) -> np.ndarray:
    """Cohen et al.'s P = (1 - beta1^t) (sqrt(v / (1 - beta2^t)) + eps), from the optimizer's state, by hand."""
    (group,) = opt.param_groups
    b1, b2 = group["betas"]
    out = []
    for p in net.parameters():
        st = opt.state[p]
        t = float(st["step"])
        out.append(((1 - b1 ** t) * ((st["exp_avg_sq"].double() / (1 - b2 ** t)).sqrt() + group["eps"])).reshape(-1))
    return torch.cat(out).numpy()


def test_plain_loop_with_adam_against_the_dense_preconditioned_hessian(tmp_path):
    torch.manual_seed(1)
    net = _Tiny()
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    sharp = SharpnessCallback(every=3, data=(x, y), loss_fn=nn.CrossEntropyLoss(), num_samples=None, dtype="float64",
                              tol=1e-8, max_iter=60)
    want = {}
    with SummaryCollector(tmp_path / "run", collect_freq=1) as sc:
        sc.begin_train(network=net, optimizer=opt, loss_fn=nn.CrossEntropyLoss())
        for step in range(1, 8):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            before = [p.detach().clone() for p in net.parameters()]
            opt.step()
            # P is Adam's preconditioner: the step Adam took is -lr P^-1 m (m its first moment)
            p = _adam_p(opt, net)
            m = torch.cat([opt.state[q]["exp_avg"].reshape(-1) for q in net.parameters()]).double().numpy()
            moved = torch.cat([(q.detach() - b).reshape(-1) for q, b in zip(net.parameters(), before)]).double()
            np.testing.assert_allclose(moved.numpy(), -0.05 * m / p, rtol=1e-4, atol=1e-7)  # float32 weights
            sc.step(loss)
            sharp.step(net, opt)
            if step % 3 == 0:
                h = _dense_hessian(net, x, y)
                s = 1 / np.sqrt(p)
                want[step] = (np.linalg.eigvalsh(h)[-1], np.linalg.eigvalsh(s[:, None] * h * s[None, :])[-1])
        sc.end()
    scalars = SummaryReader(tmp_path / "run").scalars()
    assert scalars[TAG][0].tolist() == scalars[PRE][0].tolist() == [3, 6]
    for row in sharp.history:
        lam, pre = want[row["step"]]
        assert row["lambda_max"] == pytest.approx(lam, rel=1e-7)
        assert row["preconditioned"] == pytest.approx(pre, rel=1e-7)
        assert row["converged"]
    np.testing.assert_allclose(scalars[PRE][1], [want[3][1], want[6][1]], rtol=1e-6)


def test_adam_preconditioner_is_none_without_adam_state():
    net = _Tiny()
    params = list(net.parameters())
    assert adam_preconditioner(torch.optim.SGD(params, lr=0.1), params) is None
    assert adam_preconditioner(torch.optim.Adam(params), params) is None  # no step yet: no v


class _Logged(nn.Module):
    """The MLP with a summary operator in its forward (a value for every step)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = MLP()

    def forward(self, x):
        out = self.net(x)
        summary.scalar("logit_mean", out.detach().mean())
        return out


def test_before_the_collector_its_values_wait_and_the_collector_s_steps_stay_its_own(tmp_path):
    """SharpnessCallback first in the list: at its step_end the collector has not handled the step's
    summary-operator values, so it waits; the operator's values are at the collector's steps only."""
    torch.manual_seed(0)
    net = _Logged()
    x, y = _digits(640)
    sharp = SharpnessCallback(every=3, data=(x[:128], y[:128]), loss_fn=nn.CrossEntropyLoss(), num_samples=None)
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.05))
    model.train(1, _batches(x, y), callbacks=[sharp, SummaryCollector(tmp_path / "run", collect_freq=4)])
    scalars = SummaryReader(tmp_path / "run").scalars()
    assert scalars["logit_mean"][0].tolist() == scalars["loss/auto"][0].tolist() == [1, 4, 8]
    assert scalars[TAG][0].tolist() == [3, 6, 9]
    np.testing.assert_allclose(scalars[TAG][1], [h["lambda_max"] for h in sharp.history], rtol=1e-6)
    assert PRE not in scalars  # SGD: no preconditioned sharpness


def test_without_an_open_record_values_stay_in_history(caplog):
    net = _Tiny()
    x, y = torch.randn(20, 4), torch.randint(0, 3, (20,))
    sharp = SharpnessCallback(every=1, data=(x, y), loss_fn=nn.CrossEntropyLoss(), num_samples=None)
    with caplog.at_level(logging.WARNING, logger="landscape"):
        sharp.step(net)
        sharp.step(net)
    assert [h["step"] for h in sharp.history] == [1, 2]
    assert sum("no SummaryRecord is open" in r.message for r in caplog.records) == 1


@pytest.mark.parametrize("eval_mode", [True, False])
def test_the_network_its_mode_and_the_random_state_are_left_as_they_were(tmp_path, eval_mode):
    """Eval mode (batch norm's running statistics), or train mode (dropout seeded per batch: torch's
    random state is the training's again afterwards; torch.func cannot take batch norm's train-mode update)."""
    layers = [nn.Linear(4, 6), nn.BatchNorm1d(6)] if eval_mode else [nn.Linear(4, 6)]
    net = nn.Sequential(*layers, nn.Dropout(0.3), nn.Linear(6, 3))
    x, y = torch.randn(30, 4), torch.randint(0, 3, (30,))
    net.train()
    state = {k: t.clone() for k, t in net.state_dict().items()}
    sharp = SharpnessCallback(every=1, data=(x, y), loss_fn=nn.CrossEntropyLoss(), num_samples=None,
                              eval_mode=eval_mode)
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    with SummaryRecord(tmp_path / "run"):
        sharp.step(net)
    assert torch.equal(torch.rand(3), expected)
    assert net.training
    for k, t in net.state_dict().items():
        assert torch.equal(t, state[k]), k


def test_tensorboard_draws_the_tag_beside_the_loss(tmp_path):
    pytest.importorskip("tensorboard")
    from tests.collector.summary._tb_compare import accumulator

    torch.manual_seed(0)
    net = MLP()
    x, y = _digits(256)
    sharp = SharpnessCallback(every=2, data=(x[:64], y[:64]), loss_fn=nn.CrossEntropyLoss(), num_samples=None)
    Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.05)).train(
        1, _batches(x, y), callbacks=[SummaryCollector(tmp_path / "run", collect_freq=1, tensorboard_dir=tmp_path / "tb"),
                                      sharp])
    acc = accumulator(tmp_path / "tb")
    got = [(e.step, e.value) for e in acc.Scalars(TAG)]
    assert [s for s, _ in got] == [2, 4]
    np.testing.assert_allclose([v for _, v in got], [h["lambda_max"] for h in sharp.history], rtol=1e-6)
    assert "loss/auto" in acc.Tags()["scalars"]


def test_mindinsight_lists_the_tags_as_scalars(tmp_path):
    """MindInsight 2.3.1's REST API (tools/mindinsight_check.sh) lists both tags as scalars with the values;
    skipped without its virtual environment (MINDINSIGHT_VENV)."""
    import subprocess

    from tests.collector.test_mindinsight import SCRIPT, VENV, _sections

    if not (VENV / "bin" / "mindinsight").exists():
        pytest.skip("MindInsight venv not installed")
    torch.manual_seed(0)
    net = MLP()
    x, y = _digits(256)
    sharp = SharpnessCallback(every=2, data=(x[:64], y[:64]), loss_fn=nn.CrossEntropyLoss(), num_samples=None)
    Model(net, nn.CrossEntropyLoss(), torch.optim.Adam(net.parameters(), lr=1e-3)).train(
        1, _batches(x, y), callbacks=[SummaryCollector(tmp_path / "base" / "run1", collect_freq=1), sharp])
    res = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "base"), "18098"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "MI_MAX_CHARS": "0"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    sections = _sections(res.stdout)
    scalars = sections["plugins ./run1"]["plugins"]["scalar"]
    assert {"loss/auto/scalar", f"{TAG}/scalar", f"{PRE}/scalar"} <= set(scalars)
    meta = sections[f"scalar/metadata ./run1 {TAG}/scalar"]["metadatas"]
    assert [m["step"] for m in meta] == [2, 4]
    np.testing.assert_allclose([m["value"] for m in meta], [h["lambda_max"] for h in sharp.history], rtol=1e-6)


@pytest.mark.parametrize("kwargs, named", [
    (dict(every=0), "'every'"),
    (dict(data=None), "'data'"),
    (dict(dtype="float16"), "'dtype'"),
    (dict(tag=""), "'tag'"),
    (dict(tol=0.0), "'tol'"),
])
def test_bad_arguments_are_refused_when_made(kwargs, named):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    args = dict(every=2, data=(x, y), loss_fn=nn.CrossEntropyLoss(), num_samples=None)
    args.update(kwargs)
    with pytest.raises(InvalidParameterError, match=named):
        SharpnessCallback(**args)


# -- Lightning and the Hugging Face Trainer ----------------------------------------------------------

@pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*is deprecated")
def test_lightning_records_every_k_optimizer_steps(tmp_path):
    pytest.importorskip("lightning")
    from collector.integrations import LightningCollector
    from landscape.curvature import LightningSharpness
    from tests.collector.integrations import _lit

    class AdamLit(_lit.LitMLP):
        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    x, y = _digits(640)
    torch.manual_seed(0)
    module = AdamLit()
    cb = LightningSharpness(every=4, data=(x[:128], y[:128]), loss_fn=nn.CrossEntropyLoss(), num_samples=None,
                            **SETTINGS)
    trainer = _lit.trainer(max_steps=8, callbacks=[cb, LightningCollector(tmp_path / "run", collect_freq=2)])
    trainer.fit(module, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64))
    scalars = SummaryReader(tmp_path / "run").scalars()
    assert scalars[TAG][0].tolist() == scalars[PRE][0].tolist() == [4, 8]
    # the fit ended at step 8: the value there is hessian_eigs's at the final weights
    net = MLP()
    net.load_state_dict({k[len("net."):]: t for k, t in module.state_dict().items()})
    assert cb.sharpness.history[-1]["lambda_max"] == _eigs_at(net.state_dict(), (x[:128], y[:128]))
    assert scalars["loss/auto"][0].tolist() == [1, 2, 4, 6, 8]


def test_hf_trainer_records_every_k_optimizer_steps(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from transformers import Trainer

    from collector.integrations import HFCollector
    from landscape.curvature import HFSharpness
    from landscape.tasks import HuggingFace
    from tests.collector.integrations.test_transformers import Tokens, _args, _model

    data = Tokens(32)
    torch.manual_seed(0)
    model = _model()
    cb = HFSharpness(every=3, data=data, task=HuggingFace(), num_samples=8, **SETTINGS)
    trainer = Trainer(model=model, args=_args(tmp_path / "out", max_steps=6), train_dataset=data,
                      callbacks=[HFCollector(tmp_path / "run", collect_freq=3), cb])
    trainer.train()
    scalars = SummaryReader(tmp_path / "run").scalars()
    assert scalars[TAG][0].tolist() == scalars[PRE][0].tolist() == [3, 6]  # AdamW: preconditioned too
    want = hessian_eigs(trainer.model, data=data, task=HuggingFace(), k=1, num_samples=8, progress=False,
                        **SETTINGS).eigenvalues[0]
    assert cb.sharpness.history[-1]["lambda_max"] == float(want)
    np.testing.assert_allclose(scalars[TAG][1][-1], want, rtol=1e-6)
