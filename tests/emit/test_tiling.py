"""Per-target launch configs and `mlcc tune`'s candidates, against the targets' published limits.

The limits are the vendors' figures, not mlcc's table: A100 (sm_80) 164 KiB of shared memory per SM,
H100 (sm_90) 228 KiB, MI300X (gfx942) 64 KiB of LDS with 64-lane wavefronts; a program has at most
1024 threads. Shared memory is estimated as Inductor prunes matmul configs: a buffer of each operand
tile per pipeline stage (attention: the q tile, and a k and a v tile per stage).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlcc.emit.codegen.attention import attention_problem
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig, lower
from mlcc.emit.codegen.lower_module import tilings
from mlcc.emit.matmul_tiles import matmul_problem
from mlcc.emit.target.targets import parse_target
from mlcc.emit.tiling import TILINGS, tuned_config, tuning_candidates
from mlcc.hlo.parser import parse_module
from tests.emit.harness import run_kernel

KIB = 1024
LIMITS = {"sm_80": 164 * KIB, "sm_90": 228 * KIB, "gfx942": 64 * KIB}
WARP = {"sm_80": 32, "sm_90": 32, "gfx942": 64}
BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}

MATMULS = [matmul_problem(4096, 4096, 4096, 1, "f16"), matmul_problem(1000, 3000, 777, 4, "bf16"),
           matmul_problem(512, 512, 512, 1, "f32"), matmul_problem(128, 768, 768, 1, "f16"),
           matmul_problem(256, 768, 3072, 1, "f16", whole_rows=True), matmul_problem(64, 64, 64, 2, "f64")]
ATTENTIONS = [attention_problem(2048, 2048, 128, 128, 32, "f16"), attention_problem(1024, 1024, 64, 64, 16, "bf16"),
              attention_problem(512, 512, 64, 64, 8, "f32"), attention_problem(256, 256, 256, 256, 4, "f16")]


def kernel_of(template: str, problem: dict) -> Kernel:
    tilings()
    generic = LaunchConfig({}, (1, 1, 1))
    return Kernel("k", template, "", [], generic, generic, extra={"problem": problem})


def shared_estimate(kernel: Kernel, config: LaunchConfig) -> int:
    p, c, stages = kernel.extra["problem"], config.constexprs, max(config.num_stages, 1)
    if kernel.template == "attention.py.jinja":
        d, dv = max(16, 2 ** math.ceil(math.log2(p["d"]))), max(16, 2 ** math.ceil(math.log2(p["dv"])))
        return (c["BLOCK_M"] * d + stages * c["BLOCK_N"] * (d + dv)) * BYTES[p["dtype"]]
    return stages * (c["BLOCK_M"] * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"]) * BYTES[p["dtype"]]


def all_kernels() -> list[Kernel]:
    return ([kernel_of("matmul.py.jinja", p) for p in MATMULS] + [kernel_of("conv.py.jinja", MATMULS[1])]
            + [kernel_of("attention.py.jinja", p) for p in ATTENTIONS])


@pytest.mark.parametrize("target", sorted(LIMITS))
def test_candidates_fit_the_targets_shared_memory_and_threads(target):
    for kernel in all_kernels():
        candidates = tuning_candidates(kernel, parse_target(target))
        assert len(candidates) > 1, kernel.extra["problem"]
        assert candidates[0] == TILINGS[kernel.template].heuristic(kernel.extra["problem"], parse_target(target))
        for c in candidates:
            assert shared_estimate(kernel, c) <= LIMITS[target], (kernel.extra["problem"], c)
            assert c.num_warps * WARP[target] <= 1024
            assert all(v > 0 and v & (v - 1) == 0 for n, v in c.constexprs.items() if n.startswith("BLOCK_"))


@pytest.mark.parametrize("kernel", all_kernels(), ids=lambda k: f"{k.template}-{k.extra['problem']['dtype']}")
def test_every_candidate_computes_every_output_tile(kernel):
    p = kernel.extra["problem"]
    for target in LIMITS:
        for c in tuning_candidates(kernel, parse_target(target)):
            if kernel.template == "attention.py.jinja":
                assert c.grid == (math.ceil(p["sq"] / c.constexprs["BLOCK_M"]), p["batch_heads"], 1)
            else:
                tiles = math.ceil(p["m"] / c.constexprs["BLOCK_M"]) * math.ceil(p["n"] / c.constexprs["BLOCK_N"])
                assert c.grid == (tiles, p["batch"], 1)
                if p["whole_rows"]:
                    assert c.constexprs["BLOCK_N"] >= p["n"]


def heuristic(template: str, problem: dict, target: str) -> LaunchConfig:
    tilings()
    return TILINGS[template].heuristic(problem, parse_target(target))


def test_h100_pipelines_deeper_and_tiles_wider_than_a100_for_a_big_half_matmul():
    big = matmul_problem(4096, 4096, 4096, 1, "f16")
    a100, h100 = heuristic("matmul.py.jinja", big, "sm_80"), heuristic("matmul.py.jinja", big, "sm_90")
    assert h100.num_stages > a100.num_stages
    assert h100.constexprs["BLOCK_N"] > a100.constexprs["BLOCK_N"]
    assert h100.grid[0] < a100.grid[0]   # fewer, bigger programs


def test_mi300_pipelines_shallower_and_counts_wavefronts():
    big = matmul_problem(4096, 4096, 4096, 1, "f16")
    a100, mi300 = heuristic("matmul.py.jinja", big, "sm_80"), heuristic("matmul.py.jinja", big, "gfx942")
    assert mi300.num_stages < a100.num_stages
    assert mi300.num_warps * 64 <= a100.num_warps * 32 * 2   # not more threads than twice the A100's program
    att = attention_problem(2048, 2048, 64, 64, 16, "f16")
    assert heuristic("attention.py.jinja", att, "gfx942").num_stages == 1
    # a row kernel keeps its threads per program: half as many 64-lane wavefronts as 32-lane warps
    rows = {"rows": 4096, "row_size": 1024}
    for template in ("row_norm.py.jinja", "reduce.py.jinja"):
        nv, amd = heuristic(template, rows, "sm_80"), heuristic(template, rows, "gfx942")
        assert nv.num_warps * 32 == amd.num_warps * 64 and nv.constexprs == amd.constexprs and nv.grid == amd.grid


def test_a_small_matmul_gets_smaller_tiles_to_fill_the_sms():
    small = matmul_problem(128, 768, 768, 1, "f16")   # 6 programs of 128 x 128: 132 SMs mostly idle
    config = heuristic("matmul.py.jinja", small, "sm_90")
    assert config.grid[0] >= 132 or max(config.constexprs["BLOCK_M"], config.constexprs["BLOCK_N"]) <= 64
    assert config.grid[0] > 6


def test_tuned_config_rejects_tiles_the_problem_or_target_cannot_take():
    rows = kernel_of("matmul.py.jinja", matmul_problem(256, 768, 3072, 1, "f16", whole_rows=True))
    ok = {"BLOCK_M": 16, "BLOCK_N": 1024, "BLOCK_K": 32, "GROUP_M": 8}
    assert tuned_config(rows, parse_target("sm_90"), ok, 4, 2).constexprs["BLOCK_N"] == 1024
    with pytest.raises(ValueError, match="span all 768 columns"):
        tuned_config(rows, parse_target("sm_90"), {**ok, "BLOCK_N": 512}, 4, 2)
    with pytest.raises(ValueError, match="shared memory"):
        tuned_config(rows, parse_target("gfx942"), {**ok, "BLOCK_K": 64}, 4, 2)
    plain = kernel_of("matmul.py.jinja", matmul_problem(512, 512, 512, 1, "f32"))
    with pytest.raises(ValueError, match=">= 16"):
        tuned_config(plain, parse_target("sm_80"), {"BLOCK_M": 8, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 3)
    with pytest.raises(ValueError, match="missing constexpr GROUP_M"):
        tuned_config(plain, parse_target("sm_80"), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 3)
    with pytest.raises(ValueError, match="1024 threads"):
        tuned_config(plain, parse_target("gfx942"), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 32, 2)
    att = kernel_of("attention.py.jinja", attention_problem(512, 512, 64, 64, 8, "f16"))
    with pytest.raises(ValueError, match="BLOCK_D is 64"):
        tuned_config(att, parse_target("sm_90"), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_D": 128}, 4, 2)


DOT = """  %a = f32[40,72]{1,0} parameter(0)
  %b = f32[72,48]{1,0} parameter(1)
  ROOT %d = f32[40,48]{1,0} dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, """ \
    """rhs_contracting_dims={0}"""
ATTENTION = """  %q = f16[2,40,32]{2,1,0} parameter(0)
  %k = f16[2,72,32]{2,1,0} parameter(1)
  %v = f16[2,72,32]{2,1,0} parameter(2)
  ROOT %a = f16[2,40,32]{2,1,0} attention(%q, %k, %v), scale=0.25, causal=true"""


def numpy_reference(body: str, inputs: list[np.ndarray]) -> np.ndarray:
    if body is DOT:
        return inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)
    q, k, v = (x.astype(np.float64) for x in inputs)
    scores = q @ k.transpose(0, 2, 1) * 0.25
    scores[:, np.triu(np.ones((40, 72), dtype=bool), k=72 - 40 + 1)] = -np.inf   # causal, bottom-right aligned
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("body", [DOT, ATTENTION], ids=["dot", "attention"])
def test_every_candidates_tiles_compute_the_same_result_in_the_interpreter(body):
    """Tiles that do not divide the problem, small and large GROUP_M: each candidate is a correct kernel."""
    module = parse_module("ENTRY %main {\n" + body + "\n}")
    inst = module.entry.root
    kernel = lower(inst, "kernel_under_test")
    assert "problem" in kernel.extra   # a tunable lowering records its problem
    rng = np.random.default_rng(0)
    dtype = np.float32 if body is DOT else np.float16
    inputs = [rng.standard_normal(tuple(op.shape.dims)).astype(dtype) for op in inst.operands]
    expected = numpy_reference(body, inputs)
    configs = [c for target in LIMITS for c in tuning_candidates(kernel, parse_target(target))]
    if body is DOT:   # a tuning entry may set any GROUP_M, not only the candidates' 8
        configs += [tuned_config(kernel, parse_target("sm_90"), {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16,
                                                              "GROUP_M": group}, 4, 2) for group in (1, 3)]
    seen = set()
    for config in configs:
        tiles = tuple(sorted(config.constexprs.items()))
        if tiles in seen:   # warps and stages mean nothing to the interpreter
            continue
        seen.add(tiles)
        (out,) = run_kernel(kernel, inst, inputs, config)
        np.testing.assert_allclose(out.astype(np.float64), expected, rtol=2e-3, atol=2e-3, err_msg=str(config))
    assert len(seen) > 2
