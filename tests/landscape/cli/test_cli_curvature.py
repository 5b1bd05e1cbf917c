"""``landscape curvature RUN --task ...``: the curvature at a run's checkpoint, into landscapes.h5 and
``landscape ls``; the eigenvalues and trace against a dense Hessian of the checkpoint's loss."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

from landscape.cli._main import main
from landscape.curvature import sharpness
from landscape.io import read_curvature, read_h5
from tests.landscape._helpers import TinyMLP, make_data, usage_error

TASK = "tests.landscape._gen_task:task"


def _dense_hessian(state: dict, n: int = 64) -> np.ndarray:
    """The Hessian of the mean cross entropy over the first n samples (eval mode) in every parameter,
    by torch.autograd.functional.hessian of a functional_call: no code of the library."""
    net = TinyMLP().double()
    net.load_state_dict(state)
    net.eval()
    x, y = make_data()
    names = [k for k, _ in net.named_parameters()]
    shapes = [p.shape for _, p in net.named_parameters()]
    sizes = [p.numel() for _, p in net.named_parameters()]
    buffers = {k: b.double() if b.is_floating_point() else b for k, b in net.named_buffers()}

    def f(flat):
        params = {k: t.reshape(s) for k, t, s in zip(names, torch.split(flat, sizes), shapes)}
        return nn.functional.cross_entropy(functional_call(net, {**params, **buffers}, (x[:n].double(),)), y[:n])

    flat = torch.cat([p.detach().double().reshape(-1) for _, p in net.named_parameters()])
    h = torch.autograd.functional.hessian(f, flat).numpy()
    return (h + h.T) / 2


def _state(run, n: int) -> dict:
    return torch.load(run / "ckpt_dir" / f"TinyMLP_{n}_epoch.pt", weights_only=True)


def test_eigs_and_trace_of_the_last_checkpoint_against_a_dense_hessian(summary_dir, capsys):
    assert main(["curvature", str(summary_dir), "--task", TASK, "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "epoch 6 (TinyMLP_6_epoch.pt), 64 samples:" in out and "landscapes.h5" in out
    recs = read_curvature(summary_dir / "landscapes.h5")
    assert list(recs) == ["epoch_6"]  # the last checkpoint by default
    rec = recs["epoch_6"]
    assert rec.info["unit"] == "epoch" and rec.info["checkpoint"] == 6 and rec.info["num_samples"] == 64
    assert rec.info["what"] == ["eigs", "trace"] and rec.info["task"] == TASK
    eig = np.linalg.eigvalsh(_dense_hessian(_state(summary_dir, 6)))
    np.testing.assert_allclose(rec.arrays["eigenvalues"], eig[::-1][:2], rtol=1e-4)
    lo, hi = rec.info["trace_interval"]
    assert lo <= np.trace(_dense_hessian(_state(summary_dir, 6))) <= hi
    assert rec.info["trace"] == pytest.approx((lo + hi) / 2)
    assert read_h5(summary_dir / "landscapes.h5") == {}  # a curvature group is no landscape


def test_sharpness_of_a_chosen_checkpoint_listed_by_ls(summary_dir, capsys):
    argv = ["curvature", str(summary_dir), "--task", TASK, "--checkpoint", "3", "--what", "sharpness",
            "--sharpness", "adaptive_worst,adaptive_average", "--rho", "0.05", "--num-samples", "32"]
    assert main(argv) == 0
    capsys.readouterr()
    rec = read_curvature(summary_dir / "landscapes.h5")["epoch_3"]
    got = rec.info["sharpness"]
    assert sorted(got) == ["adaptive_average", "adaptive_worst"] and rec.info["num_samples"] == 32
    # what the library gives for the same checkpoint, samples and seed
    net = TinyMLP()
    net.load_state_dict(_state(summary_dir, 3))
    x, y = make_data()
    data = [(x[i:i + 32], y[i:i + 32]) for i in range(0, len(x), 32)]
    want = sharpness(net, nn.CrossEntropyLoss(), data, kind="adaptive_average", rho=0.05, num_samples=32)
    assert got["adaptive_average"]["value"] == want.value and got["adaptive_average"]["rho"] == 0.05
    assert got["adaptive_worst"]["value"] >= 0 and got["adaptive_worst"]["details"]["p"] == 2
    # a second run of the command replaces that checkpoint's group, and keeps the others
    assert main(["curvature", str(summary_dir), "--task", TASK, "--what", "eigs", "--k", "1"]) == 0
    assert main(["ls", str(summary_dir.parent), "--json"]) == 0
    capsys.readouterr()
    assert main(argv) == 0
    capsys.readouterr()
    assert sorted(read_curvature(summary_dir / "landscapes.h5")) == ["epoch_3", "epoch_6"]
    assert main(["ls", str(summary_dir.parent), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    by = {item["checkpoint"]: item for item in row["curvature"]}
    assert sorted(by) == [3, 6] and len(by[6]["eigenvalues"]) == 1
    assert by[3]["sharpness"]["adaptive_average"]["value"] == want.value
    assert main(["ls", str(summary_dir.parent)]) == 0
    text = capsys.readouterr().out
    assert "curvature at epoch 3 (32 samples): adaptive_worst" in text
    assert "curvature at epoch 6 (64 samples): eigenvalues" in text
    # the HTML report lists the same results under the run, no path of this machine in them
    pytest.importorskip("plotly")
    import viz

    page = viz.report(summary_dir, summary_dir.parent / "report.html").read_text()
    table = page[page.index('<table id="curvature-table">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr><td>[^<]*</td><td>([^<]*)</td></tr>", table)
    eig6 = ", ".join(f"{v:.6g}" for v in by[6]["eigenvalues"])
    assert len(rows) == 2 and any(f"curvature at epoch 6 (64 samples): eigenvalues {eig6}" == r for r in rows)
    assert any(r.startswith("curvature at epoch 3 (32 samples): adaptive_worst ") for r in rows)
    assert str(summary_dir) not in table


def test_density_mean_against_the_dense_trace(summary_dir, capsys):
    """SLQ's mean eigenvalue is tr / n estimated from --runs probes: within four of its standard errors."""
    assert main(["curvature", str(summary_dir), "--task", TASK, "--what", "density", "--runs", "4", "--steps",
                 "15"]) == 0
    rec = read_curvature(summary_dir / "landscapes.h5")["epoch_6"]
    dense = _dense_hessian(_state(summary_dir, 6))
    assert abs(rec.info["density_mean"] - np.trace(dense) / len(dense)) < 4 * rec.info["density_stderr"]
    assert rec.arrays["density_nodes"].shape == rec.arrays["density_weights"].shape == (4, 15)
    grid, density = rec.arrays["density_grid"], rec.arrays["density"]
    assert grid.shape == density.shape and np.trapezoid(density, grid) == pytest.approx(1, rel=1e-6)
    assert "density: mean eigenvalue" in capsys.readouterr().out
    assert main(["ls", str(summary_dir.parent)]) == 0
    assert f"density mean {rec.info['density_mean']:.6g}" in capsys.readouterr().out


@pytest.mark.parametrize("extra, named", [
    (["--what", "eigs,hessian"], "--what"),
    (["--checkpoint", "9"], "--checkpoint 9"),
    (["--what", "sharpness", "--sharpness", "adaptive_worst"], "--rho"),
    (["--what", "sharpness", "--rho", "0.1"], "--rho"),
    (["--what", "sharpness", "--sharpness", "adaptive_average", "--rho", "-1"], "--rho"),
    (["--what", "sharpness", "--sharpness", "sharpest"], "--sharpness"),
    (["--p", "1"], "--p"),
    (["--k", "0"], "--k"),
])
def test_bad_usage_exits_2_naming_the_option_and_writes_nothing(summary_dir, capsys, extra, named):
    err = usage_error(["curvature", str(summary_dir), "--task", TASK, *extra], capsys)
    assert named in err and len(err.strip().splitlines()) == 1
    assert not (summary_dir / "landscapes.h5").exists()


def test_a_task_that_does_not_exist_is_refused_before_anything(summary_dir, capsys):
    err = usage_error(["curvature", str(summary_dir), "--task", "tests.landscape.no_such_module:task"], capsys)
    assert "--task" in err and not (summary_dir / "landscapes.h5").exists()


def test_another_run_s_landscapes_h5_is_refused(summary_dir, tmp_path, capsys):
    """--output holding the results of a run whose checkpoints differ: refused (exit 2), the file untouched."""
    other = tmp_path / "other"
    os.makedirs(other)
    assert main(["curvature", str(summary_dir), "--task", TASK, "--what", "eigs", "--k", "1", "--output",
                 str(other)]) == 0
    before = (other / "landscapes.h5").read_bytes()
    altered = tmp_path / "altered"
    os.makedirs(altered / "ckpt_dir")
    md = json.loads((summary_dir / "ckpt_dir" / "train_metadata.json").read_text())
    for n, name in md["model_params_file_map"].items():
        state = _state(summary_dir, int(n))
        torch.save({k: t + 1 if t.is_floating_point() else t for k, t in state.items()}, altered / "ckpt_dir" / name)
    (altered / "ckpt_dir" / "train_metadata.json").write_text(json.dumps(md))
    capsys.readouterr()
    err = usage_error(["curvature", str(altered), "--task", TASK, "--what", "eigs", "--output", str(other)], capsys)
    assert "--output" in err and "another run" in err
    assert (other / "landscapes.h5").read_bytes() == before
