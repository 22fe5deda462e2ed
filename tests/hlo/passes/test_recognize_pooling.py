from mlcc.hlo.passes.recognize.pooling import RecognizePooling
from tests.hlo.passes.pass_numerics import check_rewrite

# /work/shared/models/cnn.stablehlo.mlir: flax avg_pool is a window sum divided by the window size
JAX = """
  ENTRY %main {
    %maximum.1 = f32[2,16,16,32]{3,2,1,0} parameter(0)
    %reduce-window.1 = f32[2,8,8,32]{3,2,1,0} reduce-window(%maximum.1), kind=add, padding_high={0,0,0,0}, padding_low={0,0,0,0}, window_dimensions={1,2,2,1}, window_strides={1,2,2,1}, origin={"main/%13"}
    %constant.6 = f32[] constant(), value={0.25}, origin={"main/%cst_1"}
    %broadcast.6 = f32[2,8,8,32]{3,2,1,0} broadcast(%constant.6), dimensions={}, origin={"main/%14"}
    %divide = f32[2,8,8,32]{3,2,1,0} multiply(%reduce-window.1, %broadcast.6), origin={"main/%15"}
    ROOT %tuple = (f32[2,8,8,32]{3,2,1,0}) tuple(%divide)
  }"""


def test_jax_average_pool():
    check_rewrite(RecognizePooling(), JAX, expected="""
      ENTRY %main {
        %maximum.1 = f32[2,16,16,32]{3,2,1,0} parameter(0)
        %avg-pool = f32[2,8,8,32]{3,2,1,0} reduce-window(%maximum.1), kind=avg, padding_high={0,0,0,0}, padding_low={0,0,0,0}, window_dimensions={1,2,2,1}, window_strides={1,2,2,1}, origin={"main/%13","main/%cst_1","main/%14","main/%15"}
        ROOT %tuple = (f32[2,8,8,32]{3,2,1,0}) tuple(%avg-pool)
      }""")


def test_padding_counts_when_dividing_by_the_window_size():
    check_rewrite(RecognizePooling(), """
      ENTRY %main {
        %x = f32[1,5,5,1]{3,2,1,0} parameter(0)
        %s = f32[1,5,5,1]{3,2,1,0} reduce-window(%x), kind=add, padding_high={0,1,1,0}, padding_low={0,1,1,0}, window_dimensions={1,3,3,1}, window_strides={1,1,1,1}
        %c = f32[1,5,5,1]{3,2,1,0} constant(), splat=0.1111111111111111
        %y = f32[1,5,5,1]{3,2,1,0} multiply(%c, %s)
        ROOT %r = (f32[1,5,5,1]{3,2,1,0}) tuple(%y)
      }""", expected="""
      ENTRY %main {
        %x = f32[1,5,5,1]{3,2,1,0} parameter(0)
        %avg-pool = f32[1,5,5,1]{3,2,1,0} reduce-window(%x), count_include_pad=true, kind=avg, padding_high={0,1,1,0}, padding_low={0,1,1,0}, window_dimensions={1,3,3,1}, window_strides={1,1,1,1}
        ROOT %r = (f32[1,5,5,1]{3,2,1,0}) tuple(%avg-pool)
      }""")


def test_other_scales_and_max_pools_stay():
    check_rewrite(RecognizePooling(), JAX.replace("value={0.25}", "value={0.5}"), expected=None)
    check_rewrite(RecognizePooling(), JAX.replace("kind=add", "kind=maximum"), expected=None)
