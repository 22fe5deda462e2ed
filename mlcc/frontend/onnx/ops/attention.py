"""Attention (-> the attention composite) and RotaryEmbedding (-> slices, multiplies, concatenate)."""

from __future__ import annotations

import math

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, static_dims
from mlcc.frontend.onnx.ops.shape_ops import slice_axis
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
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
    if any(node.has_input(i) for i in (4, 5, 6)):
        raise node.unsupported("past_key / past_value / nonpad_kv_seqlen inputs")
    if any(node.output_used(j) for j in (1, 2, 3)):
        raise node.unsupported("the present_key / present_value / qk_matmul_output outputs")
    if node.attr("softcap", 0.0):
        raise node.unsupported("softcap")
    if node.attr("left_window_size", -1) != -1 or node.attr("right_window_size", -1) != -1:
        raise node.unsupported("attention windows")
    q, k, v = node.input(0), node.input(1), node.input(2)
    require_float(node, q)
    three_d = q.shape.rank == 3
    if three_d:
        q = _split_heads(b, node, q, node.attr("q_num_heads", 0), "Q")
        k = _split_heads(b, node, k, node.attr("kv_num_heads", 0), "K")
        v = _split_heads(b, node, v, node.attr("kv_num_heads", 0), "V")
    if q.shape.rank != 4 or k.shape.rank != 4 or v.shape.rank != 4:
        raise node.error("Q, K and V must all be 3-D or all 4-D")
    head = q.shape.dims[-1]
    if not isinstance(head, int):
        raise node.unsupported(f"symbolic head size {head}")
    scale = node.attr("scale", 1.0 / math.sqrt(head))
    mask = node.input(3) if node.has_input(3) else None
    if mask is not None and mask.shape.dtype != "pred":
        mask = b.convert(mask, q.shape.dtype)
    causal = bool(node.attr("is_causal", 0))
    sq, sk = q.shape.dims[-2], k.shape.dims[-2]
    if causal and sq != sk:  # without a cache, ONNX aligns the causal mask top-left: query i sees keys j <= i
        mask = _top_left_causal(b, node, mask, sq, sk)
        causal = False
    y = b.op("attention", [q, k, v] + ([mask] if mask is not None else []), scale=float(scale), causal=causal)
    if three_d:
        batch, heads, seq, dv = y.shape.dims
        y = b.reshape(b.transpose(y, (0, 2, 1, 3)), (batch, seq, heads * dv))  # type: ignore[operator]
    return [y]


def _top_left_causal(b: Builder, node: OnnxNode, mask: Instruction | None, sq, sk) -> Instruction:
    sq, sk = static_dims(node, [sq, sk], "sequence lengths")
    grid = Shape("s64", (sq, sk))
    keep = b.op("compare", [b.op("iota", [], grid, iota_dimension=1), b.op("iota", [], grid, iota_dimension=0)],
                direction="LE")
    if mask is None:
        return keep
    dims = b.broadcast_shapes(mask.shape.dims, (sq, sk))
    keep = b.broadcast_to(keep, dims)
    mask = b.broadcast_to(mask, dims)
    if mask.shape.dtype == "pred":
        return b.op("and", [keep, mask])
    return b.op("select", [keep, mask, full(b, -np.inf, mask.shape.dtype, dims)])


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
