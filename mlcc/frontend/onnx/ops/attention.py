"""Attention (-> the attention composite, or its steps spelled out), LinearAttention (-> an unrolled
recurrence) and RotaryEmbedding (-> slices, multiplies, concatenate)."""

from __future__ import annotations

import math

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, repeat_heads, full, require_float, scalar_op, static_dims
from mlcc.frontend.onnx.ops.shape_ops import slice_axis
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction, Shape


def _split_heads(b: Builder, node: OnnxNode, x: Instruction, heads: int, what: str) -> Instruction:
    """[B, S, H*D] -> [B, H, S, D]."""
    if not heads:
        raise node.error(f"3-D {what} needs the {what.lower()}_num_heads attribute")
    batch, seq, hidden = x.shape.dims
    if not isinstance(hidden, int) or hidden % heads:
        raise node.error(f"{what} hidden size {hidden} does not split into {heads} heads")
    return b.transpose(b.reshape(x, (batch, seq, heads, hidden // heads)), (0, 2, 1, 3))


@onnx_op("Attention", since=23)
def import_attention(b: Builder, node: OnnxNode) -> list[Result]:
    """ONNX Attention: the attention composite, or, for softcap, the qk_matmul_output output or a softmax
    precision of its own, the same steps spelled out (dot, softcap, bias, softmax, dot) as the ONNX reference.

    The KV cache (past_key / past_value) is concatenated in front of K and V (present_key / present_value);
    causal masking is aligned bottom-right by the cache length, or per batch by nonpad_kv_seqlen.
    """
    q, k, v = node.input(0), node.input(1), node.input(2)
    require_float(node, q)
    three_d = q.shape.rank == 3
    if three_d:
        q = _split_heads(b, node, q, node.attr("q_num_heads", 0), "Q")
        k = _split_heads(b, node, k, node.attr("kv_num_heads", 0), "K")
        v = _split_heads(b, node, v, node.attr("kv_num_heads", 0), "V")
    if q.shape.rank != 4 or k.shape.rank != 4 or v.shape.rank != 4:
        raise node.error("Q, K and V must all be 3-D or all 4-D")
    if node.has_input(4) != node.has_input(5):
        raise node.error("past_key and past_value come together")
    past = 0
    if node.has_input(4):
        past_k, past_v = node.input(4), node.input(5)
        past = static_dims(node, [past_k.shape.dims[2]], "past sequence length")[0]
        k = b.op("concatenate", [past_k, k], dimension=2)
        v = b.op("concatenate", [past_v, v], dimension=2)
    nonpad = node.input(6) if node.has_input(6) else None
    if nonpad is not None and past:
        raise node.error("nonpad_kv_seqlen cannot be combined with past_key / past_value")
    head = q.shape.dims[-1]
    if not isinstance(head, int):
        raise node.unsupported(f"symbolic head size {head}")
    scale = float(node.attr("scale", 1.0 / math.sqrt(head)))
    softcap = float(node.attr("softcap", 0.0))
    mode = int(node.attr("qk_matmul_output_mode", 0))
    precision = ir_dtype(node.attr("softmax_precision")) if node.has_attr("softmax_precision") else None
    windows = (int(node.attr("left_window_size", -1)), int(node.attr("right_window_size", -1)))
    causal = bool(node.attr("is_causal", 0))
    sq, sk = q.shape.dims[-2], k.shape.dims[-2]
    # the composite's causal flag aligns bottom-right by Sk - Sq: the cache length, or 0 without one
    composite_causal = causal and nonpad is None and windows == (-1, -1) and (past > 0 or sq == sk)
    mask = node.input(3) if node.has_input(3) else None
    spelled_out = softcap > 0 or node.output_used(3) or (precision is not None and precision != q.shape.dtype)
    if mask is not None and not spelled_out and not (causal and not composite_causal) and windows == (-1, -1) \
            and nonpad is None and mask.shape.dims[-1] == sk:
        bias = mask if mask.shape.dtype == "pred" else b.convert(mask, q.shape.dtype)  # the composite's own masking
    else:
        bias = _attention_bias(b, node, q.shape.dtype, mask, sq, sk, causal and not composite_causal, past, nonpad,
                               windows)
    if spelled_out:
        y, scores = _spelled_out(b, node, q, k, v, bias, scale, softcap, mode, precision, composite_causal, past)
    else:
        y = b.op("attention", [q, k, v] + ([bias] if bias is not None else []), scale=scale,
                 causal=composite_causal)
        scores = None
    if three_d:
        batch, heads, seq, dv = y.shape.dims
        y = b.reshape(b.transpose(y, (0, 2, 1, 3)), (batch, seq, heads * dv))  # type: ignore[operator]
    return [y, k, v, scores][:max(node.num_outputs, 1)]


def _neg_inf_unless(b: Builder, allowed: Instruction, dtype: str) -> Instruction:
    """0 where allowed, -inf elsewhere (an additive mask)."""
    dims = allowed.shape.dims
    return b.op("select", [allowed, full(b, 0, dtype, dims), full(b, -np.inf, dtype, dims)])


def _attention_bias(b: Builder, node: OnnxNode, dtype: str, mask: Instruction | None, sq, sk, causal: bool,
                    past: int, nonpad: Instruction | None, windows: tuple[int, int]) -> Instruction | None:
    """The additive bias ONNX adds to the scores: the mask (padded to the keys with -inf), causal and window
    masks aligned by the cache (per batch with nonpad_kv_seqlen), and the padding mask of nonpad_kv_seqlen."""
    sq, sk = static_dims(node, [sq, sk], "sequence lengths")
    terms: list[Instruction] = []
    if mask is not None:
        width = mask.shape.dims[-1]
        if isinstance(width, int) and width < sk:
            fill = b.splat(False, "pred") if mask.shape.dtype == "pred" else b.splat(-np.inf, mask.shape.dtype)
            rank = mask.shape.rank
            mask = b.op("pad", [mask, fill], edge_padding_low=(0,) * rank,
                        edge_padding_high=(0,) * (rank - 1) + (sk - width,), interior_padding=(0,) * rank)
        terms.append(_neg_inf_unless(b, mask, dtype) if mask.shape.dtype == "pred" else b.convert(mask, dtype))
    if causal or windows != (-1, -1):
        # diff[b?, i, j] = (i + offset) - j, offset the cache length or nonpad_kv_seqlen[b] - Sq
        grid = Shape("s64", (sq, sk))
        diff = b.op("subtract", [b.op("iota", [], grid, iota_dimension=0), b.op("iota", [], grid, iota_dimension=1)])
        if nonpad is not None:
            batch = nonpad.shape.dims[0]
            offset = scalar_op(b, "subtract", b.convert(nonpad, "s64"), sq)
            dims = (batch, 1, sq, sk)
            diff = b.op("add", [broadcast_in_dims(b, diff, dims, [2, 3]), broadcast_in_dims(b, offset, dims, [0])])
        elif past:
            diff = scalar_op(b, "add", diff, past)
        zero = full(b, 0, "s64", diff.shape.dims)
        if causal:
            terms.append(_neg_inf_unless(b, b.op("compare", [diff, zero], direction="GE"), dtype))
        left, right = windows
        if left >= 0:
            terms.append(_neg_inf_unless(b, scalar_op(b, "compare", diff, left, direction="LE"), dtype))
        if right >= 0:
            terms.append(_neg_inf_unless(b, scalar_op(b, "compare", diff, -right, direction="GE"), dtype))
    if nonpad is not None:
        batch = nonpad.shape.dims[0]
        dims = (batch, 1, 1, sk)
        keys = b.op("iota", [], Shape("s64", dims), iota_dimension=3)
        valid = b.op("compare", [keys, broadcast_in_dims(b, b.convert(nonpad, "s64"), dims, [0])], direction="LT")
        terms.append(_neg_inf_unless(b, valid, dtype))
    if not terms:
        return None
    bias = terms[0]
    for t in terms[1:]:
        bias = b.elementwise("add", bias, t)
    return bias


def _spelled_out(b: Builder, node: OnnxNode, q: Instruction, k: Instruction, v: Instruction,
                 bias: Instruction | None, scale: float, softcap: float, mode: int, precision: str | None,
                 causal: bool, past: int) -> tuple[Instruction, Instruction]:
    """(Y, qk_matmul_output) as the ONNX reference computes them."""
    dtype = q.shape.dtype
    batch, heads, sq, _ = q.shape.dims
    sk = k.shape.dims[2]
    if causal:  # the composite's bottom-right causal flag, as a bias
        causal_bias = _attention_bias(b, node, dtype, None, sq, sk, True, past, None, (-1, -1))
        bias = causal_bias if bias is None else b.elementwise("add", bias, causal_bias)
    if heads % k.shape.dims[1]:  # type: ignore[operator]
        raise node.error(f"{heads} query heads do not share {k.shape.dims[1]} key/value heads evenly")
    k, v = repeat_heads(b, k, heads), repeat_heads(b, v, heads)  # type: ignore[arg-type]
    root = float(np.sqrt(scale))
    scores = b.op("dot", [scalar_op(b, "multiply", q, root), scalar_op(b, "multiply", k, root)],
                  lhs_batch_dims=(0, 1), lhs_contracting_dims=(3,), rhs_batch_dims=(0, 1), rhs_contracting_dims=(3,))
    if softcap > 0:
        scores = scalar_op(b, "multiply", b.op("tanh", [scalar_op(b, "divide", scores, softcap)]), softcap)
    qk = scores
    with_bias = b.elementwise("add", scores, bias) if bias is not None else scores
    if mode == 2:
        qk = with_bias
    work = precision or dtype
    probs = b.op("softmax", [b.convert(with_bias, work)], dimension=3)
    if bias is not None:  # a row with no attendable key gives zeros (decided on the bias, as ONNX does)
        top = b.op("reduce", [bias], dimensions=(bias.shape.rank - 1,), kind="maximum")
        dead = scalar_op(b, "compare", top, -np.inf, direction="EQ")
        lead = tuple(bias.shape.dims[:-1])
        dead = b.broadcast_to(broadcast_in_dims(b, dead, lead + (1,), list(range(len(lead)))), probs.shape.dims)
        probs = b.op("select", [dead, full(b, 0, work, probs.shape.dims), probs])
    probs = b.convert(probs, dtype)
    if mode == 3:
        qk = probs
    y = b.op("dot", [probs, v], lhs_batch_dims=(0, 1), lhs_contracting_dims=(3,), rhs_batch_dims=(0, 1),
             rhs_contracting_dims=(2,))
    return y, b.convert(qk, dtype)


@onnx_op("RotaryEmbedding", since=23)
def import_rotary_embedding(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    three_d = x.shape.rank == 3
    if three_d:
        heads = node.attr("num_heads", 0)
        batch, seq, hidden = x.shape.dims
        if not heads or not isinstance(hidden, int) or hidden % heads:
            raise node.error(f"3-D input of hidden size {hidden} needs num_heads that divides it")
        x = b.reshape(x, (batch, seq, heads, hidden // heads))
    elif x.shape.rank == 4:
        x = b.transpose(x, (0, 2, 1, 3))
    else:
        raise node.error(f"input must be 3-D or 4-D, is {x.shape.rank}-D")
    batch, seq, heads, head = x.shape.dims  # x is [B, S, H, D]
    head = static_dims(node, [head], "head size")[0]
    rot = node.attr("rotary_embedding_dim", 0) or head
    if rot % 2 or rot > head:
        raise node.error(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
    cos, sin = node.input(1), node.input(2)
    if node.has_input(3):
        positions = node.input(3)
        cos = b.op("gather", [cos, positions], axis=0)
        sin = b.op("gather", [sin, positions], axis=0)
    half = rot // 2
    cos, sin = (slice_axis(b, c, 2, 0, half) for c in (cos, sin))  # [B, S, rot/2]
    half_dims = (batch, seq, heads, half)
    cos, sin = (broadcast_in_dims(b, b.convert(c, x.shape.dtype), half_dims, [0, 1, 3]) for c in (cos, sin))
    rotated = slice_axis(b, x, 3, 0, rot)
    if node.attr("interleaved", 0):
        pairs = b.reshape(rotated, half_dims + (2,))
        x1 = b.reshape(slice_axis(b, pairs, 4, 0, 1), half_dims)
        x2 = b.reshape(slice_axis(b, pairs, 4, 1, 2), half_dims)
    else:
        x1, x2 = slice_axis(b, rotated, 3, 0, half), slice_axis(b, rotated, 3, half, rot)
    y1 = b.op("subtract", [b.op("multiply", [x1, cos]), b.op("multiply", [x2, sin])])
    y2 = b.op("add", [b.op("multiply", [x2, cos]), b.op("multiply", [x1, sin])])
    if node.attr("interleaved", 0):
        wide = half_dims + (1,)
        y = b.reshape(b.op("concatenate", [b.reshape(y1, wide), b.reshape(y2, wide)], dimension=4),
                      (batch, seq, heads, rot))
    else:
        y = b.op("concatenate", [y1, y2], dimension=3)
    if rot < head:
        y = b.op("concatenate", [y, slice_axis(b, x, 3, rot, head)], dimension=3)
    if three_d:
        return [b.reshape(y, (batch, seq, heads * head))]  # type: ignore[operator]
    return [b.transpose(y, (0, 2, 1, 3))]


LINEAR_ATTENTION_RULES = ("linear", "gated", "delta", "gated_delta")
MAX_LINEAR_ATTENTION_STEPS = 512


@onnx_op("LinearAttention", since=27)
def import_linear_attention(b: Builder, node: OnnxNode) -> list[Result]:
    """The recurrent form, unrolled over the (static) sequence, in float32 like the ONNX reference:
    per step the state [B, Hkv, dk, dv] decays (gated), corrects the value by what it already
    retrieves for the key (delta), adds key (x) value, and is read by the query (times scale)."""
    rule = node.attr("update_rule", "gated_delta")
    if rule not in LINEAR_ATTENTION_RULES:
        raise node.error(f"unknown update_rule '{rule}'")
    q_heads, kv_heads = node.attr("q_num_heads", 0), node.attr("kv_num_heads", 0)
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise node.error(f"q_num_heads {q_heads} must be a positive multiple of kv_num_heads {kv_heads}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != node.has_input(4) or delta != node.has_input(5):
        raise node.error(f"update_rule '{rule}' takes {'a' if gated else 'no'} decay and {'a' if delta else 'no'} beta")
    query = node.input(0)
    require_float(node, query)
    out_dtype = query.shape.dtype
    f32 = "f32"
    q = b.convert(_split_heads(b, node, query, q_heads, "Q"), f32)  # [B, Hq, T, dk]
    k = b.convert(_split_heads(b, node, node.input(1), kv_heads, "K"), f32)
    v = b.convert(_split_heads(b, node, node.input(2), kv_heads, "V"), f32)  # [B, Hkv, T, dv]
    batch, _, steps, dk = q.shape.dims
    dv = v.shape.dims[3]
    steps, dk, dv = static_dims(node, [steps, dk, dv], "sequence length and head sizes")
    if steps > MAX_LINEAR_ATTENTION_STEPS:
        raise node.unsupported(f"sequences longer than {MAX_LINEAR_ATTENTION_STEPS} steps")
    state_dims = (batch, kv_heads, dk, dv)
    if node.has_input(3):
        past = node.input(3)
        state_dtype = past.shape.dtype
        state = b.convert(past, f32)
    else:
        state_dtype = out_dtype
        state = full(b, 0, f32, state_dims)
    decay = _per_head(b, node, node.input(4), kv_heads, dk, "decay") if gated else None  # [B, Hkv, T, 1|dk]
    beta = _per_head(b, node, node.input(5), kv_heads, 1, "beta") if delta else None  # [B, Hkv|1, T, 1]
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(dk)

    def at(x: Instruction, t: int) -> Instruction:
        """x[:, :, t, :] of a [B, H, T, D] value."""
        return b.reshape(slice_axis(b, x, 2, t, t + 1), (x.shape.dims[0], x.shape.dims[1], x.shape.dims[3]))

    outputs = []
    for t in range(steps):
        k_t, v_t = at(k, t), at(v, t)
        if decay is not None:
            g = b.op("exp", [at(decay, t)])  # [B, Hkv, 1|dk]
            state = b.op("multiply", [state, b.broadcast_to(b.reshape(g, g.shape.dims + (1,)), state_dims)])
        if beta is not None:
            retrieved = b.op("dot", [state, k_t], lhs_batch_dims=(0, 1), lhs_contracting_dims=(2,),
                             rhs_batch_dims=(0, 1), rhs_contracting_dims=(2,))  # [B, Hkv, dv]
            v_t = b.elementwise("multiply", at(beta, t), b.op("subtract", [v_t, retrieved]))
        outer = b.op("multiply", [broadcast_in_dims(b, k_t, state_dims, [0, 1, 2]),
                                  broadcast_in_dims(b, v_t, state_dims, [0, 1, 3])])
        state = b.op("add", [state, outer])
        read = repeat_heads(b, state, q_heads)  # [B, Hq, dk, dv]
        o_t = b.op("dot", [at(q, t), read], lhs_batch_dims=(0, 1), lhs_contracting_dims=(2,),
                   rhs_batch_dims=(0, 1), rhs_contracting_dims=(2,))  # [B, Hq, dv]
        outputs.append(b.reshape(scalar_op(b, "multiply", o_t, scale), (batch, 1, q_heads * dv)))
    y = outputs[0] if steps == 1 else b.op("concatenate", outputs, dimension=1)  # [B, T, Hq*dv]
    return [b.convert(y, out_dtype), b.convert(state, state_dtype)][:max(node.num_outputs, 1)]


def _per_head(b: Builder, node: OnnxNode, x: Instruction, heads: int, width: int, what: str) -> Instruction:
    """A [B, T, H*width] (or [B, T, H] / [B, T, 1]) input as float32 [B, H|1, T, width|1]."""
    batch, steps, last = x.shape.dims
    x = b.convert(x, "f32")
    if last in (heads, 1):
        return b.transpose(b.reshape(x, (batch, steps, last, 1)), (0, 2, 1, 3))
    if last == heads * width:
        return b.transpose(b.reshape(x, (batch, steps, heads, width)), (0, 2, 1, 3))
    raise node.error(f"{what} last dim {last} must be {heads} or {heads * width}")
