from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.pattern import RewritePass, Rule, match, op, scalar, scalar_value, var
from mlcc.hlo.testing import check_pass

TEXT = """
ENTRY %main {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %two = f32[] constant(), value={2.0}
  %b = f32[4]{0} broadcast(%two), dimensions={}
  %m = f32[4]{0} multiply(%b, %p0)
  %s = f32[4]{0} add(%m, %m)
  %t = f32[4]{0} add(%m, %p1)
  ROOT %r = (f32[4]{0}, f32[4]{0}) tuple(%s, %t)
}"""


def _inst(module, name):
    return next(i for i in module.entry.instructions if i.name == name)


def test_commutative_operands_match_in_either_order_and_scalars_see_through_broadcasts():
    module = parse_module(TEXT)
    m = match(op("multiply", var("x"), scalar("c")), _inst(module, "m"))
    assert m is not None and m.x.name == "p0" and m.c == 2.0 and m.root.name == "m"
    assert match(op("multiply", var("x"), scalar(value=3.0)), _inst(module, "m")) is None
    assert scalar_value(_inst(module, "b")) == 2.0


def test_a_capture_used_twice_must_be_the_same_instruction():
    module = parse_module(TEXT)
    same = op("add", var("x"), var("x"))
    assert match(same, _inst(module, "s")) is not None
    assert match(same, _inst(module, "t")) is None


def test_rewrite_pass_names_new_instructions_after_the_rule_and_counts_it():
    double = RewritePass("double", [Rule("add-self", op("add", var("x"), var("x")),
                                         lambda rw, m: rw.op("multiply", [m.x, rw.constant(2.0, "f32", (4,))]))])
    check_pass(double, TEXT, expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %p1 = f32[4]{0} parameter(1)
        %two = f32[] constant(), value={2.0}
        %b = f32[4]{0} broadcast(%two), dimensions={}
        %m = f32[4]{0} multiply(%b, %p0)
        %add-self = f32[4]{0} constant(), splat=2.0
        %add-self.1 = f32[4]{0} multiply(%m, %add-self)
        %t = f32[4]{0} add(%m, %p1)
        ROOT %r = (f32[4]{0}, f32[4]{0}) tuple(%add-self.1, %t)
      }""")
    assert double.fired["add-self"] == 1


def test_a_rewrite_that_gives_up_leaves_nothing_behind():
    def give_up(rw, m):
        rw.op("negate", [m.x])
        return None
    check_pass(RewritePass("nothing", [Rule("give-up", op("add", var("x"), var("x")), give_up)]), TEXT, expected=None)


def test_scalars_see_through_every_view_reverse_included_but_not_through_arithmetic():
    # The views are the opcode table's "view" flag: reverse re-indexes without dropping an element,
    # so a uniform operand stays uniform (the hand list this replaced left reverse out).
    module = parse_module("""
ENTRY %main {
  %two = f32[] constant(), value={2.0}
  %b = f32[4,2]{1,0} broadcast(%two), dimensions={}
  %r = f32[4,2]{1,0} reverse(%b), dimensions={0}
  %t = f32[2,4]{1,0} transpose(%r), dimensions={1,0}
  %c = f32[8]{0} reshape(%t)
  %iota = s32[8]{0} iota(), iota_dimension=0
  ROOT %n = f32[8]{0} negate(%c)
}""")
    assert [scalar_value(_inst(module, n)) for n in ("b", "r", "t", "c")] == [2.0] * 4
    assert scalar_value(_inst(module, "n")) is None and scalar_value(_inst(module, "iota")) is None
