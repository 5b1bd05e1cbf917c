"""Independent checks for the integration tests: a landscape's values from a plain loop.

The directions are recomputed from the checkpoint files (the trajectory's PCA, or the
seeded random directions) and checked against the landscape's own path coordinates;
the loss at a grid point is then a ``load_state_dict`` and a forward pass, nothing of
the landscape engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from landscape.geometry._directions import random_directions
from landscape.geometry._pca import pca_trajectory
from tests.landscape._helpers import point_state


def directions(ls, checkpoints: Sequence[dict]) -> tuple[list[str], dict, dict, dict]:
    """``(moved names, centre, v, w)`` of a landscape, recomputed from its checkpoints (last = centre)."""
    names = list(ls.metadata["moved_parameters"])
    centre = checkpoints[-1]
    ref = [centre[n].float() for n in names]
    norm = ls.metadata["normalization"]
    if ls.metadata["decomposition"] == "PCA":
        res = pca_trajectory(lambda k: [checkpoints[k][n].float() for n in names], len(checkpoints),
                             method=ls.metadata.get("pca_method", "mindspore"), normalization=norm)
        v, w = res["v"], res["w"]
        # the same directions as the landscape's: its path is the checkpoints' coordinates on them
        np.testing.assert_allclose(res["coords"][:, 0], ls.path.x, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(res["coords"][:, 1], ls.path.y, rtol=1e-5, atol=1e-7)
    else:
        v, w = random_directions(ref, ls.metadata["seed"], norm, names=names)
    return names, centre, dict(zip(names, v)), dict(zip(names, w))


def assert_grid_values(ls, checkpoints: Sequence[dict], loss_at: Callable[[dict], float],
                       points: Sequence[tuple[int, int]], rel: float = 1e-5) -> None:
    """``ls.z[i, j]`` equals ``loss_at(state at (x[j], y[i]))`` to ``rel`` for each ``(i, j)``."""
    names, centre, v, w = directions(ls, checkpoints)
    for i, j in points:
        want = loss_at(point_state(centre, names, v, w, ls.x[j], ls.y[i]))
        assert math.isclose(float(ls.z[i, j]), want, rel_tol=rel, abs_tol=1e-7), (ls.tag, i, j, ls.z[i, j], want)


def load(path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)
