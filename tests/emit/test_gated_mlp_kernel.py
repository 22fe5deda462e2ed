"""A gated MLP's gate and up projections in one matmul kernel: two accumulators of the same lhs tile, the
epilogue silu(gate) * up; against the reference evaluator, at the interpreter's and at GPU tiles, per dtype."""

from __future__ import annotations

import pytest

from mlcc.emit.codegen.lower_module import lower
from tests.emit.test_fusion_kernels import check, fusion

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# 17 rows, K = 33, F = 19: none a multiple of a tile
GATED = """
%fused {
  %p0 = f32[1,17,33]{2,1,0} parameter(0)
  %p1 = f32[33,19]{1,0} parameter(1)
  %p2 = f32[33,19]{1,0} parameter(2)
  %up = f32[1,17,19]{2,1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %gate = f32[1,17,19]{2,1,0} dot(%p0, %p2), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %sig = f32[1,17,19]{2,1,0} logistic(%gate)
  %silu = f32[1,17,19]{2,1,0} multiply(%gate, %sig)
  ROOT %r = f32[1,17,19]{2,1,0} multiply(%silu, %up)
}
ENTRY %main {
  %x = f32[1,17,33]{2,1,0} parameter(0)
  %wu = f32[33,19]{1,0} parameter(1)
  %wg = f32[33,19]{1,0} parameter(2)
  ROOT %f = f32[1,17,19]{2,1,0} fusion(%x, %wu, %wg), kind=output, calls=%fused
}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_gate_and_up_projections_share_one_tile(gpu_tiles):
    inst = fusion(GATED)
    kernel = lower(inst, "k")
    assert kernel.source.count("tl.dot(") == 2 and "acc_1 = tl.full" in kernel.source
    assert kernel.flops >= 4 * 17 * 19 * 33
    check(inst, config=kernel.gpu if gpu_tiles else None, template="matmul.py.jinja")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_gated_mlp(dtype):
    check(fusion(GATED.replace("f32", dtype)), precision=dtype)
