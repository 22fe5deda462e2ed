"""Kernels for softmax, layer-norm, rms-norm (row kernels) and batch-norm-inference (elementwise).

A row kernel gives each program BLOCK_ROWS rows of the normalized dims as a 2-D
tile; a row longer than BLOCK_C is walked in chunks (a pass per statistic),
one that fits is read once. Statistics are f32 (f64 for f64 inputs).

As the heavy op of an input fusion (lowered in mlcc/emit/codegen/reduction.py), a row kernel computes x, the
scale and the bias from the fusion's loop ops at each chunk's coordinates, and the fused root from
the normalized value y before storing it (mlcc/emit/codegen/fused.py).
"""

from __future__ import annotations

from typing import Callable

from mlcc.emit.codegen.coords import (Axis, by_stride, clamp_pow2, is_wide, kernel_dims, kernel_strides, merge_axes,
                                      numel, upper)
from mlcc.emit.codegen.indexing import NO_RANGES, Ranges, Size
from mlcc.emit.codegen.fused import (Lanes, Section, TileEmitter, check_root, needs_int64, packed_value, pointer_params,
                                     sections_ir)
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, grid_size, kernel_symbols, lowering, render, scalar_params,
                                      tl_type, triton_pointer)
from mlcc.emit.target.targets import GENERIC, Target
from mlcc.emit.tiling import Tiling, register_tiling
from mlcc.hlo.blockquant import PACKED_DTYPE_BITS
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import Instruction
from mlcc.hlo.passes.packed_arena import MAX_ODD_PACKED_ROW


def _compute_dtype(dtype: str) -> str:
    return "f64" if dtype == "f64" else "f32"


def _compute_type(dtype: str) -> str:
    return tl_type(_compute_dtype(dtype))


def _row_launch(num_rows: Size, row_size: Size, interpreter: bool, spec: Target = GENERIC,
                ranges: Ranges = NO_RANGES, per_byte: int = 1) -> LaunchConfig:
    """A program per BLOCK_ROWS rows; on a GPU 64 to 256 threads by tile size (num_warps counts spec's
    warps: 64-lane wavefronts on AMD, so half as many there). Symbolic sizes get the tiles of the largest
    ranges allow (a row of symbolic length that fits BLOCK_C at its longest is read once), and a
    grid the runtime evaluates."""
    rows = num_rows
    num_rows, row_size = upper(num_rows, ranges), upper(row_size, ranges)
    if interpreter:
        block_c = clamp_pow2(row_size, 1, 16384)
        block_rows = clamp_pow2(num_rows, 1, max(1, 65536 // block_c))
        warps = 4
    else:
        block_c = clamp_pow2(row_size, 1, 4096)
        block_rows = clamp_pow2(num_rows, 1, max(1, 2048 // block_c))
        tile = block_rows * block_c
        threads = 64 if tile <= 256 else (128 if tile <= 2048 else 256)
        warps = max(1, threads // spec.warp_size)
    if per_byte > 1 and row_size % per_byte:  # a packed result of odd rows: whole bytes a program
        if row_size <= MAX_ODD_PACKED_ROW:  # whole rows in one chunk
            block_c = clamp_pow2(row_size, 1, 1 << 30)
        block_rows = max(block_rows, per_byte)  # longer: chunks carry the bytes across (row_norm.py.jinja)
    return LaunchConfig({"BLOCK_ROWS": block_rows, "BLOCK_C": block_c},
                        (grid_size(rows, block_rows), 1, 1), num_warps=warps, num_stages=1)


def _row_heuristic(problem: dict, spec: Target) -> LaunchConfig:
    return _row_launch(problem["rows"], problem["row_size"], False, spec, problem.get("ranges", NO_RANGES),
                       problem.get("per_byte", 1))


register_tiling(Tiling(heuristic=_row_heuristic), "row_norm.py.jinja")


def _row_kernel(inst: Instruction, kernel_name: str, ranges: Ranges, op: str, normalized: list[int],
                epsilon: float, fusion: Instruction | None = None) -> Kernel:
    """Rows over the dims not in `normalized`; columns over `normalized`, whose params (if any) follow x."""
    x, out = inst.operands[0].shape, (fusion or inst).shape
    packed = packed_value(fusion)
    if packed is not None:  # a 4/2-bit result stored packed (rows innermost: pack-arena-values checked)
        out = packed.shape
    per_byte = 8 // PACKED_DTYPE_BITS[out.dtype] if packed is not None else 1
    dims = kernel_dims(x)
    xs, os = kernel_strides(x), kernel_strides(out)
    params = [p.shape for p in inst.operands[1:]]
    param_strides = [kernel_strides(p) for p in params]
    rows = [d for d in range(x.rank) if d not in normalized]
    row_axes = merge_axes(by_stride([Axis(dims[d], (xs[d], os[d])) for d in rows], ranges, int(packed is not None)))
    col_axes = merge_axes(Axis(dims[d], (xs[d], os[d]) + tuple(ps[j] for ps in param_strides))
                          for j, d in enumerate(normalized))
    num_rows, row_size = numel([dims[d] for d in rows]), numel([dims[d] for d in normalized])
    hint, row_hint = upper(num_rows, ranges), upper(row_size, ranges)  # tiles for the largest sizes the ranges allow
    per_element = {"softmax": 5, "log_softmax": 5, "layer_norm": 8, "rms_norm": 4}[op]
    flops = per_element * hint * row_hint
    names = ["in0", *[f"in{i + 1}" for i in range(len(params))], "out0"]
    pointers = [triton_pointer(x)] + [triton_pointer(p) for p in params] + [triton_pointer(out)]
    wide = is_wide(ranges, x)
    sections: dict[str, Section | None] = {"prologue": None, "scale": None, "bias": None, "epilogue": None}
    if fusion is not None:
        names = pointer_params(fusion)
        pointers = [triton_pointer(op.shape) for op in fusion.operands] + [triton_pointer(fusion.shape)]
        wide = needs_int64(ranges, fusion, x)
        sections, ops = _fused_sections(inst, fusion, rows, normalized, wide, ranges, os if packed is not None else None)
        flops += ops * hint * row_hint
    symbols = kernel_symbols(x, out, *params) if fusion is None else kernel_symbols(
        out, *(o.shape for o in fusion.operands), *fusion.called.instructions)
    names = names + [f"sym_{n}" for n in symbols]
    source = render("row_norm.py.jinja", kernel_name=kernel_name, params=names, op=op, num_rows=num_rows,
                    row_size=row_size, row_axes=row_axes, col_axes=col_axes, epsilon=epsilon,
                    compute_type=_compute_type(x.dtype), out_type=tl_type(out.dtype), wide=wide,
                    per_byte=per_byte, value_bits=8 // per_byte, **sections)
    problem = {"rows": num_rows, "row_size": row_size, "ranges": ranges}
    if per_byte > 1:
        problem["per_byte"] = per_byte
    return Kernel(kernel_name, "row_norm.py.jinja", source, pointers + ["i32"] * len(symbols),
                  gpu=_row_launch(num_rows, row_size, interpreter=False, ranges=ranges, per_byte=per_byte),
                  interpreter=_row_launch(num_rows, row_size, interpreter=True, ranges=ranges, per_byte=per_byte),
                  flops=flops, extra={"problem": problem}, scalars=symbols,
                  body_ir=sections_ir(**sections))


def _fused_sections(inst: Instruction, fusion: Instruction, rows: list[int], normalized: list[int],
                    wide: bool, ranges: Ranges, out_strides: tuple[Size, ...] | None = None
                    ) -> tuple[dict[str, Section | None], int]:
    """x, the scale and the bias at a chunk's lanes (rows by columns), then the fused root from y (the value
    a packed root packs; its rows numbered in the result's order, ``out_strides``)."""
    x = inst.operands[0].shape
    xs = out_strides or kernel_strides(x)
    row_order = tuple(sorted(rows, key=lambda d: -upper(xs[d], ranges)))  # the order of row_axes' flat index
    em = TileEmitter(fusion, "f_", "BLOCK_ROWS, BLOCK_C", kernel_dims(x),
                     [Lanes("lane_rows", row_order), Lanes("lane_c", tuple(normalized))], wide, ranges)
    em.section(inst.operands[0])
    for param in inst.operands[1:]:  # the scale and the bias, at the columns only
        em.section(param, tuple(em.coords[d] for d in normalized), mask="mask_c")
    root = check_root(fusion, inst, packs=True)
    em.bind(inst, "y", _compute_dtype(x.dtype))
    em.section(root)
    prologue, *params, fused_epilogue = em.sections()
    sections = {"prologue": prologue, "scale": None, "bias": None, "epilogue": fused_epilogue}
    sections.update(zip(("scale", "bias"), params))
    return sections, em.ops


@lowering("softmax")
def lower_softmax(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    return softmax_kernel(inst, kernel_name, ranges)


def softmax_kernel(inst: Instruction, kernel_name: str, ranges: Ranges, fusion: Instruction | None = None) -> Kernel:
    op = "log_softmax" if inst.attrs.get("log", False) else "softmax"
    return _row_kernel(inst, kernel_name, ranges, op, [inst.attrs["dimension"]], 0.0, fusion)


def _normalized_dims(inst: Instruction) -> list[int]:
    dims = sorted(inst.attrs["dimensions"])
    scale = inst.operands[1].shape
    if [inst.operands[0].shape.dims[d] for d in dims] != list(scale.dims):
        raise ValueError(f"%{inst.name}: scale {scale} does not have the normalized dims' shape")
    return dims


def _plain_norm(inst: Instruction) -> None:
    """A norm reading precomputed row statistics (its last operand) is applied only in a GEMM's A loads."""
    if len(inst.operands) > (3 if inst.opcode == "layer-norm" else 2):
        raise UnsupportedError(f"%{inst.name}: a {inst.opcode} of precomputed row statistics is applied only as "
                               "a GEMM loads its A tiles (mlcc/hlo/passes/norm_statistics.py)")


@lowering("row-stats")
def lower_row_stats(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    """A row-stats on its own (templates/row_stats.py.jinja): static, row-major rows."""
    x = inst.operands[0].shape
    if not x.is_static or not x.is_row_major() or not inst.shape.is_row_major():
        raise UnsupportedError(f"%{inst.name}: row statistics of static row-major rows only, not {x}")
    row, part = int(x.dims[-1]), int(inst.attrs["part"])
    num_rows = x.numel() // max(row, 1)
    block_part = clamp_pow2(part, 1, 1 << 16)
    configs = [LaunchConfig({"BLOCK_ROWS": clamp_pow2(num_rows, 1, max(1, budget // block_part))},
                            (grid_size(num_rows, clamp_pow2(num_rows, 1, max(1, budget // block_part))), 1, 1),
                            num_warps=4, num_stages=1) for budget in (2048, 65536)]
    source = render("row_stats.py.jinja", kernel_name=kernel_name, num_rows=num_rows, row_size=row, part=part,
                    parts=row // part, block_part=block_part, moments=inst.attrs["moments"],
                    wide=is_wide(ranges, x))
    return Kernel(kernel_name, "row_stats.py.jinja", source, [triton_pointer(x), triton_pointer(inst.shape)],
                  gpu=configs[0], interpreter=configs[1], flops=3 * x.numel())


@lowering("layer-norm")
def lower_layer_norm(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    _plain_norm(inst)
    return layer_norm_kernel(inst, kernel_name, ranges)


def layer_norm_kernel(inst: Instruction, kernel_name: str, ranges: Ranges,
                      fusion: Instruction | None = None) -> Kernel:
    return _row_kernel(inst, kernel_name, ranges, "layer_norm", _normalized_dims(inst), float(inst.attrs["epsilon"]),
                       fusion)


@lowering("rms-norm")
def lower_rms_norm(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    _plain_norm(inst)
    return rms_norm_kernel(inst, kernel_name, ranges)


def rms_norm_kernel(inst: Instruction, kernel_name: str, ranges: Ranges,
                    fusion: Instruction | None = None) -> Kernel:
    return _row_kernel(inst, kernel_name, ranges, "rms_norm", _normalized_dims(inst), float(inst.attrs["epsilon"]),
                       fusion)


# the row kernels an input fusion's reduction may be (lowered in mlcc/emit/codegen/reduction.py)
RowKernel = Callable[[Instruction, str, Ranges, Instruction | None], Kernel]
ROW_KERNELS: dict[str, RowKernel] = {"softmax": softmax_kernel, "layer-norm": layer_norm_kernel,
                                     "rms-norm": rms_norm_kernel}


@lowering("batch-norm-inference")
def lower_batch_norm_inference(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    x, out = inst.operands[0].shape, inst.shape
    dims = kernel_dims(x)
    feature = inst.attrs["feature_index"]
    xs, os = kernel_strides(x), kernel_strides(out)
    param_strides = [kernel_strides(p.shape)[0] for p in inst.operands[1:]]
    axes = merge_axes(Axis(dims[d], (xs[d], os[d]) + tuple(ps if d == feature else 0 for ps in param_strides))
                      for d in range(x.rank))
    n = numel(dims)
    sym_params, sym_types, symbols = scalar_params(x, out)
    source = render("batch_norm.py.jinja", kernel_name=kernel_name, numel=n, axes=axes,
                    epsilon=float(inst.attrs["epsilon"]), compute_type=_compute_type(x.dtype),
                    out_type=tl_type(out.dtype), wide=is_wide(ranges, x), sym_params=sym_params)

    def launch(block: int) -> LaunchConfig:
        return LaunchConfig({"BLOCK": block}, (grid_size(n, block), 1, 1), num_warps=4, num_stages=1)

    most = upper(n, ranges)
    return Kernel(kernel_name, "batch_norm.py.jinja", source, [triton_pointer(op.shape) for op in inst.operands]
                  + [triton_pointer(out)] + sym_types, gpu=launch(clamp_pow2(most, 16, 1024)),
                  interpreter=launch(clamp_pow2(most, 16, 1 << 17)), flops=4 * most, scalars=symbols)
