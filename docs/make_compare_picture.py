"""The README's picture of several runs on one plane: two runs of the digits MLP from the same
initial weights (SGD with momentum, Adam), their shared PCA plane centred on the start, at the
defaults (the uncentred PCA, not rescaled: the plane that holds the most of their movement).

    python docs/make_compare_picture.py --out docs
"""

from __future__ import annotations

import argparse
import copy
import os

import torch
from matplotlib.figure import Figure
from torch import nn

import landscape
import viz
from landscape.examples import MLP, digits_tensors, train_epoch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs")
    parser.add_argument("--size", type=int, default=41)
    args = parser.parse_args()
    x, y = digits_tensors()
    torch.manual_seed(0)
    start = MLP()
    runs = {}
    for name, make in (("SGD, momentum 0.9", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
                       ("Adam, lr 1e-3", lambda p: torch.optim.Adam(p, lr=1e-3))):
        net = copy.deepcopy(start)
        opt = make(net.parameters())
        ckpts = [copy.deepcopy(net.state_dict())]
        g = torch.Generator().manual_seed(1)
        for _ in range(8):
            train_epoch(net, opt, x, y, g)
            ckpts.append(copy.deepcopy(net.state_dict()))
        runs[name] = ckpts
    ls = landscape.compute_landscape(start, nn.CrossEntropyLoss(), (x, y), directions="pca", checkpoints=runs,
                                     centre="start", size=args.size, num_samples=None, tag="shared plane")
    md = ls.metadata
    print(ls.summary(), "in the plane:", md["movement_in_plane"], "PCA explained variance:",
          md["explained_variance_ratio"], "largest distances:", {k: max(v) for k, v in md["path_distance"].items()})
    fig = Figure(figsize=(7.5, 5.6), dpi=110)
    ax = fig.add_subplot()
    viz.plot_filled_contour(ls, ax=ax, title="Two optimizers from the same start, on their shared PCA plane")
    fig.savefig(os.path.join(args.out, "compare_shared_plane.png"), bbox_inches="tight")


if __name__ == "__main__":
    main()
