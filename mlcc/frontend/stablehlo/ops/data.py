"""Data movement: broadcast, reshape, transpose, slices, concatenate, pad, reverse."""

from __future__ import annotations

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Op, as_array
from mlcc.hlo.ir import Instruction


def int_tuple(cx: Context, op: Op, key: str, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    if key not in op.attrs:
        if default is None:
            raise cx.error(op, f"missing attribute '{key}'")
        return default
    try:
        return tuple(int(v) for v in as_array(op.attrs[key]).reshape(-1))
    except (TypeError, ValueError):
        raise cx.error(op, f"attribute '{key}' must be a list of integers") from None


@stablehlo_op("stablehlo.broadcast_in_dim")
def import_broadcast_in_dim(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x,) = args
    out = cx.result_shape(op)
    dims = int_tuple(cx, op, "broadcast_dimensions")
    if len(dims) != x.shape.rank:
        raise cx.error(op, f"{len(dims)} broadcast_dimensions for an operand of rank {x.shape.rank}")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):  # the IR's broadcast keeps operand dims in order: transpose first
        x = cx.b.transpose(x, order)
        dims = tuple(dims[i] for i in order)
    if dims == tuple(range(out.rank)) and tuple(x.shape.dims) == out.dims:
        return x
    return cx.b.op("broadcast", [x], out, dimensions=dims)


@stablehlo_op("stablehlo.reshape")
def import_reshape(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.reshape(args[0], cx.result_shape(op).dims)


@stablehlo_op("stablehlo.transpose")
def import_transpose(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.transpose(args[0], int_tuple(cx, op, "permutation"))


@stablehlo_op("stablehlo.slice")
def import_slice(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x,) = args
    starts = int_tuple(cx, op, "start_indices")
    return cx.b.op("slice", [x], start_indices=starts, limit_indices=int_tuple(cx, op, "limit_indices"),
                   strides=int_tuple(cx, op, "strides", (1,) * len(starts)))


@stablehlo_op("stablehlo.dynamic_slice")
def import_dynamic_slice(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op("dynamic-slice", args, slice_sizes=int_tuple(cx, op, "slice_sizes"))


@stablehlo_op("stablehlo.dynamic_update_slice")
def import_dynamic_update_slice(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op("dynamic-update-slice", args)


@stablehlo_op("stablehlo.concatenate")
def import_concatenate(cx: Context, op: Op, args: list[Instruction]) -> Results:
    if len(args) == 1:
        return args[0]
    return cx.b.op("concatenate", args, dimension=int(op.attrs["dimension"]))


@stablehlo_op("stablehlo.pad")
def import_pad(cx: Context, op: Op, args: list[Instruction]) -> Results:
    x, value = args
    rank = x.shape.rank
    return cx.b.op("pad", [x, value], edge_padding_low=int_tuple(cx, op, "edge_padding_low"),
                   edge_padding_high=int_tuple(cx, op, "edge_padding_high"),
                   interior_padding=int_tuple(cx, op, "interior_padding", (0,) * rank))


@stablehlo_op("stablehlo.reverse")
def import_reverse(cx: Context, op: Op, args: list[Instruction]) -> Results:
    dims = int_tuple(cx, op, "dimensions")
    if not dims:
        return args[0]
    return cx.b.op("reverse", args, dimensions=dims)
