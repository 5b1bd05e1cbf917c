"""Landscapes for the report tests, and reading a report's embedded data back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from landscape import Landscape, LossPath


def report_data(path: Path) -> dict:
    """The JSON the page embeds (``<script type="application/json" id="report-data">``)."""
    text = Path(path).read_text(encoding="utf-8")
    (blob,) = re.findall(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    return json.loads(blob)


def traces(fig: dict, name: str | None = None, kind: str | None = None) -> list[dict]:
    return [t for t in fig["data"] if (name is None or t.get("name") == name) and (kind is None or t["type"] == kind)]


def as_float(values) -> np.ndarray:
    """JSON null back to NaN."""
    return np.array([[np.nan if v is None else v for v in row] for row in values] if values and
                    isinstance(values[0], list) else [np.nan if v is None else v for v in values], dtype=np.float64)


def nan_plane() -> Landscape:
    """A 5 x 4 plane through three models with a NaN and an inf, the grid spanning 0.1 and the loss ~2."""
    x, y = np.linspace(-0.05, 0.05, 5), np.linspace(-0.04, 0.04, 4)
    z = 0.1 + 200 * np.add.outer(y ** 2, x ** 2)
    z[1, 2], z[3, 4] = np.nan, np.inf
    return Landscape(x=x, y=y, z=z, convergence_point=(0.0, 0.0, 0.1), metadata={"decomposition": "Plane"},
                     tag="plane_[1, 5, 10]", surfaces={"accuracy": 1 - z / 4},
                     markers={"A": (0.0, 0.0, 0.1), "B": (0.05, 0.0, 0.6), "C": (0.0, 0.04, 0.42)})


def tall_plane() -> Landscape:
    """A bowl over a grid spanning 0.1 whose loss spans 2 (a plane drawn in data units would be a sliver)."""
    x = y = np.linspace(-0.05, 0.05, 21)
    return Landscape(x=x, y=y, z=0.05 + 400 * np.add.outer(y ** 2, x ** 2), convergence_point=(0.0, 0.0, 0.05),
                     metadata={"decomposition": "Random"}, tag="tall")


def nan_line() -> Landscape:
    x = np.linspace(-0.5, 1.5, 9)
    z = (x - 1.0) ** 2 + 0.25
    z[0] = np.nan
    return Landscape(x=x, y=np.zeros(0), z=z, convergence_point=(0.0, 0.0, 1.25),
                     metadata={"decomposition": "Interpolation"}, tag="interpolation_[1, 10]",
                     markers={"A": (0.0, 0.0, 1.25), "B": (1.0, 0.0, 0.25)})


def shared_plane() -> Landscape:
    """A plane with two runs' paths (``paths``, as a plane shared by several runs carries them)."""
    x, y = np.linspace(-1, 1, 6), np.linspace(-0.5, 0.5, 5)
    ls = Landscape(x=x, y=y, z=np.add.outer(y ** 2, x ** 2), metadata={"decomposition": "PCA", "unit": "epoch"},
                   tag="shared", path=LossPath(np.array([0.9, 0.0]), np.array([0.4, 0.0]), np.array([0.97, 0.0]),
                                               [1, 2]),
                   convergence_point=(0.0, 0.0, 0.0))
    ls.paths = {"sgd": LossPath(np.array([0.9, 0.5, 0.0]), np.array([0.4, 0.2, 0.0]),  # type: ignore[attr-defined]
                                np.array([0.97, 0.29, 0.0]), [1, 2, 3]),
                "adam": LossPath(np.array([-0.8, -0.3]), np.array([-0.4, 0.1]), np.array([0.8, 0.1]), [1, 3])}
    return ls


def clamped_plane() -> Landscape:
    """A 7 x 6 plane through three models whose right-hand columns had batch-norm variances clamped
    at zero (1 to 3 channels), one of those points NaN."""
    x, y = np.linspace(-0.5, 1.5, 7), np.linspace(-0.5, 1.0, 6)
    z = 0.2 + np.add.outer((y - 0.3) ** 2, (x - 0.5) ** 2)
    clamped = np.zeros(z.shape, dtype=np.int64)
    clamped[:, 5:] = 1 + np.arange(6)[:, None] % 3
    clamped[0, 4] = 2
    z[2, 6] = np.nan
    return Landscape(x=x, y=y, z=z, convergence_point=(0.0, 0.0, float(z[1, 2])), metadata={"decomposition": "Plane"},
                     tag="plane_[1, 5, 10]", surfaces={"accuracy": 1 - z / 4}, clamped=clamped,
                     markers={"A": (0.0, 0.0, 0.29), "B": (1.0, 0.0, 0.54), "C": (0.5, 1.0, 0.69)})


def clamped_line() -> Landscape:
    """An interpolation whose points beyond B had variances clamped (one of them NaN, its accuracy NaN too)."""
    x = np.linspace(-0.5, 1.5, 9)
    z = (x - 1.0) ** 2 + 0.25
    clamped = np.where(x > 1.0, 4, 0)
    z[8] = np.nan
    acc = 1 - z / 4
    return Landscape(x=x, y=np.zeros(0), z=z, convergence_point=(0.0, 0.0, 1.25), clamped=clamped,
                     metadata={"decomposition": "Interpolation"}, tag="interpolation_[1, 10]",
                     surfaces={"accuracy": acc}, markers={"A": (0.0, 0.0, 1.25), "B": (1.0, 0.0, 0.25)})


def wide_plane() -> Landscape:
    """A CNN's Random plane: the loss from 0.0036 at the centre to 15.4 at the corners (no outlier)."""
    s = np.linspace(-1, 1, 21)
    r2 = np.add.outer(s ** 2, s ** 2) / 2
    z = 0.0036 * (15.4 / 0.0036) ** r2
    return Landscape(x=s, y=s.copy(), z=z, convergence_point=(0.0, 0.0, 0.0036), tag="cnn",
                     metadata={"decomposition": "Random", "centre": [0.0, 0.0, 0.0036]},
                     surfaces={"accuracy": np.where(r2 > 0.5, 0.0, 1.0 - r2)})
