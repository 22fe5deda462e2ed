"""Scaled dot-product attention: softmax(q · kᵀ * scale [+ mask]) · v -> one ``attention`` op.

Matched at the dot with v, from the forms exporters produce:

- q · kᵀ is a dot contracting the head dim; k may arrive transposed ([..., D, Sk])
  and q likewise. The scale is a multiply or divide by a constant on the scores, or
  a multiply on q and/or k before the dot (torch's ``1/sqrt(sqrt(d))`` on both): the
  op's scale is the product of all of them.
- masks: an additive mask ``scores + m`` (or a bias ``scores - m``, read as the mask ``-m``); a boolean
  one ``select(keep, scores, NEG)`` (or ``select(drop, NEG, scores)``); an additive ``select(keep, 0, NEG)`` or a
  constant of 0 / NEG values, where NEG is -inf or at most -1e4 (the dtype's min, -1e9):
  those are keep masks. A keep mask that is an ``and`` splits into its factors.
  A factor that keeps key j for query i exactly when j <= i + (Sk - Sq) (a constant
  pred tensor, a 0/-inf constant, or a compare of iotas) becomes ``causal=true``; a
  constant that also drops every key older than the last W (Mistral's sliding window)
  becomes ``causal=true, window=W``.
- logit soft-capping (Gemma 2): ``cap * tanh(scores * scale / cap)`` before the masks
  becomes ``softcap=cap`` with the scale ``scale``.
- softmax over the keys, with or without torch's ``select(is-nan(p), 0, p)`` guard
  for fully masked rows (attention already gives those rows 0), in f32 between two
  converts for half-precision scores; or, as ONNX's FlexAttention and Attention compute
  half-precision inputs, in f32 from the q·kᵀ dot on (scale, soft cap and masks in f32)
  through an f32 dot with the widened v whose every user rounds it back to the half type:
  the attention op then takes the half-precision q, k, v and its result is widened.
- k and v whose heads were repeated for grouped-query attention (transformers'
  repeat_kv: unsqueeze, expand, reshape) are read un-repeated: the op shares them.

q, k, v come out as [..., S, D]; head split and merge reshapes and transposes stay
outside for layout assignment. Anything else (two additive masks, a scale applied
after a mask, mismatched batch dims) is left alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mlcc.hlo.ir import Instruction, Module, Shape, is_float, is_int
from mlcc.hlo.passes.algsimp.convert import exact
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, constant_array, op, scalar_value, var
from mlcc.hlo.passes.views import is_degenerate_reshape, order_preserving, peel_views
from mlcc.hlo.symbolic import as_sym

MASKED_BELOW = -1e4          # a mask value at or below this removes the score
CAUSAL_CHECK_ELEMENTS = 1 << 22
REPLAY_ELEMENTS = 1 << 24     # the largest repeated k or v whose views are replayed on its indices


@dataclass
class Factor:
    """A pred keep-mask factor (or an additive float mask) and where its non-1 dims land in the scores."""

    value: Instruction
    pos: dict[int, int]
    negate: bool = False


@dataclass
class Scores:
    dot: Instruction
    scale: float = 1.0
    keep: list[Factor] = field(default_factory=list)
    additive: list[Factor] = field(default_factory=list)
    masked: list[float] = field(default_factory=list)  # the values masked scores become (-inf, or finfo.min)
    softcap: float | None = None  # scores became softcap * tanh(scores / softcap) (Gemma 2)


def _masked_value(v: Instruction, module: Module | None) -> bool:
    c = scalar_value(v, module)
    return c is not None and not isinstance(c, bool) and c <= MASKED_BELOW


def _scores_dot(dot: Instruction) -> bool:
    rank = dot.shape.rank
    batch = tuple(range(rank - 2))
    a = dot.attrs
    return (rank >= 2 and dot.operands[0].shape.rank == rank and dot.operands[1].shape.rank == rank
            and tuple(a["lhs_batch_dims"]) == batch and tuple(a["rhs_batch_dims"]) == batch
            and len(a["lhs_contracting_dims"]) == 1 and len(a["rhs_contracting_dims"]) == 1
            and a["lhs_contracting_dims"][0] >= rank - 2 and a["rhs_contracting_dims"][0] >= rank - 2)


def _parse_scores(s: Instruction, module: Module | None, widened: str | None = None) -> Scores | None:
    """The q·kᵀ dot under the scores, with the scale and masks applied on the way (``widened``: a half
    type whose dot the scores may read through a convert to f32)."""
    if widened is not None and s.opcode == "convert" and s.operands[0].opcode == "dot" \
            and s.operands[0].shape.dtype == widened:
        s = s.operands[0]
    if s.opcode == "dot":
        return Scores(s) if _scores_dot(s) else None
    pos = {d: d for d in range(s.shape.rank) if s.shape.dims[d] != 1}
    if s.opcode in ("multiply", "divide"):
        orders = [s.operands, list(reversed(s.operands))] if s.opcode == "multiply" else [s.operands]
        for a, b in orders:
            c = scalar_value(b, module)
            if c is None or isinstance(c, bool) or (s.opcode == "divide" and c == 0):
                continue
            if s.opcode == "multiply" and a.opcode == "tanh" and float(c) > 0:
                # logit soft-capping: cap * tanh(scores / cap), the 1/cap folded into the scale
                inner = _parse_scores(a.operands[0], module, widened)
                if inner is None or inner.keep or inner.additive or inner.softcap is not None:
                    return None
                inner.softcap, inner.scale = float(c), inner.scale * float(c)
                return inner
            inner = _parse_scores(a, module, widened)
            if inner is None or inner.keep or inner.additive or inner.softcap is not None:
                return None
            inner.scale = inner.scale * float(c) if s.opcode == "multiply" else inner.scale / float(c)
            return inner
        return None
    if s.opcode == "add":
        for a, b in (s.operands, reversed(s.operands)):
            inner = _parse_scores(a, module, widened)
            if inner is not None:
                inner.additive.append(Factor(b, pos))
                return inner
        return None
    if s.opcode == "subtract" and is_float(s.shape.dtype):  # scores - bias: the bias negated is the mask
        inner = _parse_scores(s.operands[0], module, widened)
        if inner is not None:
            inner.additive.append(Factor(s.operands[1], pos, negate=True))
        return inner
    if s.opcode == "select":
        p, on_true, on_false = s.operands
        if _masked_value(on_false, module):
            inner = _parse_scores(on_true, module, widened)
            if inner is not None:
                inner.keep.append(Factor(p, pos))
                inner.masked.append(float(scalar_value(on_false, module)))
            return inner
        if _masked_value(on_true, module):
            inner = _parse_scores(on_false, module, widened)
            if inner is not None:
                inner.keep.append(Factor(p, pos, negate=True))
                inner.masked.append(float(scalar_value(on_true, module)))
            return inner
    return None


def _compose(outer: dict[int, int], inner: dict[int, int]) -> dict[int, int]:
    return {i: outer[o] for i, o in inner.items()}


def _keep_factors(f: Factor) -> list[Factor]:
    """A keep mask split at its ``and``s (a negated one stays whole)."""
    src, pos = peel_views(f.value)
    pos = _compose(f.pos, pos)
    if src.opcode == "and" and not f.negate:
        return [g for operand in src.operands for g in _keep_factors(Factor(operand, pos))]
    if src.opcode == "select" and scalar_value(src.operands[1]) is True and scalar_value(src.operands[2]) is False:
        return _keep_factors(Factor(src.operands[0], pos, f.negate))  # jnp.tril(ones): the predicate itself
    return [Factor(src, pos, f.negate)]


def _as_keep(f: Factor, module: Module | None) -> tuple[Factor, float] | None:
    """An additive mask that only holds 0 or NEG values, as a keep mask, and its NEG."""
    src, pos = peel_views(f.value)
    pos = _compose(f.pos, pos)
    if src.opcode == "select" and scalar_value(src.operands[1], module) == 0 \
            and _masked_value(src.operands[2], module):
        return Factor(src.operands[0], pos), float(scalar_value(src.operands[2], module))
    return None


def _tril(data: np.ndarray, pos: dict[int, int], rank: int) -> int | None:
    """0 when data (placed by pos into [..., Sq, Sk] scores) keeps exactly j <= i + (Sk - Sq); W when it
    keeps exactly the last W of those keys (a sliding window, as Mistral's); None otherwise."""
    rows = [i for i, p in pos.items() if p == rank - 2]
    cols = [i for i, p in pos.items() if p == rank - 1]
    if len(rows) != 1 or len(cols) != 1:
        return None
    grid = np.moveaxis(data, [rows[0], cols[0]], [-2, -1])
    sq, sk = grid.shape[-2:]
    grid = grid.reshape(-1, sq, sk)
    i, j = np.arange(sq)[:, None] + (sk - sq), np.arange(sk)[None, :]
    if bool(np.all(grid == (j <= i)[None])):
        return 0
    window = int(grid[0, -1].sum())  # the last query keeps the most keys when a window cuts any
    if 0 < window < sk and bool(np.all(grid == ((j <= i) & (j > i - window))[None])):
        return window
    return None


def _iota_index(v: Instruction, module: Module | None) -> tuple[int, int] | None:
    """(dim, offset) when v[..] == index along dim + offset (iotas, broadcasts, converts, constant shifts)."""
    if v.opcode == "iota" and is_int(v.shape.dtype):
        return v.attrs["iota_dimension"], 0
    if v.opcode == "broadcast":
        inner = _iota_index(v.operands[0], module)
        return None if inner is None else (v.attrs["dimensions"][inner[0]], inner[1])
    if v.opcode == "convert" and is_int(v.shape.dtype) and exact(v.operands[0].shape.dtype, v.shape.dtype):
        return _iota_index(v.operands[0], module)
    if v.opcode in ("add", "subtract"):
        c = scalar_value(v.operands[1], module)
        inner = _iota_index(v.operands[0], module)
        if (inner is None or c is None) and v.opcode == "add":
            c, inner = scalar_value(v.operands[0], module), _iota_index(v.operands[1], module)
        if inner is None or c is None or isinstance(c, (bool, float)):
            return None
        return inner[0], inner[1] + (c if v.opcode == "add" else -c)
    return None


def _iota_causal(cmp: Instruction, pos: dict[int, int], rank: int, negate: bool, module: Module | None) -> bool:
    """compare(row iota + a, column iota + b) (or its negation) keeping exactly j <= i + (Sk - Sq)."""
    if cmp.opcode != "compare":
        return False
    lhs, rhs = _iota_index(cmp.operands[0], module), _iota_index(cmp.operands[1], module)
    if lhs is None or rhs is None:
        return False
    direction = cmp.attrs["direction"]
    if negate:  # integers: not(a >= b) is a < b
        direction = {"GE": "LT", "GT": "LE", "LE": "GT", "LT": "GE"}.get(direction)
    flipped = {"GE": "LE", "GT": "LT", "LE": "GE", "LT": "GT"}
    place = {pos.get(lhs[0]): lhs, pos.get(rhs[0]): rhs}
    if set(place) != {rank - 2, rank - 1}:
        return False
    if pos.get(lhs[0]) == rank - 1:       # written as column OP row: flip it to row OP column
        direction = flipped.get(direction)
    row, col = place[rank - 2], place[rank - 1]
    # keep when i + row_offset >= j + col_offset (GE) or > (GT): j <= i + shift
    if direction == "GE":
        shift = row[1] - col[1]
    elif direction == "GT":
        shift = row[1] - col[1] - 1
    else:
        return False
    dims = {p: cmp.shape.dims[i] for i, p in pos.items()}
    sq, sk = dims[rank - 2], dims[rank - 1]
    return as_sym(sk) - as_sym(sq) == shift  # symbolic lengths too: Sk - Sq is a polynomial


def _is_causal(f: Factor, rank: int, module: Module | None, additive: bool = False) -> int | None:
    """0 when the factor keeps exactly the causal pattern (a negated factor: drops exactly its complement),
    W when it keeps a causal sliding window of W keys, else None."""
    src = f.value
    if src.opcode == "constant" and src.shape.is_static and src.shape.numel() <= CAUSAL_CHECK_ELEMENTS:
        data = constant_array(src, module)
        if data is None:
            return None
        if additive:
            if not is_float(src.shape.dtype) or not np.all((data == 0) | (data <= MASKED_BELOW)):
                return None
            data = data == 0
        elif src.shape.dtype != "pred":
            return None
        return _tril(~data if f.negate else data, f.pos, rank)
    return 0 if not additive and _iota_causal(src, f.pos, rank, f.negate, module) else None


def _mask_operand(rw: Rewriter, f: Factor, rank: int) -> Instruction | None:
    """The factor as an operand that broadcasts numpy-style to the rank-``rank`` scores (a negated keep mask
    as its not, a negated additive mask as its negation)."""
    src = f.value
    flip = "not" if src.shape.dtype == "pred" else "negate"
    if not order_preserving(f.pos):
        return None
    lead = rank - src.shape.rank
    if lead >= 0 and all(p == i + lead for i, p in f.pos.items()):
        return rw.op(flip, [src]) if f.negate else src  # already lines up numpy-style
    dims = [1] * rank
    for i, p in f.pos.items():
        dims[p] = src.shape.dims[i]
    if not is_degenerate_reshape(src.shape.dims, dims):
        return None
    mask = rw.reshape(src, dims)
    return rw.op(flip, [mask]) if f.negate else mask


def _unscaled(x: Instruction, module: Module | None) -> tuple[Instruction, float]:
    """x without constant multipliers, and their product."""
    scale = 1.0
    while x.opcode == "multiply":
        for a, b in (x.operands, reversed(x.operands)):
            c = scalar_value(b, module)
            if c is not None and not isinstance(c, bool):
                scale *= float(c)
                x = a
                break
        else:
            break
    return x, scale


def _unguarded(p: Instruction, module: Module | None) -> Instruction:
    """p without torch's select(is-nan(p), 0, p)."""
    if p.opcode == "select":
        pred, zero, value = p.operands
        if pred.opcode == "is-nan" and pred.operands[0] is value and scalar_value(zero, module) == 0:
            return value
    return p


def _probabilities(p: Instruction, module: Module | None) -> tuple[Instruction, Instruction] | None:
    """(softmax, the scores it normalizes) under p: through the is-nan guard, and through the round trip
    to f32 of half-precision scores (torch's ``softmax(w, dtype=float32).to(half)``)."""
    p = _unguarded(p, module)
    half = None
    if p.opcode == "convert" and p.shape.dtype in ("f16", "bf16") and p.operands[0].shape.dtype == "f32":
        half, p = p.shape.dtype, _unguarded(p.operands[0], module)
    if p.opcode != "softmax" or p.attrs.get("log", False) or p.attrs["dimension"] != p.shape.rank - 1:
        return None
    scores = p.operands[0]
    if half is not None:
        if scores.opcode != "convert" or scores.operands[0].shape.dtype != half:
            return None
        scores = scores.operands[0]
    return p, scores


def _reshaped_broadcast(x: Instruction) -> Instruction | None:
    """The broadcast under x when the reshapes and transposes between them move no element: x is that
    broadcast reshaped (torch's exporter writes repeat_kv's keys as reshape, transpose, reshape, and the
    recognizer's own swap of the last two dims undoes the transpose). Checked by replaying the views on
    the broadcast's element indices."""
    chain = []
    cur = x
    while cur.opcode in ("reshape", "transpose") and len(chain) < 8:
        chain.append(cur)
        cur = cur.operands[0]
    b = cur
    if b.opcode != "broadcast" or not chain or not b.shape.is_static or not x.shape.is_static \
            or b.shape.numel() > REPLAY_ELEMENTS:
        return None
    idx = np.arange(b.shape.numel()).reshape(b.shape.dims)
    for view in reversed(chain):
        idx = idx.reshape(view.shape.dims) if view.opcode == "reshape" else idx.transpose(view.attrs["dimensions"])
    return b if np.array_equal(idx.reshape(-1), np.arange(idx.size)) else None


def _repeated_heads(x: Instruction) -> tuple[Instruction, tuple] | None:
    """(kv, its dims [B, Hkv, S, D]) when x [B, H, S, D] repeats each head of kv H/Hkv times in a row
    (transformers' repeat_kv: unsqueeze, expand, reshape), which grouped-query attention reads directly."""
    b = _reshaped_broadcast(x)
    if x.shape.rank != 4 or b is None:
        return None
    if b.shape.rank != 5 or not b.shape.is_static or not x.shape.is_static:
        return None
    batch, kv_heads, repeats, seq, dim = b.shape.dims
    if (batch, kv_heads * repeats, seq, dim) != tuple(x.shape.dims) or repeats < 2:
        return None
    kv = b.operands[0]
    if tuple(b.attrs["dimensions"]) == (0, 1, 3, 4) and tuple(kv.shape.dims) == (batch, kv_heads, seq, dim):
        return kv, (batch, kv_heads, seq, dim)  # repeat_kv's own input (which may be a transposed view)
    src, pos = peel_views(b)
    if not order_preserving(pos) or sorted(pos.values()) != [d for d in (0, 1, 3, 4) if b.shape.dims[d] != 1]:
        return None
    return src, (batch, kv_heads, seq, dim)


def _masks(scores: Scores, rank: int, module: Module | None) -> tuple[bool, int | None, list[Factor], list[Factor]]:
    """(causal, its sliding window if any, keep factors left, additive masks left) for the masks found on
    the scores."""
    keep = list(scores.keep)
    additive: list[Factor] = []
    causal = False
    windows: list[int] = []
    for f in scores.additive:
        as_keep = None if f.negate else _as_keep(f, module)
        src, pos = peel_views(f.value)
        peeled = Factor(src, _compose(f.pos, pos), f.negate)
        if f.negate:  # a subtracted bias: no 0/NEG mask (its NEG would be positive)
            additive.append(peeled)
        elif as_keep is not None:
            keep.append(as_keep[0])
            scores.masked.append(as_keep[1])
        elif (w := _is_causal(peeled, rank, module, additive=True)) is not None:
            causal = True
            windows += [w] if w else []
        else:
            additive.append(peeled)
    rest: list[Factor] = []
    for f in (g for k in keep for g in _keep_factors(k)):
        if scalar_value(f.value, module) is True and not f.negate:
            continue
        if (w := _is_causal(f, rank, module)) is not None:
            causal = True
            windows += [w] if w else []
        else:
            rest.append(f)
    return causal, min(windows) if windows else None, rest, additive


def _swap_last(rw: Rewriter, x: Instruction) -> Instruction:
    """x with its last two dims swapped (composed with x's own transpose, if it is one)."""
    rank = x.shape.rank
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    if x.opcode == "transpose":
        inner = x.attrs["dimensions"]
        return rw.transpose(x.operands[0], [inner[p] for p in perm])
    return rw.transpose(x, perm)


def _unrecognized(rw: Rewriter, softmax: Instruction, pv: Instruction, reason: str) -> None:
    """Record why softmax(...) · v is not one attention op (``--explain-fusion`` prints it): its scores
    then reach memory."""
    line = f"%{softmax.name} -> %{pv.name}: attention not recognized: {reason}"
    if rw.module is not None and line not in rw.module.analyses.unrecognized:
        rw.module.analyses.unrecognized.append(line)


def _pv_dot(pv: Instruction) -> bool:
    """pv may be the probabilities-times-v dot of an attention: float, batched, contracting p's last dim."""
    rank = pv.shape.rank
    return is_float(pv.shape.dtype) and _scores_dot(pv) and tuple(pv.attrs["lhs_contracting_dims"]) == (rank - 1,)


def _widened_half(pv: Instruction) -> str | None:
    """The half type when pv is an f32 dot with a v widened from it and every user of pv rounds it back."""
    v = pv.operands[1]
    if pv.shape.dtype != "f32" or v.opcode != "convert" or v.operands[0].shape.dtype not in ("f16", "bf16"):
        return None
    half = v.operands[0].shape.dtype
    users = list(pv.users)
    return half if users and all(u.opcode == "convert" and u.shape.dtype == half for u in users) else None


def _kernel_order(rw: Rewriter, qk: Instruction, pv: Instruction, q: Instruction, k: Instruction,
                  v: Instruction) -> tuple[Instruction, Instruction, Instruction]:
    """q, k and v as the attention kernel reads them ([.., seq, d]): each transposed where its dot contracted
    another dim."""
    rank = pv.shape.rank
    if tuple(qk.attrs["lhs_contracting_dims"]) != (rank - 1,):
        q = _swap_last(rw, q)
    if tuple(qk.attrs["rhs_contracting_dims"]) != (rank - 1,):
        k = _swap_last(rw, k)
    if tuple(pv.attrs["rhs_contracting_dims"]) != (rank - 2,):
        v = _swap_last(rw, v)
    return q, k, v


def _attention(rw: Rewriter, m: Match) -> Instruction | None:
    pv = m.root
    rank = pv.shape.rank
    p, v = pv.operands
    if not _pv_dot(pv):
        return None
    widened = _widened_half(pv)
    if widened is not None:
        v = v.operands[0]
    found = _probabilities(p, rw.module)
    if found is None:
        return None
    scores = _parse_scores(found[1], rw.module, widened)
    if scores is None:
        _unrecognized(rw, found[0], pv, f"the softmax's input (%{found[1].name}, {found[1].opcode}) is not "
                      "q · kᵀ under constant scales, one soft-cap and masks")
        return None
    qk = scores.dot
    dtypes = {pv.shape.dtype, v.shape.dtype, p.shape.dtype, qk.shape.dtype, *(o.shape.dtype for o in qk.operands)}
    if widened is not None:  # f32 probabilities and product, half-precision q, k, v and q·kᵀ
        dtypes = {widened if d == "f32" else d for d in dtypes}
    if len(dtypes) != 1:
        _unrecognized(rw, found[0], pv, f"q, k, v and the scores mix types ({', '.join(sorted(dtypes))})")
        return None
    causal, window, keep, additive = _masks(scores, rank, rw.module)
    if len(keep) + len(additive) > 1:
        _unrecognized(rw, found[0], pv, f"{len(keep) + len(additive)} masks besides a causal one (at most one "
                      "is read by the kernel)")
        return None
    finite = {v for v in scores.masked if math.isfinite(v)}
    if keep and (len(finite) > 1 or (finite and len(finite) != len(set(scores.masked)))):
        # masked by two different values: no one rule gives the rows they mask whole
        _unrecognized(rw, found[0], pv, "the masks drop scores to different values")
        return None
    masked_value = finite.pop() if keep and finite else None
    q, q_scale = _unscaled(qk.operands[0], rw.module)
    k, k_scale = _unscaled(qk.operands[1], rw.module)
    scale = scores.scale * q_scale * k_scale
    if not math.isfinite(scale):
        _unrecognized(rw, found[0], pv, f"the scale {scale} is not finite")
        return None
    mask = None
    for f in keep + additive:
        mask = _mask_operand(rw, f, rank)
        if mask is None:
            _unrecognized(rw, found[0], pv, f"the mask %{f.value.name} {f.value.shape} does not broadcast to the "
                          "scores in order")
            return None
    q, k, v = _kernel_order(rw, qk, pv, q, k, v)
    shared_k, shared_v = _repeated_heads(k), _repeated_heads(v)
    if shared_k is not None and shared_v is not None and shared_k[1][1] == shared_v[1][1]:
        k, v = rw.reshape(shared_k[0], shared_k[1]), rw.reshape(shared_v[0], shared_v[1])
    operands = [q, k, v] + ([mask] if mask is not None else [])
    attrs = {} if masked_value is None else {"masked_value": masked_value}
    if window is not None:
        attrs["window"] = window
    if scores.softcap is not None:
        attrs["softcap"] = scores.softcap
    attention = rw.op("attention", operands, scale=scale, causal=causal, **attrs)
    return attention if widened is None else rw.op("convert", [attention], Shape("f32", attention.shape.dims))


RULES = [Rule("attention", op("dot", var("p"), var("v")), _attention)]


class RecognizeAttention(RewritePass):
    def __init__(self) -> None:
        super().__init__("recognize-attention", RULES)
