"""Compiled, DataParallel and DDP networks, and checkpoints with their key prefixes."""

from __future__ import annotations

import os
import socket

import numpy as np
import torch
import torch.distributed as td
from torch import nn

from collector import Model, SummaryCollector
from landscape import SummaryLandscape, compute_landscape
from landscape.examples import MLP, digits_loader, digits_tensors


def _data():
    x, y = digits_tensors()
    return x[:96], y[:96]


def _net() -> nn.Module:
    torch.manual_seed(0)
    return MLP(hidden=16)


def test_compiled_and_data_parallel_networks_equal_the_plain_one():
    data = _data()
    plain = compute_landscape(_net(), nn.CrossEntropyLoss(), data, size=5, num_samples=96)
    compiled = compute_landscape(torch.compile(_net(), backend="eager"), nn.CrossEntropyLoss(), data, size=5,
                                 num_samples=96)
    parallel = compute_landscape(nn.DataParallel(_net()), nn.CrossEntropyLoss(), data, size=5, num_samples=96)
    np.testing.assert_array_equal(compiled.z, plain.z)
    np.testing.assert_array_equal(parallel.z, plain.z)
    assert compiled.metadata["moved_parameters"] == plain.metadata["moved_parameters"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_wrapped_network_in_a_group_of_one():
    data = _data()
    plain = compute_landscape(_net(), nn.CrossEntropyLoss(), data, size=5, num_samples=96)
    td.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        ddp = nn.parallel.DistributedDataParallel(_net())
        got = compute_landscape(ddp, nn.CrossEntropyLoss(), data, size=5, num_samples=96)
    finally:
        td.destroy_process_group()
    np.testing.assert_array_equal(got.z, plain.z)


def test_checkpoints_saved_from_a_compiled_or_ddp_model_load_into_the_plain_network(tmp_path):
    data = _data()
    states = []
    net = _net()
    for k in range(4):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.01 * (k + 1))
        states.append({n: t.clone() for n, t in net.state_dict().items()})
    plain_paths, prefixed_paths = [], []
    for k, sd in enumerate(states):
        plain_paths.append(tmp_path / f"plain_{k}.pt")
        torch.save(sd, plain_paths[-1])
        prefix = "_orig_mod." if k % 2 else "module."
        prefixed_paths.append(tmp_path / f"wrapped_{k}.pt")
        torch.save({prefix + n: t for n, t in sd.items()}, prefixed_paths[-1])
    a = compute_landscape(_net(), nn.CrossEntropyLoss(), data, directions="pca", checkpoints=plain_paths, size=5,
                          num_samples=96)
    b = compute_landscape(_net(), nn.CrossEntropyLoss(), data, directions="pca", checkpoints=prefixed_paths, size=5,
                          num_samples=96)
    np.testing.assert_array_equal(a.z, b.z)
    np.testing.assert_array_equal(a.path.z, b.path.z)


def test_collecting_and_generating_with_a_compiled_network(tmp_path):
    net = torch.compile(_net(), backend="eager")
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.05))
    run = tmp_path / "run"
    sc = SummaryCollector(run, collect_freq=5, collect_specified_data={
        "collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 4, "num_samples": 64}})
    model.train(3, digits_loader(64), callbacks=[sc])
    files = sorted(os.listdir(run / "ckpt_dir"))
    assert files == ["MLP_0_epoch.pt", "MLP_1_epoch.pt", "MLP_2_epoch.pt", "MLP_3_epoch.pt", "train_metadata.json"]
    assert not any(k.startswith("_orig_mod.") for k in torch.load(run / "ckpt_dir" / files[0], weights_only=True))

    def callback_fn():
        compiled = torch.compile(MLP(hidden=16), backend="eager")
        return Model(compiled, nn.CrossEntropyLoss()), compiled, digits_loader(64, shuffle=False), None

    got = SummaryLandscape(run).gen_landscapes_with_multi_process(callback_fn, output=tmp_path / "out")
    assert [ls.tag for ls in got] == ["landscape_[1, 3]", "landscape_[3]"]
    assert all(np.isfinite(ls.z).all() for ls in got)
