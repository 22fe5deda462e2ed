"""The reduce-window kernel (pooling): template pool.py.jinja.

A program takes a block of outputs; each output's window is flattened over the
dims whose window is wider than 1 and walked BLOCK_W elements at a time. An
input coordinate is ``out * stride - pad_low + k * dilation``; coordinates that
fall in the padding are masked and count as the kind's identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.emit.codegen.coords import (Axis, accumulator_dtype, clamp_pow2, highest, is_wide, kernel_dims,
                                      kernel_strides, lowest, numel, upper)
from mlcc.emit.codegen.indexing import Ranges, Size
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, grid_size, lowering, render, scalar_params, tl_type,
                                      triton_pointer)
from mlcc.hlo.ir import Instruction, is_float

POOL_KINDS = ("add", "maximum", "minimum", "avg")


@dataclass(frozen=True)
class PoolDim:
    stride: int
    pad_low: int
    dilation: int
    in_size: Size
    in_stride: Size
    window_axis: int   # index among the dims with a window wider than 1, else -1
    check_low: bool    # coordinates below 0 occur (padding_low > 0)
    check_high: bool   # coordinates past the end occur (padding_high > 0)


def _launch(num_out: Size, window: int, interpreter: bool, ranges: Ranges) -> LaunchConfig:
    """Tiles for the most outputs a symbolic size allows; the grid for the size of each call."""
    most = upper(num_out, ranges)
    if interpreter:
        block_w = clamp_pow2(window, 1, 256)
        block_o = clamp_pow2(most, 1, max(1, 65536 // block_w))
    else:
        block_w = clamp_pow2(window, 1, 64)
        block_o = clamp_pow2(most, 1, max(1, 2048 // block_w))
    return LaunchConfig({"BLOCK_O": block_o, "BLOCK_W": block_w}, (grid_size(num_out, block_o), 1, 1),
                        num_warps=4, num_stages=1)


@lowering("reduce-window")
def lower_reduce_window(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    x, out = inst.operands[0].shape, inst.shape
    kind = inst.attrs["kind"]
    if kind not in POOL_KINDS:
        raise ValueError(f"%{inst.name}: unknown reduce-window kind '{kind}'")
    in_dims, out_dims = kernel_dims(x), kernel_dims(out)
    rank = x.rank
    window = tuple(inst.attrs["window_dimensions"])
    dilation = tuple(inst.attrs.get("window_dilations", (1,) * rank))
    xs, os = kernel_strides(x), kernel_strides(out)
    sym_params, sym_types, symbols = scalar_params(x, out)
    window_dims = [d for d in range(rank) if window[d] > 1]
    dims = [PoolDim(stride=inst.attrs["window_strides"][d], pad_low=inst.attrs["padding_low"][d],
                    dilation=dilation[d], in_size=in_dims[d], in_stride=xs[d],
                    window_axis=window_dims.index(d) if d in window_dims else -1,
                    check_low=inst.attrs["padding_low"][d] > 0, check_high=inst.attrs["padding_high"][d] > 0)
            for d in range(rank)]
    window_axes = [Axis(window[d], ()) for d in window_dims]
    window_size = numel(window)
    num_out = numel(out_dims)

    acc = accumulator_dtype(x.dtype) if kind in ("add", "avg") else ("f32" if x.dtype in ("f16", "bf16") else x.dtype)
    identity = {"maximum": lowest(x.dtype), "minimum": highest(x.dtype)}.get(kind, 0)
    source = render("pool.py.jinja", kernel_name=kernel_name, kind=kind, identity=identity,
                    acc_type=tl_type(acc), out_type=tl_type(out.dtype), is_float=is_float(x.dtype),
                    count_include_pad=bool(inst.attrs.get("count_include_pad", False)),
                    num_out=num_out, window_size=window_size, dims=dims, window_axes=window_axes,
                    out_axes=[Axis(out_dims[d], (os[d],)) for d in range(rank)], wide=is_wide(ranges, x, out),
                    sym_params=sym_params)
    return Kernel(kernel_name, "pool.py.jinja", source, [triton_pointer(x), triton_pointer(out)] + sym_types,
                  gpu=_launch(num_out, window_size, interpreter=False, ranges=ranges),
                  interpreter=_launch(num_out, window_size, interpreter=True, ranges=ranges),
                  flops=upper(num_out, ranges) * window_size, scalars=symbols)
