from mlcc.hlo.passes.recognize.softmax import RecognizeSoftmax
from tests.hlo.passes.pass_numerics import check_rewrite

# /work/shared/models/attention.stablehlo.mlir (jax.nn.softmax on the masked scores): reduce max,
# max(-inf, m), keepdims by broadcast_in_dim, exp, reduce add, divide
JAX = """
  ENTRY %main {
    %select.1 = f32[1,4,16,16]{3,2,1,0} parameter(0)
    %constant.11 = f32[] constant(), value={-inf}, origin={"main/%cst_7"}
    %reduce.2 = f32[1,4,16]{2,1,0} reduce(%select.1), dimensions={3}, kind=maximum, origin={"main/%45"}
    %constant.12 = f32[] constant(), value={-inf}, origin={"main/%cst_8"}
    %broadcast.21 = f32[1,4,16]{2,1,0} broadcast(%constant.12), dimensions={}, origin={"main/%46"}
    %maximum = f32[1,4,16]{2,1,0} maximum(%broadcast.21, %reduce.2), origin={"main/%47"}
    %broadcast.22 = f32[1,4,16,1]{3,2,1,0} broadcast(%maximum), dimensions={0,1,2}, origin={"main/%48"}
    %broadcast.23 = f32[1,4,16,16]{3,2,1,0} broadcast(%broadcast.22), dimensions={0,1,2,3}, origin={"main/%49"}
    %subtract.2 = f32[1,4,16,16]{3,2,1,0} subtract(%select.1, %broadcast.23), origin={"main/%50"}
    %exp = f32[1,4,16,16]{3,2,1,0} exp(%subtract.2), origin={"main/%51"}
    %reduce.3 = f32[1,4,16]{2,1,0} reduce(%exp), dimensions={3}, kind=add, origin={"main/%52"}
    %broadcast.24 = f32[1,4,16,1]{3,2,1,0} broadcast(%reduce.3), dimensions={0,1,2}, origin={"main/%53"}
    %broadcast.25 = f32[1,4,16,16]{3,2,1,0} broadcast(%broadcast.24), dimensions={0,1,2,3}, origin={"main/%54"}
    %divide.4 = f32[1,4,16,16]{3,2,1,0} divide(%exp, %broadcast.25), origin={"main/%55"}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%divide.4)
  }"""


def test_jax_softmax():
    check_rewrite(RecognizeSoftmax(), JAX, expected="""
      ENTRY %main {
        %select.1 = f32[1,4,16,16]{3,2,1,0} parameter(0)
        %constant.11 = f32[] constant(), value={-inf}, origin={"main/%cst_7"}
        %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%select.1), dimension=3, origin={"main/%45","main/%cst_8","main/%46","main/%47","main/%48","main/%49","main/%50","main/%51","main/%52","main/%53","main/%54","main/%55"}
        ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%softmax)
      }""")


def test_softmax_over_a_middle_dim_with_a_reciprocal_and_without_the_max():
    check_rewrite(RecognizeSoftmax(), """
      ENTRY %main {
        %x = f32[2,5,3]{2,1,0} parameter(0)
        %e = f32[2,5,3]{2,1,0} exp(%x)
        %s = f32[2,3]{1,0} reduce(%e), dimensions={1}, kind=add
        %k = f32[2,1,3]{2,1,0} reshape(%s)
        %r = f32[2,1,3]{2,1,0} reciprocal(%k)
        %b = f32[2,5,3]{2,1,0} broadcast(%r), dimensions={0,1,2}
        %y = f32[2,5,3]{2,1,0} multiply(%e, %b)
        ROOT %t = (f32[2,5,3]{2,1,0}) tuple(%y)
      }""", expected="""
      ENTRY %main {
        %x = f32[2,5,3]{2,1,0} parameter(0)
        %softmax = f32[2,5,3]{2,1,0} softmax(%x), dimension=1
        ROOT %t = (f32[2,5,3]{2,1,0}) tuple(%softmax)
      }""")


def test_jax_log_softmax():
    # jax.nn.log_softmax: shifted = x - max; shifted - log(sum(exp(shifted)))
    check_rewrite(RecognizeSoftmax(), """
      ENTRY %main {
        %x = f32[4,10]{1,0} parameter(0)
        %m = f32[4]{0} reduce(%x), dimensions={1}, kind=maximum
        %mb = f32[4,10]{1,0} broadcast(%m), dimensions={0}
        %z = f32[4,10]{1,0} subtract(%x, %mb)
        %e = f32[4,10]{1,0} exp(%z)
        %s = f32[4]{0} reduce(%e), dimensions={1}, kind=add
        %k = f32[4,1]{1,0} reshape(%s)
        %l = f32[4,1]{1,0} log(%k)
        %lb = f32[4,10]{1,0} broadcast(%l), dimensions={0,1}
        %y = f32[4,10]{1,0} subtract(%z, %lb)
        ROOT %t = (f32[4,10]{1,0}) tuple(%y)
      }""", expected="""
      ENTRY %main {
        %x = f32[4,10]{1,0} parameter(0)
        %log-softmax = f32[4,10]{1,0} softmax(%x), dimension=1, log=true
        ROOT %t = (f32[4,10]{1,0}) tuple(%log-softmax)
      }""")


def test_a_max_over_another_dim_is_only_a_shift_of_the_input():
    max_elsewhere = JAX.replace("%reduce.2 = f32[1,4,16]{2,1,0} reduce(%select.1), dimensions={3}",
                                "%reduce.2 = f32[1,4,16]{2,1,0} reduce(%select.1), dimensions={2}")
    module = check_rewrite(RecognizeSoftmax(), max_elsewhere, expected=max_elsewhere.split("%exp =")[0] + """
        %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%subtract.2), dimension=3, origin={"main/%51","main/%52","main/%53","main/%54","main/%55"}
        ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%softmax)
      }""")
    assert module.entry.root.operands[0].operands[0].opcode == "subtract"


def test_sums_over_other_dims_or_of_other_values_are_left_alone():
    check_rewrite(RecognizeSoftmax(), """
      ENTRY %main {
        %x = f32[4,4]{1,0} parameter(0)
        %y = f32[4,4]{1,0} parameter(1)
        %e = f32[4,4]{1,0} exp(%x)
        %s = f32[4]{0} reduce(%e), dimensions={0}, kind=add
        %b = f32[4,4]{1,0} broadcast(%s), dimensions={0}
        %q = f32[4,4]{1,0} divide(%e, %b)
        %f = f32[4,4]{1,0} exp(%y)
        %t = f32[4]{0} reduce(%f), dimensions={1}, kind=add
        %c = f32[4,4]{1,0} broadcast(%t), dimensions={0}
        %w = f32[4,4]{1,0} divide(%e, %c)
        ROOT %r = (f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(%q, %w)
      }""", expected=None)
