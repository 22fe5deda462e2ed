"""Attention-layer fusion (mlcc/hlo/passes/attention_layer.py): an encoder's output projection, bias, residual
add and LayerNorm move into the attention fusion that computes its QKV projection, so the attention output is
never stored; then the FFN (a b2b fusion) reading those normalized rows alone. IR text in, fused IR out, the same values before and after (numpy evaluator); refusals are
explained."""

from __future__ import annotations

from mlcc.hlo.ir import Module
from mlcc.hlo.passes.attention_layer import (MAX_FFN_TILE, MAX_LAYER_HIDDEN, AttentionLayerFusion, ffn_parts,
                                              layer_parts)
from mlcc.hlo.passes.b2b_fusion import B2bFusion
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.qkv_attention import MAX_QKV_SEQ, QkvAttentionFusion
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module
from tests.hlo.passes.pass_numerics import assert_same_values, canonical, load
from tests.hlo.passes.qkv_encoder import encoder_layer, int8_encoder_layer


def fused(text: str) -> tuple[Module, bool]:
    module = load(text)
    Fusion().run(module)
    QkvAttentionFusion().run(module)
    verify_module(module)
    changed = AttentionLayerFusion().run(module)
    verify_module(module)
    assert_same_values(load(text), module)
    return module, changed


def kinds(module: Module) -> list[str]:
    return [i.attrs["kind"] for i in module.entry.instructions if i.opcode == "fusion"]


def test_the_output_projection_residual_and_layer_norm_move_into_the_attention_fusion():
    before = load(encoder_layer())
    Fusion().run(before)
    QkvAttentionFusion().run(before)
    assert kinds(before) == ["attention", "output"]  # the attention output is stored for the projection to read
    module, changed = fused(encoder_layer())
    assert changed
    assert format_module(module) == canonical("""
      HloModule m

      %fused_attention.a {
        %param_0 = f32[2,8,16]{2,1,0} parameter(0)
        %param_1 = f32[16,48]{1,0} parameter(1)
        %param_2 = f32[48]{0} parameter(2)
        %param_3 = f32[16,16]{1,0} parameter(3)
        %param_4 = f32[16]{0} parameter(4)
        %param_5 = f32[16]{0} parameter(5)
        %param_6 = f32[16]{0} parameter(6)
        %d = f32[2,8,48]{2,1,0} dot(%param_0, %param_1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %bb = f32[2,8,48]{2,1,0} broadcast(%param_2), dimensions={2}
        %qkv = f32[2,8,48]{2,1,0} add(%d, %bb)
        %qs = f32[2,8,16]{2,1,0} slice(%qkv), limit_indices={2,8,16}, start_indices={0,0,0}, strides={1,1,1}
        %qr = f32[2,8,2,8]{3,2,1,0} bitcast(%qs)
        %qh = f32[2,2,8,8]{3,1,2,0} bitcast(%qr)
        %ks = f32[2,8,16]{2,1,0} slice(%qkv), limit_indices={2,8,32}, start_indices={0,0,16}, strides={1,1,1}
        %kr = f32[2,8,2,8]{3,2,1,0} bitcast(%ks)
        %kh = f32[2,2,8,8]{3,1,2,0} bitcast(%kr)
        %vs = f32[2,8,16]{2,1,0} slice(%qkv), limit_indices={2,8,48}, start_indices={0,0,32}, strides={1,1,1}
        %vr = f32[2,8,2,8]{3,2,1,0} bitcast(%vs)
        %vh = f32[2,2,8,8]{3,1,2,0} bitcast(%vr)
        %a = f32[2,2,8,8]{3,1,2,0} attention(%qh, %kh, %vh), causal=false, scale=0.35
        %at = f32[2,8,2,8]{3,2,1,0} bitcast(%a)
        %ao = f32[2,8,16]{2,1,0} bitcast(%at)
        %p = f32[2,8,16]{2,1,0} dot(%ao, %param_3), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %bob = f32[2,8,16]{2,1,0} broadcast(%param_4), dimensions={2}
        %pb = f32[2,8,16]{2,1,0} add(%p, %bob)
        %res = f32[2,8,16]{2,1,0} add(%pb, %param_0)
        ROOT %ln = f32[2,8,16]{2,1,0} layer-norm(%res, %param_5, %param_6), dimensions={2}, epsilon=1e-05
      }

      ENTRY %main {
        %x = f32[2,8,16]{2,1,0} parameter(0), name=x
        %w = f32[16,48]{1,0} parameter(1), name=w
        %b = f32[48]{0} parameter(2), name=b
        %wo = f32[16,16]{1,0} parameter(3), name=wo
        %bo = f32[16]{0} parameter(4), name=bo
        %g = f32[16]{0} parameter(5), name=g
        %be = f32[16]{0} parameter(6), name=be
        %fusion.a = f32[2,8,16]{2,1,0} fusion(%x, %w, %b, %wo, %bo, %g, %be), calls=%fused_attention.a, kind=attention
        ROOT %r = f32[2,8,16]{2,1,0} bitcast(%fusion.a)
      }
    """)
    # the layer's input x is one operand: the QKV projection's and the residual's
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    attention, dot, norm = layer_parts(fusion.called)
    assert (attention.opcode, dot.name, norm.opcode) == ("attention", "p", "layer-norm")


def test_rms_norm_without_biases_and_a_transposed_weight_move_in_too():
    module, changed = fused(encoder_layer(bias=False, out_bias=False, norm="rms-norm", wo_layout="0,1"))
    assert changed and kinds(module) == ["attention"]
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in fusion.operands] == ["x", "w", "wo", "g"]


def explained(text: str, left: tuple[str, ...] = ("attention", "output")) -> str:
    module, changed = fused(text)
    assert not changed and kinds(module) == list(left)
    (line,) = [n for n in module.analyses.fusion_explanations if "output projection and norm" in n]
    assert line.startswith("%fusion.a -> %fusion.ln: the output projection and norm are not computed in the "
                           "attention kernel: ")
    return line


def test_an_attention_output_with_another_reader_is_stored():
    assert "has other readers" in explained(encoder_layer(extra_user=True))


def test_a_projection_without_a_row_norm_after_it_stays_a_matmul():
    module, changed = fused(encoder_layer(norm="none"))
    assert not changed
    (line,) = [n for n in module.analyses.fusion_explanations if "output projection and norm" in n]
    assert "does not normalize the projection's rows" in line


def test_a_sequence_past_one_query_block_keeps_its_projections_stored():
    # the QKV projection stays a GEMM (qkv_attention.py refuses it): this pass then takes nothing either
    line = explained(encoder_layer(seq=MAX_QKV_SEQ + 16), ("output", "attention", "output"))
    assert "does not compute its QKV projection" in line


def ffn_fused(text: str) -> tuple[Module, bool]:
    module = load(text)
    Fusion().run(module)
    B2bFusion().run(module)
    QkvAttentionFusion().run(module)
    verify_module(module)
    changed = AttentionLayerFusion().run(module)
    verify_module(module)
    assert_same_values(load(text), module)
    return module, changed


def test_the_ffn_reading_the_normalized_rows_joins_too():
    before = load(encoder_layer(ffn=96))
    Fusion().run(before)
    B2bFusion().run(before)
    QkvAttentionFusion().run(before)
    assert kinds(before) == ["attention", "output", "b2b"]
    module, changed = ffn_fused(encoder_layer(ffn=96))
    assert changed and kinds(module) == ["attention"]
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in fusion.operands] == ["x", "w", "b", "wo", "bo", "g", "be", "w1", "w2", "g2", "be2"]
    body = fusion.called
    attention, dot, norm = layer_parts(body)
    assert (dot.name, norm.name) == ("p", "ln")
    dot1, dot2, norm2 = ffn_parts(body, norm)
    assert (dot1.name, dot2.name, norm2.name, body.root.name) == ("h", "f", "ln2", "ln2")
    # b2b said why the first norm's fusion and the FFN were two kernels: they are one now, and it is gone
    assert [n for n in before.analyses.fusion_explanations if n.startswith("%fusion.ln -> %fusion.act")]
    assert not [n for n in module.analyses.fusion_explanations if n.startswith("%fusion.ln -> %")]
    # and Fusion's on the first norm's edges to the FFN's dot and residual add, inside the kernel now
    assert [n for n in before.analyses.fusion_explanations if n.startswith("%ln -> %h:")]
    assert not [n for n in module.analyses.fusion_explanations if n.startswith(("%ln -> %h:", "%ln -> %fr:"))]


def test_an_ffn_whose_input_rows_are_a_model_output_too_stays_a_kernel():
    module, changed = ffn_fused(encoder_layer(ffn=96, ffn_user=True))
    assert changed and kinds(module) == ["attention", "b2b"]  # the output projection still joins
    (line,) = [n for n in module.analyses.fusion_explanations if "FFN is not computed" in n]
    assert line.startswith("%fusion.a -> %fusion.ln2: the FFN is not computed in the attention kernel: ")
    assert "has other readers" in line


def test_rows_wider_than_one_programs_registers_keep_their_kernels():
    # a hidden size of 128 (2 heads of 64): the output projection stays a matmul
    line = explained(encoder_layer(d=64))
    assert f"a hidden size of 128 is wider than one program's tile (at most {MAX_LAYER_HIDDEN}" in line
    # [64, 64] rows: the output projection joins, the FFN does not (its accumulators would spill)
    module, changed = ffn_fused(encoder_layer(seq=64, d=32, ffn=128))
    assert changed and kinds(module) == ["attention", "b2b"]
    (line,) = [n for n in module.analyses.fusion_explanations if "FFN is not computed" in n]
    assert f"[64, 64] rows with the FFN's accumulators exceed one program's registers (at most {MAX_FFN_TILE}" in line
    module, changed = ffn_fused(encoder_layer(seq=32, d=32, ffn=128))  # [32, 64]: it joins
    assert changed and kinds(module) == ["attention"]


def b2b_fused(text: str) -> tuple[Module, bool]:
    module = load(text)
    Fusion().run(module)
    B2bFusion().run(module)
    QkvAttentionFusion().run(module)
    verify_module(module)
    changed = AttentionLayerFusion().run(module)
    verify_module(module)
    assert_same_values(load(text), module)
    return module, changed


def test_an_int8_layer_joins_its_requantized_attention_output_projection_and_norm():
    # the attention fusion's root requantizes its output to u8 (its QuantizeLinear); the output fusion's dot is
    # u8 x s8 -> s32 with the dequantization, residual, LayerNorm and requantization after it: one kernel
    module, changed = b2b_fused(int8_encoder_layer())
    assert changed and kinds(module) == ["attention"]
    (layer,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in layer.operands] == ["x", "w", "wo", "g", "be"] and layer.shape.dtype == "u8"
    attention, dot, norm = layer_parts(layer.called)
    assert [o.shape.dtype for o in dot.operands] == ["u8", "s8"] and dot.shape.dtype == "s32"
    assert ffn_parts(layer.called, norm) is None


def test_an_int8_layer_joins_its_ffn_too():
    module, changed = b2b_fused(int8_encoder_layer(ffn=64))
    assert changed and kinds(module) == ["attention"]
    (layer,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in layer.operands] == ["x", "w", "wo", "g", "be", "w1", "w2", "g2", "be2"]
    _, _, norm = layer_parts(layer.called)
    dot1, dot2, _ = ffn_parts(layer.called, norm)
    assert [o.shape.dtype for o in dot1.operands + dot2.operands] == ["u8", "s8", "u8", "s8"]
    assert not [n for n in module.analyses.fusion_explanations if "not computed in the attention kernel" in n]


def test_an_int8_attention_output_read_elsewhere_is_stored():
    module, changed = b2b_fused(int8_encoder_layer(extra_user=True))
    assert not changed and kinds(module) == ["attention", "output"]
    (line,) = [n for n in module.analyses.fusion_explanations if "output projection and norm" in n]
    assert "the attention output %ar has other readers" in line
