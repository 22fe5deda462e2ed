"""Attention kernels that compute their QKV projection (mlcc/emit/codegen/attention.py with a projection:
q = X[query rows] @ W[:, q columns] + b per program, k and v per key block in the key loop), run under Triton's
interpreter with the interpreter's tiles and with smaller ones (several key blocks; several query blocks, where
each block's program computes the head's k and v again) and compared with the reference evaluator's value of
the fusion, i.e. of the stored projection read by attention."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mlcc.emit.codegen.attention  # noqa: F401  (registers fusion:attention)
from mlcc.emit.codegen.kernel import LaunchConfig, cdiv, lower
from mlcc.emit.target.targets import TARGETS
from mlcc.emit.tiling import tuned_config, tuning_candidates
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.ir import Instruction
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.qkv_attention import QkvAttentionFusion
from tests.emit.harness import run_kernel
from tests.hlo.passes.pass_numerics import load
from tests.hlo.passes.qkv_encoder import encoder, int8_encoder

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOLERANCE = {"f32": 2e-5, "f16": 3e-3, "bf16": 3e-2}


def merged(int8: bool = False, **kwargs) -> Instruction:
    module = load((int8_encoder if int8 else encoder)(**kwargs))
    Fusion().run(module)
    assert QkvAttentionFusion().run(module)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [i.opcode for i in fusion.called.instructions].count("dot") == 1
    return fusion


def check(inst: Instruction, config: LaunchConfig | None = None, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(0 if op.shape.dtype == "u8" else -127, 256 if op.shape.dtype == "u8" else 128,
                           tuple(int(d) for d in op.shape.dims)).astype(numpy_dtype(op.shape.dtype))
              if op.shape.dtype in ("u8", "s8") else
              (rng.standard_normal(tuple(int(d) for d in op.shape.dims)) * 0.5).astype(numpy_dtype(op.shape.dtype))
              for op in inst.operands]
    kernel = lower(inst, "qkv_attention_under_test")
    assert kernel.template == "attention.py.jinja"
    (got,) = run_kernel(kernel, inst, inputs, config)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = TOLERANCE[inst.shape.dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def tiles(inst: Instruction, seq: int, block_m: int, block_n: int) -> LaunchConfig:
    kernel = lower(inst, "qkv_attention_under_test")
    c = kernel.interpreter
    grid = (cdiv(seq, block_m),) + tuple(c.grid[1:])
    return dataclasses.replace(c, constexprs={**c.constexprs, "BLOCK_M": block_m, "BLOCK_N": block_n}, grid=grid)


@pytest.mark.parametrize("bias", [True, False])
def test_the_projection_with_and_without_bias_matches_the_stored_one(bias):
    check(merged(bias=bias))


def test_a_transposed_weight_and_a_sequence_over_several_key_blocks():
    inst = merged(seq=40, w_layout="0,1")
    check(inst)                         # the whole sequence in one query block and one key block
    check(inst, tiles(inst, 40, 64, 16))  # 3 key blocks, the last one partly past the sequence
    check(inst, tiles(inst, 40, 16, 16))  # 3 query blocks: each program computes its head's k and v itself


def test_the_gpu_config_takes_every_query_in_one_block():
    inst = merged(seq=40)
    kernel = lower(inst, "qkv_attention_under_test")
    assert kernel.gpu.constexprs["BLOCK_M"] >= 40 and kernel.gpu.grid[0] == 1
    check(inst, kernel.gpu)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_types_round_the_projection_to_the_value_type_as_stored(dtype):
    inst = merged(seq=24, t=dtype)
    check(inst)
    check(inst, tiles(inst, 24, 32, 16))


def test_tuning_never_splits_the_queries_of_a_kernel_computing_its_projection():
    inst = merged(seq=40)
    kernel = lower(inst, "qkv_attention_under_test")
    for name in ("sm_80", "sm_90", "gfx942"):
        found = tuning_candidates(kernel, TARGETS[name])
        assert found and all(c.constexprs["BLOCK_M"] >= 40 for c in found), name
        with pytest.raises(ValueError, match="BLOCK_M must hold all 40 queries"):
            tuned_config(kernel, TARGETS[name], {"BLOCK_M": 16, "BLOCK_N": 16}, 4, 2)


def test_an_int8_projection_computed_on_chip_matches_the_stored_one():
    # u8 x s8 tiles into s32 (the unsigned operand shifted to s8 and the shift added back), then the section's
    # requantization to u8 and dequantization: exactly the evaluator's q, k and v; the fake-quantized attention
    # after them as the stored projection's
    inst = merged(int8=True, seq=40)
    kernel = lower(inst, "qkv_attention_under_test")
    assert "tl.dot(x_tile, w_tile, q_acc)" in kernel.source and "tl.int32" in kernel.source
    check(inst)
    check(inst, tiles(inst, 40, 64, 16))  # 3 key blocks, in both passes over the keys
    check(inst, kernel.gpu)
