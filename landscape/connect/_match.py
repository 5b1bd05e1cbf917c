"""Weight matching and activation matching (private).

Weight matching (Ainsworth et al. 2023, Git Re-Basin) maximises ``sum_l <W_l^A, pi(W_l^B)>`` over
the permutation groups by coordinate ascent: each iteration visits the groups in a seeded
random order, and for each builds the cost matrix ``C[i, j]`` of assigning B's unit ``j`` to
A's unit ``i`` with every other group held, then solves it as one linear assignment
(SciPy's ``linear_sum_assignment``). A step is kept only when it raises the objective, so the
objective never decreases; matching stops after an iteration with no step kept. Attention
heads and the features of a head are permutations of one axis together (``kron``): one at a
time, neither can move while the other is wrong, so each iteration also matches them jointly
(head ``i`` to head ``j`` by the best matching of their features, then the features given the
heads), kept when it raises the objective.

The cost matrix of a group is built one tensor at a time (streamed): for each tensor axis
carrying the group, A's slices and B's (other axes permuted) are multiplied and added in.
Memory: the two models (the caller's), a permuted copy of the tensor being read (and, where
the group is part of an axis, a gathered copy of each side), and the ``n x n`` float64 cost
matrix of the group being solved; never a permuted copy of a model.

Activation matching (Git Re-Basin's, one pass over the data) solves each group from the
inner products of A's and B's activations of the layers carrying it alone (``C = sum over
samples and such layers of a_i b_j``: a layer's output before and after its nonlinearity,
so that units a ReLU never opens are still told apart); groups seen in no such activation (the parts of a
split or reshaped axis: attention heads, the features of one head) are then weight-matched
with the others held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from landscape.connect._spec import PermutationSpec, groups_in, kron_pairs, layout_index, positions
from landscape.connect._trace import Recorder, model_call, run_call, shell

__all__ = ["weight_matching", "activation_matching", "objective", "solve"]

#: Operations whose output repeats an input's values (a view, a copy): not a layer's activation.
_NOT_ACTIVATIONS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
                    "slice", "select", "alias", "detach", "clone", "_to_copy", "lift_fresh", "split",
                    "split_with_sizes", "cat", "contiguous", "lift_fresh_copy"}


#: Elements per block of the objective's float64 sum (8 MB per operand).
_BLOCK = 1 << 20


def solve(cost: torch.Tensor) -> torch.Tensor:
    """The assignment maximising ``sum_i cost[i, p[i]]`` (``p`` as a LongTensor)."""
    _, cols = linear_sum_assignment(cost.numpy(), maximize=True)
    return torch.as_tensor(cols, dtype=torch.long)


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


class _Costs:
    """Cost matrices of groups from the tensors of A and B (see the module docstring)."""

    def __init__(self, spec: PermutationSpec, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor],
                 keys: Iterable[str]) -> None:
        self.spec, self.a, self.b = spec, a, b
        keys = [k for k in keys if k in spec.axes]
        self.sites: dict[str, list[tuple[str, int]]] = {g: [] for g in spec.groups}
        for k in keys:
            for axis, ax in enumerate(spec.axes[k]):
                for g in groups_in(ax):
                    if g in self.sites and (k, axis) not in self.sites[g]:
                        self.sites[g].append((k, axis))
        self.keys = keys
        self._pos: dict[tuple[str, int, str], torch.Tensor] = {}
        #: groups carried by two axes of one tensor: their steps are checked on the objective itself
        self.quadratic = {g for g, s in self.sites.items() if len({k for k, _ in s}) < len(s)}

    def position(self, key: str, axis: int, group: Any) -> torch.Tensor:
        name = group if isinstance(group, str) else repr(group)
        got = self._pos.get((key, axis, name))
        if got is None:
            got = positions(self.spec.axes[key][axis], group)
            assert got is not None
            self._pos[(key, axis, name)] = got
        return got

    def heads(self) -> dict[str, list[tuple[str, int, int]]]:
        """Groups that are the outer factor of a ``kron`` with another (attention heads): their inner
        groups (the features of a head) and sizes."""
        found: dict[str, list[tuple[str, int, int]]] = {}
        for key in self.keys:
            for ax in self.spec.axes[key]:
                for h, d, nh, nd in kron_pairs(ax):
                    if (d, nh, nd) not in found.setdefault(h, []):
                        found[h].append((d, nh, nd))
        return found

    def head_step(self, h: str, inner: Sequence[tuple[str, int, int]], perms: dict[str, torch.Tensor]
                  ) -> dict[str, torch.Tensor] | None:
        """Heads and their features matched jointly: head ``i`` to head ``j`` by the best matching of their
        features (one linear assignment per pair of heads, on the joint cost), then each inner group given
        the heads; the new permutations, or None when they do not raise the objective."""
        joint = {d: self.cost(("kron", h, d), perms).reshape(nh, nd, nh, nd) for d, nh, nd in inner}
        nh = inner[0][1]
        heads = torch.zeros(nh, nh, dtype=torch.float64)
        for c in joint.values():
            for i in range(nh):
                for j in range(nh):
                    block = c[i, :, j, :]
                    heads[i, j] += float(block[torch.arange(block.shape[0]), solve(block)].sum())
        new = {h: solve(heads)}
        for d, c in joint.items():
            new[d] = solve(torch.stack([c[i, :, int(new[h][i]), :] for i in range(nh)]).sum(0))
        if all(torch.equal(new[g], perms[g]) for g in new):
            return None
        sites = sorted({k for g in new for k, _ in self.sites[g]})
        if not self.objective({**perms, **new}, sites) > self.objective(perms, sites) + 1e-12:
            return None
        return new

    def cost(self, group: Any, perms: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The cost matrix of ``group`` (a group's name, or a ``("kron", h, d)`` pair: their joint units)
        with every other group held at ``perms``."""
        skip: Any
        if isinstance(group, str):
            n, sites, skip = self.spec.groups[group], self.sites[group], group
            target: Any = group
        else:
            _, h, d = group
            n = self.spec.groups[h] * self.spec.groups[d]
            target = ("kron", [("var", h, self.spec.groups[h]), ("var", d, self.spec.groups[d])])
            sites = [(k, a) for k, a in self.sites[h] if (k, a) in self.sites[d] and
                     positions(self.spec.axes[k][a], target) is not None]
            skip = frozenset((h, d))
        c = torch.zeros(n, n, dtype=torch.float64)
        for key, axis in sites:
            ta, tb = self.a[key], self.b[key]
            dt = _work_dtype(ta)
            lay = self.spec.axes[key]
            for a2, ax in enumerate(lay):
                idx = layout_index(ax, perms, skip=skip if a2 == axis else None)
                if idx is not None:
                    tb = tb.index_select(a2, idx.to(tb.device))
            k = self.position(key, axis, target)
            c += _gram(ta.detach(), tb.detach(), axis, k, n, dt)
            del tb
        return c

    def objective(self, perms: Mapping[str, torch.Tensor], keys: Iterable[str] | None = None) -> float:
        """``sum <A, pi(B)>`` over the tensors (float64, a block of elements at a time)."""
        total = 0.0
        for key in (self.keys if keys is None else keys):
            fa = self.a[key].detach().reshape(-1)
            fb = self.spec.permute(key, self.b[key], perms).detach().reshape(-1)
            for lo in range(0, fa.numel(), _BLOCK):
                total += float((fa[lo:lo + _BLOCK].double() * fb[lo:lo + _BLOCK].double()).sum())
        return total


def _gram(ta: torch.Tensor, tb: torch.Tensor, axis: int, k: torch.Tensor, n: int, dt: torch.dtype) -> torch.Tensor:
    """``C[i, j] = sum over the other positions of A[unit i] * B[unit j]`` along ``axis`` (``k``: the axis
    positions of each unit, one per row when the group is the whole axis). The first or last axis of
    a contiguous tensor of one group is read in place; otherwise the units are gathered first."""
    whole = k.shape[1] == 1 and k.shape[0] == ta.shape[axis]
    if whole and ta.dtype == dt and ta.is_contiguous() and tb.is_contiguous():
        if axis == 0:
            return (ta.reshape(n, -1) @ tb.reshape(n, -1).T).cpu().to(torch.float64)
        if axis == ta.dim() - 1:
            return (ta.reshape(-1, n).T @ tb.reshape(-1, n)).cpu().to(torch.float64)
    idx = k.reshape(-1).to(ta.device)
    sel_a = ta.movedim(axis, 0).reshape(ta.shape[axis], -1).index_select(0, idx).reshape(n, -1).to(dt)
    sel_b = tb.movedim(axis, 0).reshape(tb.shape[axis], -1).index_select(0, idx).reshape(n, -1).to(dt)
    return (sel_a @ sel_b.T).cpu().to(torch.float64)


def objective(spec: PermutationSpec, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor],
              perms: Mapping[str, torch.Tensor], keys: Iterable[str]) -> float:
    """``sum <A, pi(B)>`` over ``keys`` (float64)."""
    return _Costs(spec, a, b, keys).objective(perms)


def weight_matching(spec: PermutationSpec, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor],
                    keys: Sequence[str], *, seed: int, max_iter: int = 100,
                    init: Mapping[str, torch.Tensor] | None = None, hold: Iterable[str] = ()
                    ) -> tuple[dict[str, torch.Tensor], int, list[float]]:
    """``(perms, iterations, objective history)`` of weight matching B onto A (the module docstring);
    ``hold``: groups kept at ``init``."""
    costs = _Costs(spec, a, b, keys)
    perms = {g: (init[g].clone() if init is not None and g in init else torch.arange(n))
             for g, n in spec.groups.items()}
    held = set(hold)
    groups = [g for g in spec.groups if g not in held and costs.sites.get(g)]
    history = [costs.objective(perms)]
    rng = np.random.default_rng(seed)
    iterations = 0
    for _ in range(max_iter):
        iterations += 1
        progress = False
        for gi in rng.permutation(len(groups)):
            g = groups[int(gi)]
            c = costs.cost(g, perms)
            new = solve(c)
            rows = torch.arange(len(new))
            before, after = float(c[rows, perms[g]].sum()), float(c[rows, new].sum())
            if not after > before + 1e-12 * max(1.0, abs(before)):
                continue
            if g in costs.quadratic:  # the cost is exact only for a group on one axis of each tensor
                sites = sorted({k for k, _ in costs.sites[g]})
                old = costs.objective(perms, sites)
                trial = {**perms, g: new}
                if not costs.objective(trial, sites) > old:
                    continue
            perms[g] = new
            progress = True
        for h, inner in costs.heads().items():  # heads and their features as one move
            if h in held or any(d in held for d, _, _ in inner):
                continue
            moved = costs.head_step(h, inner, perms)
            if moved is not None:
                perms.update(moved)
                progress = True
        history.append(costs.objective(perms))
        if not progress:
            break
    return perms, iterations, history


def _activation_sites(spec: PermutationSpec) -> dict[str, list[tuple[int, int, int]]]:
    """For each group, the layer outputs carrying it alone on one axis (the other axes still):
    ``(event, output, axis)``; views and copies of another output left out."""
    found: dict[str, list[tuple[int, int, int]]] = {}
    for k, (op, _module, outs) in enumerate(spec.events):
        if op in _NOT_ACTIVATIONS:
            continue
        for j, lay in enumerate(outs):
            free = [a for a, ax in enumerate(lay) if ax[0] != "fixed"]
            if len(free) == 1 and lay[free[0]][0] == "var" and lay[free[0]][1] in spec.groups:
                found.setdefault(lay[free[0]][1], []).append((k, j, free[0]))
    return found


def _features(model: nn.Module, state: Mapping[str, torch.Tensor], batch: Any, task: Any,
              keep: Mapping[int, int], names: Mapping[int, str]) -> dict[int, torch.Tensor]:
    net = shell(model, state)
    args, kwargs = model_call(net, task, batch)
    rec = Recorder(keep)
    run_call(net, args, kwargs, rec)
    for k in keep:
        if k >= len(rec.names) or not rec.names[k].endswith(names[k]):
            raise ValueError("The network runs other operations on this batch than on the one it was traced on "
                             "(data-dependent layers), so its activations cannot be matched layer by layer. HINT: "
                             "method='weights' needs no activations.")
    return rec.kept


def activation_matching(spec: PermutationSpec, model_a: nn.Module, model_b: nn.Module,
                        a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], batches: Sequence[Any],
                        task: Any, keys: Sequence[str], *, seed: int, max_iter: int = 100
                        ) -> tuple[dict[str, torch.Tensor], int, list[float], dict[str, str]]:
    """``(perms, iterations, history, how)``: activation matching over ``batches``, then weight matching
    of the groups no single activation carries (``how[group]`` says which)."""
    sites = _activation_sites(spec)
    keep = {k: j for found in sites.values() for k, j, _ in found}
    names = {k: spec.events[k][0] for k in keep}
    gram = {g: torch.zeros(spec.groups[g], spec.groups[g], dtype=torch.float64) for g in sites}
    for batch in batches:
        fa = _features(model_a, a, batch, task, keep, names)
        fb = _features(model_b, b, batch, task, keep, names)
        for g, found in sites.items():
            for k, _, axis in found:
                xa = fa[k].movedim(axis, 0).reshape(spec.groups[g], -1)
                xb = fb[k].movedim(axis, 0).reshape(spec.groups[g], -1)
                dt = _work_dtype(xa)
                gram[g] += (xa.to(dt) @ xb.to(dt).T).to(torch.float64)
        del fa, fb
    perms = {g: torch.arange(n) for g, n in spec.groups.items()}
    how: dict[str, str] = {}
    for g, c in gram.items():
        perms[g] = solve(c)
        how[g] = "activations"
    rest = [g for g in spec.groups if g not in gram]
    iterations, history = 1, list[float]()
    if rest:
        perms, iterations, history = weight_matching(spec, a, b, keys, seed=seed, max_iter=max_iter, init=perms,
                                                     hold=list(gram))
        iterations += 1
        how.update(dict.fromkeys(rest, "weights"))
    else:
        history = [objective(spec, a, b, perms, keys)]
    return perms, iterations, history, how
