"""The README's pictures of what the plots do for trust (docs/cnn_*.png), made by the library itself.

    python docs/make_plot_pictures.py [--out docs] [--epochs 6]

A small BatchNorm CNN (``landscape.examples.SmallCNN``) is trained a few epochs on
scikit-learn's digits, keeping each epoch's weights; ``compute_landscape`` evaluates a
random plane around the trained weights (filter normalization, 41x41) and the PCA plane
of the epochs, on the first 512 digits. Drawn with ``viz``:

- ``cnn_random_log.png``: the random plane's filled contours; its loss spans more than a
  decade, so the colours are on a log scale (the colour bar says so);
- ``cnn_pca_true_aspect.png``: the PCA plane with equal units on both axes (the path's
  angles and lengths as they are) and the explained variance on the axes;
- ``cnn_random_surface.png``: the random plane as a 3-D surface, its faces painted in a
  correct depth order, the camera chosen to see the top of the surface and the centre.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch
from matplotlib.figure import Figure

import viz
from landscape import compute_landscape
from landscape.examples import SmallCNN, digits_tensors, train_epoch


def train(x: torch.Tensor, y: torch.Tensor, epochs: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """The weights after each epoch (SGD with momentum, batches of 64)."""
    torch.manual_seed(seed)
    net = SmallCNN()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    states = []
    for _ in range(epochs):
        net.train()
        train_epoch(net, opt, x, y, g, drop_last=True)
        states.append(copy.deepcopy(net.state_dict()))
    return states


def save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=72, bbox_inches="tight")
    print(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--epochs", type=int, default=6)
    args = ap.parse_args()
    x, y = digits_tensors(image=True)
    states = train(x, y, args.epochs)
    net, loss = SmallCNN(), torch.nn.CrossEntropyLoss()
    net.load_state_dict(states[-1])
    random = compute_landscape(net, loss, (x, y), directions="random", normalization="filter", size=41,
                               num_samples=512, seed=0)
    z = random.z
    print(f"random plane: loss {z.min():.4g} to {z.max():.4g}, centre {random.metadata.get('centre')}")
    save(viz.plot(random, "filled", title=f"SmallCNN (BatchNorm) on the digits, {args.epochs} epochs: "
                  "random plane").figure, args.out / "cnn_random_log.png")
    save(viz.plot(random, "surface", title="the same plane as a surface").figure,
         args.out / "cnn_random_surface.png")
    pca = compute_landscape(net, loss, (x, y), directions="pca", checkpoints=states, size=41, num_samples=512)
    pca.metadata["unit"] = "epoch"  # one checkpoint per epoch: the path's labels say so
    evr = pca.metadata["explained_variance_ratio"]
    print(f"PCA plane: explained variance {evr[0]:.3f}, {evr[1]:.3f}; x {pca.x[0]:.3g}..{pca.x[-1]:.3g}, "
          f"y {pca.y[0]:.3g}..{pca.y[-1]:.3g}")
    save(viz.plot(pca, "filled", title=f"the PCA plane of its {args.epochs} epochs (equal units on both axes)")
         .figure, args.out / "cnn_pca_true_aspect.png")


if __name__ == "__main__":
    main()
