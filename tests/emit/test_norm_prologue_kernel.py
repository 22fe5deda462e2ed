"""A dot that normalizes its A tiles as it loads them (a layer-norm or rms-norm whose rows are the dot's K,
mlcc/hlo/passes/fusion.py's norm prologue): under Triton's interpreter, at the interpreter's and at GPU
tiles, against numpy's norm and matmul, in f32 and f16."""

from __future__ import annotations

import numpy as np
import pytest

from mlcc.emit.codegen.kernel import lower
from tests.emit.harness import run_kernel
from tests.emit.test_fusion_kernels import fusion

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# 19 rows (1 x 19), a row of K = 40 (no power of two), N = 24: x + residual normalized, then x @ w + bias
LAYER_NORM = """
%fused {
  %p0 = f32[19,40]{1,0} parameter(0)
  %p1 = f32[19,40]{1,0} parameter(1)
  %p2 = f32[40]{0} parameter(2)
  %p3 = f32[40]{0} parameter(3)
  %p4 = f32[40,24]{1,0} parameter(4)
  %p5 = f32[24]{0} parameter(5)
  %x = f32[19,40]{1,0} add(%p0, %p1)
  %v = f32[1,19,40]{2,1,0} bitcast(%x)
  %ln = f32[1,19,40]{2,1,0} layer-norm(%v, %p2, %p3), dimensions={2}, epsilon=1e-05
  %a = f32[19,40]{1,0} bitcast(%ln)
  %d = f32[19,24]{1,0} dot(%a, %p4), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %bb = f32[19,24]{1,0} broadcast(%p5), dimensions={1}
  ROOT %r = f32[19,24]{1,0} add(%d, %bb)
}
ENTRY %main {
  %x0 = f32[19,40]{1,0} parameter(0)
  %x1 = f32[19,40]{1,0} parameter(1)
  %g = f32[40]{0} parameter(2)
  %b = f32[40]{0} parameter(3)
  %w = f32[40,24]{1,0} parameter(4)
  %c = f32[24]{0} parameter(5)
  ROOT %f = f32[19,24]{1,0} fusion(%x0, %x1, %g, %b, %w, %c), kind=output, calls=%fused
}
"""

RMS_NORM = """
%fused {
  %p0 = f32[2,9,40]{2,1,0} parameter(0)
  %p1 = f32[40]{0} parameter(1)
  %p2 = f32[40,24]{1,0} parameter(2)
  %n = f32[2,9,40]{2,1,0} rms-norm(%p0, %p1), dimensions={2}, epsilon=1e-06
  ROOT %d = f32[2,9,24]{2,1,0} dot(%n, %p2), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
}
ENTRY %main {
  %x = f32[2,9,40]{2,1,0} parameter(0)
  %g = f32[40]{0} parameter(1)
  %w = f32[40,24]{1,0} parameter(2)
  ROOT %f = f32[2,9,24]{2,1,0} fusion(%x, %g, %w), kind=output, calls=%fused
}
"""

TOL = {"f32": (1e-4, 1e-4), "f16": (2e-2, 2e-2)}


def _inputs(shapes, dtype):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal(s) * 2 + 0.5).astype(dtype) for s in shapes]


def _run(text, dtype, gpu_tiles):
    inst = fusion(text.replace("f32", dtype))
    kernel = lower(inst, "k")
    assert kernel.template == "matmul.py.jinja" and "a_rstd" in kernel.source
    assert kernel.interpreter.constexprs["BLOCK_K"] >= 40 and kernel.gpu.constexprs["BLOCK_K"] >= 40
    shapes = [tuple(int(d) for d in op.shape.dims) for op in inst.operands]
    inputs = _inputs(shapes, np.float16 if dtype == "f16" else np.float32)
    (got,) = run_kernel(kernel, inst, inputs, kernel.gpu if gpu_tiles else None)
    return got, [x.astype(np.float64) for x in inputs]


@pytest.mark.parametrize("gpu_tiles", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_layer_norm_is_applied_as_the_dot_loads_its_a_tiles(dtype, gpu_tiles):
    got, (x0, x1, g, b, w, c) = _run(LAYER_NORM, dtype, gpu_tiles)
    x = x0 + x1
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    if dtype == "f16":
        y = y.astype(np.float16).astype(np.float64)  # the norm's result is f16, as the dot reads it
    np.testing.assert_allclose(got.astype(np.float64), y @ w + c, *TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rms_norm_is_applied_as_the_dot_loads_its_a_tiles(dtype):
    got, (x, g, w) = _run(RMS_NORM, dtype, False)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
    if dtype == "f16":
        y = y.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), y @ w, *TOL[dtype])


# BERT's pooler: row 3 of every [5, 40] slab gathered (axis 1), then @ w^T
PICKED = """
%fused {
  %p0 = f32[2,5,40]{2,1,0} parameter(0)
  %p1 = f32[24,40]{1,0} parameter(1)
  %i = s64[] constant(), value={3}
  %rows = f32[2,40]{1,0} gather(%p0, %i), axis=1
  ROOT %d = f32[2,24]{1,0} dot(%rows, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
}
ENTRY %main {
  %x = f32[2,5,40]{2,1,0} parameter(0)
  %w = f32[24,40]{1,0} parameter(1)
  ROOT %f = f32[2,24]{1,0} fusion(%x, %w), kind=output, calls=%fused
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rows_gathered_as_the_dot_loads_its_a_tiles(dtype):
    inst = fusion(PICKED.replace("f32", dtype))
    kernel = lower(inst, "k")
    assert kernel.template == "matmul.py.jinja" and "a_rstd" not in kernel.source
    shapes = [tuple(int(d) for d in op.shape.dims) for op in inst.operands]
    inputs = _inputs(shapes, np.float16 if dtype == "f16" else np.float32)
    (got,) = run_kernel(kernel, inst, inputs, None)
    x, w = (v.astype(np.float64) for v in inputs)
    np.testing.assert_allclose(got.astype(np.float64), x[:, 3, :] @ w.T, *TOL[dtype])
