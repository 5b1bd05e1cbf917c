"""The permutation structure of a network: its groups, each tensor's axes, what stays still (private).

A :class:`PermutationSpec` says, for every parameter and buffer of a network, how each of
its axes is permuted: by one permutation group (``("var", group, n)``), not at all
(``("fixed", n)``), or as a reshape (``("kron", [...])``) or concatenation (``("cat", [...])``)
of groups. It is found from a trace of the network (:func:`permutation_spec`) or given by
hand in Git Re-Basin's form (:meth:`PermutationSpec.from_axes`). Permuting is
``index_select`` along each axis (:meth:`PermutationSpec.apply`): exact, and undone bit for bit
by the inverse permutations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape.connect._dims import Layout
from landscape.connect._rules import INPUT, OUTPUT, Propagation, propagate
from landscape.connect._trace import traced

__all__ = ["PermutationSpec", "permutation_spec", "layout_index", "layout_size", "groups_in", "positions",
           "kron_pairs", "EXPECTED"]

#: Reasons an axis stays still that every network has (its input and output, convolution positions).
EXPECTED = (INPUT, OUTPUT, "spatial positions", "kernel positions", "sequence positions",
            "rows looked up by index")


@dataclass
class PermutationSpec:
    """How every axis of a network's tensors is permuted (see the module docstring).

    Attributes
    ----------
    groups : dict of str to int
        The permutation groups and their sizes, named after the first tensor axis that
        carries each (``"fc1.weight[0]"``; a part of a reshaped or split axis adds its
        position, ``"h.0.attn.c_attn.weight[1].0.1"``).
    axes : dict of str to tuple of layouts
        By state-dict key, each axis's layout (module docstring); tied weights appear under
        each of their keys.
    unpermuted : list of (str, int, str)
        Every axis longer than one that stays still: ``(key, axis, why)``, with the layer
        and the operation that fixed it.
    source : str
        ``"traced"`` (found from a trace of the network's operations) or ``"given"``.
    dtypes : tuple of str
        The floating dtypes the traced operations computed in (a float64 network whose norms
        compute in float32 is checked at float32's tolerance).
    """

    groups: dict[str, int]
    axes: dict[str, tuple[Layout, ...]]
    unpermuted: list[tuple[str, int, str]] = field(default_factory=list)
    source: str = "traced"
    events: list[tuple[str, str, list[tuple[Layout, ...]]]] = field(default_factory=list, repr=False)
    dtypes: tuple[str, ...] = ()

    # -- reading ---------------------------------------------------------------------------
    def sites(self, group: str) -> list[tuple[str, int]]:
        """The ``(key, axis)`` whose layout holds ``group``."""
        return [(k, a) for k, lay in self.axes.items() for a, ax in enumerate(lay) if group in groups_in(ax)]

    def surprising(self) -> list[tuple[str, int, str]]:
        """Axes fixed for a reason other than the network's input and output, positions and lookups:
        what keeps part of a network unpermuted."""
        return [u for u in self.unpermuted if not any(e in u[2] for e in EXPECTED)]

    def report(self) -> str:
        """The groups in one line, then each reason a layer stays unpermuted (besides the expected ones)."""
        lines = [f"{len(self.groups)} permutation groups ({sum(self.groups.values())} units) over "
                 f"{sum(1 for lay in self.axes.values() if any(ax[0] != 'fixed' for ax in lay))} tensors, "
                 f"{self.source}"]
        by_reason: dict[str, list[str]] = {}
        for key, axis, why in self.surprising():
            by_reason.setdefault(why, []).append(f"{key}[{axis}]")
        for why, where in by_reason.items():
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            lines.append(f"  not permuted: {shown}: {why}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"PermutationSpec({len(self.groups)} groups, {len(self.axes)} tensors, {self.source})"

    # -- permuting -------------------------------------------------------------------------
    def apply(self, state: Mapping[str, torch.Tensor], perms: Mapping[str, torch.Tensor],
              skip: tuple[str, int] | None = None) -> dict[str, torch.Tensor]:
        """``state`` with every axis permuted (``index_select``; tensors not permuted are the same
        objects). ``skip``: the group left out (the identity)."""
        return {k: self.permute(k, t, perms, skip) for k, t in state.items()}

    def permute(self, key: str, t: torch.Tensor, perms: Mapping[str, torch.Tensor],
                skip: Any = None, axis_only: int | None = None) -> torch.Tensor:
        """One tensor of the state permuted (all axes, or ``axis_only``)."""
        lay = self.axes.get(key)
        if lay is None:
            return t
        out = t
        for a, ax in enumerate(lay):
            if ax[0] == "fixed" or (axis_only is not None and a != axis_only):
                continue
            idx = layout_index(ax, perms, skip)
            if idx is not None:
                out = out.index_select(a, idx.to(out.device))
        return out

    # -- hand-written ----------------------------------------------------------------------
    @classmethod
    def from_axes(cls, axes_to_perm: Mapping[str, Sequence[str | None]], model: nn.Module) -> PermutationSpec:
        """A spec from Git Re-Basin's ``axes_to_perm``: ``{key: (group or None, ...)}``, one entry per axis
        (PyTorch's order: a Linear's weight is ``(out, in)``). Keys left out stay still.

        Raises
        ------
        InvalidParameterError
            A key the network does not have, a wrong number of axes, or a group given axes of two sizes.
        """
        state = model.state_dict()
        groups: dict[str, int] = {}
        axes: dict[str, tuple[Layout, ...]] = {}
        for key, per_axis in axes_to_perm.items():
            if key not in state:
                raise InvalidParameterError(
                    f"The 'spec' parameter names {key!r}, which the network does not have. HINT: its keys are "
                    f"those of model.state_dict(), e.g. {list(state)[:4]}.")
            t = state[key]
            if isinstance(per_axis, str) or len(per_axis) != t.dim():
                raise InvalidParameterError(
                    f"The 'spec' parameter gives {key!r} {per_axis!r}; the tensor has {t.dim()} axes (shape "
                    f"{tuple(t.shape)}): give one group name or None per axis.")
            lay: list[Layout] = []
            for a, g in enumerate(per_axis):
                n = int(t.shape[a])
                if g is None:
                    lay.append(("fixed", n))
                    continue
                if groups.setdefault(str(g), n) != n:
                    raise InvalidParameterError(
                        f"The 'spec' parameter puts axis {a} of {key!r} ({n} long) in group {g!r}, whose other "
                        f"axes are {groups[str(g)]} long. HINT: a group permutes axes of one length.")
                lay.append(("var", str(g), n))
            axes[key] = tuple(lay)
        unpermuted = [(k, a, "not in the given spec") for k, t in state.items() for a in range(t.dim())
                      if t.shape[a] > 1 and (k not in axes or axes[k][a][0] == "fixed")]
        return cls(groups, axes, unpermuted, "given")


def groups_in(ax: Layout) -> list[str]:
    """The groups an axis's layout holds."""
    if ax[0] == "var":
        return [ax[1]]
    if ax[0] in ("kron", "cat"):
        return [n for c in ax[1] for n in groups_in(c)]
    return []


def layout_size(ax: Layout) -> int:
    """The length of an axis of this layout."""
    if ax[0] in ("var",):
        return int(ax[2])
    if ax[0] == "fixed":
        return int(ax[1])
    sizes = [layout_size(c) for c in ax[1]]
    if ax[0] == "kron":
        p = 1
        for s in sizes:
            p *= s
        return p
    return sum(sizes)


def layout_index(ax: Layout, perms: Mapping[str, torch.Tensor], skip: Any = None) -> torch.Tensor | None:
    """The index an axis is permuted by (``out = t.index_select(axis, index)``), or None for the identity;
    ``skip``: a group (or a set of groups) left as the identity."""
    kind = ax[0]
    if kind == "fixed":
        return None
    if kind == "var":
        if ax[1] == skip or (isinstance(skip, (set, frozenset)) and ax[1] in skip):
            return None
        return perms.get(ax[1])
    kids = ax[1]
    idx = [layout_index(c, perms, skip) for c in kids]
    if all(i is None for i in idx):
        return None
    sizes = [layout_size(c) for c in kids]
    full = [i if i is not None else torch.arange(n) for i, n in zip(idx, sizes)]
    if kind == "cat":
        out, o = [], 0
        for i, n in zip(full, sizes):
            out.append(i + o)
            o += n
        return torch.cat(out)
    out_k = full[0]
    for i, n in zip(full[1:], sizes[1:]):
        out_k = (out_k[:, None] * n + i[None, :]).reshape(-1)
    return out_k


def positions(ax: Layout, group: Any) -> torch.Tensor | None:
    """``K`` of shape ``(n, r)``: the axis positions where ``group``'s index is ``i``, in the same order
    for every ``i`` (weight matching compares row ``i`` of one model with row ``j`` of the other).
    ``group``: a group's name, or a part of a layout (a ``kron`` of groups: their joint index)."""
    kind = ax[0]
    if not isinstance(group, str) and _same(ax, group):
        return torch.arange(layout_size(ax)).reshape(-1, 1)
    if kind == "var":
        return torch.arange(int(ax[2])).reshape(-1, 1) if ax[1] == group else None
    if kind == "fixed":
        return None
    kids = ax[1]
    sizes = [layout_size(c) for c in kids]
    for i, c in enumerate(kids):
        k = positions(c, group)
        if k is None:
            continue
        if kind == "cat":
            return k + sum(sizes[:i])
        before, after = 1, 1
        for s in sizes[:i]:
            before *= s
        for s in sizes[i + 1:]:
            after *= s
        n, r = k.shape
        p = torch.arange(before).reshape(1, before, 1, 1)
        q = torch.arange(after).reshape(1, 1, 1, after)
        full = p * (sizes[i] * after) + k.reshape(n, 1, r, 1) * after + q
        return full.reshape(n, -1)
    return None


def _same(a: Layout, b: Layout) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] in ("kron", "cat"):
        return len(a[1]) == len(b[1]) and all(_same(x, y) for x, y in zip(a[1], b[1]))
    return tuple(a) == tuple(b)


def kron_pairs(ax: Layout) -> list[tuple[str, str, int, int]]:
    """The ``kron`` of two groups inside a layout (attention's heads x a head's features):
    ``(outer, inner, outer size, inner size)``."""
    if ax[0] == "kron" and len(ax[1]) == 2 and all(c[0] == "var" for c in ax[1]):
        (_, h, nh), (_, d, nd) = ax[1]
        return [(h, d, int(nh), int(nd))]
    if ax[0] in ("kron", "cat"):
        return [p for c in ax[1] for p in kron_pairs(c)]
    return []


def _group_names(prop: Propagation, keys: Mapping[str, list[str]]) -> dict[int, str]:
    """Each variable root of a parameter axis named after the first axis carrying it."""
    d = prop.dims
    names: dict[int, str] = {}

    def walk(v: int, label: str) -> None:
        r = d.find(v)
        s = d.struct.get(r)
        if s is not None:
            for i, c in enumerate(s[1]):
                walk(c, f"{label}.{i}")
        elif r not in d.fixed and d.size[r] > 1 and r not in names:
            names[r] = label

    for first, _aliases in keys.items():
        for a, v in enumerate(prop.params.get(first, [])):
            walk(v, f"{first}[{a}]")
    return names


def _named(layout: Layout, names: Mapping[int, str]) -> Layout:
    if layout[0] == "var":
        return ("var", names.get(layout[1], f"v{layout[1]}"), int(layout[2]))
    if layout[0] == "fixed":
        return layout
    return (layout[0], [_named(c, names) for c in layout[1]])


def spec_from(prop: Propagation, model: nn.Module) -> PermutationSpec:
    """The spec of a propagated trace: parameters and buffers by state-dict key (aliases included)."""
    d = prop.dims
    keys: dict[str, list[str]] = {}
    state = model.state_dict(keep_vars=True)
    by_id: dict[int, str] = {}
    for k, t in state.items():
        first = by_id.setdefault(id(t), k)
        keys.setdefault(first, []).append(k)
    names = _group_names(prop, keys)
    axes: dict[str, tuple[Layout, ...]] = {}
    unpermuted: list[tuple[str, int, str]] = []
    for first, aliases in keys.items():
        t = state[first]
        vs = next((prop.params[k] for k in aliases if k in prop.params), None)
        if vs is None:
            lay: tuple[Layout, ...] = tuple(("fixed", int(n)) for n in t.shape)
            why = "not used by the forward pass"
            for a, n in enumerate(t.shape):
                if n > 1:
                    unpermuted.extend((k, a, why) for k in aliases)
        else:
            lay = tuple(_named(d.layout(v), names) for v in vs)
            for a, (v, n) in enumerate(zip(vs, t.shape)):
                if n > 1 and lay[a][0] == "fixed":
                    unpermuted.extend((k, a, d.reason(v) or _child_reason(d, v)) for k in aliases)
        for k in aliases:
            axes[k] = lay
    used = {n for lay in axes.values() for ax in lay for n in groups_in(ax)}
    groups: dict[str, int] = {}
    for lay in axes.values():
        for ax in lay:
            _collect(ax, groups)
    groups = {g: n for g, n in groups.items() if g in used}
    events = [(op, mod, [tuple(_named(d.layout(v), names) for v in vs) for vs in outs])
              for op, mod, outs in prop.events]
    return PermutationSpec(groups, axes, unpermuted, "traced", events, prop.dtypes)


def _child_reason(d: Any, v: int) -> str:
    s = d.children(v)
    if s is not None:
        for c in s[1]:
            why = d.reason(c)
            if why:
                return why
    return "fixed"


def _collect(ax: Layout, groups: dict[str, int]) -> None:
    if ax[0] == "var":
        groups.setdefault(ax[1], int(ax[2]))
    elif ax[0] in ("kron", "cat"):
        for c in ax[1]:
            _collect(c, groups)


def permutation_spec(model: nn.Module, batch: Any, task: Any = None) -> PermutationSpec:
    """The permutation structure of ``model``, traced on one ``batch`` (see :mod:`landscape.connect`).

    Parameters
    ----------
    model : nn.Module
    batch : any
        One batch, as the task takes it (a few samples are enough: the trace runs once).
    task : callable, optional
        ``task(model, batch)``; by default ``model(batch[0])`` for a tuple, ``model(**batch)``
        for a dict.

    Returns
    -------
    PermutationSpec

    Examples
    --------
    >>> import torch
    >>> from landscape.connect import permutation_spec
    >>> from landscape.examples import MLP
    >>> spec = permutation_spec(MLP(), (torch.zeros(2, 64), torch.zeros(2)))
    >>> spec.groups
    {'fc1.weight[0]': 128, 'fc2.weight[0]': 128}
    """
    trace = traced(model, task, batch)
    return spec_from(propagate(trace), model)
