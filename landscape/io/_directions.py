"""A landscape's directions, kept so that it can be audited: what is recorded, and how it comes back (private).

What ``landscapes.h5`` keeps of a landscape's directions (the group ``directions`` of its group,
:class:`landscape.io._h5.DirectionsRecord`):

* directions that are data (PCA, given, Hessian, views through models: for an interpolation
  ``v = A``, ``w = B`` around a centre whose moved tensors are zero; for a plane through models
  and a target direction, differences of models): float32 arrays by parameter name, exactly the
  tensors the engine evaluated, when ``v`` and ``w`` together take at most
  :data:`DIRECTIONS_MAX_BYTES` (1 GiB: a plane of up to 134 million moved parameters, GPT-2's
  124 million included; ``LANDSCAPE_DIRECTIONS_MAX_BYTES`` changes it). Above it only their
  digests are kept: a 7B model's plane would be 56 GB, and every atomic rewrite of the file
  copies what it holds. They are stored uncompressed: float32 directions barely compress.
* random directions: their recipe (:class:`landscape.geometry.SeededDirections`: seed,
  normalization, biasbn, draw, the moved tensors' names and shapes), nothing else; drawn again
  when asked for, against the centre given, and checked against the SHA-256 of the original
  draw (before normalization, ``digest_draw``) and of the directions (``digest_v``,
  ``digest_w``), so a torch that draws other standard normals is detected and said, not used.

Every record also holds ``digest_centre``, the SHA-256 of the centre's moved tensors (the point
``(0, 0)``), and the engine's ``(a, b)`` of every point. A landscape computed in this process
keeps its record in memory (:class:`DirectionsInMemory`: the arrays, under the same size rule)
until the store writes it, then reads it back from the file; one kept in memory only, of a small
network, makes its digests when the record is first asked for, from a copy of its centre
(:func:`kept_directions`' ``lazy``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from collector.common import InvalidParameterError
from collector.trajectory import load_checkpoint
from landscape.geometry import SHARED_ELEMENTS, SeededDirections, shared_draws
from landscape.io._fingerprint import hash_tensor, tensor_digest
from landscape.io._h5 import DirectionsRecord, Partial
from landscape.io._store import env_number

__all__ = ["DIRECTIONS_MAX_BYTES", "max_direction_bytes", "kept_directions", "load_record", "DirectionsInMemory"]

#: The most bytes of array directions (``v`` and ``w`` together, float32) a landscape keeps (see the module docstring).
DIRECTIONS_MAX_BYTES = 1 << 30
#: Elements (all axes) up to which the digests draw the directions whole, not a tensor at a time: the
#: networks whose draw a landscape shares (SHARED_ELEMENTS, 64 MiB of float32; beyond, one tensor's draws
#: are in memory at a time, as ``lean`` reads them).
_WHOLE_DRAW = SHARED_ELEMENTS
#: Normalizations of random directions that do not read the centre's weights.
_CENTRE_FREE = ("none", "dlayer", "dfilter")
#: Bytes (all sequences together) from which :func:`_digests` hashes its sequences on threads: SHA-256
#: runs on one core per hash, and hashlib lets other threads run while it hashes a large buffer.
_THREADED_DIGESTS = 8 << 20


def _digests(sequences: Mapping[str, Sequence[torch.Tensor]]) -> dict[str, str]:
    """The SHA-256 of each sequence of tensors, by name: :func:`tensor_digest` of its tensors, in order.

    A landscape keeps up to four (its centre, ``v``, ``w``, the raw draw), each a pass over a model size at
    about 1.3 GB/s here. Each is a hash of its own, so beyond :data:`_THREADED_DIGESTS` they run on up to
    :func:`torch.get_num_threads` threads, each sequence whole on one thread: the same bytes in the same
    order into each hash, so the same digests."""
    names = list(sequences)
    hashes = {name: hashlib.sha256() for name in names}

    def run(name: str) -> None:
        for t in sequences[name]:
            hash_tensor(hashes[name], t)

    total = sum(t.numel() * t.element_size() for ts in sequences.values() for t in ts)
    threads = min(len(names), max(1, torch.get_num_threads()))
    if threads > 1 and total >= _THREADED_DIGESTS:
        with ThreadPoolExecutor(threads, thread_name_prefix="landscape-digest") as pool:
            list(pool.map(run, names))
    else:
        for name in names:
            run(name)
    return {name: h.hexdigest() for name, h in hashes.items()}


def max_direction_bytes() -> int:
    """:data:`DIRECTIONS_MAX_BYTES`, or the environment variable ``LANDSCAPE_DIRECTIONS_MAX_BYTES``."""
    return int(env_number("LANDSCAPE_DIRECTIONS_MAX_BYTES", DIRECTIONS_MAX_BYTES, int, "bytes"))


class DirectionsInMemory:
    """The directions of a landscape computed in this process (:meth:`Landscape.directions`), until the
    store has written them: their record, or what makes or finishes it when it is first asked for."""

    def __init__(self, record: DirectionsRecord | Callable[[], DirectionsRecord]) -> None:
        self._record = record

    def record(self) -> DirectionsRecord:
        if not isinstance(self._record, DirectionsRecord):  # made or finished when first asked for
            self._record = self._record()
        return self._record

    def load(self, centre: Any) -> tuple[dict[str, torch.Tensor] | None, ...]:
        return load_record(self.record(), centre, "this landscape")


def _split(flat: np.ndarray, names: Sequence[str], shapes: Sequence[tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Views of a flat direction (the moved tensors one after the other) by name: no copy."""
    out, o = {}, 0
    for name, shape in zip(names, shapes):
        k = int(np.prod(shape, dtype=np.int64))
        out[name] = flat[o:o + k].reshape(shape)
        o += k
    return out


def _as_tensors(arrays: Mapping[str, np.ndarray]) -> list[torch.Tensor]:
    """The arrays as tensors sharing their memory (a copy only where one is not contiguous)."""
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays.values()]


def _digest(arrays: Mapping[str, np.ndarray] | Sequence[torch.Tensor]) -> str:
    return tensor_digest(*(_as_tensors(arrays) if isinstance(arrays, Mapping) else arrays))


def _stand_ins(shapes: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """Zero-stride float32 tensors of ``shapes``: what a recipe's draw reads of a centre it normalizes nothing
    against (only the shapes), without holding its data."""
    return [torch.zeros((), dtype=torch.float32).expand(tuple(s)) for s in shapes]


def _drawn(recipe: SeededDirections, c: torch.Tensor) -> bool:
    """Whether the recipe draws a tensor against ``c`` (under ``biasbn="li"`` one of at most one dimension
    is the centre's tensor itself)."""
    return not (recipe.biasbn == "li" and c.dim() <= 1)


@contextmanager
def shared_draws_kept() -> Iterator[None]:
    """:func:`landscape.geometry.shared_draws` for a landscape whose directions are kept: a draw kept there
    also keeps the digest of its standard-normal draws (``digest_draw``, as :func:`kept_directions` makes
    it), so the digests need no second draw."""
    with shared_draws(raw_hash=hash_tensor):
        yield


def _draw_digest(recipe: SeededDirections, centre: Sequence[torch.Tensor]) -> str:
    """SHA-256 of the recipe's standard-normal draw before normalization (``digest_draw``), tensor by tensor,
    each one's axes in order: drawn again from the recipe, which reads only the centre's shapes (every
    tensor at once for a network of at most :data:`_WHOLE_DRAW` elements per axis set, else one tensor's
    draws in memory at a time: the same digest)."""
    axes = tuple(range(recipe.dims))
    raw = dataclasses.replace(recipe, normalization="none", biasbn="normalize")
    shapes = _stand_ins([c.shape for c in centre])  # the draw reads only the shapes
    drawn = [i for i, c in enumerate(centre) if _drawn(recipe, c)]
    if sum(c.numel() for c in centre) * len(axes) <= _WHOLE_DRAW:
        raws = raw.draw_axes(shapes, axes)  # two calls instead of two per tensor (the same bits)
        return tensor_digest(*(a[i] for i in drawn for a in raws))
    draw = hashlib.sha256()
    for i in drawn:
        for t in raw.tensors(i, axes, shapes[i]):
            assert t is not None
            hash_tensor(draw, t)
    return draw.hexdigest()


def _recipe_digests(recipe: SeededDirections, centre: Sequence[torch.Tensor], *, draw: bool = True
                    ) -> dict[str, str]:
    """SHA-256 of the centre (``digest_centre``), of the recipe's directions against it (``digest_v``,
    ``digest_w``) and, ``draw``, of its standard-normal draw before normalization (``digest_draw``,
    :func:`_draw_digest`), tensor by tensor: one tensor's directions in memory at a time, as the engine's
    ``lean`` reads them, or, for a network of at most :data:`_WHOLE_DRAW` elements per axis set, every tensor
    at once (the same digests, the sequences hashed side by side by :func:`_digests`); the engine's draw
    where :func:`landscape.geometry.shared_draws` kept it, whatever its size (no draw at all), with its raw
    draw's digest where :func:`shared_draws_kept` made it."""
    axes = tuple(range(recipe.dims))
    keys = ["digest_v", "digest_w"][:len(axes)]
    # within shared_draws, the engine's draw (of any size, in its layout: it held it), with its raw digest
    # within shared_draws_kept
    held, kept = recipe.kept_draw(centre, axes) or (None, None)
    if held is not None or sum(c.numel() for c in centre) * len(axes) <= _WHOLE_DRAW:
        # the engine's draw kept (no draw here), or a small network: both draws whole, two calls instead
        # of two per tensor (the same bits, SeededDirections.draw_axes; a small landscape's fixed cost is
        # mostly these calls)
        normalized = held if held is not None else recipe.draw_axes(centre, axes)
        out = _digests({"digest_centre": centre, **dict(zip(keys, normalized))})
    else:
        out = _digests({"digest_centre": centre})
        hashes = [hashlib.sha256() for _ in axes]
        for i, c in enumerate(centre):
            for h, t in zip(hashes, recipe.tensors(i, axes, c)):
                assert t is not None
                hash_tensor(h, t)
        out.update({k: h.hexdigest() for k, h in zip(keys, hashes)})
    if draw:
        out["digest_draw"] = kept if kept is not None else _draw_digest(recipe, centre)
    return out


def kept_directions(part: Partial, names: Sequence[str], centre: Mapping[str, torch.Tensor],
                    recipe: SeededDirections | None, *, lazy: bool = False, lazy_draw: bool = False
                    ) -> DirectionsInMemory:
    """What a landscape keeps of its directions (see the module docstring), from its definition
    ``part`` (the flat float32 ``v`` and ``w`` the engine evaluated, or a ``recipe``) and its centre.

    ``lazy``: its digests computed when the record is first asked for (the landscape written to a file,
    or its directions asked back), from a copy of the centre's moved tensors made now; a landscape that
    is only looked at never hashes them (for a small network, the digests -- and, for a recipe, hashing
    its draw -- are a fifth of a 3x3 landscape's time). ``lazy_draw``: only a recipe's ``digest_draw`` is
    made then, drawn again from the recipe (which needs the shapes only: nothing is held for it;
    hashing the draw as it is drawn was a few percent of a ResNet-18's 3x3 landscape). The same
    record every way."""
    ref = [centre[n] for n in names]
    points = np.asarray(part.points)
    more = [np.asarray(m) for m in np.asarray(part.more)] if np.size(part.more) else []
    if lazy:
        # the record made later from what it is made of: the points, v and w (or the recipe), and a copy of
        # the centre's moved tensors of its own (the caller's network may change after the call)
        return DirectionsInMemory(functools.partial(_record, points, np.asarray(part.v), np.asarray(part.w),
                                                    list(names), [t.detach().clone() for t in ref], recipe,
                                                    more=more))
    rec = _record(points, np.asarray(part.v), np.asarray(part.w), names, ref, recipe, draw=not lazy_draw, more=more)
    if recipe is None or not lazy_draw:
        return DirectionsInMemory(rec)
    return DirectionsInMemory(functools.partial(_with_draw_digest, rec, recipe, _stand_ins([t.shape for t in ref])))


def _with_draw_digest(rec: DirectionsRecord, recipe: SeededDirections, shapes: list[torch.Tensor]
                      ) -> DirectionsRecord:
    """``rec`` (made by :func:`_record` without ``draw``) with its ``digest_draw``, in its place."""
    rec.info["digest_draw"] = _draw_digest(recipe, shapes)
    return rec


def _record(points: np.ndarray, flat_v: np.ndarray, flat_w: np.ndarray, names: Sequence[str],
            ref: list[torch.Tensor], recipe: SeededDirections | None, *, draw: bool = True,
            more: Sequence[np.ndarray] = ()) -> DirectionsRecord:
    """:func:`kept_directions`' record: digests included (``draw`` False: a recipe's ``digest_draw`` left
    None, in its place, for :func:`_with_draw_digest`); ``more``: an n-D grid's later directions (flat)."""
    shapes = [tuple(int(d) for d in t.shape) for t in ref]
    info: dict[str, Any] = {"kind": "arrays" if recipe is None else "recipe", "names": list(names),
                            "shapes": [list(s) for s in shapes], "torch": torch.__version__}
    if recipe is not None:
        digests = _recipe_digests(recipe, ref, draw=draw)
        info["digest_centre"] = digests.pop("digest_centre")
        info["recipe"] = {"seed": int(recipe.seed), "normalization": recipe.normalization, "biasbn": recipe.biasbn,
                          "dims": int(recipe.dims), "direction_draw": recipe.direction_draw}
        info.update({k: digests.get(k) for k in ("digest_v", "digest_draw", "digest_w")
                     if k in digests or k == "digest_draw"})
        info["stored"] = False
        return DirectionsRecord(info, None, None, points)
    v = _split(np.asarray(flat_v, dtype=np.float32), names, shapes)
    w = _split(np.asarray(flat_w, dtype=np.float32), names, shapes) if np.size(flat_w) else None
    later = [_split(np.asarray(m, dtype=np.float32), names, shapes) for m in more]
    info.update(_digests({"digest_centre": ref, "digest_v": _as_tensors(v),
                          **({"digest_w": _as_tensors(w)} if w is not None else {}),
                          **{f"digest_u{k}": _as_tensors(u) for k, u in enumerate(later, start=3)}}))
    info["bytes"] = int(np.size(flat_v) + np.size(flat_w) + sum(np.size(m) for m in more)) * 4
    limit = max_direction_bytes()
    info["stored"] = info["bytes"] <= limit
    if not info["stored"]:
        info["reason"] = (f"the directions take {info['bytes']} bytes, over the limit of {limit} "
                          "(LANDSCAPE_DIRECTIONS_MAX_BYTES); their digests are kept")
        return DirectionsRecord(info, None, None, points)
    return DirectionsRecord(info, v, w, points, later or None)


def load_record(rec: DirectionsRecord, centre: Any, tag: str) -> tuple[dict[str, torch.Tensor] | None, ...]:
    """``(v, w)`` of a record by parameter name (``w`` None for a line), and an n-D grid's later directions
    after them (``u3``, ``u4``, ...): its arrays checked against their digests, or its recipe drawn again
    against ``centre`` and checked against the original draw's digests."""
    info = rec.info
    names = list(info["names"])
    if info["kind"] == "recipe":
        return _redraw(info, names, centre, tag)
    if rec.v is None:
        raise ValueError(f"The directions of {tag!r} were not kept: {info.get('reason', 'no arrays')}. HINT: set "
                         "LANDSCAPE_DIRECTIONS_MAX_BYTES higher and generate it again (restart=True); the same "
                         "inputs give the same directions.")
    later = [f"u{k}" for k in range(3, 3 + sum(key.startswith("digest_u") for key in info))]
    if len(rec.more or []) != len(later):
        raise ValueError(f"The directions of {tag!r} hold {len(rec.more or [])} of the {len(later)} later "
                         f"directions of its grid ({', '.join(later)}): the file was changed or damaged.")
    out: list[dict[str, torch.Tensor] | None] = []
    for axis, arrays in (("v", rec.v), ("w", rec.w), *zip(later, rec.more or [])):
        if arrays is None:
            out.append(None)
            continue
        tensors = {n: torch.from_numpy(np.ascontiguousarray(arrays[n], dtype=np.float32)) for n in names}
        if _digest(list(tensors.values())) != info.get(f"digest_{axis}"):
            raise ValueError(f"The direction {axis} of {tag!r} does not have the SHA-256 recorded with it "
                             f"({str(info.get(f'digest_{axis}'))[:12]}): the file was changed or damaged.")
        out.append(tensors)
    assert out[0] is not None
    return tuple(out)


def _centre(info: Mapping[str, Any], names: list[str], centre: Any, tag: str) -> list[torch.Tensor]:
    """The centre's moved tensors a recipe is drawn against, checked against the recorded digest."""
    recipe = info["recipe"]
    shapes = [tuple(s) for s in info["shapes"]]
    caller = "Landscape.directions"
    if centre is None:
        if recipe["normalization"] in _CENTRE_FREE and recipe["biasbn"] != "li":
            return _stand_ins(shapes)  # the draw reads only the shapes
        raise InvalidParameterError(
            f"The 'centre' parameter of {caller} is required for the random directions of {tag!r}: they are "
            f"normalized ({recipe['normalization']!r}) against the centre's weights, which a landscape does not "
            "keep (in memory or in landscapes.h5: its directions are their recipe). Got None instead. HINT: pass "
            "the state dict, network or checkpoint the landscape is centred on (the network given to "
            "compute_landscape; for landscape gen's Random landscape, the last checkpoint of the last interval).")
    if isinstance(centre, nn.Module):
        state = {k: t.detach().cpu() for k, t in centre.state_dict().items()}
    else:
        state = load_checkpoint(centre, what=f"the 'centre' parameter of {caller}")
    missing = [n for n in names if n not in state]
    if missing:
        raise InvalidParameterError(f"The 'centre' parameter of {caller} must hold every moved tensor of {tag!r}. "
                                    f"Got one without {missing[:3]}{' ...' if len(missing) > 3 else ''}.")
    tensors = [state[n] for n in names]
    found = tensor_digest(*tensors)
    if found != info.get("digest_centre"):
        raise InvalidParameterError(
            f"The 'centre' parameter of {caller} must be the weights {tag!r} is centred on (their moved tensors' "
            f"SHA-256 {str(info.get('digest_centre'))[:12]}, dtypes included). Got weights with SHA-256 "
            f"{found[:12]} instead.")
    return tensors


def _redraw(info: Mapping[str, Any], names: list[str], centre: Any, tag: str
            ) -> tuple[dict[str, torch.Tensor] | None, ...]:
    """A recipe's directions drawn again; refused unless they are the bits the landscape was computed with."""
    r = info["recipe"]
    recipe = SeededDirections(int(r["seed"]), str(r["normalization"]), str(r["biasbn"]), tuple(names),
                              int(r["dims"]), str(r["direction_draw"]))
    ref = _centre(info, names, centre, tag)
    drawn = recipe.draw_axes(ref)
    if _digest(drawn[0]) != info["digest_v"] or (recipe.dims == 2 and _digest(drawn[1]) != info["digest_w"]):
        again = _draw_digest(recipe, ref)
        what = "draws other standard normals" if again != info["digest_draw"] else \
            "draws the same standard normals but normalizes them to other bits"
        raise ValueError(
            f"The random directions of {tag!r} cannot be drawn again here: this torch ({torch.__version__}) {what} "
            f"than torch {info.get('torch', '?')}, which computed the landscape (SHA-256 of the draw "
            f"{str(info['digest_draw'])[:12]} recorded, {again[:12]} now). HINT: use torch {info.get('torch', '?')} "
            "to recover these directions.")
    return dict(zip(names, drawn[0])), dict(zip(names, drawn[1])) if recipe.dims == 2 else None
