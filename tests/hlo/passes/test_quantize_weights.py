"""quantize-weights (--quantize w4): IR text in and out. The weights are chosen so that 4-bit symmetric
blocks hold them exactly (integers in [-8, 7] times a power of two, each block reaching -8), so the
rewritten module must compute the float module's values to f32 rounding."""

import numpy as np

from mlcc.hlo.passes.quantize_weights import QuantizeWeights
from tests.hlo.passes.pass_numerics import check_rewrite


def _exact_weights(k: int, n: int, block: int, seed: int) -> np.ndarray:
    """W [K, N] with every block of a column (along K) exactly representable: q * 2**e, q in [-8, 7], min -8."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-8, 8, (k, n))
    for b in range(0, k, block):
        q[b, :] = -8
    scale = 2.0 ** rng.integers(-6, 0, (-(-k // block), n))
    return (q * np.repeat(scale, block, axis=0)[:k]).astype(np.float32)


DOT = """
  ENTRY %main {
    %arg = f32[2,40]{1,0} parameter(0), name=x
    %constant = f32[40,16]{1,0} constant(), ref=w
    %dot = f32[2,16]{1,0} dot(%arg, %constant), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}, origin={mm}
    ROOT %r = (f32[2,16]{1,0}) tuple(%dot)
  }"""

# the MatMulNBits import's chain (mlcc/hlo/blockquant.py): K=40 is one whole block and 8 of the next, the
# padding of the last block sliced off the per-element zero points and scales
W4 = """
  ENTRY %main {
    %arg = f32[2,40]{1,0} parameter(0), name=x
    %quantize-w4 = u8[16,20]{1,0} constant(), ref=quantize-w4, origin={mm}
    %quantize-w4.1 = u8[16,20,2]{2,1,0} broadcast(%quantize-w4), dimensions={0,1}, origin={mm}
    %quantize-w4.2 = u8[2]{0} constant(), value={0,4}, origin={mm}
    %quantize-w4.3 = u8[16,20,2]{2,1,0} broadcast(%quantize-w4.2), dimensions={2}, origin={mm}
    %quantize-w4.4 = u8[16,20,2]{2,1,0} constant(), splat=15, origin={mm}
    %quantize-w4.5 = u8[16,20,2]{2,1,0} shift-right-logical(%quantize-w4.1, %quantize-w4.3), origin={mm}
    %quantize-w4.6 = u8[16,20,2]{2,1,0} and(%quantize-w4.5, %quantize-w4.4), origin={mm}
    %quantize-w4.7 = u8[16,40]{1,0} reshape(%quantize-w4.6), origin={mm}
    %quantize-w4.8 = f32[16,2]{1,0} constant(), ref=quantize-w4.1, origin={mm}
    %quantize-w4.9 = f32[16,40]{1,0} convert(%quantize-w4.7), origin={mm}
    %quantize-w4.10 = f32[16,2]{1,0} constant(), splat=8.0, origin={mm}
    %quantize-w4.11 = f32[16,2,32]{2,1,0} broadcast(%quantize-w4.10), dimensions={0,1}, origin={mm}
    %quantize-w4.12 = f32[16,64]{1,0} reshape(%quantize-w4.11), origin={mm}
    %quantize-w4.13 = f32[16,40]{1,0} slice(%quantize-w4.12), limit_indices={16,40}, start_indices={0,0}, strides={1,1}, origin={mm}
    %quantize-w4.14 = f32[16,40]{1,0} subtract(%quantize-w4.9, %quantize-w4.13), origin={mm}
    %quantize-w4.15 = f32[16,2,32]{2,1,0} broadcast(%quantize-w4.8), dimensions={0,1}, origin={mm}
    %quantize-w4.16 = f32[16,64]{1,0} reshape(%quantize-w4.15), origin={mm}
    %quantize-w4.17 = f32[16,40]{1,0} slice(%quantize-w4.16), limit_indices={16,40}, start_indices={0,0}, strides={1,1}, origin={mm}
    %quantize-w4.18 = f32[16,40]{1,0} multiply(%quantize-w4.14, %quantize-w4.17), origin={mm}
    %quantize-w4.19 = f32[2,16]{1,0} dot(%arg, %quantize-w4.18), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}, origin={mm}
    ROOT %r = (f32[2,16]{1,0}) tuple(%quantize-w4.19)
  }"""


def test_a_dot_weight_becomes_packed_nibbles_and_block_scales():
    w = _exact_weights(40, 16, 32, 0)
    module = check_rewrite(QuantizeWeights(32), DOT, W4, constants={"w": w})
    packed, scales = module.constants["quantize-w4"], module.constants["quantize-w4.1"]
    q = np.stack([packed & 15, packed >> 4], -1).reshape(16, 40).astype(np.int64) - 8
    np.testing.assert_array_equal(q * np.repeat(scales, 32, axis=1)[:, :40], w.T)


def test_a_transposed_weight_and_block_128():
    """W stored [N, K] (a Gemm with transB) and a block longer than K (its padding sliced off)."""
    text = DOT.replace("[40,16]", "[40,24]").replace("[2,16]", "[2,24]").replace("f32[40,24]{1,0} constant()", "f32[24,40]{1,0} constant()").replace(
        "rhs_contracting_dims={0}", "rhs_contracting_dims={1}")
    expected = W4.replace("[16,", "[24,").replace("[2,16]", "[2,24]").replace("={16,", "={24,").replace("24,2,32", "24,1,128").replace("f32[24,2]", "f32[24,1]").replace(
        "f32[24,64]", "f32[24,128]")
    w = _exact_weights(40, 24, 128, 1)
    module = check_rewrite(QuantizeWeights(128), text, expected, constants={"w": np.ascontiguousarray(w.T)})
    assert module.constants["quantize-w4.1"].shape == (24, 1)


def test_dots_without_a_constant_float_matrix_are_left_alone():
    two_args = """
      ENTRY %main {
        %arg = f32[2,40]{1,0} parameter(0), name=x
        %arg.1 = f32[40,16]{1,0} parameter(1), name=y
        %dot = f32[2,16]{1,0} dot(%arg, %arg.1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %r = (f32[2,16]{1,0}) tuple(%dot)
      }"""
    check_rewrite(QuantizeWeights(32), two_args, None)
    batched = """
      ENTRY %main {
        %arg = f32[3,2,40]{2,1,0} parameter(0), name=x
        %constant = f32[3,40,16]{2,1,0} constant(), ref=w
        %dot = f32[3,2,16]{2,1,0} dot(%arg, %constant), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
        ROOT %r = (f32[3,2,16]{2,1,0}) tuple(%dot)
      }"""
    check_rewrite(QuantizeWeights(32), batched, None, constants={"w": np.ones((3, 40, 16), np.float32)})
