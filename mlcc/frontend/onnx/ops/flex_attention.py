"""FlexAttention (ai.onnx.preview): attention whose scores and probabilities pass through graph attributes.

Spelled out as the ONNX reference computes it: q and k each times sqrt(scale) in the input type, their dot,
converted to the softmax precision (f32 for half-precision inputs unless softmax_precision says otherwise);
the score_mod graph imported inline on the scores, a softmax over the keys, the prob_mod graph on the
probabilities, and their dot with v in the softmax precision, converted back. Grouped-query K/V heads are
repeated for their query heads. The attention recognizer turns the plain forms (no modifier, a soft cap, a
causal or additive mask) into the fused attention op.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from mlcc.frontend.onnx.ops.helpers import repeat_heads, require_float, scalar_op
from mlcc.frontend.onnx.registry import OnnxNode, Result, Tensor, onnx_op
from mlcc.frontend.onnx.types import ir_dtype
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction

PREVIEW_DOMAIN = "ai.onnx.preview"
SOFTMAX_PRECISIONS = ("f16", "bf16", "f32", "f64")


def _modify(b: Builder, node: OnnxNode, attr: str, x: Instruction) -> Instruction:
    """x passed through the graph attribute ``attr`` (one rank-4 input, one output of its shape and type)."""
    graph: onnx.GraphProto = node.attr(attr)
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise node.error(f"{attr} takes {len(graph.input)} inputs and gives {len(graph.output)} outputs "
                         "(one each is required)")
    assert node.ctx.import_subgraph is not None
    arg = Tensor(graph.input[0].name, x.shape.dtype, tuple(x.shape.dims), inst=x)
    (result,) = node.ctx.import_subgraph(graph, f"{node.name}/{attr}", [arg])
    if tuple(result.dims) != tuple(x.shape.dims):
        raise node.error(f"{attr} turns dims {list(x.shape.dims)} into {list(result.dims)} (it must keep them)")
    if result.dtype != x.shape.dtype:
        raise node.error(f"{attr} turns element type {x.shape.dtype} into {result.dtype} (it must keep it)")
    if result.inst is not None:
        return result.inst
    if result.value is not None:  # a modifier that ignores its input
        return b.constant(np.asarray(result.value, numpy_dtype(x.shape.dtype)))
    raise node.error(f"{attr}'s output {result.deferred or 'has no value'}")


@onnx_op("FlexAttention", since=1, domain=PREVIEW_DOMAIN)
def import_flex_attention(b: Builder, node: OnnxNode) -> list[Result]:
    q, k, v = node.input(0), node.input(1), node.input(2)
    require_float(node, q)
    if q.shape.rank != 4 or k.shape.rank != 4 or v.shape.rank != 4:
        raise node.error(f"Q, K and V must be 4-D, have dims {list(q.shape.dims)}, {list(k.shape.dims)} and "
                         f"{list(v.shape.dims)}")
    if not q.shape.dtype == k.shape.dtype == v.shape.dtype:
        raise node.error(f"Q, K and V have element types {q.shape.dtype}, {k.shape.dtype} and {v.shape.dtype}")
    batch, heads, _, head = q.shape.dims
    kv_heads, seq = k.shape.dims[1], k.shape.dims[2]
    if k.shape.dims[0] != batch or v.shape.dims[0] != batch or k.shape.dims[3] != head \
            or tuple(v.shape.dims[1:3]) != (kv_heads, seq):
        raise node.error(f"K dims {list(k.shape.dims)} and V dims {list(v.shape.dims)} do not match Q dims "
                         f"{list(q.shape.dims)} (B, H, L, E) as (B, Hkv, S, E) and (B, Hkv, S, Ev)")
    if not isinstance(heads, int) or not isinstance(kv_heads, int) or not isinstance(head, int):
        raise node.unsupported(f"symbolic head counts or head size {[heads, kv_heads, head]}")
    if kv_heads < 1 or heads % kv_heads:
        raise node.error(f"{heads} query heads are not a multiple of {kv_heads} key/value heads")
    dtype = q.shape.dtype
    if node.has_attr("softmax_precision"):
        work = ir_dtype(int(node.attr("softmax_precision")))
        if work not in SOFTMAX_PRECISIONS:
            raise node.error(f"softmax_precision {node.attr('softmax_precision')} is not a float type")
    else:
        work = "f64" if dtype == "f64" else "f32"
    scale = float(node.attr("scale", 1.0 / math.sqrt(head)))
    root = float(np.asarray(np.sqrt(np.float32(scale)), numpy_dtype(dtype)))
    k, v = repeat_heads(b, k, heads), repeat_heads(b, v, heads)
    scores = b.op("dot", [scalar_op(b, "multiply", q, root), scalar_op(b, "multiply", k, root)],
                  lhs_batch_dims=(0, 1), lhs_contracting_dims=(3,), rhs_batch_dims=(0, 1), rhs_contracting_dims=(3,))
    scores = b.convert(scores, work)
    if node.has_attr("score_mod"):
        scores = _modify(b, node, "score_mod", scores)
    probs = b.op("softmax", [scores], dimension=3)
    if node.has_attr("prob_mod"):
        probs = _modify(b, node, "prob_mod", probs)
    y = b.op("dot", [probs, b.convert(v, work)], lhs_batch_dims=(0, 1), lhs_contracting_dims=(3,),
             rhs_batch_dims=(0, 1), rhs_contracting_dims=(2,))
    return [b.convert(y, dtype)]
