"""Loop kernels convert to and from the quantized storage types (fp8, f4e2m1fn, e8m0, 4- and 2-bit ints) with bit
arithmetic (mlcc/emit/codegen/narrow.py) and run under Triton's interpreter: every bit pattern decodes, and
floats around every rounding and saturation boundary encode, to exactly ml_dtypes' bits (the conversion ONNX's
reference implementation calls)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mlcc.emit.codegen import loop  # noqa: F401 (registers the loop kernels)
from mlcc.emit.codegen.kernel import lower
from mlcc.hlo.ir import Instruction
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOATS = {"f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
          "f8e5m2": ml_dtypes.float8_e5m2, "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
          "f8e8m0fnu": ml_dtypes.float8_e8m0fnu, "f4e2m1fn": ml_dtypes.float4_e2m1fn}
INTS = {"s4": ml_dtypes.int4, "u4": ml_dtypes.uint4, "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2}
WIDTH = {"f4e2m1fn": 4, "s4": 4, "u4": 4, "s2": 2, "u2": 2}


def convert(src: str, dst: str, n: int) -> Instruction:
    module = parse_module(f"""HloModule m

%fused {{
  %p = {src}[{n}]{{0}} parameter(0)
  ROOT %y = {dst}[{n}]{{0}} convert(%p)
}}

ENTRY %main {{
  %x = {src}[{n}]{{0}} parameter(0)
  ROOT %f = {dst}[{n}]{{0}} fusion(%x), kind=loop, calls=%fused
}}
""")
    verify_module(module)
    return module.entry.root


def run(src: str, dst: str, x: np.ndarray) -> np.ndarray:
    inst = convert(src, dst, x.size)
    (got,) = run_kernel(lower(inst, "kernel"), inst, [x])
    return got


def all_patterns(dtype: str) -> np.ndarray:
    np_type = {**FLOATS, **INTS}[dtype]
    return np.arange(2 ** WIDTH.get(dtype, 8), dtype=np.uint8).view(np_type)


def boundaries(np_type) -> np.ndarray:
    """Every finite value of a narrow float, the midpoints between neighbours (ties) and the floats just beside
    them, specials, and random floats over float32's range (subnormals included), both signs."""
    values = np.unique(np.arange(256, dtype=np.uint8).view(np_type).astype(np.float32))
    values = values[np.isfinite(values)]
    mids = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(0)
    wide = rng.standard_normal(3000) * 10.0 ** rng.integers(-44, 38, 3000)
    f = np.concatenate([values, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
                        [np.inf, np.nan, 0.0, 1e30, 1e-40, 1e-45, 3.4e38, 5.877472e-39, 6e-39], wide]).astype(np.float32)
    return np.concatenate([f, -f])


@pytest.mark.parametrize("dtype", sorted(FLOATS))
def test_every_bit_pattern_decodes_exactly(dtype):
    x = all_patterns(dtype)
    got = run(dtype, "f32", x)
    want = x.astype(np.float32)
    assert np.array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("dtype", sorted(FLOATS))
def test_floats_round_to_nearest_even_and_overflow_as_ml_dtypes(dtype):
    f = boundaries(FLOATS[dtype])
    got = run("f32", dtype, f)
    want = f.astype(FLOATS[dtype])
    bad = np.nonzero(got.view(np.uint8) != want.view(np.uint8))[0]
    assert bad.size == 0, (f[bad][:5], got.view(np.uint8)[bad][:5], want.view(np.uint8)[bad][:5])


@pytest.mark.parametrize("dtype", sorted(INTS))
def test_narrow_ints_widen_and_wrap(dtype):
    x = all_patterns(dtype)
    assert np.array_equal(run(dtype, "s32", x), x.astype(np.int32))
    f = np.concatenate([np.arange(-40, 40, 0.25), [np.nan, np.inf, -np.inf, 1e6, -1e6]]).astype(np.float32)
    got = run("f32", dtype, f)
    assert np.array_equal(got.view(np.uint8), f.astype(INTS[dtype]).view(np.uint8))
    i = np.arange(-300, 300, dtype=np.int32)
    assert np.array_equal(run("s32", dtype, i).view(np.uint8), i.astype(INTS[dtype]).view(np.uint8))


@pytest.mark.parametrize("src,dst", [("f16", "f8e4m3fn"), ("bf16", "f8e5m2"), ("f8e5m2", "f8e4m3fn"),
                                     ("s4", "f8e4m3fn"), ("f8e4m3fn", "f16"), ("f4e2m1fn", "u8"), ("u8", "u4")])
def test_conversions_through_a_wide_type_match_the_evaluator(src, dst):
    from mlcc.hlo.dtypes import numpy_dtype
    from mlcc.hlo.evaluator.core import _convert
    if src in FLOATS or src in INTS:
        x = all_patterns(src)
    else:
        x = boundaries(ml_dtypes.float8_e4m3fn).astype(numpy_dtype(src)) if src != "u8" else \
            np.arange(256, dtype=np.uint8)
    got = run(src, dst, x)
    want = _convert(x, numpy_dtype(dst))
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
