import itertools

from mlcc.hlo.buffer_assignment import align, assign_buffers
from mlcc.hlo.parser import parse_module

TEXT = """HloModule m, output_names={y}

ENTRY %main {
  %x = f32[64,64]{1,0} parameter(0), name=x
  %w = f32[64,64]{1,0} constant(), ref=w
  %a = f32[64,64]{1,0} exp(%x)
  %b = f32[64,64]{1,0} negate(%a)
  %v = f32[4096]{0} bitcast(%b)
  %c = f32[4096]{0} exp(%v)
  %d = f32[64,64]{1,0} dot(%a, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %e = f32[4096]{0} bitcast(%d)
  %y = f32[4096]{0} add(%c, %e)
  ROOT %t = (f32[4096]{0}) tuple(%y)
}
"""


def test_classes_aliases_and_live_ranges():
    plan = assign_buffers(parse_module(TEXT))
    assert [s.name for s in plan.steps] == ["a", "b", "c", "d", "y"]
    cls = {n: b.tensor_class for n, b in plan.buffers.items()}
    assert cls == {"x": "INPUT", "w": "WEIGHT", "a": "ACTIVATION", "b": "ACTIVATION", "c": "ACTIVATION",
                   "d": "ACTIVATION", "y": "OUTPUT"}
    assert plan.value_buffer["v"] == "b" and plan.value_buffer["e"] == "d"
    assert plan.buffers["a"].uses == [0, 1, 3]
    assert (plan.buffers["b"].first_step, plan.buffers["b"].last_step) == (1, 2)


def test_live_buffers_never_overlap_except_an_elementwise_kernel_writing_over_its_dying_input():
    plan = assign_buffers(parse_module(TEXT))
    # %c = exp(%v) is elementwise and %v (a view of %b) dies at %c's step: %c takes %b's bytes.
    assert plan.in_place == {"c": "b"}
    assert plan.buffers["c"].offset == plan.buffers["b"].offset
    arena = plan.arena_buffers()
    for p, q in itertools.combinations(arena, 2):
        if plan.in_place.get(p.name) == q.name or plan.in_place.get(q.name) == p.name:
            continue
        if p.first_step <= q.last_step and q.first_step <= p.last_step:
            assert p.offset + align(p.bytes) <= q.offset or q.offset + align(q.bytes) <= p.offset
    # a (0..3) overlaps b (1..2), c (2..4), d (3..4): 3 x 16 KiB live at once counted apart; with
    # c over b, two slots suffice from step 2 on, and a, b/c, d fit in three.
    assert plan.lower_bound == 3 * 16384
    assert plan.arena_bytes <= plan.lower_bound


def test_every_in_place_safe_elementwise_op_writes_over_its_dying_operand():
    # The set used to be a hand list that left out 25 elementwise ops (expm1, cbrt, tan, the shifts...):
    # their kernels read each element once, at the coordinates they write, like exp's.
    for op, dtype in (("expm1", "f32"), ("cbrt", "f32"), ("tan", "f32"), ("shift-left", "s32"),
                      ("atan2", "f32"), ("round-nearest-even", "f32")):
        operands = "%b, %x" if op in ("shift-left", "atan2") else "%b"
        plan = assign_buffers(parse_module(f"""HloModule m, output_names={{y}}

ENTRY %main {{
  %x = {dtype}[64,64]{{1,0}} parameter(0), name=x
  %a = {dtype}[64,64]{{1,0}} negate(%x)
  %b = {dtype}[64,64]{{1,0}} negate(%a)
  %c = {dtype}[64,64]{{1,0}} {op}({operands})
  %y = {dtype}[64,64]{{1,0}} negate(%c)
  ROOT %t = ({dtype}[64,64]{{1,0}}) tuple(%y)
}}
"""))
        assert plan.in_place == {"b": "a", "c": "b"}, op
