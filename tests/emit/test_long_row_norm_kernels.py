"""Kernels of norms whose rows are longer than a K tile (mlcc/hlo/passes/a_prologue.py, norm_statistics.py), under
Triton's interpreter at the interpreter's and at GPU tiles, against numpy in f64:
- a GEMM normalizing its A tiles that computes its rows' statistics in a loop before its K loop;
- a GEMM whose epilogue also stores its result rows' statistics as per-64-column partials (row-stats);
- a GEMM normalizing its A tiles from such partials;
- a row-stats kernel of its own (templates/row_stats.py.jinja)."""

from __future__ import annotations

import numpy as np
import pytest

from mlcc.emit.codegen.kernel import lower
from tests.emit.harness import run_kernel
from tests.emit.test_fusion_kernels import fusion

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ROWS, ROW, N = 19, 576, 24  # a row of 9 partials of 64 (no power of two), more than one K tile at any tiles
TOL = {"f32": (1e-4, 1e-4), "f16": (2e-2, 2e-2)}


def _norm_gemm(norm: str, stats: bool) -> str:
    """[ROWS, ROW] rows normalized (their statistics given as partials with ``stats``), then @ w [ROW, N]."""
    lay = norm == "layer-norm"
    shape = f"f32[{ROWS},{ROW // 64}{',2' if lay else ''}]{{{'2,1,0' if lay else '1,0'}}}"
    params = ["%p0", "%p1"] + (["%p2"] if lay else [])
    w = len(params)
    decl = "\n".join(f"  %p{i} = f32[{ROW}]{{0}} parameter({i})" for i in range(1, w))
    entry = "\n".join(f"  %e{i} = f32[{ROW}]{{0}} parameter({i})" for i in range(1, w))
    extra = f"\n  %p{w + 1} = {shape} parameter({w + 1})" if stats else ""
    extra_entry = f"\n  %e{w + 1} = {shape} parameter({w + 1})" if stats else ""
    ops = ", ".join(params + ([f"%p{w + 1}"] if stats else []))
    reads = ", ".join(["%e0"] + [f"%e{i}" for i in range(1, w)] + [f"%e{w}"] + ([f"%e{w + 1}"] if stats else []))
    return f"""
%fused {{
  %p0 = f32[{ROWS},{ROW}]{{1,0}} parameter(0)
{decl}
  %p{w} = f32[{ROW},{N}]{{1,0}} parameter({w}){extra}
  %n = f32[{ROWS},{ROW}]{{1,0}} {norm}({ops}), dimensions={{1}}, epsilon=1e-05
  ROOT %d = f32[{ROWS},{N}]{{1,0}} dot(%n, %p{w}), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
}}
ENTRY %main {{
  %e0 = f32[{ROWS},{ROW}]{{1,0}} parameter(0)
{entry}
  %e{w} = f32[{ROW},{N}]{{1,0}} parameter({w}){extra_entry}
  ROOT %f = f32[{ROWS},{N}]{{1,0}} fusion({reads}), kind=output, calls=%fused
}}
"""


def _partials(x: np.ndarray, norm: str) -> np.ndarray:
    parts = x.reshape(x.shape[0], -1, 64)
    if norm == "rms-norm":
        return (parts * parts).sum(-1)
    mean = parts.mean(-1)
    return np.stack([mean, ((parts - mean[..., None]) ** 2).sum(-1)], -1)


def _normalized(x: np.ndarray, params: list[np.ndarray], norm: str) -> np.ndarray:
    if norm == "rms-norm":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * params[0]
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * params[0] + params[1]


@pytest.mark.parametrize("gpu_tiles", [False, True])
@pytest.mark.parametrize("stats", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("norm", ["layer-norm", "rms-norm"])
def test_a_gemm_normalizes_rows_longer_than_its_k_tile(norm, dtype, stats, gpu_tiles):
    text = _norm_gemm(norm, stats)
    if dtype == "f16":  # the activations, scale, bias and weights; the statistics stay f32
        text = text.replace(f"f32[{ROWS},{ROW}]", f"f16[{ROWS},{ROW}]").replace(f"f32[{ROW}]", f"f16[{ROW}]") \
            .replace(f"f32[{ROW},{N}]", f"f16[{ROW},{N}]").replace(f"f32[{ROWS},{N}]", f"f16[{ROWS},{N}]")
    inst = fusion(text)
    kernel = lower(inst, "k")
    config = kernel.gpu if gpu_tiles else kernel.interpreter
    assert config.constexprs["BLOCK_K"] < ROW  # several K tiles a row
    assert ("s_m2" in kernel.source or "s_squares" in kernel.source) == stats
    assert kernel.source.count(f"for k_start in range(0, {ROW}, BLOCK_K)") == (1 if stats else 2)
    rng = np.random.default_rng(5)
    kind = np.float16 if dtype == "f16" else np.float32
    x = (3 + rng.standard_normal((ROWS, ROW))).astype(kind)  # far from zero mean: the partials' means differ
    params = [(1 + 0.1 * rng.standard_normal(ROW)).astype(kind) for _ in range(2 if norm == "layer-norm" else 1)]
    w = (rng.standard_normal((ROW, N)) / np.sqrt(ROW)).astype(kind)
    x64 = x.astype(np.float64)
    inputs = [x, *params, w] + ([_partials(x64, norm).astype(np.float32)] if stats else [])
    (got,) = run_kernel(kernel, inst, inputs, config)
    y = _normalized(x64, [p.astype(np.float64) for p in params], norm)
    if dtype == "f16":
        y = y.astype(np.float16).astype(np.float64)  # the norm's result is f16, as the dot reads it
    np.testing.assert_allclose(got.astype(np.float64), y @ w.astype(np.float64), *TOL[dtype])


def _residual_gemm(moments: str) -> str:
    """x @ w + residual, [ROWS, ROW], returned with its rows' statistics."""
    stats = f"f32[{ROWS},{ROW // 64},2]{{2,1,0}}" if moments == "mean-m2" else f"f32[{ROWS},{ROW // 64}]{{1,0}}"
    return f"""
%fused {{
  %p0 = f32[{ROWS},{N}]{{1,0}} parameter(0)
  %p1 = f32[{N},{ROW}]{{1,0}} parameter(1)
  %p2 = f32[{ROWS},{ROW}]{{1,0}} parameter(2)
  %d = f32[{ROWS},{ROW}]{{1,0}} dot(%p0, %p1), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
  %h = f32[{ROWS},{ROW}]{{1,0}} add(%d, %p2)
  %s = {stats} row-stats(%h), dimensions={{1}}, part=64, moments={moments}
  ROOT %t = (f32[{ROWS},{ROW}]{{1,0}}, {stats}) tuple(%h, %s)
}}
ENTRY %main {{
  %x = f32[{ROWS},{N}]{{1,0}} parameter(0)
  %w = f32[{N},{ROW}]{{1,0}} parameter(1)
  %r = f32[{ROWS},{ROW}]{{1,0}} parameter(2)
  ROOT %f = (f32[{ROWS},{ROW}]{{1,0}}, {stats}) fusion(%x, %w, %r), kind=output, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
@pytest.mark.parametrize("moments", ["mean-m2", "squares"])
def test_a_gemm_stores_its_rows_statistics_with_its_result(moments, gpu_tiles):
    inst = fusion(_residual_gemm(moments))
    kernel = lower(inst, "k")
    config = kernel.gpu if gpu_tiles else kernel.interpreter
    assert config.constexprs["BLOCK_N"] % 64 == 0 and config.constexprs["BLOCK_N"] < ROW  # several tiles a row
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((ROWS, N)).astype(np.float32), rng.standard_normal((N, ROW)).astype(np.float32)
    r = (3 + rng.standard_normal((ROWS, ROW))).astype(np.float32)
    h, stats = run_kernel(kernel, inst, [x, w, r], config)
    want = x.astype(np.float64) @ w.astype(np.float64) + r
    np.testing.assert_allclose(h, want, rtol=1e-4, atol=1e-4)
    partials = _partials(h.astype(np.float64), "layer-norm" if moments == "mean-m2" else "rms-norm")
    np.testing.assert_allclose(stats, partials, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("moments", ["mean-m2", "squares"])
def test_a_row_stats_of_its_own(moments):
    shape = f"f32[3,5,{ROW // 64}{',2' if moments == 'mean-m2' else ''}]"
    layout = "{3,2,1,0}" if moments == "mean-m2" else "{2,1,0}"
    inst = fusion(f"""
ENTRY %main {{
  %x = f32[3,5,{ROW}]{{2,1,0}} parameter(0)
  ROOT %s = {shape}{layout} row-stats(%x), dimensions={{2}}, part=64, moments={moments}
}}
""")
    kernel = lower(inst, "k")
    x = (3 + np.random.default_rng(8).standard_normal((3, 5, ROW))).astype(np.float32)
    for config in (kernel.interpreter, kernel.gpu):
        (got,) = run_kernel(kernel, inst, [x], config)
        want = _partials(x.reshape(15, ROW).astype(np.float64), "layer-norm" if moments == "mean-m2" else "rms-norm")
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-3)


def test_a_gemm_storing_row_statistics_gets_tiles_of_whole_partials():
    # 16 x 512 (a decode-sized residual GEMM): the heuristic would narrow BLOCK_N to fill the device's SMs;
    # each 64-column partial must have one program, so BLOCK_N stays a multiple of 64, on every target and in
    # every config `mlcc tune` would time
    from mlcc.emit.matmul_tiles import _matmul_check, matmul_candidates, matmul_heuristic, matmul_launch, matmul_problem
    from mlcc.emit.target.targets import TARGETS

    problem = matmul_problem(16, 512, 512, 1, "f32", min_block_n=64)
    for interpreter in (False, True):
        assert matmul_launch(16, 512, 512, 1, "f32", interpreter, min_block_n=64).constexprs["BLOCK_N"] % 64 == 0
    for target in TARGETS.values():
        assert matmul_heuristic(problem, target).constexprs["BLOCK_N"] % 64 == 0
        assert all(c.constexprs["BLOCK_N"] % 64 == 0 for c in matmul_candidates(problem, target))
    assert "a multiple of 64" in _matmul_check(problem, {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8})
    assert _matmul_check(problem, {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}) is None


def _gated_norm_gemm(norm: str, stats: bool, row: int) -> str:
    """A gated MLP's first GEMM on normalized rows: silu(n @ wg) * (n @ wu), n the [ROWS, row] rows normalized
    (their statistics given as partials with ``stats``); the gate and up dots share the normalized A tiles."""
    lay = norm == "layer-norm"
    shape = f"f32[{ROWS},{row // 64}{',2' if lay else ''}]{{{'2,1,0' if lay else '1,0'}}}"
    w = 3 if lay else 2
    decl = "\n".join(f"  %p{i} = f32[{row}]{{0}} parameter({i})" for i in range(1, w))
    entry = "\n".join(f"  %e{i} = f32[{row}]{{0}} parameter({i})" for i in range(1, w))
    extra = f"\n  %p{w + 2} = {shape} parameter({w + 2})" if stats else ""
    extra_entry = f"\n  %e{w + 2} = {shape} parameter({w + 2})" if stats else ""
    ops = ", ".join([f"%p{i}" for i in range(w)] + ([f"%p{w + 2}"] if stats else []))
    reads = ", ".join(f"%e{i}" for i in range(w + 3 if stats else w + 2))
    out = f"f32[{ROWS},{N}]{{1,0}}"
    dims = "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}"
    return f"""
%fused {{
  %p0 = f32[{ROWS},{row}]{{1,0}} parameter(0)
{decl}
  %p{w} = f32[{row},{N}]{{1,0}} parameter({w})
  %p{w + 1} = f32[{row},{N}]{{1,0}} parameter({w + 1}){extra}
  %n = f32[{ROWS},{row}]{{1,0}} {norm}({ops}), dimensions={{1}}, epsilon=1e-05
  %gate = {out} dot(%n, %p{w}), {dims}
  %sig = {out} logistic(%gate)
  %silu = {out} multiply(%gate, %sig)
  %up = {out} dot(%n, %p{w + 1}), {dims}
  ROOT %h = {out} multiply(%silu, %up)
}}
ENTRY %main {{
  %e0 = f32[{ROWS},{row}]{{1,0}} parameter(0)
{entry}
  %e{w} = f32[{row},{N}]{{1,0}} parameter({w})
  %e{w + 1} = f32[{row},{N}]{{1,0}} parameter({w + 1}){extra_entry}
  ROOT %f = {out} fusion({reads}), kind=output, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
@pytest.mark.parametrize("row, stats", [(ROW, False), (ROW, True), (64, False)])
@pytest.mark.parametrize("norm", ["layer-norm", "rms-norm"])
def test_a_gated_pair_normalizes_the_a_tiles_both_dots_share(norm, row, stats, gpu_tiles):
    # LLaMA's MLP norm applied in its gate | up GEMM's A loads: rows longer than a K tile take the statistics
    # loop (or the producer's partials), a 64-element row one K tile; one normalized A tile feeds both dots
    inst = fusion(_gated_norm_gemm(norm, stats, row))
    kernel = lower(inst, "k")
    config = kernel.gpu if gpu_tiles else kernel.interpreter
    assert (config.constexprs["BLOCK_K"] < row) == (row > 64)
    assert kernel.source.count(f"for k_start in range(0, {row}, BLOCK_K)") == (2 if row > 64 and not stats else 1)
    assert "acc_1 = tl.dot(a, b_1, acc_1" in kernel.source
    rng = np.random.default_rng(9)
    x = (3 + rng.standard_normal((ROWS, row))).astype(np.float32)
    params = [(1 + 0.1 * rng.standard_normal(row)).astype(np.float32) for _ in range(2 if norm == "layer-norm" else 1)]
    wg, wu = ((rng.standard_normal((row, N)) / np.sqrt(row)).astype(np.float32) for _ in range(2))
    x64 = x.astype(np.float64)
    inputs = [x, *params, wg, wu] + ([_partials(x64, norm).astype(np.float32)] if stats else [])
    (got,) = run_kernel(kernel, inst, inputs, config)
    y = _normalized(x64, [p.astype(np.float64) for p in params], norm)
    gate, up = y @ wg.astype(np.float64), y @ wu.astype(np.float64)
    np.testing.assert_allclose(got, gate / (1 + np.exp(-gate)) * up, *TOL["f32"])


@pytest.mark.parametrize("gpu_tiles", [False, True])
@pytest.mark.parametrize("moments", ["mean-m2", "squares"])
def test_a_split_k_reduction_stores_its_rows_statistics_with_its_result(moments, gpu_tiles):
    # the sum of a split-K GEMM's 3 K slices plus the residual (LLaMA's MLP down projection), [ROWS, ROW], with
    # its rows' partials: each program's BLOCK_O outputs are whole partials, even where the reduction is long
    # (BLOCK_R would otherwise leave a program fewer than 64 outputs)
    stats = f"f32[{ROWS},{ROW // 64},2]{{2,1,0}}" if moments == "mean-m2" else f"f32[{ROWS},{ROW // 64}]{{1,0}}"
    for slices in (3, 300):
        inst = fusion(f"""
%fused {{
  %p0 = f32[{ROWS},{ROW}]{{1,0}} parameter(0)
  %p1 = f32[{slices},{ROWS},{ROW}]{{2,1,0}} parameter(1)
  %sum = f32[{ROWS},{ROW}]{{1,0}} reduce(%p1), dimensions={{0}}, kind=add
  %h = f32[{ROWS},{ROW}]{{1,0}} add(%p0, %sum)
  %s = {stats} row-stats(%h), dimensions={{1}}, part=64, moments={moments}
  ROOT %t = (f32[{ROWS},{ROW}]{{1,0}}, {stats}) tuple(%h, %s)
}}
ENTRY %main {{
  %r = f32[{ROWS},{ROW}]{{1,0}} parameter(0)
  %p = f32[{slices},{ROWS},{ROW}]{{2,1,0}} parameter(1)
  ROOT %f = (f32[{ROWS},{ROW}]{{1,0}}, {stats}) fusion(%r, %p), kind=input, calls=%fused
}}
""")
        kernel = lower(inst, "k")
        config = kernel.gpu if gpu_tiles else kernel.interpreter
        assert config.constexprs["BLOCK_O"] % 64 == 0
        rng = np.random.default_rng(10)
        r = (3 + rng.standard_normal((ROWS, ROW))).astype(np.float32)
        p = rng.standard_normal((slices, ROWS, ROW)).astype(np.float32)
        h, got = run_kernel(kernel, inst, [r, p], config)
        want = r.astype(np.float64) + p.astype(np.float64).sum(0)
        np.testing.assert_allclose(h, want, rtol=1e-4, atol=1e-3)
        partials = _partials(h.astype(np.float64), "layer-norm" if moments == "mean-m2" else "rms-norm")
        np.testing.assert_allclose(got, partials, rtol=1e-4, atol=1e-3)
