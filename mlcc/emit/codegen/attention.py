"""The attention kernel (FlashAttention-style): template attention.py.jinja.

q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv]. A program owns
a block of queries of one (batch..., head) pair (grid axis 1) and streams K/V
blocks with an online softmax, so the score matrix is never materialized. The
causal limit and the mask are applied in the kernel: a pred mask keeps scores,
any other mask is added, and a mask broadcasts by a stride of 0 along its size-1
or missing dims. With fewer k/v heads than q heads (grouped-query), q head h
reads kv head h // (Hq / Hkv).

An attention fusion computes its mask in the kernel: the loop ops producing it are evaluated per
[BLOCK_M, BLOCK_N] score tile at the tile's coordinates (mlcc/emit/codegen/fused.py), so the mask is never
materialized either; q, k and v are the fusion's parameters, read as they are.

A fake-quantized attention (QDQ int8 exports: mlcc/hlo/passes/recognize/quant_attention.py) applies its
``score_quant`` steps to each score tile and, with ``prob_quant``, runs two passes over the keys: the row max
and sum first, then the normalized probabilities, fake-quantized, times v.

An attention layer kernel (mlcc/hlo/passes/attention_layer.py: _layer) is one program per batch element that
loops over the heads and multiplies each head's output by its rows of the output projection's weight, then
applies the bias, residual and row norm, and with the FFN joined runs it on those rows (BLOCK_E: the hidden
size in one tile; BLOCK_H: the FFN's hidden columns a chunk).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlcc.emit.codegen.contraction import Operands, _acc_dtype, _norm_epilogue
from mlcc.emit.codegen.coords import (MAX_GRID_Y, Axis, clamp_pow2, is_wide, kernel_dims, kernel_strides, merge_axes,
                                      numel, upper)
from mlcc.emit.codegen.indexing import NO_RANGES, Ranges, Size
from mlcc.emit.codegen.fused import (FusedOperand, Lanes, Section, TileEmitter, Value, broadcast_coords, epilogue, heavy_op,
                                     heavy_ops, needs_int64, pointer_params, read_as_is, read_in_place, result_roots,
                                     sections_ir)
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, grid_size, kernel_symbols, lowering, render, tl_type,
                                      triton_pointer)
from mlcc.emit.codegen.narrow import round_trip
from mlcc.emit.target.targets import GENERIC, Target
from mlcc.emit.tiling import Resources, Tiling, is_pow2, register_tiling
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import DTYPE_BYTES, Instruction, Shape
from mlcc.hlo.passes.attention_layer import below_requantize, ffn_parts, layer_parts
from mlcc.hlo.passes.qkv_attention import int8_views, plain_projection
from mlcc.hlo.views import affine_view


FFN_BLOCK_H = 64  # an attention layer kernel's FFN hidden columns per chunk
INT8_FFN_BLOCK_H = 32  # an int8 one's (IMMA's k; 64 spilled on sm_90)


@dataclass(frozen=True)
class TileStrides:
    seq: int      # stride along the sequence dim (queries for the mask)
    feature: int  # stride along the head dim (keys for the mask)


def _tile_strides(shape: Shape) -> TileStrides:
    s = kernel_strides(shape)
    return TileStrides(s[-2], s[-1])


def _broadcast_strides(mask: Shape, score_dims: tuple[Size, ...]) -> tuple[Size, ...]:
    """The mask's stride along each dim of the [..., Sq, Sk] scores (0 where it broadcasts)."""
    ms = kernel_strides(mask)
    md = kernel_dims(mask)
    lead = len(score_dims) - mask.rank
    if lead < 0:
        raise ValueError(f"attention mask {mask} has more dims than the scores {list(score_dims)}")
    out = []
    for i, size in enumerate(score_dims):
        j = i - lead
        if j < 0 or md[j] == 1:
            out.append(0)
        elif md[j] == size:
            out.append(ms[j])
        else:
            raise ValueError(f"attention mask {mask} does not broadcast to scores {list(score_dims)}")
    return tuple(out)


def attention_problem(sq: Size, sk: Size, d: int, dv: int, batch_heads: Size, dtype: str,
                      ranges: Ranges = NO_RANGES, whole: bool = False, e: int | None = None,
                      ffn_h: int | None = None, int8_layer: bool = False) -> dict:
    """What an attention kernel's tiles follow from (Kernel.extra["problem"]). Symbolic sizes count at the
    largest value of their range; "sizes" keeps them (sq, batch_heads) for the grid the runtime evaluates.
    "whole_sequence": the kernel computes its QKV projection, so all queries go in one block (no program
    computes another's k and v tiles again). "e": an attention layer kernel's hidden size (its output projection
    and norm in the kernel; batch_heads then counts batch elements, a program's heads looped inside)."""
    problem = {"sq": upper(sq, ranges), "sk": upper(sk, ranges), "d": d, "dv": dv,
               "batch_heads": upper(batch_heads, ranges),
               "dtype": dtype}
    if not all(isinstance(x, int) for x in (sq, sk, batch_heads)):
        problem["sizes"] = (sq, batch_heads)
    if whole:
        problem["whole_sequence"] = True
    if e is not None:
        problem["e"] = e
    if ffn_h is not None:  # and its FFN's hidden width (h = act(rows @ W1) in BLOCK_H-column chunks)
        problem["ffn_h"] = ffn_h
    if int8_layer:  # an int8 layer kernel: each head's u8 output is the K of an int8 dot (at least 32 on GPUs)
        problem["min_dv"] = 32
    return problem


def _launch(sq: Size, sk: Size, d: int, dv: int, bh: Size, dtype: str, interpreter: bool,
            spec: Target = GENERIC, ranges: Ranges = NO_RANGES, whole: bool = False, e: int | None = None,
            ffn_h: int | None = None, int8_layer: bool = False) -> LaunchConfig:
    problem = attention_problem(sq, sk, d, dv, bh, dtype, ranges, whole, e, ffn_h, int8_layer)
    if problem["batch_heads"] > MAX_GRID_Y:
        raise UnsupportedError(f"{bh} (batch, head) pairs exceed the grid's axis-1 limit of {MAX_GRID_Y}")
    if interpreter:
        tiles = {"BLOCK_M": clamp_pow2(problem["sq"], 16, 256), "BLOCK_N": clamp_pow2(problem["sk"], 16, 512)}
        return attention_config(problem, tiles, 4, 1, interpreter=True)
    return attention_heuristic(problem, spec)


def _head_tiles(problem: dict) -> tuple[int, int]:
    """BLOCK_D, BLOCK_DV: a program holds whole q and v rows, so these follow from the head dims."""
    return clamp_pow2(problem["d"], 16, 1 << 20), clamp_pow2(problem["dv"], problem.get("min_dv", 16), 1 << 20)


def attention_config(problem: dict, tiles: dict[str, int], num_warps: int, num_stages: int,
                     interpreter: bool = False) -> LaunchConfig:
    """The launch config of given query and key tiles (BLOCK_M, BLOCK_N): a program per BLOCK_M queries
    (axis 0) of each (batch..., head) (axis 1)."""
    block_d, block_dv = _head_tiles(problem)
    constexprs = {"BLOCK_M": tiles["BLOCK_M"], "BLOCK_N": tiles["BLOCK_N"], "BLOCK_D": block_d,
                  "BLOCK_DV": block_dv}
    if "e" in problem:  # an attention layer kernel: the output projection's columns in one tile
        constexprs["BLOCK_E"] = clamp_pow2(problem["e"], 16, 1 << 20)
    if "ffn_h" in problem:  # its FFN's hidden columns a chunk
        constexprs["BLOCK_H"] = clamp_pow2(problem["ffn_h"], 16, INT8_FFN_BLOCK_H if "min_dv" in problem else FFN_BLOCK_H)
    if problem["dtype"] == "bf16":   # see mlcc.emit.codegen.contraction: the interpreter multiplies bf16 in f32
        constexprs["DOT_F32"] = int(interpreter)
    sq, batch_heads = problem.get("sizes", (problem["sq"], problem["batch_heads"]))
    grid = (grid_size(sq, tiles["BLOCK_M"]), grid_size(batch_heads, 1), 1)
    return LaunchConfig(constexprs, grid, num_warps=num_warps, num_stages=num_stages)


def attention_heuristic(problem: dict, spec: Target) -> LaunchConfig:
    """Query and key tiles for spec, then fewer stages (then smaller key and query tiles) until they fit
    its shared memory.
    Half types run on tensor cores (big query tiles); f32 (exact) and f64 on FMA units, where small tiles
    keep registers and shared memory in bounds. Generic: what every GPU runs; sm_90: wider key tiles and
    a deeper pipeline; AMD: 4 wavefronts, no pipelining (Triton's AMD flash-attention configs)."""
    sq, sk, dtype = problem["sq"], problem["sk"], problem["dtype"]
    block_d, block_dv = _head_tiles(problem)
    wide_head = max(block_d, block_dv) > 64
    half = dtype in ("f16", "bf16")
    if half:
        cap_n = 64 if wide_head or spec.attention_stages == 0 or spec.vendor == "amd" else 128
        cap_m = 64 if wide_head and spec.attention_stages == 0 else 128
        block_m, block_n = clamp_pow2(sq, 16, cap_m), clamp_pow2(sk, 16, cap_n)
        warps, stages = (8, 2) if wide_head else (4, 3)
        if spec.attention_stages:
            stages = spec.attention_stages
            big = block_m * block_n >= 128 * 128 or (wide_head and block_m >= 128)
            warps = 8 if big and spec.vendor == "nvidia" else 4
    else:
        block_m = clamp_pow2(sq, 16, 32 if wide_head or dtype == "f64" else 64)
        block_n = clamp_pow2(sk, 16, 32)
        warps, stages = 4, spec.attention_stages or 2
    if problem.get("whole_sequence"):  # a kernel computing its QKV projection: every query in one block
        block_m = max(block_m, clamp_pow2(sq, 16, 1 << 20))
    if "e" in problem:  # an attention layer (with its FFN): more live tiles, over 8 warps (4 spilled on sm_80
        warps = 8       # with [64, 64] rows, and on sm_90 with bert_tiny's FFN)
    if "min_dv" in problem:  # an int8 layer: 4 warps (on 8, ptxas held its sm_90 binary to 128 registers and it
        warps = 4            # spilled 4-12 bytes; on 4 it takes 168, 234 on sm_80, no spills)
    while attention_shared_bytes(problem, block_m, block_n, stages) > spec.shared_bytes and stages > 1:
        stages -= 1
    while attention_shared_bytes(problem, block_m, block_n, stages) > spec.shared_bytes and block_n > 16:
        block_n //= 2
    while attention_shared_bytes(problem, block_m, block_n, stages) > spec.shared_bytes and block_m > 16 and \
            not problem.get("whole_sequence"):
        block_m //= 2
    return attention_config(problem, {"BLOCK_M": block_m, "BLOCK_N": block_n}, warps, stages)


def attention_shared_bytes(problem: dict, block_m: int, block_n: int, stages: int) -> int:
    """The q tile, and a k and a v tile per pipeline stage (and a layer kernel's [BLOCK_DV, BLOCK_E] W_o tile)."""
    block_d, block_dv = _head_tiles(problem)
    tiles = block_m * block_d + max(stages, 1) * block_n * (block_d + block_dv)
    if "e" in problem:
        tiles += block_dv * clamp_pow2(problem["e"], 16, 1 << 20)
    if "ffn_h" in problem:  # the FFN's [BLOCK_E, BLOCK_H] and [BLOCK_H, BLOCK_E] weight tiles
        tiles += 2 * clamp_pow2(problem["e"], 16, 1 << 20) * clamp_pow2(problem["ffn_h"], 16, FFN_BLOCK_H)
    return tiles * DTYPE_BYTES[problem["dtype"]]


def _attention_resources(problem: dict, config: LaunchConfig, warp_size: int) -> Resources:
    """Registers: the f32 output accumulator and score tile, and the q tile, spread over the threads."""
    c = config.constexprs
    bm, bn, bd, bdv = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_D"], c["BLOCK_DV"]
    acc_words = 2 if problem["dtype"] == "f64" else 1
    words = DTYPE_BYTES[problem["dtype"]] / 4
    layer = bm * c["BLOCK_E"] if "BLOCK_E" in c else 0  # a layer kernel's f32 output projection accumulator
    layer += bm * (c["BLOCK_E"] + c["BLOCK_H"]) if "BLOCK_H" in c else 0  # and its FFN's rows and chunk
    registers = ((bm * bdv + bm * bn + layer) * acc_words + bm * bd * words) / (config.num_warps * warp_size)
    return Resources(attention_shared_bytes(problem, bm, bn, config.num_stages), math.ceil(registers))


def attention_candidates(problem: dict, spec: Target) -> list[LaunchConfig]:
    """Query and key tiles of 32 to 128, 4 or 8 warps (8 only for big tiles), stages around spec's."""
    if spec.vendor == "amd":
        stage_choices = [1, 2]
    else:
        depth = spec.attention_stages or 2
        stage_choices = [max(1, depth - 1), depth, depth + 1]
    configs = []
    whole = clamp_pow2(problem["sq"], 16, 1 << 20)  # a kernel computing its QKV projection: all queries at once
    for bm in (whole,) if problem.get("whole_sequence") else (32, 64, 128):
        for bn in (32, 64, 128):
            tiles = {"BLOCK_M": clamp_pow2(problem["sq"], 16, bm), "BLOCK_N": clamp_pow2(problem["sk"], 16, bn)}
            for warps in (4, 8) if tiles["BLOCK_M"] * tiles["BLOCK_N"] >= 64 * 64 else (4,):
                for stages in stage_choices:
                    config = attention_config(problem, tiles, warps, stages)
                    if config not in configs:
                        configs.append(config)
    return configs


def _attention_check(problem: dict, tiles: dict[str, int]) -> str | None:
    for name in ("BLOCK_M", "BLOCK_N"):
        if not is_pow2(tiles[name]) or tiles[name] < 16:
            return f"{name} must be a power of two >= 16 (tl.dot), not {tiles[name]}"
    if problem.get("whole_sequence") and tiles["BLOCK_M"] < problem["sq"]:
        return (f"BLOCK_M must hold all {problem['sq']} queries: the kernel computes its QKV projection, and each "
                "further query block would compute its head's k and v again")
    return None


register_tiling(Tiling(heuristic=attention_heuristic, tunable=("BLOCK_M", "BLOCK_N"),
                       fixed=("BLOCK_D", "BLOCK_DV", "BLOCK_E", "BLOCK_H", "DOT_F32"), config=attention_config,
                       resources=_attention_resources, candidates=attention_candidates, check=_attention_check),
                "attention.py.jinja")


@lowering("attention")
def lower_attention(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    qkv = [FusedOperand(i, op.shape) for i, op in enumerate(inst.operands[:3])]
    return attention_kernel(inst, kernel_name, qkv, None, ranges)


@lowering("fusion:attention")
def lower_attention_fusion(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    """Attention with its mask computed in the kernel (and any elementwise epilogue on its result); with a
    dot in the fusion, q, k and v are that QKV projection's tiles, computed in the kernel (_projection); with
    the output projection and a row norm after the attention too, a layer kernel (_layer)."""
    parts = layer_parts(inst.called)
    if parts is not None:
        heavy = parts[0]
        qkv, proj = _projection(heavy, inst)
        return attention_kernel(heavy, kernel_name, qkv, inst, ranges, proj, _layer(inst, parts, ranges))
    found = heavy_ops(inst, ("attention", "dot"))
    if not any(h.opcode == "dot" for h in found):
        heavy = heavy_op(inst, ("attention",))
        return attention_kernel(heavy, kernel_name, [_loaded(op, inst) for op in heavy.operands[:3]], inst,
                                ranges)
    attentions = [h for h in found if h.opcode == "attention"]
    if len(attentions) != 1:
        raise UnsupportedError(f"%{inst.name}: an attention fusion needs one attention, found {len(attentions)}")
    heavy = attentions[0]
    qkv, proj = _projection(heavy, inst)
    return attention_kernel(heavy, kernel_name, qkv, inst, ranges, proj)


def _projection(attention: Instruction, fusion: Instruction) -> tuple[list[FusedOperand], dict]:
    """q, k and v as strided views of the fusion's QKV projection X @ W (+ bias) (the projection's own strides,
    which the template turns into rows of X and columns of W: mlcc/hlo/passes/qkv_attention.py), and what
    the template computes their tiles from."""
    int8 = _int8_projection(attention, fusion)
    if int8 is not None:
        return int8
    views = [affine_view(op) for op in attention.operands[:3]]
    value = views[0].source if views[0] is not None else None
    found = plain_projection(value) if value is not None else None
    if found is None or any(v is None or v.source is not value for v in views):
        raise UnsupportedError(f"%{fusion.name}: q, k and v are not strided views of one projection X @ W (+ bias)")
    dot, _, bias = found
    x, w = dot.operands
    if not x.shape.is_row_major() or not value.shape.is_row_major() or \
            list(dot.attrs["lhs_contracting_dims"]) != [x.shape.rank - 1] or w.shape.rank != 2:
        raise UnsupportedError(f"%{fusion.name}: the projection %{dot.name} is not row-major X [..., K] @ W [K, N]")
    return _projection_spec(attention, dot, views, value.shape.dims[-1], clamp_pow2(x.shape.dims[-1], 16, 32), bias)


def _projection_spec(attention: Instruction, dot: Instruction, views: list, n: int, block_k: int,
                     bias: Instruction | None = None, int8: dict | None = None) -> tuple[list[FusedOperand], dict]:
    """q, k and v as strided views (views) of the projection dot's n columns, and the template's description of
    the projection: X's and W's pointers, K, W's strides, the K block, the views' offsets, the bias."""
    x, w = dot.operands
    ws = kernel_strides(w.shape)
    c = dot.attrs["rhs_contracting_dims"][0]
    qkv = [FusedOperand(int(x.attrs["index"]), op.shape, 0, view.strides)
           for op, view in zip(attention.operands[:3], views)]
    proj = {"x": f"in{x.attrs['index']}", "w": f"in{w.attrs['index']}", "k": x.shape.dims[-1], "n": n,
            "w_k": ws[c], "w_n": ws[1 - c], "block_k": block_k, "offsets": [v.offset for v in views],
            "bias": f"in{bias.attrs['index']}" if bias is not None else None,
            "bias_stride": kernel_strides(bias.shape)[0] if bias is not None else 0, "int8": int8}
    return qkv, proj


def _int8_projection(attention: Instruction, fusion: Instruction) -> tuple[list[FusedOperand], dict] | None:
    """An int8 QKV projection (u8/s8 x s8 -> s32, mlcc/hlo/passes/qkv_attention.py: int8_views): q, k and v are
    computed from its s32 tiles by the fusion's elementwise ops, which keep coordinates, so each is a strided
    view of it; the template computes each tile on the integer tensor cores and the ops on it ("dot": the
    projection, which the q, k and v sections read as that tile). None when the fusion has no such dot."""
    if not attention.attrs.get("score_quant"):
        return None
    for dot in (i for i in fusion.called.instructions if i.opcode == "dot" and i.shape.dtype == "s32"):
        views, _ = int8_views(attention, dot)
        if any(v is None for v in views):
            continue
        x, w = dot.operands
        if x.opcode != "parameter" or w.opcode != "parameter" or not x.shape.is_row_major() or \
                not dot.shape.is_row_major() or list(dot.attrs["lhs_contracting_dims"]) != [x.shape.rank - 1] or \
                w.shape.rank != 2:
            raise UnsupportedError(f"%{fusion.name}: the projection %{dot.name} is not row-major X [..., K] @ W [K, N]")
        qkv, proj = _projection_spec(attention, dot, views, dot.shape.dims[-1], 32,
                                     int8={"x_shift": x.shape.dtype == "u8", "w_shift": w.shape.dtype == "u8"})
        return qkv, {**proj, "dot": dot}
    return None


def _layer(fusion: Instruction, parts: tuple[Instruction, Instruction, Instruction], ranges: Ranges) -> dict:
    """An attention layer kernel's output projection and norm (mlcc/hlo/passes/attention_layer.py): W_o's
    pointer and strides ([H * Dv, E]: rows h * Dv .. (h + 1) * Dv multiply head h's output), the hidden size E,
    and the norm epilogue over the [BLOCK_M, BLOCK_E] rows of one batch element (lane_m: the flattened row
    index batch * S + query, lane_n: the hidden column), the accumulator standing for the dot."""
    attention, dot, norm = parts
    w = dot.operands[1]
    if w.opcode != "parameter" or w.shape.rank != 2:
        raise UnsupportedError(f"%{fusion.name}: the output projection's weight must be a matrix read as stored")
    ws = kernel_strides(w.shape)
    c = dot.attrs["rhs_contracting_dims"][0]
    out = fusion.shape
    e = kernel_dims(out)[-1]
    inputs = tuple(op.shape for op in fusion.operands)
    io = Operands(dot, FusedOperand(-1, dot.operands[0].shape), FusedOperand(int(w.attrs["index"]), w.shape), out,
                  inputs, fusion, ranges, norm=norm)
    lanes = [Lanes("lane_m", tuple(range(out.rank - 1))), Lanes("lane_n", (out.rank - 1,))]
    k = kernel_dims(dot.operands[0].shape)[-1]
    rows = upper(numel(kernel_dims(out)[:-1]), ranges)
    ffn = ffn_parts(fusion.called, norm)
    layer = {"w": f"in{w.attrs['index']}", "w_k": ws[c], "w_n": ws[1 - c], "e": e, "ffn": None, "o": None,
             "int8": None}
    if dot.shape.dtype == "s32":  # an int8 layer: each head's output requantized as stored, times W_o in s32
        layer["o"], layer["int8"], o_flops = _int8_output_tile(fusion, attention, dot, ranges)
    else:
        o_flops = 0
    if ffn is None:
        spec, post, flops = _norm_epilogue(io, lanes, [out.rank - 1], "BLOCK_M, BLOCK_E")
        return {**layer, "norm": spec, "epilogue": post, "flops": flops + 2 * rows * k * e + o_flops}
    # the FFN joined too: the first norm's rows (y1) are the first dot's lhs and the second norm's residual
    dot1, dot2, norm2 = ffn
    wide = io.wide()
    acc = _acc_dtype(dot1.operands[0].shape.dtype)
    spec, flops = _row_norm(fusion, dot, norm, None, lanes, "e_", wide, ranges)
    # the rows the FFN multiplies and adds back: the first norm's value y, or (an int8 layer) y requantized
    rows_value = _below_bitcasts(dot1.operands[0])
    rows_section = None
    if rows_value is not norm:
        em = TileEmitter(fusion, "r_", "BLOCK_M, BLOCK_E", kernel_dims(dot.shape), lanes, wide, ranges)
        em.bind(norm, "y", "f64" if norm.shape.dtype == "f64" else "f32")
        em.section(rows_value)
        (rows_section,) = em.sections()
        flops += em.ops * rows * e
    lanes_h = [Lanes("lane_hm", tuple(range(out.rank - 1))), Lanes("lane_hn", (out.rank - 1,))]
    em = TileEmitter(fusion, "h_", "BLOCK_M, BLOCK_H", kernel_dims(dot1.shape), lanes_h, wide, ranges)
    em.bind(dot1, "acc1", acc)
    hidden_value = _below_bitcasts(dot2.operands[0])
    if tuple(hidden_value.shape.dims) != tuple(dot1.shape.dims):
        raise UnsupportedError(f"%{fusion.name}: the FFN's first epilogue is not at its first dot's dims")
    em.section(hidden_value, mask="mask_hh")
    (hidden,) = em.sections()
    spec2, flops2 = _row_norm(fusion, dot2, norm2, rows_value, lanes, "f_", wide, ranges)
    h = kernel_dims(dot1.shape)[-1]
    w1, w2 = dot1.operands[1], dot2.operands[1]
    s1, s2 = kernel_strides(w1.shape), kernel_strides(w2.shape)
    c1, c2 = dot1.attrs["rhs_contracting_dims"][0], dot2.attrs["rhs_contracting_dims"][0]
    layer["ffn"] = {"w1": f"in{w1.attrs['index']}", "w1_k": s1[c1], "w1_n": s1[1 - c1],
                    "w2": f"in{w2.attrs['index']}", "w2_k": s2[c2], "w2_n": s2[1 - c2], "h": h,
                    "hidden": hidden, "y1_type": tl_type(rows_value.shape.dtype),
                    "h_type": tl_type(hidden_value.shape.dtype), "norm": spec2["norm"], "rows": rows_section,
                    "int8_1": _int8_shifts(dot1), "int8_2": _int8_shifts(dot2)}
    flops += flops2 + 2 * rows * k * e + 4 * rows * e * h + em.ops * rows * h + o_flops
    return {**layer, "norm": spec["norm"], "epilogue": spec2["post"], "flops": flops}


def _int8_output_tile(fusion: Instruction, attention: Instruction, dot: Instruction,
                      ranges: Ranges) -> tuple[Section, dict, int]:
    """An int8 attention layer's requantized attention output over a head's [BLOCK_M, BLOCK_DV] output tile (the
    attention's value "out" standing for it: the ops the attention kernel applied as its epilogue before it
    stored the u8 output), and the int8 dot's operand shifts (u8 shifted to s8, templates/_int8_dot.jinja)."""
    value = _below_bitcasts(dot.operands[0])
    if below_requantize(value) is not attention or tuple(value.shape.dims) != tuple(attention.shape.dims):
        raise UnsupportedError(f"%{fusion.name}: the output projection does not read the attention's requantized "
                               "output at its coordinates")
    rank = attention.shape.rank
    lanes = [Lanes("pid_b", tuple(range(rank - 2)), per_lane=False), Lanes("lane_q", (rank - 2,)),
             Lanes("lane_dv", (rank - 1,))]
    q = attention.operands[0].shape
    em = TileEmitter(fusion, "o_", "BLOCK_M, BLOCK_DV", kernel_dims(attention.shape), lanes,
                     needs_int64(ranges, fusion, q, attention.shape), ranges)
    em.bind(attention, "out", "f64" if q.dtype == "f64" else "f32")
    em.section(value)
    (section,) = em.sections()
    shifts = {"shift_a": value.shape.dtype == "u8", "shift_b": dot.operands[1].shape.dtype == "u8"}
    return section, shifts, em.ops * upper(numel(kernel_dims(attention.shape)), ranges)


def _int8_shifts(dot: Instruction) -> dict | None:
    """An int8 dot's operand shifts (an unsigned operand shifted to s8: templates/_int8_dot.jinja), or None."""
    if dot.shape.dtype != "s32":
        return None
    return {"shift_a": dot.operands[0].shape.dtype == "u8", "shift_b": dot.operands[1].shape.dtype == "u8"}


def _below_bitcasts(x: Instruction) -> Instruction:
    while x.opcode == "bitcast":
        x = x.operands[0]
    return x


def _row_norm(fusion: Instruction, dot: Instruction, norm: Instruction, before: Instruction | None,
              lanes: list, prefix: str, wide: bool, ranges: Ranges) -> tuple[dict, int]:
    """A norm of dot's output rows in an attention layer kernel with its FFN: the norm's input over the
    [BLOCK_M, BLOCK_E] tile (the accumulator standing for dot; y1 for the earlier norm before, if any), its
    scale and bias over the columns, and (for the last norm, after before) the fused root from the normalized
    value y."""
    columns = [norm.shape.rank - 1]
    if list(norm.attrs["dimensions"]) != columns or tuple(norm.operands[0].shape.dims) != tuple(dot.shape.dims):
        raise UnsupportedError(f"%{fusion.name}: %{norm.name} must normalize the last dim of %{dot.name}")
    compute = "f64" if norm.shape.dtype == "f64" else "f32"
    em = TileEmitter(fusion, prefix, "BLOCK_M, BLOCK_E", kernel_dims(dot.shape), lanes, wide, ranges)
    em.bind(dot, "acc", _acc_dtype(dot.operands[0].shape.dtype))
    if before is not None:
        em.bind(before, "y1", before.shape.dtype)
    em.section(norm.operands[0])
    for param in norm.operands[1:]:
        em.section(param, tuple(em.coords[d] for d in columns), mask="mask_c")
    last = before is not None
    if last:
        em.bind(norm, "y", compute)
        em.section(fusion.called.root)
    pre, *params = em.sections()
    post = params.pop() if last else None
    spec = {"op": "layer_norm" if norm.opcode == "layer-norm" else "rms_norm", "x": pre,
            "scale": params[0], "bias": params[1] if len(params) > 1 else None,
            "epsilon": float(norm.attrs["epsilon"]), "compute_type": tl_type(compute),
            "sqrt": "tl.sqrt" if compute == "f64" else "tl.sqrt_rn"}
    rows = upper(numel(kernel_dims(dot.shape)[:-1]), ranges)
    return {"norm": spec, "post": post}, (em.ops + 8) * rows * kernel_dims(dot.shape)[-1]


def _loaded(operand: Instruction, fusion: Instruction) -> FusedOperand | None:
    """q, k or v read from memory (a parameter, or a strided view of one), or None: computed per tile."""
    view = affine_view(operand)
    if view is not None and view.source.opcode == "parameter":
        return read_in_place(operand, fusion)
    x = operand
    while x.opcode == "bitcast":
        x = x.operands[0]
    return read_as_is(operand, fusion) if x.opcode == "parameter" else None


def attention_kernel(inst: Instruction, kernel_name: str, qkv: list[FusedOperand | None],
                     fusion: Instruction | None, ranges: Ranges, proj: dict | None = None,
                     layer: dict | None = None) -> Kernel:
    """The kernel of attention inst reading q, k, v from qkv (None: computed from the fusion's inputs as
    the kernel loads each tile; with proj, each tile computed as rows of X times columns of W, qkv giving
    their views' strides in X @ W); the mask and the epilogue from fusion if any. With layer (_layer), one program
    per batch element loops over the heads and multiplies each head's output into the output projection, whose
    rows it normalizes and stores: the attention output is never stored."""
    qkv = [op if op is not None else FusedOperand(-1, inst.operands[i].shape) for i, op in enumerate(qkv)]
    computed = [op.index < 0 for op in qkv]
    q, k, v = (op.shape for op in qkv)
    mask = inst.operands[3].shape if len(inst.operands) > 3 else None
    results = result_roots(fusion) if fusion is not None else [inst]
    # the results as the fusion lays them out in memory (its root may be laid out otherwise)
    result_shapes = [r.shape for r in results] if fusion is None else \
        list(fusion.shape.elements) if fusion.shape.is_tuple else [fusion.shape]
    out = result_shapes[0] if layer is None else inst.shape  # (a layer kernel stores the normalized rows)
    stores = _cache_stores(inst, results, result_shapes, computed, fusion) if layer is None else [None] * 3
    qd, kd = kernel_dims(q), kernel_dims(k)
    vd = kernel_dims(v)
    rank = q.rank
    sq, d, sk, dv = qd[-2], qd[-1], kd[-2], vd[-1]
    if k.rank != rank or v.rank != rank:
        raise ValueError(f"%{inst.name}: q, k and v must have the same rank")
    heads = qd[-3] if rank >= 3 else 0
    kv_heads = kd[-3] if rank >= 3 else 0
    if not all(isinstance(x, int) for x in (heads, kv_heads, d, dv)):
        raise UnsupportedError(f"%{inst.name} (attention): heads and head dims must be static, got q {q}, k {k}")
    if heads and (kv_heads == 0 or heads % kv_heads):
        raise ValueError(f"%{inst.name}: {heads} query heads do not split into groups of {kv_heads} kv heads")
    group = heads // kv_heads if heads else 1

    qs, ks, vs = (tuple(op.view_strides) if op.view_strides is not None else kernel_strides(op.shape) for op in qkv)
    lead_strides = [qs[:-2], kernel_strides(out)[:-2], ks[:-2], vs[:-2]]
    if mask is not None and fusion is None:
        lead_strides.append(_broadcast_strides(mask, qd[:-1] + (sk,))[:-2])
    n_outer = max(rank - 3, 0)
    outer_axes = merge_axes(Axis(qd[i], tuple(s[i] for s in lead_strides)) for i in range(n_outer))
    head_strides = tuple(s[rank - 3] for s in lead_strides) if heads else ()
    if mask is not None:
        mask_strides = _broadcast_strides(mask, qd[:-1] + (sk,))  # (checks that it broadcasts)
        mask_tile = TileStrides(mask_strides[-2], mask_strides[-1])
        mask_kind = "pred" if mask.dtype == "pred" else "additive"
    else:
        mask_tile, mask_kind = TileStrides(0, 0), "none"
    batch_heads = numel(qd[:-2])

    compute = "f64" if q.dtype == "f64" else "f32"
    names = [f"in{i}" for i in range(len(inst.operands))] + ["out0"]
    pointers = [triton_pointer(op.shape) for op in inst.operands] + [triton_pointer(out)]
    wide = is_wide(ranges, q, k, v, out)
    fused: dict[str, Section | None] = {"mask_section": None, "epilogue": None, "q_section": None,
                                        "k_section": None, "v_section": None}
    flops = 2 * upper(batch_heads, ranges) * upper(sq, ranges) * upper(sk, ranges) * (d + dv)
    symbols = kernel_symbols(out, *(op.shape for op in inst.operands))
    if fusion is not None:
        names = pointer_params(fusion)
        pointers = [triton_pointer(op.shape) for op in fusion.operands] + [triton_pointer(r) for r in result_shapes]
        wide = needs_int64(ranges, fusion, q, k, v, out)
        int8 = proj is not None and proj["int8"] is not None  # q, k and v computed from the s32 tiles
        fused, ops = _fused_sections(inst, fusion, compute, wide, ranges,
                                     [True] * 3 if int8 else computed if proj is None else [False] * 3,
                                     layer is None, proj["dot"] if int8 else None)
        flops += ops
        if proj is not None:  # the q tile once, every key's k and v tiles once (the whole sequence in one block)
            # (a fake-quantized attention's second pass over the keys computes its k tiles again)
            k_passes = 2 if inst.attrs.get("prob_quant") else 1
            flops += 2 * upper(batch_heads, ranges) * proj["k"] * (upper(sq, ranges) * d +
                                                                   upper(sk, ranges) * (k_passes * d + dv))
        symbols = kernel_symbols(out, *(op.shape for op in fusion.operands), *fusion.called.instructions)
    if layer is not None:  # one program per batch element, every head in it
        flops += layer["flops"]
        if heads == 0:
            raise UnsupportedError(f"%{fusion.name}: an attention layer kernel needs heads")
        batch_heads = numel(qd[:-3])
    names += [f"sym_{s}" for s in symbols]
    pointers += ["i32"] * len(symbols)
    source = render("attention.py.jinja", kernel_name=kernel_name, params=names,
                    q_ptr=qkv[0].ptr, k_ptr=qkv[1].ptr, v_ptr=qkv[2].ptr, sq=sq, sk=sk, d=d, dv=dv,
                    heads=heads, group=group, kv_heads=kv_heads, outer_axes=outer_axes, head_strides=head_strides,
                    q=TileStrides(qs[-2], qs[-1]), k=TileStrides(ks[-2], ks[-1]), v=TileStrides(vs[-2], vs[-1]),
                    out=_tile_strides(out),
                    mask=mask_tile, mask_kind=mask_kind, causal=bool(inst.attrs["causal"]),
                    window=inst.attrs.get("window"), softcap=inst.attrs.get("softcap"),
                    scale=float(inst.attrs["scale"]), masked_value=inst.attrs.get("masked_value"),
                    score_quant=inst.attrs.get("score_quant", ()), prob_quant=inst.attrs.get("prob_quant"),
                    quant_type=inst.attrs.get("quant_type"), round_trip=round_trip,
                    ieee=q.dtype in ("f32", "f64"), bf16_dot=q.dtype == "bf16",
                    compute_type=tl_type(compute), value_type=tl_type(v.dtype), out_type=tl_type(out.dtype),
                    wide=wide, store_k=stores[1], store_v=stores[2], k_type=tl_type(k.dtype),
                    v_type=tl_type(v.dtype), proj=proj, layer=layer, **fused)
    e = layer["e"] if layer is not None else None
    ffn_h = layer["ffn"]["h"] if layer is not None and layer["ffn"] is not None else None
    body_ir = sections_ir(**fused, **({"layer_norm": layer["norm"]["x"], "layer_epilogue": layer["epilogue"]}
                                      if layer is not None else {}),
                          **({"layer_output": layer["o"]} if layer is not None and layer["o"] is not None else {}),
                          **({"ffn_rows": layer["ffn"]["rows"]} if ffn_h is not None and layer["ffn"]["rows"] is not None
                             else {}),
                          **({"ffn_hidden": layer["ffn"]["hidden"], "ffn_norm": layer["ffn"]["norm"]["x"]}
                             if ffn_h is not None else {}))
    int8_layer = layer is not None and layer["int8"] is not None
    return Kernel(kernel_name, "attention.py.jinja", source, pointers,
                  gpu=_launch(sq, sk, d, dv, batch_heads, q.dtype, interpreter=False, ranges=ranges,
                              whole=proj is not None, e=e, ffn_h=ffn_h, int8_layer=int8_layer),
                  interpreter=_launch(sq, sk, d, dv, batch_heads, q.dtype, interpreter=True, ranges=ranges,
                                      whole=proj is not None, e=e, ffn_h=ffn_h, int8_layer=int8_layer),
                  flops=flops, extra={"problem": attention_problem(sq, sk, d, dv, batch_heads, q.dtype, ranges,
                                                                   whole=proj is not None, e=e, ffn_h=ffn_h,
                                                                   int8_layer=int8_layer)},
                  scalars=symbols, body_ir=body_ir)


def _cache_stores(inst: Instruction, results: list[Instruction], shapes: list[Shape], computed: list[bool],
                  fusion: Instruction | None) -> list[str | None]:
    """For q, k and v, the pointer of the fusion's result that is that operand (a present KV cache the kernel
    stores as it computes its tiles: mlcc/hlo/passes/multi_output.py), or None."""
    stores: list[str | None] = [None, None, None]
    for j, r in enumerate(results[1:], start=1):
        i = next((i for i in (1, 2) if inst.operands[i] is r and computed[i]), None)
        if i is None or stores[i] is not None:
            raise UnsupportedError(f"%{fusion.name}: result %{r.name} is not the attention's computed k or v, "
                                   "the only results an attention kernel stores besides its own")
        if shapes[j] != r.shape:
            raise UnsupportedError(f"%{fusion.name}: result {j} is laid out {shapes[j]}, unlike the "
                                   f"{'kv'[i - 1]} tiles the kernel stores ({r.shape})")
        if "prob_quant" in inst.attrs:
            raise UnsupportedError(f"%{fusion.name}: a fake-quantized attention reads its keys twice and "
                                   "stores no cache")
        stores[i] = f"out{j}"
    return stores


# q, k and v computed per tile (rotary embeddings applied as they are loaded): the template variables
# of each tile's lanes and its shape; k is loaded transposed, [BLOCK_D, BLOCK_N]
_OPERAND_TILES = (("q_section", "q_", "BLOCK_M, BLOCK_D", "q_lane_m", "q_lane_d", "q_mask"),
                  ("k_section", "k_", "BLOCK_D, BLOCK_N", "k_lane_n", "k_lane_d", "k_mask"),
                  ("v_section", "v_", "BLOCK_N, BLOCK_DV", "v_lane_n", "v_lane_d", "v_mask"))


def _fused_sections(inst: Instruction, fusion: Instruction, compute: str, wide: bool, ranges: Ranges,
                    computed: list[bool], with_epilogue: bool = True,
                    projection: Instruction | None = None) -> tuple[dict[str, Section | None], int]:
    """The mask over a [BLOCK_M, BLOCK_N] score tile, the fused root over a [BLOCK_M, BLOCK_DV] output
    tile, and each computed q, k or v over its tile; a program's (batch..., head) is pid_b, row-major over
    q's leading dims (pid_kv over k's and v's: their head is the query head's group). With projection (an int8
    QKV dot), q, k and v read it as the template's s32 tile of it (q_acc, k_t_acc, v_acc)."""
    q = inst.operands[0].shape
    rank = q.rank
    lead = Lanes("pid_b", tuple(range(rank - 2)), per_lane=False)
    sections: dict[str, Section | None] = {"mask_section": None, "epilogue": None, "q_section": None,
                                           "k_section": None, "v_section": None}
    flops = 0
    for i, (name, prefix, shape, seq_lane, feature_lane, mask) in enumerate(_OPERAND_TILES):
        if not computed[i]:
            continue
        operand = inst.operands[i]
        space = kernel_dims(operand.shape)
        lanes = [Lanes("pid_b" if i == 0 else "pid_kv", tuple(range(rank - 2)), per_lane=False),
                 Lanes(seq_lane, (rank - 2,)), Lanes(feature_lane, (rank - 1,))]
        if projection is not None:
            em = _ProjectedTile(fusion, prefix, shape, space, lanes, wide, ranges)
            em.bind_projection(projection, ("q", "k_t", "v")[i] + "_acc")
        else:
            em = TileEmitter(fusion, prefix, shape, space, lanes, wide, ranges)
        em.section(operand, mask=mask)
        (sections[name],) = em.sections()
        flops += em.ops * upper(numel(space), ranges)
    if len(inst.operands) > 3:
        mask = inst.operands[3]
        scores = list(kernel_dims(q)[:-1]) + [kernel_dims(inst.operands[1].shape)[-2]]
        em = TileEmitter(fusion, "m_", "BLOCK_M, BLOCK_N", scores,
                         [lead, Lanes("lane_q", (rank - 2,)), Lanes("lane_k", (rank - 1,))], wide, ranges)
        em.section(mask, broadcast_coords(em.coords, mask.shape))
        (sections["mask_section"],) = em.sections()
        flops += em.ops * upper(numel(scores), ranges)
    if with_epilogue and result_roots(fusion)[0] is not inst:
        sections["epilogue"], ops = epilogue(fusion, inst, "out", compute, [lead, Lanes("lane_q", (rank - 2,)),
                                                                             Lanes("lane_dv", (rank - 1,))],
                                             "BLOCK_M, BLOCK_DV", wide, ranges)
        flops += ops * upper(inst.shape.numel_expr(), ranges)
    return sections, flops


class _ProjectedTile(TileEmitter):
    """A q, k or v tile computed from an int8 projection that the template computed as a tile: the projection's
    value wherever the section reads it (through slices and bitcasts, at coordinates that int8_views maps to the
    tile's own element) is that tile."""

    def bind_projection(self, dot: Instruction, var: str) -> None:
        self.body.declare(var, "s32")
        self._projection = (dot, Value(var, "s32", True))

    def value(self, inst: Instruction, coords, mask):
        if inst is self._projection[0]:
            return self._projection[1]
        return super().value(inst, coords, mask)
