"""The README's picture of the Hessian's eigenvalue density (docs/spectral_density.png), made by the library.

    python docs/make_curvature_pictures.py [--out docs] [--model resnet20|mlp] [--threads N]

``landscape.examples``' ResNet-20 (``DigitsResNet(20, 16)``, 272,186 parameters) trained 3
epochs on scikit-learn's digits (SGD 0.05, momentum 0.9, batches of 64, seed 0), in eval
mode; its Hessian on the first 512 digits by ``spectral_density`` at its defaults (10 runs
of 80 Lanczos steps, float32 products), drawn by ``viz.plot``. ``--model mlp`` takes the
demo's 64-128-128-10 MLP trained ten epochs instead (seconds instead of the ResNet's 800
Hessian-vector products, about a second each on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

import viz
from landscape.curvature import spectral_density
from landscape.examples import MLP, DigitsResNet, digits_tensors, train_epoch

SAMPLES = 512


def trained(model: str) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The network (eval mode) and the first 512 digits in its input shape."""
    torch.manual_seed(0)
    image = model == "resnet20"
    net: nn.Module = DigitsResNet(20, 16) if image else MLP()
    x, y = digits_tensors(image=image)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3 if image else 10):
        train_epoch(net, opt, x, y, gen)
    return net.eval(), x[:SAMPLES], y[:SAMPLES]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs")
    ap.add_argument("--model", choices=("resnet20", "mlp"), default="resnet20")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    net, x, y = trained(args.model)
    t0 = time.perf_counter()
    density = spectral_density(net, nn.CrossEntropyLoss(), (x, y), num_samples=SAMPLES)
    print(density, f"({time.perf_counter() - t0:.0f} s)")
    name = "ResNet-20" if args.model == "resnet20" else "MLP"
    ax = viz.plot(density, title=f"Hessian eigenvalue density: {name} on the digits, {SAMPLES} samples")
    path = Path(args.out) / "spectral_density.png"
    ax.figure.savefig(path, dpi=90, bbox_inches="tight")
    print(path)


if __name__ == "__main__":
    main()
