"""The quantized storage types in the IR: text form, layouts, byte sizes, verifier rules and the evaluator's
convert (ml_dtypes' conversion, which ONNX's reference implementation calls)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.ir import DTYPE_BITS, DTYPE_BYTES, STORAGE_DTYPES, Shape
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import VerifierError, verify_module

NP = {"f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
      "f8e5m2": ml_dtypes.float8_e5m2, "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
      "f8e8m0fnu": ml_dtypes.float8_e8m0fnu, "f4e2m1fn": ml_dtypes.float4_e2m1fn,
      "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4, "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2}


def module(text: str):
    m = parse_module("HloModule m\n\nENTRY %main {\n" + text + "\n}\n")
    verify_module(m)
    return m


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
def test_text_round_trips_with_layouts(dtype):
    m = module(f"""  %x = {dtype}[2,3]{{0,1}} parameter(0)
  %p = pred[3,2]{{1,0}} parameter(1)
  %t = {dtype}[3,2]{{1,0}} transpose(%x), dimensions={{1,0}}
  %c = {dtype}[3,2]{{1,0}} constant(), value={{1, 1, 0, 1, 1, 0}}
  %s = {dtype}[3,2]{{1,0}} select(%p, %t, %c)
  ROOT %f = f32[3,2]{{1,0}} convert(%s)""")
    text = format_module(m)
    assert f"{dtype}[2,3]{{0,1}}" in text
    assert format_module(parse_module(text)) == text


def test_byte_sizes_one_element_per_byte():
    for dtype in STORAGE_DTYPES:
        assert DTYPE_BYTES[dtype] == 1 and Shape(dtype, (5, 3)).nbytes() == 15
        assert DTYPE_BITS[dtype] == np.iinfo(np.uint8).bits if dtype.startswith("f8") else DTYPE_BITS[dtype] in (2, 4)
    assert DTYPE_BITS["s4"] == 4 and DTYPE_BITS["u2"] == 2 and DTYPE_BITS["f4e2m1fn"] == 4


@pytest.mark.parametrize("op", ["add", "multiply", "maximum"])
def test_arithmetic_on_a_storage_type_is_rejected(op):
    with pytest.raises(VerifierError, match="f8e4m3fn, a storage type"):
        module(f"""  %x = f8e4m3fn[4]{{0}} parameter(0)
  ROOT %y = f8e4m3fn[4]{{0}} {op}(%x, %x)""")
    with pytest.raises(VerifierError, match="s4, a storage type"):
        module("""  %x = s4[4]{0} parameter(0)
  ROOT %y = pred[4]{0} compare(%x, %x), direction=EQ""")


def test_bitcast_convert_keeps_the_bit_width():
    with pytest.raises(VerifierError, match="reinterprets 8-bit u8 as 4-bit s4"):
        module("""  %x = u8[4]{0} parameter(0)
  ROOT %y = s4[4]{0} bitcast-convert(%x)""")


def test_convert_bitcast_and_data_movement_are_accepted():
    module("""  %x = u8[4]{0} parameter(0)
  %b = f8e5m2[4]{0} bitcast-convert(%x)
  %r = f8e5m2[2,2]{1,0} reshape(%b)
  %c = f8e5m2[2,4]{1,0} concatenate(%r, %r), dimension=1
  ROOT %f = f16[2,4]{1,0} convert(%c)""")


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
def test_convert_from_every_bit_pattern_is_exact(dtype):
    n = 2 ** DTYPE_BITS[dtype]
    x = np.arange(n, dtype=np.uint8).view(NP[dtype])
    m = module(f"""  %x = {dtype}[{n}]{{0}} parameter(0)
  ROOT %y = f32[{n}]{{0}} convert(%x)""")
    (got,) = evaluate(m, {"x": x}).values()
    np.testing.assert_array_equal(got, x.astype(np.float32))


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
def test_convert_to_is_ml_dtypes_conversion(dtype):
    f = np.array([0.0, -0.0, 0.3, 1.5, 2.5, -3.75, 6.5, 300.0, 1e6, -1e6, 1e-9, np.inf, -np.inf, np.nan], np.float32)
    m = module(f"""  %x = f32[{f.size}]{{0}} parameter(0)
  ROOT %y = {dtype}[{f.size}]{{0}} convert(%x)""")
    (got,) = evaluate(m, {"x": f}).values()
    assert got.dtype == np.dtype(NP[dtype])
    np.testing.assert_array_equal(got.view(np.uint8), f.astype(NP[dtype]).view(np.uint8))


def test_float_to_int4_truncates_and_wraps_as_onnx_reference():
    f = np.array([7.9, 8.0, 9.0, -9.0, -8.5, 20.0, np.nan], np.float32)
    m = module("""  %x = f32[7]{0} parameter(0)
  ROOT %y = s4[7]{0} convert(%x)""")
    (got,) = evaluate(m, {"x": f}).values()
    assert got.astype(np.int8).tolist() == [7, -8, -7, 7, -8, 4, 0]
