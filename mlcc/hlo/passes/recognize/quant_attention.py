"""Attention with fake-quantized scores and probabilities (QDQ int8 exports) -> one ``attention`` op.

onnxruntime's quantize_static puts a QuantizeLinear -> DequantizeLinear pair after every MatMul, Mul and
Softmax of an attention block, and quantized_dot folds each pair into a fake-quant chain of loop ops:

    t = clamp(lo, round-nearest-even(x * inv) [+ zp], hi)
    y = (t [- zp]) * scale

Between the q·kᵀ dot and the softmax there may be several of these, each after at most one constant
multiply (the 1/sqrt(d) Mul); the probabilities may be fake-quantized before the dot with v. Such a
block becomes one attention op with

- ``score_quant={{pre, inv, zp, lo, hi, scale}, ...}``: the raw scores go through each step in order
  (``s = s * pre`` when pre != 1, then the fake-quant), and the op's ``scale`` is 1;
- ``prob_quant={inv, zp, lo, hi, scale}``: the normalized probabilities are fake-quantized before they
  meet v (the kernel then runs two passes over the keys: the row max and sum first).

q and k are read as the dot reads them (their dequantize multiplies are not moved into the scale, which
would round differently before a quantization step). Masks, soft-capping and shared kv heads are not
matched here: such a block stays as it is (QDQ exports of encoders carry none of them in the scores).

float8 e4m3fn QDQ exports (quantize_static with float8 activations) fake-quantize by a round trip through
the fp8 type, ``y = convert_f32(convert_f8(clamp(lo, x * inv, hi))) * scale`` (ONNX's saturation: lo, hi =
-448, 448; the conversion rounds to nearest even). Such a block becomes an attention op with the same
steps and ``quant_type=f8e4m3fn`` (zero points 0; every step of one op is of that type). By then
fp8-contraction has made both of its dots fp8 contractions, ``(dot(a8, b8) * sa) * sb``: the recognizer
reads them as the dots of the dequantized values ``convert(a8) * sa`` and ``convert(b8) * sb`` that the
model wrote (onnxruntime's arithmetic), which the kernel computes as it loads its q, k and v tiles. The
quantizer may leave the 1/sqrt(d) Mul unquantized between the last fake-quant and the softmax: a step
``{pre}`` of one element is such a multiply, with no fake-quant after it.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module, Shape, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, scalar_value, var
from mlcc.hlo.passes.recognize.attention import (RULES, _kernel_order, _probabilities, _pv_dot, _scores_dot,
                                                 _unrecognized)
from mlcc.hlo.shape_inference import FP8_DOT

INT = "int"  # the quant_type of integer fake-quants (no attribute on the op)


def _constant(x: Instruction, module: Module | None) -> float | None:
    c = scalar_value(x, module)
    return None if c is None or isinstance(c, bool) else float(c)


def _scalar_operand(x: Instruction, module: Module | None) -> tuple[Instruction, float] | None:
    """(the other operand, the constant) of a binary op with one scalar constant operand."""
    for a, b in (x.operands, reversed(x.operands)):
        c = _constant(b, module)
        if c is not None:
            return a, c
    return None


def fake_quant(x: Instruction, module: Module | None) -> tuple[Instruction, tuple[float, ...], str] | None:
    """(the input, (inv, zp, lo, hi, scale), the quant type: INT or the fp8 type) when x is a folded Q -> DQ
    pair of loop ops on a float input, or a round trip through an fp8 type."""
    if x.opcode != "multiply" or not is_float(x.shape.dtype):
        return None
    found = _scalar_operand(x, module)
    if found is None:
        return None
    t, scale = found
    if t.opcode == "convert" and t.operands[0].shape.dtype in FP8_DOT:
        q = _fp8_quantized(t.operands[0], module)
        return None if q is None else (q[0], (*q[1], scale), t.operands[0].shape.dtype)
    zp = 0.0
    if t.opcode == "subtract":
        zp = _constant(t.operands[1], module)
        if zp is None:
            return None
        t = t.operands[0]
    if t.opcode != "clamp":
        return None
    lo, q, hi = _constant(t.operands[0], module), t.operands[1], _constant(t.operands[2], module)
    if lo is None or hi is None:
        return None
    if q.opcode == "add":
        added = _scalar_operand(q, module)
        if added is None or added[1] != zp or added[0].opcode != "round-nearest-even":
            return None
        q = added[0]
    elif zp != 0.0:
        return None
    if q.opcode != "round-nearest-even" or q.operands[0].opcode != "multiply":
        return None
    scaled = _scalar_operand(q.operands[0], module)
    if scaled is None:
        return None
    return scaled[0], (scaled[1], zp, lo, hi, scale), INT


def _fp8_quantized(q8: Instruction, module: Module | None) -> tuple[Instruction, tuple[float, ...]] | None:
    """(x, (inv, 0, lo, hi)) when q8 = convert_fp8(clamp(lo, x * inv, hi)), x f32 (a QuantizeLinear to fp8)."""
    if q8.opcode != "convert" or q8.shape.dtype not in FP8_DOT or q8.operands[0].opcode != "clamp":
        return None
    lo, m, hi = q8.operands[0].operands
    lo, hi = _constant(lo, module), _constant(hi, module)
    if lo is None or hi is None or m.opcode != "multiply" or m.shape.dtype != "f32":
        return None
    scaled = _scalar_operand(m, module)
    return None if scaled is None else (scaled[0], (scaled[1], 0.0, lo, hi))


def _fp8_contraction(x: Instruction, module: Module | None) -> tuple[Instruction, float, float] | None:
    """(the dot, sa, sb) when x = (dot(a8, b8) * sa) * sb, a8 and b8 fp8 (fp8-contraction's dot of
    convert(a8) * sa and convert(b8) * sb: mlcc/hlo/passes/quantized_fp8.py)."""
    outer = _scalar_operand(x, module) if x.opcode == "multiply" else None
    inner = _scalar_operand(outer[0], module) if outer is not None and outer[0].opcode == "multiply" else None
    if inner is None or inner[0].opcode != "dot" or x.shape.dtype != "f32":
        return None
    dot = inner[0]
    if not all(o.shape.dtype in FP8_DOT for o in dot.operands):
        return None
    return dot, inner[1], outer[1]


def _dequantize(rw: Rewriter, q8: Instruction, scale: float) -> Instruction:
    """convert(q8) * scale in f32: the DequantizeLinear fp8-contraction moved into its epilogue."""
    dims = tuple(q8.shape.dims)
    return rw.op("multiply", [rw.op("convert", [q8], Shape("f32", dims)), rw.constant(scale, "f32", dims)])


Chain = tuple[Instruction, list[tuple[float, ...]], str, "tuple[float, float] | None"]


def _score_chain(s: Instruction, module: Module | None) -> Chain | None:
    """(the q·kᵀ dot, the steps from it to s, the quant type, the scales of q and k where the dot is an fp8
    contraction) when s is the dot under fake-quants of one type each after at most one constant multiply,
    with at least one fake-quant, and after the last at most one constant multiply (a step of one element)."""
    steps: list[tuple[float, ...]] = []
    kinds = set()
    if fake_quant(s, module) is None and s.opcode == "multiply" and (m := _scalar_operand(s, module)):
        s, post = m
        steps.append((post,))
    while True:
        found = fake_quant(s, module)
        if found is None:
            return None
        s, fq, kind = found
        kinds.add(kind)
        pre = 1.0
        if s.opcode == "multiply" and fake_quant(s, module) is None and _fp8_contraction(s, module) is None \
                and (m := _scalar_operand(s, module)):
            s, pre = m
        steps.insert(0, (pre, *fq))
        if len(kinds) > 1:
            return None
        scales = None
        if kind != INT and (c := _fp8_contraction(s, module)) is not None:
            s, scales = c[0], c[1:]
        if s.opcode == "dot":
            return (s, steps, kind, scales) if _scores_dot(s) else None


def quantized_attention(rw: Rewriter, m: Match) -> Instruction | None:
    pv = m.root
    p, v = pv.operands
    if not _pv_dot(pv):
        return None
    prob = fake_quant(p, rw.module)
    return _attention(rw, pv, prob[0] if prob is not None else p, prob[1] if prob is not None else None,
                      prob[2] if prob is not None else None, v)


def fp8_attention(rw: Rewriter, m: Match) -> Instruction | None:
    """(dot(p8, v8) * sp) * sv, p8 the fp8 quantization of the probabilities: dot(convert(p8) * sp,
    convert(v8) * sv), the probabilities' round trip through fp8 a prob_quant step."""
    c = _fp8_contraction(m.root, rw.module)
    if c is None or not _pv_dot(c[0]):
        return None
    pv, sp, sv = c
    p8, v8 = pv.operands
    q = _fp8_quantized(p8, rw.module)
    if q is None:
        return None
    return _attention(rw, pv, q[0], (*q[1], sp), p8.shape.dtype, _dequantize(rw, v8, sv), m.root)


def _attention(rw: Rewriter, pv: Instruction, p: Instruction, prob: tuple[float, ...] | None, prob_kind: str | None,
               v: Instruction, root: Instruction | None = None) -> Instruction | None:
    """The attention op for pv when p is softmax(q · kᵀ under fake-quants), prob the probabilities' fake-quant
    (None: none) of type prob_kind; root (default pv) is what the op stands for."""
    root = pv if root is None else root
    found = _probabilities(p, rw.module)
    if found is None:
        return None
    chain = _score_chain(found[1], rw.module)
    if chain is None:
        if prob is not None:
            _unrecognized(rw, found[0], root, f"the softmax's input (%{found[1].name}, {found[1].opcode}) is not "
                          "q · kᵀ under fake-quants and constant scales")
        return None
    qk, steps, kind, scales = chain
    if prob is not None and prob_kind != kind:
        _unrecognized(rw, found[0], root, f"the probabilities' fake-quant ({prob_kind}) is not of the scores' "
                      f"type ({kind})")
        return None
    q, k = qk.operands
    if scales is not None:  # an fp8 contraction: the dot of the dequantized values
        q, k = _dequantize(rw, q, scales[0]), _dequantize(rw, k, scales[1])
    dtypes = {root.shape.dtype, v.shape.dtype, found[0].shape.dtype, q.shape.dtype, k.shape.dtype}
    if dtypes != {"f32"}:
        _unrecognized(rw, found[0], root, f"fake-quantized attention in {', '.join(sorted(dtypes))} (f32 only)")
        return None
    q, k, v = _kernel_order(rw, qk, pv, q, k, v)
    attrs: dict[str, object] = {"score_quant": tuple(steps)}
    if prob is not None:
        attrs["prob_quant"] = prob
    if kind != INT:
        attrs["quant_type"] = kind
    return rw.op("attention", [q, k, v], scale=1.0, causal=False, **attrs)


QUANT_RULES = RULES + [Rule("quantized-attention", op("dot", var("p"), var("v")), quantized_attention),
                       Rule("fp8-attention", op("multiply", var("x"), var("s")), fp8_attention)]


class RecognizeQuantizedAttention(RewritePass):
    """recognize-attention with the fake-quantized form too (the pipeline runs this one)."""

    def __init__(self) -> None:
        super().__init__("recognize-attention", QUANT_RULES)
