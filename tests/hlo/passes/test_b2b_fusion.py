"""Back-to-back GEMM fusion (mlcc/hlo/passes/b2b_fusion.py): an FFN's two dots, with the first one's epilogue
between them, become one b2b fusion when the intermediate's rows fit (N1 <= MAX_B2B_WIDTH) and nothing else
reads it. IR text in, fused IR out, the same values before and after; refusals are explained."""

from __future__ import annotations

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
