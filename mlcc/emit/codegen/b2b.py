"""Back-to-back dots in one kernel (a b2b fusion, mlcc/hlo/passes/b2b_fusion.py): templates/b2b.py.jinja.

The fusion computes dot1 (with a norm prologue on its A tiles, or rows picked, and a second dot on the same
lhs for a gated MLP), an elementwise epilogue on its result h, dot2 of h and a weight, and dot2's epilogue
(possibly normalizing its output rows). A program takes BLOCK_M rows and BLOCK_N of dot2's columns and walks
h's N1 columns BLOCK_H at a time: the chunk's dot1 K loop, its epilogue over the [BLOCK_M, BLOCK_H] chunk,
and the chunk times the matching BLOCK_H rows of dot2's weight added into dot2's accumulator. So h never
reaches memory and the tiles stay small: dot1's weight in [BLOCK_K, BLOCK_H] tiles, dot2's in [BLOCK_H,
BLOCK_N] ones (shared memory within GPU_SHARED_BYTES on every target; gfx942 has 64 KiB of LDS). BLOCK_N
spans N2 when N2 is at most B2B_MAX_N and the shared memory allows (always when dot2's epilogue normalizes
rows); with more than one tile of dot2's columns each program recomputes its rows' h.

Quantized pairs (b2b_fusion.py): a weight the fusion computes from packed bytes, scales and zero points (a
4-bit decoder's MLP: gate, up and down each) is dequantized as its tile loads (templates/_weight_tile.jinja's
tile macro; dot1's [BLOCK_K, BLOCK_H] tiles, dot2's [BLOCK_H, BLOCK_N] ones, each at most WEIGHT_TILE
elements as a matmul's weight prologue keeps them); two 8-bit integer dots accumulate exactly in int32 (an
unsigned tile shifted to s8 and the shift's products added back, as templates/_int8_dot.jinja does), the
first epilogue requantizing h to 8 bits in registers, with BLOCK_K and BLOCK_H at least IMMA's k of 32.

The rows may be symbolic (a batch or sequence): the kernel takes them as ``sym_`` arguments for its row masks
and the grid is the runtime's expression of them, the tiles chosen for their largest (or planned) value. The
tiles register a Tiling (mlcc/emit/tiling.py): a per-target heuristic, a model of shared memory and registers
per thread, and candidates, so `mlcc tune` searches b2b configs and a tuning database's entries apply.
"""

from __future__ import annotations

import math

from mlcc.emit.codegen.contraction import PICKS, Operands, _acc_dtype, _lhs_norm_section, _norm_epilogue, _precision
from mlcc.emit.codegen.coords import (Axis, by_stride, clamp_pow2, kernel_dims, kernel_strides, merge_axes, numel,
                                      upper)
from mlcc.emit.codegen.fused import (FusedOperand, Lanes, Section, TileEmitter, epilogue, heavy_ops, needs_int64,
                                     pointer_params, read_as_is, sections_ir)
from mlcc.emit.codegen.indexing import Ranges, Size
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, cdiv, grid_size, kernel_symbols, lowering, next_pow2,
                                      render, tl_type, triton_pointer)
from mlcc.emit.target.targets import Target
from mlcc.emit.tiling import Resources, Tiling, is_pow2, register_tiling
from mlcc.emit.matmul_tiles import INT8, MIN_INT8_K, WEIGHT_TILE
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import DTYPE_BYTES, Instruction
from mlcc.hlo.opcodes import ops_with

ROW_NORMS = ops_with("row_norm")
MIN_TILE = 16                  # tl.dot needs every tile dim >= 16
B2B_MAX_N = 256                # dot2's columns a GPU program spans at most (all of a normalized row)
GPU_SHARED_BYTES = 48 * 1024   # the tiles' shared memory on a GPU: under gfx942's 64 KiB of LDS
GATED_MAX_N = 128              # a gated MLP holds two chunk accumulators: fewer columns of dot2's keep registers


def _below_views(x: Instruction) -> Instruction:
    while x.opcode == "bitcast":
        x = x.operands[0]
    return x


def _parts(fusion: Instruction) -> tuple[list[Instruction], Instruction, Instruction | None, Instruction | None]:
    """(dot1 and its gated twin, dot2, dot1's A-tile norm or picked rows, dot2's epilogue norm)."""
    found = heavy_ops(fusion, {"dot"} | ROW_NORMS)
    dots = [d for d in found if d.opcode == "dot"]
    dot2 = next((d for d in dots if any(_below_views(d.operands[0]) is x or _depends(d.operands[0], x)
                                        for x in dots if x is not d)), None)
    if dot2 is None or len(dots) not in (2, 3):
        raise UnsupportedError(f"%{fusion.name}: a b2b fusion needs a dot reading another dot's epilogue")
    first = [d for d in dots if d is not dot2]
    lhs = _below_views(first[0].operands[0])
    a_norm = lhs if lhs.opcode in ROW_NORMS else (first[0].operands[0] if lhs.opcode in PICKS else None)
    norms = [n for n in found if n.opcode in ROW_NORMS and n is not a_norm]
    if len(norms) > 1:
        raise UnsupportedError(f"%{fusion.name}: a b2b fusion normalizes at most dot2's output rows")
    return first, dot2, a_norm, norms[0] if norms else None


def _depends(x: Instruction, target: Instruction) -> bool:
    work, seen = [x], set()
    while work:
        y = work.pop()
        if y is target:
            return True
        if id(y) not in seen and y.opcode != "parameter":
            seen.add(id(y))
            work.extend(y.operands)
    return False


def b2b_problem(m: Size, h: int, n: int, k: int, dtype: str, gated: bool, whole_rows: bool, whole_k: bool,
                ranges: Ranges, prologues: tuple[bool, bool] = (False, False)) -> dict:
    """What a b2b kernel's tiles follow from (Kernel.extra["problem"]): its rows (symbolic ones at the largest
    value of their range, the default size of an unranged symbol; "sizes" keeps them for the grid the runtime
    evaluates), h's columns, dot2's columns, dot1's K, and whether dot2's epilogue normalizes rows (one tile
    spans them) or dot1's A loads do (one K step spans them); "prologues" (only when one is) whether dot1 (and its
    gated twin) or dot2 computes its weight in its loads (a packed weight dequantized)."""
    problem = {"m": upper(m, ranges), "h": h, "n": n, "k": k, "dtype": dtype, "gated": gated,
               "whole_rows": whole_rows, "whole_k": whole_k}
    if not isinstance(m, int):
        problem["sizes"] = (m,)
    if any(prologues):
        problem["prologues"] = prologues
    return problem


def _least(problem: dict) -> int:
    """The least BLOCK_K and BLOCK_H (dot2's K): IMMA's k of 32 for two 8-bit integer dots, else tl.dot's 16."""
    return MIN_INT8_K if problem["dtype"] in INT8 else MIN_TILE


def b2b_shared_bytes(problem: dict, bm: int, bh: int, bn: int, bk: int, stages: int) -> int:
    """Shared memory of a program: each stage of the pipelined K loop buffers an A tile and dot1's weight
    tile (two for a gated MLP), and the chunk step a [BLOCK_H, BLOCK_N] tile of dot2's weight and the
    [BLOCK_M, BLOCK_H] chunk it multiplies."""
    weights = 2 if problem["gated"] else 1
    return (max(stages, 1) * (bm * bk + weights * bk * bh) + bh * bn + bm * bh) * DTYPE_BYTES[problem["dtype"]]


CHUNK_DOT_WORDS = 7  # registers per element of a [BLOCK_M, BLOCK_H] chunk for dot1's product, over the threads


def b2b_registers(problem: dict, bm: int, bh: int, bn: int, bk: int, stages: int, threads: int) -> int:
    """32-bit registers per thread for a program's tiles: dot2's f32 accumulator, the chunk's (two for a gated
    MLP) and the chunk's f32 epilogue value live across the chunk loop; the K loop's A and weight tiles once
    per pipeline stage, the chunk in the element type and dot2's weight tile within a step; and the operand
    fragments of dot1's [BLOCK_M, BLOCK_H] product (f32 dots run on FMA units, which hold a thread's rows and
    columns of both operands), CHUNK_DOT_WORDS per chunk element. Calibrated on Triton's sm_90 binaries of a
    [batch, 256] -> 256 -> 256 FFN (BENCHMARKS.md): the chunk's width costs registers far beyond its tiles'
    size (32 x 64 chunks spilled at every N and K tile; 32 x 32 ones did not)."""
    words = DTYPE_BYTES[problem["dtype"]] / 4
    weights = 2 if problem["gated"] else 1
    f32 = bm * bn + weights * bm * bh + bm * bh
    operands = (max(stages, 1) * (bm * bk + weights * bk * bh) + bm * bh + bh * bn) * words
    fragments = CHUNK_DOT_WORDS * weights * bm * bh
    return math.ceil((f32 + operands + fragments) / threads)


def b2b_config(problem: dict, tiles: dict[str, int], num_warps: int, num_stages: int,
               interpreter: bool = False) -> LaunchConfig:
    """The launch config of given tiles: a program per BLOCK_M rows and BLOCK_N of dot2's columns (axis 0); a
    symbolic row count's grid is the expression the runtime evaluates for each call."""
    bm, bn = tiles["BLOCK_M"], tiles["BLOCK_N"]
    constexprs = {"BLOCK_M": bm, "BLOCK_H": tiles["BLOCK_H"], "BLOCK_N": bn, "BLOCK_K": tiles["BLOCK_K"]}
    if problem["dtype"] == "bf16":
        constexprs["DOT_F32"] = int(interpreter)
    tiles_n = cdiv(max(problem["n"], 1), bn)
    if "sizes" in problem:
        rows = grid_size(problem["sizes"][0], bm)
        programs: int | str = rows if tiles_n == 1 else f"{rows} * {tiles_n}"
    else:
        programs = cdiv(max(problem["m"], 1), bm) * tiles_n
    return LaunchConfig(constexprs, (programs, 1, 1), num_warps=num_warps, num_stages=num_stages)


def b2b_tiles(problem: dict, interpreter: bool) -> LaunchConfig:
    """BLOCK_M rows, BLOCK_H of h's columns per chunk, BLOCK_N of dot2's columns, BLOCK_K of dot1's K. Under the
    interpreter few big programs (h in one chunk); on a GPU 16-row programs (decode and small batches) whose
    tiles keep shared memory (a pipelined K loop's A and weight tiles, dot2's weight tile and the chunk)
    within GPU_SHARED_BYTES. A weight computed in its loads (problem["prologues"]: dot1's and its gated twin's,
    dot2's; a packed weight dequantized) holds a dozen temporaries of its tile's size in registers: its tiles
    keep to WEIGHT_TILE elements (half for f32), as a matmul's weight prologue does (matmul_tiles.py)."""
    m, h, n, k = problem["m"], problem["h"], problem["n"], problem["k"]
    whole_rows, whole_k = problem["whole_rows"], problem["whole_k"]
    least = _least(problem)
    bk_whole = max(least, next_pow2(k))
    if interpreter:
        bm = clamp_pow2(m, MIN_TILE, 64)
        bh = max(least, next_pow2(h))
        bn = max(MIN_TILE, next_pow2(n)) if whole_rows else clamp_pow2(n, MIN_TILE, 256)
        bk = bk_whole if whole_k else clamp_pow2(k, least, 256)
        stages = 1
    else:
        bm = clamp_pow2(m, MIN_TILE, 32)
        bn = max(MIN_TILE, next_pow2(n)) if whole_rows else clamp_pow2(n, MIN_TILE, B2B_MAX_N)
        bk = bk_whole if whole_k else clamp_pow2(k, least, 64)
        stages = 2
        bh = clamp_pow2(h, least, 64)
        if problem["gated"] and not whole_rows:
            bn = min(bn, GATED_MAX_N)

        def shared() -> int:
            return b2b_shared_bytes(problem, bm, bh, bn, bk, stages)
        while bh > least and shared() > GPU_SHARED_BYTES:  # narrower chunks first: h is recomputed by no one
            bh //= 2
        if shared() > GPU_SHARED_BYTES:
            stages = 1
        while not whole_rows and bn > MIN_TILE and shared() > GPU_SHARED_BYTES:  # then fewer of dot2's columns
            bn //= 2
        area = WEIGHT_TILE if problem["dtype"] in ("f16", "bf16") else WEIGHT_TILE // 2
        prologues = problem.get("prologues", (False, False))
        if prologues[0]:  # dot1's computed weight tiles: fewer K steps' elements, then narrower chunks
            while bk * bh > area and bk > MIN_TILE and not whole_k:
                bk //= 2
            while bk * bh > area and bh > MIN_TILE:
                bh //= 2
        if prologues[1]:  # dot2's: narrower chunks, then fewer of its columns
            while bh * bn > area and bh > MIN_TILE:
                bh //= 2
            while not whole_rows and bh * bn > area and bn > MIN_TILE:
                bn //= 2
    return b2b_config(problem, {"BLOCK_M": bm, "BLOCK_H": bh, "BLOCK_N": bn, "BLOCK_K": bk}, 4, stages,
                      interpreter)


def b2b_heuristic(problem: dict, target: Target) -> LaunchConfig:
    """The portable config (b2b_tiles, within GPU_SHARED_BYTES), made smaller only where target could not run
    it: narrower chunks, then fewer of dot2's columns, then fewer rows, until the tiles fit target's shared
    memory and registers (past those a binary spills)."""
    config = b2b_tiles(problem, interpreter=False)
    c = dict(config.constexprs)
    tiles = {"BLOCK_M": c["BLOCK_M"], "BLOCK_H": c["BLOCK_H"], "BLOCK_N": c["BLOCK_N"], "BLOCK_K": c["BLOCK_K"]}
    stages = config.num_stages
    threads = config.num_warps * target.warp_size

    def over() -> bool:
        bm, bh, bn, bk = (tiles[x] for x in ("BLOCK_M", "BLOCK_H", "BLOCK_N", "BLOCK_K"))
        return (b2b_shared_bytes(problem, bm, bh, bn, bk, stages) > target.shared_bytes
                or b2b_registers(problem, bm, bh, bn, bk, stages, threads) > target.registers)
    if not over():
        return config
    for name in ("BLOCK_H", "BLOCK_N", "BLOCK_M"):
        least = _least(problem) if name == "BLOCK_H" else MIN_TILE
        while over() and tiles[name] > least and not (name == "BLOCK_N" and problem["whole_rows"]):
            tiles[name] //= 2
    return b2b_config(problem, tiles, config.num_warps, stages)


def _b2b_resources(problem: dict, config: LaunchConfig, warp_size: int) -> Resources:
    c = config.constexprs
    bm, bh, bn, bk = c["BLOCK_M"], c["BLOCK_H"], c["BLOCK_N"], c["BLOCK_K"]
    return Resources(b2b_shared_bytes(problem, bm, bh, bn, bk, config.num_stages),
                     b2b_registers(problem, bm, bh, bn, bk, config.num_stages, config.num_warps * warp_size))


# (BLOCK_M, BLOCK_H, BLOCK_N) `mlcc tune` tries, each shrunk to the problem (BLOCK_N spans a normalized row;
# BLOCK_K is 32 or 64, or spans a normalized A row); tiling.tuning_candidates drops those past the target's
# shared memory or registers.
B2B_CANDIDATES = ((16, 32, 64), (16, 64, 64), (16, 64, 128), (32, 32, 64), (32, 64, 64), (32, 32, 128),
                  (32, 64, 256), (64, 32, 64), (64, 64, 128))


def b2b_candidates(problem: dict, target: Target) -> list[LaunchConfig]:
    """Each shape of B2B_CANDIDATES shrunk to the problem, K tiles of 32 and 64, 4 warps (8 too for tiles of
    at least 64 x 64 with at most 32 rows: with more rows every 8-warp config measured spilled), stages
    around the target's pipelining."""
    stage_choices = [1, 2] if target.vendor == "amd" else [2, 3]
    whole_n = max(MIN_TILE, next_pow2(problem["n"]))
    configs = []
    for bm, bh, bn in B2B_CANDIDATES:
        for bk in (32, 64):
            tiles = {"BLOCK_M": clamp_pow2(problem["m"], MIN_TILE, bm),
                     "BLOCK_H": clamp_pow2(problem["h"], MIN_TILE, bh),
                     "BLOCK_N": whole_n if problem["whole_rows"] else clamp_pow2(problem["n"], MIN_TILE, bn),
                     "BLOCK_K": max(MIN_TILE, next_pow2(problem["k"])) if problem["whole_k"]
                     else clamp_pow2(problem["k"], MIN_TILE, bk)}
            eight = tiles["BLOCK_M"] * tiles["BLOCK_N"] >= 64 * 64 and tiles["BLOCK_M"] <= 32
            for warps in (4, 8) if eight else (4,):
                for stages in stage_choices:
                    config = b2b_config(problem, tiles, warps, stages)
                    if config not in configs:
                        configs.append(config)
    return configs


def _b2b_check(problem: dict, tiles: dict[str, int]) -> str | None:
    for name in ("BLOCK_M", "BLOCK_H", "BLOCK_N", "BLOCK_K"):
        least = _least(problem) if name in ("BLOCK_H", "BLOCK_K") else MIN_TILE
        if not is_pow2(tiles[name]) or tiles[name] < least:
            return f"{name} must be a power of two >= {least} (tl.dot), not {tiles[name]}"
    if problem["whole_rows"] and tiles["BLOCK_N"] < problem["n"]:
        return f"BLOCK_N must span all {problem['n']} columns (the epilogue normalizes rows), not {tiles['BLOCK_N']}"
    if problem["whole_k"] and tiles["BLOCK_K"] < problem["k"]:
        return f"BLOCK_K must span all {problem['k']} contracted elements (the A loads normalize rows), " \
               f"not {tiles['BLOCK_K']}"
    return None


register_tiling(Tiling(heuristic=b2b_heuristic, tunable=("BLOCK_M", "BLOCK_H", "BLOCK_N", "BLOCK_K"),
                       fixed=("DOT_F32",), config=b2b_config, resources=_b2b_resources, candidates=b2b_candidates,
                       check=_b2b_check,
                       # the 8-bit pairs and the dequantizing kernels keep the heuristic's tiles: the candidates
                       # and the register model are measured on float kernels whose weights are read as stored
                       tunes=lambda problem: problem["dtype"] not in INT8 and "prologues" not in problem),
                "b2b.py.jinja")


@lowering("fusion:b2b")
def lower_b2b(fusion: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    first, dot2, a_norm, norm = _parts(fusion)
    dot1 = first[0]
    gated = first[1] if len(first) > 1 else None
    lhs1 = dot1.operands[0].shape
    rhs1 = _weight(dot1, fusion)
    rhs1_1 = _weight(gated, fusion) if gated is not None else None
    rhs2 = _weight(dot2, fusion)
    lhs = read_as_is(dot1.operands[0], fusion) if a_norm is None else FusedOperand(-1, lhs1)
    out = fusion.shape
    if any(d.attrs["lhs_batch_dims"] for d in (dot1, dot2)) or not all(
            s.is_static for s in (rhs1.shape, rhs2.shape)):
        raise UnsupportedError(f"%{fusion.name}: a b2b fusion takes dots without batch dims, of static weights")
    wide = needs_int64(ranges, fusion, lhs1, rhs1.shape, rhs2.shape, out)
    inputs = tuple(op.shape for op in fusion.operands)
    io1 = Operands(dot1, lhs, rhs1, dot1.shape, inputs, fusion, ranges, lhs_norm=a_norm)
    io2 = Operands(dot2, FusedOperand(-1, dot2.operands[0].shape), rhs2, out, inputs, fusion, ranges, norm=norm)

    # dot1: rows (its lhs free dims), K (contracting, in the lhs's memory order), h's columns (rhs free dims)
    ld, rd, ls, rs = kernel_dims(lhs1), kernel_dims(rhs1.shape), kernel_strides(lhs1), kernel_strides(rhs1.shape)
    lc, rc = list(dot1.attrs["lhs_contracting_dims"]), list(dot1.attrs["rhs_contracting_dims"])
    lf = [d for d in range(lhs1.rank) if d not in lc]
    rf = [d for d in range(rhs1.shape.rank) if d not in rc]
    m_axes = merge_axes(Axis(ld[d], (ls[d],)) for d in lf)
    k_axes = merge_axes(by_stride([Axis(ld[a], (ls[a], rs[b])) for a, b in zip(lc, rc)], ranges))
    h_axes = merge_axes(Axis(rd[d], (rs[d],)) for d in rf)
    rows = numel(ld[d] for d in lf)  # symbolic for a model's batch or sequence: masks and grid take it at run time
    m = upper(rows, ranges)          # the tiles are chosen for its largest (or planned) value
    k, h = numel(ld[d] for d in lc), numel(rd[d] for d in rf)
    # dot2: h's columns are its lhs's trailing contracting dims; its rows are dot1's, its columns the output's
    lhs2 = dot2.operands[0].shape
    ld2, rd2, rs2, os2 = kernel_dims(lhs2), kernel_dims(rhs2.shape), kernel_strides(rhs2.shape), kernel_strides(out)
    lc2, rc2 = list(dot2.attrs["lhs_contracting_dims"]), list(dot2.attrs["rhs_contracting_dims"])
    lf2 = [d for d in range(lhs2.rank) if d not in lc2]
    rf2 = [d for d in range(rhs2.shape.rank) if d not in rc2]
    k2_axes = merge_axes(Axis(ld2[a], (rs2[b],)) for a, b in zip(lc2, rc2))
    out_m_axes = merge_axes(Axis(ld2[d], (os2[j],)) for j, d in enumerate(lf2))
    n_axes = merge_axes(Axis(rd2[d], (rs2[d], os2[len(lf2) + j])) for j, d in enumerate(rf2))
    n = numel(rd2[d] for d in rf2)
    if not all(isinstance(x, int) for x in (k, h, n)):
        raise UnsupportedError(f"%{fusion.name}: a b2b fusion takes symbolic rows only, not [{k}, {h}, {n}] "
                               "contracted or column sizes")

    # the first epilogue: h's value over a [BLOCK_M, BLOCK_H] chunk, the accumulators standing for dot1 (and its twin)
    acc_dtype = _acc_dtype(lhs1.dtype)
    lanes1 = [Lanes("lane_hm", tuple(range(len(lf)))), Lanes("lane_hn", tuple(range(len(lf), dot1.shape.rank)))]
    em = TileEmitter(fusion, "h_", "BLOCK_M, BLOCK_H", kernel_dims(dot1.shape), lanes1, wide, ranges)
    em.bind(dot1, "acc1", acc_dtype)
    if gated is not None:
        em.bind(gated, "acc1_1", acc_dtype)
    hidden_value = _hidden(dot2, dot1)
    em.section(hidden_value, mask="mask_hh")
    (hidden,) = em.sections()
    lanes2 = [Lanes("lane_m", tuple(range(len(lf2)))), Lanes("lane_n", tuple(range(len(lf2), out.rank)))]
    if norm is None:
        post, post_ops = epilogue(fusion, dot2, "acc", acc_dtype, lanes2, "BLOCK_M, BLOCK_N", wide, ranges)
        norm_spec = None
        post_flops = post_ops * m * n
    else:
        norm_spec, post, post_flops = _norm_epilogue(io2, lanes2, list(range(len(lf2), out.rank)))
    a_spec = _lhs_norm_section(io1, k)
    whole_k = a_spec is not None and a_spec["op"] != "rows"
    precision = _precision(lhs1.dtype, rhs1.shape.dtype)
    int8_2 = _precision(lhs2.dtype, rhs2.shape.dtype)["int8_dot"]  # dot2's: the requantized chunk times its weight
    if not precision["use_dot"] or precision["fp8_dot"] or (precision["int8_dot"] is None) != (int8_2 is None):
        raise UnsupportedError(f"%{fusion.name}: a b2b fusion multiplies float or 8-bit integer tiles with tl.dot, "
                               f"not {lhs1.dtype} x {rhs1.shape.dtype} then {lhs2.dtype} x {rhs2.shape.dtype}")
    # a weight computed as it is loaded (a packed 4/8-bit weight dequantized: a weight prologue), over dot1's
    # [BLOCK_K, BLOCK_H] tiles (lane_wk, lane_wn; the gated twin's at the same offsets) or dot2's [BLOCK_H, BLOCK_N]
    # ones (lane_vk, lane_vn)
    weight, weight_ops = _weight_section(fusion, dot1, "w_", "BLOCK_K, BLOCK_H", ("lane_wk", "lane_wn", "mask_w"),
                                         wide, ranges)
    weight_1, weight_1_ops = _weight_section(fusion, gated, "w1_", "BLOCK_K, BLOCK_H",
                                             ("lane_wk", "lane_wn", "mask_w"), wide, ranges)
    weight2, weight2_ops = _weight_section(fusion, dot2, "v_", "BLOCK_H, BLOCK_N", ("lane_vk", "lane_vn", "mask_v"),
                                           wide, ranges)
    scalars = kernel_symbols(*inputs, out, *fusion.called.instructions)
    params = pointer_params(fusion) + [f"sym_{s}" for s in scalars]
    source = render("b2b.py.jinja", kernel_name=kernel_name, m=rows, n=n, k=k, h=h, m_axes=m_axes,
                    out_m_axes=out_m_axes, n_axes=n_axes, k_axes=k_axes, h_axes=h_axes, k2_axes=k2_axes, wide=wide,
                    params=params,
                    lhs=lhs.ptr if a_norm is None else None, rhs=rhs1.ptr,
                    rhs_1=rhs1_1.ptr if rhs1_1 is not None else None, rhs2=rhs2.ptr, a_norm=a_spec,
                    hidden=hidden, h_type=tl_type(lhs2.dtype), epilogue=post, norm=norm_spec,
                    weight=weight, weight_1=weight_1, weight2=weight2, weight_type=tl_type(rhs1.shape.dtype),
                    weight2_type=tl_type(rhs2.shape.dtype), int8_dot2=int8_2, **precision)
    whole_rows = norm is not None
    problem = b2b_problem(rows, h, n, k, lhs1.dtype, gated is not None, whole_rows, whole_k, ranges,
                          prologues=(weight is not None, weight2 is not None))
    gpu, interp = (b2b_tiles(problem, interpreter=i) for i in (False, True))
    # a computed weight's ops per element, once per row tile (as a matmul's weight prologue counts them)
    flops = (2 if gated is None else 4) * m * h * k + 2 * m * h * n + em.ops * m * h + post_flops \
        + (a_spec["ops"] * m * k if a_spec else 0) + (weight_ops + weight_1_ops) * k * h + weight2_ops * h * n
    return Kernel(kernel_name, "b2b.py.jinja", source,
                  [triton_pointer(s) for s in inputs] + [triton_pointer(out)] + ["i32"] * len(scalars), gpu=gpu,
                  interpreter=interp, flops=flops, extra={"problem": problem}, scalars=scalars,
                  body_ir=sections_ir(hidden=hidden, epilogue=post, weight=weight, weight_1=weight_1, weight2=weight2,
                                      **({"a_norm": a_spec["x"]} if a_spec else {})))


def _weight(dot: Instruction, fusion: Instruction) -> FusedOperand:
    """dot's rhs: a fusion parameter read as stored, or (ptr -1) a weight the kernel computes in its loads."""
    x = _below_views(dot.operands[1])
    return read_as_is(dot.operands[1], fusion) if x.opcode == "parameter" else FusedOperand(-1, dot.operands[1].shape)


def _weight_section(fusion: Instruction, dot: Instruction | None, prefix: str, tile: str, names: tuple[str, str, str],
                    wide: bool, ranges: Ranges) -> tuple[Section | None, int]:
    """dot's weight over a tile of it (rows: its one contracting dim, numbered by names[0]; columns: its free
    dims row-major, numbered by names[1]; names[2] the lanes in bounds) when the fusion computes it from its
    parameters; (None, 0) for a weight read as stored."""
    if dot is None or _below_views(dot.operands[1]).opcode == "parameter":
        return None, 0
    weight = dot.operands[1]
    rc = list(dot.attrs["rhs_contracting_dims"])
    if len(rc) != 1:
        raise UnsupportedError(f"%{fusion.name}: a b2b dot computing its weight in its loads needs one contracting dim")
    rf = [d for d in range(weight.shape.rank) if d not in rc]
    lanes = [Lanes(names[0], (rc[0],)), Lanes(names[1], tuple(rf))]
    em = TileEmitter(fusion, prefix, tile, kernel_dims(weight.shape), lanes, wide, ranges)
    em.section(weight, mask=names[2])
    (section,) = em.sections()
    return section, em.ops


def _hidden(dot2: Instruction, dot1: Instruction) -> Instruction:
    """The value dot2 reads as its lhs, below the views: the first epilogue's root, at dot1's output dims."""
    x = _below_views(dot2.operands[0])
    if tuple(x.shape.dims) != tuple(dot1.shape.dims):
        raise UnsupportedError(f"%{x.name}: the first dot's epilogue {x.shape} is not at its dims {dot1.shape}")
    return x
