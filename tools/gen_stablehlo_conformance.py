"""Write the StableHLO conformance set: one small JAX program per op family, with JAX's outputs.

    python3 -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax jaxlib numpy
    /tmp/jaxvenv/bin/python tools/gen_stablehlo_conformance.py [OUT_DIR]

For each case NAME it writes, under tests/data/stablehlo/ (or OUT_DIR):
  NAME.mlir          jax.jit(f).lower(*args).as_text()    (the pretty form)
  NAME.generic.mlir  the same module in MLIR's generic form (for some cases)
  NAME.debug.mlir    as_text(debug_info=True), with loc(...) everywhere (for some cases)
  NAME.ref.npz       inputs arg0.. and JAX's outputs out0.. (computed on CPU; bfloat16 stored as float32)
and, under unsupported/, programs that use ops mlcc refuses (sort, custom_call...),
plus portable.mlirbc, a jax.export artifact (MLIR bytecode) with portable.ref.npz.
Only this script needs jax; the tests read its files.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = Path(__file__).resolve().parent.parent / "tests" / "data" / "models"

_rng = np.random.default_rng(20240601)


def f32(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return _rng.uniform(lo, hi, shape).astype(np.float32)


def ints(*shape: int, lo: int = -9, hi: int = 10, dtype: Any = np.int32) -> np.ndarray:
    return _rng.integers(lo, hi, shape).astype(dtype)


def bools(*shape: int) -> np.ndarray:
    return _rng.integers(0, 2, shape).astype(bool)


# name -> (function, args, variants) where variants is a set of {"generic", "debug"}
CASES: dict[str, tuple[Callable, tuple, set[str]]] = {}
UNSUPPORTED: dict[str, tuple[Callable, tuple]] = {}


def case(name: str, fn: Callable, *args: Any, variants: tuple[str, ...] = ()) -> None:
    CASES[name] = (fn, args, set(variants))


X = f32(4, 8)
Y = f32(4, 8)
POS = f32(4, 8, lo=0.1, hi=3.0)
UNIT = f32(4, 8, lo=-0.9, hi=0.9)
HALVES = np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 0.3, -1.7]], np.float32)
SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3.0], np.float32)
IA = ints(4, 8)
JA = ints(4, 8, lo=1, hi=7)

# ---------------------------------------------------------------- elementwise
UNARY_FLOAT = {
    "abs": (jnp.abs, X), "negate": (lax.neg, X), "exponential": (jnp.exp, X),
    "exponential_minus_one": (jnp.expm1, X), "log": (jnp.log, POS), "log_plus_one": (jnp.log1p, POS),
    "sqrt": (jnp.sqrt, POS), "rsqrt": (lax.rsqrt, POS), "cbrt": (jnp.cbrt, X), "tanh": (jnp.tanh, X),
    "logistic": (lax.logistic, X), "sine": (jnp.sin, X), "cosine": (jnp.cos, X), "tan": (jnp.tan, UNIT),
    "floor": (jnp.floor, X), "ceil": (jnp.ceil, X), "round_nearest_even": (jnp.round, HALVES),
    "round_nearest_afz": (lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), HALVES),
    "sign": (jnp.sign, X), "is_finite": (jnp.isfinite, SPECIAL), "erf": (lax.erf, X),
    "chlo_asin": (jnp.arcsin, UNIT), "chlo_acos": (jnp.arccos, UNIT), "chlo_atan": (jnp.arctan, X),
    "chlo_sinh": (jnp.sinh, X), "chlo_cosh": (jnp.cosh, X), "chlo_asinh": (jnp.arcsinh, X),
    "chlo_acosh": (jnp.arccosh, POS + 1.0), "chlo_atanh": (jnp.arctanh, UNIT), "chlo_square": (jnp.square, X),
    "chlo_erfc": (lambda x: jax.nn.gelu(x, approximate=False), X * 2),
    "isinf_isnan": (lambda x: (jnp.isinf(x), jnp.isnan(x)), SPECIAL),
}
for _name, (_fn, _x) in UNARY_FLOAT.items():
    case(f"unary_{_name}", _fn, _x)

case("unary_int", lambda a: (~a, lax.population_count(a), jnp.abs(a), -a, jnp.sign(a)), IA)
case("unary_bf16_f16", lambda a, b: (jnp.tanh(a), jnp.exp(b), a * a, b + b),
     X.astype(jnp.bfloat16), X.astype(np.float16))

BINARY_FLOAT = {
    "add": lax.add, "subtract": lax.sub, "multiply": lax.mul, "divide": lax.div, "remainder": lax.rem,
    "maximum": lax.max, "minimum": lax.min, "atan2": lax.atan2,
}
for _name, _fn in BINARY_FLOAT.items():
    case(f"binary_{_name}", _fn, X, Y)
case("binary_power", lax.pow, POS, Y)
case("binary_int", lambda a, b: (a + b, a - b, a * b, lax.div(a, b), lax.rem(a, b), jnp.maximum(a, b),
                                 jnp.minimum(a, b), a & b, a | b, a ^ b), IA, JA)
case("binary_shift", lambda a, s: (lax.shift_left(a, s), lax.shift_right_arithmetic(a, s),
                                   lax.shift_right_logical(a, s)),
     ints(16, lo=-1000, hi=1000), ints(16, lo=0, hi=34))
case("binary_unsigned", lambda a, b: (a + b, a // b, a % b, a > b, a >> np.uint32(2)),
     ints(8, lo=0, hi=4000000000, dtype=np.uint32), ints(8, lo=1, hi=70000, dtype=np.uint32))
case("binary_f64_i64", lambda a, b, c: (a * a + 1.0, b * 3 - c, jnp.maximum(b, c)),
     X.astype(np.float64), ints(4, 8, dtype=np.int64), ints(4, 8, dtype=np.int64))
case("compare_float", lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b),
     np.where(bools(4, 8), X, Y), Y)
case("compare_int", lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b), IA, ints(4, 8))
case("logical", lambda p, q: (p & q, p | q, p ^ q, ~p), bools(4, 8), bools(4, 8))
case("select", lambda p, a, b: jnp.where(p, a, b), bools(4, 8), X, Y, variants=("generic",))
case("clamp", lambda lo, a, hi: (lax.clamp(np.float32(-0.5), a, np.float32(0.5)), lax.clamp(lo, a, hi)),
     np.minimum(X, Y), f32(4, 8, lo=-3, hi=3), np.maximum(X, Y))
case("convert", lambda a, b, c: (a.astype(jnp.int32), a.astype(jnp.float16), a.astype(jnp.bfloat16),
                                 b.astype(jnp.float32), a.astype(bool), c.astype(jnp.float32),
                                 c.astype(jnp.int64), a.astype(jnp.float64)),
     X * 3, IA, ints(4, 8, lo=0, hi=255, dtype=np.uint8))
case("bitcast_convert", lambda a, b: (lax.bitcast_convert_type(a, jnp.int32),
                                      lax.bitcast_convert_type(b, jnp.float32),
                                      lax.bitcast_convert_type(a, jnp.uint32)),
     X, ints(8, lo=0x3F000000, hi=0x40000000))

# ---------------------------------------------------------------- constants and iota
_BIG = np.arange(200, dtype=np.float32) / 7
_MASK = (np.arange(200) % 3 == 0)
case("constant", lambda x: (x + jnp.asarray(_BIG).reshape(1, 200), jnp.where(jnp.asarray(_MASK), x, 0.0),
                            x + jnp.float32(np.nan), x * jnp.float32(np.inf),
                            jnp.asarray(np.array([[1, 2], [3, 250]], np.uint8)),
                            jnp.asarray(np.array([True, False, True])),
                            jnp.asarray(np.array([-1.5, 2.25], np.float16)),
                            jnp.asarray(np.array([1.5, -3.0], jnp.bfloat16)),
                            jnp.asarray(np.array([2**40, -7], np.int64)),
                            jnp.asarray(np.array([2**63 + 5], np.uint64)),
                            jnp.asarray(np.array([0.1, 1e300], np.float64))),
     f32(1, 200), variants=("generic",))
case("iota", lambda: (jnp.arange(12, dtype=jnp.int32).reshape(3, 4), lax.broadcasted_iota(jnp.float32, (3, 4), 1),
                      lax.broadcasted_iota(jnp.int64, (2, 3, 2), 2)))

# ---------------------------------------------------------------- data movement
case("broadcast_in_dim", lambda a, b: (jnp.broadcast_to(a[:, None, :], (4, 3, 8)), b + jnp.zeros((5, 8)),
                                       jnp.broadcast_to(np.float32(2.0), (2, 3))),
     X, f32(8), variants=("generic",))
case("reshape", lambda a: (a.reshape(2, 16), a.reshape(32), a.reshape(4, 2, 4)), X)
case("transpose", lambda a: (a.T, jnp.transpose(a.reshape(2, 2, 8), (2, 0, 1))), X, variants=("generic",))
case("slice", lambda a: (a[1:3], a[::2, 1:7:3], a[-1]), X, variants=("generic",))
case("dynamic_slice", lambda a, i, j: (lax.dynamic_slice(a, (i, j), (2, 3)), lax.dynamic_slice(a, (j, i), (3, 5))),
     X, np.int32(1), np.int32(6), variants=("generic",))
case("dynamic_update_slice", lambda a, u, i: (lax.dynamic_update_slice(a, u, (i, np.int32(2))),
                                             lax.dynamic_update_slice(a, u, (np.int32(3), i + 7))),
     X, f32(2, 3), np.int32(1), variants=("generic",))
case("concatenate", lambda a, b: (jnp.concatenate([a, b, a], axis=1), jnp.concatenate([a, b], axis=0)), X, Y,
     variants=("generic",))
case("pad", lambda a: (jnp.pad(a, ((1, 2), (0, 3))), lax.pad(a, np.float32(-1), ((0, 0, 1), (-2, 1, 2))),
                       jnp.pad(a, ((2, 2), (1, 1)), constant_values=3.5)), X, variants=("generic",))
case("reverse", lambda a: (jnp.flip(a, 0), jnp.flip(a, (0, 1))), X, variants=("generic",))

# ---------------------------------------------------------------- contractions
case("dot_general", lambda a, b, c, d: (a @ b, jnp.einsum("bij,bjk->bik", c, d), jnp.einsum("ij,kj->ik", a, a),
                                        jnp.einsum("bij,bij->b", c, c), b[:, 0] @ b[:, 1]),
     X, f32(8, 5), f32(3, 4, 6), f32(3, 6, 2), variants=("generic", "debug"))
case("dot_general_types", lambda a, b, i, j: (jnp.dot(a, b, preferred_element_type=jnp.float32), i @ j),
     X.astype(jnp.bfloat16), f32(8, 3).astype(jnp.bfloat16), ints(3, 4, lo=-5, hi=5), ints(4, 2, lo=-5, hi=5))
case("convolution_nhwc", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                               dimension_numbers=("NHWC", "HWIO", "NHWC")),
     f32(2, 6, 6, 3), f32(3, 3, 3, 4), variants=("generic",))
case("convolution_nchw_grouped", lambda x, w: lax.conv_general_dilated(
    x, w, (2, 2), ((1, 1), (0, 2)), rhs_dilation=(1, 2), dimension_numbers=("NCHW", "OIHW", "NCHW"),
    feature_group_count=2), f32(1, 4, 9, 9), f32(6, 2, 3, 3), variants=("generic",))
case("convolution_1d_depthwise", lambda x, w: lax.conv_general_dilated(
    x, w, (1,), ((2, 0),), dimension_numbers=("NWC", "WIO", "NWC"), feature_group_count=3),
    f32(2, 10, 3), f32(3, 1, 3))

# ---------------------------------------------------------------- reductions
case("reduce", lambda a, i, p: (a.sum(1), a.max(0), a.min((0, 1)), jnp.prod(a, 1), p.all(1), p.any(0),
                                i.sum(0), jnp.mean(a, 1), lax.reduce(a, np.float32(1.5), lax.add, (0,)),
                                lax.reduce(a, np.float32(0.25), lax.max, (1,))),
     X, IA, bools(4, 8), variants=("generic", "debug"))
case("reduce_bf16", lambda a: (a.sum(1), a.max(1)), X.astype(jnp.bfloat16))
case("argmax", lambda a, i: (jnp.argmax(a, 1), jnp.argmax(a, 0), jnp.argmax(i, 1)),
     np.round(X * 2), IA, variants=("generic",))
case("argmin", lambda a: (jnp.argmin(a, 1), jnp.argmin(a, 0)), np.round(X * 2))
case("reduce_window", lambda x, y: (
    lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0,
    lax.reduce_window(y, jnp.inf, lax.min, (2, 2), (1, 1), "VALID", window_dilation=(2, 1)),
    lax.reduce_window(y, np.float32(1.0), lax.add, (2, 3), (2, 1), "VALID")),
    f32(2, 6, 6, 2), X, variants=("generic",))
case("cumulative", lambda a: (jnp.cumsum(a, 0), lax.cumsum(a, 1, reverse=True), lax.cummax(a, 1)), X,
     variants=("generic",))

# ---------------------------------------------------------------- gather and scatter
_TABLE = f32(10, 6)
case("gather_take", lambda t, ids: jnp.take(t, ids, axis=0), _TABLE, ints(2, 3, lo=0, hi=10),
     variants=("generic",))
case("gather_index", lambda t, ids, a, b: (t[ids], t[:, ids[:2]], t[a, b], jnp.take(t, ids, axis=0, mode="clip")),
     _TABLE, ints(4, lo=-10, hi=10), ints(3, lo=0, hi=10), ints(3, lo=0, hi=6), variants=("generic",))
case("gather_out_of_range", lambda t, ids: t.at[ids].get(mode="clip"), _TABLE, np.array([-3, 0, 9, 15], np.int32))
case("gather_slice", lambda t, idx: lax.gather(
    t, idx[None], lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1)),
    slice_sizes=(3, 4), mode=lax.GatherScatterMode.CLIP), _TABLE, np.array([8, 1], np.int32))
case("scatter", lambda t, ids, u, v: (t.at[ids].set(u), t.at[ids].add(u), t.at[:, ids[:2]].add(v),
                                      t.at[ids].max(u), t.at[ids].multiply(u)),
     _TABLE, np.array([1, 7, 4], np.int32), f32(3, 6), f32(10, 2), variants=("generic",))
case("scatter_2d_index", lambda t, a, b, u: t.at[a, b].set(u),
     _TABLE, np.array([0, 9, 3], np.int32), np.array([5, 0, 2], np.int32), f32(3))
case("scatter_out_of_range", lambda t, ids, u: (t.at[ids].set(u, mode="drop"), t.at[ids].add(u, mode="drop")),
     _TABLE, np.array([2, 12, -1, 5], np.int32), f32(4, 6))

case("gather_batched", lambda a, i, t, j: (jnp.take_along_axis(a, i, axis=1), jax.vmap(lambda r, k: r[k])(t, j),
                                           -jnp.take_along_axis(jax.nn.log_softmax(a), i[:, :1], axis=-1).mean()),
     X, ints(4, 3, lo=0, hi=8), f32(3, 5, 2), ints(3, 4, lo=0, hi=5), variants=("generic",))
case("scatter_batched", jax.vmap(lambda t, i, u: t.at[i].add(u)), f32(3, 5, 2), ints(3, 4, lo=0, hi=5), f32(3, 4, 2))

# ---------------------------------------------------------------- control flow
case("while_fori", lambda a: lax.fori_loop(0, 3, lambda k, c: c * 1.5 + k, a), X, variants=("generic", "debug"))
case("while_fori_update", lambda a, u: lax.fori_loop(1, 4, lambda k, c: lax.dynamic_update_slice(c, u * k, (k, 0)), a),
     X, f32(1, 8))
case("optimization_barrier", jax.grad(lambda a: jax.checkpoint(lambda z: jnp.sin(z).sum())(a)), X)


def _transformer(ids: Any, params: dict) -> Any:
    """A two-layer pre-LN decoder with its layers stacked and run by lax.scan (a while loop)."""
    seq, dim, heads = ids.shape[0], params["emb"].shape[1], 2

    def norm(x: Any, g: Any) -> Any:
        return (x - x.mean(-1, keepdims=True)) * lax.rsqrt(jnp.var(x, -1, keepdims=True) + 1e-5) * g

    def layer(x: Any, p: tuple) -> Any:
        wqkv, wo, w1, w2, g = p
        q, k, v = (t.reshape(seq, heads, -1).transpose(1, 0, 2) for t in jnp.split(norm(x, g) @ wqkv, 3, -1))
        s = jnp.einsum("hqd,hkd->hqk", q, k) * np.float32(1 / np.sqrt(dim // heads))
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -1e9)
        o = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, -1), v).transpose(1, 0, 2).reshape(seq, dim)
        x = x + o @ wo
        return x + jax.nn.gelu(norm(x, g) @ w1, approximate=False) @ w2, x.sum()

    x, sums = lax.scan(layer, params["emb"][ids], (params["wqkv"], params["wo"], params["w1"], params["w2"],
                                                   params["g"]))
    logits = x @ params["emb"].T
    return jax.nn.log_softmax(logits), jnp.argmax(logits, -1), sums


_LAYERS, _DIM, _VOCAB = 2, 16, 40
case("transformer_scan", _transformer, ints(8, lo=0, hi=_VOCAB), {
    "emb": f32(_VOCAB, _DIM, lo=-0.3, hi=0.3), "g": f32(_LAYERS, _DIM, lo=0.5, hi=1.5),
    "w1": f32(_LAYERS, _DIM, 4 * _DIM, lo=-0.3, hi=0.3), "w2": f32(_LAYERS, 4 * _DIM, _DIM, lo=-0.3, hi=0.3),
    "wo": f32(_LAYERS, _DIM, _DIM, lo=-0.3, hi=0.3), "wqkv": f32(_LAYERS, _DIM, 3 * _DIM, lo=-0.3, hi=0.3)})
case("call", lambda a, b: (jax.nn.relu(a) + jax.jit(lambda z: z * 2.0)(b), jnp.where(a > b, a, b)), X, Y)

# ---------------------------------------------------------------- general gather and scatter forms, sort, top_k
# (after every case above, so the inputs drawn for those stay the same)
case("sort", lambda a: jnp.sort(a, axis=1), X)
_T3 = f32(4, 5, 6)
case("gather_forms", lambda t, i, j, k: (t[i, :, j], t[:, i, 1:4], jnp.take(t, i, axis=2, mode="clip"),
                                         t[i[:2, None], j[None, :2]],
                                         jax.vmap(lambda r, s: lax.dynamic_slice(r, (s, s), (2, 3)))(t, k)),
     _T3, ints(3, lo=-1, hi=6), ints(3, lo=0, hi=6), ints(4, lo=0, hi=5))
case("scatter_forms", lambda t, i, j, k, u, v, w, m: (
    t.at[i, 1:3].add(u), t.at[:, i].set(v), t.at[i, :, j].multiply(m),
    t.at[i].min(jnp.broadcast_to(u[:, :1], (3, 5, 6))), t.at[i, :, j].apply(lambda e: e * 2.0 + 1.0),
    jax.vmap(lambda r, s, x: lax.dynamic_update_slice(r, x, (s, s)))(t, k, w)),
     _T3, ints(3, lo=0, hi=4), ints(3, lo=0, hi=6), ints(4, lo=0, hi=5), f32(3, 2, 6), f32(4, 3, 6), f32(4, 2, 3),
     f32(3, 5))
case("scatter_segments", lambda d, s: (jax.ops.segment_sum(d, s, 5), jax.ops.segment_max(d, s, 5),
                                       jax.ops.segment_min(d, s, 5), jax.ops.segment_prod(d, s, 5)),
     f32(9, 3), ints(9, lo=0, hi=6))
case("sort_forms", lambda a, k, b: (jnp.sort(a, axis=0), jnp.argsort(a, axis=1), lax.sort((k, a), num_keys=1),
                                    lax.sort((k, a[::-1], a), dimension=0, num_keys=2), jnp.sort(b, axis=-1),
                                    -jnp.sort(-a, axis=1)),
     np.round(X * 2), ints(4, 8, lo=0, hi=3), X.astype(jnp.bfloat16))
case("top_k", lambda a, i, b: (*lax.top_k(a, 3), *lax.top_k(i, 5), *lax.top_k(b, 2)),
     np.round(X * 2), IA, X.astype(jnp.float16))

_IMG = f32(1, 6, 7, 2)


def _argmax_pool(x: Any) -> Any:
    def body(a: Any, b: Any) -> Any:
        take = b[0] > a[0]
        return jnp.where(take, b[0], a[0]), jnp.where(take, b[1], a[1])
    idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    return lax.reduce_window((x, idx), (np.float32(-np.inf), np.int32(0)), body, (2, 2), (2, 2), "VALID")


case("reduce_window_forms", lambda x, y, i: (
    lax.reduce_window(x, np.float32(1.0), lax.mul, (1, 2, 2, 1), (1, 1, 2, 1), "VALID"),
    lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 2), (2, 1), (0, 0)),
                      base_dilation=(1, 2, 1, 1)),
    lax.reduce_window(y, np.float32(0.5), lax.add, (2, 3), (1, 2), ((1, 1), (2, 0))),
    *_argmax_pool(y), lax.reduce_window(i, np.int32(0), lax.bitwise_or, (2, 2), (1, 1), "SAME"),
    jax.grad(lambda z: lax.reduce_window(z, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").sum())(x)),
    _IMG, X, ints(4, 8, lo=0, hi=16))
case("select_and_scatter", lambda x, y: (
    jax.grad(lambda z: (lax.reduce_window(z, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2).sum())(x),
    jax.grad(lambda z: lax.reduce_window(z, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").sum())(x),
    jax.grad(lambda z: (lax.reduce_window(z, jnp.inf, lax.min, (2, 3), (1, 2), "SAME") * 3.0).sum())(y)),
    _IMG, np.round(X * 2))
case("conv_transpose", lambda x, w, v, k: (
    lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
    lax.conv_transpose(x, w, (2, 1), ((2, 0), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")),
    lax.conv_general_dilated(v, k, (1,), ((0, 1),), lhs_dilation=(3,), dimension_numbers=("NCW", "OIW", "NCW"))),
    f32(1, 4, 4, 2), f32(3, 3, 2, 2), f32(2, 3, 5), f32(4, 3, 2))
case("cond_switch", lambda p, i, x: (lax.cond(p, lambda a: (a * 2, a.sum()), lambda a: (a - 1, a.max()), x),
                                     lax.switch(i, [lambda a: a + 1, lambda a: a * 3, jnp.sin], x),
                                     lax.switch(i + 5, [lambda a: a + 1, jnp.cos], x)),
     np.bool_(False), np.int32(1), X)
case("reduce_precision", lambda x, h: (lax.reduce_precision(x, 4, 3), lax.reduce_precision(x, 5, 2),
                                       lax.reduce_precision(x * 1e30, 8, 7), lax.reduce_precision(x * 1e-3, 5, 10),
                                       lax.reduce_precision(h, 4, 3), lax.reduce_precision(x, 2, 1)),
     np.concatenate([X, SPECIAL.reshape(1, 8)]), X.astype(np.float16))
_GAMMA = np.concatenate([f32(12, lo=-4.5, hi=6.0), np.array([0.5, 1.0, 2.0, 1e-3, -0.25, 30.0, 100.5, 3.5],
                                                               np.float32)])
case("chlo_special", lambda g, u, a, b: (lax.lgamma(g), lax.digamma(g), lax.erf_inv(u), jnp.nextafter(a, b),
                                         lax.lgamma(g.astype(np.float64)), lax.erf_inv(u.astype(np.float64)),
                                         lax.digamma(g.astype(jnp.bfloat16))),
     _GAMMA, np.concatenate([UNIT.reshape(-1)[:14], np.array([0.999, -0.9999], np.float32)]),
     np.array([0.0, -0.0, 1.0, -1.0, 3.5, np.inf, 1e-45, -2.0], np.float32),
     np.array([1.0, -1.0, 2.0, -2.0, 3.5, 0.0, 0.0, np.nan], np.float32))
case("chlo_erfc_half", lambda h, b: (lax.erfc(h), lax.erfc(b)),
     np.linspace(-3, 6, 40).astype(np.float16), np.linspace(-3, 9.5, 60).astype(jnp.bfloat16))
case("chlo_bessel_i1e", lambda x, d: (lax.bessel_i1e(x), lax.bessel_i1e(d)),
     np.concatenate([f32(10, lo=-8, hi=8), np.array([0.0, 29.5, 30.5, -45.0, 200.0, 1e-3], np.float32)]),
     np.array([0.0, 0.5, -3.0, 12.0, 99.0, 101.0, -250.0, 1e4]))

_SPD = (lambda x: x @ x.T + 4 * np.eye(4, dtype=np.float32))(f32(4, 4))
case("lapack_linalg", lambda s, a, b: (jnp.linalg.cholesky(s), lax.linalg.triangular_solve(s, b, left_side=True,
                                                                                            lower=True),
                                       *jnp.linalg.qr(a), *jnp.linalg.qr(a, mode="complete"),
                                       lax.linalg.cholesky(s.astype(np.float64), symmetrize_input=False)),
     _SPD, f32(5, 3), f32(4, 2))
_KEY32 = _rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32)
_KEY64 = _rng.integers(0, 2**63, 2, dtype=np.uint64)
case("rng_bit_generator", lambda k, k64: (
    lax.rng_bit_generator(k, (5, 7), np.uint32, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
    lax.rng_bit_generator(k, (3,), np.uint8, algorithm=lax.RandomAlgorithm.RNG_PHILOX),
    lax.rng_bit_generator(k64, (2, 3), np.uint64, algorithm=lax.RandomAlgorithm.RNG_DEFAULT),
    lax.rng_bit_generator(k64, (), np.uint16, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)),
    _KEY32, _KEY64)

# ---------------------------------------------------------------- refused on purpose
UNSUPPORTED["custom_call"] = (lambda a: jnp.linalg.eigh(a @ a.T + 8 * jnp.eye(4)), (X[:, :4],))
UNSUPPORTED["while_dynamic"] = (lambda a, n: lax.fori_loop(0, n, lambda k, c: c + 1.0, a), (X, np.int32(3)))


# complex values through fft, as jnp.fft writes them: stablehlo.complex, fft, real, imag
case("complex_fft", lambda a, b: (jnp.real(jnp.fft.fft(lax.complex(a, b))), jnp.imag(jnp.fft.ifft(lax.complex(a, b)))),
     f32(8), f32(8))

# Spec ops this JAX no longer writes (it emits dot_general, case, a LAPACK custom call, exp/divide for the
# sigmoid, and no composite): the program is written by hand from the StableHLO spec, and its outputs are
# computed with numpy in float64 and rounded once to float32
HANDWRITTEN: dict[str, tuple[str, tuple, Callable]] = {}
_SPEC_OPS = """\
module @spec_ops {
  func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<4x2xf32>, %arg2: tensor<3x3xf32>, %arg3: tensor<3x2xf32>, %arg4: tensor<i1>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4xf32>) {
    %0 = stablehlo.dot %arg0, %arg1 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %1 = "stablehlo.triangular_solve"(%arg2, %arg3) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<3x3xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = "stablehlo.if"(%arg4) ({
      %5 = stablehlo.add %0, %1 : tensor<3x2xf32>
      stablehlo.return %5 : tensor<3x2xf32>
    }, {
      %5 = stablehlo.subtract %0, %1 : tensor<3x2xf32>
      stablehlo.return %5 : tensor<3x2xf32>
    }) : (tensor<i1>) -> tensor<3x2xf32>
    %3 = stablehlo.logistic %arg0 : tensor<3x4xf32>
    %4 = stablehlo.composite "mlcc.scale_by_two" %0 {decomposition = @scale_by_two} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    return %0, %2, %4, %3 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4xf32>
  }
  func.func private @scale_by_two(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<3x2xf32>
    return %0 : tensor<3x2xf32>
  }
}
"""


def _spec_ops_reference(a: np.ndarray, b: np.ndarray, lower: np.ndarray, rhs: np.ndarray, pred: np.ndarray) -> tuple:
    dot = a.astype(np.float64) @ b.astype(np.float64)
    solved = np.linalg.solve(lower.astype(np.float64), rhs.astype(np.float64))
    chosen = dot + solved if bool(pred) else dot - solved
    logistic = 1.0 / (1.0 + np.exp(-a.astype(np.float64)))
    return tuple(o.astype(np.float32) for o in (dot, chosen, 2.0 * dot, logistic))


HANDWRITTEN["spec_ops"] = (_SPEC_OPS, (f32(3, 4), f32(4, 2), np.tril(f32(3, 3, lo=-1.0, hi=1.0)) + 3 * np.eye(3, dtype=np.float32),
                                       f32(3, 2), np.array(True)), _spec_ops_reference)
HANDWRITTEN["spec_ops_else"] = (_SPEC_OPS, (f32(3, 4), f32(4, 2), np.tril(f32(3, 3, lo=-1.0, hi=1.0)) + 3 * np.eye(3, dtype=np.float32),
                                            f32(3, 2), np.array(False)), _spec_ops_reference)


# ---------------------------------------------------------------- writing
def lower(fn: Callable, args: tuple) -> Any:
    return jax.jit(fn).lower(*args)


def _storable(a: Any) -> np.ndarray:
    """npz cannot hold bfloat16: store it as float32 (exact); readers cast back to the program's dtype."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == jnp.bfloat16 else a


def save_ref(path: Any, args: tuple, outputs: Any) -> None:
    """Inputs in @main's argument order (the flattened pytree of args) and outputs, in order."""
    outs = jax.tree_util.tree_leaves(outputs)  # nested tuples (lax.sort of several operands) flattened
    arrays = {f"arg{i}": _storable(a) for i, a in enumerate(jax.tree_util.tree_leaves(args))}
    arrays.update({f"out{i}": _storable(o) for i, o in enumerate(outs)})
    np.savez_compressed(path, **arrays)


def generic_text(text: str) -> str:
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        return module.operation.get_asm(print_generic_op_form=True)


def ref_bytes(args: tuple, outputs: Any) -> bytes:
    buffer = io.BytesIO()
    save_ref(buffer, args, outputs)
    return buffer.getvalue()


def build() -> dict[str, bytes]:
    """Every file of the set, by path relative to the output folder."""
    files: dict[str, bytes] = {}
    for name, (fn, args, variants) in CASES.items():
        lowered = lower(fn, args)
        text = lowered.as_text()
        files[f"{name}.mlir"] = text.encode()
        if "generic" in variants:
            files[f"{name}.generic.mlir"] = generic_text(text).encode()
        if "debug" in variants:
            files[f"{name}.debug.mlir"] = lowered.as_text(debug_info=True).encode()
        files[f"{name}.ref.npz"] = ref_bytes(args, jax.jit(fn)(*args))
    for name, (text, args, reference) in HANDWRITTEN.items():
        files[f"{name}.mlir"] = text.encode()
        files[f"{name}.ref.npz"] = ref_bytes(args, reference(*args))
    for name, (fn, args) in UNSUPPORTED.items():
        files[f"unsupported/{name}.mlir"] = lower(fn, args).as_text().encode()
    # the shared models, in the generic form (their references stay in the shared folder)
    for model in ("mlp", "cnn", "attention"):
        src = SHARED_MODELS / f"{model}.stablehlo.mlir"
        if src.exists():
            files[f"model_{model}.generic.mlir"] = generic_text(src.read_text()).encode()
    # a portable artifact (MLIR bytecode), as jax.export writes it
    port_fn, port_args = (lambda a, b: jnp.tanh(a @ b) + 1.0), (f32(3, 4), f32(4, 2))
    files["portable.mlirbc"] = jax.export.export(jax.jit(port_fn))(*port_args).mlir_module_serialized
    files["portable.ref.npz"] = ref_bytes(port_args, jax.jit(port_fn)(*port_args))
    return files


def main(out_dir: Path) -> None:
    files = build()  # everything first: a failing case leaves the old set in place
    for pattern in ("*.mlir", "*.npz", "*.mlirbc", "unsupported/*.mlir"):
        for old in out_dir.glob(pattern):
            old.unlink()
    for rel, data in files.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    total = sum(len(d) for d in files.values())
    print(f"wrote {len(CASES)} cases, {len(files)} files to {out_dir} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "stablehlo")
