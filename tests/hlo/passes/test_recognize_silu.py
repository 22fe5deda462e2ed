from mlcc.hlo.passes.recognize.silu import RecognizeSilu
from tests.hlo.passes.pass_numerics import check_rewrite


def test_sigmoid_written_with_exp_becomes_logistic():
    # 1 / (1 + exp(-x)), as hand-written models and older exporters spell Sigmoid
    check_rewrite(RecognizeSilu(), """
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %n = f32[4,8]{1,0} negate(%x)
        %e = f32[4,8]{1,0} exp(%n)
        %one = f32[4,8]{1,0} constant(), splat=1.0
        %d = f32[4,8]{1,0} add(%one, %e)
        %s = f32[4,8]{1,0} divide(%one, %d)
        ROOT %r = (f32[4,8]{1,0}) tuple(%s)
      }""", expected="""
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %sigmoid = f32[4,8]{1,0} logistic(%x)
        ROOT %r = (f32[4,8]{1,0}) tuple(%sigmoid)
      }""")


def test_swish_written_as_a_division_becomes_x_times_logistic():
    # x / (1 + exp(-x)) (a Keras-style swish), with -x written as x * -1
    check_rewrite(RecognizeSilu(), """
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %m1 = f32[] constant(), value={-1.0}
        %mb = f32[4,8]{1,0} broadcast(%m1), dimensions={}
        %n = f32[4,8]{1,0} multiply(%x, %mb)
        %e = f32[4,8]{1,0} exp(%n)
        %one = f32[4,8]{1,0} constant(), splat=1.0
        %d = f32[4,8]{1,0} add(%e, %one)
        %s = f32[4,8]{1,0} divide(%x, %d)
        ROOT %r = (f32[4,8]{1,0}) tuple(%s)
      }""", expected="""
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %silu = f32[4,8]{1,0} logistic(%x)
        %silu.1 = f32[4,8]{1,0} multiply(%x, %silu)
        ROOT %r = (f32[4,8]{1,0}) tuple(%silu.1)
      }""")


def test_torch_silu_export_is_already_in_the_canonical_form():
    # nn.SiLU() via torch.onnx (opset 16): Sigmoid, Mul
    check_rewrite(RecognizeSilu(), """
      ENTRY %main {
        %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
        %logistic = f32[2,8,32]{2,1,0} logistic(%arg), origin={"/Sigmoid"}
        %multiply = f32[2,8,32]{2,1,0} multiply(%arg, %logistic), origin={"/Mul"}
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%multiply)
      }""", expected=None)


def test_other_exponentials_are_left_alone():
    check_rewrite(RecognizeSilu(), """
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %y = f32[4,8]{1,0} parameter(1)
        %e = f32[4,8]{1,0} exp(%x)
        %one = f32[4,8]{1,0} constant(), splat=1.0
        %two = f32[4,8]{1,0} constant(), splat=2.0
        %d = f32[4,8]{1,0} add(%one, %e)
        %d2 = f32[4,8]{1,0} add(%two, %e)
        %s = f32[4,8]{1,0} divide(%one, %d)
        %t = f32[4,8]{1,0} divide(%y, %d2)
        ROOT %r = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(%s, %t)
      }""", expected=None)
