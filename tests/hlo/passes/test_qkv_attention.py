"""QKV-projection attention fusion (mlcc/hlo/passes/qkv_attention.py): an encoder's merged QKV projection moves
into the attention fusion that is its only reader, so the [seq, 3 * hidden] projection is never stored. IR text
in, fused IR out, the same values before and after (numpy evaluator); refusals are explained."""

from __future__ import annotations

from mlcc.hlo.ir import Module
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.qkv_attention import MAX_QKV_SEQ, QkvAttentionFusion
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module
from tests.hlo.passes.pass_numerics import assert_same_values, canonical, load
from tests.hlo.passes.qkv_encoder import encoder, int8_encoder


def fused(text: str) -> tuple[Module, bool]:
    module = load(text)
    Fusion().run(module)
    verify_module(module)
    changed = QkvAttentionFusion().run(module)
    verify_module(module)
    assert_same_values(load(text), module)
    return module, changed


def kinds(module: Module) -> list[str]:
    return [i.attrs["kind"] for i in module.entry.instructions if i.opcode == "fusion"]


def test_the_projection_with_its_bias_moves_into_the_attention_fusion():
    alone = load(encoder())
    Fusion().run(alone)
    assert kinds(alone) == ["output", "attention"]  # the projection is stored for attention to read
    module, changed = fused(encoder())
    assert changed
    assert format_module(module) == canonical("""
      HloModule m

      %fused_attention.a {
        %param_0 = f32[2,8,16]{2,1,0} parameter(0)
        %param_1 = f32[16,48]{1,0} parameter(1)
        %param_2 = f32[48]{0} parameter(2)
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
        ROOT %a = f32[2,2,8,8]{3,1,2,0} attention(%qh, %kh, %vh), causal=false, scale=0.35
      }

      ENTRY %main {
        %x = f32[2,8,16]{2,1,0} parameter(0), name=x
        %w = f32[16,48]{1,0} parameter(1), name=w
        %b = f32[48]{0} parameter(2), name=b
        %fusion.a = f32[2,2,8,8]{3,1,2,0} fusion(%x, %w, %b), calls=%fused_attention.a, kind=attention
        ROOT %r = f32[2,2,8,8]{3,1,2,0} bitcast(%fusion.a)
      }
    """)


def test_a_bare_projection_dot_moves_in_too():
    module, changed = fused(encoder(bias=False))
    assert changed and kinds(module) == ["attention"]
    (attention,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in attention.operands] == ["x", "w"]
    assert [i.opcode for i in attention.called.instructions].count("dot") == 1


def explained(text: str) -> str:
    module, changed = fused(text)
    assert not changed and kinds(module) == ["output", "attention"]
    (line,) = [n for n in module.analyses.fusion_explanations if "QKV projection" in n]
    assert line.startswith("%fusion.qkv -> %fusion.a: the QKV projection is not computed in the attention kernel")
    return line


def test_a_causal_attention_keeps_its_stored_projection():
    assert "a causal attention (encoder self-attention only)" in explained(encoder(causal=True))


def test_a_projection_with_another_reader_is_stored():
    assert "has other readers than the attention" in explained(encoder(extra_user=True))


def test_a_sequence_longer_than_one_query_block_is_refused_with_the_recompute_cost():
    seq = MAX_QKV_SEQ + 16
    line = explained(encoder(seq=seq))
    # 2 query blocks: the second recomputes the head's K and V projection, 2 * seq * hidden * (d + dv) FLOPs
    assert f"{seq} queries span 2 query blocks of at most {MAX_QKV_SEQ}" in line
    assert f"{2 * seq * 16 * (8 + 8):,} FLOPs more per (batch, head)" in line


def test_an_int8_projection_moves_into_the_fake_quantized_attention():
    # u8 x s8 -> s32, and q, k and v computed from its slices by the dequantize/requantize ops: the s32 dot joins
    # the attention fusion, whose q, k and v sections now read it in the body
    module, changed = fused(int8_encoder())
    assert changed and kinds(module) == ["attention"]
    (attention,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in attention.operands] == ["x", "w"]
    (dot,) = [i for i in attention.called.instructions if i.opcode == "dot"]
    assert [o.shape.dtype for o in dot.operands] == ["u8", "s8"] and dot.shape.dtype == "s32"
    assert not module.analyses.fusion_explanations or \
        not [n for n in module.analyses.fusion_explanations if "QKV projection" in n]


def int8_explained(text: str) -> str:
    module, changed = fused(text)
    assert not changed and [i.opcode for i in module.entry.instructions if i.opcode in ("dot", "fusion")] == \
        ["dot", "fusion"]
    (line,) = [n for n in module.analyses.fusion_explanations if "QKV projection" in n]
    assert line.startswith("%qkv -> %fusion.a: the QKV projection is not computed in the attention kernel")
    return line


def test_mixed_quantization_keeps_the_int8_projection_stored():
    line = int8_explained(int8_encoder(v_float=True))
    assert "mixed quantization: only q and k computed from the int8 projection" in line


def test_an_int8_projection_is_refused_as_the_float_one_is():
    assert "a causal attention (encoder self-attention only)" in int8_explained(int8_encoder(causal=True))
    seq = MAX_QKV_SEQ + 16
    line = int8_explained(int8_encoder(seq=seq))
    assert f"{seq} queries span 2 query blocks of at most {MAX_QKV_SEQ}" in line
    assert f"{2 * seq * 16 * (8 + 8):,} FLOPs more per (batch, head)" in line
