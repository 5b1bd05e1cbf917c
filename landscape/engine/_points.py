"""How the network holds a point: each moved tensor computed when it is read (private).

A point's moved tensor is ``(c + b·w) + a·v`` (:func:`point_value`): computed in float32
(float64 for a float64 tensor) with one rounding per term, rounded once to the tensor's dtype,
and at ``(0, 0)`` the centre itself, bit for bit. Every way of holding a point computes it by
this function on whole tensors, so the values do not depend on the way, on chunks, workers or
resumes. The engine's network keeps the centre in its own tensors, which are never written.
Two ways give a module the point's tensors (:class:`Points`):

* ``"jit"`` (the default): every moved tensor is a :mod:`torch.nn.utils.parametrize`
  parametrization of its module, so reading ``module.weight`` (in the module's forward, in a
  parent's, under a tied name) computes the point's tensor then, freed once the operation
  that read it is done: beyond the centre and the directions, the tensors one operation reads.
* ``"in place"``: the moved tensors get storage of their own, written at every point, all of
  a point's at once (:func:`point_values`, a few multi-tensor operations; on the CPU the
  storage is made once and written with ``out=``, so that no model-sized allocation is faulted
  in again at every point): one more model size. Used for a small network (at most
  :data:`SMALL_NETWORK_BYTES` of moved tensors), and where reading through the attribute
  cannot be trusted: the first point's forward watches which moved tensors are read through
  their attribute; if one is not, probes find out whether code holds the tensor itself, and
  the engine then moves the tensors in place.

The directions are held (on each tensor's device, in its layout and dtype: two model sizes)
or, for random directions, drawn again from their recipe at every read
(:class:`landscape.geometry.SeededDirections`: nothing held), with the same bits.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TypeVar, cast

import torch
from torch import nn
from torch.nn.utils import parametrize

from landscape.geometry import SeededDirections

__all__ = ["point_value", "point_values", "SMALL_NETWORK_BYTES", "direction_dtype", "Directions", "Points",
           "MEMORY_SETTINGS", "choose_memory", "free_memory",
           "FAST_SHARE"]
_log = logging.getLogger("landscape")
T = TypeVar("T")

#: How the directions are kept (the ``memory=`` option; "auto" picks one per landscape).
MEMORY_SETTINGS = ("auto", "fast", "lean")
#: Under ``memory="auto"`` the held directions may take this part of a device's free memory (the
#: rest is for the evaluation's activations); past it, random directions are drawn at every read.
FAST_SHARE = 0.5
#: A network whose moved tensors take at most this many bytes holds a whole point at once (the
#: ``"in place"`` way, one more model size: 64 MiB at most), formed once per point by multi-tensor
#: operations; a larger one forms each tensor when a layer reads it and frees it after.
SMALL_NETWORK_BYTES = 64 << 20
#: Moved float32 tensors (contiguous, on the CPU) of at most this many bytes in all are formed at each point
#: of the in-place form as one vector (:class:`_Flat`): two operations a point instead of two per tensor,
#: for three more copies of them (the centre and both directions laid end to end: 12 MiB at most).
FLAT_BYTES = 4 << 20
#: Elements of float32 per 64 bytes: where each tensor of :class:`_Flat`'s vector starts.
_ALIGN = 16


def free_memory(device: torch.device | str) -> int | None:
    """Bytes free on ``device``: CUDA's free memory, or the host's ``MemAvailable`` (None: unknown)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def choose_memory(setting: str, recipe: SeededDirections | None, centre: Sequence[torch.Tensor], *,
                  points_per_call: int | None, device: str | torch.device, workers: int = 1,
                  label: str = "landscape") -> str:
    """``"fast"`` (directions held) or ``"lean"`` (drawn at every read) for ``setting``: only random
    directions (a ``recipe``) at one point per call can be drawn again; ``"auto"`` holds them when they
    take at most :data:`FAST_SHARE` of each device's free memory (``workers`` processes holding their
    own on a device), else draws them. Both give the same values, so the choice may depend on the load."""
    if recipe is None or (points_per_call is not None and points_per_call > 1):
        return "fast"
    if setting != "auto":
        return setting
    need: dict[torch.device, int] = {}
    for c in centre:
        dev = c.device if c.device.type != "cpu" else torch.device(device)
        numel = c.to_local().numel() if hasattr(c, "to_local") else c.numel()  # a sharded tensor: this rank's shard
        need[dev] = need.get(dev, 0) + numel * direction_dtype(c.dtype).itemsize * recipe.dims * workers
    for dev, n in need.items():
        free = free_memory(dev)
        if free is not None and n > FAST_SHARE * free:
            _log.info("%s: random directions drawn again at every read (memory='lean'): holding them would take "
                      "%.2f GB of the %.2f GB free on %s", label, n / 1e9, free / 1e9, dev)
            return "lean"
    return "fast"


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def point_value(c: torch.Tensor, v: torch.Tensor | None, w: torch.Tensor | None, a: float, b: float,
                clamp: bool = False) -> torch.Tensor:
    """The tensor at ``(a, b)``: ``(c + b·w) + a·v`` in float32 (float64 for a float64 ``c``), each
    term added with one rounding (``torch.add`` with ``alpha``), then rounded once to ``c``'s dtype;
    ``clamp`` clamps it at zero first (running variances). A zero coefficient's term is skipped, so
    at ``(0, 0)`` this is ``c`` itself. ``v`` / ``w`` None: a zero direction."""
    terms = [(t, k) for t, k in ((w, b), (v, a)) if t is not None and k != 0.0]
    if not terms:
        return c
    work = _work_dtype(c.dtype)
    (d, k), rest = terms[0], terms[1:]
    out = torch.add(c, d, alpha=k) if c.dtype == work else c.to(work).add_(d, alpha=k)
    for d, k in rest:
        out.add_(d, alpha=k)
    if clamp:
        out.clamp_min_(0.0)
    return out if out.dtype == c.dtype else out.to(c.dtype)


def point_values(centre: Sequence[torch.Tensor], v: Sequence[torch.Tensor | None], w: Sequence[torch.Tensor | None],
                 a: float, b: float, clamp: Collection[int] = (),
                 into: Sequence[torch.Tensor | None] | None = None) -> list[torch.Tensor]:
    """:func:`point_value` of every tensor, bit for bit: the float32 and float64 tensors (not clamped) whose
    terms are alike in one ``torch._foreach_add`` per term (on a GPU a few kernels for all of them, not two per
    tensor; on the CPU PyTorch adds them one by one, with the same kernel), the others one by one. ``into``:
    a buffer per tensor (or None) that such a tensor's value is written to with that same kernel
    (``torch.add(..., out=)``) instead of a new tensor: the CPU's way, where a new tensor per point is
    memory given back to the system and faulted in again at the next."""
    out: list[torch.Tensor | None] = [None] * len(centre)
    groups: dict[tuple[bool, bool], list[int]] = {}
    for i, c in enumerate(centre):
        terms = (w[i] is not None and b != 0.0, v[i] is not None and a != 0.0)
        if not any(terms):
            out[i] = c
        elif i in clamp or c.dtype != _work_dtype(c.dtype):
            out[i] = point_value(c, v[i], w[i], a, b, i in clamp)
        else:
            groups.setdefault(terms, []).append(i)
    for (with_w, with_v), idx in groups.items():
        # the order of point_value: the first term added to the centre (one rounding), then the second
        steps = [(w, b)] * with_w + [(v, a)] * with_v
        (d, k), rest = steps[0], steps[1:]
        for i in [i for i in idx if into is not None and into[i] is not None]:
            t = torch.add(centre[i], d[i], alpha=k, out=into[i])  # type: ignore[index, arg-type]
            for e, m in rest:
                t.add_(e[i], alpha=m)  # type: ignore[arg-type]
            out[i] = t
        idx = [i for i in idx if out[i] is None]
        if not idx:
            continue
        got = torch._foreach_add([centre[i] for i in idx], [d[i] for i in idx], alpha=k)  # type: ignore[misc]
        for d, k in rest:
            torch._foreach_add_(got, [d[i] for i in idx], alpha=k)  # type: ignore[misc]
        for i, t in zip(idx, got):
            out[i] = t
    return cast("list[torch.Tensor]", out)  # every entry set above


def direction_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a direction of a tensor of ``dtype`` is held in: the tensor's own floating dtype (a
    bfloat16 model's directions are rounded once to bfloat16, so the two directions take two model sizes
    whatever the dtype), float32 for anything else."""
    return dtype if dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16) else torch.float32


def _like(t: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Direction tensor ``t`` on ``c``'s device, in its layout (channels-last kernels), in
    :func:`direction_dtype` of ``c``'s; ``t`` itself when it already is."""
    dtype = direction_dtype(c.dtype)
    if t.device == c.device and t.dtype == dtype and t.stride() == c.stride():
        return t
    return torch.empty_like(c, dtype=dtype).copy_(t)


def _like_is_itself(c: torch.Tensor) -> bool:
    """Whether :func:`_like` returns a float32 CPU draw shaped like ``c`` as it is."""
    return c.device.type == "cpu" and direction_dtype(c.dtype) == torch.float32 and \
        c.stride() == torch.empty(c.shape, device="meta").stride()  # a draw's strides: contiguous


class Directions:
    """The two directions of an engine, tensor by tensor: held, or drawn from a recipe at every read.

    Parameters
    ----------
    centre : list of Tensor
        The centre's moved tensors (a direction takes each one's device and layout).
    v, w : list of Tensor
        Held directions (``w`` empty: zero); ignored with ``recipe``.
    recipe : SeededDirections, optional
        Random directions: drawn once here (``lean=False``) or at every :meth:`get` (``lean=True``).
    source : list of Tensor, optional
        The tensors ``centre`` was copied from (same values), standing for it in
        :func:`landscape.geometry.shared_draws`.
    keep : bool, default=True
        Whether the draw may be kept for the landscape's digests whatever its size (``held``), as the
        landscape's engine holds it anyway; False for an engine that lives shorter (the planner's
        probe's: its draw would outlive it while worker processes evaluate).
    """

    def __init__(self, centre: Sequence[torch.Tensor], v: Sequence[torch.Tensor], w: Sequence[torch.Tensor],
                 recipe: SeededDirections | None = None, *, lean: bool = False,
                 source: Sequence[torch.Tensor] | None = None, keep: bool = True) -> None:
        self.centre, self.recipe = list(centre), recipe
        self.lean = bool(lean and recipe is not None)
        self.held: list[list[torch.Tensor | None]] = [[], []]
        if self.lean:
            # read at every point: the tensors copied from (same values) and the centre's norms, computed at
            # the first read of each tensor and kept (the centre does not move: points are other tensors)
            self._keys = list(source) if source is not None and len(source) == len(self.centre) else None
            self._norms: list[dict[bool, torch.Tensor]] = [{} for _ in self.centre]
            return
        if recipe is not None:  # both axes drawn together (each centre tensor's norms computed once)
            kept = all(_like_is_itself(c) for c in self.centre)  # the draws are the directions: nothing to finish
            # drawn once per landscape with its digests (landscape.geometry.shared_draws): the centre's
            # tensors it was copied from (``source``, same values) stand for this copy's
            drawn: list[list[torch.Tensor]] = recipe.draw_axes(self.centre, finish=None if kept else _like,
                                                               key=source, held=keep)
            self.held = [list(drawn[axis]) if axis < recipe.dims else [None] * len(self.centre) for axis in (0, 1)]
            return
        for axis, given in ((0, v), (1, w)):
            held = list(given) if len(given) else [None] * len(self.centre)
            self.held[axis] = [None if t is None else _like(t, c) for t, c in zip(held, self.centre)]

    def pair(self, i: int, v: bool, w: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Tensor ``i`` of ``v`` and of ``w``, each where asked (else None; None too for a zero direction),
        ready to add to the centre's; drawn together under ``lean`` (the centre's norms once, the blocks of
        both on threads)."""
        if not self.lean:
            return self.held[0][i] if v else None, self.held[1][i] if w else None
        assert self.recipe is not None
        c = self.centre[i]
        dv, dw = self.recipe.pair(i, c, v, w, key=None if self._keys is None else self._keys[i], norms=self._norms[i])
        return None if dv is None else _like(dv, c), None if dw is None else _like(dw, c)

    def lists(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Both directions as lists of tensors (zeros for a zero one): what the batched ways build from."""
        if self.lean:
            raise ValueError("several points per call need the directions held (memory='fast')")
        zeros = [torch.zeros_like(c, dtype=_work_dtype(c.dtype)) for c in self.centre]
        v, w = ([t if t is not None else z for t, z in zip(self.held[k], zeros)] for k in (0, 1))
        return v, w


class _PointState:
    """The engine's current point and what a read computes: shared by every parametrization."""

    def __init__(self, dirs: Directions, clamp: set[int]) -> None:
        self.dirs, self.clamp = dirs, clamp
        self.a = self.b = 0.0
        self.reads: set[int] | None = None  # while not None: the moved tensors read through their attribute

    def value(self, i: int, c: torch.Tensor) -> torch.Tensor:
        if self.reads is not None:
            self.reads.add(i)
        a, b = self.a, self.b
        v, w = self.dirs.pair(i, bool(a), bool(b))
        return point_value(c, v, w, a, b, i in self.clamp)


class _AtPoint(nn.Module):
    """The parametrization of moved tensor ``i``: its value at the engine's current point."""

    def __init__(self, state: _PointState, i: int) -> None:
        super().__init__()
        self.state, self.i = state, i

    def forward(self, original: torch.Tensor) -> torch.Tensor:
        return self.state.value(self.i, original)


class _Flat:
    """The in-place form's tensors ``idx`` (float32, contiguous, on the CPU, not clamped, each direction held
    for all of them or for none) formed at each point as one vector: the centre and the directions laid end
    to end once, the point written into one buffer whose slices the network's tensors are. Element by element
    the same operations as :func:`point_values` (``torch.add`` with ``alpha``, the same order of terms), so
    the same bits; two operations a point instead of two per tensor (on a small network each costs more
    than its arithmetic: 40 of a 3-layer MLP's 160 us a point at 64 samples went to forming it)."""

    def __init__(self, idx: list[int], centre: Sequence[torch.Tensor], v: Sequence[torch.Tensor | None],
                 w: Sequence[torch.Tensor | None]) -> None:
        # each tensor starts on a 64-byte boundary, as an allocation of its own would: kernels read a weight
        # that starts elsewhere slower (a transformer's point took about 20 % longer with them end to end)
        starts, o = [], 0
        for i in idx:
            starts.append(o)
            o += -(-centre[i].numel() // _ALIGN) * _ALIGN

        def laid(ts: Sequence[torch.Tensor | None]) -> torch.Tensor | None:
            if ts[idx[0]] is None:
                return None
            out = torch.zeros(o, dtype=centre[idx[0]].dtype)
            for i, lo in zip(idx, starts):
                out[lo:lo + centre[i].numel()].copy_(ts[i].reshape(-1))  # type: ignore[union-attr]
            return out

        c = laid(centre)
        assert c is not None
        self.idx, self.c, self.v, self.w = idx, c, laid(v), laid(w)
        inside = set(idx)
        self.whole = len(idx) == len(centre)
        #: the directions of the tensors formed one by one (None for the vector's: their centre is a placeholder)
        self.rest_v: list[torch.Tensor | None] = [None if i in inside else t for i, t in enumerate(v)]
        self.rest_w: list[torch.Tensor | None] = [None if i in inside else t for i, t in enumerate(w)]
        self.buf = torch.empty_like(self.c)
        self.views = [self.buf[lo:lo + centre[i].numel()].view(centre[i].shape) for i, lo in zip(idx, starts)]

    @staticmethod
    def members(centre: Sequence[torch.Tensor], v: Sequence[torch.Tensor | None], w: Sequence[torch.Tensor | None],
                clamp: Collection[int]) -> list[int]:
        """The tensors formed so (at least two, else none)."""
        def fits(d: torch.Tensor | None, c: torch.Tensor) -> bool:
            return d is None or (d.dtype == c.dtype and d.device == c.device and d.is_contiguous())

        idx = [i for i, c in enumerate(centre) if c.device.type == "cpu" and c.dtype == torch.float32 and
               c.is_contiguous() and i not in clamp and fits(v[i], c) and fits(w[i], c)]
        # each direction held for every tensor of the vector, or for none of them
        pattern = {(v[i] is None, w[i] is None) for i in idx}
        if len(pattern) != 1 or len(idx) < 2 or sum(centre[i].numel() for i in idx) * 4 > FLAT_BYTES:
            return []
        return idx

    def write(self, a: float, b: float) -> None:
        """The buffer at ``(a, b)``: :func:`point_values` of the vector written into it (at ``(0, 0)``,
        where that is the centre itself, the centre copied)."""
        got = point_values([self.c], [self.v], [self.w], a, b, into=[self.buf])[0]
        if got is not self.buf:
            self.buf.copy_(got)


class Points:
    """Puts the engine's network at a point (see the module docstring).

    Parameters
    ----------
    net : nn.Module
        The engine's network, holding the centre.
    names : list of str
        The moved tensors (parameters, then buffers on views through models).
    clamp : set of int
        Indices of the moved tensors clamped at zero (running variances, ``bn_statistics="clamped"``).
    v, w, recipe, lean
        The directions (:class:`Directions`).
    source : list of Tensor, optional
        The tensors ``net``'s centre was copied from (same values): a recipe's draw against them may be
        shared (:func:`landscape.geometry.shared_draws`).
    keep_draw : bool, default=True
        :class:`Directions`' ``keep``.
    """

    def __init__(self, net: nn.Module, names: Sequence[str], clamp: set[int], v: Sequence[torch.Tensor],
                 w: Sequence[torch.Tensor], recipe: SeededDirections | None = None, *, lean: bool = False,
                 source: Sequence[torch.Tensor] | None = None, keep_draw: bool = True) -> None:
        self.net, self.names = net, list(names)
        named = {**dict(net.named_buffers()), **dict(net.named_parameters())}
        self.tensors: list[torch.Tensor] = [named[k] for k in self.names]  # Parameters (their .data may change)
        self.centre = [t.detach() for t in self.tensors]  # the centre's storage: never written
        self.dirs = Directions(self.centre, v, w, recipe, lean=lean, source=source, keep=keep_draw)
        self.state = _PointState(self.dirs, clamp)
        #: "jit" or "in place": a small network's whole point at once (held directions); else decided on the
        #: first point (or a probe)
        self.form: str | None = "in place" if not self.dirs.lean and sum(
            c.numel() * c.element_size() for c in self.centre) <= SMALL_NETWORK_BYTES else None
        self._registered: list[tuple[nn.Module, str]] = []
        #: the in-place form's buffers on the CPU: each float32/float64 tensor's values at every point are
        #: written to one buffer of its own, made at the first point (one model size, as a new point's were)
        self._into: list[torch.Tensor | None] | None = None
        #: the in-place form's tensors formed as one vector (:class:`_Flat`), made with ``_into``; ``_pointed``:
        #: whether the network's tensors are its slices now (until something else sets them)
        self._flat: _Flat | None = None
        self._pointed = False

    # -- the way -------------------------------------------------------------------------
    def _install(self) -> None:
        index = {id(t): i for i, t in enumerate(self.tensors)}
        pairs = [(m, k, index[id(t)]) for m in self.net.modules()
                 for k, t in [*m._parameters.items(), *m._buffers.items()] if t is not None and id(t) in index]
        try:
            for m, k, i in pairs:
                parametrize.register_parametrization(m, k, _AtPoint(self.state, i), unsafe=True)
                self._registered.append((m, k))
        except Exception:
            self._uninstall()
            raise

    def _uninstall(self) -> None:
        while self._registered:
            m, k = self._registered.pop()
            parametrize.remove_parametrizations(m, k, leave_parametrized=False)

    def choose(self, probe: Callable[[], float]) -> str:
        """Decide the way on ``probe()`` (the loss on a couple of samples at the point set): "jit" unless a
        moved tensor is read without its attribute (or parametrizing fails), then "in place"."""
        if self.form is not None:
            return self.form
        why = self._jit_fails(probe)
        if why is None:
            self.form = "jit"
        else:
            _log.info("moved tensors set in place (one more model size): %s", why)
            self.form = "in place"
        return self.form

    def first_point(self, run: Callable[[], T]) -> T | None:
        """``run()`` (the engine's first point) on the parametrized network, watching the reads: when every
        moved tensor was read through its attribute, the way is "jit" -- what :meth:`choose`'s first probe
        would decide, without its forward. Otherwise nothing is decided and nothing stays parametrized
        (:meth:`choose` probes). ``run()``'s result is what the "jit" way gives (None: it failed)."""
        if self.form is not None:
            return None
        try:
            self._install()
        except Exception:  # nothing stays parametrized; choose() says why
            return None
        self.state.reads = set()
        out = None
        try:
            out = run()
        except Exception:
            pass
        finally:
            complete = out is not None and len(self.state.reads) == len(self.tensors)
            self.state.reads = None
        if complete:
            self.form = "jit"
        else:
            self._uninstall()
        return out

    def _jit_fails(self, probe: Callable[[], float]) -> str | None:
        try:
            self._install()
        except Exception as exc:
            return f"the network cannot be parametrized ({type(exc).__name__}: {exc})"
        a, b = self.state.a, self.state.b
        self.state.a = self.state.b = 0.0
        try:
            self.state.reads = set()
            first = probe()
            unread = [i for i in range(len(self.tensors)) if i not in self.state.reads]
            self.state.reads = None
            if not unread:
                return None
            if not math.isfinite(first):
                why = "the probe's loss is not finite, so tensors not read through their attribute cannot be checked"
            else:
                with self._nan(unread):
                    second = probe()
                if math.isfinite(second):  # not read at all (an unused head): nothing to move
                    return None
                shown = ", ".join(self.names[i] for i in unread[:5])
                why = f"{shown} {'is' if len(unread) == 1 else 'are'} read without the module's attribute"
        except Exception as exc:
            why = f"the parametrized network fails ({type(exc).__name__}: {exc})"
        finally:
            self.state.reads = None
            self.state.a, self.state.b = a, b
        self._uninstall()
        return why

    @contextlib.contextmanager
    def _nan(self, idx: Sequence[int]) -> Iterator[None]:
        """The parametrizations' originals of ``idx`` hold NaN while the block runs."""
        for i in idx:
            self.tensors[i].data = torch.full_like(self.centre[i], float("nan"))
        try:
            yield
        finally:
            for i in idx:
                self.tensors[i].data = self.centre[i]

    # -- points ---------------------------------------------------------------------------
    def set(self, a: float, b: float) -> None:
        """The network at ``(a, b)``: read lazily ("jit") or written now ("in place")."""
        self.state.a, self.state.b = float(a), float(b)
        if self.form == "in place":
            flat = self._flat
            if flat is not None and self._pointed and flat.whole:  # every tensor a slice of the vector already
                flat.write(self.state.a, self.state.b)
                return
            skip = set(flat.idx) if flat is not None and self._pointed else set()
            for i, (t, c) in enumerate(zip(self.tensors, self.centre)):  # the last point's freed before these are made
                if i not in skip:
                    t.data = c
            for i, (t, value) in enumerate(zip(self.tensors, self._values(buffered=True))):
                if i not in skip:
                    t.data = value
            self._pointed = self._flat is not None

    def _values(self, buffered: bool = False) -> list[torch.Tensor]:
        """Every moved tensor at the current point (:func:`point_values`; drawn tensor by tensor under lean),
        ``buffered``: written to the in-place form's buffers (``_into``) where it has them."""
        if self.dirs.lean:
            return [self.state.value(i, c) for i, c in enumerate(self.centre)]
        v, w = self.dirs.held
        if buffered and self._into is None:
            with torch.inference_mode(False):  # normal tensors: points are also set outside inference mode
                members = _Flat.members(self.centre, v, w, self.state.clamp)
                self._flat = _Flat(members, self.centre, v, w) if members else None
                self._into = [torch.empty_like(c) if c.device.type == "cpu" and c.dtype == _work_dtype(c.dtype)
                              and i not in self.state.clamp and i not in members else None
                              for i, c in enumerate(self.centre)]
        flat = self._flat if buffered else None
        if flat is None:
            return point_values(self.centre, v, w, self.state.a, self.state.b, self.state.clamp,
                                into=self._into if buffered else None)
        # the vector's tensors are its slices; the others as point_values forms them
        flat.write(self.state.a, self.state.b)
        out = point_values(self.centre, flat.rest_v, flat.rest_w, self.state.a, self.state.b, self.state.clamp,
                           into=self._into)
        for i, view in zip(flat.idx, flat.views):
            out[i] = view
        return out

    @contextlib.contextmanager
    def materialized(self, a: float, b: float) -> Iterator[None]:
        """The network's own tensors at ``(a, b)`` under their own names while the block runs (point
        metrics read ``named_parameters()`` and differentiate through them); the centre afterwards."""
        registered = bool(self._registered)
        self._uninstall()
        self._pointed = False  # the network's tensors are set below, then to the centre
        self.state.a, self.state.b = float(a), float(b)
        try:
            with torch.no_grad():
                for t, value in zip(self.tensors, self._values()):
                    t.data = value
            yield
        finally:
            for t, c in zip(self.tensors, self.centre):
                t.data = c
            if registered:
                self._install()
            elif self.form == "in place":
                self.set(self.state.a, self.state.b)

    def release(self) -> None:
        """The network back at its centre, with its own modules (nothing parametrized)."""
        self._uninstall()
        for t, c in zip(self.tensors, self.centre):
            t.data = c
        self._into, self._flat, self._pointed = None, None, False
