"""The "Between models" page's pictures and numbers, made by the library.

    python docs/make_between_pictures.py [--out docs] [--epochs 40] [--widths 16,64,512] [--threads N]

Digits as in the reference notes' probe: ``load_digits``, inputs / 16, a stratified split of
1,437 training and 360 test digits (``random_state=0``); SGD with momentum 0.9, a one-cycle
learning rate up to 0.05, weight decay 5e-4, batches of 32, ``--epochs`` epochs; seed pairs
(1, 2) and (3, 4). Barriers: Git Re-Basin's definition over 25 alphas on the training set.

* ``between_barriers.png``: a BatchNorm MLP pair (2 hidden layers of 128), the loss along the
  line naive, aligned with batch-norm statistics interpolated, and aligned with them
  re-estimated at every alpha;
* ``between_curve_plane.png``: a quadratic Bezier curve (20 epochs) between the MLP pair
  (2 hidden layers of 128) and the aligned B, on the plane through A, B and the bend (C);
* ``between_width.png``: the fraction of the naive barrier left after weight matching, for
  MLPs of 3 hidden layers of each ``--widths`` (Git Re-Basin's width ablation).

Every number the page quotes is printed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from sklearn.model_selection import train_test_split
from torch import nn

import viz
from landscape import barrier, fit_curve
from landscape.examples import MLP, DeepMLP, digits_tensors

CE = nn.CrossEntropyLoss()


def split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x, y = digits_tensors()
    tr, te = train_test_split(list(range(len(x))), test_size=360, stratify=y.numpy(), random_state=0)
    return x[tr], y[tr], x[te], y[te]


def trained(seed: int, make: Callable[[], nn.Module], epochs: int) -> nn.Module:
    xtr, ytr, _, _ = split()
    torch.manual_seed(seed)
    net = make()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    steps = -(-len(xtr) // 32)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=epochs * steps)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(xtr), generator=gen)
        for i in range(0, len(xtr), 32):
            idx = order[i:i + 32]
            opt.zero_grad()
            CE(net(xtr[idx]), ytr[idx]).backward()
            opt.step()
            sched.step()
    return net.eval()


def barriers_figure(out: Path, epochs: int) -> None:
    xtr, ytr, xte, yte = split()
    make = lambda: DeepMLP(1, 128, norm="batch")  # 2 hidden layers, batch norm after the second
    a, b = trained(1, make, epochs), trained(2, make, epochs)
    naive = barrier(a, b, CE, (xtr, ytr), test_data=(xte, yte))
    aligned = barrier(a, b, CE, (xtr, ytr), test_data=(xte, yte), align="weights")
    lerped = barrier(a, b, CE, (xtr, ytr), test_data=(xte, yte), align=aligned.alignment, bn_statistics="clamped")
    for name, got in (("naive", naive), ("aligned, statistics interpolated", lerped),
                      ("aligned, statistics re-estimated", aligned)):
        print(f"BN MLP, {name}: {got.summary()}; midpoint loss {got.loss[12]:.4f}")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, got, style in (("naive", naive, "-"), ("aligned, statistics interpolated", lerped, "--"),
                             ("aligned, statistics re-estimated", aligned, "-")):
        ax.plot(got.alphas, got.loss, style, label=f"{name}: barrier {got.height():.3f}")
    ax.set_xlabel("\u03b1: (1 \u2212 \u03b1) A + \u03b1 \u03c0(B)")
    ax.set_ylabel("training loss")
    ax.set_title("Two digits MLPs with batch norm, trained from seeds 1 and 2")
    ax.legend(frameon=False, fontsize=8)
    fig.savefig(out / "between_barriers.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def curve_figure(out: Path, epochs: int) -> None:
    xtr, ytr, xte, yte = split()
    a, b = trained(1, lambda: MLP(128), epochs), trained(2, lambda: MLP(128), epochs)
    naive = barrier(a, b, CE, (xtr, ytr))
    started = time.perf_counter()
    curve = fit_curve(a, b, CE, (xtr, ytr), epochs=20, seed=0, align="weights")
    along = curve.barrier(points=61, test_data=(xte, yte))
    print(f"curve: fitted in {time.perf_counter() - started:.0f} s; {along.summary()}")
    print(f"curve: highest loss {along.loss.max():.4f}, ends {along.loss[0]:.4f} and {along.loss[-1]:.4f}, "
          f"naive barrier {naive.height():.4f}")
    length = sum(float(((curve.ends[1][k] - v) ** 2).sum()) for k, v in curve.ends[0].items()) ** 0.5
    plane = curve.plane(size=31, points=61, x=(-0.25 * length, 1.25 * length, 41),
                        y=(-0.4 * length, 0.4 * length, 31))
    fig = viz.plot(plane, kind="filled", log=True).figure
    fig.savefig(out / "between_curve_plane.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def width_figure(out: Path, epochs: int, widths: list[int]) -> None:
    xtr, ytr, _, _ = split()
    kept: dict[int, list[float]] = {}
    for w in widths:
        for s in (1, 3):
            a = trained(s, lambda w=w: DeepMLP(2, w), epochs)
            b = trained(s + 1, lambda w=w: DeepMLP(2, w), epochs)
            naive = barrier(a, b, CE, (xtr, ytr)).height()
            aligned = barrier(a, b, CE, (xtr, ytr), align="weights").height()
            kept.setdefault(w, []).append(aligned / naive)
            print(f"width {w}, seeds ({s}, {s + 1}): naive {naive:.3f}, aligned {aligned:.3f}, "
                  f"kept {aligned / naive:.3f}")
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for w, ratios in kept.items():
        ax.scatter([w] * len(ratios), ratios, color="C0")
    ax.plot(list(kept), [sum(r) / len(r) for r in kept.values()], color="C0")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("units per hidden layer (3 hidden layers)")
    ax.set_ylabel("barrier after / before weight matching")
    ax.set_title("Git Re-Basin's width ablation on the digits")
    fig.savefig(out / "between_width.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--widths", default="16,64,512")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--only", choices=("barriers", "curve", "width"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    started = time.perf_counter()
    if args.only in (None, "barriers"):
        barriers_figure(out, args.epochs)
    if args.only in (None, "curve"):
        curve_figure(out, args.epochs)
    if args.only in (None, "width"):
        width_figure(out, args.epochs, [int(w) for w in args.widths.split(",")])
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
