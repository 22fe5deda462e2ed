"""The integer form of dot and convolution: 8-bit operands (signed or unsigned each), an s32 result, accumulated
exactly (the evaluator against numpy's int64 products, at sizes where an f32 sum would round)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import VerifierError, verify_module

RNG = np.random.default_rng(0)


def _module(text: str):
    m = parse_module(textwrap.dedent(text))
    verify_module(m)
    return m


def test_u8_by_s8_dot_accumulates_exactly_in_s32():
    # K = 2048 products of up to 255 * 127: sums past 2**24, where an f32 accumulator would round
    m = _module("""
      ENTRY %main {
        %a = u8[8,2048]{1,0} parameter(0)
        %b = s8[2048,16]{1,0} parameter(1)
        %d = s32[8,16]{1,0} dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        ROOT %r = (s32[8,16]{1,0}) tuple(%d)
      }""")
    a = np.full((8, 2048), 255, np.uint8)
    a[1:] = RNG.integers(0, 256, (7, 2048))
    b = np.full((2048, 16), 127, np.int8)
    b[:, 1:] = RNG.integers(-128, 128, (2048, 15))
    got = evaluate(m, {"p0": a, "p1": b})
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert abs(want).max() > 2 ** 24
    np.testing.assert_array_equal(list(got.values())[0], want)


def test_u8_by_s8_convolution_accumulates_exactly_in_s32():
    m = _module("""
      ENTRY %main {
        %x = u8[2,64,5,5]{3,2,1,0} parameter(0)
        %w = s8[3,64,3,3]{3,2,1,0} parameter(1)
        %c = s32[2,3,3,3]{3,2,1,0} convolution(%x, %w), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={0,0}, padding_low={0,0}, rhs_dilation={1,1}, window_strides={1,1}
        ROOT %r = (s32[2,3,3,3]{3,2,1,0}) tuple(%c)
      }""")
    x = RNG.integers(0, 256, (2, 64, 5, 5)).astype(np.uint8)
    w = RNG.integers(-128, 128, (3, 64, 3, 3)).astype(np.int8)
    got = list(evaluate(m, {"p0": x, "p1": w}).values())[0]
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.int64), (3, 3), axis=(2, 3))
    np.testing.assert_array_equal(got, np.einsum("bchwij,ocij->bohw", windows, w.astype(np.int64)))


def test_mixed_operand_types_need_an_s32_result():
    with pytest.raises(VerifierError, match="dtypes u8 and s8 differ"):
        _module("""
          ENTRY %main {
            %a = u8[4,8]{1,0} parameter(0)
            %b = s8[8,4]{1,0} parameter(1)
            %d = f32[4,4]{1,0} dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
            ROOT %r = (f32[4,4]{1,0}) tuple(%d)
          }""")
    with pytest.raises(VerifierError, match="dtypes f32 and s8 differ"):
        _module("""
          ENTRY %main {
            %a = f32[4,8]{1,0} parameter(0)
            %b = s8[8,4]{1,0} parameter(1)
            %d = s32[4,4]{1,0} dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
            ROOT %r = (s32[4,4]{1,0}) tuple(%d)
          }""")
