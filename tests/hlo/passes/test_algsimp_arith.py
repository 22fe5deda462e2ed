import pytest

from mlcc.hlo.passes.algsimp import AlgebraicSimplifier
from tests.hlo.passes.pass_numerics import check_rewrite


def _unary_case(body: str, dtype: str = "f32") -> str:
    return f"""
      ENTRY %main {{
        %p0 = {dtype}[4]{{0}} parameter(0)
        {body}
        ROOT %r = ({dtype}[4]{{0}}) tuple(%y)
      }}"""


IDENTITY = """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        ROOT %r = (f32[4]{0}) tuple(%p0)
      }"""


@pytest.mark.parametrize("body", [
    "%c = f32[4]{0} constant(), splat=1.0\n%y = f32[4]{0} multiply(%c, %p0)",
    "%c = f32[] constant(), value={0.0}\n%b = f32[4]{0} broadcast(%c), dimensions={}\n%y = f32[4]{0} add(%p0, %b)",
    "%c = f32[4]{0} constant(), value={0.0,0.0,0.0,0.0}\n%y = f32[4]{0} subtract(%p0, %c)",
    "%c = f32[4]{0} constant(), splat=1.0\n%y = f32[4]{0} divide(%p0, %c)",
    "%n = f32[4]{0} negate(%p0)\n%y = f32[4]{0} negate(%n)",
    "%c = f32[4]{0} constant(), splat=1.0\n%y = f32[4]{0} power(%p0, %c)",
    "%c = f32[4]{0} constant(), splat=-inf\n%y = f32[4]{0} maximum(%c, %p0)",
    "%t = pred[4]{0} constant(), splat=true\n%y = f32[4]{0} select(%t, %p0, %p0)",
])
def test_identities_disappear(body):
    check_rewrite(AlgebraicSimplifier(), _unary_case(body.replace("\n", "\n        ")), expected=IDENTITY)


def test_division_by_a_constant_becomes_a_multiply_by_its_reciprocal():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %c = f32[4]{0} constant(), value={2.0,4.0,8.0,0.5}
        %y = f32[4]{0} divide(%p0, %c)
        %s = f32[] constant(), value={64.0}
        %b = f32[4]{0} broadcast(%s), dimensions={}
        %z = f32[4]{0} divide(%y, %b)
        ROOT %r = (f32[4]{0}) tuple(%z)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %div-to-mul = f32[4]{0} constant(), value={0.5,0.25,0.125,2.0}
        %div-to-mul.1 = f32[4]{0} multiply(%p0, %div-to-mul)
        %div-to-mul.2 = f32[4]{0} constant(), splat=0.015625
        %div-to-mul.3 = f32[4]{0} multiply(%div-to-mul.1, %div-to-mul.2)
        ROOT %r = (f32[4]{0}) tuple(%div-to-mul.3)
      }""")


def test_integer_division_and_multiplication_by_other_constants_stay():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = s32[4]{0} parameter(0)
        %c = s32[4]{0} constant(), splat=2
        %y = s32[4]{0} divide(%p0, %c)
        %z = s32[4]{0} multiply(%y, %c)
        ROOT %r = (s32[4]{0}) tuple(%z)
      }""", expected=None)


@pytest.mark.parametrize("exponent,body", [
    ("2.0", "%pow-two = f32[4]{0} multiply(%p0, %p0)\n        ROOT %r = (f32[4]{0}) tuple(%pow-two)"),
    ("3.0", "%pow-three = f32[4]{0} multiply(%p0, %p0)\n        %pow-three.1 = f32[4]{0} multiply(%pow-three, %p0)"
            "\n        ROOT %r = (f32[4]{0}) tuple(%pow-three.1)"),
    ("0.5", "%pow-half = f32[4]{0} sqrt(%p0)\n        ROOT %r = (f32[4]{0}) tuple(%pow-half)"),
    ("-0.5", "%pow-neg-half = f32[4]{0} rsqrt(%p0)\n        ROOT %r = (f32[4]{0}) tuple(%pow-neg-half)"),
])
def test_small_powers_become_multiplies_and_roots(exponent, body):
    module = check_rewrite(AlgebraicSimplifier(), f"""
      ENTRY %main {{
        %p0 = f32[4]{{0}} parameter(0)
        %c = f32[4]{{0}} constant(), splat={exponent}
        %y = f32[4]{{0}} power(%p0, %c)
        ROOT %r = (f32[4]{{0}}) tuple(%y)
      }}""", expected=f"""
      ENTRY %main {{
        %p0 = f32[4]{{0}} parameter(0)
        {body}
      }}""", rtol=1e-6)
    assert module is not None


def test_reciprocal_square_root_and_pred_selects():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %p1 = pred[4]{0} parameter(1)
        %one = f32[4]{0} constant(), splat=1.0
        %s = f32[4]{0} sqrt(%p0)
        %y = f32[4]{0} divide(%one, %s)
        %t = pred[4]{0} constant(), splat=true
        %f = pred[4]{0} constant(), splat=false
        %k = pred[4]{0} select(%p1, %t, %f)
        %a = pred[4]{0} and(%t, %k)
        %d = pred[4]{0} select(%p1, %f, %t)
        ROOT %r = (f32[4]{0}, pred[4]{0}, pred[4]{0}) tuple(%y, %a, %d)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %p1 = pred[4]{0} parameter(1)
        %recip-sqrt = f32[4]{0} rsqrt(%p0)
        %select-false-true = pred[4]{0} not(%p1)
        ROOT %r = (f32[4]{0}, pred[4]{0}, pred[4]{0}) tuple(%recip-sqrt, %p1, %select-false-true)
      }""")


def test_copy_of_copy_is_one_copy_in_the_outer_layout():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[2,3]{1,0} parameter(0)
        %a = f32[2,3]{0,1} copy(%p0)
        %b = f32[2,3]{1,0} copy(%a)
        ROOT %r = (f32[2,3]{1,0}) tuple(%b)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[2,3]{1,0} parameter(0)
        %copy-copy = f32[2,3]{1,0} copy(%p0)
        ROOT %r = (f32[2,3]{1,0}) tuple(%copy-copy)
      }""")


def test_max_with_zero_is_relu():
    # jax.nn.relu in /work/shared/models/cnn.stablehlo.mlir: maximum(x, broadcast(0.0))
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %add = f32[2,4]{1,0} parameter(0)
        %constant = f32[] constant(), value={0.0}, origin={"main/relu/%cst"}
        %broadcast.2 = f32[2,4]{1,0} broadcast(%constant), dimensions={}, origin={"main/relu/%0"}
        %maximum = f32[2,4]{1,0} maximum(%add, %broadcast.2), origin={"main/relu/%1"}
        ROOT %r = (f32[2,4]{1,0}) tuple(%maximum)
      }""", expected="""
      ENTRY %main {
        %add = f32[2,4]{1,0} parameter(0)
        %max-zero = f32[2,4]{1,0} relu(%add), origin={"main/relu/%cst","main/relu/%0","main/relu/%1"}
        ROOT %r = (f32[2,4]{1,0}) tuple(%max-zero)
      }""")


def test_an_index_compared_with_what_every_index_passes_is_a_constant_at_any_size():
    # transformers' all-keep mask arange(seq) >= 0: with a symbolic seq no constant folding can evaluate
    # it, but every index is >= 0 whatever seq is; an index > 2 depends on the index and stays
    check_rewrite(AlgebraicSimplifier(), """
      HloModule m, output_names={a,b}, symbols={seq={1,64}}

      ENTRY %main {
        %i = s64[seq]{0} iota(), iota_dimension=0
        %r = s64[1,seq]{1,0} reshape(%i)
        %zero = s64[1,seq]{1,0} constant(), splat=0
        %all = pred[1,seq]{1,0} compare(%r, %zero), direction=GE
        %two = s64[1,seq]{1,0} constant(), splat=2
        %some = pred[1,seq]{1,0} compare(%r, %two), direction=GT
        ROOT %t = (pred[1,seq]{1,0}, pred[1,seq]{1,0}) tuple(%all, %some)
      }""", symbols={"seq": 5}, expected="""
      HloModule m, output_names={a,b}, symbols={seq={1,64}}

      ENTRY %main {
        %i = s64[seq]{0} iota(), iota_dimension=0
        %r = s64[1,seq]{1,0} reshape(%i)
        %iota-compare = pred[] constant(), value={true}
        %iota-compare.1 = pred[1,seq]{1,0} broadcast(%iota-compare), dimensions={}
        %two = s64[1,seq]{1,0} constant(), splat=2
        %some = pred[1,seq]{1,0} compare(%r, %two), direction=GT
        ROOT %t = (pred[1,seq]{1,0}, pred[1,seq]{1,0}) tuple(%iota-compare.1, %some)
      }""")
