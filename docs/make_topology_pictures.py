"""The Topology page's picture (docs/topology.png): the plane through three trained networks.

    python docs/make_topology_pictures.py [--out docs] [--size 31]

Three of the demo's 64-128-128-10 MLPs, trained ten epochs each on scikit-learn's digits from
seeds 0, 1 and 2 (SGD 0.05, momentum 0.9, batches of 64); the plane through them
(``compute_landscape(between=(A, B, C))``), ``size`` points per side on the first 512 digits,
drawn by ``viz.plot_topology`` at a threshold of 0.01 (a loss difference): each network its own
basin, the saddles between them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

import viz
from landscape import compute_landscape
from landscape.examples import MLP, digits_tensors, train_epoch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--size", type=int, default=31)
    args = parser.parse_args()
    x, y = digits_tensors()
    nets = []
    for seed in range(3):
        torch.manual_seed(seed)
        net = MLP()
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(10):
            train_epoch(net, opt, x, y, gen)
        nets.append(net)
    started = time.perf_counter()
    ls = compute_landscape(nets[0], nn.CrossEntropyLoss(), (x[:512], y[:512]), between=nets, size=args.size,
                           tag="three digits MLPs")
    fig = viz.plot_topology(ls, threshold=0.01)
    fig.savefig(args.out / "topology.png", dpi=80, bbox_inches="tight")
    print(f"{ls.topology(threshold=0.01).summary()}\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
