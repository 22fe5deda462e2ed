"""Multi-output fusion (mlcc/hlo/passes/multi_output.py): a decode step's present KV caches become results of the
attention fusion that computes them as its k and v. IR text in, fused IR out, the same values before and after;
the buffer plan gives each result a buffer and the kernel one launch."""

from __future__ import annotations

from mlcc.hlo.buffer_assignment import assign_buffers
from mlcc.hlo.ir import Module
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.multi_output import MultiOutputFusion
from mlcc.hlo.passes.schedule import Schedule
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module
from tests.hlo.passes.pass_numerics import assert_same_values, canonical, load


def decode_step(past: int, extra: str = "", extra_shape: str = "") -> str:
    """A decode step of 2 heads of 4: q, k, v sliced from a QKV projection's row, k and v appended to the
    past caches, which the step returns with the attention."""
    c = f"f32[1,2,{past + 1},4]{{3,2,1,0}}"
    return f"""
  ENTRY %main {{
    %qkv = f32[1,24]{{1,0}} parameter(0), name=qkv
    %pk = f32[1,2,{past},4]{{3,2,1,0}} parameter(1), name=past_k
    %pv = f32[1,2,{past},4]{{3,2,1,0}} parameter(2), name=past_v
    %r = f32[1,1,24]{{2,1,0}} bitcast(%qkv)
    %qs = f32[1,1,8]{{2,1,0}} slice(%r), start_indices={{0,0,0}}, limit_indices={{1,1,8}}, strides={{1,1,1}}
    %ks = f32[1,1,8]{{2,1,0}} slice(%r), start_indices={{0,0,8}}, limit_indices={{1,1,16}}, strides={{1,1,1}}
    %vs = f32[1,1,8]{{2,1,0}} slice(%r), start_indices={{0,0,16}}, limit_indices={{1,1,24}}, strides={{1,1,1}}
    %q = f32[1,2,1,4]{{3,2,1,0}} bitcast(%qs)
    %k1 = f32[1,2,1,4]{{3,2,1,0}} bitcast(%ks)
    %v1 = f32[1,2,1,4]{{3,2,1,0}} bitcast(%vs)
    %k = {c} concatenate(%pk, %k1), dimension=2
    %v = {c} concatenate(%pv, %v1), dimension=2
    %a = f32[1,2,1,4]{{3,2,1,0}} attention(%q, %k, %v), scale=0.5, causal=false{extra}
    ROOT %t = (f32[1,2,1,4]{{3,2,1,0}}, {c}, {c}{extra_shape}) tuple(%a, %k, %v{", %e" if extra else ""})
  }}"""


def fused(text: str) -> tuple[Module, bool]:
    module = load(text)
    Fusion().run(module)
    verify_module(module)
    changed = MultiOutputFusion().run(module)
    verify_module(module)
    assert_same_values(load(text), module)
    return module, changed


def test_small_caches_that_attention_recomputes_become_its_results():
    # 64-byte caches: fusion recomputes each in the attention fusion and in a loop kernel of its own for the
    # output; the loop kernels go, the attention fusion returns what it computed
    module, changed = fused(decode_step(3))
    assert changed
    assert format_module(module) == canonical("""
      HloModule m

      %fused_attention.a {
        %param_0 = f32[1,24]{1,0} parameter(0)
        %param_1 = f32[1,2,3,4]{3,2,1,0} parameter(1)
        %param_2 = f32[1,2,3,4]{3,2,1,0} parameter(2)
        %r = f32[1,1,24]{2,1,0} bitcast(%param_0)
        %qs = f32[1,1,8]{2,1,0} slice(%r), limit_indices={1,1,8}, start_indices={0,0,0}, strides={1,1,1}
        %q = f32[1,2,1,4]{3,2,1,0} bitcast(%qs)
        %ks = f32[1,1,8]{2,1,0} slice(%r), limit_indices={1,1,16}, start_indices={0,0,8}, strides={1,1,1}
        %k1 = f32[1,2,1,4]{3,2,1,0} bitcast(%ks)
        %k = f32[1,2,4,4]{3,2,1,0} concatenate(%param_1, %k1), dimension=2
        %vs = f32[1,1,8]{2,1,0} slice(%r), limit_indices={1,1,24}, start_indices={0,0,16}, strides={1,1,1}
        %v1 = f32[1,2,1,4]{3,2,1,0} bitcast(%vs)
        %v = f32[1,2,4,4]{3,2,1,0} concatenate(%param_2, %v1), dimension=2
        %a = f32[1,2,1,4]{3,2,1,0} attention(%q, %k, %v), causal=false, scale=0.5
        ROOT %tuple = (f32[1,2,1,4]{3,2,1,0}, f32[1,2,4,4]{3,2,1,0}, f32[1,2,4,4]{3,2,1,0}) tuple(%a, %k, %v)
      }

      ENTRY %main {
        %qkv = f32[1,24]{1,0} parameter(0), name=qkv
        %pk = f32[1,2,3,4]{3,2,1,0} parameter(1), name=past_k
        %pv = f32[1,2,3,4]{3,2,1,0} parameter(2), name=past_v
        %fusion.a = (f32[1,2,1,4]{3,2,1,0}, f32[1,2,4,4]{3,2,1,0}, f32[1,2,4,4]{3,2,1,0}) fusion(%qkv, %pk, %pv), calls=%fused_attention.a, kind=attention
        %a = f32[1,2,1,4]{3,2,1,0} get-tuple-element(%fusion.a), index=0
        %k = f32[1,2,4,4]{3,2,1,0} get-tuple-element(%fusion.a), index=1
        %v = f32[1,2,4,4]{3,2,1,0} get-tuple-element(%fusion.a), index=2
        ROOT %t = (f32[1,2,1,4]{3,2,1,0}, f32[1,2,4,4]{3,2,1,0}, f32[1,2,4,4]{3,2,1,0}) tuple(%a, %k, %v)
      }""")
    text = format_module(module)
    assert format_module(parse_module(text)) == text


def test_large_caches_stored_by_loop_kernels_join_the_attention_that_read_them():
    # 1 KiB caches: fusion stores each in a loop kernel the attention reads; merged, the attention computes
    # them from the past caches and the new rows (one parameter each, the QKV row shared) and stores them
    before = load(decode_step(31))
    Fusion().run(before)
    assert sum(i.opcode == "fusion" for i in before.entry.instructions) == 3
    module, changed = fused(decode_step(31))
    assert changed
    (f,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in f.operands] == ["qkv", "pk", "pv"] and len(f.shape.elements) == 3
    assert [i.opcode for i in module.entry.instructions].count("get-tuple-element") == 3


def test_an_output_that_is_not_k_or_v_keeps_its_kernel():
    module, _ = fused(decode_step(3, extra="\n    %e0 = f32[1,2,3,4]{3,2,1,0} exp(%pk)"
                                                  "\n    %e = f32[1,2,3,4]{3,2,1,0} negate(%e0)",
                                  extra_shape=", f32[1,2,3,4]{3,2,1,0}"))
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert sorted(f.attrs["kind"] for f in fusions) == ["attention", "loop"]
    (attention,) = [f for f in fusions if f.attrs["kind"] == "attention"]
    assert len(attention.shape.elements) == 3


def test_each_result_gets_a_buffer_written_at_the_fusions_step():
    module, _ = fused(decode_step(31))
    Schedule().run(module)
    plan = assign_buffers(module)
    (step,) = plan.steps
    assert plan.results_of(step) == ["a", "k", "v"]
    for name in ("a", "k", "v"):
        b = plan.buffers[name]
        assert b.tensor_class == "OUTPUT" and b.producer_step == 0 and b.uses == [0]
    assert plan.buffers["k"].bytes == 2 * 32 * 4 * 4
