"""The dot's weight prologue in the fusion pass: a weight computed from constants alone (a packed 4-bit
weight unpacked, its block's zero point subtracted and scale applied, as MatMulNBits imports) joins the
dot's output fusion, computed where the kernel loads its B tiles; IR text in, IR text out, the same values
before and after (the numpy evaluator), and the reason printed when the chain cannot be computed there."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.passes.fusion import Fusion
from tests.hlo.passes.pass_numerics import check_rewrite, run

RNG = np.random.default_rng(7)
# N=8 output features, K=4 (one block of 4 along K), two 4-bit values a byte, the low nibble first
CONSTANTS = {"packed": RNG.integers(0, 256, (8, 2)).astype(np.uint8),
             "scales": RNG.uniform(0.1, 1, (8, 1)).astype(np.float32)}

# x [2,4] @ dequant(packed)^T: q[n, k] = (packed[n, k // 2] >> 4 * (k % 2)) & 15, w = (q - 8) * scale[n]
DEQUANT_DOT = """
  ENTRY %main {
    %x = f32[2,4]{1,0} parameter(0), name=x
    %packed = u8[8,2]{1,0} constant(), ref=packed
    %scales = f32[8,1]{1,0} constant(), ref=scales
    %bytes = u8[8,2,2]{2,1,0} broadcast(%packed), dimensions={0,1}
    %shifts.v = u8[2]{0} constant(), value={0,4}
    %shifts = u8[8,2,2]{2,1,0} broadcast(%shifts.v), dimensions={2}
    %fifteen = u8[8,2,2]{2,1,0} constant(), splat=15
    %shifted = u8[8,2,2]{2,1,0} shift-right-logical(%bytes, %shifts)
    %nibbles = u8[8,2,2]{2,1,0} and(%shifted, %fifteen)
    %q = u8[8,4]{1,0} reshape(%nibbles)
    %qf = f32[8,4]{1,0} convert(%q)
    %eight = f32[8,4]{1,0} constant(), splat=8
    %centered = f32[8,4]{1,0} subtract(%qf, %eight)
    %s = f32[8,4]{1,0} broadcast(%scales), dimensions={0,1}
    %w = f32[8,4]{1,0} multiply(%centered, %s)
    %y = f32[2,8]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
    ROOT %t = (f32[2,8]{1,0}) tuple(%y)
  }"""


def test_a_packed_weights_dequantization_is_computed_in_the_dots_weight_loads():
    check_rewrite(Fusion(), DEQUANT_DOT, constants=CONSTANTS, expected="""
      %fused_output.y {
        %param_0 = f32[2,4]{1,0} parameter(0)
        %param_1 = u8[8,2]{1,0} parameter(1)
        %param_2 = f32[8,1]{1,0} parameter(2)
        %bytes = u8[8,2,2]{2,1,0} broadcast(%param_1), dimensions={0,1}
        %shifts.v = u8[2]{0} constant(), value={0,4}
        %shifts = u8[8,2,2]{2,1,0} broadcast(%shifts.v), dimensions={2}
        %shifted = u8[8,2,2]{2,1,0} shift-right-logical(%bytes, %shifts)
        %fifteen = u8[8,2,2]{2,1,0} constant(), splat=15
        %nibbles = u8[8,2,2]{2,1,0} and(%shifted, %fifteen)
        %q = u8[8,4]{1,0} reshape(%nibbles)
        %qf = f32[8,4]{1,0} convert(%q)
        %eight = f32[8,4]{1,0} constant(), splat=8
        %centered = f32[8,4]{1,0} subtract(%qf, %eight)
        %s = f32[8,4]{1,0} broadcast(%param_2), dimensions={0,1}
        %w = f32[8,4]{1,0} multiply(%centered, %s)
        ROOT %y = f32[2,8]{1,0} dot(%param_0, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
      }

      ENTRY %main {
        %x = f32[2,4]{1,0} parameter(0), name=x
        %packed = u8[8,2]{1,0} constant(), ref=packed
        %scales = f32[8,1]{1,0} constant(), ref=scales
        %fusion.y = f32[2,8]{1,0} fusion(%x, %packed, %scales), calls=%fused_output.y, kind=output
        ROOT %t = (f32[2,8]{1,0}) tuple(%fusion.y)
      }""")


def test_a_weight_read_by_another_kernel_too_is_read_as_it_is():
    # %w is also a model output: it is stored anyway, so the dot reads it rather than recomputing it
    text = DEQUANT_DOT.replace("ROOT %t = (f32[2,8]{1,0}) tuple(%y)",
                               "ROOT %t = (f32[2,8]{1,0}, f32[8,4]{1,0}) tuple(%y, %w)")
    _, module = run(Fusion(), text, CONSTANTS)
    dot_fusions = [i for i in module.entry.instructions if i.opcode == "dot"]
    assert len(dot_fusions) == 1, "the dot stays alone"
    assert any("%w -> %y: not computed in the dot's weight loads: %w has users other than the dot" in e
               for e in module.analyses.fusion_explanations), module.analyses.fusion_explanations


def test_a_weight_computed_from_an_argument_is_read_as_it_is():
    # a runtime value is not a constant: the chain stays its own kernel
    text = DEQUANT_DOT.replace("%scales = f32[8,1]{1,0} constant(), ref=scales",
                               "%scales = f32[8,1]{1,0} parameter(1), name=scales")
    _, module = run(Fusion(), text, {"packed": CONSTANTS["packed"]})
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    assert any("%scales (parameter) is not a loop op on constants" in e for e in module.analyses.fusion_explanations)


def test_a_weight_no_smaller_as_constants_is_read_as_it_is():
    # a constant f32 weight scaled by a constant: computing it per tile would read as many bytes as reading it
    text = """
      ENTRY %main {
        %x = f32[2,4]{1,0} parameter(0), name=x
        %wc = f32[8,4]{1,0} constant(), ref=wc
        %two = f32[8,4]{1,0} constant(), splat=2
        %w = f32[8,4]{1,0} multiply(%wc, %two)
        %y = f32[2,8]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
        ROOT %t = (f32[2,8]{1,0}) tuple(%y)
      }"""
    _, module = run(Fusion(), text, {"wc": RNG.standard_normal((8, 4)).astype(np.float32)})
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    assert any("no smaller than the weight" in e for e in module.analyses.fusion_explanations)
