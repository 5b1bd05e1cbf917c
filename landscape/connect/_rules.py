"""How each ATen operation ties the axes of its tensors (private).

:func:`propagate` walks a :class:`~landscape.connect._trace.Trace` and gives every axis of
every tensor a variable of :class:`~landscape.connect._dims.Dims`. A rule per operation says
what commutes with a permutation of an axis:

* elementwise operations (with broadcasting), activations, softmax over an axis: the
  axes of their operands and outputs are one;
* ``mm``/``addmm``/``bmm``: the contracted axes are one, the others carry to the output;
* convolutions: input channels with the kernel's, output channels with its first axis
  and the bias (groups as whole groups); spatial positions and kernel positions fixed;
* batch, layer and group norms: the channel (normalised) axes with their affine
  parameters and running statistics;
* reshapes, transposes, slices, splits and concatenation: :meth:`Dims.split_kron`,
  :meth:`Dims.split_cat`, :meth:`Dims.cat`;
* embeddings: the rows are looked up by index (fixed), the columns carry;
* scaled dot-product attention: queries with keys on the contracted axis, keys with
  values on the sequence, heads with heads; sequence positions fixed.

An operation with no rule fixes every axis of its tensors (reported with its name and
module): the structure found is never wider than what is known to commute, and the
function check (:mod:`landscape.connect._check`) guards the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from landscape.connect._dims import Dims
from landscape.connect._trace import Event, Trace

__all__ = ["Propagation", "propagate", "INPUT", "OUTPUT"]

INPUT = "the network's input"
OUTPUT = "the network's output"
_CONSTANT = "a tensor made inside the forward pass (a constant)"


@dataclass
class Propagation:
    """The variables of a trace: of each tensor's axes (by ``id``), of each parameter's axes."""

    dims: Dims
    vars: dict[int, list[int]]
    params: dict[str, list[int]]
    events: list[tuple[str, str, list[list[int]]]] = field(default_factory=list)  # (op, module, output vars)
    unknown: dict[str, str] = field(default_factory=dict)  # "module: op" -> why
    dtypes: tuple[str, ...] = ()  # the floating dtypes the operations computed in


class _Walk:
    def __init__(self, trace: Trace) -> None:
        self.d = Dims()
        self.vars: dict[int, list[int]] = {}
        self.param_names = trace.params
        self.params: dict[str, list[int]] = {}
        self.unknown: dict[str, str] = {}
        self.where = ""
        for t in trace.inputs:
            self.vars[id(t)] = [self.d.new(n, INPUT) for n in t.shape]

    def of(self, t: torch.Tensor) -> list[int]:
        key = id(t)
        got = self.vars.get(key)
        if got is not None:
            return got
        name = self.param_names.get(key)
        if name is not None:
            vs = [self.d.new(n) for n in t.shape]
            self.params[name] = vs
        else:
            vs = [self.d.new(n, _CONSTANT) for n in t.shape]
        self.vars[key] = vs
        return vs

    def out(self, t: torch.Tensor, vs: list[int]) -> None:
        """The variables of an output: set, or unified with what it has (an in-place operation)."""
        if len(vs) != t.dim():
            raise AssertionError(f"{len(vs)} variables for a tensor of {t.dim()} axes")
        got = self.vars.get(id(t))
        if got is None and id(t) in self.param_names:
            got = self.of(t)
        if got is None:
            self.vars[id(t)] = list(vs)
            return
        for a, b in zip(got, vs):
            self.d.union(a, b)

    def fresh(self, t: torch.Tensor, why: str | None = None) -> list[int]:
        return [self.d.new(n, why) for n in t.shape]

    def fix_all(self, ev: Event, why: str) -> None:
        for t in ev.inputs:
            for v in self.of(t):
                self.d.fix(v, why)
        for t in ev.outputs:
            self.out(t, self.fresh(t, why))

    def broadcast(self, ts: list[torch.Tensor], out: list[int], shape: tuple[int, ...]) -> None:
        """Operands broadcast to ``shape`` (variables ``out``): equal non-trivial axes are one."""
        for t in ts:
            vs = self.of(t)
            if t.dim() > len(shape):
                for v in vs:
                    self.d.fix(v, f"{self.where}: broadcast to fewer axes")
                continue
            for j in range(1, t.dim() + 1):
                if t.shape[-j] == shape[-j] and shape[-j] > 1:
                    self.d.union(vs[-j], out[-j])


Rule = Callable[[_Walk, Event], None]


def _dim(d: int, n: int) -> int:
    return d + n if d < 0 else d


# -- elementwise ------------------------------------------------------------------------------
def _elementwise(w: _Walk, ev: Event) -> None:
    outs = ev.outputs
    if not outs:
        w.broadcast(ev.inputs, [], ())
        return
    ref = outs[0]
    vs = w.vars.get(id(ref)) or w.fresh(ref)
    w.out(ref, vs)
    vs = w.vars[id(ref)]
    w.broadcast([t for t in ev.inputs if t.dim() > 0], vs, tuple(ref.shape))
    for t in outs[1:]:
        if tuple(t.shape) == tuple(ref.shape):
            w.out(t, vs)
        else:
            w.out(t, w.fresh(t, f"{w.where}: a secondary output of {ev.name}"))


def _constant_like(w: _Walk, ev: Event) -> None:
    """A tensor of one value everywhere: any permutation leaves it as it is."""
    for t in ev.outputs:
        w.out(t, w.fresh(t))


def _factory(w: _Walk, ev: Event) -> None:
    for t in ev.outputs:
        w.out(t, w.fresh(t, _CONSTANT))


# -- shapes -----------------------------------------------------------------------------------
def _reshape(w: _Walk, vs: list[int], shape_in: tuple[int, ...], shape_out: tuple[int, ...], why: str) -> list[int]:
    """The variables of a reshape's output: axes grouped where the products of the sizes meet."""
    d = w.d
    if any(s == 0 for s in shape_in):
        return [d.new(s) for s in shape_out]
    big_in = [(i, s) for i, s in enumerate(shape_in) if s != 1]
    big_out = [(i, s) for i, s in enumerate(shape_out) if s != 1]
    bi, bo = _cum([s for _, s in big_in]), _cum([s for _, s in big_out])
    out: list[int | None] = [None] * len(shape_out)
    i = j = 0
    for c in sorted(set(bi) & set(bo)):
        gi, gj = [], []
        while i < len(big_in) and bi[i] <= c:
            gi.append(big_in[i][0])
            i += 1
        while j < len(big_out) and bo[j] <= c:
            gj.append(big_out[j])
            j += 1
        v = d.kron([vs[k] for k in gi])
        parts = d.split_kron(v, [s for _, s in gj], why) if len(gj) > 1 else [v]
        for (k, _), p in zip(gj, parts):
            out[k] = p
    return [o if o is not None else d.new(shape_out[k]) for k, o in enumerate(out)]


def _cum(sizes: list[int]) -> list[int]:
    out, p = [], 1
    for s in sizes:
        p *= s
        out.append(p)
    return out


def _view(w: _Walk, ev: Event) -> None:
    x, out = ev.inputs[0], ev.outputs[0]
    w.out(out, _reshape(w, w.of(x), tuple(x.shape), tuple(out.shape), f"{w.where}: a reshape ({ev.name})"))


def _t(w: _Walk, ev: Event) -> None:
    x, out = ev.inputs[0], ev.outputs[0]
    w.out(out, list(reversed(w.of(x))))


def _transpose(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x, out = ev.inputs[0], ev.outputs[0]
    vs = list(w.of(x))
    d0, d1 = _dim(a["dim0"], x.dim()), _dim(a["dim1"], x.dim())
    vs[d0], vs[d1] = vs[d1], vs[d0]
    w.out(out, vs)


def _permute(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x, out = ev.inputs[0], ev.outputs[0]
    vs = w.of(x)
    w.out(out, [vs[_dim(k, x.dim())] for k in a["dims"]])


def _unsqueeze(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x, out = ev.inputs[0], ev.outputs[0]
    vs = list(w.of(x))
    vs.insert(_dim(a["dim"], out.dim()), w.d.new(1))
    w.out(out, vs)


def _squeeze(w: _Walk, ev: Event) -> None:
    x, out = ev.inputs[0], ev.outputs[0]
    a = ev.bound()
    dims = a.get("dim", None)
    if dims is None:
        dims = [k for k in range(x.dim()) if x.shape[k] == 1]
    elif isinstance(dims, int):
        dims = [dims]
    gone = {_dim(k, x.dim()) for k in dims if x.dim() and x.shape[_dim(k, x.dim())] == 1}
    w.out(out, [v for k, v in enumerate(w.of(x)) if k not in gone])


def _expand(w: _Walk, ev: Event) -> None:
    x, out = ev.inputs[0], ev.outputs[0]
    vs = w.of(x)
    new = []
    lead = out.dim() - x.dim()
    for k in range(out.dim()):
        if k < lead or x.shape[k - lead] != out.shape[k]:
            new.append(w.d.new(out.shape[k]))  # copies of one value: any order is the same
        else:
            new.append(vs[k - lead])
    w.out(out, new)


def _slice(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x, out = ev.inputs[0], ev.outputs[0]
    n = x.dim()
    d = _dim(a.get("dim", 0), n)
    size = x.shape[d]
    start, end, step = a.get("start"), a.get("end"), a.get("step", 1)
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else (end + size if end < 0 else end)
    start, end = max(0, min(start, size)), max(0, min(end, size))
    vs = list(w.of(x))
    why = f"{w.where}: a strided or partial slice ({ev.name})"
    if step != 1:
        w.d.fix(vs[d], why)
        vs[d] = w.d.new(out.shape[d], why)
    elif not (start == 0 and end >= size):
        parts = w.d.split_cat(vs[d], [start, max(0, end - start), size - max(end, start)], why)
        vs[d] = parts[1]
    w.out(out, vs)


def _select(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x, out = ev.inputs[0], ev.outputs[0]
    d = _dim(a["dim"], x.dim())
    vs = list(w.of(x))
    w.d.fix(vs[d], f"{w.where}: one index picked ({ev.name})")
    w.out(out, vs[:d] + vs[d + 1:])


def _split(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x = ev.inputs[0]
    outs = ev.outputs
    d = _dim(a.get("dim", 0), x.dim())
    sizes = [t.shape[d] for t in outs]
    vs = w.of(x)
    parts = w.d.split_cat(vs[d], sizes, f"{w.where}: a split ({ev.name})")
    for t, p in zip(outs, parts):
        w.out(t, vs[:d] + [p] + vs[d + 1:])


def _unbind(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x = ev.inputs[0]
    d = _dim(a.get("dim", 0), x.dim())
    vs = w.of(x)
    w.d.fix(vs[d], f"{w.where}: an axis unbound ({ev.name})")
    for t in ev.outputs:
        w.out(t, vs[:d] + vs[d + 1:])


def _cat(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    out = ev.outputs[0]
    ts = [t for t in a["tensors"] if not (t.dim() == 1 and t.shape[0] == 0)]
    d = _dim(a.get("dim", 0), out.dim())
    others = [w.d.new(out.shape[k]) if k != d else -1 for k in range(out.dim())]
    for t in ts:
        vs = w.of(t)
        for k in range(out.dim()):
            if k != d:
                w.d.union(vs[k], others[k])
    others[d] = w.d.cat([w.of(t)[d] for t in ts])
    w.out(out, others)


def _fix_axis(w: _Walk, ev: Event, why: str) -> None:
    """An operation along one axis whose result depends on its order (cumsum, sort, argmax, flip):
    that axis is fixed, the others carry."""
    a = ev.bound()
    x = ev.inputs[0]
    d = a.get("dim", None)
    vs = w.of(x)
    if d is None or (isinstance(d, (list, tuple)) and not d):
        for v in vs:
            w.d.fix(v, f"{w.where}: {why} ({ev.name})")
        for t in ev.outputs:
            w.out(t, w.fresh(t, f"{w.where}: {why} ({ev.name})"))
        return
    ds = {_dim(k, x.dim()) for k in (d if isinstance(d, (list, tuple)) else [d])}
    for k in ds:
        w.d.fix(vs[k], f"{w.where}: {why} ({ev.name})")
    for t in ev.outputs:
        if t.dim() == x.dim():
            w.out(t, [vs[k] if t.shape[k] == x.shape[k] else w.d.new(t.shape[k], why) for k in range(t.dim())])
        elif t.dim() == x.dim() - len(ds):
            w.out(t, [v for k, v in enumerate(vs) if k not in ds])
        else:
            w.out(t, w.fresh(t, why))


def _reduce(w: _Walk, ev: Event) -> None:
    """Sums, means, maxima, variances over axes: the same under any order of them."""
    a = ev.bound()
    if "other" in a:  # max(a, b), min(a, b): elementwise
        _elementwise(w, ev)
        return
    if len(ev.outputs) == 2 and ev.name in ("max", "min"):  # values and indices: the order matters
        _fix_axis(w, ev, "an index along an axis")
        return
    x = ev.inputs[0]
    vs = w.of(x)
    d = a.get("dim", None)
    keep = bool(a.get("keepdim", False))
    if d is None or (isinstance(d, (list, tuple)) and not d):
        ds = set(range(x.dim()))
    else:
        ds = {_dim(k, x.dim()) for k in (d if isinstance(d, (list, tuple)) else [d])}
    for t in ev.outputs:
        if keep and t.dim() == x.dim():
            w.out(t, [w.d.new(1) if k in ds else v for k, v in enumerate(vs)])
        elif t.dim() == x.dim() - len(ds):
            w.out(t, [v for k, v in enumerate(vs) if k not in ds])
        else:
            w.out(t, w.fresh(t, f"{w.where}: {ev.name}"))


# -- layers -----------------------------------------------------------------------------------
def _mm(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    first, second = _MM_ARGS[ev.name]
    x, y, out = a[first], a[second], ev.outputs[0]
    vx, vy = w.of(x), w.of(y)
    vo = w.vars.get(id(out)) or [*vx[:-1], vy[-1]]
    w.out(out, vo)
    vo = w.vars[id(out)]
    w.d.union(vx[-1], vy[-2])
    for k in range(x.dim() - 1):
        w.d.union(vx[k], vo[k])
    w.d.union(vy[-1], vo[-1])
    if x.dim() == 3:
        w.d.union(vy[0], vo[0])
    if ev.name in ("addmm", "baddbmm"):
        w.broadcast([a["self"]], vo, tuple(out.shape))


_MM_ARGS = {"mm": ("self", "mat2"), "bmm": ("self", "mat2"), "addmm": ("mat1", "mat2"),
            "baddbmm": ("batch1", "batch2")}


def _conv(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x, wt, bias, out = a["input"], a["weight"], a.get("bias"), ev.outputs[0]
    groups, transposed = int(a.get("groups", 1)), bool(a.get("transposed", False))
    d = w.d
    vx, vw = w.of(x), w.of(wt)
    vo = w.fresh(out)
    w.out(out, vo)
    vo = w.vars[id(out)]
    b = x.dim() - (wt.dim() - 1)  # 1 with a batch axis
    where = w.where
    for k in range(b + 1, x.dim()):
        d.fix(vx[k], f"{where}: spatial positions (convolution)")
    for k in range(b + 1, out.dim()):
        d.fix(vo[k], f"{where}: spatial positions (convolution)")
    for k in range(2, wt.dim()):
        d.fix(vw[k], f"{where}: kernel positions (convolution)")
    if b:
        d.union(vx[0], vo[0])
    cin, cout = vx[b], vo[b]
    w_in, w_out = (vw[0], vw[1]) if transposed else (vw[1], vw[0])
    if groups == 1:
        d.union(cin, w_in)
        d.union(cout, w_out)
    else:
        why = f"{where}: grouped convolution"
        gi, ci = d.split_kron(cin, [groups, x.shape[b] // groups], why)
        go, co = d.split_kron(cout, [groups, out.shape[b] // groups], why)
        if transposed:
            gw, cw = d.split_kron(vw[0], [groups, wt.shape[0] // groups], why)
            d.union(gw, gi)
            d.union(cw, ci)
            d.union(vw[1], co)
        else:
            gw, cw = d.split_kron(vw[0], [groups, wt.shape[0] // groups], why)
            d.union(gw, go)
            d.union(cw, co)
            d.union(vw[1], ci)
        d.union(gi, go)
    if isinstance(bias, torch.Tensor):
        d.union(w.of(bias)[0], cout)


def _batch_norm(w: _Walk, ev: Event) -> None:
    x = ev.inputs[0]
    vs = w.of(x)
    c = vs[1] if x.dim() > 1 else vs[0]
    n = x.shape[1] if x.dim() > 1 else x.shape[0]
    for t in ev.inputs[1:]:
        if t.dim() == 1 and t.shape[0] == n:
            w.d.union(w.of(t)[0], c)
        elif t.numel() > 1:
            for v in w.of(t):
                w.d.fix(v, f"{w.where}: {ev.name}")
    outs = ev.outputs
    w.out(outs[0], list(vs))
    for t in outs[1:]:
        if t.dim() == 1 and t.shape[0] == n:
            w.out(t, [c])
        else:
            w.out(t, w.fresh(t, f"{w.where}: batch-norm workspace"))


def _layer_norm(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x = a["input"]
    k = len(a["normalized_shape"])
    vs = w.of(x)
    for p in (a.get("weight"), a.get("bias")):
        if isinstance(p, torch.Tensor):
            for j, v in enumerate(w.of(p)):
                w.d.union(v, vs[x.dim() - k + j])
    outs = ev.outputs
    w.out(outs[0], list(vs))
    for t in outs[1:]:  # mean and rstd: the leading axes, then ones
        w.out(t, [vs[j] if j < x.dim() - k else w.d.new(t.shape[j]) for j in range(t.dim())]
              if t.dim() == x.dim() else w.fresh(t, f"{w.where}: layer-norm statistics"))


def _group_norm(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    x = a["input"]
    g = int(a["group"])
    vs = w.of(x)
    gv, _ = w.d.split_kron(vs[1], [g, x.shape[1] // g], f"{w.where}: group norm")
    for p in (a.get("weight"), a.get("bias")):
        if isinstance(p, torch.Tensor):
            w.d.union(w.of(p)[0], vs[1])
    outs = ev.outputs
    w.out(outs[0], list(vs))
    for t in outs[1:]:  # mean, rstd: (N, groups)
        if t.dim() == 2 and t.shape[1] == g:
            w.out(t, [vs[0], gv])
        else:
            w.out(t, w.fresh(t, f"{w.where}: group-norm statistics"))


def _embedding(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    wt, idx, out = a["weight"], a["indices"], ev.outputs[0]
    vw, vi = w.of(wt), w.of(idx)
    w.d.fix(vw[0], f"{w.where}: rows looked up by index (embedding)")
    w.out(out, [*vi, vw[1]])


def _attention(w: _Walk, ev: Event) -> None:
    a = ev.bound()
    q, k, v = a["query"], a["key"], a["value"]
    vq, vk, vv = w.of(q), w.of(k), w.of(v)
    d = w.d
    why = f"{w.where}: sequence positions (attention)"
    d.fix(vq[-2], why)
    d.fix(vk[-2], why)
    d.union(vq[-1], vk[-1])
    d.union(vk[-2], vv[-2])
    nb = q.dim() - 2
    for j in range(1, nb + 1):
        for t, vt in ((k, vk), (v, vv)):
            if t.dim() - 2 < j or q.shape[-2 - j] <= 1:
                continue
            nq, nk = q.shape[-2 - j], t.shape[-2 - j]
            if nk == nq:
                d.union(vt[-2 - j], vq[-2 - j])
            elif nk > 1 and nq % nk == 0:  # grouped-query attention: query head i reads key head i // (nq / nk)
                outer, _ = d.split_kron(vq[-2 - j], [nk, nq // nk], f"{w.where}: grouped-query attention")
                d.union(vt[-2 - j], outer)
    outs = ev.outputs
    out = outs[0]
    w.out(out, [*vq[:-1], vv[-1]] if out.dim() == q.dim() else w.fresh(out, why))
    batch_ls = [*vq[:-1], vk[-2]]
    shape = (*q.shape[:-1], k.shape[-2])
    for name, t in a.items():
        if name not in ("query", "key", "value") and isinstance(t, torch.Tensor) and t.dim() >= 2:
            w.broadcast([t], batch_ls, shape)
    for t in outs[1:]:
        w.out(t, w.fresh(t, f"{w.where}: attention kernel statistics"))


def _spatial(k: int) -> Rule:
    """Pooling, padding by reflection, upsampling: the last ``k`` axes are positions (fixed); the
    others (batch, channels) carry."""

    def rule(w: _Walk, ev: Event) -> None:
        x = ev.inputs[0]
        vs = w.of(x)
        why = f"{w.where}: spatial positions ({ev.name})"
        for v in vs[x.dim() - k:]:
            w.d.fix(v, why)
        for t in ev.outputs:
            w.out(t, [*vs[:x.dim() - k], *(w.d.new(n, why) for n in t.shape[x.dim() - k:])]
                  if t.dim() == x.dim() else w.fresh(t, why))

    return rule


def _pad(w: _Walk, ev: Event) -> None:
    """Constant padding: an axis padded is its input's axis between new constant parts (a
    ResNet's zero-padded shortcut keeps the stream's permutation on the channels it had)."""
    a = ev.bound()
    x, out = ev.inputs[0], ev.outputs[0]
    pad = list(a["pad"])
    vs = list(w.of(x))
    why = f"{w.where}: padded ({ev.name})"
    for j in range(len(pad) // 2):
        k = x.dim() - 1 - j
        lo, hi = int(pad[2 * j]), int(pad[2 * j + 1])
        if lo == 0 and hi == 0:
            continue
        if lo < 0 or hi < 0:
            w.d.fix(vs[k], why)
            vs[k] = w.d.new(out.shape[k], why)
        else:
            vs[k] = w.d.cat([w.d.new(lo, why), vs[k], w.d.new(hi, why)])
    w.out(out, vs)


def _tri(w: _Walk, ev: Event) -> None:
    x, out = ev.inputs[0], ev.outputs[0]
    vs = list(w.of(x))
    why = f"{w.where}: a triangle ({ev.name})"
    for k in (-1, -2):
        w.d.fix(vs[k], why)
    w.out(out, vs)


# -- the table --------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return text.split()


_ELEMENTWISE = _words("""abs add add_ addcdiv addcmul alias bitwise_and bitwise_not bitwise_or
bitwise_xor ceil clamp clamp_
clamp_max clamp_min clone contiguous copy copy_ cos detach div div_ elu elu_ eq erf erfinv exp exp2
expm1 fill fill_ floor fmod frac ge gelu gelu_ gt hardsigmoid hardswish hardtanh hardtanh_ isfinite
isinf isnan le leaky_relu leaky_relu_ lerp lift_fresh lift_fresh_copy log log10 log1p log2
logical_and logical_not logical_or logical_xor lt masked_fill masked_fill_ maximum minimum mish mul
mul_ nan_to_num native_dropout ne neg pow reciprocal relu relu_ remainder round rsqrt rsub sigmoid
sigmoid_ sign silu silu_ sin softplus sqrt square sub sub_ tanh tanh_ threshold trunc where xlogy
zero_ _to_copy _softmax _log_softmax softmax log_softmax relu6 hypot atan2 sinh cosh atan asin acos
tan _conj sgn logit""")
_FACTORY = _words("""arange empty empty_strided zeros ones full scalar_tensor eye linspace logspace rand randn randint
randperm bernoulli normal uniform uniform_ normal_ bernoulli_ rand_like randn_like randint_like
_efficientzerotensor""")
_CONSTANT_LIKE = _words("zeros_like ones_like full_like empty_like new_zeros new_ones new_full new_empty")
_VIEWS = _words("view _unsafe_view reshape view_copy _reshape_alias unflatten flatten")
_REDUCE = _words("""sum mean amax amin var std var_mean std_mean logsumexp norm linalg_vector_norm prod any all
max min""")
_ORDERED = _words("argmax argmin cumsum cumprod sort topk flip roll cummax cummin")
_NORM_BN = _words("""native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training
_native_batch_norm_legit_functional cudnn_batch_norm miopen_batch_norm _batch_norm_with_update
_batch_norm_no_update _batch_norm_with_update_functional""")
_ATTENTION = _words("""_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_flash_attention
_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
_scaled_dot_product_fused_attention_overrideable""")

RULES: dict[str, Rule] = {
    **dict.fromkeys(_ELEMENTWISE, _elementwise),
    **dict.fromkeys(_FACTORY, _factory),
    **dict.fromkeys(_CONSTANT_LIKE, _constant_like),
    **dict.fromkeys(_VIEWS, _view),
    **dict.fromkeys(_REDUCE, _reduce),
    **{n: (lambda w, ev: _fix_axis(w, ev, "order along an axis")) for n in _ORDERED},
    **dict.fromkeys(_NORM_BN, _batch_norm),
    **dict.fromkeys(_ATTENTION, _attention),
    "t": _t, "transpose": _transpose, "permute": _permute, "unsqueeze": _unsqueeze, "squeeze": _squeeze,
    "expand": _expand, "slice": _slice, "narrow": _slice, "select": _select, "split": _split,
    "split_with_sizes": _split, "unbind": _unbind, "cat": _cat, "index_select": lambda w, ev: _fix_axis(
        w, ev, "rows picked by index"),
    "mm": _mm, "addmm": _mm, "bmm": _mm, "baddbmm": _mm, "convolution": _conv, "native_layer_norm": _layer_norm,
    "native_group_norm": _group_norm, "embedding": _embedding, "constant_pad_nd": _pad, "tril": _tri,
    "triu": _tri,
    **{f"{kind}{k}d{tail}": _spatial(k) for k in (1, 2, 3)
       for kind in ("max_pool", "avg_pool", "adaptive_avg_pool", "_adaptive_avg_pool", "adaptive_max_pool",
                    "upsample_nearest", "upsample_bilinear", "upsample_bicubic", "upsample_linear",
                    "upsample_trilinear", "reflection_pad", "replication_pad", "fractional_max_pool")
       for tail in ("", "_with_indices")},
}
#: Operations that read no tensor's values in a way a permutation could change (shape queries).
_NEUTRAL = {"_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
            "_assert_async", "_assert_tensor_metadata", "_functional_assert_async", "record_stream"}


def propagate(trace: Trace) -> Propagation:
    """The variables of every axis of a trace (see the module docstring)."""
    w = _Walk(trace)
    events: list[tuple[str, str, list[list[int]]]] = []
    for ev in trace.events:
        name = ev.name
        w.where = ev.module or "the model's own forward"
        rule = RULES.get(name)
        if rule is None and name in _NEUTRAL:
            for t in ev.outputs:
                w.out(t, w.fresh(t))
        elif rule is None:
            why = f"{w.where}: {name} (no rule for this operation)"
            w.unknown[f"{w.where}: {name}"] = why
            w.fix_all(ev, why)
        else:
            try:
                rule(w, ev)
            except (KeyError, IndexError, TypeError, ValueError, AssertionError) as exc:
                why = f"{w.where}: {name} (its arguments were not understood: {exc})"
                w.unknown[f"{w.where}: {name}"] = why
                w.fix_all(ev, why)
        events.append((name, ev.module, [list(w.vars.get(id(t)) or w.of(t)) for t in ev.outputs]))
    for t in trace.outputs:
        for v in w.of(t):
            w.d.fix(v, OUTPUT)
    dtypes = sorted({str(t.dtype).replace("torch.", "") for ev in trace.events for t in ev.outputs
                     if t.is_floating_point()})
    return Propagation(w.d, w.vars, w.params, events, w.unknown, tuple(dtypes))
