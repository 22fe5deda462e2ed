"""Attention forms of LLM decoders (issue #24): sliding windows and grouped-query k/v behind the exporter's
reshape/transpose chains. IR text in, IR text out, the same values before and after."""

import numpy as np

from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.recognize.attention import RecognizeAttention, _reshaped_broadcast
from tests.emit.test_fusion_kernels import check
from tests.hlo.passes.pass_numerics import check_rewrite
from tests.hlo.passes.test_recognize_attention import _additive, _sdpa, _sdpa_expected


def _window(w: int, offset: int = 0) -> np.ndarray:
    i, j = np.arange(8)[:, None], np.arange(8)[None, :]
    keep = (j <= i + offset) & (j > i + offset - w)
    return np.where(keep, 0.0, np.finfo(np.float32).min).astype(np.float32)


def test_mistral_sliding_window_mask_becomes_a_window_attribute():
    # Mistral's static export folds causal & (i - j < window) into one 0 / finfo.min constant
    check_rewrite(RecognizeAttention(), _sdpa(_additive("window"), "%add"),
                  _sdpa_expected(causal="true").replace("scale=0.25", "scale=0.25, window=3"),
                  constants={"window": _window(3)})


def test_a_band_that_is_not_causal_stays_a_mask():
    # keys j in (i - 3, i + 1]: a band one step past the diagonal is no causal window
    check_rewrite(RecognizeAttention(), _sdpa(_additive("band"), "%add"), _sdpa_expected(
        "%arg, %arg.1, %arg.2, %mask", lines="%mask = f32[8,8]{1,0} constant(), ref=band"),
        constants={"band": _window(4, offset=1)})


# LLaMA's repeat_kv as torch.onnx (dynamo) writes it for k: unsqueeze+expand (a broadcast), a reshape to
# [B*H, S, D], the transpose for k^T, a reshape back to [B, H, D, S]; v: broadcast and one reshape
GQA = """
  ENTRY %main {
    %q = f32[1,4,8,16]{3,2,1,0} parameter(0), name=q
    %k = f32[1,2,8,16]{3,2,1,0} parameter(1), name=k
    %v = f32[1,2,8,16]{3,2,1,0} parameter(2), name=v
    %bk = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%k), dimensions={0,1,3,4}
    %rk = f32[4,8,16]{2,1,0} reshape(%bk)
    %tk = f32[4,16,8]{2,1,0} transpose(%rk), dimensions={0,2,1}
    %kt = f32[1,4,16,8]{3,2,1,0} reshape(%tk)
    %bv = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%v), dimensions={0,1,3,4}
    %rv = f32[1,4,8,16]{3,2,1,0} reshape(%bv)
    %dot = f32[1,4,8,8]{3,2,1,0} dot(%q, %kt), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    %softmax = f32[1,4,8,8]{3,2,1,0} softmax(%dot), dimension=3
    %dot.1 = f32[1,4,8,16]{3,2,1,0} dot(%softmax, %rv), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
    ROOT %tuple = (f32[1,4,8,16]{3,2,1,0}) tuple(%dot.1)
  }"""


def test_grouped_query_keys_behind_reshape_and_transpose_are_read_unrepeated():
    # k and v go in with their 2 heads: the op's q head h reads kv head h // 2, no repeat_kv copy (the
    # repeated k's views are left for DCE)
    check_rewrite(RecognizeAttention(), GQA, """
      ENTRY %main {
        %q = f32[1,4,8,16]{3,2,1,0} parameter(0), name=q
        %k = f32[1,2,8,16]{3,2,1,0} parameter(1), name=k
        %v = f32[1,2,8,16]{3,2,1,0} parameter(2), name=v
        %bk = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%k), dimensions={0,1,3,4}
        %rk = f32[4,8,16]{2,1,0} reshape(%bk)
        %tk = f32[4,16,8]{2,1,0} transpose(%rk), dimensions={0,2,1}
        %kt = f32[1,4,16,8]{3,2,1,0} reshape(%tk)
        %attention = f32[1,4,8,16]{3,2,1,0} transpose(%kt), dimensions={0,1,3,2}
        %attention.1 = f32[1,4,8,16]{3,2,1,0} attention(%q, %k, %v), causal=false, scale=1.0
        ROOT %tuple = (f32[1,4,8,16]{3,2,1,0}) tuple(%attention.1)
      }""")


def test_a_view_chain_that_moves_elements_is_not_a_repeat():
    # [B*H, S, D] transposed to [B*H, D, S] and read back as [B, H, D, S] is k^T, not a reshape of the
    # repeated k: only the chain that transposes back is
    module = parse_module(GQA)
    views = {i.name: i for i in module.entry.instructions}
    assert _reshaped_broadcast(views["kt"]) is None
    assert _reshaped_broadcast(views["rv"]) is views["bv"]


def test_gemma2_logit_soft_capping_becomes_a_softcap_attribute():
    # Gemma 2: 50 * tanh(scores * 0.5 * 0.5 * 0.02) (the 1/cap a multiply after algsimp), then the causal mask
    causal = np.where(np.tril(np.ones((8, 8), bool)), 0.0, np.finfo(np.float32).min).astype(np.float32)
    lines = ("%inv = f32[1,2,8,8]{3,2,1,0} constant(), splat=0.02\n"
             "        %scaled = f32[1,2,8,8]{3,2,1,0} multiply(%dot, %inv)\n"
             "        %tanh = f32[1,2,8,8]{3,2,1,0} tanh(%scaled)\n"
             "        %cap = f32[1,2,8,8]{3,2,1,0} constant(), splat=50.0\n"
             "        %capped = f32[1,2,8,8]{3,2,1,0} multiply(%tanh, %cap)\n"
             + _additive("causal").replace("add(%dot,", "add(%capped,"))
    check_rewrite(RecognizeAttention(), _sdpa(lines, "%add"),
                  _sdpa_expected(causal="true").replace("scale=0.25", "scale=0.25, softcap=50.0"),
                  constants={"causal": causal}, rtol=1e-5, atol=1e-6)


def test_a_mask_added_before_the_cap_is_left_alone():
    # tanh of masked scores is not soft-capping of the scores: the -inf would become -cap
    causal = np.where(np.tril(np.ones((8, 8), bool)), 0.0, -1e9).astype(np.float32)
    lines = (_additive("causal") + "\n"
             "        %tanh = f32[1,2,8,8]{3,2,1,0} tanh(%add)\n"
             "        %cap = f32[1,2,8,8]{3,2,1,0} constant(), splat=50.0\n"
             "        %capped = f32[1,2,8,8]{3,2,1,0} multiply(%tanh, %cap)")
    module = check_rewrite(RecognizeAttention(), _sdpa(lines, "%capped"), None, constants={"causal": causal})
    # --explain-fusion says so: the scores reach memory
    assert module.analyses.unrecognized == [
        "%softmax -> %dot.1: attention not recognized: the softmax's input (%capped, multiply) is not "
        "q · kᵀ under constant scales, one soft-cap and masks"]


# BLOOM's ALiBi: each head's slope times the key position, added to the scores (with the causal mask)
ALIBI = ("%slopes = f32[2]{0} constant(), ref=slopes\n"
         "        %j = s32[8]{0} iota(), iota_dimension=0\n"
         "        %jf = f32[8]{0} convert(%j)\n"
         "        %sb = f32[1,2,8,8]{3,2,1,0} broadcast(%slopes), dimensions={1}\n"
         "        %jb = f32[1,2,8,8]{3,2,1,0} broadcast(%jf), dimensions={3}\n"
         "        %bias = f32[1,2,8,8]{3,2,1,0} multiply(%sb, %jb)\n"
         "        %biased = f32[1,2,8,8]{3,2,1,0} add(%dot, %bias)\n"
         + _additive("causal").replace("add(%dot,", "add(%biased,"))


def test_alibi_bias_is_computed_in_the_attention_kernel_from_positions():
    causal = np.where(np.tril(np.ones((8, 8), bool)), 0.0, -np.inf).astype(np.float32)
    constants = {"causal": causal, "slopes": np.array([0.5, 0.25], np.float32)}
    module = check_rewrite(RecognizeAttention(), _sdpa(ALIBI, "%add"), constants=constants, expected=_sdpa_expected(
        "%arg, %arg.1, %arg.2, %bias", causal="true", lines=ALIBI.split("\n        %biased")[0]))
    # fused: the slopes are the kernel's only extra input; the [1, 2, 8, 8] bias never reaches memory
    Fusion().run(module)
    (attention,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert attention.attrs["kind"] == "attention"
    assert [o.name for o in attention.operands] == ["arg", "arg.1", "arg.2", "slopes"]
    check(attention, [np.random.default_rng(0).standard_normal((1, 2, 8, 16)).astype(np.float32)
                      for _ in range(3)] + [constants["slopes"]])
