"""passes/quantized_dot.py: dequantized contractions become int8 contractions, fake-quant round trips fold."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from mlcc.hlo.passes.quantized_dot import FoldFakeQuant, QuantizedContraction
from tests.hlo.passes.pass_numerics import check_rewrite

RNG = np.random.default_rng(0)

DOT = """
  ENTRY %main {
    %x = u8[4,32]{1,0} parameter(0)
    %w = s8[32,16]{1,0} parameter(1)
    %sw = f32[16]{0} parameter(2)
    %xf = f32[4,32]{1,0} convert(%x)
    %zx = u8[] constant(), value={117}
    %zxb = u8[4,32]{1,0} broadcast(%zx), dimensions={}
    %zxf = f32[4,32]{1,0} convert(%zxb)
    %xc = f32[4,32]{1,0} subtract(%xf, %zxf)
    %sx = f32[] constant(), value={0.05}
    %sxb = f32[4,32]{1,0} broadcast(%sx), dimensions={}
    %xd = f32[4,32]{1,0} multiply(%xc, %sxb)
    %wf = f32[32,16]{1,0} convert(%w)
    %swb = f32[32,16]{1,0} broadcast(%sw), dimensions={1}
    %wd = f32[32,16]{1,0} multiply(%wf, %swb)
    %y = f32[4,16]{1,0} dot(%xd, %wd), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    ROOT %r = (f32[4,16]{1,0}) tuple(%y)
  }"""


def _dot_inputs() -> dict:
    return {"p0": RNG.integers(0, 256, (4, 32)).astype(np.uint8), "p1": RNG.integers(-127, 128, (32, 16)).astype(np.int8),
            "p2": RNG.uniform(0.01, 0.1, 16).astype(np.float32)}


def test_dequantized_dot_becomes_an_s32_dot_with_scales_and_zero_point_in_the_epilogue():
    # per-tensor u8 activation with zero point 117, per-column s8 weights: the integers meet in one s32 dot,
    # and 117 * (the weights' column sums) comes off before the scales
    check_rewrite(QuantizedContraction(), DOT, expected="""
      ENTRY %main {
        %x = u8[4,32]{1,0} parameter(0)
        %w = s8[32,16]{1,0} parameter(1)
        %sw = f32[16]{0} parameter(2)
        %zx = u8[] constant(), value={117}
        %sx = f32[] constant(), value={0.05}
        %quantized-dot = s32[4,16]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %quantized-dot.1 = s32[32,16]{1,0} convert(%w)
        %quantized-dot.2 = s32[16]{0} reduce(%quantized-dot.1), dimensions={0}, kind=add
        %quantized-dot.3 = f32[4,16]{1,0} convert(%quantized-dot)
        %quantized-dot.4 = f32[16]{0} convert(%quantized-dot.2)
        %quantized-dot.5 = f32[4,16]{1,0} broadcast(%quantized-dot.4), dimensions={1}
        %quantized-dot.6 = f32[] convert(%zx)
        %quantized-dot.7 = f32[4,16]{1,0} broadcast(%quantized-dot.6), dimensions={}
        %quantized-dot.8 = f32[4,16]{1,0} multiply(%quantized-dot.5, %quantized-dot.7)
        %quantized-dot.9 = f32[4,16]{1,0} subtract(%quantized-dot.3, %quantized-dot.8)
        %quantized-dot.10 = f32[4,16]{1,0} broadcast(%sx), dimensions={}
        %quantized-dot.11 = f32[4,16]{1,0} multiply(%quantized-dot.9, %quantized-dot.10)
        %quantized-dot.12 = f32[4,16]{1,0} broadcast(%sw), dimensions={1}
        %quantized-dot.13 = f32[4,16]{1,0} multiply(%quantized-dot.11, %quantized-dot.12)
        ROOT %r = (f32[4,16]{1,0}) tuple(%quantized-dot.13)
      }""", inputs=_dot_inputs(), rtol=1e-5, atol=1e-5)


def test_constant_weights_give_a_constant_column_sum():
    text = DOT.replace("%w = s8[32,16]{1,0} parameter(1)", "%w = s8[32,16]{1,0} constant(), ref=w") \
              .replace("%sw = f32[16]{0} parameter(2)", "%sw = f32[16]{0} constant(), ref=sw")
    w = np.random.default_rng(5).integers(-127, 128, (32, 16)).astype(np.int8)
    colsum = ",".join(str(v) for v in w.astype(np.int64).sum(0))  # numpy's column sums, inlined (16 values)
    check_rewrite(QuantizedContraction(), text, expected=f"""
      ENTRY %main {{
        %x = u8[4,32]{{1,0}} parameter(0)
        %w = s8[32,16]{{1,0}} constant(), ref=w
        %sw = f32[16]{{0}} constant(), ref=sw
        %zx = u8[] constant(), value={{117}}
        %sx = f32[] constant(), value={{0.05}}
        %quantized-dot = s32[4,16]{{1,0}} dot(%x, %w), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
        %quantized-dot.1 = s32[16]{{0}} constant(), value={{{colsum}}}
        %quantized-dot.2 = f32[4,16]{{1,0}} convert(%quantized-dot)
        %quantized-dot.3 = f32[16]{{0}} convert(%quantized-dot.1)
        %quantized-dot.4 = f32[4,16]{{1,0}} broadcast(%quantized-dot.3), dimensions={{1}}
        %quantized-dot.5 = f32[] convert(%zx)
        %quantized-dot.6 = f32[4,16]{{1,0}} broadcast(%quantized-dot.5), dimensions={{}}
        %quantized-dot.7 = f32[4,16]{{1,0}} multiply(%quantized-dot.4, %quantized-dot.6)
        %quantized-dot.8 = f32[4,16]{{1,0}} subtract(%quantized-dot.2, %quantized-dot.7)
        %quantized-dot.9 = f32[4,16]{{1,0}} broadcast(%sx), dimensions={{}}
        %quantized-dot.10 = f32[4,16]{{1,0}} multiply(%quantized-dot.8, %quantized-dot.9)
        %quantized-dot.11 = f32[4,16]{{1,0}} broadcast(%sw), dimensions={{1}}
        %quantized-dot.12 = f32[4,16]{{1,0}} multiply(%quantized-dot.10, %quantized-dot.11)
        ROOT %r = (f32[4,16]{{1,0}}) tuple(%quantized-dot.12)
      }}""", constants={"w": w, "sw": RNG.uniform(0.01, 0.1, 16).astype(np.float32)},
                   inputs={"p0": RNG.integers(0, 256, (4, 32)).astype(np.uint8)}, atol=1e-5)


def test_a_weight_zero_point_keeps_the_float_dot():
    # an asymmetric weight would need the activation's row sums: left as it is
    text = DOT.replace("%wf = f32[32,16]{1,0} convert(%w)", """%wf0 = f32[32,16]{1,0} convert(%w)
    %zw = f32[32,16]{1,0} constant(), splat=3.0
    %wf = f32[32,16]{1,0} subtract(%wf0, %zw)""")
    check_rewrite(QuantizedContraction(), text, expected=None, inputs=_dot_inputs())


def test_a_padded_convolution_pads_the_integers_with_the_zero_point():
    # the float convolution pads (x - 100) * s with 0, so the integer one pads x with 100: every output
    # position then needs the same correction, 100 * (the filter's sum)
    check_rewrite(QuantizedContraction(), """
      ENTRY %main {
        %x = u8[1,4,6,6]{3,2,1,0} parameter(0)
        %w = s8[8,4,3,3]{3,2,1,0} parameter(1)
        %xf = f32[1,4,6,6]{3,2,1,0} convert(%x)
        %zx = u8[] constant(), value={100}
        %zxb = u8[1,4,6,6]{3,2,1,0} broadcast(%zx), dimensions={}
        %zxf = f32[1,4,6,6]{3,2,1,0} convert(%zxb)
        %xc = f32[1,4,6,6]{3,2,1,0} subtract(%xf, %zxf)
        %sx = f32[] constant(), value={0.02}
        %sxb = f32[1,4,6,6]{3,2,1,0} broadcast(%sx), dimensions={}
        %xd = f32[1,4,6,6]{3,2,1,0} multiply(%xc, %sxb)
        %wf = f32[8,4,3,3]{3,2,1,0} convert(%w)
        %y = f32[1,8,6,6]{3,2,1,0} convolution(%xd, %wf), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}
        ROOT %r = (f32[1,8,6,6]{3,2,1,0}) tuple(%y)
      }""", expected="""
      ENTRY %main {
        %x = u8[1,4,6,6]{3,2,1,0} parameter(0)
        %w = s8[8,4,3,3]{3,2,1,0} parameter(1)
        %zx = u8[] constant(), value={100}
        %sx = f32[] constant(), value={0.02}
        %quantized-convolution = u8[1,4,8,8]{3,2,1,0} pad(%x, %zx), edge_padding_high={0,0,1,1}, edge_padding_low={0,0,1,1}, interior_padding={0,0,0,0}
        %quantized-convolution.1 = s32[8,4,3,3]{3,2,1,0} convert(%w)
        %quantized-convolution.2 = s32[8]{0} reduce(%quantized-convolution.1), dimensions={1,2,3}, kind=add
        %quantized-convolution.3 = s32[1,8,6,6]{3,2,1,0} convolution(%quantized-convolution, %w), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={0,0}, padding_low={0,0}, rhs_dilation={1,1}, window_strides={1,1}
        %quantized-convolution.4 = f32[1,8,6,6]{3,2,1,0} convert(%quantized-convolution.3)
        %quantized-convolution.5 = f32[8]{0} convert(%quantized-convolution.2)
        %quantized-convolution.6 = f32[1,8,6,6]{3,2,1,0} broadcast(%quantized-convolution.5), dimensions={1}
        %quantized-convolution.7 = f32[] convert(%zx)
        %quantized-convolution.8 = f32[1,8,6,6]{3,2,1,0} broadcast(%quantized-convolution.7), dimensions={}
        %quantized-convolution.9 = f32[1,8,6,6]{3,2,1,0} multiply(%quantized-convolution.6, %quantized-convolution.8)
        %quantized-convolution.10 = f32[1,8,6,6]{3,2,1,0} subtract(%quantized-convolution.4, %quantized-convolution.9)
        %quantized-convolution.11 = f32[1,8,6,6]{3,2,1,0} broadcast(%sx), dimensions={}
        %quantized-convolution.12 = f32[1,8,6,6]{3,2,1,0} multiply(%quantized-convolution.10, %quantized-convolution.11)
        ROOT %r = (f32[1,8,6,6]{3,2,1,0}) tuple(%quantized-convolution.12)
      }""", inputs={"p0": RNG.integers(0, 256, (1, 4, 6, 6)).astype(np.uint8),
                    "p1": RNG.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8)}, atol=1e-4)


FAKE_QUANT = """
  ENTRY %main {
    %x = f32[8]{0} parameter(0)
    %s = f32[8]{0} constant(), splat=0.1
    %d = f32[8]{0} divide(%x, %s)
    %r0 = f32[8]{0} round-nearest-even(%d)
    %z = f32[8]{0} constant(), splat=3.0
    %a = f32[8]{0} add(%r0, %z)
    %lo = f32[] constant(), value={-128.0}
    %hi = f32[] constant(), value={127.0}
    %c = f32[8]{0} clamp(%lo, %a, %hi)
    %q = s8[8]{0} convert(%c)
    %f = f32[8]{0} convert(%q)
    %y = f32[8]{0} subtract(%f, %z)
    %o = f32[8]{0} multiply(%y, %s)
    ROOT %r = (f32[8]{0}) tuple(%o)
  }"""


def test_a_quantize_dequantize_round_trip_folds_to_its_clamp():
    # the clamp's values are whole numbers in s8's range: through s8 and back they stay the same
    check_rewrite(FoldFakeQuant(), FAKE_QUANT, expected="""
      ENTRY %main {
        %x = f32[8]{0} parameter(0)
        %s = f32[8]{0} constant(), splat=0.1
        %d = f32[8]{0} divide(%x, %s)
        %r0 = f32[8]{0} round-nearest-even(%d)
        %z = f32[8]{0} constant(), splat=3.0
        %a = f32[8]{0} add(%r0, %z)
        %lo = f32[] constant(), value={-128.0}
        %hi = f32[] constant(), value={127.0}
        %c = f32[8]{0} clamp(%lo, %a, %hi)
        %y = f32[8]{0} subtract(%c, %z)
        %o = f32[8]{0} multiply(%y, %s)
        ROOT %r = (f32[8]{0}) tuple(%o)
      }""", inputs={"p0": (RNG.standard_normal(8) * 30).astype(np.float32)})


def test_a_clamp_wider_than_the_integer_type_is_not_a_round_trip():
    # clamping to [-300, 300] and converting to s8 saturates: the round trip changes values and stays
    text = FAKE_QUANT.replace("value={-128.0}", "value={-300.0}").replace("value={127.0}", "value={300.0}")
    check_rewrite(FoldFakeQuant(), text, expected=None)


def test_a_transpose_between_equal_quantizations_moves_the_integers():
    # quantize(transpose(dequantize(q))) at q's own scale and zero point is transpose(q), exactly
    check_rewrite(QuantizedContraction(), """
      ENTRY %main {
        %q = u8[4,8]{1,0} parameter(0)
        %f = f32[4,8]{1,0} convert(%q)
        %z = f32[4,8]{1,0} constant(), splat=128.0
        %c = f32[4,8]{1,0} subtract(%f, %z)
        %s = f32[4,8]{1,0} constant(), splat=0.037
        %d = f32[4,8]{1,0} multiply(%c, %s)
        %t = f32[8,4]{1,0} transpose(%d), dimensions={1,0}
        %s2 = f32[8,4]{1,0} constant(), splat=0.037
        %v = f32[8,4]{1,0} divide(%t, %s2)
        %r0 = f32[8,4]{1,0} round-nearest-even(%v)
        %z2 = f32[8,4]{1,0} constant(), splat=128.0
        %a = f32[8,4]{1,0} add(%r0, %z2)
        %lo = f32[] constant(), value={0.0}
        %hi = f32[] constant(), value={255.0}
        %k = f32[8,4]{1,0} clamp(%lo, %a, %hi)
        %o = u8[8,4]{1,0} convert(%k)
        ROOT %r = (u8[8,4]{1,0}) tuple(%o)
      }""", expected="""
      ENTRY %main {
        %q = u8[4,8]{1,0} parameter(0)
        %requantize-same = u8[8,4]{1,0} transpose(%q), dimensions={1,0}
        ROOT %r = (u8[8,4]{1,0}) tuple(%requantize-same)
      }""", inputs={"p0": RNG.integers(0, 256, (4, 8)).astype(np.uint8)})


FP8_REQUANTIZE = """
  ENTRY %main {
    %q = f8e4m3fn[2,127]{1,0} parameter(0)
    %f = f32[2,127]{1,0} convert(%q)
    %s = f32[2,127]{1,0} constant(), splat=0.0037
    %d = f32[2,127]{1,0} multiply(%f, %s)
    %t = f32[127,2]{1,0} OP
    %s2 = f32[127,2]{1,0} constant(), splat=0.0037
    %v = f32[127,2]{1,0} divide(%t, %s2)
    %lo = f32[] constant(), value={-448.0}
    %hi = f32[] constant(), value={448.0}
    %k = f32[127,2]{1,0} clamp(%lo, %v, %hi)
    %o = f8e4m3fn[127,2]{1,0} convert(%k)
    ROOT %r = (f8e4m3fn[127,2]{1,0}) tuple(%o)
  }"""


def _every_finite_e4m3() -> np.ndarray:
    bits = np.array([b for b in range(256) if b & 0x7F != 0x7F], np.uint8)  # 0x7F, 0xFF: NaN
    return bits.view(ml_dtypes.float8_e4m3fn).reshape(2, 127)


def test_an_fp8_quantize_of_a_view_of_its_own_dequantize_moves_the_fp8_values():
    # quantize_fp8(transpose(convert(q) * s)) at q's own scale (saturating at +-448) is transpose(q): q * s / s
    # is within two f32 roundings of q, which the conversion to e4m3 (3 fraction bits) rounds back; every
    # finite e4m3fn value, the subnormals, +-0 and +-448 included
    check_rewrite(QuantizedContraction(), FP8_REQUANTIZE.replace("OP", "transpose(%d), dimensions={1,0}"),
                  expected="""
      ENTRY %main {
        %q = f8e4m3fn[2,127]{1,0} parameter(0)
        %requantize-same = f8e4m3fn[127,2]{1,0} transpose(%q), dimensions={1,0}
        ROOT %r = (f8e4m3fn[127,2]{1,0}) tuple(%requantize-same)
      }""", inputs={"p0": _every_finite_e4m3()}, rtol=0, atol=0)


def test_an_fp8_quantize_at_another_scale_or_without_saturation_stays():
    text = FP8_REQUANTIZE.replace("OP", "transpose(%d), dimensions={1,0}")
    check_rewrite(QuantizedContraction(), text.replace("splat=0.0037\n    %v", "splat=0.0074\n    %v"), expected=None,
                  inputs={"p0": _every_finite_e4m3()})
    check_rewrite(QuantizedContraction(), text.replace("value={-448.0}", "value={-240.0}"), expected=None,
                  inputs={"p0": _every_finite_e4m3()})
