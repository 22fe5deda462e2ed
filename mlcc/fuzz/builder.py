"""The generator's model under construction: values with their dtype, dims, magnitude bound and exactness
(see ``mlcc.fuzz.generator``), and the builder that adds graph inputs, initializers and nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20
IR_VERSION = 9
F32, F16, BOOL = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BOOL
I64, I32 = TensorProto.INT64, TensorProto.INT32
FLOATS = (F32, F16)
INTS = (I64, I32)
NUMERIC = FLOATS + INTS
NP_TYPE = {F32: np.float32, F16: np.float16, I64: np.int64, I32: np.int32, BOOL: np.bool_}
DIMS = [1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 33]
MAX_ELEMENTS = 8192
INPUT_BOUND = {F32: 4.0, F16: 4.0, I64: 5.0, I32: 5.0, BOOL: 1.0}  # inputs: N(0,1) (|x| <= ~4), ints in [-5, 5]
FLOAT_LIMIT = {F32: 1e4, F16: 1e3}  # values stay below this magnitude (f16: far from 65504, precision to spare)
INT_LIMIT = 1e6


@dataclass
class Value:
    name: str
    dtype: int
    shape: tuple[int, ...]
    bound: float
    exact: bool

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class Skip(Exception):
    """The chosen operands do not fit this op; the generator tries another."""


@dataclass
class ModelBuilder:
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    counter: int = 0
    ops_used: list[str] = field(default_factory=list)
    allow_empty: bool = True  # zero-size dims

    # ---- randomness
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def int_in(self, lo: int, hi: int) -> int:
        """An int in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def random_dtype(self) -> int:
        r = self.rng.random()
        return F32 if r < 0.72 else F16 if r < 0.82 else I64 if r < 0.9 else I32 if r < 0.94 else BOOL

    def random_shape(self, rank: int | None = None, max_elements: int = MAX_ELEMENTS) -> tuple[int, ...]:
        if rank is None:
            rank = self.choice([0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4])
        for _ in range(20):
            dims = [self.choice(DIMS) for _ in range(rank)]
            if rank and self.allow_empty and self.chance(0.03):
                dims[self.int_in(0, rank - 1)] = 0
            if rank and rank <= 2 and self.chance(0.05):
                dims[self.int_in(0, rank - 1)] = 130
            if np.prod(dims, dtype=np.int64) <= max_elements:
                return tuple(dims)
        return tuple([1] * rank)

    # ---- values
    def new_input(self, dtype: int, shape: tuple[int, ...]) -> Value:
        v = Value(self.fresh("in"), dtype, tuple(shape), INPUT_BOUND[dtype], True)
        self.inputs.append(v)
        self.values.append(v)
        return v

    def const(self, array: np.ndarray, name: str | None = None, bound: float | None = None) -> Value:
        array = np.asarray(array)
        dtype = {np.dtype(t): k for k, t in NP_TYPE.items()}[array.dtype]
        v = Value(name or self.fresh("c"), dtype, tuple(array.shape),
                  float(np.max(np.abs(array.astype(np.float64)), initial=0.0)) if bound is None else bound, True)
        self.initializers.append(numpy_helper.from_array(array, v.name))
        return v

    def random_data(self, dtype: int, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
        if dtype in FLOATS:
            return (self.rng.standard_normal(shape) * scale).astype(NP_TYPE[dtype])
        if dtype == BOOL:
            return np.asarray(self.rng.random(shape) < 0.5)
        return self.rng.integers(-5, 6, shape).astype(NP_TYPE[dtype])

    def leaf(self, dtype: int, shape: tuple[int, ...]) -> Value:
        """A fresh operand: a graph input, or now and then an initializer."""
        if self.chance(0.3):
            data = self.random_data(dtype, shape)
            return self.const(data, bound=INPUT_BOUND[dtype])
        return self.new_input(dtype, shape)

    def pick(self, ok: Callable[[Value], bool], fresh: Callable[[], Value] | None = None,
             p_fresh: float = 0.15) -> Value:
        """An existing value for which ok() holds (recent ones preferred), else a fresh one from ``fresh``."""
        candidates = [v for v in self.values if ok(v)]
        if candidates and not (fresh is not None and self.chance(p_fresh)):
            weights = np.arange(1, len(candidates) + 1, dtype=np.float64) ** 2
            return candidates[int(self.rng.choice(len(candidates), p=weights / weights.sum()))]
        if fresh is None:
            raise Skip("no operand fits")
        return fresh()

    def operand(self, dtypes: tuple[int, ...], min_rank: int = 0, max_rank: int = 4, exact: bool = False,
                max_bound: float = math.inf, nonempty: bool = False) -> Value:
        def ok(v: Value) -> bool:
            return (v.dtype in dtypes and min_rank <= v.rank <= max_rank and (v.exact or not exact)
                    and v.bound <= max_bound and (v.numel > 0 or not nonempty))

        def fresh() -> Value:
            dtype = dtypes[0] if self.chance(0.7) else self.choice(list(dtypes))
            for _ in range(10):
                shape = self.random_shape(self.int_in(min_rank, max_rank))
                if not nonempty or np.prod(shape) > 0:
                    return self.leaf(dtype, shape)
            return self.leaf(dtype, tuple([1] * min_rank))
        return self.pick(ok, fresh)

    def node(self, op: str, inputs: list[Value | None], outputs: list[tuple[int, tuple[int, ...], float, bool]],
             **attrs) -> list[Value]:
        outs = [Value(self.fresh("v"), dt, tuple(int(d) for d in shape), float(bound), bool(exact))
                for dt, shape, bound, exact in outputs]
        for o in outs:
            if o.numel > MAX_ELEMENTS * 4:
                raise Skip("result too big")
            if o.numel == 0 and not self.allow_empty:
                raise Skip("an empty result")
        names = [v.name if v is not None else "" for v in inputs]
        self.nodes.append(helper.make_node(op, names, [o.name for o in outs], name=self.fresh(f"{op}_"), **attrs))
        self.used |= {n for n in names if n}
        self.values.extend(outs)
        self.ops_used.append(op)
        return outs

    def ints(self, values, name_hint: str = "c") -> Value:
        return self.const(np.array(values, dtype=np.int64), self.fresh(name_hint))


def limit(dtype: int) -> float:
    return FLOAT_LIMIT.get(dtype, INT_LIMIT if dtype in INTS else 1.0)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(a, b))


def partner_shape(g: ModelBuilder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: a suffix of it with some dims set to 1 (or grown from 1)."""
    if g.chance(0.35):
        return shape
    keep = g.int_in(0, len(shape))
    out = list(shape[len(shape) - keep:])
    for i, d in enumerate(out):
        if g.chance(0.3):
            out[i] = 1
        elif d == 1 and g.chance(0.2):
            out[i] = g.choice([2, 3, 5])
    if len(out) == len(shape) and len(out) < 4 and g.chance(0.1):
        out = [g.choice([1, 2])] + out
    return tuple(out)


def partner(g: ModelBuilder, v: Value, dtype: int | None = None, **kw) -> Value:
    dtype = v.dtype if dtype is None else dtype
    want = partner_shape(g, v.shape)

    def ok(u: Value) -> bool:
        if u.dtype != dtype or u is v and not g.chance(0.5):
            return False
        try:
            out = broadcast_shape(v.shape, u.shape)
        except ValueError:
            return False
        return np.prod(out, dtype=np.int64) <= MAX_ELEMENTS and all(kw.get(k, lambda x: True)(u) for k in kw)
    return g.pick(ok, lambda: g.leaf(dtype, want), p_fresh=0.5)
