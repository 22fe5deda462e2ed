"""The fake-quantized attention kernel (score_quant, prob_quant: QDQ int8 encoders) under the interpreter,
against numpy running onnxruntime's QuantizeLinear -> DequantizeLinear arithmetic step by step in f32."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mlcc.emit.codegen.attention  # noqa: F401  (registers the attention lowering)
from tests.emit.test_norm_attention import lower_and_run

STEPS = ((1.0, 6.363805709371993, 135.0, 0.0, 255.0, 0.1571386754512787),
         (0.25, 25.455222837487973, 135.0, 0.0, 255.0, 0.03928466886281967))
PROBS = (254.9999849195601, 0.0, 0.0, 255.0, 0.003921568859368563)


def _fq(x: np.ndarray, inv: float, zp: float, lo: float, hi: float, scale: float) -> np.ndarray:
    f = np.float32
    return (np.clip(np.rint(x * f(inv)) + f(zp), f(lo), f(hi)) - f(zp)) * f(scale)


def _reference(q, k, v) -> np.ndarray:
    s = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2).astype(np.float64)).astype(np.float32)
    for pre, *fq in STEPS:
        s = _fq(s * np.float32(pre) if pre != 1 else s, *fq)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = _fq(e / e.sum(-1, keepdims=True), *PROBS)
    return np.matmul(p.astype(np.float64), v.astype(np.float64))


def _text(steps) -> str:
    return "{" + ",".join("{" + ",".join(repr(float(c)) for c in s) + "}" for s in steps) + "}"


@pytest.mark.parametrize("use_gpu_config", [False, True])
@pytest.mark.parametrize("sq,sk", [(16, 16), (20, 37)])
def test_fake_quantized_attention_matches_step_by_step_numpy(sq, sk, use_gpu_config):
    # several key blocks (37 keys) and a partial query block: the first pass's online max and sum must
    # give every row's normalizer before the second pass quantizes its probabilities
    rng = np.random.default_rng(sq + sk)
    q = (rng.standard_normal((2, 3, sq, 16)) * 2).astype(np.float32)
    k = (rng.standard_normal((2, 3, sk, 16)) * 2).astype(np.float32)
    v = rng.standard_normal((2, 3, sk, 16)).astype(np.float32)
    shapes = {n: f"f32[2,3,{n_},16]{{3,2,1,0}}" for n, n_ in (("q", sq), ("k", sk), ("v", sk))}
    body = (f"  %q = {shapes['q']} parameter(0)\n  %k = {shapes['k']} parameter(1)\n"
            f"  %v = {shapes['v']} parameter(2)\n"
            f"  ROOT %a = f32[2,3,{sq},16]{{3,2,1,0}} attention(%q, %k, %v), causal=false, scale=1.0, "
            f"score_quant={_text(STEPS)}, prob_quant={_text([PROBS])[1:-1]}")
    out = lower_and_run(body, [q, k, v], use_gpu_config)
    # the probabilities are multiples of 1/255: a rounding that tips the other way (f32 sums in another
    # order) moves one of them by a step; none does on these inputs
    np.testing.assert_allclose(out, _reference(q, k, v), rtol=1e-5, atol=1e-5)


# float8 e4m3fn fake-quants (quant_type=f8e4m3fn): q·kᵀ * 20 reaches past 448 (saturated), the probabilities
# * 448 down into e4m3's subnormals; the scores' unquantized * 0.25 of the fp8 encoder is a step of one element
FP8_STEPS = ((1.0, 20.0, 0.0, -448.0, 448.0, 0.05), (0.25,))
FP8_PROBS = (448.0, 0.0, -448.0, 448.0, 1 / 448)


def _fq8(x: np.ndarray, inv: float, zp: float, lo: float, hi: float, scale: float) -> np.ndarray:
    """ONNX's QuantizeLinear to float8 e4m3fn (saturate) then DequantizeLinear, in f32 (ml_dtypes rounds to
    nearest even)."""
    f = np.float32
    return np.clip(x * f(inv), f(lo), f(hi)).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * f(scale)


def _fp8_reference(q, k, v) -> np.ndarray:
    s = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2).astype(np.float64)).astype(np.float32)
    s = _fq8(s, *FP8_STEPS[0][1:]) * np.float32(FP8_STEPS[1][0])
    e = np.exp(s - s.max(-1, keepdims=True))
    p = _fq8(e / e.sum(-1, keepdims=True), *FP8_PROBS)
    return np.matmul(p.astype(np.float64), v.astype(np.float64))


@pytest.mark.parametrize("use_gpu_config", [False, True])
@pytest.mark.parametrize("sq,sk", [(16, 16), (20, 37)])
def test_fp8_fake_quantized_attention_matches_ml_dtypes_step_by_step(sq, sk, use_gpu_config):
    # the in-kernel round trip is narrow.py's bit arithmetic (Triton's interpreter has no fp8 casts)
    rng = np.random.default_rng(sq * sk)
    q = (rng.standard_normal((2, 3, sq, 16)) * 2).astype(np.float32)
    k = (rng.standard_normal((2, 3, sk, 16)) * 2).astype(np.float32)
    v = rng.standard_normal((2, 3, sk, 16)).astype(np.float32)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * 20
    e = np.exp(scores / 80 - (scores / 80).max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True) * 448
    assert np.abs(scores).max() > 448 and ((p > 0) & (p < 2.0 ** -6)).any()  # saturated and subnormal values
    body = (f"  %q = f32[2,3,{sq},16]{{3,2,1,0}} parameter(0)\n  %k = f32[2,3,{sk},16]{{3,2,1,0}} parameter(1)\n"
            f"  %v = f32[2,3,{sk},16]{{3,2,1,0}} parameter(2)\n"
            f"  ROOT %a = f32[2,3,{sq},16]{{3,2,1,0}} attention(%q, %k, %v), causal=false, scale=1.0, "
            f"score_quant={_text(FP8_STEPS)}, prob_quant={_text([FP8_PROBS])[1:-1]}, quant_type=f8e4m3fn")
    out = lower_and_run(body, [q, k, v], use_gpu_config)
    np.testing.assert_allclose(out, _fp8_reference(q, k, v), rtol=1e-5, atol=1e-5)
