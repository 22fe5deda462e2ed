"""passes/dynamic_quant.py and the quantizing A prologue of passes/fusion.py (a_prologue.quantized_rows_cone):
IR text in, IR text out, the same values before and after (the numpy evaluator), and the reasons they refuse."""

from __future__ import annotations

from mlcc.hlo.passes.dynamic_quant import SinkDynamicScale
from mlcc.hlo.passes.fusion import Fusion
from tests.hlo.passes.pass_numerics import check_rewrite, run


def test_a_runtime_scale_times_a_weight_scale_vector_is_sunk_below_the_broadcast():
    # MatMulInteger's dequantizing Mul: a_scale (from the activation's range) * the per-column weight scale,
    # broadcast to the s32 result; afterwards both factors are broadcast and multiplied at the result's dims
    check_rewrite(SinkDynamicScale(), """
      ENTRY %main {
        %acc = s32[4,16]{1,0} parameter(0)
        %s = f32[] parameter(1)
        %ws = f32[16]{0} parameter(2)
        %sb = f32[16]{0} broadcast(%s), dimensions={}
        %p = f32[16]{0} multiply(%sb, %ws)
        %pb = f32[4,16]{1,0} broadcast(%p), dimensions={1}
        %f = f32[4,16]{1,0} convert(%acc)
        ROOT %y = f32[4,16]{1,0} multiply(%f, %pb)
      }""", expected="""
      ENTRY %main {
        %acc = s32[4,16]{1,0} parameter(0)
        %s = f32[] parameter(1)
        %ws = f32[16]{0} parameter(2)
        %sink-dynamic-scale = f32[4,16]{1,0} broadcast(%ws), dimensions={1}
        %sink-dynamic-scale.1 = f32[4,16]{1,0} broadcast(%s), dimensions={}
        %sink-dynamic-scale.2 = f32[4,16]{1,0} multiply(%sink-dynamic-scale.1, %sink-dynamic-scale)
        %f = f32[4,16]{1,0} convert(%acc)
        ROOT %y = f32[4,16]{1,0} multiply(%f, %sink-dynamic-scale.2)
      }""", rtol=0, atol=0)


def test_a_constant_scale_product_is_left_to_constant_folding():
    check_rewrite(SinkDynamicScale(), """
      ENTRY %main {
        %acc = f32[4,16]{1,0} parameter(0)
        %ws = f32[16]{0} parameter(1)
        %s = f32[] constant(), value={0.5}
        %sb = f32[16]{0} broadcast(%s), dimensions={}
        %p = f32[16]{0} multiply(%sb, %ws)
        %pb = f32[4,16]{1,0} broadcast(%p), dimensions={1}
        ROOT %y = f32[4,16]{1,0} multiply(%acc, %pb)
      }""", expected=None)


# DynamicQuantizeLinear as the importer writes it (after cleanup and legalize), into MatMulInteger's s32 dot
def _dynamic(extra_user: str = "") -> str:
    out = "(s32[8,16]{1,0}" + (", f32[]" if extra_user else "") + ")"
    return f"""
      ENTRY %main {{
        %x = f32[8,32]{{1,0}} parameter(0), name=x
        %w = s8[32,16]{{1,0}} parameter(1), name=w
        %zero = f32[] constant(), value={{0.0}}
        %top = f32[] constant(), value={{255.0}}
        %inv = f32[] constant(), value={{0.003921568859368563}}
        %hi = f32[] reduce(%x), dimensions={{0,1}}, kind=maximum
        %lo = f32[] reduce(%x), dimensions={{0,1}}, kind=minimum
        %hi0 = f32[] maximum(%hi, %zero)
        %lo0 = f32[] minimum(%lo, %zero)
        %range = f32[] subtract(%hi0, %lo0)
        %scale = f32[] multiply(%range, %inv)
        %nlo = f32[] negate(%lo0)
        %zq = f32[] divide(%nlo, %scale)
        %zr = f32[] round-nearest-even(%zq)
        %zp = f32[] clamp(%zero, %zr, %top)
        %sb = f32[8,32]{{1,0}} broadcast(%scale), dimensions={{}}
        %q = f32[8,32]{{1,0}} divide(%x, %sb)
        %r = f32[8,32]{{1,0}} round-nearest-even(%q)
        %zb = f32[8,32]{{1,0}} broadcast(%zp), dimensions={{}}
        %a = f32[8,32]{{1,0}} add(%r, %zb)
        %zeros = f32[8,32]{{1,0}} broadcast(%zero), dimensions={{}}
        %tops = f32[8,32]{{1,0}} broadcast(%top), dimensions={{}}
        %c = f32[8,32]{{1,0}} clamp(%zeros, %a, %tops)
        %u = u8[8,32]{{1,0}} convert(%c)
        %d = s32[8,16]{{1,0}} dot(%u, %w), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
        ROOT %t = {out} tuple(%d{extra_user})
      }}"""


def test_the_dot_quantizes_its_a_tiles_and_computes_the_min_and_max_itself():
    # one output fusion reading x and w: the min and max, the scale and zero point, the u8 activation and the
    # dot; nothing of the quantization is left in the entry
    check_rewrite(Fusion(), _dynamic(), expected="""
      %fused_output.d {
        %param_0 = f32[8,32]{1,0} parameter(0)
        %param_1 = s8[32,16]{1,0} parameter(1)
        %zero = f32[] constant(), value={0.0}
        %zeros = f32[8,32]{1,0} broadcast(%zero), dimensions={}
        %hi = f32[] reduce(%param_0), dimensions={0,1}, kind=maximum
        %hi0 = f32[] maximum(%hi, %zero)
        %lo = f32[] reduce(%param_0), dimensions={0,1}, kind=minimum
        %lo0 = f32[] minimum(%lo, %zero)
        %range = f32[] subtract(%hi0, %lo0)
        %inv = f32[] constant(), value={0.003921568859368563}
        %scale = f32[] multiply(%range, %inv)
        %sb = f32[8,32]{1,0} broadcast(%scale), dimensions={}
        %q = f32[8,32]{1,0} divide(%param_0, %sb)
        %r = f32[8,32]{1,0} round-nearest-even(%q)
        %nlo = f32[] negate(%lo0)
        %zq = f32[] divide(%nlo, %scale)
        %zr = f32[] round-nearest-even(%zq)
        %top = f32[] constant(), value={255.0}
        %zp = f32[] clamp(%zero, %zr, %top)
        %zb = f32[8,32]{1,0} broadcast(%zp), dimensions={}
        %a = f32[8,32]{1,0} add(%r, %zb)
        %tops = f32[8,32]{1,0} broadcast(%top), dimensions={}
        %c = f32[8,32]{1,0} clamp(%zeros, %a, %tops)
        %u = u8[8,32]{1,0} convert(%c)
        ROOT %d = s32[8,16]{1,0} dot(%u, %param_1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
      }

      ENTRY %main {
        %x = f32[8,32]{1,0} parameter(0), name=x
        %w = s8[32,16]{1,0} parameter(1), name=w
        %fusion.d = s32[8,16]{1,0} fusion(%x, %w), calls=%fused_output.d, kind=output
        ROOT %t = (s32[8,16]{1,0}) tuple(%fusion.d)
      }""", rtol=0, atol=0)


def test_a_scale_another_kernel_reads_keeps_the_min_and_max_in_memory():
    # the scale is a model output: the reductions stay kernels of their own, the dot still quantizes its
    # A tiles from them (the u8 activation never reaches memory)
    _, module = run(Fusion(), _dynamic(", %scale"))
    entry = module.entry.instructions
    assert sum(1 for i in entry if i.opcode == "reduce") == 2
    dot = next(i for i in entry if i.opcode == "fusion" and i.shape.dtype == "s32")
    assert [i.opcode for i in dot.operands].count("reduce") == 2
    assert any(i.opcode == "convert" and i.shape.dtype == "u8" for i in dot.called.instructions)


def test_a_u8_activation_read_by_another_kernel_is_stored():
    text = _dynamic().replace("ROOT %t = (s32[8,16]{1,0}) tuple(%d)",
                              "ROOT %t = (s32[8,16]{1,0}, u8[8,32]{1,0}) tuple(%d, %u)")
    _, module = run(Fusion(), text)
    assert "%u -> %d: not quantized in the dot's A-tile loads: %u has users other than the dot's lhs" \
        in "\n".join(module.analyses.fusion_explanations)
    dot = next(i for i in module.entry.instructions if i.shape.dtype == "s32")
    assert "u8" in [o.shape.dtype for o in dot.operands]  # the dot reads the stored u8 activation
