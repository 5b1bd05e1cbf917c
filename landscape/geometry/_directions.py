"""Random directions, normalization and path coordinates (private).

Directions are lists of float32 CPU tensors aligned with a list of parameter names.

A random direction is drawn tensor by tensor, and a tensor block by block: tensor ``name``'s
standard-normal draw on axis ``k`` (0 or 1) is its elements in C order cut into blocks of
:data:`BLOCK` elements, each drawn by its own CPU generator seeded by the SHA-256 of
``(seed, k, name)`` for the first block (:func:`tensor_seed`) and ``(seed, k, name, j)`` for
block ``j`` (:func:`block_seed`), then normalized against the centre's tensor. So every
tensor of a direction can be drawn again alone, in any process, with the same bits (the
engine may hold the directions or draw each tensor as it is read:
:class:`SeededDirections`), and the blocks of a large tensor are drawn on several threads.
The metadata names the draw (``direction_draw``): ``"per-block"`` (:data:`DRAW`), or
``"per-tensor"`` for landscapes written before the blocks, still drawn their way.

Normalizations (``layer``, ``filter``, ``dfilter``, ``dlayer``, ``weight``, ``none``: Li et
al.'s ``net_plotter.normalize_direction`` and MindSpore's layer normalization; the table is
in docs/generating.md) are computed in float64 and stored as float32. A zero tensor or slice
stays zero (Li et al. divide by ``||d|| + 1e-10``: the same to float32 rounding unless a
slice's norm is below about 1e-3). Tensors of at most one dimension follow the normalization
by default (``biasbn="normalize"``); ``biasbn="li"`` is Li et al.'s convention, the tensor
itself as its direction, and their ``ignore='biasbn'`` is ``ignore="biasbn"`` here.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["NORMALIZATIONS", "BIASBN", "DRAW", "DRAWS", "BLOCK", "normalize_directions", "normalize_tensor",
           "random_directions", "tensor_seed", "block_seed", "SeededDirections",
           "path_coordinates", "grid_axes", "axis_values", "shared_draws", "SHARED_ELEMENTS"]

#: Within :func:`shared_draws`: the draws made, by recipe, axes and centre tensors.
_SHARED: contextvars.ContextVar[dict[Any, Any] | None] = contextvars.ContextVar("landscape_shared_draws",
                                                                                 default=None)
#: Elements (all axes together) up to which :func:`shared_draws` keeps a draw (64 MiB of float32).
SHARED_ELEMENTS = 1 << 24


@contextlib.contextmanager
def shared_draws(raw_hash: Callable[[Any, torch.Tensor], None] | None = None) -> Iterator[None]:
    """Within the block, :meth:`SeededDirections.draw_axes` of the same recipe and axes against the same
    centre tensors, unchanged (PyTorch's version counters) and float32 on the CPU, gives the tensors it
    gave the first time, when they are unchanged too, instead of drawing them again: a landscape's
    engines and the digests it keeps draw its random directions once. A draw is kept up to
    :data:`SHARED_ELEMENTS`, an engine's whatever its size (it holds it anyway: ``held``); what is kept
    is released when the block ends. The same bits either way:
    :meth:`~SeededDirections.draw_axes` is a pure function of the recipe and the centre's values.

    ``raw_hash(h, tensor)``: with it, a kept draw also keeps the SHA-256 of its standard-normal draws
    before normalization, each tensor added by ``raw_hash`` as it is drawn, tensor by tensor with its
    axes in order (:meth:`SeededDirections.kept_draw`): what a digest of the draw would
    otherwise draw again for."""
    token = _SHARED.set({_RAW_HASH: raw_hash})
    try:
        yield
    finally:
        _SHARED.reset(token)


#: The key of :func:`shared_draws`'s ``raw_hash`` in the kept draws.
_RAW_HASH = object()


def _key(recipe: SeededDirections, axes: tuple[int, ...], key_tensors: Sequence[torch.Tensor], finished: bool
         ) -> tuple:
    """Where :func:`shared_draws` keeps a draw (``finished``: an engine's copies of it)."""
    return recipe, axes, tuple(id(t) for t in key_tensors), finished


def _release(shared: dict[Any, Any], recipe: SeededDirections, key_tensors: Sequence[torch.Tensor]) -> None:
    """Forget the draws of ``recipe`` kept against ``key_tensors`` (any axes) that only a held draw keeps
    (beyond :data:`SHARED_ELEMENTS`)."""
    ids = tuple(id(t) for t in key_tensors)
    for k in [k for k in shared if k is not _RAW_HASH and k[0] == recipe and k[2] == ids]:
        if sum(t.numel() for axis in shared[k][2] for t in axis) > SHARED_ELEMENTS:
            del shared[k]


def _shareable(tensors: Sequence[torch.Tensor]) -> bool:
    return all(t.device.type == "cpu" and t.dtype == torch.float32 and not t.is_inference() for t in tensors)


def _versions(tensors: Sequence[torch.Tensor]) -> tuple[int, ...]:
    return tuple(t._version for t in tensors)


NORMALIZATIONS = ("layer", "filter", "dfilter", "dlayer", "weight", "none")
BIASBN = ("normalize", "li")
#: How random directions are drawn, as the metadata records it (``direction_draw``): each block of
#: :data:`BLOCK` elements of each moved tensor from its own generator, seeded by the seed, the axis,
#: the tensor's name and the block's index.
DRAW = "per-block"
#: The draws this module makes: :data:`DRAW`, and ``"per-tensor"`` (one generator per tensor, whatever
#: its size), what landscapes written before the blocks record.
DRAWS = ("per-block", "per-tensor")
#: Elements per block of a draw (4 MiB of float32, about 4 ms on one core): a tensor of at most this many
#: is one block. Part of the draw's definition: changing it changes the directions.
BLOCK = 1 << 20
#: Elements per block of the float64 products (a block's float64 copy is all the memory they take).
_BLOCK = 1 << 20
#: Elements from which draws are made on several threads (two blocks): a thread pool costs about
#: 0.3 ms to start and stop, a block's draw about 4 ms on one core.
THREADED_DRAW = 2 * BLOCK
#: Elements drawn on the threads before the normalizations run (a window of :meth:`SeededDirections.draw_axes`),
#: at least; a window also holds a block for each thread.
WINDOW = 1 << 24


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a matrix of its first-dimension slices (a 0-d tensor is one row of one)."""
    return t.reshape(t.shape[0] if t.dim() >= 1 else 1, -1)


def _product_into(d: torch.Tensor, factor: torch.Tensor, out: torch.Tensor) -> None:
    """``out = float32(float64(d) * factor)`` element by element, in blocks of rows: each element is one
    float64 product rounded once, so the blocks give the bits of the whole-tensor product. ``factor`` is a
    0-d float64 tensor, one per row (``(rows, 1)``) or shaped like ``d``; ``out`` may be ``d``. One float64
    block is allocated and reused (a fresh block per step costs page faults: the draws of a large model
    were bound by them)."""
    if d.numel() <= _BLOCK:  # one block: its float64 copy is the block (three operations, no slicing)
        buf = _rows(d).to(torch.float64)
        if factor.dim() != 0:
            factor = _rows(factor)
            if factor.dtype != torch.float64:
                factor = factor.to(torch.float64)
        _rows(out).copy_(buf.mul_(factor))
        return
    d2, o2 = _rows(d), _rows(out)
    f2 = factor if factor.dim() == 0 else _rows(factor)
    step = max(1, _BLOCK // max(1, d2.shape[1]))
    scratch = torch.empty(min(d2.shape[0], step) * d2.shape[1], dtype=torch.float64)
    for lo in range(0, d2.shape[0], step):
        block = d2[lo:lo + step]
        buf = scratch[:block.numel()].view(block.shape)
        buf.copy_(block)
        buf.mul_(f2 if f2.dim() == 0 else f2[lo:lo + step].to(torch.float64))
        o2[lo:lo + step].copy_(buf)


def _norm64(t: torch.Tensor, *, per_filter: bool = False) -> torch.Tensor:
    """The float64 norm of ``t`` (0-d), or of each first-dimension slice (``(rows, 1)``), computed in
    blocks of :data:`_BLOCK` elements: no float64 copy of a large tensor is made. The blocks are fixed,
    so the bits do not depend on anything but ``t``'s values."""
    if per_filter:
        t2 = _rows(t)
        step = max(1, _BLOCK // max(1, t2.shape[1]))
        if 0 < t2.shape[0] <= step:  # one block: its norms as they are (a cat of one would copy them)
            return torch.linalg.vector_norm(t2, dim=1, keepdim=True, dtype=torch.float64)
        return torch.cat([torch.linalg.vector_norm(t2[lo:lo + step], dim=1, keepdim=True, dtype=torch.float64)
                          for lo in range(0, t2.shape[0], step)]) if t2.shape[0] else \
            torch.zeros((0, 1), dtype=torch.float64)
    flat = t.reshape(-1)
    if flat.numel() <= _BLOCK:
        return torch.linalg.vector_norm(flat, dtype=torch.float64)
    total = torch.zeros((), dtype=torch.float64)
    scratch = torch.empty(_BLOCK, dtype=torch.float64)  # reused: see _product_into
    for lo in range(0, flat.numel(), _BLOCK):
        block = flat[lo:lo + _BLOCK]
        buf = scratch[:block.numel()]
        buf.copy_(block)
        total += buf.square_().sum()
    return total.sqrt()


def _host(p: torch.Tensor) -> torch.Tensor:
    """``p`` on the CPU, contiguous: the norms' order of summation depends neither on the device nor on the
    layout (channels-last kernels)."""
    return p.to("cpu").contiguous()


def _scale(d: torch.Tensor, p: torch.Tensor | None, *, per_filter: bool,
           norms: dict[bool, torch.Tensor] | None = None) -> torch.Tensor:
    """``||p|| / ||d||`` (``p`` None: ``1 / ||d||``) per tensor, or per first-dimension slice as ``(rows, 1)``,
    in float64; 0 where ``d``'s norm is 0. ``p``'s norms are computed on a contiguous host copy of it
    (:func:`_host`), made only when they are not in ``norms``, which keeps them (by ``per_filter``) for the
    next direction's tensor against the same ``p``: the same bits, computed and copied once."""
    def top_norm(filters: bool) -> torch.Tensor:
        assert p is not None
        if norms is None:
            return _norm64(_host(p), per_filter=filters)
        if filters not in norms:
            norms[filters] = _norm64(_host(p), per_filter=filters)
        return norms[filters]

    if per_filter and d.dim() >= 1:
        dn = _norm64(d, per_filter=True)
        top = torch.ones_like(dn) if p is None else top_norm(True)
        # a zero norm's quotient (inf or NaN) is not taken: 0 there, the quotient elsewhere
        return torch.where(dn > 0, top / dn, 0.0)
    dn = _norm64(d)
    top1 = torch.ones((), dtype=torch.float64) if p is None else top_norm(False)
    return (top1 / dn) if dn > 0 else torch.zeros((), dtype=torch.float64)


def normalize_tensor(d: torch.Tensor, p: torch.Tensor, normalization: str, biasbn: str = "normalize", *,
                     out: torch.Tensor | None = None, norms: dict[bool, torch.Tensor] | None = None) -> torch.Tensor:
    """One tensor of a direction normalized against the centre's tensor ``p`` (see the module docstring).

    ``d`` is a contiguous float32 CPU tensor; the result is float32 on the CPU, written into ``out`` when
    given (``out`` may be ``d`` itself: no memory beyond blocks of float64 then). ``p`` may be of any
    floating dtype, layout and device (it is read on the CPU, contiguous, so the result does not depend
    on where the network lives or how its kernels are laid out). ``norms``: a cache of ``p``'s norms shared by
    the calls normalizing against the same ``p`` (see :func:`_scale`).
    """
    p = p.detach()
    if biasbn == "li" and d.dim() <= 1:
        res = p.to("cpu", torch.float32).reshape(d.shape)
        return out.copy_(res) if out is not None else res.clone()
    if out is None:
        out = torch.empty_like(d, dtype=torch.float32, memory_format=torch.contiguous_format)
    if normalization == "none" or d.numel() == 0:
        return out.copy_(d)
    if normalization == "weight":
        _product_into(d, _host(p).reshape(d.shape), out)
    elif normalization in ("layer", "dlayer") or d.dim() == 0:
        _product_into(d, _scale(d, None if normalization in ("dlayer", "dfilter") else p, per_filter=False,
                                norms=norms), out)
    elif normalization in ("filter", "dfilter"):
        _product_into(d, _scale(d, None if normalization == "dfilter" else p, per_filter=True, norms=norms), out)
    else:
        raise ValueError(f"unknown normalization {normalization!r}")
    return out


def normalize_directions(direction: Sequence[torch.Tensor], reference: Sequence[torch.Tensor],
                         normalization: str, biasbn: str = "normalize") -> list[torch.Tensor]:
    """Normalize ``direction`` tensor by tensor against ``reference`` (see the module docstring).

    Parameters
    ----------
    direction, reference : sequence of Tensor
        Aligned lists (the moved parameters, in order).
    normalization : {"layer", "filter", "dfilter", "dlayer", "weight", "none"}
    biasbn : {"normalize", "li"}, default="normalize"
        How tensors with at most one dimension are treated: normalized like the others,
        or, as Li et al. do, replaced by the reference tensor itself.

    Returns
    -------
    list of Tensor
        float32 CPU tensors shaped like ``direction`` (new tensors: the inputs are not changed).
    """
    return [normalize_tensor(d.detach().to("cpu", torch.float32), p, normalization, biasbn)
            for d, p in zip(direction, reference)]


def tensor_seed(seed: int, axis: int, name: str) -> int:
    """The seed of tensor ``name``'s draw on ``axis`` (0: the first direction, 1: the second), and of its
    first block: 63 bits of the SHA-256 of the three, so every tensor has its own stream, which depends
    on nothing else."""
    digest = hashlib.sha256(f"{int(seed)}/{int(axis)}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def block_seed(seed: int, axis: int, name: str, block: int) -> int:
    """The seed of block ``block`` of tensor ``name``'s draw on ``axis``: :func:`tensor_seed` for the first,
    else 63 bits of the SHA-256 of ``"{seed}/{axis}/{name}\\0{block}"`` (a NUL, which no module or
    parameter name holds, parts the name from the index)."""
    if block == 0:
        return tensor_seed(seed, axis, name)
    digest = hashlib.sha256(f"{int(seed)}/{int(axis)}/{name}\0{int(block)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _blocks(numel: int, draw: str) -> list[tuple[int, int]]:
    """The ``(start, stop)`` element ranges of a draw of ``numel`` elements, one per generator."""
    if draw == "per-tensor" or numel <= BLOCK:
        return [(0, numel)]
    return [(lo, min(lo + BLOCK, numel)) for lo in range(0, numel, BLOCK)]


def _fill_block(out: torch.Tensor, name: str, seed: int, axis: int, block: int, lo: int, hi: int, draw: str) -> None:
    """Block ``block`` (elements ``lo:hi`` of the flat contiguous float32 ``out``) of tensor ``name``'s
    standard-normal draw on ``axis`` (see the module docstring): the same bits wherever, whenever and on
    whichever thread it is drawn."""
    s = tensor_seed(seed, axis, name) if draw == "per-tensor" else block_seed(seed, axis, name, block)
    gen = torch.Generator(device="cpu").manual_seed(s)
    torch.randn(hi - lo, generator=gen, dtype=torch.float32, out=out.view(-1)[lo:hi])


def _drawn(p: torch.Tensor, biasbn: str) -> bool:
    """Whether a direction's tensor against ``p`` is drawn (under ``biasbn="li"`` a tensor of at most one
    dimension is the centre's tensor itself)."""
    return not (biasbn == "li" and p.dim() <= 1)


def _normalized(d: torch.Tensor | None, p: torch.Tensor, normalization: str, biasbn: str,
                norms: dict[bool, torch.Tensor] | None = None) -> torch.Tensor:
    """A raw draw (its blocks by :func:`_fill_block`; None: not drawn, see :func:`_drawn`) made a direction's
    tensor against ``p`` (in place of ``d``)."""
    if d is None:
        return p.detach().to("cpu", torch.float32).clone()
    return normalize_tensor(d, p, normalization, biasbn, out=d, norms=norms)


def random_directions(reference: Sequence[torch.Tensor], seed: int, normalization: str, biasbn: str = "normalize",
                      count: int = 2, *, names: Sequence[str]) -> list[list[torch.Tensor]]:
    """``count`` seeded standard-normal directions (axis 0 is ``v``, axis 1 ``w``), normalized.

    Each tensor is drawn from its own generators (by its name in ``names``: the module docstring), so
    a direction does not depend on which other tensors move, and a random line (``count=1``) runs
    along the first axis of the random plane of the same seed.
    """
    recipe = SeededDirections(seed, normalization, biasbn, tuple(names), dims=count)
    return recipe.draw_axes(reference)


@dataclass(frozen=True)
class SeededDirections:
    """Random directions as a recipe: the seed, the normalization and the moved tensors' names.

    Nothing is held: tensor ``i`` of axis ``k`` is the standard-normal draw of ``names[i]`` (the module
    docstring) normalized against the centre's tensor (:func:`normalize_tensor`), drawn when the engine
    needs it (once, or at every read). What ``landscapes.h5`` records for such a landscape is this recipe
    (its metadata), not the tensors.

    Attributes
    ----------
    seed : int
    normalization : str
    biasbn : str
    names : tuple of str
        The moved tensors, in order.
    dims : {1, 2}
        Axes drawn: a line's second direction is zero.
    direction_draw : {"per-block", "per-tensor"}
        How the standard normals are drawn (:data:`DRAWS`; the metadata's ``direction_draw``).
    """

    seed: int
    normalization: str
    biasbn: str
    names: tuple[str, ...]
    dims: int = 2
    direction_draw: str = DRAW

    def __post_init__(self) -> None:
        if self.direction_draw not in DRAWS:
            raise ValueError(f"direction_draw must be one of {DRAWS}, got {self.direction_draw!r}")

    def tensor(self, i: int, axis: int, centre: torch.Tensor) -> torch.Tensor | None:
        """Tensor ``i`` of axis ``axis`` against the centre's tensor ``centre`` (None: zero): the same bits as
        drawn with the others (:meth:`tensors` of one axis)."""
        return self.tensors(i, (axis,), centre)[0]

    def tensors(self, i: int, axes: Sequence[int], centre: torch.Tensor, *, key: torch.Tensor | None = None,
                norms: dict[bool, torch.Tensor] | None = None) -> list[torch.Tensor | None]:
        """Tensor ``i`` of each axis of ``axes`` against the centre's tensor ``centre`` (None: zero, an axis
        beyond the recipe's): :meth:`draw_axes` of this tensor alone, the centre's norms computed once for
        the axes and their blocks drawn on threads when large -- what a read at every point (``lean``) draws.
        ``key``: as :meth:`draw_axes`' (a tensor of ``centre``'s values, read where that needs no copy);
        ``norms``: the centre tensor's norms, kept there by the caller for its next reads (a read at every
        point computed them again at each: about 4 % of a lean 3x3 landscape of a 26M-parameter MLP)."""
        drawn = [k for k in axes if k < self.dims]
        if not drawn:
            return [None for _ in axes]
        axis_tensors = self._draw([centre], [self.names[i]], tuple(drawn), None, key=None if key is None else [key],
                                  norms=None if norms is None else [norms])
        got = dict(zip(drawn, (t[0] for t in axis_tensors)))
        return [got.get(k) for k in axes]

    def pair(self, i: int, centre: torch.Tensor, v: bool = True, w: bool = True, *, key: torch.Tensor | None = None,
             norms: dict[bool, torch.Tensor] | None = None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Tensor ``i`` of ``v`` and of ``w`` against ``centre``, each where asked (else None; None too where
        the axis is zero): :meth:`tensors` of the asked axes, drawn together (``key``, ``norms``: as there)."""
        axes = [k for k, asked in ((0, v), (1, w)) if asked]
        got = dict(zip(axes, self.tensors(i, axes, centre, key=key, norms=norms)))
        return got.get(0), got.get(1)

    def draw(self, centre: Sequence[torch.Tensor], axis: int,
             finish: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Every tensor of axis ``axis`` against ``centre`` (float32, CPU; ``finish(tensor, centre's tensor)``
        applied to each, e.g. a copy to the centre's device): :meth:`tensor` for each, bit for bit
        (:meth:`draw_axes` of one axis)."""
        return self.draw_axes(centre, (axis,), finish)[0]

    def draw_axes(self, centre: Sequence[torch.Tensor], axes: Sequence[int] | None = None,
                  finish: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                  key: Sequence[torch.Tensor] | None = None, held: bool = False) -> list[list[torch.Tensor]]:
        """Every tensor of each axis of ``axes`` (default: all the recipe's) against ``centre``, as
        :meth:`draw`, bit for bit :meth:`tensor`; each centre tensor's norms are computed once for all axes.

        The standard-normal draws, which run on one core per block, are made on
        :func:`torch.get_num_threads` threads for a large network (:data:`THREADED_DRAW`), a window of
        draws at a time, and the window's normalizations then run here with PyTorch's own threads
        while the pool waits: the two never compete for the cores (when they did, each of PyTorch's
        parallel operations waited for a core). A window closes past :data:`WINDOW` elements and a
        block for each thread; every axis of a tensor is in the same window. With ``finish`` each raw
        draw in a window is memory beyond the directions, so a window holds at most twice as many draws
        as threads (and, unless the draw is kept, the axes are drawn one after the other). Each block
        has its own generator, so the bits depend on neither.

        ``key``: tensors of the same values as ``centre`` (an engine's copy of the network is drawn
        against as the centre it was copied from) that stand for it within :func:`shared_draws`, and
        that the norms are read from where that needs no copy (:func:`_norms_read`).
        ``held``: the caller holds the draw while the block lasts anyway (an engine's directions, the
        landscape's memory bound counts them), so :func:`shared_draws` keeps it whatever its size; a
        draw kept is given back whatever its size, and any other is kept up to :data:`SHARED_ELEMENTS`.
        A held draw with ``finish`` (an engine's copies, in another layout) forgets a large draw kept
        against the same tensors, so that an engine never holds its directions beside an earlier
        engine's (the planner's probe's); its own copies are kept, float32 on the CPU, for
        :meth:`kept_draw` only (``finish`` must then keep the values: a layout)."""
        axes = tuple(range(self.dims)) if axes is None else tuple(axes)
        for axis in axes:
            if axis >= self.dims:
                raise ValueError(f"axis {axis} of a recipe of {self.dims} direction(s)")
        shared = _SHARED.get()
        key_tensors = list(centre if key is None else key)
        if shared is None or len(key_tensors) != len(centre) or not (_shareable(key_tensors) and _shareable(centre)):
            return self._draw(centre, self.names, axes, finish, key=key)
        if finish is not None:
            if not held:
                return self._draw(centre, self.names, axes, finish, key=key)
            # an engine that cannot use a kept draw (its directions a copy, in another layout): none is
            # held beside its own, and its own, finished, is kept for the digests (the same values)
            _release(shared, self, key_tensors)
            return self._keep(shared, axes, key_tensors, centre, finish, finished=True, key=key)
        hit = self._kept(axes, key_tensors)
        if hit is not None:
            return [list(a) for a in hit[2]]
        if not held and sum(c.numel() for c in centre) * len(axes) > SHARED_ELEMENTS:
            # kept, it would outlive its caller's use of it (a view's projection of its runs, then a lean engine)
            return self._draw(centre, self.names, axes, finish, key=key)
        return self._keep(shared, axes, key_tensors, centre, None, finished=False, key=key)

    def _keep(self, shared: dict[Any, Any], axes: tuple[int, ...], key_tensors: list[torch.Tensor],
              centre: Sequence[torch.Tensor], finish: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
              *, finished: bool, key: Sequence[torch.Tensor] | None = None) -> list[list[torch.Tensor]]:
        """:meth:`_draw`, kept in ``shared`` with its raw draws' digest where it is float32 on the CPU (a
        ``finished`` one under its own key: only :meth:`kept_draw` gives it, for its values)."""
        raw_hash = shared.get(_RAW_HASH)
        h = hashlib.sha256()
        drawn = self._draw(centre, self.names, axes, finish,
                           None if raw_hash is None else functools.partial(raw_hash, h), key=key)
        flat = [t for a in drawn for t in a]
        if _shareable(flat):  # the key tensors are kept too: their ids stay theirs
            shared[_key(self, axes, key_tensors, finished)] = (
                key_tensors, _versions([*key_tensors, *flat]), drawn, None if raw_hash is None else h.hexdigest())
        return [list(a) for a in drawn]

    def _kept(self, axes: tuple[int, ...], key_tensors: Sequence[torch.Tensor], finished: bool = False
              ) -> tuple | None:
        """The draw :func:`shared_draws` keeps of ``axes`` against ``key_tensors`` -- ``(key tensors, their
        and the draw's versions, the draw, the raw draws' digest or None)`` -- when it and they are unchanged
        (PyTorch's version counters); else None. ``finished``: an engine's copies of it (:meth:`kept_draw`)."""
        shared = _SHARED.get()
        hit = None if shared is None else shared.get(_key(self, axes, key_tensors, finished))
        if hit is None or hit[1] != _versions([*hit[0], *(t for a in hit[2] for t in a)]):
            return None
        return hit

    def kept_draw(self, centre: Sequence[torch.Tensor], axes: Sequence[int]
                  ) -> tuple[list[list[torch.Tensor]], str | None] | None:
        """Within :func:`shared_draws`: the tensors of :meth:`draw_axes` of ``axes`` against ``centre`` that it
        keeps, unchanged -- its own, or an engine's copies of them in another layout (the same values: for
        reading them, as the digests do) -- and, given ``raw_hash``, the SHA-256 of its standard-normal draws
        before normalization (tensor by tensor with their axes in order, each added by ``raw_hash``; else
        None); None when no such draw is kept."""
        hit = self._kept(tuple(axes), centre) or self._kept(tuple(axes), centre, finished=True)
        if hit is None:
            return None
        return [list(a) for a in hit[2]], hit[3]

    def _draw(self, centre: Sequence[torch.Tensor], names: Sequence[str], axes: tuple[int, ...],
              finish: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
              on_raw: Callable[[torch.Tensor], None] | None = None, key: Sequence[torch.Tensor] | None = None,
              norms: list[dict[bool, torch.Tensor]] | None = None) -> list[list[torch.Tensor]]:
        """:meth:`draw_axes` of the tensors ``names`` (aligned with ``centre``); ``on_raw(draw)`` is called
        on each standard-normal draw before its normalization, tensor by tensor, each one's axes in order;
        ``key``: tensors of ``centre``'s values that the normalizations read instead where that needs no
        copy (:func:`_norms_read`);
        ``norms``: each centre tensor's norms as far as computed already (filled in here)."""
        n = len(centre)
        read = _norms_read(centre, key)  # only where something is drawn (a kept draw is given as it is)
        out: list[list[torch.Tensor]] = [[] for _ in axes]
        if norms is None:
            norms = [{} for _ in range(n)]  # each centre tensor's, for every axis

        # a pool thread writes into buffers made here: under this thread's inference mode (an engine's read
        # under lean) they are inference tensors, which only a thread in that mode may write
        inference = torch.is_inference_mode_enabled()

        def fill(task: tuple[torch.Tensor, int, int, int, int, int]) -> None:
            buf, k, i, block, lo, hi = task
            with torch.inference_mode(inference):
                _fill_block(buf, names[i], self.seed, axes[k], block, lo, hi, self.direction_draw)

        blocks = [_blocks(c.numel(), self.direction_draw) if _drawn(c, self.biasbn) else [] for c in centre]
        threads = min(max(1, torch.get_num_threads()), len(axes) * sum(len(b) for b in blocks))
        pool = ThreadPoolExecutor(threads, thread_name_prefix="landscape-draw") \
            if threads > 1 and sum(c.numel() for c in centre) * len(axes) >= THREADED_DRAW else None
        # tensor by tensor, each one's axes in order (what on_raw hashes); a finished draw whose raw draws are
        # not hashed, axis by axis (a window's draws then are of one axis)
        jobs = [(k, i) for k in range(len(axes)) for i in range(n)] if finish is not None and on_raw is None else \
            [(k, i) for i in range(n) for k in range(len(axes))]
        try:
            for window in _windows(jobs, [c.numel() for c in centre], None if finish is None else 2 * threads,
                                   max(WINDOW, threads * BLOCK)):
                # a pool thread's draw goes into memory allocated here: freed (a draw finished into a copy), it
                # returns to this thread's heap, which later work reuses, not to the pool thread's
                raw = [_draw_buffer(centre[i], self.biasbn) for _, i in window]
                tasks = [(d, k, i, block, lo, hi) for d, (k, i) in zip(raw, window) if d is not None
                         for block, (lo, hi) in enumerate(blocks[i])]
                if pool is not None:
                    list(pool.map(fill, tasks))
                else:
                    for task in tasks:
                        fill(task)
                del tasks
                for j, (k, i) in enumerate(window):
                    d, raw[j] = raw[j], None  # the window holds no draw once it is finished
                    if on_raw is not None and d is not None:
                        on_raw(d)
                    t = _normalized(d, read[i], self.normalization, self.biasbn, norms[i])
                    del d
                    out[k].append(t if finish is None else finish(t, centre[i]))
        finally:
            if pool is not None:
                pool.shutdown()
        return out

    def drawn(self, centre: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Both axes drawn whole against ``centre`` (the engine's tensors, bit for bit): ``w`` empty
        for a line. For work that needs them held (projecting runs on the plane), not for evaluation."""
        drawn = self.draw_axes(centre)
        return drawn[0], drawn[1] if self.dims == 2 else []

    def metadata(self) -> dict[str, object]:
        return {"seed": int(self.seed), "normalization": self.normalization, "direction_draw": self.direction_draw}


def _norms_read(centre: Sequence[torch.Tensor], key: Sequence[torch.Tensor] | None) -> list[torch.Tensor]:
    """What a draw against ``centre`` reads its norms from: ``key``'s tensor (of the same values) where
    reading it needs no copy -- contiguous, on the CPU, of the same dtype and shape -- else ``centre``'s
    (:func:`_host` copies a channels-last or device tensor first: an engine's copy of ResNet-18 in
    channels-last, 45 MB, or a copy on a GPU). The same norms either way: :func:`_host` reads them
    contiguous on the CPU."""
    if key is None or len(key) != len(centre):
        return list(centre)
    return [k if k.device.type == "cpu" and k.is_contiguous() and k.dtype == c.dtype and k.shape == c.shape
            else c for k, c in zip(key, centre)]


def _draw_buffer(c: torch.Tensor, biasbn: str) -> torch.Tensor | None:
    """Memory for the raw draw of a direction's tensor against ``c`` (None: not drawn)."""
    return torch.empty(c.shape, dtype=torch.float32) if _drawn(c, biasbn) else None


def _windows(jobs: list[tuple[int, int]], sizes: Sequence[int], most: int | None,
             least: int | None = None) -> list[list[tuple[int, int]]]:
    """``jobs`` (axis, tensor) cut into consecutive windows of at least ``least`` elements (default
    :data:`WINDOW`; ``sizes``: each tensor's), a window of ``most`` jobs at most (None: any number), the last
    what remains; a job's axes (consecutive when the jobs go tensor by tensor) are not parted."""
    least = WINDOW if least is None else least
    out: list[list[tuple[int, int]]] = [[]]
    have = 0
    for j, (k, i) in enumerate(jobs):
        out[-1].append((k, i))
        have += sizes[i]
        last_axis = j + 1 == len(jobs) or jobs[j + 1][1] != i
        if (have >= least and last_axis) or (most is not None and len(out[-1]) >= most):
            out.append([])
            have = 0
    return [w for w in out if w]


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    return float(sum(torch.dot(x.reshape(-1).double(), y.reshape(-1).double()) for x, y in zip(a, b)))


def path_coordinates(v: Sequence[torch.Tensor], w: Sequence[torch.Tensor],
                     differences: Sequence[Sequence[torch.Tensor]]) -> np.ndarray:
    """Least-squares ``(alpha, beta)`` with ``[v w] (alpha, beta) = diff`` for each difference.

    Solved through the 2x2 normal equations in float64 (``v`` and ``w`` need not be
    orthogonal). Returns an array of shape (n, 2).
    """
    g = np.array([[_dot(v, v), _dot(v, w)], [_dot(w, v), _dot(w, w)]])
    out = np.zeros((len(differences), 2))
    for k, diff in enumerate(differences):
        b = np.array([_dot(v, diff), _dot(w, diff)])
        out[k] = np.linalg.lstsq(g, b, rcond=None)[0]
    return out


def axis_values(spec: tuple[float, float, int]) -> np.ndarray:
    """``np.linspace(min, max, num)`` of an axis given as ``(min, max, num)``."""
    lo, hi, num = spec
    return np.linspace(float(lo), float(hi), int(num))


def grid_axes(coords: np.ndarray | None, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Axes of the grid: PCA extents with 0.2 margins, or ``linspace(-1, 1, size)``."""
    if coords is None:
        ax = np.linspace(-1.0, 1.0, size)
        return ax, ax.copy()
    axes = []
    for col in (coords[:, 0], coords[:, 1]):
        lo, hi = float(col.min()), float(col.max())
        m = 0.2 * (hi - lo)
        axes.append(np.linspace(lo - m, hi + m, size))
    return axes[0], axes[1]
