"""Run by torchrun in the sharded test: a tiny GPT-2 sharded with FSDP2 over the ranks (gloo on the CPU,
or nccl with one CUDA device per rank when the second argument is ``nccl``).

``python -m torch.distributed.run --nproc_per_node=2 -m tests.landscape.execution._sharded_run OUT [BACKEND]``
writes OUT.json (rank 0): the landscape's values and metadata with ``memory="fast"`` and ``"lean"``,
whether every rank's network is back at its centre afterwards, and the refusals of what the sharded
path does not do; and the cases in :data:`CASES` (several batches per rank, a unit called twice per
forward kept gathered or not, a parameter FSDP does not shard, mixed precision).
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist


def model_and_batch():
    """The same tiny GPT-2 (tied embeddings) and batch in every process."""
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=61, n_positions=16)
    net = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 61, (6, 12), generator=torch.Generator().manual_seed(1))
    return net, {"input_ids": ids, "labels": ids}


class Twice(torch.nn.Module):
    """A block called twice per forward (the same weights), then a head: FSDP gathers the block once
    or twice per forward as its ``reshard_after_forward`` says."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.block(x)))


def twice_and_data():
    x = torch.randn(12, 8, generator=torch.Generator().manual_seed(4))
    y = torch.randint(0, 3, (12,), generator=torch.Generator().manual_seed(5))
    return Twice().eval(), [(x[k:k + 2], y[k:k + 2]) for k in range(0, 12, 2)]


def gpt2_batches():
    """The tiny GPT-2's batch cut into three of two sequences (each rank evaluates several batches)."""
    _, batch = model_and_batch()
    return [{k: v[i:i + 2] for k, v in batch.items()} for i in range(0, 6, 2)]


#: Cases beyond the tiny GPT-2 in one batch: name -> what the single-process landscape is computed on.
CASES = ("gpt2_batches", "twice_resharded", "twice_kept", "twice_ignored_head", "twice_by_columns", "twice_hsdp",
         "mixed_bf16")


def _case(name: str, mesh, device: str):
    """The sharded network, data and task of case ``name``; and whether its landscape is one process's."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Shard

    from landscape.tasks import HuggingFace, Supervised

    if name in ("gpt2_batches", "mixed_bf16"):
        net, _ = model_and_batch()
        net = net.to(device)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16) if name == "mixed_bf16" else MixedPrecisionPolicy()
        for block in net.transformer.h:
            fully_shard(block, mesh=mesh, mp_policy=mp)
        fully_shard(net, mesh=mesh, mp_policy=mp)
        return net, gpt2_batches(), HuggingFace()
    net, data = twice_and_data()
    net = net.to(device)
    if name == "twice_hsdp":  # a 2-D mesh (replicated over 1, sharded over the ranks): HSDP's layout
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(torch.device(device).type, (1, dist.get_world_size()), mesh_dim_names=("replicate", "shard"))
    # by columns: matrices sharded Shard(1) (FSDP2's shard_placement_fn), the rest by rows
    by = (lambda p: Shard(1) if p.dim() == 2 else None) if name == "twice_by_columns" else None
    fully_shard(net.block, mesh=mesh, reshard_after_forward=name != "twice_kept", shard_placement_fn=by)
    ignored = {net.head.bias} if name == "twice_ignored_head" else None
    fully_shard(net, mesh=mesh, ignored_params=ignored, shard_placement_fn=by)
    return net, data, Supervised(torch.nn.CrossEntropyLoss())


def main() -> None:
    out = sys.argv[1]
    backend = sys.argv[2] if len(sys.argv) > 2 else "gloo"
    device = "cpu"
    if backend == "nccl":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    result = _landscapes(device)
    if dist.get_rank() == 0:
        with open(out + ".json", "w") as fh:
            json.dump(result, fh)
    dist.destroy_process_group()
    # Out without the interpreter's finalization: PyTorch 2.13 keeps every device mesh that fully_shard
    # used in DTensor's sharding-propagation cache (a module-level lru_cache), so the gloo group outlives
    # destroy_process_group, and its worker threads cancelled during finalization abort the process
    # ("terminate called without an active exception") in 9 exits of 22 here -- with or without
    # this library (fully_shard and one forward are enough).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _landscapes(device: str) -> dict:
    """Every landscape of the test, on ``device``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import landscape
    from collector import InvalidParameterError
    from landscape.tasks import HuggingFace, to_device

    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    net, batch = model_and_batch()
    net = net.to(device)
    before = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    for block in net.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)
    shards = _shards(net)
    result: dict = {"world": dist.get_world_size(), "refusals": {}}
    for memory in ("fast", "lean"):
        ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=3,
                                         memory=memory)
        result[memory] = {"z": ls.z.tolist(), "metadata": ls.metadata,
                          "restored": _same_everywhere(shards, _shards(net))}
    for name in CASES:
        case_net, data, task = _case(name, mesh, device)
        states = _shards(case_net)
        got = {}
        # the sharded network's own loss first, each batch weighed by its samples (float64): FSDP keeps the
        # root's tensors gathered after it, as a user's forward before the landscape leaves them. The batch
        # goes to the device first: FSDP's root moves the model's inputs, not the loss's targets
        with torch.no_grad():
            sizes = [len(b[0]) if isinstance(b, tuple) else len(b["input_ids"]) for b in data]
            got["own_loss"] = sum(float(task(case_net, to_device(b, device))) * k
                                  for b, k in zip(data, sizes)) / sum(sizes)
        for memory in ("fast", "lean"):
            ls = landscape.compute_landscape(case_net, data=data, task=task, size=3, num_samples=None, seed=3,
                                             memory=memory)
            got[memory] = ls.z.tolist()
        got["restored"] = _same_everywhere(states, _shards(case_net))
        result[name] = got
    for name, kw in (("checkpoints", {"checkpoints": [before]}), ("directions", {"directions": "hessian"}),
                     ("eval_mode", {"eval_mode": False}), ("metrics", {"metrics": {"acc": lambda o, t: 0.0}})):
        try:
            landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, **kw)
        except InvalidParameterError as exc:
            result["refusals"][name] = str(exc)
    return result


def _shards(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of this rank's shards of ``net``'s state (DTensor's ``to_local``: no collective)."""
    return {k: (v.to_local() if hasattr(v, "to_local") else v).detach().cpu().clone()
            for k, v in net.state_dict().items()}


def _same_everywhere(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> bool:
    """Whether every rank's shards are bit for bit as they were."""
    same = torch.tensor([int(before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before))],
                        device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item())


if __name__ == "__main__":
    main()
