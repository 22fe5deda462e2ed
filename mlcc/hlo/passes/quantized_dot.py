"""Quantized contractions: DequantizeLinear -> dot/convolution becomes an 8-bit integer contraction.

A dot or convolution whose operands are both dequantized 8-bit integers,

    (convert(xq) - zx) * sx   .   (convert(wq) - 0) * sw        xq: u8/s8, wq: s8/u8

is rewritten to accumulate the integers exactly in s32 (on integer tensor cores) and apply the scales and
the activation's zero point in the epilogue:

    y = (convert_f32(dot(xq, wq) -> s32) - zx * colsum(wq)) * sx * sw

colsum(wq) sums the weights over the contracted dims (a constant, folded at compile time when the weights
are). The activation's scale and zero point must be per tensor; the weight's scale per tensor or per output
column (per output channel); the weight's zero point zero (onnxruntime quantizes weights symmetrically). A
convolution that pads its input pads the integers with zx instead (a pad the producer's kernel writes), so
the border positions need no correction. Anything else stays a float contraction of the dequantized values.

FoldFakeQuant then folds what is left of a QuantizeLinear -> DequantizeLinear pair: the integers' round
trip ``convert_f(convert_int(clamp(lo, round(v) + z, hi)))`` is exact when the clamp bounds lie in the
integer type, so it is the clamp itself, one elementwise op its neighbours' kernels compute. Where a quantized
contraction reads the integers too, they are stored anyway, and the other users keep reading them.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Module, Shape, is_float, is_int
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, constant_array, op, scalar_value, var
from mlcc.hlo.shape_inference import FP8_DOT, INT8, conv_dim_labels

VIEW_THROUGH = ("broadcast", "reshape", "bitcast", "copy")


@dataclass(frozen=True)
class Dequantized:
    """A float value (convert(q) - zero) * scale: q an 8-bit integer value, zero and scale broadcast to
    q's dims (None for 0 and 1)."""
    q: Instruction
    zero: Instruction | None
    scale: Instruction | None


def _exact_convert(inst: Instruction) -> bool:
    """A convert that keeps every value: to a float from an integer of at most 16 bits or a narrower float."""
    src, dst = inst.operands[0].shape.dtype, inst.shape.dtype
    if not is_float(dst):
        return False
    if is_float(src):
        return numpy_dtype(src).itemsize <= numpy_dtype(dst).itemsize
    return numpy_dtype(src).itemsize <= 2


def _centered(v: Instruction) -> tuple[Instruction, Instruction | None] | None:
    """(q, zero) when v is convert(q) - zero or convert(q), q of an 8-bit integer type."""
    zero = None
    if v.opcode == "subtract":
        v, zero = v.operands
    if v.opcode != "convert" or v.operands[0].shape.dtype not in INT8 or not is_float(v.shape.dtype):
        return None
    return v.operands[0], zero


def dequantized(v: Instruction) -> Dequantized | None:
    if not is_float(v.shape.dtype):
        return None
    if v.opcode == "multiply":
        for x, s in (v.operands, v.operands[::-1]):
            c = _centered(x)
            if c is not None:
                return Dequantized(c[0], c[1], s)
        return None
    c = _centered(v)
    return None if c is None else Dequantized(c[0], c[1], None)


def per_tensor(inst: Instruction) -> Instruction | None:
    """The one-element value a uniform broadcast spreads (looking through exact converts), or None."""
    while True:
        if inst.shape.is_static and inst.shape.numel() == 1:
            return inst
        if inst.opcode in VIEW_THROUGH or (inst.opcode == "convert" and _exact_convert(inst)):
            inst = inst.operands[0]
            continue
        return None


def weight_scale(scale: Instruction | None) -> tuple[Instruction | None, int | None] | None:
    """A weight's scale as (scalar, None) per tensor or (vector, dim) per axis; (None, None) for no scale; None
    when it is neither."""
    if scale is None:
        return None, None
    sw = per_tensor(scale)
    return (sw, None) if sw is not None else per_axis(scale)


def per_axis(inst: Instruction) -> tuple[Instruction, int] | None:
    """(vector, dim) when inst is a 1-D value broadcast along one dim of its result."""
    if inst.opcode == "convert" and _exact_convert(inst):
        return per_axis(inst.operands[0])
    if inst.opcode == "broadcast" and inst.operands[0].shape.rank == 1 and len(inst.attrs["dimensions"]) == 1:
        return inst.operands[0], inst.attrs["dimensions"][0]
    return None


def _is_zero(inst: Instruction | None, module: Module) -> bool:
    if inst is None:
        return True
    while inst.opcode == "convert" and _exact_convert(inst):
        inst = inst.operands[0]
    return scalar_value(inst, module) == 0


def _scalar_f32(rw: Rewriter, v: Instruction, dims: tuple, dtype: str = "f32") -> Instruction:
    """A one-element value as a dtype broadcast to dims."""
    s = rw.reshape(v, ())
    if s.shape.dtype != dtype:
        s = rw.op("convert", [s], Shape(dtype, ()))
    return rw.broadcast(s, dims, ())


@dataclass(frozen=True)
class Operands:
    """What both contractions need checked: the dequantized operands, the activation's per-tensor scale and
    zero point, and the weight's scale (per tensor, or a vector along one weight dim)."""
    x: Dequantized
    w: Dequantized
    sx: Instruction | None
    zx: Instruction | None
    sw: Instruction | None
    sw_dim: int | None


def _operands(rw: Rewriter, root: Instruction) -> Operands | None:
    if not is_float(root.shape.dtype):
        return None
    x, w = (dequantized(o) for o in root.operands)
    if x is None or w is None or not _is_zero(w.zero, rw.module):
        return None
    sx = per_tensor(x.scale) if x.scale is not None else None
    if x.scale is not None and sx is None:
        return None
    zx = None
    if not _is_zero(x.zero, rw.module):
        zx = per_tensor(x.zero)
        if zx is None:
            return None
    found = weight_scale(w.scale)
    if found is None:
        return None
    sw, sw_dim = found
    return Operands(x, w, sx, zx, sw, sw_dim)


def scale_epilogue(rw: Rewriter, root: Instruction, acc: Instruction, ops: Operands,
              colsum: tuple[Instruction, tuple[int, ...]] | None, sw_out: int | None) -> Instruction:
    """convert(acc) minus the zero point's correction, times the scales, in the root's type."""
    dims = tuple(root.shape.dims)
    y = rw.op("convert", [acc], Shape("f32", dims))
    if colsum is not None:
        total, mapping = colsum
        corr = rw.op("multiply", [rw.broadcast(rw.op("convert", [total], Shape("f32", total.shape.dims)), dims,
                                               mapping), _scalar_f32(rw, ops.zx, dims)])
        y = rw.op("subtract", [y, corr])
    if ops.sx is not None:
        y = rw.op("multiply", [y, _scalar_f32(rw, ops.sx, dims)])
    if ops.sw is not None:
        if sw_out is None:
            s = _scalar_f32(rw, ops.sw, dims)
        else:
            v = ops.sw if ops.sw.shape.dtype == "f32" else rw.op("convert", [ops.sw], Shape("f32", ops.sw.shape.dims))
            s = rw.broadcast(v, dims, (sw_out,))
        y = rw.op("multiply", [y, s])
    if root.shape.dtype != "f32":
        y = rw.op("convert", [y], Shape(root.shape.dtype, dims))
    return y


def _colsum(rw: Rewriter, w: Instruction, keep: list[int]) -> Instruction:
    """The weights summed in s32 over every dim but keep (a constant when the weights are)."""
    dims = tuple(d for d in range(w.shape.rank) if d not in keep)
    known = constant_array(w, rw.module)
    if known is not None:
        return rw.constant(known.astype(np.int64).sum(axis=dims).astype(np.int32), "s32")
    wide = rw.op("convert", [w], Shape("s32", tuple(w.shape.dims)))
    return rw.op("reduce", [wide], dimensions=tuple(d for d in range(w.shape.rank) if d not in keep), kind="add")


def _quantized_dot(rw: Rewriter, m: Match) -> Instruction | None:
    dot = m.root
    ops = _operands(rw, dot)
    if ops is None:
        return None
    a = dot.attrs
    lb, lc, rb, rc = (list(a[k]) for k in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
                                          "rhs_contracting_dims"))
    nb, nlf = len(lb), ops.x.q.shape.rank - len(lb) - len(lc)
    rf = [d for d in range(ops.w.q.shape.rank) if d not in rb + rc]

    def out_dim(d: int) -> int:  # where a weight dim that is not contracted lands in the result
        return rb.index(d) if d in rb else nb + nlf + rf.index(d)
    sw_out = None
    if ops.sw_dim is not None:
        if ops.sw_dim in rc:
            return None  # a scale along the contracted dim cannot leave the sum
        sw_out = out_dim(ops.sw_dim)
    acc = rw.op("dot", [ops.x.q, ops.w.q], Shape("s32", tuple(dot.shape.dims)), **a)
    colsum = None
    if ops.zx is not None:
        keep = sorted(rb + rf)
        colsum = (_colsum(rw, ops.w.q, keep), tuple(out_dim(d) for d in keep))
    return scale_epilogue(rw, dot, acc, ops, colsum, sw_out)


def _quantized_convolution(rw: Rewriter, m: Match) -> Instruction | None:
    conv = m.root
    ops = _operands(rw, conv)
    if ops is None:
        return None
    lhs, rhs, out = conv_dim_labels(conv.attrs["dim_labels"])
    o = rhs.index("o")
    sw_out = None
    if ops.sw_dim is not None:
        if ops.sw_dim != o:
            return None
        sw_out = out.index("f")
    attrs = dict(conv.attrs)
    x = ops.x.q
    colsum = None
    if ops.zx is not None:
        pads = [(conv.attrs["padding_low"][k], conv.attrs["padding_high"][k]) for k in range(len(lhs) - 2)]
        if any(lo or hi for lo, hi in pads):
            # pad the integers with the zero point: the padded positions then dequantize to 0 as the float
            # convolution's padding does, and every output position needs the same correction
            zero = rw.reshape(ops.zx, ())
            if zero.shape.dtype != x.shape.dtype:
                return None
            low, high = [0] * x.shape.rank, [0] * x.shape.rank
            for k, (lo, hi) in enumerate(pads):
                low[lhs.index(str(k))], high[lhs.index(str(k))] = lo, hi
            x = rw.op("pad", [x, zero], edge_padding_low=tuple(low), edge_padding_high=tuple(high),
                      interior_padding=(0,) * x.shape.rank)
            attrs["padding_low"] = attrs["padding_high"] = (0,) * len(pads)
        colsum = (_colsum(rw, ops.w.q, [o]), (out.index("f"),))
    acc = rw.op("convolution", [x, ops.w.q], Shape("s32", tuple(conv.shape.dims)), **attrs)
    return scale_epilogue(rw, conv, acc, ops, colsum, sw_out)


class QuantizedContraction(RewritePass):
    def __init__(self) -> None:
        super().__init__("quantized-contraction", [
            REQUANTIZE,
            Rule("quantized-dot", op("dot", var("x"), var("w")), _quantized_dot),
            Rule("quantized-convolution", op("convolution", var("x"), var("w")), _quantized_convolution),
        ])


# ---------------------------------------------------------------- fake quantization

def _integral_in(inst: Instruction, module: Module, lo: float, hi: float) -> bool:
    v = scalar_value(inst, module)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and lo <= v <= hi


def _rounded(inst: Instruction, module: Module) -> bool:
    """inst holds integral values: round(v), or round(v) plus an integral uniform value."""
    if inst.opcode in ("round-nearest-even", "round-nearest-afz", "floor", "ceil"):
        return True
    if inst.opcode in ("add", "subtract"):
        a, b = inst.operands
        whole = (lambda x: _integral_in(x, module, -2.0 ** 24, 2.0 ** 24)
                 or (x.opcode == "convert" and not is_float(x.operands[0].shape.dtype) and _exact_convert(x)))
        return (_rounded(a, module) and whole(b)) or (inst.opcode == "add" and _rounded(b, module) and whole(a))
    return False


def _fake_quant(rw: Rewriter, m: Match) -> Instruction | None:
    """convert_f(convert_int(c)) -> c, for c = clamp(lo, rounded, hi) with lo and hi in the integer type."""
    outer, inner = m.root, m.q
    if not is_float(outer.shape.dtype) or inner.opcode != "convert" or not is_int(inner.shape.dtype):
        return None  # an fp8 round trip rounds: it is no clamp
    if any(u.opcode != "convert" or not is_float(u.shape.dtype) for u in inner.users):
        return None  # the integers are stored for a quantized contraction anyway: read them, not the floats
    c = inner.operands[0]
    if c.opcode != "clamp" or c.shape.dtype != outer.shape.dtype or inner.shape.dtype == "pred":
        return None
    info = np.iinfo(numpy_dtype(inner.shape.dtype))
    lo, mid, hi = c.operands
    if not (_integral_in(lo, rw.module, info.min, info.max) and _integral_in(hi, rw.module, info.min, info.max)):
        return None
    return c if _rounded(mid, rw.module) else None


class FoldFakeQuant(RewritePass):
    def __init__(self) -> None:
        super().__init__("fold-fake-quant", [Rule("fake-quant", op("convert", var("q")), _fake_quant)])


# ---------------------------------------------------------------- ops that commute with quantization

def _value_of(inst: Instruction, module: Module):
    while inst.opcode == "convert" and _exact_convert(inst):
        inst = inst.operands[0]
    return scalar_value(inst, module)


def _quantized_parts(root: Instruction, module: Module) -> tuple[Instruction, object, object] | None:
    """(v, scale, zero) when root = convert_int(clamp(lo, round(v / scale) + zero, hi)) with the type's bounds,
    or root = convert_fp8(clamp(-max, v / scale, max)) (a saturating QuantizeLinear to float8 e4m3fn; zero 0)."""
    if root.opcode != "convert" or root.operands[0].opcode != "clamp":
        return None
    lo, mid, hi = root.operands[0].operands
    if root.shape.dtype in FP8_DOT:
        top = float(ml_dtypes.finfo(numpy_dtype(root.shape.dtype)).max)
        if scalar_value(lo, module) != -top or scalar_value(hi, module) != top or mid.opcode != "divide":
            return None
        return mid.operands[0], _value_of(mid.operands[1], module), 0
    if root.shape.dtype not in INT8:
        return None
    info = np.iinfo(numpy_dtype(root.shape.dtype))
    if scalar_value(lo, module) != info.min or scalar_value(hi, module) != info.max:
        return None
    zero = 0
    if mid.opcode == "add":
        mid, z = mid.operands
        zero = _value_of(z, module)
    if mid.opcode != "round-nearest-even" or mid.operands[0].opcode != "divide":
        return None
    v, s = mid.operands[0].operands
    return v, _value_of(s, module), zero


MONOTONE = {"reduce-window": ("maximum", "minimum")}
COMMUTING_VIEWS = ("reshape", "transpose", "bitcast", "copy", "broadcast", "slice")


def _requantize_same(rw: Rewriter, m: Match) -> Instruction | None:
    """quantize(f(dequantize(q))) with the same scale and zero point -> f(q), for f a chain of views or a max
    or min pool: they pick elements without arithmetic, and quantize(dequantize(q)) == q exactly."""
    parts = _quantized_parts(m.root, rw.module)
    if parts is None:
        return None
    v, scale, zero = parts
    fp8 = m.root.shape.dtype in FP8_DOT
    chain = []
    while v.opcode in COMMUTING_VIEWS or (not fp8 and v.attrs.get("kind") in MONOTONE.get(v.opcode, ())):
        chain.append(v)  # (fp8 values are only moved: a pool of them would compute on a storage type)
        v = v.operands[0]
    dq = _fp8_dequantized(v) if fp8 else dequantized(v)
    if not chain or dq is None or dq.q.shape.dtype != m.root.shape.dtype or scale is None or zero is None:
        return None
    if dq.scale is None or _value_of(dq.scale, rw.module) != scale or not isinstance(scale, float) or scale <= 0:
        return None
    if fp8 and not 2.0 ** -100 <= scale <= 2.0 ** 100:
        return None  # q * scale / scale within an f32 rounding or two of q, which e4m3's rounding undoes
    if (_value_of(dq.zero, rw.module) if dq.zero is not None else 0) != zero:
        return None
    x = dq.q
    for inst in reversed(chain):
        x = rw.op(inst.opcode, [x, *inst.operands[1:]], Shape(x.shape.dtype, tuple(inst.shape.dims)), **inst.attrs)
    return x


def _fp8_dequantized(v: Instruction) -> Dequantized | None:
    """convert(q) * scale (either order), q float8 e4m3fn, in f32."""
    if v.opcode != "multiply" or v.shape.dtype != "f32":
        return None
    for c, s in (v.operands, v.operands[::-1]):
        if c.opcode == "convert" and c.operands[0].shape.dtype in FP8_DOT:
            return Dequantized(c.operands[0], None, s)
    return None


REQUANTIZE = Rule("requantize-same", op("convert", var("v")), _requantize_same)
