"""CheckpointConfig and ModelCheckpoint."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from collector import Callback, CheckpointConfig, InvalidParameterError, Model, ModelCheckpoint
from collector.common._torch import unwrap_module
from collector.train import _checkpoint
from collector.trajectory import _checkpoints as _state_io


def _data(n=5):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 3, generator=g), torch.randn(4, 1, generator=g)) for _ in range(n)]


def _model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    return Model(net, nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9))


class Capture(Callback):
    def __init__(self):
        self.states = {}

    def step_end(self, run_context):
        p = run_context.original_args()
        self.states[(p.cur_epoch_num, p.cur_step_in_epoch)] = {k: v.clone() for k, v in p.network.state_dict().items()}


def test_config_defaults_and_precedence():
    cfg = CheckpointConfig()
    assert cfg.get_checkpoint_policy() == {"save_checkpoint_steps": 1, "save_checkpoint_seconds": 0,
                                           "keep_checkpoint_max": 5, "keep_checkpoint_per_n_minutes": 0}
    assert (cfg.async_save, cfg.exception_save, cfg.integrated_save, cfg.saved_network, cfg.enc_key,
            cfg.enc_mode, cfg.append_dict) == (False, False, True, None, None, "AES-GCM", {})
    both = CheckpointConfig(save_checkpoint_steps=3, save_checkpoint_seconds=5, keep_checkpoint_max=2,
                            keep_checkpoint_per_n_minutes=1)
    assert (both.save_checkpoint_seconds, both.keep_checkpoint_per_n_minutes) == (0, 0)
    cfg = CheckpointConfig(append_info=["epoch_num", {"lr": 0.1, "tag": 3}])
    assert cfg.append_dict == {"lr": 0.1, "tag": 3}


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(enc_key=b"0123456789abcdef"), r"'enc_key' parameter of CheckpointConfig is not supported"),
    (dict(enc_mode="ROT13"), r"'enc_mode' parameter of CheckpointConfig must be one of 'AES-GCM', 'AES-CBC'"),
    (dict(save_checkpoint_steps=0, save_checkpoint_seconds=0), r"cannot both be 0 or None"),
    (dict(keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=None), r"cannot both be 0 or None"),
    (dict(save_checkpoint_steps=-1), r"'save_checkpoint_steps' .*\[0, inf\)"),
    (dict(async_save=1), r"'async_save' parameter of CheckpointConfig must be a bool"),
    (dict(saved_network="net"), r"'saved_network' parameter of CheckpointConfig"),
    (dict(append_info=["epoch"]), r"'append_info\[0\]' parameter of CheckpointConfig must be one of 'epoch_num', "
                                  r"'step_num' or an instance of 'dict'"),
    (dict(append_info=[{"a": "text"}]), r"'append_info\[0\]\['a'\]' parameter of CheckpointConfig"),
    (dict(append_info=[{"a": 1}, {"b": 2}]), r"at most one dict"),
])
def test_config_validation(kwargs, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        CheckpointConfig(**kwargs)


def test_model_checkpoint_validation(tmp_path):
    with pytest.raises(InvalidParameterError, match="must not contain '/'"):
        ModelCheckpoint(prefix="a/b")
    with pytest.raises(InvalidParameterError, match="'config' parameter of ModelCheckpoint"):
        ModelCheckpoint(config={"save_checkpoint_steps": 1})


@pytest.mark.parametrize("async_save", [False, True])
def test_saves_every_n_steps_keeps_max_and_loads_weights_only(tmp_path, async_save):
    model, capture = _model(), Capture()
    cfg = CheckpointConfig(save_checkpoint_steps=2, keep_checkpoint_max=3, async_save=async_save,
                           append_info=["epoch_num", "step_num", {"lr": 0.1}])
    ckpt = ModelCheckpoint(prefix="net", directory=tmp_path, config=cfg)
    model.train(2, _data(5), callbacks=[capture, ckpt])
    # Steps 2, 4, 6(=epoch 2 step 1), 8, 10 and end: keep the newest three.
    assert sorted(os.listdir(tmp_path)) == sorted(["net-2_1.pt", "net-2_3.pt", "net-2_5.pt"])
    assert ckpt.latest_ckpt_file_name == os.path.join(tmp_path, "net-2_5.pt")
    for epoch, step in [(2, 1), (2, 3), (2, 5)]:
        saved = torch.load(tmp_path / f"net-{epoch}_{step}.pt", weights_only=True)
        for key, value in capture.states[(epoch, step)].items():
            torch.testing.assert_close(saved["state_dict"][key], value, rtol=0, atol=0)
        assert saved["append_info"] == {"epoch_num": epoch, "step_num": (epoch - 1) * 5 + step, "lr": 0.1}
        assert "state" in saved["optimizer_state_dict"]


def test_saved_network_and_end_save(tmp_path):
    model, other = _model(), nn.Linear(2, 2)
    ckpt = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(save_checkpoint_steps=4, saved_network=other))
    model.train(1, _data(5), callbacks=ckpt)
    assert sorted(os.listdir(tmp_path)) == ["CKP-1_4.pt", "CKP-1_5.pt"]  # step 4, then the last step at end
    saved = torch.load(tmp_path / "CKP-1_5.pt", weights_only=True)
    assert set(saved) == {"state_dict"} and set(saved["state_dict"]) == {"weight", "bias"}
    torch.testing.assert_close(saved["state_dict"]["weight"], other.weight.detach())


def test_exception_save_writes_breakpoint(tmp_path):
    class Boom(Callback):
        def step_end(self, run_context):
            if run_context.original_args().cur_step_num == 3:
                raise RuntimeError("boom")

    ckpt = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(save_checkpoint_steps=100, exception_save=True,
                                                                       async_save=True))
    with pytest.raises(RuntimeError):
        _model().train(1, _data(5), callbacks=[Boom(), ckpt])
    assert os.listdir(tmp_path) == ["CKP-1_3_breakpoint.pt"]
    torch.load(tmp_path / "CKP-1_3_breakpoint.pt", weights_only=True)


def test_save_by_seconds_and_keep_per_minutes(tmp_path, monkeypatch):
    clock = {"t": 0.0}
    monkeypatch.setattr(_checkpoint.time, "monotonic", lambda: clock["t"])

    class Tick(Callback):
        def step_begin(self, run_context):
            clock["t"] += 20.0  # every step takes 20 s

    cfg = CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=30, keep_checkpoint_max=0,
                           keep_checkpoint_per_n_minutes=1)
    ckpt = ModelCheckpoint(directory=tmp_path, config=cfg)
    _model().train(1, _data(10), callbacks=[Tick(), ckpt])
    # Saved at t=40, 80, 120, 160, 200 (steps 2, 4, 6, 8, 10); windows start at 40, 120 and 200, and the
    # files at 80 and 160 are dropped by the next save.
    files = sorted(os.listdir(tmp_path), key=lambda f: int(f.split("_")[1][:-3]))
    assert files == ["CKP-1_2.pt", "CKP-1_6.pt", "CKP-1_10.pt"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile imports deprecated jit bits
def test_unwrap_module():
    inner = nn.Linear(2, 2)
    assert unwrap_module(nn.DataParallel(inner)) is inner
    compiled = torch.compile(inner)
    assert unwrap_module(compiled) is inner
    state = _state_io.cpu_state_dict(inner)
    with torch.no_grad():
        inner.weight.add_(1)
    assert not torch.equal(state["weight"], inner.weight)
