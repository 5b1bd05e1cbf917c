"""Dimension variables: which axes of which tensors must be permuted together (private).

Every axis of every tensor of a trace gets a variable; an operation's rule says which of
them are one and the same permutation (``union``), which cannot be permuted at all (``fix``,
with the reason), and how an axis is made of others:

* ``kron(a, b)``: an axis reshaped from two (``(heads, head_dim) -> heads * head_dim``,
  ``(channels, h, w) -> channels * h * w``): its permutation is ``i * |b| + j -> a(i) * |b| + b(j)``;
* ``cat(a, b)``: an axis split or sliced into consecutive parts (a packed ``q, k, v``):
  each part is permuted within itself.

Variables are a union-find; a root holds the structure (``kron`` or ``cat`` of children)
and whether it is fixed (the identity). Unifying two structured variables unifies their
children when their parts have the same sizes, else fixes both: a layout the rules cannot
follow is never permuted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["Dims", "Layout"]

#: A resolved axis: ``("var", root, n)``, ``("fixed", n)``, ``("kron", [layouts])``, ``("cat", [layouts])``.
Layout = tuple[Any, ...]


class Dims:
    """The variables of one trace (see the module docstring)."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.size: list[int] = []
        self.struct: dict[int, tuple[str, list[int]]] = {}
        self.fixed: dict[int, str] = {}

    # -- variables -------------------------------------------------------------------------
    def new(self, size: int, fixed: str | None = None) -> int:
        v = len(self.parent)
        self.parent.append(v)
        self.size.append(int(size))
        if fixed is not None or size <= 1:
            self.fixed[v] = fixed or "one element"
        return v

    def find(self, v: int) -> int:
        root = v
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[v] != root:  # path compression
            self.parent[v], v = root, self.parent[v]
        return root

    def is_fixed(self, v: int) -> bool:
        return self.find(v) in self.fixed

    def reason(self, v: int) -> str | None:
        return self.fixed.get(self.find(v))

    def fix(self, v: int, reason: str) -> None:
        r = self.find(v)
        if r not in self.fixed:
            self.fixed[r] = reason
        for c in self.struct.get(r, ("", []))[1]:
            if not self.is_fixed(c):
                self.fix(c, reason)

    def children(self, v: int) -> tuple[str, list[int]] | None:
        return self.struct.get(self.find(v))

    # -- structure -------------------------------------------------------------------------
    def factors(self, v: int) -> list[int]:
        """The factors of a kron axis, nested krons flattened (a plain axis: itself)."""
        r = self.find(v)
        s = self.struct.get(r)
        if s is not None and s[0] == "kron":
            return [f for c in s[1] for f in self.factors(c)]
        return [r]

    def segments(self, v: int) -> list[int]:
        """The parts of a cat axis, nested cats flattened (a plain axis: itself)."""
        r = self.find(v)
        s = self.struct.get(r)
        if s is not None and s[0] == "cat":
            return [p for c in s[1] for p in self.segments(c)]
        return [r]

    def kron(self, vs: Sequence[int]) -> int:
        """The axis of several axes reshaped into one (size-1 axes left out)."""
        vs = [v for v in vs if self.size[self.find(v)] > 1]
        if not vs:
            return self.new(1)
        if len(vs) == 1:
            return vs[0]
        v = self.new(math.prod(self.size[self.find(x)] for x in vs))
        self.struct[v] = ("kron", list(vs))
        if all(self.is_fixed(x) for x in vs):
            self.fixed[v] = self.reason(vs[0]) or "fixed"
        return v

    def cat(self, vs: Sequence[int]) -> int:
        """The axis of several axes concatenated (empty ones left out)."""
        vs = [v for v in vs if self.size[self.find(v)] > 0]
        if len(vs) == 1:
            return vs[0]
        v = self.new(sum(self.size[self.find(x)] for x in vs))
        self.struct[v] = ("cat", list(vs))
        if all(self.is_fixed(x) for x in vs):
            self.fixed[v] = self.reason(vs[0]) or "fixed"
        return v

    def _refine(self, r: int, kind: str, sizes: Sequence[int]) -> list[int]:
        """A plain root made ``kind`` of new variables of ``sizes`` (fixed if it is)."""
        reason = self.fixed.get(r)
        kids = [self.new(s, reason) for s in sizes]
        self.struct[r] = (kind, kids)
        return kids

    def split_kron(self, v: int, sizes: Sequence[int], why: str) -> list[int]:
        """The variables of the axes ``v`` is reshaped into (product ``sizes``)."""
        n = self.size[self.find(v)]
        if math.prod(sizes) != n:
            raise ValueError(f"cannot split an axis of {n} into {list(sizes)}")
        big = [s for s in sizes if s > 1]
        if len(big) <= 1:
            out = []
            for s in sizes:
                out.append(v if s > 1 else self.new(s))
            return out
        f = self.factors(v)
        # every boundary between target axes must fall between factors: refine plain factors that a boundary cuts
        targets = _bounds(big)
        changed = True
        while changed:
            changed = False
            fs = [self.size[x] for x in f]
            have = _bounds(fs)
            cuts = [b for b in targets if b not in have]
            if not cuts:
                break
            start = 1
            for i, x in enumerate(f):
                end = start * fs[i]
                cut = sorted(b for b in cuts if start < b < end)
                inside = [b // start for b in cut]
                if inside:
                    if x in self.struct or any(b % start for b in cut) or not _divides([*inside, fs[i]]):
                        self.fix(v, why)
                        return [self.new(s, why) for s in sizes]
                    pieces = _pieces(fs[i], inside)
                    self._refine(x, "kron", pieces)
                    f = self.factors(v)
                    changed = True
                    break
                start = end
        # group the factors between consecutive target boundaries
        out_big, i, fs = [], 0, [self.size[x] for x in f]
        for s in big:
            group, p = [], 1
            while p < s:
                group.append(f[i])
                p *= fs[i]
                i += 1
            out_big.append(self.kron(group))
        it = iter(out_big)
        return [next(it) if s > 1 else self.new(s) for s in sizes]

    def split_cat(self, v: int, sizes: Sequence[int], why: str) -> list[int]:
        """The variables of the consecutive parts of ``sizes`` that axis ``v`` is cut into."""
        r = self.find(v)
        n = self.size[r]
        if sum(sizes) != n:
            raise ValueError(f"cannot cut an axis of {n} into {list(sizes)}")
        nonzero = [s for s in sizes if s > 0]
        if len(nonzero) == 1:
            return [v if s > 0 else self.new(0) for s in sizes]
        targets = _sums(nonzero)
        if r in self.fixed and r not in self.struct:
            return [self.new(s, self.fixed[r]) for s in sizes]
        s = self.struct.get(r)
        if s is not None and s[0] == "kron":
            f = self.factors(r)
            head, rest = f[0], f[1:]
            stride = n // self.size[head]
            if head in self.fixed and all(b % stride == 0 for b in targets):
                out = []
                for k in sizes:
                    out.append(self.kron([self.new(k // stride, self.fixed[head]), *rest]) if k else self.new(0))
                return out
            self.fix(r, why)
            return [self.new(k, why) for k in sizes]
        if s is None:
            self._refine(r, "cat", nonzero)
        segs = self.segments(r)
        # refine plain segments that a boundary cuts
        while True:
            ss = [self.size[x] for x in segs]
            have = set(_sums(ss))
            cuts = [b for b in targets if b not in have]
            if not cuts:
                break
            start = 0
            for i, x in enumerate(segs):
                end = start + ss[i]
                inside = sorted(b - start for b in cuts if start < b < end)
                if inside:
                    if x in self.struct:
                        self.fix(r, why)
                        return [self.new(k, why) for k in sizes]
                    bounds = [0, *inside, ss[i]]
                    self._refine(x, "cat", [b - a for a, b in itertools.pairwise(bounds)])
                    break
                start = end
            segs = self.segments(r)
        out, i = [], 0
        ss = [self.size[x] for x in segs]
        for k in sizes:
            if k == 0:
                out.append(self.new(0))
                continue
            group, p = [], 0
            while p < k:
                group.append(segs[i])
                p += ss[i]
                i += 1
            out.append(self.cat(group))
        return out

    # -- unification -----------------------------------------------------------------------
    def union(self, a: int, b: int, why: str = "incompatible layouts") -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] != self.size[rb]:
            self.fix(ra, why)
            self.fix(rb, why)
            return
        sa, sb = self.struct.get(ra), self.struct.get(rb)
        fa, fb = self.fixed.get(ra), self.fixed.get(rb)
        self.parent[rb] = ra
        if sa is None and sb is not None:
            self.struct[ra] = sb
        self.struct.pop(rb, None)
        reason = fa or fb
        if fb is not None:
            self.fixed.pop(rb, None)
        if sa is not None and sb is not None:
            self._unify_structs(ra, sa, sb, why)
        if reason is not None:
            self.fixed.pop(ra, None)
            self.fix(ra, reason)

    def _unify_structs(self, root: int, sa: tuple[str, list[int]], sb: tuple[str, list[int]], why: str) -> None:
        kind = sa[0]
        if kind == sb[0]:
            ca = [x for c in sa[1] for x in (self.factors(c) if kind == "kron" else self.segments(c))]
            cb = [x for c in sb[1] for x in (self.factors(c) if kind == "kron" else self.segments(c))]
            if [self.size[self.find(x)] for x in ca] == [self.size[self.find(x)] for x in cb]:
                for x, y in zip(ca, cb):
                    self.union(x, y, why)
                return
            # the same axis cut two ways: refine both to their common boundaries when plain
            sizes_a = [self.size[self.find(x)] for x in ca]
            sizes_b = [self.size[self.find(x)] for x in cb]
            common = sorted(set(_bounds(sizes_a) if kind == "kron" else _sums(sizes_a))
                            | set(_bounds(sizes_b) if kind == "kron" else _sums(sizes_b)))
            n = self.size[root]
            if kind == "kron":
                inner = [c for c in common if 1 < c < n]
                parts = _pieces(n, inner) if _divides([*inner, n]) else None
                if parts is not None:
                    xa = self._resplit(root, ca, parts, "kron", why)
                    xb = self._resplit(root, cb, parts, "kron", why)
                    if xa is not None and xb is not None:
                        for x, y in zip(xa, xb):
                            self.union(x, y, why)
                        self.struct[root] = ("kron", xa)
                        return
            else:
                bounds = [0, *[c for c in common if 0 < c < n], n]
                parts = [b - a for a, b in itertools.pairwise(bounds)]
                xa = self._resplit(root, ca, parts, "cat", why)
                xb = self._resplit(root, cb, parts, "cat", why)
                if xa is not None and xb is not None:
                    for x, y in zip(xa, xb):
                        self.union(x, y, why)
                    self.struct[root] = ("cat", xa)
                    return
        self.struct[root] = sa
        self.fix(root, why)
        for c in sb[1]:
            self.fix(c, why)

    def _resplit(self, root: int, parts_now: list[int], sizes: list[int], kind: str, why: str) -> list[int] | None:
        """``parts_now`` (the flattened children of one structure) cut further into ``sizes``."""
        out: list[int] = []
        i = 0
        for x in parts_now:
            r = self.find(x)
            n = self.size[r]
            group, p = [], (1 if kind == "kron" else 0)
            while p < n and i < len(sizes):
                group.append(sizes[i])
                p = p * sizes[i] if kind == "kron" else p + sizes[i]
                i += 1
            if p != n:
                return None
            if len(group) == 1:
                out.append(r)
            elif r in self.struct:
                return None
            else:
                out.extend(self._refine(r, kind, group))
        return out

    # -- reading ---------------------------------------------------------------------------
    def layout(self, v: int) -> Layout:
        """The resolved structure of axis ``v`` (fixed parts collapsed)."""
        r = self.find(v)
        n = self.size[r]
        s = self.struct.get(r)
        if s is not None:
            kids = [self.layout(c) for c in s[1]]
            if all(k[0] == "fixed" for k in kids):
                return ("fixed", n)
            return (s[0], kids)
        if r in self.fixed or n <= 1:
            return ("fixed", n)
        return ("var", r, n)


def _bounds(sizes: Sequence[int]) -> list[int]:
    """The cumulative products of a factor list, without the last (where the axes meet)."""
    out, p = [], 1
    for s in sizes[:-1]:
        p *= s
        out.append(p)
    return out


def _sums(sizes: Sequence[int]) -> list[int]:
    out, p = [], 0
    for s in sizes[:-1]:
        p += s
        out.append(p)
    return out


def _pieces(n: int, cuts: Sequence[int]) -> list[int]:
    """The factors of ``n`` between cumulative products ``cuts`` (each dividing the next)."""
    out, prev = [], 1
    for c in [*cuts, n]:
        out.append(c // prev)
        prev = c
    return out


def _divides(chain: Sequence[int]) -> bool:
    """Whether each number divides the next (cumulative products of whole factors)."""
    return all(b % a == 0 for a, b in itertools.pairwise(chain))
