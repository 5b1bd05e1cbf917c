"""The README's pictures of the views (docs/view_*.png), made by the library itself.

    python docs/make_view_pictures.py [--out docs] [--views line,interpolation,plane,target,hessian]

The demo's 64-128-128-10 MLP is trained ten epochs on scikit-learn's digits from three
seeds, keeping each epoch's weights; the pictures are drawn with ``viz`` from
``compute_landscape`` on the first 512 digits.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch
from matplotlib.figure import Figure

import viz
from landscape import compute_landscape
from landscape.curvature import EigenRatio
from landscape.examples import MLP, digits_tensors, train_epoch


def train(seed: int, x: torch.Tensor, y: torch.Tensor, epochs: int = 10) -> list[dict[str, torch.Tensor]]:
    """The weights before training and after each epoch."""
    torch.manual_seed(seed)
    net = MLP()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    states = [copy.deepcopy(net.state_dict())]
    for _ in range(epochs):
        train_epoch(net, opt, x, y, g)
        states.append(copy.deepcopy(net.state_dict()))
    return states


def save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=72, bbox_inches="tight")
    print(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--views", default="line,interpolation,plane,target,hessian")
    args = ap.parse_args()
    views = set(args.views.split(","))
    x, y = digits_tensors()
    runs = [train(seed, x, y) for seed in (0, 1, 2)]
    net, loss, data = MLP(), torch.nn.CrossEntropyLoss(), (x, y)
    common = dict(num_samples=512, metrics=["accuracy"])
    net.load_state_dict(runs[0][-1])

    if "line" in views:
        line = compute_landscape(net, loss, data, dims=1, x=(-1.0, 1.0, 81), normalization="filter", **common)
        save(viz.plot(line, title="random line around the trained MLP (filter-normalized)").figure,
             args.out / "view_line.png")
    if "interpolation" in views:
        interp = compute_landscape(net, loss, data, between=(runs[0][0], runs[0][-1]), x=(-0.5, 1.5, 81),
                                   **common)
        save(viz.plot(interp, title="interpolation from initialisation (A) to trained (B)").figure,
             args.out / "view_interpolation.png")
    if "plane" in views:
        plane = compute_landscape(net, loss, data, between=(runs[0][-1], runs[1][-1], runs[2][-1]), size=41,
                                  num_samples=512)
        save(viz.plot(plane, "filled", title="plane through three trained MLPs (seeds 0, 1, 2)").figure,
             args.out / "view_plane.png")
    if "target" in views:
        traj = runs[0][1:]
        target = compute_landscape(net, loss, data, between=(traj[0], traj[-1]), directions=("target", "pca"),
                                   checkpoints=traj, x=(-0.25, 1.25, 49), y=(-0.6, 0.3, 25), num_samples=512)
        save(viz.plot(target, "filled", title="epoch 1 (A) to epoch 10 (B), and the path's own direction").figure,
             args.out / "view_target.png")
    if "hessian" in views:  # unit eigenvectors: the axes are distances in parameter space
        hess = compute_landscape(net, loss, data, directions="hessian", normalization="none", size=15,
                                 num_samples=512, metrics={"eigen_ratio": EigenRatio(tol=1e-3, dtype="float32")})
        lam = hess.metadata["hessian_eigenvalues"]
        save(viz.plot(hess, "filled", title=f"top two Hessian eigenvectors (λ = {lam[0]:.2f}, {lam[1]:.2f})").figure,
             args.out / "view_hessian.png")
        save(viz.plot(hess, kind="eigen-ratio", title="|λmin/λmax| over the same plane").figure,
             args.out / "view_hessian_eigen_ratio.png")


if __name__ == "__main__":
    main()
