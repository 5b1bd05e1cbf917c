"""Run by torchrun in the sharded test: a tiny GPT-2 sharded with FSDP2 over the ranks (gloo on the CPU,
or nccl with one CUDA device per rank when the second argument is ``nccl``).

``python -m torch.distributed.run --nproc_per_node=2 -m tests.landscape.execution._sharded_run OUT [BACKEND]``
writes OUT.json (rank 0): the landscape's values and metadata with ``memory="fast"`` and ``"lean"``,
whether every rank's network is back at its centre afterwards, and the refusals of what the sharded
path does not do.
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


def main() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import landscape
    from collector import InvalidParameterError
    from landscape.tasks import HuggingFace

    out = sys.argv[1]
    backend = sys.argv[2] if len(sys.argv) > 2 else "gloo"
    device = "cpu"
    if backend == "nccl":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    net, batch = model_and_batch()
    net = net.to(device)
    before = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    for block in net.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)
    result: dict = {"world": dist.get_world_size(), "refusals": {}}
    for memory in ("fast", "lean"):
        ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, num_samples=None, seed=3,
                                         memory=memory)
        after = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).cpu() for k, v in net.state_dict().items()}
        result[memory] = {"z": ls.z.tolist(), "metadata": ls.metadata,
                          "restored": all(torch.equal(before[k], after[k]) for k in before)}
    for name, kw in (("checkpoints", {"checkpoints": [before]}), ("directions", {"directions": "hessian"}),
                     ("eval_mode", {"eval_mode": False}), ("metrics", {"metrics": {"acc": lambda o, t: 0.0}})):
        try:
            landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=3, **kw)
        except InvalidParameterError as exc:
            result["refusals"][name] = str(exc)
    if dist.get_rank() == 0:
        with open(out + ".json", "w") as fh:
            json.dump(result, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
