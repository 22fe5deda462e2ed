"""Back-to-back GEMM fusion (mlcc/hlo/passes/b2b_fusion.py): an FFN's two dots, with the first one's epilogue
between them, become one b2b fusion when the intermediate's rows fit (N1 <= MAX_B2B_WIDTH) and nothing else
reads it. IR text in, fused IR out, the same values before and after; refusals are explained."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.ir import Module
from mlcc.hlo.passes.b2b_fusion import MAX_B2B_WIDTH, B2bFusion
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module
from tests.hlo.passes.pass_numerics import assert_same_values, canonical, load

DOTS = "lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}"


def ffn(width: int, extra_user: bool = False) -> str:
    """x [1,4,8] -> dot(w1 [8,width]) + b1 -> gelu -> dot(w2 [width,8]) + x; optionally the GELU output is a
    model output too."""
    h = f"f32[1,4,{width}]{{2,1,0}}"
    out = "(f32[1,4,8]{2,1,0}, " + h + ")" if extra_user else "f32[1,4,8]{2,1,0}"
    root = "tuple(%y, %g)" if extra_user else "add(%d2, %x)"
    tail = "\n    %y = f32[1,4,8]{2,1,0} add(%d2, %x)" if extra_user else ""
    return f"""
  ENTRY %main {{
    %x = f32[1,4,8]{{2,1,0}} parameter(0), name=x
    %w1 = f32[8,{width}]{{1,0}} parameter(1), name=w1
    %b1 = f32[{width}]{{0}} parameter(2), name=b1
    %w2 = f32[{width},8]{{1,0}} parameter(3), name=w2
    %d1 = {h} dot(%x, %w1), {DOTS}
    %bb = {h} broadcast(%b1), dimensions={{2}}
    %a = {h} add(%d1, %bb)
    %g = {h} gelu(%a), approximate=none
    %d2 = f32[1,4,8]{{2,1,0}} dot(%g, %w2), {DOTS}{tail}
    ROOT %r = {out} {root}
  }}"""


def fused(text: str) -> tuple[Module, bool]:
    module = load(text)
    Fusion().run(module)
    verify_module(module)
    changed = B2bFusion().run(module)
    verify_module(module)
    assert_same_values(load(text), module)
    return module, changed


def test_an_ffn_becomes_one_b2b_fusion_and_its_intermediate_is_not_stored():
    alone = load(ffn(16))
    Fusion().run(alone)
    assert any(n.startswith("%g -> %d2:") for n in alone.analyses.fusion_explanations)  # fusion leaves the edge
    module, changed = fused(ffn(16))
    assert changed
    assert not any("-> %d2:" in n for n in module.analyses.fusion_explanations)  # and it is fused now
    assert format_module(module) == canonical("""
      HloModule m

      %fused_b2b.r {
        %param_0 = f32[1,4,8]{2,1,0} parameter(0)
        %param_1 = f32[8,16]{1,0} parameter(1)
        %param_2 = f32[16]{0} parameter(2)
        %param_3 = f32[16,8]{1,0} parameter(3)
        %d1 = f32[1,4,16]{2,1,0} dot(%param_0, %param_1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %bb = f32[1,4,16]{2,1,0} broadcast(%param_2), dimensions={2}
        %a = f32[1,4,16]{2,1,0} add(%d1, %bb)
        %g = f32[1,4,16]{2,1,0} gelu(%a), approximate=none
        %d2 = f32[1,4,8]{2,1,0} dot(%g, %param_3), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %r = f32[1,4,8]{2,1,0} add(%d2, %param_0)
      }

      ENTRY %main {
        %x = f32[1,4,8]{2,1,0} parameter(0), name=x
        %w1 = f32[8,16]{1,0} parameter(1), name=w1
        %b1 = f32[16]{0} parameter(2), name=b1
        %w2 = f32[16,8]{1,0} parameter(3), name=w2
        ROOT %fusion.r = f32[1,4,8]{2,1,0} fusion(%x, %w1, %b1, %w2), calls=%fused_b2b.r, kind=b2b
      }
    """)


def test_a_bare_second_dot_reading_the_first_through_views_joins():
    # the decode step's MLP: the GELU output reshaped [1,1,128] -> [1,128] before the second dot, which has no
    # epilogue of its own (its bias and residual are added by the next layer's kernel)
    text = """
  ENTRY %main {
    %x = f32[1,32]{1,0} parameter(0), name=x
    %w1 = f32[32,128]{1,0} parameter(1), name=w1
    %w2 = f32[128,32]{1,0} parameter(2), name=w2
    %d1 = f32[1,128]{1,0} dot(%x, %w1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %g = f32[1,128]{1,0} gelu(%d1), approximate=tanh
    %v = f32[1,1,128]{2,1,0} bitcast(%g)
    %v2 = f32[1,128]{1,0} bitcast(%v)
    %d2 = f32[1,32]{1,0} dot(%v2, %w2), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %n = f32[1,32]{1,0} negate(%d2)
    ROOT %t = (f32[1,32]{1,0}, f32[1,32]{1,0}) tuple(%d2, %n)
  }"""
    module, changed = fused(text)
    assert changed
    entry = module.entry
    kinds = [i.attrs["kind"] for i in entry.instructions if i.opcode == "fusion"]
    assert kinds == ["b2b"]  # the negate of the second dot (128 bytes) is left to a kernel of its own
    b2b = next(i for i in entry.instructions if i.opcode == "fusion" and i.attrs["kind"] == "b2b")
    body = [i.opcode for i in b2b.called.instructions]
    assert body.count("dot") == 2 and body.count("bitcast") == 2
    assert [o.name for o in b2b.operands] == ["x", "w1", "w2"]
    assert not any(i.opcode == "bitcast" for i in entry.instructions)


def test_an_intermediate_read_elsewhere_is_stored_and_explained():
    module, changed = fused(ffn(16, extra_user=True))
    assert not changed
    assert not any(i.attrs.get("kind") == "b2b" for i in module.entry.instructions if i.opcode == "fusion")
    notes = [n for n in module.analyses.fusion_explanations if "b2b" in n]
    assert len(notes) == 1 and "has other users" in notes[0]


def test_an_intermediate_wider_than_a_tile_is_stored_and_explained():
    module, changed = fused(ffn(MAX_B2B_WIDTH + 8))
    assert not changed
    notes = [n for n in module.analyses.fusion_explanations if "b2b" in n]
    assert len(notes) == 1 and f"wider than {MAX_B2B_WIDTH}" in notes[0], notes
    module, changed = fused(ffn(MAX_B2B_WIDTH))
    assert changed


def test_dots_with_batch_dims_stay_apart():
    # attention-like batched products: per-batch intermediates are not an FFN
    text = """
  ENTRY %main {
    %x = f32[2,4,8]{2,1,0} parameter(0), name=x
    %w1 = f32[2,8,16]{2,1,0} parameter(1), name=w1
    %w2 = f32[2,16,8]{2,1,0} parameter(2), name=w2
    %d1 = f32[2,4,16]{2,1,0} dot(%x, %w1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
    %e = f32[2,4,16]{2,1,0} exp(%d1)
    ROOT %d2 = f32[2,4,8]{2,1,0} dot(%e, %w2), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  }"""
    module, changed = fused(text)
    assert not changed
    notes = [n for n in module.analyses.fusion_explanations if "b2b" in n]
    assert len(notes) == 1 and "batch dims" in notes[0]


RNG = np.random.default_rng(3)
# a 4-bit decoder's gated MLP (x [1,8] -> gate, up [16,8] -> down [8,16]): packed nibbles (low first) and a scale
# per block of 8 along K, zero point 8, as MatMulNBits imports
PACKED = {f"{w}_q": RNG.integers(0, 256, (n, k // 2)).astype(np.uint8) for w, n, k in
          (("gate", 16, 8), ("up", 16, 8), ("down", 8, 16))}
PACKED.update({f"{w}_s": RNG.uniform(0.1, 1, (n, k // 8)).astype(np.float32) for w, n, k in
               (("gate", 16, 8), ("up", 16, 8), ("down", 8, 16))})


def _dequant(w: str, n: int, k: int) -> str:
    return f"""
    %{w}_q = u8[{n},{k // 2}]{{1,0}} constant(), ref={w}_q
    %{w}_s = f32[{n},{k // 8}]{{1,0}} constant(), ref={w}_s
    %{w}_bytes = u8[{n},{k // 2},2]{{2,1,0}} broadcast(%{w}_q), dimensions={{0,1}}
    %{w}_shifts = u8[{n},{k // 2},2]{{2,1,0}} broadcast(%shifts), dimensions={{2}}
    %{w}_shifted = u8[{n},{k // 2},2]{{2,1,0}} shift-right-logical(%{w}_bytes, %{w}_shifts)
    %{w}_fifteen = u8[{n},{k // 2},2]{{2,1,0}} constant(), splat=15
    %{w}_nibbles = u8[{n},{k // 2},2]{{2,1,0}} and(%{w}_shifted, %{w}_fifteen)
    %{w}_q4 = u8[{n},{k}]{{1,0}} reshape(%{w}_nibbles)
    %{w}_qf = f32[{n},{k}]{{1,0}} convert(%{w}_q4)
    %{w}_eight = f32[{n},{k}]{{1,0}} constant(), splat=8
    %{w}_centered = f32[{n},{k}]{{1,0}} subtract(%{w}_qf, %{w}_eight)
    %{w}_sb = f32[{n},{k // 8},8]{{2,1,0}} broadcast(%{w}_s), dimensions={{0,1}}
    %{w}_sr = f32[{n},{k}]{{1,0}} reshape(%{w}_sb)
    %{w} = f32[{n},{k}]{{1,0}} multiply(%{w}_centered, %{w}_sr)"""


DOTS_T = "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}"
GATED_4BIT = f"""
  ENTRY %main {{
    %x = f32[1,8]{{1,0}} parameter(0), name=x
    %shifts = u8[2]{{0}} constant(), value={{0,4}}{_dequant("gate", 16, 8)}{_dequant("up", 16, 8)}{_dequant("down", 8, 16)}
    %g = f32[1,16]{{1,0}} dot(%x, %gate), {DOTS_T}
    %u = f32[1,16]{{1,0}} dot(%x, %up), {DOTS_T}
    %sig = f32[1,16]{{1,0}} logistic(%g)
    %silu = f32[1,16]{{1,0}} multiply(%g, %sig)
    %h = f32[1,16]{{1,0}} multiply(%silu, %u)
    %d = f32[1,8]{{1,0}} dot(%h, %down), {DOTS_T}
    ROOT %y = f32[1,8]{{1,0}} add(%d, %x)
  }}"""


def test_a_4bit_gated_mlp_with_its_three_weights_dequantized_in_their_loads_becomes_one_b2b_fusion():
    # each dot computes its weight from packed bytes and block scales as it loads it (a weight prologue);
    # the b2b kernel keeps all three prologues and the [1, 16] intermediate on chip: it reads the packed
    # bytes and scales, never a dequantized weight
    module = load(GATED_4BIT, PACKED)
    Fusion().run(module)
    verify_module(module)
    assert B2bFusion().run(module)
    verify_module(module)
    assert_same_values(load(GATED_4BIT, PACKED), module)
    assert not [n for n in module.analyses.fusion_explanations if "b2b" in n]
    (b2b,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert b2b.attrs["kind"] == "b2b"
    assert [o.name for o in b2b.operands] == ["x", "gate_q", "gate_s", "up_q", "up_s", "down_q", "down_s"]
    dots = [i for i in b2b.called.instructions if i.opcode == "dot"]
    assert [d.operands[1].name for d in dots] == ["gate", "up", "down"]
    assert all(d.operands[1].opcode == "multiply" for d in dots)  # computed in the kernel, not a parameter


def test_a_dequantized_mlp_whose_intermediate_is_an_output_too_is_explained_with_explain_fusion():
    # the gated product is a model output as well: it is stored anyway, so the pair stays two kernels (each still
    # dequantizing its weights in its loads) and --explain-fusion says why; no weight reason is given any more
    text = GATED_4BIT.replace("ROOT %y = f32[1,8]{1,0} add(%d, %x)",
                              "%y = f32[1,8]{1,0} add(%d, %x)\n    ROOT %t = (f32[1,8]{1,0}, f32[1,16]{1,0}) tuple(%y, %h)")
    module = load(text, PACKED)
    Fusion().run(module)
    assert not B2bFusion().run(module)
    verify_module(module)
    assert_same_values(load(text, PACKED), module)
    notes = [n for n in module.analyses.fusion_explanations if "b2b" in n]
    assert len(notes) == 1 and "has other users" in notes[0], notes
    assert not any("computes its weight" in n for n in module.analyses.fusion_explanations)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2 and all(i.operands[1].shape.dtype == "u8" for i in fusions)  # packed bytes read


INT8_W = {"w1": RNG.integers(-128, 128, (8, 32)).astype(np.int8), "w2": RNG.integers(-128, 128, (32, 8)).astype(np.int8)}
DOTS_2 = "lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}"


def int8_ffn(first: str = "int8") -> str:
    """An int8 QDQ FFN as quantized_dot.py leaves it: u8 x s8 -> s32, dequantized, GELU, requantized to u8
    (round, zero point 7, clamp), u8 x s8 -> s32 dequantized; with first="float" the first dot is a float
    one (its weight dequantized to f32 once) and only the second is 8-bit."""
    h = "[1,4,32]{2,1,0}"
    if first == "int8":
        d1 = f"""    %d1 = s32{h} dot(%x, %w1), {DOTS_2}
    %f1 = f32{h} convert(%d1)"""
    else:
        d1 = f"""    %xf = f32[1,4,8]{{2,1,0}} convert(%x)
    %w1f = f32[8,32]{{1,0}} convert(%w1)
    %f1 = f32{h} dot(%xf, %w1f), {DOTS_2}"""
    return f"""
  ENTRY %main {{
    %x = u8[1,4,8]{{2,1,0}} parameter(0), name=x
    %w1 = s8[8,32]{{1,0}} constant(), ref=w1
    %w2 = s8[32,8]{{1,0}} constant(), ref=w2
{d1}
    %s1 = f32{h} constant(), splat=0.001
    %x1 = f32{h} multiply(%f1, %s1)
    %g = f32{h} gelu(%x1), approximate=none
    %inv = f32{h} constant(), splat=40
    %q = f32{h} multiply(%g, %inv)
    %r = f32{h} round-nearest-even(%q)
    %zp = f32{h} constant(), splat=7
    %qz = f32{h} add(%r, %zp)
    %lo = f32[] constant(), value={{0.0}}
    %hi = f32[] constant(), value={{255.0}}
    %cl = f32{h} clamp(%lo, %qz, %hi)
    %hq = u8{h} convert(%cl)
    %d2 = s32[1,4,8]{{2,1,0}} dot(%hq, %w2), {DOTS_2}
    %f2 = f32[1,4,8]{{2,1,0}} convert(%d2)
    %s2 = f32[1,4,8]{{2,1,0}} constant(), splat=0.0003
    ROOT %y = f32[1,4,8]{{2,1,0}} multiply(%f2, %s2)
  }}"""


def test_an_int8_ffn_requantizing_its_intermediate_becomes_one_b2b_fusion():
    # the u8 intermediate (the first dot's epilogue requantizes the GELU output) stays on chip and is the
    # second integer dot's lhs: the fusion reads the u8 input, both s8 weights, and nothing in between
    text = int8_ffn()
    module = load(text, INT8_W)
    Fusion().run(module)
    assert B2bFusion().run(module)
    verify_module(module)
    assert_same_values(load(text, INT8_W), module)
    (b2b,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert b2b.attrs["kind"] == "b2b" and [o.name for o in b2b.operands] == ["x", "w1", "w2"]
    dots = [i for i in b2b.called.instructions if i.opcode == "dot"]
    assert [(d.operands[0].shape.dtype, d.operands[1].shape.dtype, d.shape.dtype) for d in dots] == [
        ("u8", "s8", "s32"), ("u8", "s8", "s32")]
    assert not [n for n in module.analyses.fusion_explanations if "b2b" in n]


def test_a_float_dot_then_an_int8_one_stay_apart_and_are_explained():
    text = int8_ffn(first="float")
    module = load(text, INT8_W)
    Fusion().run(module)
    assert not B2bFusion().run(module)
    verify_module(module)
    assert_same_values(load(text, INT8_W), module)
    notes = [n for n in module.analyses.fusion_explanations if "b2b" in n]
    assert len(notes) == 1 and "one dot multiplies 8-bit integers, the other floats" in notes[0], notes


def symbolic_ffn(rows: str = "seq", row: str = "8", w1_rows: str = "8") -> str:
    """ffn(16) over [1, rows, row] activations (rows symbolic: a model's sequence), weights w1 [w1_rows, 16]."""
    return f"""
  HloModule m, symbols={{seq={{1,64}}}}

  ENTRY %main {{
    %x = f32[1,{rows},{row}]{{2,1,0}} parameter(0), name=x
    %w1 = f32[{w1_rows},16]{{1,0}} parameter(1), name=w1
    %w2 = f32[16,{row}]{{1,0}} parameter(2), name=w2
    %d1 = f32[1,{rows},16]{{2,1,0}} dot(%x, %w1), {DOTS}
    %g = f32[1,{rows},16]{{2,1,0}} gelu(%d1), approximate=none
    %d2 = f32[1,{rows},{row}]{{2,1,0}} dot(%g, %w2), {DOTS}
    ROOT %r = f32[1,{rows},{row}]{{2,1,0}} add(%d2, %x)
  }}"""


def test_symbolic_rows_are_fused_back_to_back():
    # a model's sequence length in the rows: the kernel takes the row count at run time (before, "symbolic dims")
    text = symbolic_ffn()
    module = load(text)
    Fusion().run(module)
    assert B2bFusion().run(module)
    verify_module(module)
    (b2b,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert b2b.attrs["kind"] == "b2b" and str(b2b.shape) == "f32[1,seq,8]{2,1,0}"
    assert [o.name for o in b2b.operands] == ["x", "w1", "w2"]
    for seq in (1, 5, 64):
        assert_same_values(load(text), module, symbols={"seq": seq})


def test_a_symbolic_row_length_stays_apart_and_is_explained():
    # the rows may be symbolic; the elements of a row (dot1's K: a weight's dims) not
    module = load(symbolic_ffn(rows="4", row="seq", w1_rows="seq"))
    Fusion().run(module)
    assert not B2bFusion().run(module)
    notes = [n for n in module.analyses.fusion_explanations if "b2b" in n]
    assert len(notes) == 1 and "a weight of symbolic dims" in notes[0], notes
