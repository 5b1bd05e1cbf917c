"""A network sharded with FSDP2 over two gloo ranks (torchrun): every rank evaluates every point on its
share of the samples, the gathered tensors moved (the shards stay the centre); the landscape is one
process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import landscape
from landscape.tasks import HuggingFace
from tests.landscape.execution._sharded_run import gpt2_batches, model_and_batch, twice_and_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _torchrun(folder, nproc: int, *args: str) -> dict:
    pytest.importorskip("transformers")
    out = str(folder / "run")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                          "-m", "tests.landscape.execution._sharded_run", out, *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    with open(out + ".json") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    return _torchrun(tmp_path_factory.mktemp("sharded"), 2)


@pytest.mark.parametrize("memory", ["fast", "lean"])
def test_sharded_landscape_is_the_single_process_one(sharded, memory):
    net, batch = model_and_batch()
    single = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=3)
    got = sharded[memory]
    assert sharded["world"] == 2 and got["metadata"]["sample_shares"] == 2
    assert got["metadata"]["direction_draw"] == "per-block" and got["metadata"]["points_per_call"] == 1
    # Hugging Face's loss is a float32 mean over a batch's tokens: each rank means its 3 sequences, and the
    # ranks' sums are added in float64, one process means all 6 at once. The same points' parameters (each
    # rank's shard is the slice of the same point), another order of float32 additions: ~1e-7 relative.
    np.testing.assert_allclose(np.asarray(got["z"]), single.z, rtol=1e-6)
    assert got["restored"]  # every rank's shards back at the centre


def test_sharded_fast_and_lean_agree_bit_for_bit(sharded):
    np.testing.assert_array_equal(np.asarray(sharded["fast"]["z"]), np.asarray(sharded["lean"]["z"]))


@pytest.mark.parametrize("case", ["gpt2_batches", "twice_resharded", "twice_kept", "twice_ignored_head",
                                  "twice_by_columns", "twice_hsdp"])
def test_sharded_cases_are_the_single_process_landscape(sharded, case):
    """Several batches per rank (the root stays gathered between them), a unit called twice per forward
    (gathered again for its second call, or kept gathered: moved once either way), a parameter FSDP does
    not shard (moved in place), matrices sharded by columns, a 2-D (HSDP) mesh: each the landscape of the unsharded
    network in one process."""
    import torch

    if case == "gpt2_batches":
        (net, _), data, task = model_and_batch(), gpt2_batches(), HuggingFace()
    else:
        (net, data), task = twice_and_data(), landscape.tasks.Supervised(torch.nn.CrossEntropyLoss())
    single = landscape.compute_landscape(net, data=data, task=task, size=3, num_samples=None, seed=3)
    got = sharded[case]
    np.testing.assert_allclose(np.asarray(got["fast"]), single.z, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(got["fast"]), np.asarray(got["lean"]))
    assert got["fast"][1][1] == pytest.approx(got["own_loss"], rel=1e-12)  # the centre: the model's own loss
    assert got["restored"]


def test_sharded_under_mixed_precision_moves_the_float32_shards(sharded):
    """FSDP's ``param_dtype=bfloat16``: each point is formed in float32 from the float32 shards and cast as
    FSDP casts its gathers; the centre is the sharded model's own (bfloat16) loss."""
    got = sharded["mixed_bf16"]
    np.testing.assert_array_equal(np.asarray(got["fast"]), np.asarray(got["lean"]))
    # the ranks' shares split a batch: the bfloat16 logits' means are summed in another order (~2e-8)
    assert got["fast"][1][1] == pytest.approx(got["own_loss"], rel=1e-6)
    single = landscape.compute_landscape(*model_and_batch()[:1], data=gpt2_batches(), task=HuggingFace(), size=3,
                                         num_samples=None, seed=3)
    np.testing.assert_allclose(np.asarray(got["fast"]), single.z, rtol=2e-2)  # bfloat16 compute
    assert not np.array_equal(np.asarray(got["fast"]), single.z)
    assert got["restored"]


def test_what_the_sharded_path_does_not_do_is_refused(sharded):
    refusals = sharded["refusals"]
    assert set(refusals) == {"checkpoints", "directions", "eval_mode", "metrics"}
    assert "'checkpoints' parameter of compute_landscape must be None: the centre is the sharded network's" \
        in refusals["checkpoints"]
    assert "'directions' parameter of compute_landscape must be random" in refusals["directions"]
    assert all("HINT: launch every rank with torchrun" in m for m in refusals.values())


@pytest.mark.cuda
def test_sharded_over_nccl_on_cuda_is_the_single_process_one(tmp_path):
    """FSDP2 over nccl, one CUDA device per rank (as many ranks as devices, at most 2): the landscape of
    the unsharded model on the first device."""
    import torch

    nproc = min(2, torch.cuda.device_count())
    got = _torchrun(tmp_path, nproc, "nccl")
    net, batch = model_and_batch()
    single = landscape.compute_landscape(net.cuda(), data=[batch], task=HuggingFace(), size=3, num_samples=None,
                                         seed=3, device_ids=[0])
    for memory in ("fast", "lean"):
        assert got["world"] == nproc and got[memory]["restored"]
        np.testing.assert_allclose(np.asarray(got[memory]["z"]), single.z, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(got["fast"]["z"]), np.asarray(got["lean"]["z"]))
