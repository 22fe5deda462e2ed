"""b2b fusions (mlcc/emit/codegen/b2b.py, templates/b2b.py.jinja): two dots and the epilogues around them in one
kernel, run under Triton's interpreter with the interpreter's tiles and with the GPU's (several chunks of the
intermediate, several tiles of the second dot's columns) and compared with the reference evaluator's value of
the fusion, i.e. of the unfused computation."""

from __future__ import annotations

import numpy as np
import pytest

import mlcc.emit.codegen.b2b  # noqa: F401  (registers fusion:b2b)
from mlcc.emit.codegen.kernel import cdiv, lower
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.ir import Instruction
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOLERANCE = {"f32": 5e-5, "f16": 3e-3, "bf16": 3e-2}


def fusion(text: str) -> Instruction:
    module = parse_module(text)
    verify_module(module)
    return module.entry.root


def check(inst: Instruction, gpu_tiles: bool, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    inputs = [(rng.standard_normal(tuple(int(d) for d in op.shape.dims)) * 0.5).astype(numpy_dtype(op.shape.dtype))
              for op in inst.operands]
    kernel = lower(inst, "b2b_under_test")
    assert kernel.template == "b2b.py.jinja"
    (got,) = run_kernel(kernel, inst, inputs, kernel.gpu if gpu_tiles else None)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = TOLERANCE[inst.shape.dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


DOTS = "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}"


def ffn(t: str, m: int, k: int, h: int, n: int, w1_layout: str = "1,0") -> str:
    """x [m,k] @ w1 [k,h] + b1 -> gelu -> @ w2 [h,n] + b2 + a residual [m,n], stored transposed."""
    return f"""
%fused {{
  %p0 = {t}[{m},{k}]{{1,0}} parameter(0)
  %p1 = {t}[{k},{h}]{{{w1_layout}}} parameter(1)
  %p2 = {t}[{h}]{{0}} parameter(2)
  %p3 = {t}[{h},{n}]{{1,0}} parameter(3)
  %p4 = {t}[{n}]{{0}} parameter(4)
  %p5 = {t}[{m},{n}]{{1,0}} parameter(5)
  %d1 = {t}[{m},{h}]{{1,0}} dot(%p0, %p1), {DOTS}
  %b1 = {t}[{m},{h}]{{1,0}} broadcast(%p2), dimensions={{1}}
  %a1 = {t}[{m},{h}]{{1,0}} add(%d1, %b1)
  %g = {t}[{m},{h}]{{1,0}} gelu(%a1), approximate=none
  %d2 = {t}[{m},{n}]{{1,0}} dot(%g, %p3), {DOTS}
  %b2 = {t}[{m},{n}]{{1,0}} broadcast(%p4), dimensions={{1}}
  %a2 = {t}[{m},{n}]{{1,0}} add(%d2, %b2)
  ROOT %r = {t}[{m},{n}]{{1,0}} add(%a2, %p5)
}}
ENTRY %main {{
  %x = {t}[{m},{k}]{{1,0}} parameter(0)
  %w1 = {t}[{k},{h}]{{{w1_layout}}} parameter(1)
  %bias1 = {t}[{h}]{{0}} parameter(2)
  %w2 = {t}[{h},{n}]{{1,0}} parameter(3)
  %bias2 = {t}[{n}]{{0}} parameter(4)
  %res = {t}[{m},{n}]{{1,0}} parameter(5)
  ROOT %f = {t}[{m},{n}]{{0,1}} fusion(%x, %w1, %bias1, %w2, %bias2, %res), kind=b2b, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_ffn_bias_gelu_bias_residual_in_several_chunks_and_column_tiles(gpu_tiles):
    # h = 200: the GPU's chunks of 64 (or less) leave a partial last one; n = 300: two tiles of dot2's columns
    # (at most 256 a program), each program recomputing its rows' intermediate; 37 rows: a partial row tile;
    # w1 stored column-major
    inst = fusion(ffn("f32", 37, 40, 200, 300, w1_layout="0,1"))
    kernel = lower(inst, "k")
    c = kernel.gpu.constexprs
    assert c["BLOCK_H"] < 200 and c["BLOCK_N"] < 300
    assert kernel.gpu.grid[0] == cdiv(37, c["BLOCK_M"]) * cdiv(300, c["BLOCK_N"]) > cdiv(37, c["BLOCK_M"])
    check(inst, gpu_tiles)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_ffn(dtype):
    check(fusion(ffn(dtype, 16, 32, 128, 32)), gpu_tiles=True)


DECODE_MLP = f"""
%fused {{
  %p0 = f32[1,32]{{1,0}} parameter(0)
  %p1 = f32[32]{{0}} parameter(1)
  %p2 = f32[32]{{0}} parameter(2)
  %p3 = f32[32,128]{{1,0}} parameter(3)
  %p4 = f32[128,32]{{1,0}} parameter(4)
  %n = f32[1,32]{{1,0}} layer-norm(%p0, %p1, %p2), dimensions={{1}}, epsilon=1e-5
  %d1 = f32[1,128]{{1,0}} dot(%n, %p3), {DOTS}
  %g = f32[1,128]{{1,0}} gelu(%d1), approximate=tanh
  %v = f32[1,1,128]{{2,1,0}} bitcast(%g)
  %v2 = f32[1,128]{{1,0}} bitcast(%v)
  ROOT %d2 = f32[1,32]{{1,0}} dot(%v2, %p4), {DOTS}
}}
ENTRY %main {{
  %x = f32[1,32]{{1,0}} parameter(0)
  %g = f32[32]{{0}} parameter(1)
  %b = f32[32]{{0}} parameter(2)
  %w1 = f32[32,128]{{1,0}} parameter(3)
  %w2 = f32[128,32]{{1,0}} parameter(4)
  ROOT %f = f32[1,32]{{1,0}} fusion(%x, %g, %b, %w1, %w2), kind=b2b, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_decode_mlp_layer_norm_in_the_a_loads_then_gelu_then_a_bare_second_dot(gpu_tiles):
    # a GPT-2 decode step's MLP: one row, LayerNorm applied as the first dot loads its A tile
    inst = fusion(DECODE_MLP)
    kernel = lower(inst, "k")
    assert kernel.gpu.constexprs["BLOCK_K"] >= 32  # the A loads normalize whole rows
    check(inst, gpu_tiles)


GATED = f"""
%fused {{
  %p0 = f32[24,32]{{1,0}} parameter(0)
  %p1 = f32[32,96]{{1,0}} parameter(1)
  %p2 = f32[32,96]{{1,0}} parameter(2)
  %p3 = f32[96,32]{{1,0}} parameter(3)
  %p4 = f32[24,32]{{1,0}} parameter(4)
  %p5 = f32[32]{{0}} parameter(5)
  %gate = f32[24,96]{{1,0}} dot(%p0, %p1), {DOTS}
  %up = f32[24,96]{{1,0}} dot(%p0, %p2), {DOTS}
  %s = f32[24,96]{{1,0}} logistic(%gate)
  %silu = f32[24,96]{{1,0}} multiply(%gate, %s)
  %h = f32[24,96]{{1,0}} multiply(%silu, %up)
  %d2 = f32[24,32]{{1,0}} dot(%h, %p3), {DOTS}
  %x = f32[24,32]{{1,0}} add(%d2, %p4)
  ROOT %y = f32[24,32]{{1,0}} rms-norm(%x, %p5), dimensions={{1}}, epsilon=1e-6
}}
ENTRY %main {{
  %a = f32[24,32]{{1,0}} parameter(0)
  %wg = f32[32,96]{{1,0}} parameter(1)
  %wu = f32[32,96]{{1,0}} parameter(2)
  %wd = f32[96,32]{{1,0}} parameter(3)
  %res = f32[24,32]{{1,0}} parameter(4)
  %scale = f32[32]{{0}} parameter(5)
  ROOT %f = f32[24,32]{{1,0}} fusion(%a, %wg, %wu, %wd, %res, %scale), kind=b2b, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_gated_silu_mlp_then_residual_and_rms_norm_of_the_output_rows(gpu_tiles):
    # LLaMA's MLP: silu(gate) * up from two accumulators over one lhs tile, the down projection, the residual
    # and the next RMSNorm over the 32 output columns (one tile spans them)
    inst = fusion(GATED)
    kernel = lower(inst, "k")
    assert kernel.gpu.constexprs["BLOCK_N"] >= 32
    check(inst, gpu_tiles)


NORMED_GATED = f"""
%fused {{
  %p0 = f32[24,32]{{1,0}} parameter(0)
  %p1 = f32[32]{{0}} parameter(1)
  %p2 = f32[32,96]{{1,0}} parameter(2)
  %p3 = f32[32,96]{{1,0}} parameter(3)
  %p4 = f32[96,32]{{1,0}} parameter(4)
  %n = f32[24,32]{{1,0}} rms-norm(%p0, %p1), dimensions={{1}}, epsilon=1e-6
  %gate = f32[24,96]{{1,0}} dot(%n, %p2), {DOTS}
  %s = f32[24,96]{{1,0}} logistic(%gate)
  %silu = f32[24,96]{{1,0}} multiply(%gate, %s)
  %up = f32[24,96]{{1,0}} dot(%n, %p3), {DOTS}
  %h = f32[24,96]{{1,0}} multiply(%silu, %up)
  %d2 = f32[24,32]{{1,0}} dot(%h, %p4), {DOTS}
  ROOT %x = f32[24,32]{{1,0}} add(%d2, %p0)
}}
ENTRY %main {{
  %a = f32[24,32]{{1,0}} parameter(0)
  %scale = f32[32]{{0}} parameter(1)
  %wg = f32[32,96]{{1,0}} parameter(2)
  %wu = f32[32,96]{{1,0}} parameter(3)
  %wd = f32[96,32]{{1,0}} parameter(4)
  ROOT %f = f32[24,32]{{1,0}} fusion(%a, %scale, %wg, %wu, %wd), kind=b2b, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_gated_silu_mlp_normalizing_its_shared_a_tiles_then_the_residual(gpu_tiles):
    # a tiny LLaMA's whole MLP: the post-attention RMSNorm applied as gate and up load their one A tile, the
    # down projection and the residual (the norm's own input) in the epilogue
    inst = fusion(NORMED_GATED)
    kernel = lower(inst, "k")
    assert kernel.gpu.constexprs["BLOCK_K"] >= 32 and "acc1_1" in kernel.source  # one K step, two accumulators
    check(inst, gpu_tiles)


def _dequantized(name: str, q: str, s: str, n: int, k: int, t: str) -> str:
    """A [n, k] weight (its rhs contracting dim last) from 4-bit values packed two to a byte along k (low nibble
    first) with a scale per block of 32 and the symmetric zero point 8, as MatMulNBits imports."""
    b = k // 32
    return f"""
  %{name}_b = u8[{n},{k // 2},2]{{2,1,0}} broadcast(%{q}), dimensions={{0,1}}
  %{name}_shb = u8[{n},{k // 2},2]{{2,1,0}} broadcast(%shifts), dimensions={{2}}
  %{name}_sr = u8[{n},{k // 2},2]{{2,1,0}} shift-right-logical(%{name}_b, %{name}_shb)
  %{name}_lo = u8[{n},{k // 2},2]{{2,1,0}} broadcast(%nibble), dimensions={{}}
  %{name}_and = u8[{n},{k // 2},2]{{2,1,0}} and(%{name}_sr, %{name}_lo)
  %{name}_f = {t}[{n},{k // 2},2]{{2,1,0}} convert(%{name}_and)
  %{name}_zb = {t}[{n},{k // 2},2]{{2,1,0}} broadcast(%eight), dimensions={{}}
  %{name}_z = {t}[{n},{k // 2},2]{{2,1,0}} subtract(%{name}_f, %{name}_zb)
  %{name}_sb = {t}[{n},{b},32]{{2,1,0}} broadcast(%{s}), dimensions={{0,1}}
  %{name}_sv = {t}[{n},{k // 2},2]{{2,1,0}} bitcast(%{name}_sb)
  %{name}_m = {t}[{n},{k // 2},2]{{2,1,0}} multiply(%{name}_z, %{name}_sv)
  %{name} = {t}[{n},{k}]{{1,0}} bitcast(%{name}_m)"""


def gated_4bit(t: str, m: int, k: int, h: int, n: int) -> str:
    """A 4-bit decoder's MLP (tests/data/models/nbits): silu(x @ gate) * (x @ up) @ down + a residual, each of
    the three weights dequantized from packed nibbles and block scales in the fusion."""
    dots = "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}"
    params = [f"{t}[{m},{k}]{{1,0}}", f"u8[{h},{k // 2}]{{1,0}}", f"{t}[{h},{k // 32}]{{1,0}}",
              f"u8[{h},{k // 2}]{{1,0}}", f"{t}[{h},{k // 32}]{{1,0}}", f"u8[{n},{h // 2}]{{1,0}}",
              f"{t}[{n},{h // 32}]{{1,0}}", f"{t}[{m},{n}]{{1,0}}"]
    body = "\n".join(f"  %p{i} = {p} parameter({i})" for i, p in enumerate(params))
    entry = "\n".join(f"  %e{i} = {p} parameter({i})" for i, p in enumerate(params))
    return f"""
%fused {{
{body}
  %shifts = u8[2]{{0}} constant(), value={{0,4}}
  %nibble = u8[] constant(), value={{15}}
  %eight = {t}[] constant(), value={{8}}{_dequantized("wg", "p1", "p2", h, k, t)}{_dequantized("wu", "p3", "p4", h, k, t)}{
        _dequantized("wd", "p5", "p6", n, h, t)}
  %gate = {t}[{m},{h}]{{1,0}} dot(%p0, %wg), {dots}
  %up = {t}[{m},{h}]{{1,0}} dot(%p0, %wu), {dots}
  %s = {t}[{m},{h}]{{1,0}} logistic(%gate)
  %silu = {t}[{m},{h}]{{1,0}} multiply(%gate, %s)
  %hh = {t}[{m},{h}]{{1,0}} multiply(%silu, %up)
  %d2 = {t}[{m},{n}]{{1,0}} dot(%hh, %wd), {dots}
  ROOT %y = {t}[{m},{n}]{{1,0}} add(%d2, %p7)
}}
ENTRY %main {{
{entry}
  ROOT %f = {t}[{m},{n}]{{1,0}} fusion({", ".join(f"%e{i}" for i in range(len(params)))}), kind=b2b, calls=%fused
}}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_gated_mlp_with_its_three_weights_dequantized_in_their_loads(gpu_tiles, dtype):
    # h = 160: the GPU's chunks (at most 64, fewer where a dequantized tile would hold too many registers)
    # leave a partial last one; 20 rows, a partial row tile; the packed bytes any value 0..255
    inst = fusion(gated_4bit(dtype, 20, 64, 160, 96))
    kernel = lower(inst, "k")
    source = kernel.source
    assert "b = tl.where(mask_w" in source and "b_1 = tl.where(mask_w" in source and "w2 = tl.where(mask_v" in source
    assert "tl.load(in1 + rhs_k" not in source  # no weight is read as stored
    c = kernel.gpu.constexprs
    area = 32 * 64 if dtype == "f16" else 32 * 32
    assert c["BLOCK_K"] * c["BLOCK_H"] <= area and c["BLOCK_H"] * c["BLOCK_N"] <= area
    rng = np.random.default_rng(1)
    inputs = []
    for op in inst.operands:
        dims = tuple(int(d) for d in op.shape.dims)
        if op.shape.dtype == "u8":
            inputs.append(rng.integers(0, 256, dims, dtype=np.uint8))
        else:
            inputs.append((rng.standard_normal(dims) * (0.05 if dims[1] <= 5 else 0.5)).astype(numpy_dtype(dtype)))
    (got,) = run_kernel(kernel, inst, inputs, kernel.gpu if gpu_tiles else None)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def int8_ffn(m: int, k: int, h: int, n: int) -> str:
    """An int8 QDQ encoder's FFN (tests/data/models/quant/encoder_qdq): u8 x s8 -> s32, dequantized (the lhs zero
    point's column sums, both scales, a bias), GELU, requantized to u8 (round half to even, zero point, clamp),
    then u8 x s8 -> s32 dequantized plus a float residual."""
    dots = "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}"

    def splat(name: str, t: str, value: float, dims: str) -> str:
        return (f"  %{name}.s = {t}[] constant(), value={{{value}}}\n"
                f"  %{name} = {t}[{dims}]{{1,0}} broadcast(%{name}.s), dimensions={{}}")
    return f"""
%fused {{
  %p0 = u8[{m},{k}]{{1,0}} parameter(0)
  %p1 = s8[{k},{h}]{{1,0}} parameter(1)
  %p2 = f32[{h}]{{0}} parameter(2)
  %p3 = f32[{h}]{{0}} parameter(3)
  %p4 = s8[{h},{n}]{{1,0}} parameter(4)
  %p5 = f32[{m},{n}]{{1,0}} parameter(5)
  %d1 = s32[{m},{h}]{{1,0}} dot(%p0, %p1), {dots}
  %f1 = f32[{m},{h}]{{1,0}} convert(%d1)
  %cs = f32[{m},{h}]{{1,0}} broadcast(%p2), dimensions={{1}}
{splat("zp1", "f32", 131.0, f"{m},{h}")}
  %zc = f32[{m},{h}]{{1,0}} multiply(%cs, %zp1)
  %c1 = f32[{m},{h}]{{1,0}} subtract(%f1, %zc)
{splat("s1", "f32", 0.00005, f"{m},{h}")}
  %x1 = f32[{m},{h}]{{1,0}} multiply(%c1, %s1)
  %b1 = f32[{m},{h}]{{1,0}} broadcast(%p3), dimensions={{1}}
  %a1 = f32[{m},{h}]{{1,0}} add(%x1, %b1)
  %g = f32[{m},{h}]{{1,0}} gelu(%a1), approximate=none
{splat("inv", "f32", 53.7, f"{m},{h}")}
  %q = f32[{m},{h}]{{1,0}} multiply(%g, %inv)
  %r = f32[{m},{h}]{{1,0}} round-nearest-even(%q)
{splat("zp2", "f32", 11.0, f"{m},{h}")}
  %qz = f32[{m},{h}]{{1,0}} add(%r, %zp2)
  %lo = f32[] constant(), value={{0.0}}
  %hi = f32[] constant(), value={{255.0}}
  %cl = f32[{m},{h}]{{1,0}} clamp(%lo, %qz, %hi)
  %hq = u8[{m},{h}]{{1,0}} convert(%cl)
  %d2 = s32[{m},{n}]{{1,0}} dot(%hq, %p4), {dots}
  %f2 = f32[{m},{n}]{{1,0}} convert(%d2)
{splat("s2", "f32", 0.00037, f"{m},{n}")}
  %x2 = f32[{m},{n}]{{1,0}} multiply(%f2, %s2)
  ROOT %y = f32[{m},{n}]{{1,0}} add(%x2, %p5)
}}
ENTRY %main {{
  %x = u8[{m},{k}]{{1,0}} parameter(0)
  %w1 = s8[{k},{h}]{{1,0}} parameter(1)
  %colsum = f32[{h}]{{0}} parameter(2)
  %bias = f32[{h}]{{0}} parameter(3)
  %w2 = s8[{h},{n}]{{1,0}} parameter(4)
  %res = f32[{m},{n}]{{1,0}} parameter(5)
  ROOT %f = f32[{m},{n}]{{1,0}} fusion(%x, %w1, %colsum, %bias, %w2, %res), kind=b2b, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_int8_ffn_requantized_on_chip_between_two_integer_dots(gpu_tiles):
    # 24 rows, K = 64, h = 160 (chunks of at least 32, IMMA's k, for dot2; a partial last one), n = 48: the u8
    # intermediate is requantized in registers and shifted to s8 for the second integer product; the
    # products are exact in int32, so the kernel matches the evaluator to f32 rounding
    inst = fusion(int8_ffn(24, 64, 160, 48))
    kernel = lower(inst, "k")
    c = kernel.gpu.constexprs
    assert c["BLOCK_K"] >= 32 and c["BLOCK_H"] >= 32
    assert "hc = (hc.to(tl.int32) - 128).to(tl.int8)" in kernel.source  # u8 x s8 on the signed tensor cores
    rng = np.random.default_rng(2)
    w1 = rng.integers(-128, 128, (64, 160), dtype=np.int8)
    inputs = [rng.integers(0, 256, (24, 64), dtype=np.uint8), w1, w1.astype(np.float32).sum(0),
              rng.standard_normal(160).astype(np.float32) * 0.1, rng.integers(-128, 128, (160, 48), dtype=np.int8),
              rng.standard_normal((24, 48)).astype(np.float32)]
    (got,) = run_kernel(kernel, inst, inputs, kernel.gpu if gpu_tiles else None)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
