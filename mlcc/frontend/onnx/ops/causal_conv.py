"""CausalConvWithState: a causal depthwise 1-D convolution that carries its last k - 1 inputs between calls.

The input is concatenated behind past_state (zeros without one) along the sequence and convolved with the
(channels, 1, k) weight, group = channels, no padding: for the short kernels these models use (k up to
MAX_UNROLLED_TAPS) as the sum over taps of the shifted sequence times the tap's weight (in f32, which fuses
into one loop kernel), for longer ones as a ``convolution``. Then the bias is added, the result rounded to
the input type and SiLU applied (computed in f32, as the ONNX reference does); present_state is the last
k - 1 positions of the concatenated sequence.
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.symbolic import as_sym, dim_of

ACTIVATIONS = ("none", "silu", "swish")
MAX_UNROLLED_TAPS = 8  # up to this kernel size the taps are a sum of shifted inputs (one loop kernel)


@onnx_op("CausalConvWithState", since=27)
def import_causal_conv_with_state(b: Builder, node: OnnxNode) -> list[Result]:
    x, w = node.input(0), node.input(1)
    require_float(node, x)
    activation = node.attr("activation", "none")
    if activation not in ACTIVATIONS:
        raise node.error(f"unknown activation '{activation}' (one of {', '.join(ACTIVATIONS)})")
    if x.shape.rank != 3:
        raise node.error(f"input dims {list(x.shape.dims)} are not (batch, channels, length)")
    batch, channels, length = x.shape.dims
    channels = static_dims(node, [channels], "channel count")[0]
    wdims = static_dims(node, w.shape.dims, "weight dims")
    if len(wdims) != 3 or wdims[:2] != (channels, 1) or wdims[2] < 1:
        raise node.error(f"weight dims {list(wdims)} are not ({channels}, 1, k) for {channels} channels")
    k = wdims[2]
    dtype = x.shape.dtype
    state_dims = (batch, channels, k - 1)
    if node.has_input(3):
        past = node.input(3)
        if tuple(past.shape.dims) != state_dims:
            raise node.error(f"past_state dims {list(past.shape.dims)} are not {list(state_dims)} "
                             f"(batch, channels, k - 1)")
    elif k > 1:
        past = full(b, 0, dtype, state_dims)
    padded = b.op("concatenate", [past, x], dimension=2) if k > 1 else x
    work = "f64" if dtype == "f64" else "f32"
    # one loop kernel: the sum over taps of the shifted input times the tap's weight; also the form for a
    # symbolic length, which the convolution's shape rule does not take
    if k <= MAX_UNROLLED_TAPS or not isinstance(length, int):
        y = None
        for j in range(k):
            shifted = b.op("slice", [padded], start_indices=(0, 0, j),
                           limit_indices=(batch, channels, dim_of(as_sym(length) + j)),
                           strides=(1, 1, 1))
            tap = b.reshape(b.op("slice", [w], start_indices=(0, 0, j), limit_indices=(channels, 1, j + 1),
                                 strides=(1, 1, 1)), (channels,))
            term = b.op("multiply", [b.convert(shifted, work),
                                     broadcast_in_dims(b, b.convert(tap, work), shifted.shape.dims, [1])])
            y = term if y is None else b.op("add", [y, term])
        assert y is not None
    else:
        y = b.op("convolution", [padded, w], window_strides=(1,), padding_low=(0,), padding_high=(0,),
                 rhs_dilation=(1,), feature_group_count=channels, dim_labels="bf0_oi0->bf0")
    if node.has_input(2):
        bias = node.input(2)
        if tuple(bias.shape.dims) != (channels,):
            raise node.error(f"bias dims {list(bias.shape.dims)} are not [{channels}]")
        y = b.op("add", [y, broadcast_in_dims(b, b.convert(bias, y.shape.dtype), y.shape.dims, [1])])
    y = b.convert(y, dtype)  # the reference rounds the convolution to the input type before the activation
    if activation != "none":
        wide = b.convert(y, work)
        y = b.convert(b.op("multiply", [wide, b.op("logistic", [wide])]), dtype)
    if k == 1:  # no state: an empty (batch, channels, 0)
        present: Result = (np.zeros(state_dims, numpy_dtype(dtype)) if isinstance(batch, int)
                           else full(b, 0, dtype, state_dims))
    else:
        total = as_sym(padded.shape.dims[2])
        present = b.op("slice", [padded], start_indices=(0, 0, dim_of(total - (k - 1))),
                       limit_indices=(batch, channels, dim_of(total)), strides=(1, 1, 1))
    return [y, present]
