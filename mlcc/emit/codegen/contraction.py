"""Kernels for dot (general dot_general) and convolution (implicit GEMM): templates matmul and conv.

Both are one tiled matmul: a program computes a BLOCK_M x BLOCK_N tile of a
[M, K] x [K, N] product, with M, N and K each a flat index over several dims
that unravels into offsets through every operand's own strides. So a transposed
operand, a non-default layout or a batch dim in the middle costs no copy.
Grouped convolutions run one matmul per group (grid axis 1), except when a group
has fewer than 16 output features (depthwise): then grouped_conv.py.jinja
multiplies and sums without a matmul unit, many groups per program.
Floats accumulate in f32 (f64 for f64) with tl.dot, exact fp32 ("ieee") for f32
inputs; integers multiply and sum in 32 or 64 bits. Triton's interpreter stores
bf16 as raw uint16 bits and its tl.dot multiplies those bits, so bf16 kernels
take a DOT_F32 constexpr: 0 on GPUs, 1 in the interpreter config, where the
operands are widened to f32 first (bf16 products are exact in f32).

An output fusion (a contraction plus an elementwise epilogue: bias, activation, residual, scale, cast)
is the same kernel with the fused root evaluated on the accumulator tile before the store
(mlcc/emit/codegen/fused.py); its operands are the fusion's parameters, read as they are. Two more shapes of
output fusion (mlcc/hlo/passes/fusion.py):
- two convolutions at the same output coordinates: conv.py.jinja runs a K loop per convolution, each
  into its own accumulator (acc, acc_1), and the epilogue combines them (a ResNet shortcut added to the
  main path): the second result never reaches memory;
- a dot whose weight (rhs) is computed from constants (a packed 4-bit weight's unpack, zero point and scale
  per block): matmul.py.jinja computes each [BLOCK_K, BLOCK_N] B tile from the packed bytes as it loads it
  (templates/_weight_tile.jinja), so the dequantized weight never reaches memory;
- a dot followed by a layer-norm or rms-norm of its output rows (the norm's dims are the dot's rhs free
  dims): one tile spans all columns (BLOCK_N >= N, a single tile of them), so matmul.py.jinja computes
  the norm's input from the accumulator, the row statistics with a reduction over the tile's columns,
  and the rest of the epilogue from the normalized value, as row_norm.py.jinja would.

The tiles, warps and stages of both templates, per GPU target, are chosen in mlcc/emit/matmul_tiles.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.emit.codegen.activation_stats import activation_stats, stats_pass
from mlcc.emit.codegen.coords import (Axis, accumulator_dtype, by_stride, clamp_pow2, is_wide, kernel_dims,
                                      kernel_strides, merge_axes, numel, static_dims, strides, upper)
from mlcc.emit.codegen.fused import (FusedOperand, Lanes, Section, TileEmitter, check_root, epilogue, heavy_ops,
                                     needs_int64, packed_value, pointer_params, read_as_is, result_roots, sections_ir)
from mlcc.emit.codegen.indexing import NO_RANGES, Ranges, Size, size
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, cdiv, grid_size, kernel_symbols, lowering, render, tl_type,
                                      triton_pointer)
from mlcc.emit.codegen.narrow import decode_float
from mlcc.emit.codegen.triton_types import TL_FP8
from mlcc.emit.matmul_tiles import FP8, HALF, INT8, MIN_DOT_TILE, matmul_launch, matmul_problem, uses_tl_dot
from mlcc.errors import UnsupportedError
from mlcc.hlo.blockquant import PACKED_DTYPE_BITS
from mlcc.hlo.passes.a_prologue import MAX_NORM_ROW
from mlcc.hlo.passes.norm_statistics import plain_arity
from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.shape_inference import conv_dim_labels

ROW_NORMS = ops_with("row_norm")
PICKS = ("gather", "slice")  # a dot's lhs rows read in place through these (mlcc/hlo/passes/a_prologue.py)
CONTRACTIONS = ops_with("contraction")


def _acc_dtype(dtype: str) -> str:
    if dtype in INT8:
        return "s32"  # 8-bit integers (quantized contractions) accumulate in int32 on the tensor cores
    return "f32" if dtype in HALF + FP8 else accumulator_dtype(dtype)


def _through_f32(operand: str, out: str) -> bool:
    """Whether a plain dot's integer sum becomes bf16 through f32 as it is stored: Triton's interpreter keeps
    bf16 as raw uint16 bits and turns an integer straight into those bits (f32 holds a sum below 2**24 in
    magnitude exactly, so it is rounded once)."""
    return _acc_dtype(operand) in ("s32", "s64") and out == "bf16"


def _precision(dtype: str, rhs: str | None = None) -> dict:
    rhs = dtype if rhs is None else rhs
    int8 = {"shift_a": dtype == "u8", "shift_b": rhs == "u8"} if dtype in INT8 and rhs in INT8 else None
    # fp8 (templates/_fp8_dot.jinja): the statements that decode the a, b (and b_1) tiles' bits to f32 values,
    # for targets without fp8 tensor cores, and the Triton fp8 types the tiles are to the tensor cores
    fp8 = {**{v: decode_float(f"{v}_f", v, t) for v, t in (("a", dtype), ("b", rhs), ("b_1", rhs))},
           "a_type": TL_FP8[dtype], "b_type": TL_FP8[rhs]} if dtype in FP8 and rhs in FP8 else None
    return {"use_dot": uses_tl_dot(dtype), "ieee": dtype in ("f32", "f64"), "bf16_dot": dtype == "bf16",
            "int8_dot": int8, "fp8_dot": fp8, "acc_type": tl_type(_acc_dtype(dtype))}


@dataclass(frozen=True)
class Second:
    """A second convolution of an output fusion, at the same output coordinates: its operands, read as
    they are, and the accumulator variable standing for it in the epilogue."""
    contraction: Instruction
    lhs: FusedOperand
    rhs: FusedOperand
    acc: str = "acc_1"
    weight: Instruction | None = None  # a second dot's rhs when computed in its B-tile loads (both dots' are)


@dataclass(frozen=True)
class Operands:
    """Where a contraction kernel reads and writes: its two operands, its result and every pointer param."""
    contraction: Instruction    # the dot or convolution
    lhs: FusedOperand
    rhs: FusedOperand
    out: Shape
    inputs: tuple[Shape, ...]   # every input pointer's shape, in order (a fusion's operands)
    fusion: Instruction | None  # the output fusion whose root is the epilogue, if any
    ranges: Ranges              # the symbols' ranges (Module.symbols) its size decisions are over
    second: Second | None = None      # a second convolution summed (or otherwise combined) in the epilogue
    norm: Instruction | None = None   # a layer-norm or rms-norm of the dot's output rows, in the epilogue
    weight: Instruction | None = None  # the dot's rhs when computed in its B-tile loads (a weight prologue)
    lhs_norm: Instruction | None = None  # a row norm the dot applies to its A tiles as it loads them

    @staticmethod
    def of(inst: Instruction, ranges: Ranges) -> Operands:
        """A contraction alone, or the one (or two convolutions) in an output fusion."""
        if inst.opcode != "fusion":
            lhs, rhs = (op.shape for op in inst.operands)
            return Operands(inst, FusedOperand(0, lhs), FusedOperand(1, rhs), inst.shape, (lhs, rhs), None,
                            ranges)
        # a dot's activation min and max (reduce) are computed in its first pass (activation_stats.py)
        # and its rows' statistics, a second result (row-stats), in its epilogue (_row_stats_result)
        found = [h for h in heavy_ops(inst, CONTRACTIONS | ROW_NORMS | {"reduce", "row-stats"})
                 if h.opcode not in ("reduce", "row-stats")]
        contractions = [h for h in found if h.opcode in CONTRACTIONS]
        norms = [h for h in found if h.opcode in ROW_NORMS]
        lhs_norm = next((h for h in norms if h is _below_views(contractions[0].operands[0])), None) \
            if contractions else None
        norms = [h for h in norms if h is not lhs_norm]
        heavy, second = _output_fusion_heavies(inst, contractions, norms)
        weight = _computed_weight(heavy)
        if lhs_norm is None and heavy.opcode == "dot" and _below_views(heavy.operands[0]).opcode in PICKS + ("convert",):
            lhs_norm = heavy.operands[0]  # rows gathered or sliced in place (or quantized) as the A tiles load
        lhs = read_as_is(heavy.operands[0], inst) if lhs_norm is None else FusedOperand(-1, heavy.operands[0].shape)
        rhs = read_as_is(heavy.operands[1], inst) if weight is None else FusedOperand(-1, weight.shape)
        extra = None
        # a gated pair's second dot on the lhs the A loads normalize: it multiplies the same normalized A tile
        twin = second is not None and second.opcode == "dot" and second.operands[0] is heavy.operands[0] \
            and lhs_norm is not None and lhs_norm.opcode in ROW_NORMS
        if second is not None:
            weight_1 = _computed_weight(second) if weight is not None else None
            rhs_1 = read_as_is(second.operands[1], inst) if weight_1 is None else FusedOperand(-1, weight_1.shape)
            lhs_1 = lhs if twin else read_as_is(second.operands[0], inst)
            extra = Second(second, lhs_1, rhs_1, weight=weight_1)
        if lhs_norm is not None and (extra is not None and not twin
                                     or norms and _below_views(lhs_norm).opcode != "convert"
                                     or weight is not None and lhs_norm.opcode not in ROW_NORMS):
            raise UnsupportedError(f"%{inst.name}: a dot normalizing its A tiles holds no second accumulator "
                                   "(but a gated twin on the same lhs) or epilogue norm (only a quantizing one "
                                   "does), and one reading gathered rows or quantizing them no weight prologue")
        # the fusion's result as laid out outside it; a second one (row statistics) _row_stats_result's code stores
        out = inst.shape.elements[0] if inst.shape.is_tuple else inst.shape
        return Operands(heavy, lhs, rhs, out, tuple(op.shape for op in inst.operands), inst, ranges,
                        extra, norms[0] if norms else None, weight, lhs_norm)

    def template_args(self) -> dict:
        params = ["in0", "in1", "out0"] if self.fusion is None else pointer_params(self.fusion)
        return {"params": params + [f"sym_{s}" for s in self.symbols()],
                "lhs": self.lhs.ptr if self.lhs_norm is None else None,
                "rhs": self.rhs.ptr if self.weight is None else None}

    def pointers(self) -> list[str]:
        """The kernel's argument types: the pointers (a result each, several for a dot storing its rows'
        statistics too), then an i32 per symbol."""
        outs = list(self.fusion.shape.elements) if self.fusion is not None and self.fusion.shape.is_tuple \
            else [self.out]
        return [triton_pointer(s) for s in self.inputs] + [triton_pointer(s) for s in outs] \
            + ["i32"] * len(self.symbols())

    def symbols(self) -> list[str]:
        """The symbols whose values the kernel takes at run time."""
        inner = list(self.fusion.called.instructions) if self.fusion is not None else []
        return kernel_symbols(self.lhs.shape, self.rhs.shape, self.out, *self.inputs, *inner)

    def wide(self) -> bool:
        shapes = (self.lhs.shape, self.rhs.shape, self.out, *self.inputs)
        return is_wide(self.ranges, *shapes) if self.fusion is None else needs_int64(self.ranges, self.fusion,
                                                                                     *shapes)

    def epilogue(self, lanes: list[Lanes], packs: bool = False) -> tuple[Section | None, int]:
        """The fused root over the [BLOCK_M, BLOCK_N] accumulator tile (none for a plain contraction; with
        ``packs``, the 4/2-bit value a packed root packs)."""
        if self.fusion is None:
            return None, 0
        acc = _acc_dtype(self.lhs.shape.dtype)
        bound = [] if self.second is None else [(self.second.contraction, self.second.acc)]
        section, ops = epilogue(self.fusion, self.contraction, "acc", acc, lanes, "BLOCK_M, BLOCK_N", self.wide(),
                                self.ranges, bound, activation_stats(self.fusion), packs=packs)
        return section, ops * upper(self.out.numel_expr(), self.ranges)


def _below_views(x: Instruction) -> Instruction:
    while x.opcode == "bitcast":
        x = x.operands[0]
    return x


def _lhs_norm_section(io: Operands, k: int) -> dict | None:
    """The row norm the dot applies to its A tiles (mlcc/hlo/passes/fusion.py's norm_prologue_chain): the
    norm's input over a [BLOCK_M, BLOCK_K] tile that spans whole rows (lane_am the flat row, lane_ak the
    column, mask_a the lanes in bounds), its scale and bias over the columns (mask_ka); the template
    computes the row statistics and the normalized A tile from them, as row_norm.py.jinja would. Rows longer
    than MAX_NORM_ROW ("two_pass") span several K tiles: the template's statistics loop over them comes first
    (templates/_norm_prologue.jinja's row_stats), then the K loop normalizes each tile as it loads it."""
    norm = io.lhs_norm
    if norm is None:
        return None
    fusion = io.fusion
    if norm.opcode not in ROW_NORMS:
        return _picked_rows_section(io)
    rank = norm.shape.rank
    if list(norm.attrs["dimensions"]) != [rank - 1] or int(norm.shape.dims[-1]) != k:
        raise UnsupportedError(f"%{fusion.name}: the %{norm.name} ({norm.opcode}) in the dot's A loads must "
                               f"normalize rows of the {k} contracted elements")
    compute = "f32"
    lanes = [Lanes("lane_am", tuple(range(rank - 1))), Lanes("lane_ak", (rank - 1,))]
    em = TileEmitter(fusion, "p_", "BLOCK_M, BLOCK_K", kernel_dims(norm.shape), lanes, io.wide(), io.ranges)
    em.section(norm.operands[0], mask="mask_a")
    plain = plain_arity(norm)
    for param in norm.operands[1:plain]:
        em.section(param, (em.coords[rank - 1],), mask="mask_ka")
    x, *params = em.sections()
    stats = None
    if len(norm.operands) > plain:  # partials the producer of x stored (mlcc/hlo/passes/norm_statistics.py)
        source = norm.operands[plain]
        if source.opcode != "parameter" or not source.shape.is_row_major() or k <= MAX_NORM_ROW:
            raise UnsupportedError(f"%{fusion.name}: the %{norm.name}'s row statistics must be a row-major "
                                   "parameter of a row longer than a K tile")
        parts = int(source.shape.dims[rank - 1])
        stats = {"ptr": f"in{source.attrs['index']}", "parts": parts, "block": clamp_pow2(parts, 1, 1 << 16),
                 "part": k // parts}
    return {"op": "layer_norm" if norm.opcode == "layer-norm" else "rms_norm", "x": x, "scale": params[0],
            "bias": params[1] if len(params) > 1 else None, "epsilon": float(norm.attrs["epsilon"]),
            "compute_type": tl_type(compute), "sqrt": "tl.sqrt_rn", "a_type": tl_type(norm.shape.dtype),
            "two_pass": k > MAX_NORM_ROW, "stats": stats, "ops": em.ops + (8 if norm.opcode == "layer-norm" else 4)}


def _picked_rows_section(io: Operands) -> dict:
    """The dot's lhs over a [BLOCK_M, BLOCK_K] A tile when it is rows gathered or sliced from a fusion
    parameter (lane_am the flat lhs free dims, lane_ak the contracting dim, mask_a the lanes in bounds)."""
    dot, fusion = io.contraction, io.fusion
    lc = list(dot.attrs["lhs_contracting_dims"])
    lhs = dot.operands[0]
    if dot.attrs["lhs_batch_dims"] or len(lc) != 1:
        raise UnsupportedError(f"%{fusion.name}: a dot reading its rows through a gather needs no batch dims and "
                               "one contracting dim")
    lf = [d for d in range(lhs.shape.rank) if d not in lc]
    lanes = [Lanes("lane_am", tuple(lf)), Lanes("lane_ak", tuple(lc))]
    em = TileEmitter(fusion, "p_", "BLOCK_M, BLOCK_K", kernel_dims(lhs.shape), lanes, io.wide(), io.ranges)
    em.bind_scalars(activation_stats(fusion))
    em.section(lhs, mask="mask_a")
    (x,) = em.sections()
    return {"op": "rows", "x": x, "a_type": tl_type(lhs.shape.dtype), "ops": em.ops, "stats": stats_pass(fusion)}


def _computed_weight(dot: Instruction) -> Instruction | None:
    """The dot's rhs when the fusion computes it (a weight prologue: mlcc/hlo/passes/fusion.py), else None."""
    if dot.opcode != "dot":
        return None
    x = dot.operands[1]
    while x.opcode == "bitcast":
        x = x.operands[0]
    return None if x.opcode == "parameter" else dot.operands[1]


def _weight_section(io: Operands, rb: list[int], rf: list[int], rc: list[int], weight: Instruction | None = None,
                    prefix: str = "w_") -> tuple[Section | None, int]:
    """The dot's weight operand over a [BLOCK_K, BLOCK_N] B tile, computed from the fusion's parameters
    (packed bytes, scales, zero points) at the tile's coordinates: pid_b numbers the batch dims (split-K's
    slices) as the program's batch element, lane_wk the contracting dim, lane_wn the rhs free dims
    row-major (as offs_k and offs_n do), mask_w the lanes in bounds."""
    weight = io.weight if weight is None else weight
    if weight is None:
        return None, 0
    if len(rc) != 1:
        raise UnsupportedError(f"%{io.fusion.name}: a dot computing its weight in its loads needs one contracting "
                               "dim")
    lanes = [Lanes("pid_b", tuple(rb), per_lane=False), Lanes("lane_wk", (rc[0],)), Lanes("lane_wn", tuple(rf))]
    em = TileEmitter(io.fusion, prefix, "BLOCK_K, BLOCK_N", kernel_dims(weight.shape), lanes, io.wide(), io.ranges)
    em.section(weight, mask="mask_w")
    (section,) = em.sections()
    return section, em.ops


def _output_fusion_heavies(fusion: Instruction, contractions: list[Instruction],
                           norms: list[Instruction]) -> tuple[Instruction, Instruction | None]:
    """The contraction of an output fusion and the second convolution sharing its tile, if any; the
    fusion pass only forms two convolutions at one output, or one dot with a row norm after it."""
    def bad(why: str) -> UnsupportedError:
        return UnsupportedError(f"%{fusion.name}: an output fusion {why}")
    if not contractions or len(contractions) > 2 or len(norms) > 1:
        raise bad(f"needs one contraction (or two convolutions) and at most one row norm, found "
                  f"{', '.join(h.opcode for h in contractions + norms) or 'none'}")
    heavy = contractions[0]
    second = contractions[1] if len(contractions) == 2 else None
    if second is not None and heavy.opcode == "dot" and second.opcode == "dot":
        if norms or second.operands[0] is not heavy.operands[0] or second.attrs != heavy.attrs \
                or second.operands[1].shape != heavy.operands[1].shape or second.shape != heavy.shape:
            raise bad("with two dots needs them on one lhs, with weights and results alike, without a row norm")
    elif second is not None:
        if norms or heavy.opcode != "convolution" or second.opcode != "convolution":
            raise bad("shares its output tile between two convolutions only, without a row norm")
        if tuple(heavy.shape.dims) != tuple(second.shape.dims) or heavy.shape.dtype != second.shape.dtype:
            raise bad(f"with two convolutions needs them at the same output: {heavy.shape} and {second.shape}")
        if heavy.attrs["feature_group_count"] != 1 or second.attrs["feature_group_count"] != 1:
            raise bad("with two convolutions cannot group them")
        if heavy.operands[0].shape.dtype != second.operands[0].shape.dtype:
            raise bad("with two convolutions needs them on one input type")
        if heavy.operands[1].shape.dtype != second.operands[1].shape.dtype:
            raise bad("with two convolutions needs them on one weight type")
        if conv_dim_labels(heavy.attrs["dim_labels"])[2] != conv_dim_labels(second.attrs["dim_labels"])[2]:
            raise bad("with two convolutions needs their outputs labelled alike")
    if norms and heavy.opcode != "dot":
        raise bad(f"normalizes rows only after a dot, not a {heavy.opcode}")
    return heavy, second


@lowering("dot", "convolution", "fusion:output")
def lower_contraction(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    """A dot or a convolution, alone or with its elementwise epilogue (an output fusion)."""
    io = Operands.of(inst, ranges)
    build = dot_kernel if io.contraction.opcode == "dot" else convolution_kernel
    return build(io, kernel_name)


def dot_kernel(io: Operands, kernel_name: str) -> Kernel:
    inst = io.contraction
    lhs, rhs, out = io.lhs.shape, io.rhs.shape, io.out
    ld, rd = kernel_dims(lhs), kernel_dims(rhs)
    lb, lc = list(inst.attrs["lhs_batch_dims"]), list(inst.attrs["lhs_contracting_dims"])
    rb, rc = list(inst.attrs["rhs_batch_dims"]), list(inst.attrs["rhs_contracting_dims"])
    lf = [d for d in range(lhs.rank) if d not in lb + lc]
    rf = [d for d in range(rhs.rank) if d not in rb + rc]
    packed = packed_value(io.fusion) if io.norm is None and io.second is None else None
    if packed is not None:  # a 4/2-bit result stored packed: its row-major values (pack-arena-values: N % per_byte == 0)
        out = packed.shape
    ls, rs, os = kernel_strides(lhs), kernel_strides(rhs), kernel_strides(out)
    nb, nlf = len(lb), len(lf)
    batch_axes = merge_axes(Axis(ld[a], (ls[a], rs[b], os[i])) for i, (a, b) in enumerate(zip(lb, rb)))
    m_axes = merge_axes(Axis(ld[d], (ls[d], os[nb + j])) for j, d in enumerate(lf))
    n_axes = merge_axes(Axis(rd[d], (rs[d], os[nb + nlf + j])) for j, d in enumerate(rf))
    k_axes = merge_axes(by_stride([Axis(ld[a], (ls[a], rs[b])) for a, b in zip(lc, rc)], io.ranges))
    m, n, k = numel([ld[d] for d in lf]), numel([rd[d] for d in rf]), numel([ld[d] for d in lc])
    batch = numel([ld[d] for d in lb])
    # the output's dims: batch (one element per program, grid axis 1), then lhs free (rows), rhs free (cols)
    lanes = [Lanes("pid_b", tuple(range(nb)), per_lane=False), Lanes("lane_m", tuple(range(nb, nb + nlf))),
             Lanes("lane_n", tuple(range(nb + nlf, out.rank)))]
    if io.norm is None:
        fused, fused_flops = io.epilogue(lanes, packed is not None)
        norm = None
    else:
        norm, fused, fused_flops = _norm_epilogue(io, lanes, list(range(nb + nlf, out.rank)))

    row_stats = _row_stats_result(io, rf)
    weight, weight_ops = _weight_section(io, rb, rf, rc)
    a_norm = _lhs_norm_section(io, k)
    whole_k = a_norm is not None and a_norm["op"] != "rows" and not a_norm["two_pass"]
    weight_1, weight_1_ops = (None, 0) if io.second is None or io.second.weight is None else \
        _weight_section(io, rb, rf, rc, io.second.weight, "w1_")  # a gated MLP's second dequantized weight
    weight_flops = (weight_ops + weight_1_ops) * upper(k, io.ranges) * upper(n, io.ranges)  # per row of tiles
    # a second dot of the same lhs (a gated MLP's gate next to its up projection): its weights read at the
    # same offsets, into acc_1
    rhs_1 = io.second.rhs.ptr if io.second is not None else None
    source = render("matmul.py.jinja", kernel_name=kernel_name, m=m, n=n, k=k, batch=batch,
                    batch_axes=batch_axes, m_axes=m_axes, n_axes=n_axes, k_axes=k_axes,
                    out_type=tl_type(out.dtype), wide=io.wide(), epilogue=fused, norm=norm, rhs_1=rhs_1,
                    through_f32=_through_f32(io.lhs.shape.dtype, out.dtype),
                    per_byte=8 // PACKED_DTYPE_BITS[out.dtype] if packed is not None else 1,
                    **io.template_args(), weight=weight, weight_1=weight_1, weight_type=tl_type(rhs.dtype), a_norm=a_norm,
                    row_stats=row_stats,
                    **_precision(lhs.dtype, rhs.dtype))
    whole_rows = norm is not None or (packed is not None and n % (8 // PACKED_DTYPE_BITS[out.dtype]) != 0)
    min_block_n = row_stats["part"] if row_stats is not None else 0
    return Kernel(kernel_name, "matmul.py.jinja", source, io.pointers(),
                  gpu=matmul_launch(m, n, k, batch, lhs.dtype, interpreter=False, whole_rows=whole_rows,
                                    ranges=io.ranges, weight_prologue=weight is not None, whole_k=whole_k,
                                    rhs_dtype=rhs.dtype, min_block_n=min_block_n),
                  interpreter=matmul_launch(m, n, k, batch, lhs.dtype, interpreter=True, whole_rows=whole_rows,
                                            ranges=io.ranges, weight_prologue=weight is not None, whole_k=whole_k,
                                            rhs_dtype=rhs.dtype, min_block_n=min_block_n),
                  flops=(2 if rhs_1 is None else 4) * upper(batch, io.ranges) * upper(m, io.ranges)
                  * upper(n, io.ranges) * upper(k, io.ranges) + fused_flops + weight_flops
                  + (a_norm["ops"] * upper(m, io.ranges) * upper(k, io.ranges) if a_norm else 0),
                  extra={"problem": matmul_problem(m, n, k, batch, lhs.dtype, whole_rows, io.ranges,
                                                   weight is not None, whole_k, rhs.dtype, min_block_n)},
                  scalars=io.symbols(),
                  body_ir=sections_ir(weight=weight, weight_1=weight_1, epilogue=fused,
                                      **({"a_norm": a_norm["x"]} if a_norm else {})))


def _row_stats_result(io: Operands, rf: list[int]) -> dict | None:
    """A dot's second result, the row-stats of its first (mlcc/hlo/passes/norm_statistics.py): each tile's
    partials of its rows' statistics, PART columns each (BLOCK_N a multiple of PART: min_block_n), stored
    at [flat row, part] (and [.., 2] for mean and M2) of the row-major result out1."""
    fusion = io.fusion
    if fusion is None or not fusion.shape.is_tuple:
        return None
    roots = result_roots(fusion)
    stats = roots[-1]
    if len(roots) != 2 or stats.opcode != "row-stats" or stats.operands[0] is not roots[0] or len(rf) != 1 \
            or io.norm is not None or not stats.shape.is_row_major() or io.contraction.attrs["lhs_batch_dims"]:
        raise UnsupportedError(f"%{fusion.name}: a dot's second result must be the row statistics of its first, "
                               "over its one output column dim, without an epilogue norm or batch dims")
    part = int(stats.attrs["part"])
    return {"part": part, "parts": int(roots[0].shape.dims[-1]) // part, "moments": stats.attrs["moments"],
            "ptr": "out1"}


def _norm_epilogue(io: Operands, lanes: list[Lanes], columns: list[int],
                   tile: str = "BLOCK_M, BLOCK_N") -> tuple[dict, Section, int]:
    """A dot's epilogue that normalizes the output rows (its tile spans all columns): the norm's input x
    over the tile (the accumulator standing for the dot), its scale and bias over the columns, and the
    fused root from the normalized value y; the template computes the row statistics between them."""
    fusion, dot, norm = io.fusion, io.contraction, io.norm
    x = norm.operands[0]
    if sorted(norm.attrs["dimensions"]) != columns or tuple(x.shape.dims) != tuple(dot.shape.dims):
        raise UnsupportedError(f"%{fusion.name}: the %{norm.name} ({norm.opcode}) in the dot's epilogue must "
                               f"normalize the dot's output columns {columns}")
    compute = "f64" if x.shape.dtype == "f64" else "f32"
    root = check_root(fusion, dot)
    em = TileEmitter(fusion, "e_", tile, kernel_dims(dot.shape), lanes, io.wide(), io.ranges)
    em.bind(dot, "acc", _acc_dtype(io.lhs.shape.dtype))
    em.bind_scalars(activation_stats(fusion))
    em.section(x)
    for param in norm.operands[1:]:  # the scale and the bias, at the columns only
        em.section(param, tuple(em.coords[d] for d in columns), mask="mask_c")
    em.bind(norm, "y", compute)
    em.section(root)
    pre, *params, post = em.sections()
    spec = {"op": "layer_norm" if norm.opcode == "layer-norm" else "rms_norm", "x": pre,
            "scale": params[0], "bias": params[1] if len(params) > 1 else None,
            "epsilon": float(norm.attrs["epsilon"]), "compute_type": tl_type(compute),
            "sqrt": "tl.sqrt" if compute == "f64" else "tl.sqrt_rn"}
    per_element = 8 if norm.opcode == "layer-norm" else 4
    return spec, post, (em.ops + per_element) * upper(io.out.numel_expr(), io.ranges)


@dataclass(frozen=True)
class ConvSpatial:
    m_axis: int       # which M axis is this output spatial dim
    k_axis: int       # which K axis is this window dim (-1 for a window of 1)
    stride: int
    pad_low: int
    dilation: int
    in_size: Size     # symbolic spatial sizes render as the kernel's expressions
    x_stride: Size
    check_low: bool   # input coordinates below 0 occur
    check_high: bool  # input coordinates past the end occur


def _label_dims(labels: str) -> dict[str, int]:
    return {label: i for i, label in enumerate(labels)}


@dataclass(frozen=True)
class ConvLoop:
    """One convolution's K loop in conv.py.jinja: its variables end in ``suffix``, it sums into ``acc``."""
    suffix: str
    k: int
    k_axes: list[Axis]
    spatial: list[ConvSpatial]
    batch_stride: Size
    group_in_stride: Size
    w_out_stride: Size
    lhs: str
    rhs: str


def _conv_loop(inst: Instruction, x: Shape, w: Shape, m_order: list[str], suffix: str, lhs: str,
               rhs: str, ranges: Ranges) -> ConvLoop:
    """inst's K axes (input features of a group and window positions, in the input's memory order) and
    the input coordinates of each output position, M walked in m_order (the output's memory order)."""
    xd, wd = kernel_dims(x), static_dims(w, inst)
    xl, wl, _ = (_label_dims(labels) for labels in conv_dim_labels(inst.attrs["dim_labels"]))
    xs, ws = kernel_strides(x), strides(w)
    spatial_n = x.rank - 2
    cin_g = wd[wl["i"]]
    window = [wd[wl[str(s)]] for s in range(spatial_n)]
    dilation = list(inst.attrs["rhs_dilation"])
    k_labels = ["i"] + [str(s) for s in range(spatial_n) if window[s] > 1]
    k_stride = {"i": (xs[xl["f"]], ws[wl["i"]])}
    for s in range(spatial_n):
        k_stride[str(s)] = (xs[xl[str(s)]] * dilation[s], ws[wl[str(s)]])
    k_order = sorted(k_labels, key=lambda lab: -upper(k_stride[lab][0], ranges))
    k_axes = [Axis(cin_g if lab == "i" else window[int(lab)], k_stride[lab]) for lab in k_order]
    spatial = [ConvSpatial(m_axis=m_order.index(str(s)), k_axis=k_order.index(str(s)) if str(s) in k_order else -1,
                           stride=inst.attrs["window_strides"][s], pad_low=inst.attrs["padding_low"][s],
                           dilation=dilation[s], in_size=xd[xl[str(s)]], x_stride=xs[xl[str(s)]],
                           check_low=inst.attrs["padding_low"][s] > 0, check_high=inst.attrs["padding_high"][s] > 0)
               for s in range(spatial_n)]
    return ConvLoop(suffix, cin_g * numel(window), k_axes, spatial, xs[xl["b"]], size(cin_g * xs[xl["f"]]),
                    ws[wl["o"]], lhs, rhs)


def convolution_kernel(io: Operands, kernel_name: str) -> Kernel:
    inst = io.contraction
    x, w, out = io.lhs.shape, io.rhs.shape, io.out
    packed = packed_value(io.fusion) if io.second is None else None
    if packed is not None:  # a 4/2-bit result stored packed: its row-major values (pack-arena-values' conditions)
        out = packed.shape
    wd, od = static_dims(w, inst), kernel_dims(out)
    wl, ol = (_label_dims(labels) for labels in conv_dim_labels(inst.attrs["dim_labels"])[1:])
    os = kernel_strides(out)
    groups = inst.attrs["feature_group_count"]
    spatial_n = x.rank - 2
    n = wd[wl["o"]] // groups

    # M: batch and output positions, walked in the output's memory order
    m_order = sorted(["b"] + [str(s) for s in range(spatial_n)], key=lambda lab: -upper(os[ol[lab]], io.ranges))
    m_axes = [Axis(od[ol[lab]], (os[ol[lab]],)) for lab in m_order]
    first = _conv_loop(inst, x, w, m_order, "", io.lhs.ptr, io.rhs.ptr, io.ranges)
    loops = [first]
    if io.second is not None:
        sc = io.second
        loops.append(_conv_loop(sc.contraction, sc.lhs.shape, sc.rhs.shape, m_order, "_1", sc.lhs.ptr, sc.rhs.ptr,
                                io.ranges))
    m = numel([od[ol[lab]] for lab in m_order])
    k = first.k
    # rows: batch and output positions in m_order; columns: output features (lane_f, every group's)
    fused, fused_flops = io.epilogue([Lanes("lane_m", tuple(ol[lab] for lab in m_order)),
                                      Lanes("lane_f", (ol["f"],))], packed is not None)
    # a packed result: the values a byte holds are neighbours along N (features innermost) or else along M
    per_byte = 8 // PACKED_DTYPE_BITS[out.dtype] if packed is not None else 1
    pack_axis = 2 if ol["f"] == out.rank - 1 else 1

    common = dict(kernel_name=kernel_name, m=m, k=k, groups=groups, m_axes=m_axes, k_axes=first.k_axes,
                  spatial=first.spatial, batch_axis=m_order.index("b"), batch_stride=first.batch_stride,
                  group_in_stride=first.group_in_stride, w_out_stride=first.w_out_stride,
                  out_feature_stride=os[ol["f"]], out_type=tl_type(out.dtype),
                  wide=io.wide(), epilogue=fused, **io.template_args())
    pointers = io.pointers()
    flops = sum(2 * groups * upper(m, io.ranges) * n * loop.k for loop in loops) + fused_flops
    if groups > 1 and n < MIN_DOT_TILE:
        # depthwise and narrow groups: a matmul tile per group would be mostly padding
        source = render("grouped_conv.py.jinja", n=groups * n, group_out=n, acc_type=tl_type(_acc_dtype(x.dtype)),
                        **common)
        return Kernel(kernel_name, "grouped_conv.py.jinja", source, pointers,
                      gpu=grouped_conv_launch(m, groups * n, k, interpreter=False, ranges=io.ranges),
                      interpreter=grouped_conv_launch(m, groups * n, k, interpreter=True, ranges=io.ranges),
                      flops=flops,
                      scalars=io.symbols(), body_ir=sections_ir(epilogue=fused))
    source = render("conv.py.jinja", n=n, contractions=loops, per_byte=per_byte, pack_axis=pack_axis, **common,
                    **_precision(x.dtype, w.dtype))
    k_tile = max(loop.k for loop in loops)
    return Kernel(kernel_name, "conv.py.jinja", source, pointers,
                  gpu=matmul_launch(m, n, k_tile, groups, x.dtype, interpreter=False, ranges=io.ranges,
                                    rhs_dtype=w.dtype),
                  interpreter=matmul_launch(m, n, k_tile, groups, x.dtype, interpreter=True, ranges=io.ranges,
                                            rhs_dtype=w.dtype),
                  flops=flops, extra={"problem": matmul_problem(m, n, k_tile, groups, x.dtype, ranges=io.ranges,
                                                                rhs_dtype=w.dtype)},
                  scalars=io.symbols(),
                  body_ir=sections_ir(epilogue=fused))


def grouped_conv_launch(m: Size, n: int, k: int, interpreter: bool, ranges: Ranges = NO_RANGES) -> LaunchConfig:
    """Tiles of [positions, output features, inputs] for grouped_conv.py.jinja (a symbolic number of
    positions: tiles for its largest, the grid for each call's)."""
    rows = m
    m = upper(m, ranges)
    if interpreter:
        bk, bn = clamp_pow2(k, 1, 64), clamp_pow2(n, 1, 256)
        bm = clamp_pow2(m, 1, max(1, (1 << 18) // (bn * bk)))
    else:
        bk, bn = clamp_pow2(k, 1, 4), clamp_pow2(n, 1, 32)
        bm = clamp_pow2(m, 1, max(1, 4096 // (bn * bk)))
    return LaunchConfig({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
                        (grid_size(rows, bm), cdiv(max(n, 1), bn), 1), num_warps=4, num_stages=2)
