"""Kernels for reduce, argmax/argmin and cumsum (templates reduce, argreduce, scan).

Every kernel numbers its outputs with one flat index and its reduced elements
with another; both unravel into offsets through each tensor's own strides, so
any set of reduced dims under any layout is one loop over a 2-D tile
[BLOCK_O outputs, BLOCK_R reduced elements].

An input fusion (one reduction, the loop ops computing its operands, elementwise ops on its result)
is the reduction's kernel with the operand's tiles computed where they would be loaded, and the fused
root computed where the result would be stored (mlcc/emit/codegen/fused.py); its lowering is here for every
reduction kind, the row kernels' builders coming from mlcc/emit/codegen/normalization.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlcc.emit.codegen.coords import (Axis, accumulator_dtype, by_stride, clamp_pow2, highest, is_wide, kernel_dims,
                                      kernel_strides, lowest, merge_axes, numel, upper)
from mlcc.emit.codegen.indexing import NO_RANGES, Ranges, Size
from mlcc.emit.codegen.fused import (Lanes, Section, TileEmitter, epilogue, heavy_op, heavy_ops, needs_int64,
                                     packed_value, pointer_params, result_roots, sections_ir)
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, grid_size, lowering, render, scalar_params, tl_type,
                                      triton_pointer)
from mlcc.emit.codegen.normalization import ROW_KERNELS
from mlcc.emit.target.targets import GENERIC, Target
from mlcc.emit.tiling import Tiling, register_tiling
from mlcc.errors import UnsupportedError
from mlcc.hlo.blockquant import PACKED_DTYPE_BITS
from mlcc.hlo.ir import DTYPE_BYTES, Instruction, is_float
from mlcc.hlo.opcodes import REDUCE_KINDS

# a reduce kind on pred operands (loaded as 0/1 integers) -> how lanes combine in the template
_PRED_COMBINE = {"add": "maximum", "or": "maximum", "maximum": "maximum",
                 "multiply": "minimum", "and": "minimum", "minimum": "minimum", "xor": "parity"}


def _identity(combine: str, dtype: str, acc: str) -> float | int:
    if combine == "maximum":
        return lowest(dtype)
    if combine == "minimum":
        return highest(dtype)
    if combine == "multiply":
        return 1
    if combine == "and":
        return highest(acc) if acc.startswith("u") else -1
    return 0


def _row_tiles(num_out: Size, num_red: Size, interpreter: bool, ranges: Ranges) -> tuple[int, int]:
    """(BLOCK_O, BLOCK_R) for a tile of outputs by reduced elements (symbolic sizes: their largest)."""
    num_out, num_red = upper(num_out, ranges), upper(num_red, ranges)
    if interpreter:
        block_r = clamp_pow2(num_red, 1, 65536)
        budget = 65536
    else:
        block_r = clamp_pow2(num_red, 1, 1024)
        budget = 4096
    block_o = clamp_pow2(num_out, 1, max(1, budget // block_r))
    return block_o, block_r


def _row_launch(num_out: Size, num_red: Size, interpreter: bool, spec: Target = GENERIC,
                ranges: Ranges = NO_RANGES, per_byte: int = 1) -> LaunchConfig:
    """A program per BLOCK_O outputs; 256 threads for a big tile, 128 otherwise (num_warps counts spec's
    warps: 64-lane wavefronts on AMD, so half as many there). A packed result (per_byte values a byte): BLOCK_O
    a multiple of per_byte, so each program stores whole bytes; so too a result whose rows' statistics the
    kernel stores (per_byte: the partials' width), so each program holds whole partials."""
    block_o, block_r = _row_tiles(num_out, num_red, interpreter, ranges)
    if block_o < per_byte:
        block_o, block_r = per_byte, max(1, block_r * block_o // per_byte)
    threads = 256 if block_o * block_r >= 4096 else 128
    return LaunchConfig({"BLOCK_O": block_o, "BLOCK_R": block_r}, (grid_size(num_out, block_o), 1, 1),
                        num_warps=threads // spec.warp_size, num_stages=1)


def _row_problem(num_out: Size, num_red: Size, ranges: Ranges, per_byte: int = 1) -> dict:
    """What the tiles follow from: the sizes, and the ranges their symbols' bounds are over (and the values a
    byte of a packed result)."""
    problem = {"rows": num_out, "row_size": num_red, "ranges": ranges}
    if per_byte > 1:
        problem["per_byte"] = per_byte
    return problem


def _row_heuristic(problem: dict, spec: Target) -> LaunchConfig:
    return _row_launch(problem["rows"], problem["row_size"], False, spec, problem.get("ranges", NO_RANGES),
                       problem.get("per_byte", 1))


register_tiling(Tiling(heuristic=_row_heuristic), "reduce.py.jinja", "argreduce.py.jinja", "scan.py.jinja")


@lowering("reduce")
def lower_reduce(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    return reduce_kernel(inst, kernel_name, ranges, None)


def reduce_kernel(inst: Instruction, kernel_name: str, ranges: Ranges, fusion: Instruction | None) -> Kernel:
    """The kernel of reduce inst, alone or as the heavy op of an input fusion."""
    x, out = inst.operands[0].shape, (fusion or inst).shape
    if out.is_tuple:  # (the result, its rows' statistics: _row_stats_result)
        out = out.elements[0]
    packed = packed_value(fusion)
    if packed is not None:  # a 4/2-bit result stored packed: the flat index walks it row-major, a byte per lanes
        out = packed.shape
    per_byte = 8 // PACKED_DTYPE_BITS[out.dtype] if packed is not None else 1
    kind = inst.attrs["kind"]
    if kind not in REDUCE_KINDS:
        raise ValueError(f"%{inst.name}: unknown reduce kind '{kind}'")
    dims = kernel_dims(x)
    reduced = sorted(set(inst.attrs["dimensions"]))
    kept = [d for d in range(x.rank) if d not in reduced]
    xs, os = kernel_strides(x), kernel_strides(out)
    out_axes = merge_axes(by_stride([Axis(dims[d], (xs[d], os[i])) for i, d in enumerate(kept)], ranges,
                                    1 if packed is not None else 0))
    red_axes = merge_axes(by_stride([Axis(dims[d], (xs[d],)) for d in reduced], ranges))
    num_out, num_red = numel([dims[d] for d in kept]), numel([dims[d] for d in reduced])

    acc = accumulator_dtype(x.dtype)
    combine = _PRED_COMBINE[kind] if x.dtype == "pred" else kind
    if is_float(x.dtype) and combine in ("and", "or", "xor"):
        raise ValueError(f"%{inst.name}: reduce kind '{kind}' needs an integer or pred operand, not {x.dtype}")
    params, pointers = ["in0", "out0"], [triton_pointer(x), triton_pointer(out)]
    prologue = fused_epilogue = None
    wide, flops = is_wide(ranges, x), upper(num_out, ranges) * max(upper(num_red, ranges) - 1, 0)
    shapes = [x, out]
    row_stats = None
    if fusion is not None:
        params = pointer_params(fusion)
        pointers = [triton_pointer(op.shape) for op in fusion.operands] + [triton_pointer(r.shape)
                                                                           for r in result_roots(fusion)]
        row_stats = _row_stats_result(fusion, out_axes)
        wide = needs_int64(ranges, fusion, x)
        prologue, fused_epilogue, ops = _fused_sections(inst, fusion, kept, reduced, acc, wide, ranges,
                                                        os if packed is not None else None)
        flops += ops
        shapes += [op.shape for op in fusion.operands] + list(fusion.called.instructions)
    sym_params, sym_types, symbols = scalar_params(*shapes)
    params, pointers = params + sym_params, pointers + sym_types
    source = render("reduce.py.jinja", kernel_name=kernel_name, params=params, combine=combine,
                    identity=_identity(combine, x.dtype, acc), acc_type=tl_type(acc), out_type=tl_type(out.dtype),
                    is_float=is_float(x.dtype), num_out=num_out, num_red=num_red, out_axes=out_axes,
                    red_axes=red_axes, bits=8 * DTYPE_BYTES[acc], wide=wide, prologue=prologue,
                    epilogue=fused_epilogue, per_byte=per_byte, row_stats=row_stats,
                    value_bits=8 // per_byte)
    whole = per_byte if row_stats is None else max(per_byte, row_stats["part"])  # outputs a program holds together
    return Kernel(kernel_name, "reduce.py.jinja", source, pointers,
                  gpu=_row_launch(num_out, num_red, interpreter=False, ranges=ranges, per_byte=whole),
                  interpreter=_row_launch(num_out, num_red, interpreter=True, ranges=ranges, per_byte=whole),
                  flops=flops, extra={"problem": _row_problem(num_out, num_red, ranges, whole)}, scalars=symbols,
                  body_ir=sections_ir(prologue=prologue, epilogue=fused_epilogue))


def _fused_sections(inst: Instruction, fusion: Instruction, kept: list[int], reduced: list[int], acc: str,
                    wide: bool, ranges: Ranges, out_strides: Sequence[Size] | None = None
                    ) -> tuple[Section, Section, int]:
    """The operand over an [outputs, reduced elements] tile, the fused root over the outputs (the result,
    held in acc, standing for the reduce), and their flops. ``out_strides``: the outputs are numbered in
    the result's order (a packed result), not the operand's."""
    x = inst.operands[0].shape
    xs = kernel_strides(x)
    # the orders of out_axes' and red_axes' indices
    kept_order = tuple(sorted(kept, key=lambda d: -upper(xs[d], ranges)))
    if out_strides is not None:
        kept_order = tuple(sorted(kept, key=lambda d: -upper(out_strides[kept.index(d)], ranges)))
    red_order = tuple(sorted(reduced, key=lambda d: -upper(xs[d], ranges)))
    em = TileEmitter(fusion, "p_", "BLOCK_O, BLOCK_R", kernel_dims(x),
                     [Lanes("lane_o", kept_order), Lanes("lane_r", red_order)], wide, ranges)
    em.section(inst.operands[0])
    (prologue,) = em.sections()
    result_dims = tuple(kept.index(d) for d in kept_order)  # the result's dims are the kept ones
    fused_epilogue, ops = epilogue(fusion, inst, "result", acc, [Lanes("lane_o", result_dims)], "BLOCK_O", wide,
                                   ranges, packs=True)
    return prologue, fused_epilogue, (upper(x.numel_expr(), ranges) * em.ops
                                      + upper(inst.shape.numel_expr(), ranges) * ops)


def _row_stats_result(fusion: Instruction, out_axes: list[Axis]) -> dict | None:
    """A reduction's second result, the row-stats of its first (mlcc/hlo/passes/norm_statistics.py): the
    partials of PART consecutive outputs, stored at [flat row, part] (and [.., 2] for mean and M2) of the
    row-major result out1. The kernel's flat output index must be the result's row-major offset (one merged
    output axis of stride 1), so PART consecutive outputs are one partial's."""
    if not fusion.shape.is_tuple:
        return None
    roots = result_roots(fusion)
    stats = roots[-1]
    if len(roots) != 2 or stats.opcode != "row-stats" or stats.operands[0] is not roots[0] \
            or not stats.shape.is_row_major() or len(out_axes) != 1 or out_axes[0].strides[1] != 1:
        raise UnsupportedError(f"%{fusion.name}: a reduction's second result must be the row statistics of its "
                               "first, whose outputs its kernel numbers row-major")
    return {"part": int(stats.attrs["part"]), "moments": stats.attrs["moments"]}


FUSED_REDUCTIONS = {"reduce": reduce_kernel, **ROW_KERNELS}


@lowering("fusion:input")
def lower_input_fusion(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    """A reduction with the loop ops computing its operands and the elementwise ops on its result (and, a
    second result, its rows' statistics: _row_stats_result)."""
    found = heavy_ops(inst, set(FUSED_REDUCTIONS) | {"row-stats"})
    heavy = [h for h in found if h.opcode != "row-stats"]
    if len(heavy) != 1:
        heavy = [heavy_op(inst, FUSED_REDUCTIONS)]  # (raises, naming what it found)
    return FUSED_REDUCTIONS[heavy[0].opcode](heavy[0], kernel_name, ranges, inst)


@lowering("argmax", "argmin")
def lower_argreduce(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    x, out = inst.operands[0].shape, inst.shape
    dims = kernel_dims(x)
    axis = inst.attrs["dimension"]
    kept = [d for d in range(x.rank) if d != axis]
    xs, os = kernel_strides(x), kernel_strides(out)
    out_axes = merge_axes(by_stride([Axis(dims[d], (xs[d], os[i])) for i, d in enumerate(kept)], ranges))
    num_out = numel([dims[d] for d in kept])
    sym_params, sym_types, symbols = scalar_params(x, out)
    is_max = inst.opcode == "argmax"
    acc = "s32" if x.dtype == "pred" else ("f32" if x.dtype in ("f16", "bf16") else x.dtype)
    worst = lowest(x.dtype) if is_max else highest(x.dtype)
    source = render("argreduce.py.jinja", kernel_name=kernel_name, is_max=is_max,
                    select_last=bool(inst.attrs.get("select_last_index", False)),
                    is_float=is_float(x.dtype), acc_type=tl_type(acc), worst=worst,
                    num_out=num_out, size=dims[axis], stride=xs[axis], out_axes=out_axes, wide=is_wide(ranges, x),
                    sym_params=sym_params)
    return Kernel(kernel_name, "argreduce.py.jinja", source, [triton_pointer(x), triton_pointer(out)] + sym_types,
                  gpu=_row_launch(num_out, dims[axis], interpreter=False, ranges=ranges),
                  interpreter=_row_launch(num_out, dims[axis], interpreter=True, ranges=ranges),
                  flops=upper(num_out, ranges) * upper(dims[axis], ranges),
                  extra={"problem": _row_problem(num_out, dims[axis], ranges)},
                  scalars=symbols)


@lowering("cumsum")
def lower_cumsum(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    x, out = inst.operands[0].shape, inst.shape
    dims = kernel_dims(x)
    axis = inst.attrs["dimension"]
    xs, os = kernel_strides(x), kernel_strides(out)
    lines = [d for d in range(x.rank) if d != axis]
    sym_params, sym_types, symbols = scalar_params(x, out)
    line_axes = merge_axes(by_stride([Axis(dims[d], (xs[d], os[d])) for d in lines], ranges))
    num_lines = numel([dims[d] for d in lines])
    acc = accumulator_dtype(x.dtype)
    source = render("scan.py.jinja", kernel_name=kernel_name, acc_type=tl_type(acc), out_type=tl_type(out.dtype),
                    size=dims[axis], in_stride=xs[axis], out_stride=os[axis], num_lines=num_lines,
                    line_axes=line_axes, exclusive=bool(inst.attrs.get("exclusive", False)),
                    reverse=bool(inst.attrs.get("reverse", False)), wide=is_wide(ranges, x),
                    sym_params=sym_params)
    return Kernel(kernel_name, "scan.py.jinja", source, [triton_pointer(x), triton_pointer(out)] + sym_types,
                  gpu=_row_launch(num_lines, dims[axis], interpreter=False, ranges=ranges),
                  interpreter=_row_launch(num_lines, dims[axis], interpreter=True, ranges=ranges),
                  flops=upper(x.numel_expr(), ranges), extra={"problem": _row_problem(num_lines, dims[axis], ranges)},
                  scalars=symbols)
