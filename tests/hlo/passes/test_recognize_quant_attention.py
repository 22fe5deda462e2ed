"""recognize-attention on the fake-quantized attention of a QDQ int8 encoder (onnxruntime's quantize_static):
the Q -> DQ pairs on the scores and probabilities, as quantized_dot folds them, become the op's score_quant and
prob_quant; the rewritten op computes the same values as the loop ops it replaces (the evaluator runs both)."""

import ml_dtypes
import numpy as np

from mlcc.hlo.passes.recognize.quant_attention import RecognizeQuantizedAttention
from tests.hlo.passes.pass_numerics import check_rewrite, opcodes

# one layer of tests/data/models/quant/encoder_qdq.onnx after fold-fake-quant and cleanup: q, k, v dequantized
# from u8 (k already transposed), q·kᵀ fake-quantized, * 0.25, fake-quantized again, softmax, and the
# probabilities fake-quantized (zero point 0: no add or subtract) before the dot with v
LAYER = """
  ENTRY %main {
    %q8 = u8[1,4,16,16]{3,2,1,0} parameter(0), name=q
    %k8 = u8[1,4,16,16]{3,2,1,0} parameter(1), name=k
    %v8 = u8[1,4,16,16]{3,2,1,0} parameter(2), name=v
    %qs = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.030372893437743187
    %qz = f32[1,4,16,16]{3,2,1,0} constant(), splat=115.0
    %ks = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.031244652345776558
    %kz = f32[1,4,16,16]{3,2,1,0} constant(), splat=116.0
    %vs = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.02980036288499832
    %vz = f32[1,4,16,16]{3,2,1,0} constant(), splat=125.0
    %cq = f32[1,4,16,16]{3,2,1,0} convert(%q8)
    %sq = f32[1,4,16,16]{3,2,1,0} subtract(%cq, %qz)
    %q = f32[1,4,16,16]{3,2,1,0} multiply(%sq, %qs)
    %ck = f32[1,4,16,16]{3,2,1,0} convert(%k8)
    %sk = f32[1,4,16,16]{3,2,1,0} subtract(%ck, %kz)
    %k = f32[1,4,16,16]{3,2,1,0} multiply(%sk, %ks)
    %cv = f32[1,4,16,16]{3,2,1,0} convert(%v8)
    %sv = f32[1,4,16,16]{3,2,1,0} subtract(%cv, %vz)
    %v = f32[1,4,16,16]{3,2,1,0} multiply(%sv, %vs)
    %lo = f32[] constant(), value={0.0}
    %hi = f32[] constant(), value={255.0}
    %dot = f32[1,4,16,16]{3,2,1,0} dot(%q, %k), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    %inv1 = f32[1,4,16,16]{3,2,1,0} constant(), splat=6.363805709371993
    %zp1 = f32[1,4,16,16]{3,2,1,0} constant(), splat=135.0
    %sc1 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.1571386754512787
    %m1 = f32[1,4,16,16]{3,2,1,0} multiply(%dot, %inv1)
    %r1 = f32[1,4,16,16]{3,2,1,0} round-nearest-even(%m1)
    %a1 = f32[1,4,16,16]{3,2,1,0} add(%r1, %zp1)
    %c1 = f32[1,4,16,16]{3,2,1,0} clamp(%lo, %a1, %hi)
    %s1 = f32[1,4,16,16]{3,2,1,0} subtract(%c1, %zp1)
    %d1 = f32[1,4,16,16]{3,2,1,0} multiply(%s1, %sc1)
    %quarter = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.25
    %scaled = f32[1,4,16,16]{3,2,1,0} multiply(%d1, %quarter)
    %inv2 = f32[1,4,16,16]{3,2,1,0} constant(), splat=25.455222837487973
    %sc2 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.03928466886281967
    %m2 = f32[1,4,16,16]{3,2,1,0} multiply(%scaled, %inv2)
    %r2 = f32[1,4,16,16]{3,2,1,0} round-nearest-even(%m2)
    %a2 = f32[1,4,16,16]{3,2,1,0} add(%r2, %zp1)
    %c2 = f32[1,4,16,16]{3,2,1,0} clamp(%lo, %a2, %hi)
    %s2 = f32[1,4,16,16]{3,2,1,0} subtract(%c2, %zp1)
    %d2 = f32[1,4,16,16]{3,2,1,0} multiply(%s2, %sc2)
    %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%d2), dimension=3
    %inv3 = f32[1,4,16,16]{3,2,1,0} constant(), splat=254.9999849195601
    %sc3 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.003921568859368563
    %m3 = f32[1,4,16,16]{3,2,1,0} multiply(%softmax, %inv3)
    %r3 = f32[1,4,16,16]{3,2,1,0} round-nearest-even(%m3)
    %c3 = f32[1,4,16,16]{3,2,1,0} clamp(%lo, %r3, %hi)
    %p = f32[1,4,16,16]{3,2,1,0} multiply(%c3, %sc3)
    %pv = f32[1,4,16,16]{3,2,1,0} dot(%p, %v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%pv)
  }"""

ATTENTION = ("attention(%q, %quantized-attention, %v), causal=false, "
             "prob_quant={254.9999849195601,0.0,0.0,255.0,0.003921568859368563}, scale=1.0, "
             "score_quant={{1.0,6.363805709371993,135.0,0.0,255.0,0.1571386754512787},"
             "{0.25,25.455222837487973,135.0,0.0,255.0,0.03928466886281967}}")

FLOAT = "attention(%sq, %quantized-attention, %v), causal=false, scale=0.0009489904961976041"


def _inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.integers(0, 256, (1, 4, 16, 16)).astype(np.uint8) for n in ("q", "k", "v")}


def _expected(text: str, attention: str, name: str) -> str:
    """text up to the dequantized v, then k swapped to [.., Sk, D] and one attention op (the chain it
    replaces is gone)."""
    head = text[:text.index("    %lo = ")]
    return (head + f"    %{name} = f32[1,4,16,16]{{3,2,1,0}} transpose(%k), dimensions={{0,1,3,2}}\n"
            f"    %{name}.1 = f32[1,4,16,16]{{3,2,1,0}} {attention.replace('quantized-attention', name)}\n"
            f"    ROOT %tuple = (f32[1,4,16,16]{{3,2,1,0}}) tuple(%{name}.1)\n  }}")


def test_fake_quantized_scores_and_probabilities_become_one_attention():
    # the op's evaluation (score_quant steps, then prob_quant on the normalized probabilities) gives the
    # loop ops' values exactly: every rounding happens in f32 in the same order
    for seed in range(3):
        module = check_rewrite(RecognizeQuantizedAttention(), LAYER, _expected(LAYER, ATTENTION, "quantized-attention"), inputs=_inputs(seed),
                               rtol=0, atol=0)
    assert opcodes(module).count("attention") == 1


def test_a_multiply_after_the_last_fake_quant_is_a_step_of_its_own():
    # a constant scale between the last Q -> DQ pair and the softmax (the fp8 encoder's unquantized 1/sqrt(d)
    # Mul) is a score_quant step of one element: a multiply with no fake-quant after it
    text = LAYER.replace("softmax(%d2)", "softmax(%late)").replace(
        "    %softmax =", "    %late = f32[1,4,16,16]{3,2,1,0} multiply(%d2, %quarter)\n    %softmax =")
    attention = ATTENTION.replace("0.03928466886281967}}", "0.03928466886281967},{0.25}}")
    check_rewrite(RecognizeQuantizedAttention(), text, _expected(text, attention, "quantized-attention"),
                  inputs=_inputs(0), rtol=0, atol=0)


# one layer of tests/data/models/quant/encoder_fp8.onnx (float8 e4m3fn QDQ) after fp8-contraction and cleanup,
# with power-of-two scales: both attention matmuls are fp8 contractions (the fp8 values multiplied, the two
# dequantize scales after), q·kᵀ is fake-quantized by a round trip through e4m3fn (saturated at +-448), then
# * 0.25 with no Q -> DQ after it, the softmax, and the probabilities quantized to e4m3fn for the dot with v
FP8_LAYER = """
  ENTRY %main {
    %q8 = f8e4m3fn[1,4,16,16]{3,2,1,0} parameter(0), name=q
    %k8 = f8e4m3fn[1,4,16,16]{3,2,1,0} parameter(1), name=k
    %v8 = f8e4m3fn[1,4,16,16]{3,2,1,0} parameter(2), name=v
    %lo = f32[] constant(), value={-448.0}
    %hi = f32[] constant(), value={448.0}
    %dot = f32[1,4,16,16]{3,2,1,0} dot(%q8, %k8), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    %qs = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.125
    %ks = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.0625
    %dq = f32[1,4,16,16]{3,2,1,0} multiply(%dot, %qs)
    %dqk = f32[1,4,16,16]{3,2,1,0} multiply(%dq, %ks)
    %inv1 = f32[1,4,16,16]{3,2,1,0} constant(), splat=16.0
    %m1 = f32[1,4,16,16]{3,2,1,0} multiply(%dqk, %inv1)
    %c1 = f32[1,4,16,16]{3,2,1,0} clamp(%lo, %m1, %hi)
    %f1 = f8e4m3fn[1,4,16,16]{3,2,1,0} convert(%c1)
    %g1 = f32[1,4,16,16]{3,2,1,0} convert(%f1)
    %sc1 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.0625
    %s1 = f32[1,4,16,16]{3,2,1,0} multiply(%g1, %sc1)
    %quarter = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.25
    %scaled = f32[1,4,16,16]{3,2,1,0} multiply(%s1, %quarter)
    %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%scaled), dimension=3
    %inv3 = f32[1,4,16,16]{3,2,1,0} constant(), splat=256.0
    %m3 = f32[1,4,16,16]{3,2,1,0} multiply(%softmax, %inv3)
    %c3 = f32[1,4,16,16]{3,2,1,0} clamp(%lo, %m3, %hi)
    %p8 = f8e4m3fn[1,4,16,16]{3,2,1,0} convert(%c3)
    %pv = f32[1,4,16,16]{3,2,1,0} dot(%p8, %v8), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    %ps = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.00390625
    %vs = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.5
    %e1 = f32[1,4,16,16]{3,2,1,0} multiply(%pv, %ps)
    %out = f32[1,4,16,16]{3,2,1,0} multiply(%e1, %vs)
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%out)
  }"""

# v, q and k dequantized (convert, times their scale), k swapped to [.., Sk, D], and one attention op
FP8_EXPECTED = """
  ENTRY %main {
    %q8 = f8e4m3fn[1,4,16,16]{3,2,1,0} parameter(0), name=q
    %k8 = f8e4m3fn[1,4,16,16]{3,2,1,0} parameter(1), name=k
    %v8 = f8e4m3fn[1,4,16,16]{3,2,1,0} parameter(2), name=v
    %fp8-attention = f32[1,4,16,16]{3,2,1,0} convert(%v8)
    %fp8-attention.1 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.5
    %fp8-attention.2 = f32[1,4,16,16]{3,2,1,0} multiply(%fp8-attention, %fp8-attention.1)
    %fp8-attention.3 = f32[1,4,16,16]{3,2,1,0} convert(%q8)
    %fp8-attention.4 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.125
    %fp8-attention.5 = f32[1,4,16,16]{3,2,1,0} multiply(%fp8-attention.3, %fp8-attention.4)
    %fp8-attention.6 = f32[1,4,16,16]{3,2,1,0} convert(%k8)
    %fp8-attention.7 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.0625
    %fp8-attention.8 = f32[1,4,16,16]{3,2,1,0} multiply(%fp8-attention.6, %fp8-attention.7)
    %fp8-attention.9 = f32[1,4,16,16]{3,2,1,0} transpose(%fp8-attention.8), dimensions={0,1,3,2}
    %fp8-attention.10 = f32[1,4,16,16]{3,2,1,0} attention(%fp8-attention.5, %fp8-attention.9, %fp8-attention.2), causal=false, prob_quant={256.0,0.0,-448.0,448.0,0.00390625}, quant_type=f8e4m3fn, scale=1.0, score_quant={{1.0,16.0,0.0,-448.0,448.0,0.0625},{0.25}}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%fp8-attention.10)
  }"""


def _fp8_inputs(seed: int) -> dict[str, np.ndarray]:
    # small integers (exact in e4m3): q·kᵀ is exact in f32 in any order of its sums, so the op's scores equal
    # the fp8 contraction's bit for bit and every fake-quant rounds the same values
    rng = np.random.default_rng(seed)
    return {n: rng.integers(-8, 9, (1, 4, 16, 16)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
            for n in ("q", "k", "v")}


def test_fp8_fake_quantized_attention_becomes_one_attention():
    # the op evaluates its fp8 steps as the loop ops' converts do (ml_dtypes: round to nearest even, after the
    # clamp to +-448); only the order of p·v's f32 sums differs (it ends the computation)
    for seed in range(3):
        module = check_rewrite(RecognizeQuantizedAttention(), FP8_LAYER, FP8_EXPECTED, inputs=_fp8_inputs(seed),
                               rtol=1e-6, atol=1e-6)
    assert opcodes(module).count("attention") == 1


def test_fp8_and_integer_fake_quants_in_one_attention_are_left_alone():
    # the op has one quant_type: probabilities quantized to u8 after scores quantized to fp8 stay as they are
    head = FP8_LAYER[:FP8_LAYER.index("    %c3 = ")]
    text = head + """    %r3 = f32[1,4,16,16]{3,2,1,0} round-nearest-even(%m3)
    %z = f32[] constant(), value={0.0}
    %c255 = f32[] constant(), value={255.0}
    %i3 = f32[1,4,16,16]{3,2,1,0} clamp(%z, %r3, %c255)
    %ps = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.00390625
    %p = f32[1,4,16,16]{3,2,1,0} multiply(%i3, %ps)
    %vf = f32[1,4,16,16]{3,2,1,0} convert(%v8)
    %vs = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.5
    %v = f32[1,4,16,16]{3,2,1,0} multiply(%vf, %vs)
    %pv = f32[1,4,16,16]{3,2,1,0} dot(%p, %v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%pv)
  }"""
    check_rewrite(RecognizeQuantizedAttention(), text, None, inputs=_fp8_inputs(0))


def test_a_float_attention_is_still_the_float_rule():
    # without any Q -> DQ pair the float recognizer matches first (and moves q's and k's dequantize scales
    # into the op's: 0.0303729 * 0.0312447): no score_quant attribute
    text = (LAYER[:LAYER.index("    %inv1 = ")] +
            "    %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%dot), dimension=3\n"
            "    %pv = f32[1,4,16,16]{3,2,1,0} dot(%softmax, %v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
            "rhs_batch_dims={0,1}, rhs_contracting_dims={2}\n"
            "    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%pv)\n  }")
    module = check_rewrite(RecognizeQuantizedAttention(), text, _float_expected(text), inputs=_inputs(0),
                           rtol=1e-4, atol=1e-5)  # its moved scales round differently
    assert all("score_quant" not in i.attrs for i in module.entry.instructions)


def _float_expected(text: str) -> str:
    """The float rule's rewrite: q and k read before their dequantize multiplies (which die with the dot),
    k swapped to [.., Sk, D], one attention op."""
    dead = ("%qs ", "%ks ", "%q ", "%k ", "%dot ", "%softmax ", "%pv ", "ROOT ", "}")
    kept = [line for line in text.splitlines() if line and not line.strip().startswith(dead)]
    return "\n".join(kept + ["    %attention = f32[1,4,16,16]{3,2,1,0} transpose(%sk), dimensions={0,1,3,2}",
                              f"    %attention.1 = f32[1,4,16,16]{{3,2,1,0}} {FLOAT.replace('quantized-attention', 'attention')}",
                              "    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%attention.1)", "  }"])
