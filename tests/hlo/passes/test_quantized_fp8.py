"""passes/quantized_fp8.py: contractions of two dequantized float8 values (e4m3fn, e5m2, the fnuz forms, in any
pairing) become fp8 contractions."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mlcc.hlo.passes.quantized_fp8 import Fp8Contraction
from tests.hlo.passes.pass_numerics import check_rewrite

RNG = np.random.default_rng(0)

DOT = """
  ENTRY %main {
    %x = f8e4m3fn[4,32]{1,0} parameter(0)
    %w = f8e4m3fn[32,16]{1,0} parameter(1)
    %sw = f32[16]{0} parameter(2)
    %xf = f32[4,32]{1,0} convert(%x)
    %sx = f32[] constant(), value={0.05}
    %sxb = f32[4,32]{1,0} broadcast(%sx), dimensions={}
    %xd = f32[4,32]{1,0} multiply(%xf, %sxb)
    %wf = f32[32,16]{1,0} convert(%w)
    %swb = f32[32,16]{1,0} broadcast(%sw), dimensions={1}
    %wd = f32[32,16]{1,0} multiply(%swb, %wf)
    %y = f32[4,16]{1,0} dot(%xd, %wd), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    ROOT %r = (f32[4,16]{1,0}) tuple(%y)
  }"""


def _fp8(shape: tuple[int, ...]) -> np.ndarray:
    return (RNG.standard_normal(shape) * 8).astype(ml_dtypes.float8_e4m3fn)


def test_dequantized_fp8_dot_becomes_an_fp8_dot_with_the_scales_in_the_epilogue():
    # a per-tensor activation scale and per-column weight scales (either operand order of the multiply): the
    # e4m3 values meet in one dot accumulated in f32, and both scales multiply its result
    check_rewrite(Fp8Contraction(), DOT, expected=EXPECTED_DOT,
                  inputs={"p0": _fp8((4, 32)), "p1": _fp8((32, 16)), "p2": RNG.uniform(0.01, 0.1, 16).astype(np.float32)},
                  rtol=1e-5, atol=1e-5)


EXPECTED_DOT = """
      ENTRY %main {
        %x = f8e4m3fn[4,32]{1,0} parameter(0)
        %w = f8e4m3fn[32,16]{1,0} parameter(1)
        %sw = f32[16]{0} parameter(2)
        %sx = f32[] constant(), value={0.05}
        %fp8-dot = f32[4,16]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %fp8-dot.1 = f32[4,16]{1,0} convert(%fp8-dot)
        %fp8-dot.2 = f32[4,16]{1,0} broadcast(%sx), dimensions={}
        %fp8-dot.3 = f32[4,16]{1,0} multiply(%fp8-dot.1, %fp8-dot.2)
        %fp8-dot.4 = f32[4,16]{1,0} broadcast(%sw), dimensions={1}
        %fp8-dot.5 = f32[4,16]{1,0} multiply(%fp8-dot.3, %fp8-dot.4)
        ROOT %r = (f32[4,16]{1,0}) tuple(%fp8-dot.5)
      }"""


def test_a_scale_along_the_contracted_dim_keeps_the_float_dot():
    text = DOT.replace("%swb = f32[32,16]{1,0} broadcast(%sw), dimensions={1}",
                       "%swb = f32[32,16]{1,0} broadcast(%sw32), dimensions={0}") \
              .replace("%sw = f32[16]{0} parameter(2)", "%sw32 = f32[32]{0} parameter(2)")
    check_rewrite(Fp8Contraction(), text, expected=None,
                  inputs={"p0": _fp8((4, 32)), "p1": _fp8((32, 16)), "p2": RNG.uniform(0.01, 0.1, 32).astype(np.float32)})


FP8_TYPES = {"f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
             "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz}


@pytest.mark.parametrize("x_type, w_type", [("f8e5m2", "f8e5m2"), ("f8e4m3fn", "f8e5m2"), ("f8e5m2", "f8e4m3fn"),
                                            ("f8e4m3fnuz", "f8e5m2fnuz"), ("f8e5m2fnuz", "f8e5m2fnuz"),
                                            ("f8e4m3fn", "f8e4m3fnuz")])
def test_every_fp8_pairing_becomes_an_fp8_dot(x_type, w_type):
    # e5m2 and the fnuz forms, mixed pairs included: the values' products are exact in f32 whatever the pair, so
    # each is the same fp8 dot (the tensor-core path, or the exact f16 decode, is the target's choice). Random bit
    # patterns: every magnitude, subnormals included; the non-finite ones are made 0 but for one NaN in row 0
    # (an fnuz NaN is 0x80, the bits of -0 elsewhere), which makes that row NaN before and after.
    text = DOT.replace("%x = f8e4m3fn[4,32]", f"%x = {x_type}[4,32]").replace("%w = f8e4m3fn[32,16]",
                                                                             f"%w = {w_type}[32,16]")
    expected = EXPECTED_DOT.replace("%x = f8e4m3fn[4,32]", f"%x = {x_type}[4,32]").replace(
        "%w = f8e4m3fn[32,16]", f"%w = {w_type}[32,16]")
    rng = np.random.default_rng(7)
    x, w = (rng.integers(0, 256, shape, dtype=np.uint8).view(FP8_TYPES[t])
            for shape, t in (((4, 32), x_type), ((32, 16), w_type)))
    for v in (x, w):
        v[~np.isfinite(v.astype(np.float32))] = 0
    x[0, 5] = np.nan
    assert np.isnan(x.astype(np.float32)).sum() == 1
    check_rewrite(Fp8Contraction(), text, expected=expected,
                  inputs={"p0": x, "p1": w, "p2": rng.uniform(0.01, 0.1, 16).astype(np.float32)},
                  rtol=1e-5, atol=1e-5)


def test_an_e8m0_operand_keeps_the_float_dot():
    # f8e8m0fnu (a scale type, powers of two only) has no fp8 contraction: it stays a dot of dequantized floats
    text = DOT.replace("%w = f8e4m3fn[32,16]{1,0} parameter(1)", "%w = f8e8m0fnu[32,16]{1,0} parameter(1)")
    check_rewrite(Fp8Contraction(), text, expected=None,
                  inputs={"p0": _fp8((4, 32)),
                          "p1": RNG.integers(120, 134, (32, 16), dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu),
                          "p2": RNG.uniform(0.01, 0.1, 16).astype(np.float32)})


def test_an_fp8_convolution_of_unscaled_values():
    # no scales at all (DequantizeLinear with scale 1 folds to a bare convert): the convolution alone
    check_rewrite(Fp8Contraction(), """
      ENTRY %main {
        %x = f8e4m3fn[1,4,6,6]{3,2,1,0} parameter(0)
        %w = f8e4m3fn[8,4,3,3]{3,2,1,0} parameter(1)
        %xf = f32[1,4,6,6]{3,2,1,0} convert(%x)
        %wf = f32[8,4,3,3]{3,2,1,0} convert(%w)
        %y = f32[1,8,6,6]{3,2,1,0} convolution(%xf, %wf), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}
        ROOT %r = (f32[1,8,6,6]{3,2,1,0}) tuple(%y)
      }""", expected="""
      ENTRY %main {
        %x = f8e4m3fn[1,4,6,6]{3,2,1,0} parameter(0)
        %w = f8e4m3fn[8,4,3,3]{3,2,1,0} parameter(1)
        %fp8-convolution = f32[1,8,6,6]{3,2,1,0} convolution(%x, %w), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}
        %fp8-convolution.1 = f32[1,8,6,6]{3,2,1,0} convert(%fp8-convolution)
        ROOT %r = (f32[1,8,6,6]{3,2,1,0}) tuple(%fp8-convolution.1)
      }""", inputs={"p0": _fp8((1, 4, 6, 6)), "p1": _fp8((8, 4, 3, 3))}, rtol=1e-5, atol=1e-4)
