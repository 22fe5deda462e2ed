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
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, scalar_value, var
from mlcc.hlo.passes.recognize.attention import (RULES, _kernel_order, _probabilities, _pv_dot, _scores_dot,
                                                 _unrecognized)


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


def fake_quant(x: Instruction, module: Module | None) -> tuple[Instruction, tuple[float, ...]] | None:
    """(the input, (inv, zp, lo, hi, scale)) when x is a folded Q -> DQ pair of loop ops on a float input."""
    if x.opcode != "multiply" or not is_float(x.shape.dtype):
        return None
    found = _scalar_operand(x, module)
    if found is None:
        return None
    t, scale = found
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
    return scaled[0], (scaled[1], zp, lo, hi, scale)


def _score_chain(s: Instruction, module: Module | None) -> tuple[Instruction, list[tuple[float, ...]]] | None:
    """(the q·kᵀ dot, the steps from it to s) when s is the dot under fake-quants each after at most
    one constant multiply, with at least one fake-quant and none but them last."""
    steps: list[tuple[float, ...]] = []
    while True:
        found = fake_quant(s, module)
        if found is None:
            return None
        s, fq = found
        pre = 1.0
        if s.opcode == "multiply" and fake_quant(s, module) is None and (m := _scalar_operand(s, module)):
            s, pre = m
        steps.insert(0, (pre, *fq))
        if s.opcode == "dot":
            return (s, steps) if _scores_dot(s) else None


def quantized_attention(rw: Rewriter, m: Match) -> Instruction | None:
    pv = m.root
    p, v = pv.operands
    if not _pv_dot(pv):
        return None
    prob = fake_quant(p, rw.module)
    found = _probabilities(prob[0] if prob is not None else p, rw.module)
    if found is None:
        return None
    chain = _score_chain(found[1], rw.module)
    if chain is None:
        if prob is not None:
            _unrecognized(rw, found[0], pv, f"the softmax's input (%{found[1].name}, {found[1].opcode}) is not "
                          "q · kᵀ under fake-quants and constant scales")
        return None
    qk, steps = chain
    dtypes = {pv.shape.dtype, v.shape.dtype, found[0].shape.dtype, qk.shape.dtype,
              *(o.shape.dtype for o in qk.operands)}
    if dtypes != {"f32"}:
        _unrecognized(rw, found[0], pv, f"fake-quantized attention in {', '.join(sorted(dtypes))} (f32 only)")
        return None
    q, k, v = _kernel_order(rw, qk, pv, *qk.operands, v)
    attrs = {"score_quant": tuple(steps)}
    if prob is not None:
        attrs["prob_quant"] = prob[1]
    return rw.op("attention", [q, k, v], scale=1.0, causal=False, **attrs)


QUANT_RULES = RULES + [Rule("quantized-attention", op("dot", var("p"), var("v")), quantized_attention)]


class RecognizeQuantizedAttention(RewritePass):
    """recognize-attention with the fake-quantized form too (the pipeline runs this one)."""

    def __init__(self) -> None:
        super().__init__("recognize-attention", QUANT_RULES)
