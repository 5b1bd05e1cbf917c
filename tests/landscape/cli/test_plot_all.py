"""``landscape plot --kind all`` writes the figure ``viz.plot(kind="all")`` draws, pixel for pixel."""

from __future__ import annotations

import numpy as np
from PIL import Image

import viz
from landscape import Landscape, write_h5
from landscape.cli._main import main


def test_kind_all_is_the_overview_figure(tmp_path, capsys):
    s = np.linspace(-1, 1, 9)
    plane = Landscape(x=s, y=s.copy(), z=0.1 + np.add.outer(s ** 2, s ** 2), tag="landscape_[10]",
                      convergence_point=(0.0, 0.0, 0.1), metadata={"decomposition": "Random"})
    line = Landscape(x=s, y=np.zeros(0), z=1 + s ** 2, tag="line_[10]", metadata={"decomposition": "Random"})
    write_h5(tmp_path / "landscapes.h5", [plane, line])
    assert main(["plot", str(tmp_path / "landscapes.h5"), "--tag", "landscape_[10]", "--kind", "all",
                 "-o", str(tmp_path / "x.png")]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["x.png"]          # one figure, not four PNGs
    ref = tmp_path / "ref.png"
    viz.plot(viz.load_landscapes(tmp_path / "landscapes.h5")[0], kind="all").savefig(ref, dpi=120,
                                                                                     bbox_inches="tight")
    got, want = np.asarray(Image.open(tmp_path / "x.png")), np.asarray(Image.open(ref))
    assert got.shape == want.shape and np.array_equal(got, want)
    assert main(["plot", str(tmp_path / "landscapes.h5"), "--kind", "all", "-o", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["landscape_10_all.png", "line_10_line.png"]
    capsys.readouterr()
