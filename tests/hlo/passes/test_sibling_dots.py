import numpy as np

from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.sibling_dots import MergeSiblingDots
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module

QKV = """
  HloModule m, output_names={q,k,v}

  ENTRY %main {
    %x = f32[16,64]{1,0} parameter(0), name=x
    %wq = f32[64,32]{1,0} constant(), ref=wq
    %wk = f32[64,32]{1,0} constant(), ref=wk
    %wv = f32[64,16]{1,0} constant(), ref=wv
    %bq = f32[32]{0} constant(), ref=bq
    %bk = f32[32]{0} constant(), ref=bk
    %bv = f32[16]{0} constant(), ref=bv
    %q0 = f32[16,32]{1,0} dot(%x, %wq), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %k0 = f32[16,32]{1,0} dot(%x, %wk), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %v0 = f32[16,16]{1,0} dot(%x, %wv), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %bqb = f32[16,32]{1,0} broadcast(%bq), dimensions={1}
    %bkb = f32[16,32]{1,0} broadcast(%bk), dimensions={1}
    %bvb = f32[16,16]{1,0} broadcast(%bv), dimensions={1}
    %q = f32[16,32]{1,0} add(%q0, %bqb)
    %k = f32[16,32]{1,0} add(%k0, %bkb)
    %v = f32[16,16]{1,0} add(%v0, %bvb)
    ROOT %t = (f32[16,32]{1,0}, f32[16,32]{1,0}, f32[16,16]{1,0}) tuple(%q, %k, %v)
  }"""


def test_q_k_v_projections_become_one_dot_with_its_bias_and_three_slices():
    module = parse_module(QKV)
    rng = np.random.default_rng(0)
    for name, shape in [("wq", (64, 32)), ("wk", (64, 32)), ("wv", (64, 16)), ("bq", (32,)), ("bk", (32,)), ("bv", (16,))]:
        module.constants[name] = rng.standard_normal(shape).astype(np.float32)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    want = evaluate(module, {"x": x})
    assert MergeSiblingDots().run(module)
    DeadCodeElimination().run(module)
    verify_module(module)
    ops = [i.opcode for i in module.entry.instructions]
    assert ops.count("dot") == 1 and ops.count("add") == 1 and ops.count("slice") == 3
    text = format_module(module)
    assert "f32[16,80]{1,0} dot(%x, %merged_weights)" in text
    assert "start_indices={0,64}, strides={1,1}" in text
    got = evaluate(module, {"x": x})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)  # a wider matmul sums in another order


def test_dots_of_different_inputs_or_computed_weights_stay_apart():
    module = parse_module("""
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %w = f32[8,8]{1,0} parameter(1)
        %c = f32[8,8]{1,0} constant(), splat=1.0
        %a = f32[4,8]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %b = f32[4,8]{1,0} dot(%x, %c), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %t = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(%a, %b)
      }""")
    assert not MergeSiblingDots().run(module)


def test_a_gated_mlps_gate_and_up_projections_stay_apart():
    # silu(x @ Wg) * (x @ Wu): the fusion pass accumulates both in one output tile, which a merged [.., 2F]
    # dot read back by a loop kernel would prevent
    module = parse_module("""
      ENTRY %main {
        %x = f32[16,64]{1,0} parameter(0), name=x
        %wg = f32[64,32]{1,0} constant(), splat=0.5
        %wu = f32[64,32]{1,0} constant(), splat=0.25
        %g = f32[16,32]{1,0} dot(%x, %wg), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %u = f32[16,32]{1,0} dot(%x, %wu), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %s = f32[16,32]{1,0} logistic(%g)
        %silu = f32[16,32]{1,0} multiply(%g, %s)
        %h = f32[16,32]{1,0} multiply(%silu, %u)
        ROOT %t = (f32[16,32]{1,0}) tuple(%h)
      }""")
    assert not MergeSiblingDots().run(module)
