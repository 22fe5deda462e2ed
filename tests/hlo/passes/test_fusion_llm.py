"""Fusions of LLM decoders (issue #24): the embedding lookup in its consumers, rotary embeddings computed as
the attention kernel loads q and k. IR text in, fused IR out, the same values before and after."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.passes.fusion import Fusion
from tests.hlo.passes.pass_numerics import check_rewrite, run

IDS = {"ids": np.array([[3, 0, 7, 7]], np.int64)}

# LLaMA's first layer: the embedding rows feed the first RMSNorm and the first residual add
EMBEDDING = """
  ENTRY %main {
    %ids = s64[1,4]{1,0} parameter(0), name=ids
    %table = f32[8,16]{1,0} parameter(1), name=table
    %g = f32[16]{0} parameter(2), name=g
    %w = f32[16,16]{1,0} parameter(3), name=w
    %rows = f32[1,4,16]{2,1,0} gather(%table, %ids), axis=0
    %n = f32[1,4,16]{2,1,0} rms-norm(%rows, %g), dimensions={2}, epsilon=1e-06
    %d = f32[1,4,16]{2,1,0} dot(%n, %w), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %r = f32[1,4,16]{2,1,0} add(%rows, %d)
    ROOT %t = (f32[1,4,16]{2,1,0}) tuple(%r)
  }"""


def test_the_embedding_lookup_runs_in_the_first_norm_and_the_residual_add():
    # the rows are gathered by the one kernel that normalizes them as the projection loads its A tiles and adds
    # them to its result in the epilogue: the rows and the normalized rows are never stored
    check_rewrite(Fusion(), EMBEDDING, inputs=IDS, expected="""
      %fused_output.r {
        %param_0 = f32[8,16]{1,0} parameter(0)
        %param_1 = s64[1,4]{1,0} parameter(1)
        %param_2 = f32[16]{0} parameter(2)
        %param_3 = f32[16,16]{1,0} parameter(3)
        %rows = f32[1,4,16]{2,1,0} gather(%param_0, %param_1), axis=0
        %n = f32[1,4,16]{2,1,0} rms-norm(%rows, %param_2), dimensions={2}, epsilon=1e-06
        %d = f32[1,4,16]{2,1,0} dot(%n, %param_3), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %r = f32[1,4,16]{2,1,0} add(%rows, %d)
      }

      ENTRY %main {
        %ids = s64[1,4]{1,0} parameter(0), name=ids
        %table = f32[8,16]{1,0} parameter(1), name=table
        %g = f32[16]{0} parameter(2), name=g
        %w = f32[16,16]{1,0} parameter(3), name=w
        %fusion.r = f32[1,4,16]{2,1,0} fusion(%table, %ids, %g, %w), calls=%fused_output.r, kind=output
        ROOT %t = (f32[1,4,16]{2,1,0}) tuple(%fusion.r)
      }""", rtol=1e-5, atol=1e-5)


# rotate-half RoPE on q and k sliced out of a merged QKV projection, then attention (2 heads of 4)
ROPE = """
  ENTRY %main {
    %qkv = f32[1,4,24]{2,1,0} parameter(0), name=qkv
    %cos = f32[1,1,4,4]{3,2,1,0} parameter(1), name=cos
    %sin = f32[1,1,4,4]{3,2,1,0} parameter(2), name=sin
    %qs = f32[1,4,8]{2,1,0} slice(%qkv), start_indices={0,0,0}, limit_indices={1,4,8}, strides={1,1,1}
    %ks = f32[1,4,8]{2,1,0} slice(%qkv), start_indices={0,0,8}, limit_indices={1,4,16}, strides={1,1,1}
    %vs = f32[1,4,8]{2,1,0} slice(%qkv), start_indices={0,0,16}, limit_indices={1,4,24}, strides={1,1,1}
    %qr = f32[1,4,2,4]{3,2,1,0} bitcast(%qs)
    %q = f32[1,2,4,4]{3,1,2,0} bitcast(%qr)
    %kr = f32[1,4,2,4]{3,2,1,0} bitcast(%ks)
    %k = f32[1,2,4,4]{3,1,2,0} bitcast(%kr)
    %vr = f32[1,4,2,4]{3,2,1,0} bitcast(%vs)
    %v = f32[1,2,4,4]{3,1,2,0} bitcast(%vr)
    %c = f32[1,2,4,4]{3,2,1,0} broadcast(%cos), dimensions={0,1,2,3}
    %s = f32[1,2,4,4]{3,2,1,0} broadcast(%sin), dimensions={0,1,2,3}
    %q1 = f32[1,2,4,2]{3,1,2,0} slice(%q), start_indices={0,0,0,0}, limit_indices={1,2,4,2}, strides={1,1,1,1}
    %q2 = f32[1,2,4,2]{3,1,2,0} slice(%q), start_indices={0,0,0,2}, limit_indices={1,2,4,4}, strides={1,1,1,1}
    %nq2 = f32[1,2,4,2]{3,1,2,0} negate(%q2)
    %rq = f32[1,2,4,4]{3,1,2,0} concatenate(%nq2, %q1), dimension=3
    %qc = f32[1,2,4,4]{3,1,2,0} multiply(%q, %c)
    %qs2 = f32[1,2,4,4]{3,1,2,0} multiply(%rq, %s)
    %qe = f32[1,2,4,4]{3,1,2,0} add(%qc, %qs2)
    %k1 = f32[1,2,4,2]{3,1,2,0} slice(%k), start_indices={0,0,0,0}, limit_indices={1,2,4,2}, strides={1,1,1,1}
    %k2 = f32[1,2,4,2]{3,1,2,0} slice(%k), start_indices={0,0,0,2}, limit_indices={1,2,4,4}, strides={1,1,1,1}
    %nk2 = f32[1,2,4,2]{3,1,2,0} negate(%k2)
    %rk = f32[1,2,4,4]{3,1,2,0} concatenate(%nk2, %k1), dimension=3
    %kc = f32[1,2,4,4]{3,1,2,0} multiply(%k, %c)
    %ks2 = f32[1,2,4,4]{3,1,2,0} multiply(%rk, %s)
    %ke = f32[1,2,4,4]{3,1,2,0} add(%kc, %ks2)
    %a = f32[1,2,4,4]{3,1,2,0} attention(%qe, %ke, %v), causal=true, scale=0.5
    ROOT %t = (f32[1,2,4,4]{3,1,2,0}) tuple(%a)
  }"""


def test_rotary_embeddings_join_the_attention_kernel_that_loads_q_and_k():
    _, module = run(Fusion(), ROPE)
    entry = [i for i in module.entry.instructions if i.opcode not in ("parameter", "tuple")]
    assert [(i.opcode, i.attrs.get("kind")) for i in entry] == [("fusion", "attention")]
    (fusion,) = entry
    assert [o.name for o in fusion.operands] == ["qkv", "cos", "sin"]  # q, k, v: read from the projection
    ops = [i.opcode for i in fusion.called.instructions]
    assert ops.count("concatenate") == 2 and ops.count("attention") == 1 and "copy" not in ops


def test_a_rotated_q_that_is_also_an_output_is_stored_and_still_recomputed_per_tile_when_tiny():
    # the rotated q is a model output as well: its own loop kernel stores it, and the attention kernel,
    # rather than reading that copy, recomputes its 128 bytes per tile from the projection
    text = ROPE.replace("ROOT %t = (f32[1,2,4,4]{3,1,2,0}) tuple(%a)",
                        "ROOT %t = (f32[1,2,4,4]{3,1,2,0}, f32[1,2,4,4]{3,1,2,0}) tuple(%a, %qe)")
    _, module = run(Fusion(), text)
    fusions = {i.attrs["kind"]: i for i in module.entry.instructions if i.opcode == "fusion"}
    assert sorted(fusions) == ["attention", "loop"]
    assert [o.name for o in fusions["attention"].operands] == ["qkv", "cos", "sin"]


def test_explain_fusion_lists_the_attention_forms_left_unrecognized_first():
    module = run(Fusion(), EMBEDDING)[1]
    assert not any("attention" in e for e in module.analyses.fusion_explanations)
    module.analyses.unrecognized = ["%softmax -> %dot: attention not recognized: why"]
    Fusion().run(module)
    assert module.analyses.fusion_explanations[0] == "%softmax -> %dot: attention not recognized: why"


# LLaMA's MLP: silu(x @ Wg) * (x @ Wu), then the down projection
GATED_MLP = """
  ENTRY %main {
    %x = f32[1,4,16]{2,1,0} parameter(0), name=x
    %wg = f32[16,32]{1,0} parameter(1), name=wg
    %wu = f32[16,32]{1,0} parameter(2), name=wu
    %gate = f32[1,4,32]{2,1,0} dot(%x, %wg), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %up = f32[1,4,32]{2,1,0} dot(%x, %wu), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %sig = f32[1,4,32]{2,1,0} logistic(%gate)
    %silu = f32[1,4,32]{2,1,0} multiply(%gate, %sig)
    %h = f32[1,4,32]{2,1,0} multiply(%silu, %up)
    ROOT %t = (f32[1,4,32]{2,1,0}) tuple(%h)
  }"""


def test_gate_and_up_projections_accumulate_in_one_output_tile():
    check_rewrite(Fusion(), GATED_MLP, expected="""
      %fused_output.h {
        %param_0 = f32[1,4,16]{2,1,0} parameter(0)
        %param_1 = f32[16,32]{1,0} parameter(1)
        %param_2 = f32[16,32]{1,0} parameter(2)
        %gate = f32[1,4,32]{2,1,0} dot(%param_0, %param_1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %sig = f32[1,4,32]{2,1,0} logistic(%gate)
        %silu = f32[1,4,32]{2,1,0} multiply(%gate, %sig)
        %up = f32[1,4,32]{2,1,0} dot(%param_0, %param_2), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %h = f32[1,4,32]{2,1,0} multiply(%silu, %up)
      }

      ENTRY %main {
        %x = f32[1,4,16]{2,1,0} parameter(0), name=x
        %wg = f32[16,32]{1,0} parameter(1), name=wg
        %wu = f32[16,32]{1,0} parameter(2), name=wu
        %fusion.h = f32[1,4,32]{2,1,0} fusion(%x, %wg, %wu), calls=%fused_output.h, kind=output
        ROOT %t = (f32[1,4,32]{2,1,0}) tuple(%fusion.h)
      }""", rtol=1e-5, atol=1e-5)


def test_two_dots_of_different_inputs_keep_their_own_kernels_and_say_why():
    text = GATED_MLP.replace("%up = f32[1,4,32]{2,1,0} dot(%x, %wu)", "%up = f32[1,4,32]{2,1,0} dot(%y, %wu)") \
        .replace("%wu = f32[16,32]{1,0} parameter(2), name=wu",
                 "%wu = f32[16,32]{1,0} parameter(2), name=wu\n    %y = f32[1,4,16]{2,1,0} parameter(3), name=y")
    _, module = run(Fusion(), text)
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    assert any("the two dots multiply different left operands" in e for e in module.analyses.fusion_explanations)
