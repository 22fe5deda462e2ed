"""Fusion of quantize -> dequantize pairs (passes/fusion.py): a Q -> DQ pair in front of a contraction is one
loop kernel, not a kernel per op. The cause was a cheap producer (the DQ's u8 -> f32 convert) duplicated into
its only consumer's fusion and then rooting a group of its own, which was dropped once that consumer was built,
leaving every op of its operand chain (the Q's divide, round, add, clamp, convert) a kernel of its own."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.passes.fusion import Fusion
from tests.hlo.passes.pass_numerics import check_rewrite

QDQ_DOT = """
  ENTRY %main {
    %x = f32[16,64]{1,0} parameter(0), name=x
    %w = f32[64,32]{1,0} parameter(1), name=w
    %s = f32[16,64]{1,0} constant(), splat=0.05
    %d = f32[16,64]{1,0} divide(%x, %s)
    %r = f32[16,64]{1,0} round-nearest-even(%d)
    %z = f32[16,64]{1,0} constant(), splat=120.0
    %a = f32[16,64]{1,0} add(%r, %z)
    %lo = f32[] constant(), value={0.0}
    %hi = f32[] constant(), value={255.0}
    %c = f32[16,64]{1,0} clamp(%lo, %a, %hi)
    %q = u8[16,64]{1,0} convert(%c)
    %f = f32[16,64]{1,0} convert(%q)
    %y = f32[16,64]{1,0} subtract(%f, %z)
    %dq = f32[16,64]{1,0} multiply(%y, %s)
    %o = f32[16,32]{1,0} dot(%dq, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    ROOT %t = (f32[16,32]{1,0}) tuple(%o)
  }"""


def test_a_quantize_dequantize_pair_before_a_dot_is_one_loop_kernel():
    rng = np.random.default_rng(0)
    module = check_rewrite(Fusion(), QDQ_DOT, expected="""
      %fused_loop.dq {
        %param_0 = f32[16,64]{1,0} parameter(0)
        %lo = f32[] constant(), value={0.0}
        %s = f32[16,64]{1,0} constant(), splat=0.05
        %d = f32[16,64]{1,0} divide(%param_0, %s)
        %r = f32[16,64]{1,0} round-nearest-even(%d)
        %z = f32[16,64]{1,0} constant(), splat=120.0
        %a = f32[16,64]{1,0} add(%r, %z)
        %hi = f32[] constant(), value={255.0}
        %c = f32[16,64]{1,0} clamp(%lo, %a, %hi)
        %q = u8[16,64]{1,0} convert(%c)
        %f = f32[16,64]{1,0} convert(%q)
        %y = f32[16,64]{1,0} subtract(%f, %z)
        ROOT %dq = f32[16,64]{1,0} multiply(%y, %s)
      }

      ENTRY %main {
        %x = f32[16,64]{1,0} parameter(0), name=x
        %w = f32[64,32]{1,0} parameter(1), name=w
        %fusion.dq = f32[16,64]{1,0} fusion(%x), calls=%fused_loop.dq, kind=loop
        %o = f32[16,32]{1,0} dot(%fusion.dq, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %t = (f32[16,32]{1,0}) tuple(%o)
      }""", inputs={"x": (rng.standard_normal((16, 64)) * 5).astype(np.float32)})
    kernels = [i for i in module.entry.instructions if i.opcode not in ("parameter", "constant", "tuple")]
    assert [i.opcode for i in kernels] == ["fusion", "dot"]
