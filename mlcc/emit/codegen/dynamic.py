"""Kernels of the data-dependent ops (flag binds_count): nonzero, unique, nms, sort-indices (templates nonzero,
unique, nms, sort_indices). Each writes its run-time count at element 0 of its result and its data after it,
never past the bound its result was planned for (mlcc/hlo/evaluator/dynamic.py says what the data means).
nonzero, unique and nms are one program: their outputs are compacted in order, which a prefix over everything
before them decides; sort-indices is a program per sorted line.
"""

from __future__ import annotations

from mlcc.emit.codegen.coords import clamp_pow2
from mlcc.emit.codegen.indexing import Ranges
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig, lowering, render, triton_pointer
from mlcc.hlo.ir import Instruction, Shape

MAX_NMS_BOXES = 16384  # one program holds every box of a batch in registers


def _static(inst: Instruction, row_major: bool = False) -> list[Shape]:
    """The operands' shapes: static, and row-major where the kernel reads by logical position (sort-indices);
    the others read through each operand's strides."""
    shapes = [o.shape for o in inst.operands]
    for s in shapes:
        if not s.is_static or (row_major and not s.is_row_major()):
            raise TypeError(f"{inst.opcode} reads static{' row-major' if row_major else ''} operands, not {s}")
    return shapes


def _widen(dtype: str) -> str:
    """Half floats compare in f32; bool loads as int1 and compares as integers."""
    return ".to(tl.float32)" if dtype in ("f16", "bf16") else (".to(tl.int32)" if dtype == "pred" else "")


def _one_program(constexprs: dict[str, int], num_warps: int = 4) -> LaunchConfig:
    return LaunchConfig(constexprs, (1, 1, 1), num_warps=num_warps, num_stages=1)


def _kernel(inst: Instruction, kernel_name: str, template: str, source: str, shapes: list[Shape],
            gpu: LaunchConfig, interpreter: LaunchConfig, flops: int) -> Kernel:
    return Kernel(kernel_name, template, source, [triton_pointer(s) for s in shapes] + [triton_pointer(inst.shape)],
                  gpu=gpu, interpreter=interpreter, flops=flops)


@lowering("nonzero")
def lower_nonzero(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    (x,) = _static(inst)
    size = x.numel()
    source = render("nonzero.py.jinja", kernel_name=kernel_name, size=size, dims=list(x.dims),
                    strides=list(x.strides()),
                    bound=inst.attrs["bound"])
    return _kernel(inst, kernel_name, "nonzero.py.jinja", source, [x],
                   _one_program({"BLOCK": clamp_pow2(size, 16, 1024)}),
                   _one_program({"BLOCK": clamp_pow2(size, 16, 65536)}), size)


@lowering("unique")
def lower_unique(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    (x,) = _static(inst)
    rows, cols = x.dims
    source = render("unique.py.jinja", kernel_name=kernel_name, rows=rows, cols=cols, row_stride=x.strides()[0],
                    col_stride=x.strides()[1], bound=inst.attrs["bound"],
                    is_sorted=bool(inst.attrs["sorted"]), widen=_widen(x.dtype))
    gpu_block, cpu_block = clamp_pow2(rows, 16, 64), clamp_pow2(rows, 16, 512)
    return _kernel(inst, kernel_name, "unique.py.jinja", source, [x],
                   _one_program({"BLOCK_I": gpu_block, "BLOCK_J": gpu_block}),
                   _one_program({"BLOCK_I": cpu_block, "BLOCK_J": cpu_block}), 2 * rows * rows * cols)


@lowering("nms")
def lower_nms(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    shapes = _static(inst)
    batch, boxes, _ = shapes[0].dims
    classes = shapes[1].dims[1]
    if boxes > MAX_NMS_BOXES:
        raise TypeError(f"nms of {boxes} boxes (at most {MAX_NMS_BOXES} in one program)")
    source = render("nms.py.jinja", kernel_name=kernel_name, batch=batch, classes=classes, boxes=boxes,
                    bound=inst.attrs["bound"], center_point_box=bool(inst.attrs["center_point_box"]),
                    bs=list(shapes[0].strides()), ss=list(shapes[1].strides()))
    block = clamp_pow2(boxes, 16, MAX_NMS_BOXES)
    return _kernel(inst, kernel_name, "nms.py.jinja", source, shapes, _one_program({"BLOCK_N": block}, 8),
                   _one_program({"BLOCK_N": block}), batch * classes * boxes * boxes * 16)


@lowering("sort-indices")
def lower_sort_indices(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    shapes = _static(inst, row_major=True)
    x = shapes[0]
    axis = inst.attrs["dimension"]
    size = x.dims[axis]
    inner = 1
    for d in x.dims[axis + 1:]:
        inner *= d
    lines = max(1, x.numel() // max(size, 1))
    source = render("sort_indices.py.jinja", kernel_name=kernel_name, size=size, inner=inner,
                    largest=bool(inst.attrs["largest"]), widen=_widen(x.dtype))
    gpu_block, cpu_block = clamp_pow2(size, 16, 64), clamp_pow2(size, 16, 1024)
    return _kernel(inst, kernel_name, "sort_indices.py.jinja", source, shapes,
                   LaunchConfig({"BLOCK_I": gpu_block, "BLOCK_J": gpu_block}, (lines, 1, 1), num_warps=4, num_stages=1),
                   LaunchConfig({"BLOCK_I": cpu_block, "BLOCK_J": cpu_block}, (lines, 1, 1), num_warps=4, num_stages=1),
                   lines * size * size)
