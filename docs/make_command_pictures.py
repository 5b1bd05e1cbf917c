"""The docs' pictures that the ``landscape`` command draws itself (docs/demo_overview.png and more).

    python docs/make_command_pictures.py [--out docs] [--pictures demo_overview.png,resnet_shortcuts_contour.png]

Each picture is a figure a command writes, copied from a run into a temporary folder:

- ``demo_overview.png``: ``landscape demo`` (the digits MLP trained ten epochs with a
  ``SummaryCollector``, two PCA landscapes of its intervals and a random one around the
  result, 40x40), its ``plots/overview.png`` (``viz.plot_overview`` of the run); about a
  minute on 2 CPU cores;
- ``resnet_shortcuts_contour.png``: ``landscape run configs/digits_resnet_shortcuts.toml``
  (Li et al.'s Fig. 5 on the digits: four ResNets with and without shortcuts at depths 20
  and 56, one random plane each), its ``compare_contour.png`` (the four planes on shared
  log-spaced levels, each scored by ``surface_nonconvexity``; the command's report and
  ``results.json`` hold the scores the docs quote); about 3 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: picture -> (the command's arguments after ``landscape``, the figure it writes under its --out)
PICTURES = {
    "demo_overview.png": (["demo"], "plots/overview.png"),
    "resnet_shortcuts_contour.png": (["run", "configs/digits_resnet_shortcuts.toml"], "compare_contour.png"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="the folder to write the pictures into")
    parser.add_argument("--pictures", default=",".join(PICTURES), help="which pictures (comma-separated)")
    args = parser.parse_args()
    names = [n for n in args.pictures.split(",") if n]
    unknown = sorted(set(names) - set(PICTURES))
    if unknown:
        parser.error(f"--pictures must name some of {', '.join(PICTURES)}; got {', '.join(unknown)}")
    for name in names:
        command, figure = PICTURES[name]
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            subprocess.run([sys.executable, "-m", "landscape", *command, "--out", str(run)], check=True, cwd=ROOT)
            shutil.copyfile(run / figure, args.out / name)
        print(args.out / name)


if __name__ == "__main__":
    main()
