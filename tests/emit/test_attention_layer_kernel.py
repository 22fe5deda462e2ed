"""Attention layer kernels (mlcc/emit/codegen/attention.py with an output projection and a row norm, from
mlcc/hlo/passes/attention_layer.py): one program per batch element loops over the heads, computes each head's
q, k and v from the layer's input, its attention output, and that times its rows of W_o into the output
projection, then the bias, the residual and the norm (and, with the FFN joined, the FFN on those rows in
BLOCK_H-column chunks, its residual and second norm). Run under Triton's interpreter with the interpreter's
tiles, the GPU's, and smaller key blocks, and compared with the reference evaluator's value of the fusion (the
attention output stored, then the projection and norm of the unfused graph)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mlcc.emit.codegen.attention  # noqa: F401  (registers fusion:attention)
from mlcc.emit.codegen.kernel import LaunchConfig, lower
from mlcc.emit.target.targets import TARGETS
from mlcc.emit.tiling import tuning_candidates
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.ir import Instruction
from mlcc.hlo.passes.attention_layer import AttentionLayerFusion
from mlcc.hlo.passes.b2b_fusion import B2bFusion
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.qkv_attention import QkvAttentionFusion
from tests.emit.harness import run_kernel
from tests.hlo.passes.pass_numerics import load
from tests.hlo.passes.qkv_encoder import encoder_layer, int8_encoder_layer

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOLERANCE = {"f32": 3e-5, "f16": 2e-2, "bf16": 1e-1}


def merged(**kwargs) -> Instruction:
    module = load(encoder_layer(**kwargs))
    Fusion().run(module)
    B2bFusion().run(module)
    assert QkvAttentionFusion().run(module)
    assert AttentionLayerFusion().run(module)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusion


def check(inst: Instruction, config: LaunchConfig | None = None, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    inputs = [(rng.standard_normal(tuple(int(d) for d in op.shape.dims)) * 0.5).astype(numpy_dtype(op.shape.dtype))
              for op in inst.operands]
    kernel = lower(inst, "attention_layer_under_test")
    assert kernel.template == "attention.py.jinja"
    (got,) = run_kernel(kernel, inst, inputs, config)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    assert got.shape == want.shape == (2, int(inst.shape.dims[1]), 16) and got.dtype == want.dtype
    tol = TOLERANCE[inst.shape.dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def key_blocks(inst: Instruction, block_n: int) -> LaunchConfig:
    c = lower(inst, "attention_layer_under_test").interpreter
    return dataclasses.replace(c, constexprs={**c.constexprs, "BLOCK_N": block_n})


def test_one_program_per_batch_element_covers_every_head():
    inst = merged()
    kernel = lower(inst, "attention_layer_under_test")
    for config in (kernel.interpreter, kernel.gpu):
        assert config.grid[:2] == (1, 2)  # 2 batch elements, the 2 heads looped inside
        assert config.constexprs["BLOCK_E"] == 16 and config.constexprs["BLOCK_M"] >= 8
    check(inst)
    check(inst, kernel.gpu)


def test_rms_norm_without_biases_and_a_transposed_output_weight():
    check(merged(bias=False, out_bias=False, norm="rms-norm", wo_layout="0,1"), seed=1)


def test_a_sequence_over_several_key_blocks():
    inst = merged(seq=40)
    check(inst)
    check(inst, key_blocks(inst, 16))  # 3 key blocks, the last one partly past the sequence


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_types(dtype):
    check(merged(seq=24, t=dtype))


def test_tuning_keeps_the_whole_sequence_and_hidden_row_in_one_program():
    kernel = lower(merged(seq=40), "attention_layer_under_test")
    for name in ("sm_80", "sm_90", "gfx942"):
        found = tuning_candidates(kernel, TARGETS[name])
        assert found and all(c.constexprs["BLOCK_M"] >= 40 and c.constexprs["BLOCK_E"] == 16 and c.grid[:2] == (1, 2)
                             for c in found), name


@pytest.mark.parametrize("ffn", [32, 96])
def test_the_ffn_on_the_normalized_rows_in_one_or_several_hidden_chunks(ffn):
    inst = merged(ffn=ffn)
    kernel = lower(inst, "attention_layer_under_test")
    assert kernel.interpreter.constexprs["BLOCK_H"] == (32 if ffn == 32 else 64)  # 96: 2 chunks, the last partial
    assert kernel.interpreter.grid[:2] == (1, 2)
    check(inst)
    check(inst, kernel.gpu)


def test_the_ffn_over_several_key_blocks_and_in_half_types():
    inst = merged(seq=40, ffn=96)
    check(inst, key_blocks(inst, 16), seed=2)
    check(merged(seq=24, ffn=96, t="f16"), seed=3)


def int8_merged(**kwargs) -> Instruction:
    module = load(int8_encoder_layer(**kwargs))
    Fusion().run(module)
    B2bFusion().run(module)
    assert QkvAttentionFusion().run(module)
    assert AttentionLayerFusion().run(module)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusion


def check_int8(inst: Instruction, step: float, config: LaunchConfig | None = None, seed: int = 0) -> None:
    """An int8 layer kernel against the evaluator: the integer products are exact, and each requantization rounds
    half to even as the graph says; what may differ is f32 rounding in the scores, softmax and LayerNorms (their
    sums in another order), which can move a value across a rounding boundary: at most one output step, and
    nearly every output the same."""
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(0, 256, tuple(int(d) for d in op.shape.dims)).astype(np.uint8) if op.shape.dtype == "u8"
              else rng.integers(-127, 128, tuple(int(d) for d in op.shape.dims)).astype(np.int8)
              if op.shape.dtype == "s8" else
              (1 + 0.2 * rng.standard_normal(tuple(int(d) for d in op.shape.dims))).astype(np.float32)
              for op in inst.operands]
    kernel = lower(inst, "attention_layer_under_test")
    (got,) = run_kernel(kernel, inst, inputs, config)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    assert got.shape == want.shape and got.dtype == want.dtype
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert diff.max() <= step * 1.001 and (diff > step / 2).mean() <= 0.02, (diff.max(), (diff > step / 2).mean())


def test_an_int8_layer_requantizes_each_heads_output_and_projects_it_in_int32():
    inst = int8_merged()
    kernel = lower(inst, "attention_layer_under_test")
    assert inst.shape.dtype == "u8" and "layer_acc = tl.dot(o_tile, wo, layer_acc)" in kernel.source
    assert kernel.interpreter.constexprs["BLOCK_DV"] == 32  # each head's 8 columns padded to IMMA's k
    check_int8(inst, 1)
    check_int8(inst, 1, kernel.gpu, seed=1)


def test_an_int8_layer_with_its_ffn_and_several_key_blocks():
    inst = int8_merged(seq=40, ffn=96)  # 3 hidden chunks of 32, the last one partly past the 96 columns
    kernel = lower(inst, "attention_layer_under_test")
    assert kernel.interpreter.constexprs["BLOCK_H"] == 32 and kernel.gpu.num_warps == 4
    assert kernel.source.count("tl.dot(y1_a, w1, acc1)") == 1 and "tl.dot(hc, w2, ffn_acc)" in kernel.source
    check_int8(inst, 1 / 30.0)
    check_int8(inst, 1 / 30.0, key_blocks(inst, 16), seed=2)
