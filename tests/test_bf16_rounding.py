"""Half-precision results are computed in f32 and rounded once to nearest even, as XLA and the GPU do, on the CPU
path too: Triton's interpreter truncated f32 -> bf16 (3.140625 * 3.140625 gave 9.8125, not 9.875) and flushed
bf16 subnormals when widening them (ceil of the smallest subnormal gave 0, not 1).

The references are ml_dtypes' conversions (round to nearest even), independent of mlcc and Triton."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mlcc
from mlcc.bundle.interpreter_numerics import bf16_bits_to_f32, f32_to_bf16_bits

BF16 = np.dtype(ml_dtypes.bfloat16)


def special_f32() -> np.ndarray:
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    edge = np.array([0x00000000, 0x80000000, 0x00000001, 0x00008000, 0x00018000, 0x3F808000, 0x3F818000,
                     0x7F7FFFFF, 0x7F7F8000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF],
                    dtype=np.uint32)
    return np.concatenate([bits, edge]).view(np.float32)


def test_narrowing_rounds_to_nearest_even_like_ml_dtypes():
    x = special_f32()
    got = f32_to_bf16_bits(x)
    with np.errstate(invalid="ignore"):
        want = x.astype(BF16).view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(BF16).astype(np.float32)).all()


def test_widening_is_exact_subnormals_included():
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    got = bf16_bits_to_f32(bits)
    want = bits.view(BF16).astype(np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all()
    assert got[1] == np.float32(2.0) ** -133  # the smallest bf16 subnormal survives


PROGRAM = """
func.func @main(%a: tensor<4xbf16>, %b: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) {
  %0 = stablehlo.multiply %a, %b : tensor<4xbf16>
  %1 = stablehlo.ceil %a : tensor<4xbf16>
  %2 = stablehlo.subtract %a, %b : tensor<4xbf16>
  return %0, %1, %2 : tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>
}
"""


@pytest.fixture(scope="module")
def bf16_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("bf16")
    (root / "m.mlir").write_text(PROGRAM)
    mlcc.compile(root / "m.mlir", root / "b", targets=[], cache_dir="")
    return mlcc.load(root / "b", device="cpu")


def test_bf16_kernels_round_once_to_nearest_even(bf16_bundle):
    smallest_subnormal = np.array([1], np.uint16).view(BF16)[0]
    a = np.array([3.140625, smallest_subnormal, -smallest_subnormal, 1.0078125], dtype=BF16)
    b = np.array([3.140625, 1.0, 1.0, 0.0029296875], dtype=BF16)
    out = bf16_bundle.run({"arg0": a, "arg1": b})
    product, ceil, diff = (out[f"out{i}"] for i in range(3))
    want_product = (a.astype(np.float32) * b.astype(np.float32)).astype(BF16)
    assert product[0] == np.float32(9.875)
    assert product.view(np.uint16).tolist() == want_product.view(np.uint16).tolist()
    assert ceil.astype(np.float32).tolist() == [4.0, 1.0, -0.0, 2.0]
    want_diff = (a.astype(np.float32) - b.astype(np.float32)).astype(BF16)
    assert diff.view(np.uint16).tolist() == want_diff.view(np.uint16).tolist()


def test_bf16_dot_under_the_interpreter_multiplies_values_not_bit_patterns(tmp_path):
    """The bf16 matmul branch (DOT_F32=0) feeds tl.dot bf16 tiles; the interpreter multiplied their uint16 bit
    patterns. Checked on a kernel loaded as a bundle's kernels are (import_jit installs the fix)."""
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    from mlcc.bundle.kernels import import_jit

    (tmp_path / "dot16.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def dot16(a_ptr, b_ptr, c_ptr):\n"
        "    r = tl.arange(0, 16)\n"
        "    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])\n"
        "    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])\n"
        "    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))\n")
    kernel = InterpretedFunction(import_jit(tmp_path / "dot16.py", "dot16").fn)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16)).astype(BF16) for _ in range(2))
    out = torch.empty((16, 16), dtype=torch.float32)
    kernel[(1,)](torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16),
                 torch.from_numpy(b.view(np.uint16)).view(torch.bfloat16), out)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
