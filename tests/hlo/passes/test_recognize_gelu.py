import re

import pytest

from mlcc.hlo.passes.recognize.gelu import RecognizeGelu
from tests.hlo.passes.pass_numerics import check_rewrite


def _source_nodes(text: str) -> str:
    """Every origin of the input, in program order: the composite stands for all of them."""
    names = re.findall(r'origin=\{([^}]*)\}', text)
    return ",".join(dict.fromkeys(n for group in names for n in group.split(",")))


def _gelu(approximate: str, origin: str) -> str:
    return f"""
      ENTRY %main {{
        %arg = f32[2,8,32]{{2,1,0}} parameter(0), name=x
        %gelu = f32[2,8,32]{{2,1,0}} gelu(%arg), approximate={approximate}, origin={{{origin}}}
        ROOT %tuple = (f32[2,8,32]{{2,1,0}}) tuple(%gelu)
      }}"""


# nn.GELU() exported by torch.onnx with opset 16 (legacy exporter): Div, Erf, Add, Mul, Mul
TORCH_ERF = """
  ENTRY %main {
    %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
    %constant = f32[2,8,32]{2,1,0} constant(), splat=1.4142135381698608, origin={"/Div"}
    %divide = f32[2,8,32]{2,1,0} divide(%arg, %constant), origin={"/Div"}
    %erf = f32[2,8,32]{2,1,0} erf(%divide), origin={"/Erf"}
    %constant.1 = f32[2,8,32]{2,1,0} constant(), splat=1.0, origin={"/Add"}
    %add = f32[2,8,32]{2,1,0} add(%erf, %constant.1), origin={"/Add"}
    %multiply = f32[2,8,32]{2,1,0} multiply(%arg, %add), origin={"/Mul"}
    %constant.2 = f32[2,8,32]{2,1,0} constant(), splat=0.5, origin={"/Mul_1"}
    %multiply.1 = f32[2,8,32]{2,1,0} multiply(%multiply, %constant.2), origin={"/Mul_1"}
    ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%multiply.1)
  }"""

# nn.GELU(approximate="tanh"), same exporter: x*x*x, 0.044715, sqrt(2/pi), Tanh
TORCH_TANH = """
  ENTRY %main {
    %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
    %multiply = f32[2,8,32]{2,1,0} multiply(%arg, %arg), origin={"/Mul"}
    %multiply.1 = f32[2,8,32]{2,1,0} multiply(%arg, %multiply), origin={"/Mul_1"}
    %constant = f32[2,8,32]{2,1,0} constant(), splat=0.044714998453855515, origin={"/Mul_2"}
    %multiply.2 = f32[2,8,32]{2,1,0} multiply(%constant, %multiply.1), origin={"/Mul_2"}
    %add = f32[2,8,32]{2,1,0} add(%arg, %multiply.2), origin={"/Add"}
    %constant.1 = f32[2,8,32]{2,1,0} constant(), splat=0.7978845834732056, origin={"/Mul_3"}
    %multiply.3 = f32[2,8,32]{2,1,0} multiply(%constant.1, %add), origin={"/Mul_3"}
    %tanh = f32[2,8,32]{2,1,0} tanh(%multiply.3), origin={"/Tanh"}
    %constant.2 = f32[2,8,32]{2,1,0} constant(), splat=1.0, origin={"/Add_1"}
    %add.1 = f32[2,8,32]{2,1,0} add(%constant.2, %tanh), origin={"/Add_1"}
    %multiply.4 = f32[2,8,32]{2,1,0} multiply(%arg, %add.1), origin={"/Mul_4"}
    %constant.3 = f32[2,8,32]{2,1,0} constant(), splat=0.5, origin={"/Mul_5"}
    %multiply.5 = f32[2,8,32]{2,1,0} multiply(%constant.3, %multiply.4), origin={"/Mul_5"}
    ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%multiply.5)
  }"""

# transformers' NewGELUActivation (gpt2's gelu_new): 0.5 * x * (1 + tanh(c * (x + 0.044715 * pow(x, 3))))
NEW_GELU = """
  ENTRY %main {
    %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
    %constant = f32[2,8,32]{2,1,0} constant(), splat=0.5, origin={"/Mul"}
    %multiply = f32[2,8,32]{2,1,0} multiply(%arg, %constant), origin={"/Mul"}
    %constant.1 = f32[2,8,32]{2,1,0} constant(), splat=3.0, origin={"/Pow"}
    %power = f32[2,8,32]{2,1,0} power(%arg, %constant.1), origin={"/Pow"}
    %constant.2 = f32[2,8,32]{2,1,0} constant(), splat=0.044714998453855515, origin={"/Mul_1"}
    %multiply.1 = f32[2,8,32]{2,1,0} multiply(%power, %constant.2), origin={"/Mul_1"}
    %add = f32[2,8,32]{2,1,0} add(%arg, %multiply.1), origin={"/Add"}
    %constant.3 = f32[2,8,32]{2,1,0} constant(), splat=0.7978845834732056, origin={"/Mul_2"}
    %multiply.2 = f32[2,8,32]{2,1,0} multiply(%add, %constant.3), origin={"/Mul_2"}
    %tanh = f32[2,8,32]{2,1,0} tanh(%multiply.2), origin={"/Tanh"}
    %constant.4 = f32[2,8,32]{2,1,0} constant(), splat=1.0, origin={"/Add_1"}
    %add.1 = f32[2,8,32]{2,1,0} add(%tanh, %constant.4), origin={"/Add_1"}
    %multiply.3 = f32[2,8,32]{2,1,0} multiply(%multiply, %add.1), origin={"/Mul_3"}
    ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%multiply.3)
  }"""

# transformers' FastGELUActivation: 0.5 * x * (1 + tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)))
FAST_GELU = """
  ENTRY %main {
    %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
    %constant = f32[2,8,32]{2,1,0} constant(), splat=0.5, origin={"/Mul"}
    %multiply = f32[2,8,32]{2,1,0} multiply(%arg, %constant), origin={"/Mul"}
    %constant.1 = f32[2,8,32]{2,1,0} constant(), splat=0.7978845834732056, origin={"/Mul_1"}
    %multiply.1 = f32[2,8,32]{2,1,0} multiply(%arg, %constant.1), origin={"/Mul_1"}
    %constant.2 = f32[2,8,32]{2,1,0} constant(), splat=0.044714998453855515, origin={"/Mul_2"}
    %multiply.2 = f32[2,8,32]{2,1,0} multiply(%arg, %constant.2), origin={"/Mul_2"}
    %multiply.3 = f32[2,8,32]{2,1,0} multiply(%multiply.2, %arg), origin={"/Mul_3"}
    %constant.3 = f32[2,8,32]{2,1,0} constant(), splat=1.0, origin={"/Add"}
    %add = f32[2,8,32]{2,1,0} add(%multiply.3, %constant.3), origin={"/Add"}
    %multiply.4 = f32[2,8,32]{2,1,0} multiply(%multiply.1, %add), origin={"/Mul_4"}
    %tanh = f32[2,8,32]{2,1,0} tanh(%multiply.4), origin={"/Tanh"}
    %constant.4 = f32[2,8,32]{2,1,0} constant(), splat=1.0, origin={"/Add_1"}
    %add.1 = f32[2,8,32]{2,1,0} add(%tanh, %constant.4), origin={"/Add_1"}
    %multiply.5 = f32[2,8,32]{2,1,0} multiply(%multiply, %add.1), origin={"/Mul_5"}
    ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%multiply.5)
  }"""


@pytest.mark.parametrize("text,approximate", [
    (TORCH_ERF, "none"), (TORCH_TANH, "tanh"), (NEW_GELU, "tanh"), (FAST_GELU, "tanh"),
], ids=["torch-erf", "torch-tanh", "new-gelu-pow", "fast-gelu"])
def test_torch_exports(text, approximate):
    check_rewrite(RecognizeGelu(), text, expected=_gelu(approximate, _source_nodes(text)))


def test_jax_tanh_gelu_from_the_shared_mlp():
    # /work/shared/models/mlp.stablehlo.mlir (jax.nn.gelu, approximate=True), constants broadcast from scalars,
    # 0.5 applied to (1 + tanh) before the multiply with x
    check_rewrite(RecognizeGelu(), """
      ENTRY %main {
        %add = f32[8,128]{1,0} parameter(0)
        %multiply = f32[8,128]{1,0} multiply(%add, %add), origin={"main/%4"}
        %multiply.1 = f32[8,128]{1,0} multiply(%multiply, %add), origin={"main/%5"}
        %constant = f32[] constant(), value={0.044714998453855515}, origin={"main/%cst"}
        %broadcast.2 = f32[8,128]{1,0} broadcast(%constant), dimensions={}, origin={"main/%6"}
        %multiply.2 = f32[8,128]{1,0} multiply(%broadcast.2, %multiply.1), origin={"main/%7"}
        %add.1 = f32[8,128]{1,0} add(%add, %multiply.2), origin={"main/%8"}
        %constant.1 = f32[] constant(), value={0.7978845834732056}, origin={"main/%cst_0"}
        %broadcast.3 = f32[8,128]{1,0} broadcast(%constant.1), dimensions={}, origin={"main/%9"}
        %multiply.3 = f32[8,128]{1,0} multiply(%broadcast.3, %add.1), origin={"main/%10"}
        %tanh = f32[8,128]{1,0} tanh(%multiply.3), origin={"main/%11"}
        %constant.2 = f32[] constant(), value={1.0}, origin={"main/%cst_1"}
        %broadcast.4 = f32[8,128]{1,0} broadcast(%constant.2), dimensions={}, origin={"main/%12"}
        %add.2 = f32[8,128]{1,0} add(%broadcast.4, %tanh), origin={"main/%13"}
        %constant.3 = f32[] constant(), value={0.5}, origin={"main/%cst_2"}
        %broadcast.5 = f32[8,128]{1,0} broadcast(%constant.3), dimensions={}, origin={"main/%14"}
        %multiply.4 = f32[8,128]{1,0} multiply(%broadcast.5, %add.2), origin={"main/%15"}
        %multiply.5 = f32[8,128]{1,0} multiply(%add, %multiply.4), origin={"main/%16"}
        ROOT %tuple = (f32[8,128]{1,0}) tuple(%multiply.5)
      }""", expected="""
      ENTRY %main {
        %add = f32[8,128]{1,0} parameter(0)
        %gelu = f32[8,128]{1,0} gelu(%add), approximate=tanh, origin={"main/%4","main/%5","main/%cst","main/%6","main/%7","main/%8","main/%cst_0","main/%9","main/%10","main/%11","main/%cst_1","main/%12","main/%13","main/%cst_2","main/%14","main/%15","main/%16"}
        ROOT %tuple = (f32[8,128]{1,0}) tuple(%gelu)
      }""")


def test_half_and_half_spelling():
    check_rewrite(RecognizeGelu(), """
      ENTRY %main {
        %x = f32[16]{0} parameter(0)
        %k = f32[16]{0} constant(), splat=0.7071067811865476
        %u = f32[16]{0} multiply(%k, %x)
        %e = f32[16]{0} erf(%u)
        %h = f32[16]{0} constant(), splat=0.5
        %he = f32[16]{0} multiply(%e, %h)
        %p = f32[16]{0} add(%h, %he)
        %y = f32[16]{0} multiply(%p, %x)
        ROOT %r = (f32[16]{0}) tuple(%y)
      }""", expected="""
      ENTRY %main {
        %x = f32[16]{0} parameter(0)
        %gelu = f32[16]{0} gelu(%x), approximate=none
        ROOT %r = (f32[16]{0}) tuple(%gelu)
      }""")


@pytest.mark.parametrize("old,new", [
    ("splat=0.044714998453855515", "splat=0.04"),        # another cubic coefficient
    ("splat=0.7978845834732056", "splat=0.8"),           # another tanh scale
    ('splat=0.5, origin={"/Mul_5"}', 'splat=0.25, origin={"/Mul_5"}'),
    ("tanh(%multiply.3)", "tanh(%add)"),                 # no sqrt(2/pi)
])
def test_near_misses_are_left_alone(old, new):
    assert old in TORCH_TANH
    check_rewrite(RecognizeGelu(), TORCH_TANH.replace(old, new), expected=None)


def test_erf_of_another_value_is_not_gelu():
    check_rewrite(RecognizeGelu(), """
      ENTRY %main {
        %x = f32[16]{0} parameter(0)
        %z = f32[16]{0} parameter(1)
        %k = f32[16]{0} constant(), splat=0.7071067811865476
        %u = f32[16]{0} multiply(%k, %z)
        %e = f32[16]{0} erf(%u)
        %one = f32[16]{0} constant(), splat=1.0
        %p = f32[16]{0} add(%one, %e)
        %h = f32[16]{0} constant(), splat=0.5
        %xp = f32[16]{0} multiply(%x, %p)
        %y = f32[16]{0} multiply(%xp, %h)
        ROOT %r = (f32[16]{0}) tuple(%y)
      }""", expected=None)
