"""The norm prologue in the fusion pass: a row norm whose rows are a dot's K (through row-major views) and
that only the dot reads joins the dot's output fusion, applied as the kernel loads its A tiles; IR text in,
IR text out, the same values before and after (the numpy evaluator), and the reasons it is refused."""

from __future__ import annotations

from mlcc.hlo.passes.a_prologue import MAX_NORM_ROW
from mlcc.hlo.passes.fusion import Fusion
from tests.hlo.passes.pass_numerics import check_rewrite, run


def _pre_norm(row: int = 64, extra_user: bool = False) -> str:
    more = f", f32[1,16,{row}]{{2,1,0}}" if extra_user else ""
    return f"""
      ENTRY %main {{
        %h = f32[1,16,{row}]{{2,1,0}} parameter(0), name=h
        %res = f32[1,16,{row}]{{2,1,0}} parameter(1), name=res
        %g = f32[{row}]{{0}} parameter(2), name=g
        %w = f32[{row},96]{{1,0}} parameter(3), name=w
        %x = f32[1,16,{row}]{{2,1,0}} add(%h, %res)
        %n = f32[1,16,{row}]{{2,1,0}} rms-norm(%x, %g), dimensions={{2}}, epsilon=1e-06
        %a = f32[16,{row}]{{1,0}} bitcast(%n)
        %d = f32[16,96]{{1,0}} dot(%a, %w), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
        ROOT %t = (f32[16,96]{{1,0}}, f32[1,16,{row}]{{2,1,0}}{more}) tuple(%d, %x{", %n" if extra_user else ""})
      }}"""


def explanations(module) -> str:
    return "\n".join(module.analyses.fusion_explanations)


def test_an_rms_norm_feeding_a_dot_is_applied_as_the_dot_loads_its_a_tiles():
    # a LLaMA layer's pre-attention norm: the residual stream x is a model output here (read as it is),
    # the norm and its view join the projection's kernel, and the normalized rows never reach memory
    check_rewrite(Fusion(), _pre_norm(), expected="""
      %fused_output.d {
        %param_0 = f32[1,16,64]{2,1,0} parameter(0)
        %param_1 = f32[64]{0} parameter(1)
        %param_2 = f32[64,96]{1,0} parameter(2)
        %n = f32[1,16,64]{2,1,0} rms-norm(%param_0, %param_1), dimensions={2}, epsilon=1e-06
        %a = f32[16,64]{1,0} bitcast(%n)
        ROOT %d = f32[16,96]{1,0} dot(%a, %param_2), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
      }

      ENTRY %main {
        %h = f32[1,16,64]{2,1,0} parameter(0), name=h
        %res = f32[1,16,64]{2,1,0} parameter(1), name=res
        %g = f32[64]{0} parameter(2), name=g
        %w = f32[64,96]{1,0} parameter(3), name=w
        %x = f32[1,16,64]{2,1,0} add(%h, %res)
        %fusion.d = f32[16,96]{1,0} fusion(%x, %g, %w), calls=%fused_output.d, kind=output
        ROOT %t = (f32[16,96]{1,0}, f32[1,16,64]{2,1,0}) tuple(%fusion.d, %x)
      }""", rtol=1e-4, atol=1e-5)


def test_a_norm_read_by_another_consumer_stays_in_its_own_kernel():
    _, module = run(Fusion(), _pre_norm(extra_user=True))
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    assert "%a -> %d: not normalized in the dot's A-tile loads: %n has users other than the dot's lhs" \
        in explanations(module)


def test_rows_longer_than_a_k_tile_are_normalized_in_the_dots_a_tile_loads_too():
    # hidden 512, twice what one K tile holds: the IR is the short row's, with 512 for 64 (the kernel runs a
    # statistics loop over the rows before its K loop: tests/emit/test_long_row_norm_prologue.py)
    row = 2 * MAX_NORM_ROW
    check_rewrite(Fusion(), _pre_norm(row=row), expected=f"""
      %fused_output.d {{
        %param_0 = f32[1,16,{row}]{{2,1,0}} parameter(0)
        %param_1 = f32[{row}]{{0}} parameter(1)
        %param_2 = f32[{row},96]{{1,0}} parameter(2)
        %n = f32[1,16,{row}]{{2,1,0}} rms-norm(%param_0, %param_1), dimensions={{2}}, epsilon=1e-06
        %a = f32[16,{row}]{{1,0}} bitcast(%n)
        ROOT %d = f32[16,96]{{1,0}} dot(%a, %param_2), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
      }}

      ENTRY %main {{
        %h = f32[1,16,{row}]{{2,1,0}} parameter(0), name=h
        %res = f32[1,16,{row}]{{2,1,0}} parameter(1), name=res
        %g = f32[{row}]{{0}} parameter(2), name=g
        %w = f32[{row},96]{{1,0}} parameter(3), name=w
        %x = f32[1,16,{row}]{{2,1,0}} add(%h, %res)
        %fusion.d = f32[16,96]{{1,0}} fusion(%x, %g, %w), calls=%fused_output.d, kind=output
        ROOT %t = (f32[16,96]{{1,0}}, f32[1,16,{row}]{{2,1,0}}) tuple(%fusion.d, %x)
      }}""", rtol=1e-4, atol=1e-5)


def test_a_long_row_norm_read_by_another_consumer_says_why_it_stays_in_its_own_kernel():
    _, module = run(Fusion(), _pre_norm(row=2 * MAX_NORM_ROW, extra_user=True))
    assert [i.opcode for i in module.entry.instructions].count("rms-norm") == 1
    assert "%a -> %d: not normalized in the dot's A-tile loads: %n has users other than the dot's lhs" \
        in explanations(module)


# BERT's pooler: the first token's row of the last hidden state (a model output), then a dense layer
POOLER = """
  ENTRY %main {
    %h = f32[1,16,64]{2,1,0} parameter(0), name=h
    %w = f32[64,64]{1,0} parameter(1), name=w
    %e = f32[1,16,64]{2,1,0} exp(%h)
    %zero = s64[] constant(), value={0}
    %first = f32[1,64]{1,0} gather(%e, %zero), axis=1
    %d = f32[1,64]{1,0} dot(%first, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
    %p = f32[1,64]{1,0} tanh(%d)
    ROOT %t = (f32[1,16,64]{2,1,0}, f32[1,64]{1,0}) tuple(%e, %p)
  }"""


def test_rows_picked_by_a_constant_index_are_read_in_place_as_the_dot_loads_its_a_tiles():
    # the gathered row (256 bytes of the model output e) is read by the pooler's kernel, not stored apart
    check_rewrite(Fusion(), POOLER, expected="""
      %fused_output.p {
        %param_0 = f32[1,16,64]{2,1,0} parameter(0)
        %param_1 = f32[64,64]{1,0} parameter(1)
        %zero = s64[] constant(), value={0}
        %first = f32[1,64]{1,0} gather(%param_0, %zero), axis=1
        %d = f32[1,64]{1,0} dot(%first, %param_1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
        ROOT %p = f32[1,64]{1,0} tanh(%d)
      }

      ENTRY %main {
        %h = f32[1,16,64]{2,1,0} parameter(0), name=h
        %w = f32[64,64]{1,0} parameter(1), name=w
        %e = f32[1,16,64]{2,1,0} exp(%h)
        %fusion.p = f32[1,64]{1,0} fusion(%e, %w), calls=%fused_output.p, kind=output
        ROOT %t = (f32[1,16,64]{2,1,0}, f32[1,64]{1,0}) tuple(%e, %fusion.p)
      }""", rtol=1e-5, atol=1e-5)



def _gated_mlp(row: int, up_first: bool = True, gate_output: bool = False) -> str:
    """LLaMA's MLP norm: the residual stream x (a model output) normalized, then silu(n @ wg) * (n @ wu); with
    up_first the up projection comes first in the text (so the fusion pass meets the gated product's up
    operand, then the up dot, before the gate joins); with gate_output the gate is a model output too."""
    gate = f"%gate = f32[1,16,48]{{2,1,0}} dot(%n, %wg), {DOTS}"
    up = f"%up = f32[1,16,48]{{2,1,0}} dot(%n, %wu), {DOTS}"
    silu = """%sig = f32[1,16,48]{2,1,0} logistic(%gate)
        %silu = f32[1,16,48]{2,1,0} multiply(%gate, %sig)"""
    body = "\n        ".join([up, gate, silu] if up_first else [gate, silu, up])
    outs = f"f32[1,16,48]{{2,1,0}}, f32[1,16,{row}]{{2,1,0}}" + (", f32[1,16,48]{2,1,0}" if gate_output else "")
    return f"""
      ENTRY %main {{
        %x = f32[1,16,{row}]{{2,1,0}} parameter(0), name=x
        %g = f32[{row}]{{0}} parameter(1), name=g
        %wg = f32[{row},48]{{1,0}} parameter(2), name=wg
        %wu = f32[{row},48]{{1,0}} parameter(3), name=wu
        %n = f32[1,16,{row}]{{2,1,0}} rms-norm(%x, %g), dimensions={{2}}, epsilon=1e-06
        {body}
        %h = f32[1,16,48]{{2,1,0}} multiply(%silu, %up)
        ROOT %t = ({outs}) tuple(%h, %x{", %gate" if gate_output else ""})
      }}"""


DOTS = "lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}"


def test_a_norm_read_by_a_gated_pair_is_applied_as_both_dots_load_their_shared_a_tiles():
    # LLaMA's post-attention RMSNorm before gate and up at hidden 512 (a statistics loop in the kernel) and
    # at 64 (one K tile spans a row), in either order: where the up projection is met before the gate joins
    # its output tile, its decision waits for the gate; either way the norm joins both dots' kernel, no row
    # kernel, and the normalized rows never reach memory
    for row in (64, 2 * MAX_NORM_ROW):
        for up_first in (True, False):
            up = f"%up = f32[1,16,48]{{2,1,0}} dot(%n, %param_3), {DOTS}"
            gate = f"""%gate = f32[1,16,48]{{2,1,0}} dot(%n, %param_2), {DOTS}
                %sig = f32[1,16,48]{{2,1,0}} logistic(%gate)
                %silu = f32[1,16,48]{{2,1,0}} multiply(%gate, %sig)"""
            body = "\n                ".join([gate, up])  # the fusion's canonical order, whichever came first
            module = check_rewrite(Fusion(), _gated_mlp(row, up_first), expected=f"""
              %fused_output.h {{
                %param_0 = f32[1,16,{row}]{{2,1,0}} parameter(0)
                %param_1 = f32[{row}]{{0}} parameter(1)
                %param_2 = f32[{row},48]{{1,0}} parameter(2)
                %param_3 = f32[{row},48]{{1,0}} parameter(3)
                %n = f32[1,16,{row}]{{2,1,0}} rms-norm(%param_0, %param_1), dimensions={{2}}, epsilon=1e-06
                {body}
                ROOT %h = f32[1,16,48]{{2,1,0}} multiply(%silu, %up)
              }}

              ENTRY %main {{
                %x = f32[1,16,{row}]{{2,1,0}} parameter(0), name=x
                %g = f32[{row}]{{0}} parameter(1), name=g
                %wg = f32[{row},48]{{1,0}} parameter(2), name=wg
                %wu = f32[{row},48]{{1,0}} parameter(3), name=wu
                %fusion.h = f32[1,16,48]{{2,1,0}} fusion(%x, %g, %wg, %wu), calls=%fused_output.h, kind=output
                ROOT %t = (f32[1,16,48]{{2,1,0}}, f32[1,16,{row}]{{2,1,0}}) tuple(%fusion.h, %x)
              }}""", rtol=1e-4, atol=1e-5)
            assert not [e for e in explanations(module).splitlines() if e.startswith("%n ->")]


def test_a_norm_read_by_a_gated_pair_that_does_not_form_says_why_it_stays_a_kernel_of_its_own():
    # the gate is a model output as well, so it is stored by a kernel of its own and never joins the up
    # projection's tile: the up projection's deferred decision is reported with the reason it had
    _, module = run(Fusion(), _gated_mlp(64, gate_output=True))
    assert [i.opcode for i in module.entry.instructions].count("rms-norm") == 1
    assert "%n -> %up: not normalized in the dot's A-tile loads: %n has users other than the dot" \
        in explanations(module)
