"""Tiles, warps and stages of the matmul and conv kernels (templates matmul and conv), per target.

Both kernels are one tiled [M, K] x [K, N] product, a program per BLOCK_M x BLOCK_N output tile
(grid axis 0, visited GROUP_M rows of tiles at a time) and per batch element or group (axis 1), so
one function turns tiles into a launch config (matmul_config) for the heuristics, for tuning
entries and for `mlcc tune`'s candidates alike. The heuristic for a GPU target takes the largest
tiles it allows for the dtype (tensor-core tiles for f16/bf16, smaller ones for f32/f64 on FMA
units), shrinks them until the programs fill the SMs, and pipelines the K loop as deep as the
target's shared memory allows. The interpreter gets few big programs instead.
"""

from __future__ import annotations

import math

from mlcc.emit.codegen.coords import MAX_GRID_Y, clamp_pow2, largest_pow2_at_most, upper
from mlcc.emit.codegen.indexing import NO_RANGES, Ranges, Size
from mlcc.emit.codegen.kernel import LaunchConfig, cdiv, grid_size, next_pow2
from mlcc.emit.target.targets import GENERIC, Target
from mlcc.emit.tiling import Resources, Tiling, is_pow2, register_tiling
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import DTYPE_BYTES
from mlcc.hlo.shape_inference import FP8_DOT

DOT_DTYPES = ("f16", "bf16", "f32", "f64", "s8", "u8", *FP8_DOT)  # tl.dot on these; wider integers multiply and sum
HALF = ("f16", "bf16")
INT8 = ("s8", "u8")      # int32 accumulation on the integer tensor cores, half-sized tiles
FP8 = FP8_DOT            # f32 accumulation on fp8 tensor cores where the target has them (FP8_DOT), f16 elsewhere
GROUP_M = 8
MIN_DOT_TILE = 16        # tl.dot needs every tile dim >= 16
MIN_INT8_K = 32          # and a K tile of 32 for 8-bit integers (IMMA's k32)


def _min_k(dtype: str) -> int:
    return MIN_INT8_K if dtype in INT8 + FP8 else MIN_DOT_TILE


def uses_tl_dot(dtype: str) -> bool:
    return dtype in DOT_DTYPES


def matmul_problem(m: Size, n: Size, k: Size, batch: Size, dtype: str, whole_rows: bool = False,
                   ranges: Ranges = NO_RANGES, weight_prologue: bool = False, whole_k: bool = False,
                   rhs_dtype: str | None = None, min_block_n: int = 0) -> dict:
    """What a matmul or conv kernel's tiles follow from (Kernel.extra["problem"]). Symbolic sizes count at
    the largest value of their range; "sizes" keeps them (m, n, batch) for the grid the runtime evaluates;
    "weight_prologue" (only when set) says the kernel computes its B tiles (a packed weight dequantized in
    the K loop); "rhs_dtype" (only an fp8 product of two fp8 types) the other operand's type."""
    problem = {"m": upper(m, ranges), "n": upper(n, ranges), "k": upper(k, ranges), "batch": upper(batch, ranges),
               "dtype": dtype, "whole_rows": whole_rows}
    if dtype in FP8 and rhs_dtype is not None and rhs_dtype != dtype:
        problem["rhs_dtype"] = rhs_dtype
    if weight_prologue:
        problem["weight_prologue"] = True
    if whole_k:  # the kernel normalizes its A rows as it loads them: one K tile spans a row (BLOCK_K >= k)
        problem["whole_k"] = True
    if min_block_n:  # the epilogue stores partial row statistics of min_block_n columns each (norm_statistics)
        problem["min_block_n"] = min_block_n
    if not all(isinstance(x, int) for x in (m, n, k, batch)):
        problem["sizes"] = (m, n, batch)
    return problem


def matmul_launch(m: Size, n: Size, k: Size, batch: Size, dtype: str, interpreter: bool,
                  whole_rows: bool = False, target: Target = GENERIC, ranges: Ranges = NO_RANGES,
                  weight_prologue: bool = False, whole_k: bool = False, rhs_dtype: str | None = None,
                  min_block_n: int = 0) -> LaunchConfig:
    """Tiles for an [m x k] @ [k x n] product repeated over `batch` (grid axis 1); with whole_rows, one
    tile spans all n columns (an epilogue that normalizes rows), and fewer rows keep the tile's size.
    On a GPU the tiles follow target (GENERIC: what every GPU can run)."""
    problem = matmul_problem(m, n, k, batch, dtype, whole_rows, ranges, weight_prologue, whole_k, rhs_dtype,
                             min_block_n)
    if problem["batch"] > MAX_GRID_Y:
        raise UnsupportedError(f"{batch} batch elements exceed the grid's axis-1 limit of {MAX_GRID_Y}")
    if whole_rows and not uses_tl_dot(dtype):
        raise UnsupportedError(f"a row norm after a {dtype} dot")
    if whole_k and not uses_tl_dot(dtype):
        raise UnsupportedError(f"a row norm in a {dtype} dot's A loads")
    if interpreter:
        tiles, warps, stages = _interpreter_tiles(problem)
    else:
        tiles, warps, stages = _gpu_tiles(problem, target)
    return matmul_config(problem, tiles, warps, stages, interpreter)


def matmul_config(problem: dict, tiles: dict[str, int], num_warps: int, num_stages: int,
                  interpreter: bool = False) -> LaunchConfig:
    """The launch config of given tiles (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M): the grid has a program per
    output tile (axis 0) and per batch element or group (axis 1)."""
    bm, bn = tiles["BLOCK_M"], tiles["BLOCK_N"]
    constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": tiles["BLOCK_K"], "GROUP_M": tiles["GROUP_M"]}
    if problem["dtype"] == "bf16":
        constexprs["DOT_F32"] = int(interpreter)
    if problem["dtype"] in FP8:  # the portable and the interpreter's config: no fp8 tensor cores (matmul_heuristic)
        constexprs["FP8_DOT"] = 0
    if "sizes" in problem:  # symbolic: the runtime evaluates the grid for the sizes of each call
        m, n, batch = problem["sizes"]
        tiles = [grid_size(m, bm), grid_size(n, bn)]
        programs = tiles[0] * tiles[1] if all(isinstance(t, int) for t in tiles) else " * ".join(map(str, tiles))
        return LaunchConfig(constexprs, (programs, grid_size(batch, 1), 1), num_warps=num_warps,
                            num_stages=num_stages)
    programs = cdiv(max(problem["m"], 1), bm) * cdiv(max(problem["n"], 1), bn)
    return LaunchConfig(constexprs, (programs, max(problem["batch"], 1), 1), num_warps=num_warps,
                        num_stages=num_stages)


def _interpreter_tiles(p: dict) -> tuple[dict[str, int], int, int]:
    """Few big programs: numpy matmuls are fast, each program costs ~ms of Python."""
    m, n, k = p["m"], p["n"], p["k"]
    if p["whole_rows"]:
        bn = max(MIN_DOT_TILE, next_pow2(n))
        bk = clamp_pow2(k, _min_k(p["dtype"]), 256)
        bm = clamp_pow2(m, 16, max(256, (1 << 18) // max(bn, bk)))
    elif uses_tl_dot(p["dtype"]):
        bn, bk = clamp_pow2(n, 16, 256), clamp_pow2(k, _min_k(p["dtype"]), 256)
        bm = clamp_pow2(m, 16, max(256, (1 << 18) // max(bn, bk)))
    else:
        bm, bn, bk = _product_tiles(m, n, k, 64, 1 << 18)
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M}, 4, 2
    if p.get("whole_k"):
        bk = max(_min_k(p["dtype"]), next_pow2(k))
    bn = max(bn, p.get("min_block_n", 0))
    warps = 8 if bm * bn >= 128 * 128 else 4
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M}, warps, 3


def _product_tiles(m: int, n: int, k: int, cap_mn: int, budget: int) -> tuple[int, int, int]:
    """Integers multiply without tl.dot: a [BLOCK_M, BLOCK_K, BLOCK_N] product lives in registers."""
    bm, bn = clamp_pow2(m, 1, cap_mn), clamp_pow2(n, 1, cap_mn)
    bk = clamp_pow2(k, 1, largest_pow2_at_most(max(1, budget // (bm * bn))))
    return bm, bn, bk


def _gpu_tiles(p: dict, target: Target) -> tuple[dict[str, int], int, int]:
    """The heuristic: the largest tiles target allows for the dtype (smaller where the problem is), shrunk
    until the programs fill the device's SMs, 8 warps for big tiles, target's pipeline depth; then fewer
    stages (then shorter K and M tiles) until the tiles fit the shared memory."""
    m, n, k, dtype = p["m"], p["n"], p["k"], p["dtype"]
    if not uses_tl_dot(dtype):
        bm, bn, bk = _product_tiles(m, n, k, 32, 8192)
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M}, 4, 2
    half = dtype in HALF + INT8 + FP8
    if p["whole_rows"]:
        bn = max(MIN_DOT_TILE, next_pow2(n))
        bk = clamp_pow2(k, _min_k(dtype), 64 if half else 32)
        bm = clamp_pow2(m, 16, max(MIN_DOT_TILE, (128 * 128 if half else 64 * 64) // bn))
    else:
        cap_m, cap_n, cap_k = target.half_tile if half else target.float_tile
        bm, bn, bk = clamp_pow2(m, 16, cap_m), clamp_pow2(n, 16, cap_n), clamp_pow2(k, _min_k(dtype), cap_k)
        bm, bn = _fill_device(m, n, p["batch"], bm, bn, target)
    bn = max(bn, p.get("min_block_n", 0))  # whole partials of the rows' statistics per tile
    stages = target.matmul_stages
    if p.get("weight_prologue"):
        bk, bn, stages = _weight_prologue_tiles(bk, bn, stages, WEIGHT_TILE if half else WEIGHT_TILE // 2)
    least_k = _min_k(dtype)
    if p.get("whole_k"):  # one K step over whole rows: no pipeline to fill, the row's tile stays
        bk = least_k = max(_min_k(dtype), next_pow2(k))
        stages = 1
        bm = min(bm, max(MIN_DOT_TILE, largest_pow2_at_most((64 * 256 if half else 32 * 256) // bk)))
    while matmul_shared_bytes(p, bm, bn, bk, stages) > target.shared_bytes and stages > 1:
        stages -= 1
    while matmul_shared_bytes(p, bm, bn, bk, stages) > target.shared_bytes and bk > least_k:
        bk //= 2
    while matmul_shared_bytes(p, bm, bn, bk, stages) > target.shared_bytes and bm > MIN_DOT_TILE:
        bm //= 2
    warps = 8 if bm * bn >= target.eight_warps_area else 4
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M}, warps, stages


WEIGHT_TILE = 32 * 64   # elements of a B tile computed in the K loop: each index and nibble temporary is one
WEIGHT_STAGES = 2        # register per element per 128 threads; deeper pipelines keep more tiles' loads live


def _weight_prologue_tiles(bk: int, bn: int, stages: int, area: int) -> tuple[int, int, int]:
    """A B tile computed from packed bytes in the K loop (unpack, zero point, scale) holds a dozen integer
    and float temporaries of the tile's size in registers, and its loads are gathers the pipeliner cannot
    turn into async copies: a [BLOCK_K, BLOCK_N] tile of at most WEIGHT_TILE elements and a shallow pipeline
    keep it out of local memory (at 32 x 64, 4 stages, sm_90 spilled 500 bytes a thread; f32, whose FMA dot
    holds more registers, 20 bytes at 2 stages: it gets half the area)."""
    while bk * bn > area and bk > MIN_DOT_TILE:
        bk //= 2
    while bk * bn > area and bn > MIN_DOT_TILE:
        bn //= 2
    return bk, bn, min(stages, WEIGHT_STAGES)


SPLIT_K_SMS = 108        # SMs of sm_80 (A100), the fewer of the default targets': one IR serves every target
SPLIT_K_MIN_SLICE = 256  # K elements a slice keeps at least: several BLOCK_K steps a program
MAX_SPLIT_K = 16
DECODE_ROWS = 16         # split-K only for decode-sized products (at most this many rows)


def split_k_slices(m: int, n: int, k: int, dtype: str) -> int:
    """How many slices of K a decode-sized dot that computes its weight in the K loop is split into
    (mlcc/hlo/passes/split_k.py), 1 for none: doubled while the output tiles (of the weight-prologue
    tile's width) times the slices still fit the SMs, each slice keeps SPLIT_K_MIN_SLICE of K, and the
    slices divide K."""
    if m > DECODE_ROWS:
        return 1
    tiles = cdiv(n, 64 if dtype in HALF else 32)
    slices = 1
    while (slices * 2 <= MAX_SPLIT_K and tiles * slices * 2 <= SPLIT_K_SMS and k % (slices * 2) == 0
           and k // (slices * 2) >= SPLIT_K_MIN_SLICE):
        slices *= 2
    return slices


DENSE_SPLIT_K_MIN_K = 1024  # a dense dot (its weight read as stored) is split only over a K this long at least


def dense_split_k_slices(m: int, n: int, k: int, dtype: str) -> int:
    """How many slices of K a decode-sized dense dot (its weight read as it is stored: a CNN's classifier,
    M = 1) is split into, 1 for none: as split_k_slices, over the output tiles of the dense matmul's own GPU
    tiles, for float dots whose K is at least DENSE_SPLIT_K_MIN_K (shorter ones finish in a few K steps)."""
    if m > DECODE_ROWS or k < DENSE_SPLIT_K_MIN_K or dtype not in ("f32",) + HALF:
        return 1
    tiles = cdiv(n, matmul_launch(m, n, k, 1, dtype, interpreter=False).constexprs["BLOCK_N"]) * cdiv(m, MIN_DOT_TILE)
    slices = 1
    while (slices * 2 <= MAX_SPLIT_K and tiles * slices * 2 <= SPLIT_K_SMS and k % (slices * 2) == 0
           and k // (slices * 2) >= SPLIT_K_MIN_SLICE):
        slices *= 2
    return slices


def _fill_device(m: int, n: int, batch: int, bm: int, bn: int, target: Target) -> tuple[int, int]:
    """Halve the larger tile dim (down to 64) while there are fewer programs than SMs: a small product in
    big tiles leaves most of the GPU idle."""
    while target.sms and cdiv(m, bm) * cdiv(n, bn) * max(batch, 1) < target.sms and max(bm, bn) > 64:
        if bn >= bm:
            bn //= 2
        else:
            bm //= 2
    return bm, bn


def matmul_shared_bytes(problem: dict, bm: int, bn: int, bk: int, stages: int) -> int:
    """Shared memory of a pipelined K loop: each stage buffers an lhs [BLOCK_M, BLOCK_K] and an rhs
    [BLOCK_K, BLOCK_N] tile (the estimate Inductor prunes its matmul configs with)."""
    return max(stages, 1) * (bm * bk + bk * bn) * DTYPE_BYTES[problem["dtype"]]


def _matmul_resources(problem: dict, config: LaunchConfig, warp_size: int) -> Resources:
    """Registers: the accumulator tile and one K step of each operand, spread over the threads."""
    c = config.constexprs
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    words = DTYPE_BYTES[problem["dtype"]] / 4
    acc_words = 2 if problem["dtype"] == "f64" else 1   # f32 accumulators but for f64
    threads = config.num_warps * warp_size
    registers = (bm * bn * acc_words + (bm * bk + bk * bn) * words) / threads
    return Resources(matmul_shared_bytes(problem, bm, bn, bk, config.num_stages), math.ceil(registers))


# Tile shapes `mlcc tune` tries, (BLOCK_M, BLOCK_N, BLOCK_K): tensor-core tiles for f16/bf16, smaller
# ones for f32/f64 on FMA units; each is shrunk to the problem and filtered by the target's limits.
_HALF_CANDIDATES = ((32, 64, 64), (64, 32, 64), (64, 64, 32), (64, 64, 64), (64, 128, 32), (128, 64, 32),
                    (128, 128, 32), (128, 128, 64), (64, 256, 32), (128, 256, 64), (256, 128, 64))
_FLOAT_CANDIDATES = ((16, 64, 32), (32, 32, 32), (32, 64, 32), (64, 32, 32), (64, 64, 16), (64, 64, 32),
                     (64, 128, 16), (128, 64, 16), (128, 128, 16))


def _stage_choices(target: Target, small_tile: bool) -> list[int]:
    """AMD's pipeliner: off or double-buffered. NVIDIA: around target's depth, one deeper for small tiles."""
    if target.vendor == "amd":
        return [1, 2]
    deeper = [target.matmul_stages + 1] if small_tile else []
    return [target.matmul_stages - 1, target.matmul_stages] + deeper


def _warp_choices(bm: int, bn: int, target: Target) -> list[int]:
    """4 warps for small tiles (2 too for tiny ones), 8 for big ones, both in between."""
    area = bm * bn
    if area * 2 <= target.eight_warps_area:
        return [4] if area > 32 * 32 else [2, 4]
    return [8] if area >= 2 * target.eight_warps_area else [4, 8]


def matmul_candidates(problem: dict, target: Target) -> list[LaunchConfig]:
    """The configs `mlcc tune` times: each candidate tile shrunk to the problem, with the warps that suit its
    size and the stages that suit the target (tiling.tuning_candidates drops those that do not fit)."""
    m, n, k, dtype = problem["m"], problem["n"], problem["k"], problem["dtype"]
    if problem["whole_rows"]:   # one tile spans the columns: only its height, K tile, warps and stages vary
        bn = max(MIN_DOT_TILE, next_pow2(n))
        shapes = [(bm, bn, bk) for bm in (16, 32, 64, 128) for bk in (16, 32, 64)]
    else:
        shapes = list(_HALF_CANDIDATES if dtype in HALF + INT8 + FP8 else _FLOAT_CANDIDATES)
    configs = []
    for bm, bn, bk in shapes:
        bm, bk = clamp_pow2(m, 16, bm), clamp_pow2(k, _min_k(dtype), max(bk, _min_k(dtype)))
        if problem.get("whole_k"):
            bk = max(_min_k(dtype), next_pow2(k))
        if not problem["whole_rows"]:
            bn = max(clamp_pow2(n, 16, bn), problem.get("min_block_n", 0))
        tiles = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M}
        for warps in _warp_choices(bm, bn, target):
            for stages in _stage_choices(target, bm * bn <= 64 * 64):
                config = matmul_config(problem, tiles, warps, stages)
                if config not in configs:
                    configs.append(config)
    return configs


def _matmul_check(problem: dict, tiles: dict[str, int]) -> str | None:
    for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        least = _min_k(problem["dtype"]) if name == "BLOCK_K" else MIN_DOT_TILE
        if not is_pow2(tiles[name]) or tiles[name] < least:
            return f"{name} must be a power of two >= {least} (tl.dot), not {tiles[name]}"
    if tiles["GROUP_M"] < 1:
        return f"GROUP_M must be at least 1, not {tiles['GROUP_M']}"
    if problem.get("whole_k") and tiles["BLOCK_K"] < problem["k"]:
        return f"BLOCK_K must span all {problem['k']} contracted elements (the A loads normalize rows), " \
               f"not {tiles['BLOCK_K']}"
    if tiles["BLOCK_N"] % problem.get("min_block_n", 1):
        return f"BLOCK_N must be a multiple of {problem['min_block_n']} (the epilogue stores row statistics per " \
               f"{problem['min_block_n']} columns), not {tiles['BLOCK_N']}"
    if problem["whole_rows"] and tiles["BLOCK_N"] < problem["n"]:
        return f"BLOCK_N must span all {problem['n']} columns (the epilogue normalizes rows), not {tiles['BLOCK_N']}"
    return None


WGMMA_ROWS = 64          # rows of a warp group's wgmma: sm_90 runs a smaller tile on mma.sync


def matmul_heuristic(problem: dict, target: Target) -> LaunchConfig:
    tiles, warps, stages = _gpu_tiles(problem, target)
    fp8_dot = problem["dtype"] in FP8 and target.multiplies_fp8(problem["dtype"],
                                                                problem.get("rhs_dtype", problem["dtype"]))
    if fp8_dot and target.vendor == "nvidia" and tiles["BLOCK_M"] * tiles["BLOCK_N"] <= 128 * 256 // 4:
        # Triton's mma.sync path on sm_90 upcasts fp8 to f16: a short product's rows pad to a wgmma tile instead
        tiles["BLOCK_M"] = max(tiles["BLOCK_M"], WGMMA_ROWS)
    config = matmul_config(problem, tiles, warps, stages)
    if problem["dtype"] in FP8:
        config.constexprs["FP8_DOT"] = int(fp8_dot)
    return config


register_tiling(Tiling(heuristic=matmul_heuristic, tunable=("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"),
                       fixed=("DOT_F32", "FP8_DOT"), config=matmul_config,
                       resources=_matmul_resources, candidates=matmul_candidates, check=_matmul_check,
                       # fp8 is not: its FP8_DOT follows from the target, which a tuning entry's config lacks
                       tunes=lambda problem: uses_tl_dot(problem["dtype"]) and problem["dtype"] not in FP8),
                "matmul.py.jinja", "conv.py.jinja")
