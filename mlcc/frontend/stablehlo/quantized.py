"""Quantized tensors at import: a ``tensor<..x!quant.uniform<...>>`` value is its storage integers in the IR (an
s8 tensor for ``i8:f32``), and each op on quantized tensors becomes what the StableHLO spec says it computes
("Quantization computations"):

    dequantize(x) = convert(x_storage - zero_points, expressed) * scales
    quantize(x)   = convert(round_nearest_even(clamp(storage_min, x / scales + zero_points, storage_max)), storage)

with the scales and zero points spread over the tensor (one per tensor, or one per index of the quantization
dim). The dequantize is written as the ONNX frontend writes DequantizeLinear, ``(convert_f32(q) - z) * s``, so
passes/quantized_dot.py sees the same pattern and turns a dot or convolution of two dequantized 8-bit tensors
into an integer contraction.

An op that only moves elements (reshape, transpose, slice, broadcast_in_dim, concatenate...) takes the storage
integers as they are when its quantized operands and results mean the same numbers (``same_values``); every other
op is the spec's ``dequantize_op_quantize``: its quantized operands are dequantized, the float op is imported by
its own rule, and a quantized result is quantized to its type. A float operand of a quantized contraction (the
spec's hybrid ops) is taken as it is.

Ops with a region (lower_region_op):

- ``sort`` and ``map`` move or hand the storage integers to their body, whose ops are imported on quantized
  values by the rules above (a comparator's ``compare`` is the spec's dequantize_compare; a map body's ``add`` is
  dequantize_op_quantize), so every element is computed as the spec says.
- ``reduce``, ``reduce_window``, ``scatter`` and ``select_and_scatter`` first convert their operands and init
  values to the body's element types (the spec's ``to_destination_type``: a body may accumulate an ``i8`` tensor
  in a wider ``i32`` quantized type, ``is_promotable``). When the body only adds, takes maxima or minima,
  compares or selects (the reductions models write), the op is the spec's computation in the expressed type:
  the operands dequantized, the op and its body imported on floats, the results quantized once. Values of one
  quantized type are multiples of its scale, so every partial sum the spec's schedule quantizes is already on
  the grid, and maxima, minima and comparisons are the same before and after dequantizing: the result is the
  spec's, except that a sum is clamped to storage_min/storage_max once, at the end, where the spec's
  implementation-defined schedule may clamp a partial sum on the way (only when a partial sum leaves the
  storage range). Any other body (a multiply, a quantized constant...) is imported on the storage integers
  with each of its ops computed as the spec says, one element or window position at a time (reduce_window,
  scatter and select_and_scatter have such general forms; ``reduce`` has none: exit 69).
- ``while``, ``if``, ``case`` and calls pass quantized values along as they are (their bodies' ops are imported one
  by one).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mlcc.frontend.stablehlo.syntax import Block, Op, TensorType, Value
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape

# ops that move elements without computing on them: on storage integers when the element types agree
MOVES = frozenset(f"stablehlo.{n}" for n in """
reshape transpose broadcast_in_dim broadcast slice concatenate pad reverse gather dynamic_slice
dynamic_update_slice select optimization_barrier get_tuple_element tuple""".split())
# ops that pass whole values along (their bodies' ops are imported one by one)
PASS_ALONG = frozenset(["func.call", "stablehlo.while", "stablehlo.if", "stablehlo.case", "stablehlo.return",
                        "func.return", "stablehlo.composite", "stablehlo.bitcast_convert"])
# quantize and dequantize are their own rules (ops/quantized.py)
OWN_RULES = frozenset(["stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"])
# spec-invalid on quantized tensors: convert is between plain tensors only (uniform_quantize/dequantize convert)
REFUSED = {"stablehlo.convert": "convert takes plain tensors only (the spec's uniform_quantize and "
                                "uniform_dequantize convert to and from quantized types)"}


def is_quantized(t: Any) -> bool:
    return isinstance(t, TensorType) and t.quant is not None


def involved(op: Op) -> bool:
    """Whether an operand or result of op is a quantized tensor."""
    return any(is_quantized(v.type) for v in op.operands + op.results)


def _spread(b: Builder, values: tuple, dim: int | None, dims: tuple, dtype: str) -> Instruction:
    """One value per tensor, or one per index of dim, as a tensor of dims."""
    if dim is None or len(set(values)) == 1:
        return b.broadcast_to(b.splat(values[0], dtype), dims) if dims else b.splat(values[0], dtype)
    vec = b.constant(np.asarray(values, dtype=numpy_dtype(dtype)))
    return b.op("broadcast", [vec], Shape(dtype, dims), dimensions=(dim,))


def dequantize(b: Builder, x: Instruction, t: TensorType) -> Instruction:
    """The spec's dequantize of storage integers x of quantized type t, as a tensor of t's expressed type.
    Up to 16-bit storage, convert(x) - zero point is exact in f32 (in f64 for f64), so the difference is taken
    there; wider storage subtracts in s64, then converts once, as the spec's integer subtraction does. The
    difference is converted to the expressed type and multiplied by the scales in it."""
    q = t.quant
    assert q is not None
    dims = tuple(x.shape.dims)
    work = "f64" if q.expressed == "f64" else "f32"
    has_zero = any(q.zero_points)
    if int(q.storage[1:]) <= 16:
        y = b.convert(x, work)
        if has_zero:  # the zero point in the storage type, converted (as DequantizeLinear's): see quantized_dot
            zdtype = q.dtype if q.dtype in ("s8", "u8", "s16", "u16") else work
            y = b.op("subtract", [y, b.convert(_spread(b, q.zero_points, q.dim, dims, zdtype), work)])
        y = b.convert(y, q.expressed)
    else:
        y = b.convert(x, "s64")
        if has_zero:
            y = b.op("subtract", [y, _spread(b, q.zero_points, q.dim, dims, "s64")])
        y = b.convert(y, q.expressed)
    return b.op("multiply", [y, _spread(b, q.scales, q.dim, dims, q.expressed)])


def quantize(b: Builder, y: Instruction, t: TensorType) -> Instruction:
    """The spec's quantize of floats y (of t's expressed type) to storage integers of quantized type t:
    y / scales + zero points, clamped to [storage_min, storage_max], rounded to nearest even, converted, all
    in the expressed type (clamping before or after rounding is the same: the bounds are integers)."""
    q = t.quant
    assert q is not None
    dims = tuple(y.shape.dims)
    ft = q.expressed
    y = b.convert(y, ft)
    y = b.op("divide", [y, _spread(b, q.scales, q.dim, dims, ft)])
    if any(q.zero_points):
        y = b.op("add", [y, _spread(b, q.zero_points, q.dim, dims, ft)])
    y = b.op("round-nearest-even", [y])
    lo, hi = (_spread(b, (_inside(v, ft, toward),), None, dims, ft)
              for v, toward in ((q.storage_min, 1), (q.storage_max, -1)))
    y = b.op("clamp", [lo, y, hi])
    return b.convert(y, q.dtype)


def _inside(v: int, dtype: str, toward: int) -> float:
    """v in the float type, moved one step toward the storage range when rounding took it outside (i32's max
    is 2^31 in f32, which no s32 holds: the spec leaves that conversion undefined; this saturates)."""
    with np.errstate(over="ignore"):
        f = numpy_dtype(dtype).type(v)
    if (float(f) - v) * toward < 0:
        f = np.nextafter(f, numpy_dtype(dtype).type(toward * np.inf))
    return float(f)


def _retyped(op: Op, types: list[Any], result_types: list[Any]) -> Op:
    """A copy of op whose operands and results have other types (the rule reads types from the op)."""
    return dataclasses.replace(op, operands=[Value(v.name, t) for v, t in zip(op.operands, types)],
                               results=[Value(v.name, t) for v, t in zip(op.results, result_types)])


def lower(cx: Any, op: Op, args: list[Instruction]) -> tuple[Op, list[Instruction], list[Any]]:
    """The op a rule imports in place of an op on quantized tensors, its arguments, and the types its results
    are quantized to afterwards (None for each result taken as it is)."""
    if op.name in REFUSED:
        raise cx.error(op, REFUSED[op.name])
    quantized = [v.type for v in op.operands + op.results if is_quantized(v.type)]
    keep = [None] * len(op.results)
    if op.name in PASS_ALONG:
        return op, args, keep
    if op.name == "stablehlo.constant":  # storage integers as they are; floats (a float literal) quantized
        value = op.attrs.get("value")
        if hasattr(value, "array") and value.array.dtype.kind == "f":
            return _retyped(op, [], [op.results[0].type.expressed()]), args, [op.results[0].type]
        return op, args, keep
    if op.regions:
        return lower_region_op(cx, op, args)
    if op.name in MOVES and all(t.quant.same_values(quantized[0].quant) for t in quantized):
        return op, args, keep
    new_args = [dequantize(cx.b, a, v.type) if is_quantized(v.type) else a for v, a in zip(op.operands, args)]
    plain = _retyped(op, [v.type.expressed() if is_quantized(v.type) else v.type for v in op.operands],
                     [v.type.expressed() if is_quantized(v.type) else v.type for v in op.results])
    return plain, new_args, [v.type if is_quantized(v.type) else None for v in op.results]


def requantize(b: Builder, results: list[Instruction], types: list[Any]) -> list[Instruction]:
    """Each result quantized to its op's quantized result type (the last step of dequantize_op_quantize)."""
    return [r if t is None else quantize(b, r, t) for r, t in zip(results, types)]


# ---------------------------------------------------------------- ops with a region
# ops whose region combines elements, with where each operand goes in the body's arguments (its element type)
COMBINING = frozenset(["stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",
                       "stablehlo.select_and_scatter"])
# ops whose region reads the storage integers as they are
STORAGE_REGIONS = frozenset(["stablehlo.sort", "stablehlo.map"])
# body ops that give the same result on dequantized values, computed once, as on quantized values step by step
GRID_EXACT = frozenset(f"stablehlo.{n}" for n in "add maximum minimum compare select and or not return".split())


def _body_types(op: Op) -> list[Any]:
    """The type each operand is converted to before the body reads it (None: taken as it is)."""
    n = len(op.operands)
    if op.name in ("stablehlo.reduce", "stablehlo.reduce_window"):
        args = op.regions[0][0].args
        half = n // 2
        return [args[i % half].type if len(args) == n else None for i in range(n)]
    if op.name == "stablehlo.scatter":
        args = op.regions[0][0].args
        half = n // 2
        if len(args) != 2 * half:
            return [None] * n
        return [args[i].type for i in range(half)] + [None] + [args[half + i].type for i in range(half)]
    # select_and_scatter(operand, source, init): select reads the operand, scatter combines source into init
    scatter = op.regions[1][0].args if len(op.regions) == 2 else []
    if len(scatter) != 2:
        return [None] * n
    return [None, scatter[1].type, scatter[0].type]


def to_destination_type(b: Builder, x: Instruction, src: Any, dst: Any) -> Instruction:
    """The spec's to_destination_type between a quantized tensor and its body's quantized element type."""
    if not is_quantized(src) or not is_quantized(dst):
        return x
    if src.quant.same_values(dst.quant):
        return x
    return quantize(b, dequantize(b, x, src), dst)


def _promotable(src: TensorType, dst: Any) -> bool:
    """The spec's is_promotable for quantized element types: the same expressed type, storage no narrower."""
    return (is_quantized(dst) and dst.quant.expressed == src.quant.expressed
            and int(dst.quant.storage[1:]) >= int(src.quant.storage[1:]))


def _grid_exact(op: Op) -> bool:
    """Whether the body's ops are all GRID_EXACT and its quantized values of one quantized type (one grid)."""
    ops = [inner for region in op.regions for block in region for inner in block.ops]
    if not all(inner.name in GRID_EXACT and not inner.regions for inner in ops):
        return False
    values = [a for region in op.regions for block in region for a in block.args] + [
        r for inner in ops for r in inner.results]
    grids = [v.type.quant for v in values if is_quantized(v.type)]
    return all(g.same_values(grids[0]) for g in grids)


def _float_value(v: Value, mapping: dict[int, Value]) -> Value:
    new = Value(v.name, v.type.expressed() if is_quantized(v.type) else v.type)
    mapping[id(v)] = new
    return new


def _float_region(region: list[Block], mapping: dict[int, Value]) -> list[Block]:
    """A copy of a region whose quantized values are of their expressed types (values of the enclosing body it
    reads stay the same values)."""
    blocks = []
    for block in region:
        args = [_float_value(a, mapping) for a in block.args]
        ops = []
        for inner in block.ops:
            operands = [mapping.get(id(v), v) for v in inner.operands]
            results = [_float_value(r, mapping) for r in inner.results]
            ops.append(dataclasses.replace(inner, operands=operands, results=results,
                                           regions=[_float_region(r, mapping) for r in inner.regions]))
        blocks.append(Block(args, ops))
    return blocks


def lower_region_op(cx: Any, op: Op, args: list[Instruction]) -> tuple[Op, list[Instruction], list[Any]]:
    """An op with a region on quantized elements (see the module's docstring)."""
    keep = [None] * len(op.results)
    if op.name in STORAGE_REGIONS:
        return op, args, keep
    if op.name not in COMBINING:
        first = next(v.type for v in op.operands + op.results if is_quantized(v.type))
        raise cx.unsupported(op, f"a region computing on quantized elements ({first}) is not supported")
    for v in op.operands + op.results:
        if is_quantized(v.type) and v.type.quant.dim is not None:
            raise cx.error(op, f"{v.name} is per-axis quantized ({v.type}); the spec takes per-tensor "
                               "quantized tensors only")
    body_types = _body_types(op)
    for v, t in zip(op.operands, body_types):
        if t is not None and (is_quantized(v.type) or is_quantized(t)) and not (
                is_quantized(v.type) and _promotable(v.type, t)):
            raise cx.error(op, f"its body takes {t} for {v.name} of {v.type}: a quantized element is read as a "
                               "quantized type of the same expressed type and no narrower storage (is_promotable)")
    types = [t if t is not None and is_quantized(v.type) else v.type for v, t in zip(op.operands, body_types)]
    args = [to_destination_type(cx.b, a, v.type, t) for a, v, t in zip(args, op.operands, types)]
    if _grid_exact(op):
        mapping: dict[int, Value] = {}
        plain = dataclasses.replace(
            op, operands=[Value(v.name, t.expressed() if is_quantized(t) else t) for v, t in zip(op.operands, types)],
            results=[Value(v.name, v.type.expressed() if is_quantized(v.type) else v.type) for v in op.results],
            regions=[_float_region(r, mapping) for r in op.regions])
        floats = [dequantize(cx.b, a, t) if is_quantized(t) else a for a, t in zip(args, types)]
        return plain, floats, [v.type if is_quantized(v.type) else None for v in op.results]
    if op.name == "stablehlo.reduce":
        raise cx.unsupported(op, "a reduce of quantized elements whose body does more than add, take maxima or "
                                 "minima, compare and select is not supported")
    return _retyped(op, types, [v.type for v in op.results]), args, keep
