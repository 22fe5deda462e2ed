import numpy as np
import pytest

from mlcc.hlo.passes.recognize.attention import RecognizeAttention
from tests.hlo.passes.pass_numerics import check_rewrite, opcodes

CAUSAL_16 = np.tril(np.ones((16, 16), bool))
GATHER_INDICES = np.stack([np.zeros(16, np.int64), np.arange(16)], -1).reshape(1, 1, 1, 16, 2)
# as in the shared reference data: right padding, the last 3 positions masked (no row is fully masked)
PADDING = {"attention_mask": np.array([[1] * 13 + [0] * 3], np.int64)}

# gpt2_tiny.onnx (torch.onnx dynamo, transformers sdpa), one layer as the recognizer sees it after cleanup:
# q and k pre-scaled by 0.5 = 1/sqrt(sqrt(16)), k^T composed into one transpose, additive mask
# where(causal & padding, 0, finfo.min), softmax, the IsNaN guard, and the dot with v. k comes out as the
# head-split transpose of the projection.
GPT2 = """
  ENTRY %main {
    %qkv = f32[1,16,192]{2,1,0} parameter(0), name=qkv
    %arg.1 = s64[1,16]{1,0} parameter(1), name=attention_mask
    %convert = pred[1,16]{1,0} convert(%arg.1), origin={node__to_copy}
    %constant.2 = s64[1,1,1,16,2]{4,3,2,1,0} constant(), ref=val_36
    %gather-nd = pred[1,1,1,16]{3,2,1,0} gather-nd(%convert, %constant.2), batch_dims=0, origin={node_GatherND_37}
    %constant.3 = pred[1,1,16,16]{3,2,1,0} constant(), ref=bitwise_and
    %broadcast = pred[1,1,16,16]{3,2,1,0} broadcast(%gather-nd), dimensions={0,1,2,3}, origin={node_bitwise_and_1}
    %and = pred[1,1,16,16]{3,2,1,0} and(%constant.3, %broadcast), origin={node_bitwise_and_1}
    %slice = f32[1,16,64]{2,1,0} slice(%qkv), limit_indices={1,16,64}, start_indices={0,0,0}, strides={1,1,1}, origin={node_Split_251}
    %slice.1 = f32[1,16,64]{2,1,0} slice(%qkv), limit_indices={1,16,128}, start_indices={0,0,64}, strides={1,1,1}, origin={node_Split_251}
    %slice.2 = f32[1,16,64]{2,1,0} slice(%qkv), limit_indices={1,16,192}, start_indices={0,0,128}, strides={1,1,1}, origin={node_Split_251}
    %reshape.2 = f32[1,16,4,16]{3,2,1,0} reshape(%slice.1), origin={node_view_4}
    %reshape.3 = f32[1,16,4,16]{3,2,1,0} reshape(%slice.2), origin={node_view_5}
    %transpose.1 = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.3), dimensions={0,2,1,3}, origin={node_transpose_1}
    %reshape.4 = f32[1,16,4,16]{3,2,1,0} reshape(%slice), origin={node_view_6}
    %transpose.2 = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.4), dimensions={0,2,1,3}, origin={node_transpose_2}
    %transpose-transpose = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.2), dimensions={0,2,3,1}, origin={node_transpose,node_Transpose_85}
    %constant.7 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.5, origin={node_Mul_89,node_Mul_91}
    %multiply = f32[1,4,16,16]{3,2,1,0} multiply(%transpose.2, %constant.7), origin={node_Mul_89}
    %multiply.1 = f32[1,4,16,16]{3,2,1,0} multiply(%transpose-transpose, %constant.7), origin={node_Mul_91}
    %constant.9 = f32[1,1,16,16]{3,2,1,0} constant(), splat=0.0, origin={node_Where_94}
    %constant.10 = f32[1,1,16,16]{3,2,1,0} constant(), splat=-3.4028234663852886e+38, origin={node_Where_94}
    %select = f32[1,1,16,16]{3,2,1,0} select(%and, %constant.9, %constant.10), origin={node_Where_94}
    %dot.1 = f32[1,4,16,16]{3,2,1,0} dot(%multiply, %multiply.1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}, origin={node_MatMul_95}
    %broadcast.1 = f32[1,4,16,16]{3,2,1,0} broadcast(%select), dimensions={0,1,2,3}, origin={node_Add_96}
    %add.1 = f32[1,4,16,16]{3,2,1,0} add(%dot.1, %broadcast.1), origin={node_Add_96}
    %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%add.1), dimension=3, origin={node_Softmax_97}
    %is-nan = pred[1,4,16,16]{3,2,1,0} is-nan(%softmax), origin={node_IsNaN_98}
    %constant.11 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.0, origin={node_Where_99}
    %select.1 = f32[1,4,16,16]{3,2,1,0} select(%is-nan, %constant.11, %softmax), origin={node_Where_99}
    %dot.2 = f32[1,4,16,16]{3,2,1,0} dot(%select.1, %transpose.1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}, origin={node_scaled_dot_product_attention}
    %transpose.4 = f32[1,16,4,16]{3,2,1,0} transpose(%dot.2), dimensions={0,2,1,3}, origin={node_transpose_3}
    ROOT %tuple = (f32[1,16,4,16]{3,2,1,0}) tuple(%transpose.4)
  }"""
GPT2_CONSTANTS = {"val_36": GATHER_INDICES, "bitwise_and": CAUSAL_16.reshape(1, 1, 16, 16)}

GPT2_EXPECTED = """
  ENTRY %main {
    %qkv = f32[1,16,192]{2,1,0} parameter(0), name=qkv
    %arg.1 = s64[1,16]{1,0} parameter(1), name=attention_mask
    %convert = pred[1,16]{1,0} convert(%arg.1), origin={node__to_copy}
    %constant.2 = s64[1,1,1,16,2]{4,3,2,1,0} constant(), ref=val_36
    %gather-nd = pred[1,1,1,16]{3,2,1,0} gather-nd(%convert, %constant.2), batch_dims=0, origin={node_GatherND_37}
    %slice = f32[1,16,64]{2,1,0} slice(%qkv), limit_indices={1,16,64}, start_indices={0,0,0}, strides={1,1,1}, origin={node_Split_251}
    %slice.1 = f32[1,16,64]{2,1,0} slice(%qkv), limit_indices={1,16,128}, start_indices={0,0,64}, strides={1,1,1}, origin={node_Split_251}
    %slice.2 = f32[1,16,64]{2,1,0} slice(%qkv), limit_indices={1,16,192}, start_indices={0,0,128}, strides={1,1,1}, origin={node_Split_251}
    %reshape.2 = f32[1,16,4,16]{3,2,1,0} reshape(%slice.1), origin={node_view_4}
    %reshape.3 = f32[1,16,4,16]{3,2,1,0} reshape(%slice.2), origin={node_view_5}
    %transpose.1 = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.3), dimensions={0,2,1,3}, origin={node_transpose_1}
    %reshape.4 = f32[1,16,4,16]{3,2,1,0} reshape(%slice), origin={node_view_6}
    %transpose.2 = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.4), dimensions={0,2,1,3}, origin={node_transpose_2}
    %attention = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.2), dimensions={0,2,1,3}, origin={node_scaled_dot_product_attention}
    %attention.1 = f32[1,4,16,16]{3,2,1,0} attention(%transpose.2, %attention, %transpose.1, %gather-nd), causal=true, MASKEDscale=0.25, origin={ORIGIN}
    %transpose.4 = f32[1,16,4,16]{3,2,1,0} transpose(%attention.1), dimensions={0,2,1,3}, origin={node_transpose_3}
    ROOT %tuple = (f32[1,16,4,16]{3,2,1,0}) tuple(%transpose.4)
  }"""
GPT2_ORIGIN = ("node_bitwise_and_1,node_transpose,node_Transpose_85,node_Mul_89,node_Mul_91,node_Where_94,node_MatMul_95,node_Add_96,"
               "node_Softmax_97,node_IsNaN_98,node_Where_99,node_scaled_dot_product_attention")


FINFO_MIN = "masked_value=-3.4028234663852886e+38, "
# left padding: query 0 sees no key at all (the causal limit leaves it key 0, which is padded)
LEFT_PADDED = {"attention_mask": np.array([[0] * 3 + [1] * 13], np.int64)}


def gpt2_expected(masked: str) -> str:
    return GPT2_EXPECTED.replace("ORIGIN", GPT2_ORIGIN).replace("MASKED", masked)


@pytest.mark.parametrize("mask", [PADDING, LEFT_PADDED], ids=["right-padded", "left-padded"])
def test_gpt2_dynamo_attention_with_causal_and_padding_masks(mask):
    # the mask adds finfo.min, not -inf: a query whose keys are all masked gets the softmax of every score
    # plus finfo.min (the average of every v row), which masked_value keeps exact
    module = check_rewrite(RecognizeAttention(), GPT2, gpt2_expected(FINFO_MIN), constants=GPT2_CONSTANTS, inputs=mask)
    assert opcodes(module).count("attention") == 1


@pytest.mark.parametrize("mask", [PADDING, LEFT_PADDED], ids=["right-padded", "left-padded"])
def test_gpt2_legacy_minus_inf_mask_is_the_same_attention(mask):
    # gpt2_tiny_legacy.onnx (TorchScript exporter) masks with -inf: a fully masked query is NaN, then 0
    legacy = GPT2.replace("splat=-3.4028234663852886e+38", "splat=-inf")
    check_rewrite(RecognizeAttention(), legacy, gpt2_expected(""), constants=GPT2_CONSTANTS, inputs=mask)


# bert_tiny.onnx (torch.onnx dynamo): a padding mask only (the all-true causal factor folded away)
BERT = """
  ENTRY %main {
    %q = f32[1,4,16,16]{3,2,1,0} parameter(0), name=q
    %kt = f32[1,4,16,16]{3,2,1,0} parameter(1), name=kt
    %v = f32[1,4,16,16]{3,2,1,0} parameter(2), name=v
    %arg.1 = s64[1,16]{1,0} parameter(3), name=attention_mask
    %convert = pred[1,16]{1,0} convert(%arg.1), origin={node__to_copy}
    %constant.5 = s64[1,1,1,16,2]{4,3,2,1,0} constant(), ref=val_38
    %gather-nd = pred[1,1,1,16]{3,2,1,0} gather-nd(%convert, %constant.5), batch_dims=0, origin={node_GatherND_37}
    %broadcast = pred[1,1,16,16]{3,2,1,0} broadcast(%gather-nd), dimensions={0,1,2,3}, origin={node_bitwise_and_1}
    %constant.10 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.5, origin={node_Mul_84,node_Mul_86}
    %multiply = f32[1,4,16,16]{3,2,1,0} multiply(%q, %constant.10), origin={node_Mul_84}
    %multiply.1 = f32[1,4,16,16]{3,2,1,0} multiply(%kt, %constant.10), origin={node_Mul_86}
    %constant.12 = f32[1,1,16,16]{3,2,1,0} constant(), splat=0.0, origin={node_Where_89}
    %constant.13 = f32[1,1,16,16]{3,2,1,0} constant(), splat=-3.4028234663852886e+38, origin={node_Where_89}
    %select = f32[1,1,16,16]{3,2,1,0} select(%broadcast, %constant.12, %constant.13), origin={node_Where_89}
    %dot.3 = f32[1,4,16,16]{3,2,1,0} dot(%multiply, %multiply.1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}, origin={node_MatMul_90}
    %broadcast.1 = f32[1,4,16,16]{3,2,1,0} broadcast(%select), dimensions={0,1,2,3}, origin={node_Add_91}
    %add.2 = f32[1,4,16,16]{3,2,1,0} add(%dot.3, %broadcast.1), origin={node_Add_91}
    %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%add.2), dimension=3, origin={node_Softmax_92}
    %is-nan = pred[1,4,16,16]{3,2,1,0} is-nan(%softmax), origin={node_IsNaN_93}
    %constant.14 = f32[1,4,16,16]{3,2,1,0} constant(), splat=0.0, origin={node_Where_94}
    %select.1 = f32[1,4,16,16]{3,2,1,0} select(%is-nan, %constant.14, %softmax), origin={node_Where_94}
    %dot.4 = f32[1,4,16,16]{3,2,1,0} dot(%select.1, %v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}, origin={node_scaled_dot_product_attention}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%dot.4)
  }"""


def test_two_different_finite_mask_values_are_left_alone():
    # a causal select to -1e9 under a padding mask adding finfo.min: a fully padded query's softmax runs over
    # scores shifted by two different values, which no single masked_value describes
    two = BERT.replace(
        "%add.2 = f32[1,4,16,16]{3,2,1,0} add(%dot.3, %broadcast.1), origin={node_Add_91}",
        "%causal = pred[1,4,16,16]{3,2,1,0} constant(), ref=causal\n"
        "    %neg = f32[1,4,16,16]{3,2,1,0} constant(), splat=-1e+09\n"
        "    %dropped = f32[1,4,16,16]{3,2,1,0} select(%causal, %dot.3, %neg)\n"
        "    %add.2 = f32[1,4,16,16]{3,2,1,0} add(%dropped, %broadcast.1), origin={node_Add_91}")
    constants = {"val_38": GATHER_INDICES, "causal": np.broadcast_to(CAUSAL_16, (1, 4, 16, 16)).copy()}
    check_rewrite(RecognizeAttention(), two, None, constants=constants, inputs=PADDING)


def test_bert_padding_mask():
    check_rewrite(RecognizeAttention(), BERT, constants={"val_38": GATHER_INDICES}, inputs=PADDING, expected="""
      ENTRY %main {
        %q = f32[1,4,16,16]{3,2,1,0} parameter(0), name=q
        %kt = f32[1,4,16,16]{3,2,1,0} parameter(1), name=kt
        %v = f32[1,4,16,16]{3,2,1,0} parameter(2), name=v
        %arg.1 = s64[1,16]{1,0} parameter(3), name=attention_mask
        %convert = pred[1,16]{1,0} convert(%arg.1), origin={node__to_copy}
        %constant.5 = s64[1,1,1,16,2]{4,3,2,1,0} constant(), ref=val_38
        %gather-nd = pred[1,1,1,16]{3,2,1,0} gather-nd(%convert, %constant.5), batch_dims=0, origin={node_GatherND_37}
        %attention = f32[1,4,16,16]{3,2,1,0} transpose(%kt), dimensions={0,1,3,2}, origin={node_scaled_dot_product_attention}
        %attention.1 = f32[1,4,16,16]{3,2,1,0} attention(%q, %attention, %v, %gather-nd), causal=false, masked_value=-3.4028234663852886e+38, scale=0.25, origin={node_bitwise_and_1,node_Mul_84,node_Mul_86,node_Where_89,node_MatMul_90,node_Add_91,node_Softmax_92,node_IsNaN_93,node_Where_94,node_scaled_dot_product_attention}
        ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%attention.1)
      }""")


# /work/shared/models/attention.stablehlo.mlir (JAX): scores / 4, a causal mask from jnp.tril (iota >= iota,
# select(c, true, false)) applied as where(mask, scores, finfo.min); the softmax already recognized
JAX = """
  ENTRY %main {
    %transpose = f32[1,4,16,16]{3,2,1,0} parameter(0), name=q
    %transpose.1 = f32[1,4,16,16]{3,2,1,0} parameter(1), name=k
    %transpose.2 = f32[1,4,16,16]{3,2,1,0} parameter(2), name=v
    %dot.1 = f32[1,4,16,16]{3,2,1,0} dot(%transpose, %transpose.1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}, origin={"main/%39"}
    %constant.6 = f32[] constant(), value={4.0}, origin={"main/%cst_5"}
    %broadcast.15 = f32[1,4,16,16]{3,2,1,0} broadcast(%constant.6), dimensions={}, origin={"main/%40"}
    %divide.3 = f32[1,4,16,16]{3,2,1,0} divide(%dot.1, %broadcast.15), origin={"main/%41"}
    %constant.7 = pred[] constant(), value={true}, origin={"main/%c"}
    %broadcast.16 = pred[16,16]{1,0} broadcast(%constant.7), dimensions={}, origin={"main/%42"}
    %iota = s32[16,16]{1,0} iota(), iota_dimension=0, origin={"main/tril/%0"}
    %constant.8 = s32[] constant(), value={0}, origin={"main/tril/%c"}
    %broadcast.17 = s32[16,16]{1,0} broadcast(%constant.8), dimensions={}, origin={"main/tril/%1"}
    %add.3 = s32[16,16]{1,0} add(%iota, %broadcast.17), origin={"main/tril/%2"}
    %iota.1 = s32[16,16]{1,0} iota(), iota_dimension=1, origin={"main/tril/%3"}
    %compare = pred[16,16]{1,0} compare(%add.3, %iota.1), direction=GE, origin={"main/tril/%4"}
    %constant.9 = pred[] constant(), value={false}, origin={"main/tril/%c_0"}
    %broadcast.18 = pred[16,16]{1,0} broadcast(%constant.9), dimensions={}, origin={"main/tril/%5"}
    %select = pred[16,16]{1,0} select(%compare, %broadcast.16, %broadcast.18), origin={"main/tril/%6"}
    %constant.10 = f32[] constant(), value={-3.4028234663852886e+38}, origin={"main/%cst_6"}
    %broadcast.19 = pred[1,4,16,16]{3,2,1,0} broadcast(%select), dimensions={2,3}, origin={"main/_where/%0"}
    %broadcast.20 = f32[1,4,16,16]{3,2,1,0} broadcast(%constant.10), dimensions={}, origin={"main/_where/%1"}
    %select.1 = f32[1,4,16,16]{3,2,1,0} select(%broadcast.19, %divide.3, %broadcast.20), origin={"main/_where/%2"}
    %softmax = f32[1,4,16,16]{3,2,1,0} softmax(%select.1), dimension=3, origin={"main/%55"}
    %dot.2 = f32[1,4,16,16]{3,2,1,0} dot(%softmax, %transpose.2), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}, origin={"main/%56"}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%dot.2)
  }"""

JAX_EXPECTED = """
  ENTRY %main {
    %transpose = f32[1,4,16,16]{3,2,1,0} parameter(0), name=q
    %transpose.1 = f32[1,4,16,16]{3,2,1,0} parameter(1), name=k
    %transpose.2 = f32[1,4,16,16]{3,2,1,0} parameter(2), name=v
    %attention = f32[1,4,16,16]{3,2,1,0} attention(%transpose, %transpose.1, %transpose.2), causal=true, scale=0.25, origin={ORIGIN}
    ROOT %tuple = (f32[1,4,16,16]{3,2,1,0}) tuple(%attention)
  }"""


def test_jax_causal_attention_from_iota_comparisons():
    origin = ('"main/%39","main/%cst_5","main/%40","main/%41","main/%c","main/%42","main/tril/%0","main/tril/%c",'
              '"main/tril/%1","main/tril/%2","main/tril/%3","main/tril/%4","main/tril/%c_0","main/tril/%5",'
              '"main/tril/%6","main/%cst_6","main/_where/%0","main/_where/%1","main/_where/%2","main/%55","main/%56"')
    check_rewrite(RecognizeAttention(), JAX, JAX_EXPECTED.replace("ORIGIN", origin))


def test_jax_causal_attention_from_a_folded_pred_constant():
    # after constant folding the tril is a pred[16,16] constant
    start, end = JAX.index("%constant.7 = pred[]"), JAX.index("%constant.10 = f32[]")
    folded = JAX[:start] + '%select = pred[16,16]{1,0} constant(), ref=tril, origin={"main/tril/%6"}\n    ' + JAX[end:]
    origin = ('"main/%39","main/%cst_5","main/%40","main/%41","main/tril/%6","main/%cst_6","main/_where/%0",'
              '"main/_where/%1","main/_where/%2","main/%55","main/%56"')
    check_rewrite(RecognizeAttention(), folded, JAX_EXPECTED.replace("ORIGIN", origin), constants={"tril": CAUSAL_16})


def _sdpa(lines: str = "", scores: str = "%dot", params: str = "", guard: bool = False) -> str:
    """F.scaled_dot_product_attention exported by torch.onnx (opset 16, TorchScript): (q*0.5) . (k^T*0.5)."""
    probs = "%softmax"
    guard_lines = ""
    if guard:
        guard_lines = ("%is-nan = pred[1,2,8,8]{3,2,1,0} is-nan(%softmax)\n"
                       "        %zero = f32[1,2,8,8]{3,2,1,0} constant(), splat=0.0\n"
                       "        %guarded = f32[1,2,8,8]{3,2,1,0} select(%is-nan, %zero, %softmax)")
        probs = "%guarded"
    return f"""
      ENTRY %main {{
        %arg = f32[1,2,8,16]{{3,2,1,0}} parameter(0), name=q
        %arg.1 = f32[1,2,8,16]{{3,2,1,0}} parameter(1), name=k
        %arg.2 = f32[1,2,8,16]{{3,2,1,0}} parameter(2), name=v
        {params}
        %transpose = f32[1,2,16,8]{{3,2,1,0}} transpose(%arg.1), dimensions={{0,1,3,2}}
        %constant = f32[1,2,8,16]{{3,2,1,0}} constant(), splat=0.5
        %multiply = f32[1,2,8,16]{{3,2,1,0}} multiply(%arg, %constant)
        %constant.1 = f32[1,2,16,8]{{3,2,1,0}} constant(), splat=0.5
        %multiply.1 = f32[1,2,16,8]{{3,2,1,0}} multiply(%transpose, %constant.1)
        %dot = f32[1,2,8,8]{{3,2,1,0}} dot(%multiply, %multiply.1), lhs_batch_dims={{0,1}}, lhs_contracting_dims={{3}}, rhs_batch_dims={{0,1}}, rhs_contracting_dims={{2}}
        {lines}
        %softmax = f32[1,2,8,8]{{3,2,1,0}} softmax({scores}), dimension=3
        {guard_lines}
        %dot.1 = f32[1,2,8,16]{{3,2,1,0}} dot({probs}, %arg.2), lhs_batch_dims={{0,1}}, lhs_contracting_dims={{3}}, rhs_batch_dims={{0,1}}, rhs_contracting_dims={{2}}
        ROOT %tuple = (f32[1,2,8,16]{{3,2,1,0}}) tuple(%dot.1)
      }}"""


def _sdpa_expected(operands: str = "%arg, %arg.1, %arg.2", causal: str = "false", params: str = "",
                   lines: str = "") -> str:
    return f"""
      ENTRY %main {{
        %arg = f32[1,2,8,16]{{3,2,1,0}} parameter(0), name=q
        %arg.1 = f32[1,2,8,16]{{3,2,1,0}} parameter(1), name=k
        %arg.2 = f32[1,2,8,16]{{3,2,1,0}} parameter(2), name=v
        {params}
        {lines}
        %attention = f32[1,2,8,16]{{3,2,1,0}} attention({operands}), causal={causal}, scale=0.25
        ROOT %tuple = (f32[1,2,8,16]{{3,2,1,0}}) tuple(%attention)
      }}"""


def _additive(ref: str) -> str:
    return (f"%mask = f32[8,8]{{1,0}} constant(), ref={ref}\n"
            "        %broadcast = f32[1,2,8,8]{3,2,1,0} broadcast(%mask), dimensions={2,3}\n"
            "        %add = f32[1,2,8,8]{3,2,1,0} add(%dot, %broadcast)")


def test_torch_sdpa_without_a_mask():
    check_rewrite(RecognizeAttention(), _sdpa(), _sdpa_expected())


def test_torch_sdpa_is_causal_adds_a_zero_and_minus_inf_constant():
    causal = np.where(np.tril(np.ones((8, 8), bool)), 0.0, -np.inf).astype(np.float32)
    check_rewrite(RecognizeAttention(), _sdpa(_additive("causal"), "%add"), _sdpa_expected(causal="true"),
                  constants={"causal": causal})


def test_torch_sdpa_boolean_mask_becomes_a_pred_mask_operand():
    # where(m, 0, -inf) added to the scores, and the IsNaN guard after the softmax
    param = "%m = pred[8,8]{1,0} parameter(3), name=m"
    lines = ("%zeros = f32[8,8]{1,0} constant(), splat=0.0\n"
             "        %ninf = f32[8,8]{1,0} constant(), splat=-inf\n"
             "        %select = f32[8,8]{1,0} select(%m, %zeros, %ninf)\n"
             "        %broadcast = f32[1,2,8,8]{3,2,1,0} broadcast(%select), dimensions={2,3}\n"
             "        %add = f32[1,2,8,8]{3,2,1,0} add(%dot, %broadcast)")
    keep = {"m": np.tril(np.ones((8, 8), bool)) | np.eye(8, k=3, dtype=bool)}  # no fully masked row
    check_rewrite(RecognizeAttention(), _sdpa(lines, "%add", param, guard=True), inputs=keep,
                  expected=_sdpa_expected("%arg, %arg.1, %arg.2, %m", params=param))


def test_torch_sdpa_float_mask_stays_additive():
    param = "%m = f32[1,1,8,8]{3,2,1,0} parameter(3), name=m"
    lines = ("%broadcast = f32[1,2,8,8]{3,2,1,0} broadcast(%m), dimensions={0,1,2,3}\n"
             "        %add = f32[1,2,8,8]{3,2,1,0} add(%dot, %broadcast)")
    check_rewrite(RecognizeAttention(), _sdpa(lines, "%add", param),
                  _sdpa_expected("%arg, %arg.1, %arg.2, %m", params=param))


def test_a_lower_triangle_with_another_offset_is_a_mask_not_causal():
    shifted = np.where(np.tril(np.ones((8, 8), bool), k=1), 0.0, -np.inf).astype(np.float32)
    check_rewrite(RecognizeAttention(), _sdpa(_additive("shifted"), "%add"), _sdpa_expected(
        "%arg, %arg.1, %arg.2, %mask", lines="%mask = f32[8,8]{1,0} constant(), ref=shifted"),
        constants={"shifted": shifted})


@pytest.mark.parametrize("lines", [
    # the scale applied after the mask
    "%p = f32[1,2,8,8]{3,2,1,0} add(%dot, %dot)\n        %c = f32[1,2,8,8]{3,2,1,0} constant(), splat=2.0\n"
    "        %s = f32[1,2,8,8]{3,2,1,0} multiply(%p, %c)",
    # two additive masks
    "%c = f32[1,2,8,8]{3,2,1,0} constant(), splat=1.0\n        %a = f32[1,2,8,8]{3,2,1,0} add(%dot, %c)\n"
    "        %s = f32[1,2,8,8]{3,2,1,0} add(%a, %c)",
    # scores that are not q . k^T
    "%s = f32[1,2,8,8]{3,2,1,0} exp(%dot)",
], ids=["scale-after-mask", "two-masks", "not-a-dot"])
def test_near_misses_are_left_alone(lines):
    check_rewrite(RecognizeAttention(), _sdpa(lines, "%s"), expected=None)


def test_softmax_over_the_queries_is_not_attention():
    text = _sdpa().replace("softmax(%dot), dimension=3", "softmax(%dot), dimension=2")
    check_rewrite(RecognizeAttention(), text, expected=None)


def test_half_precision_scores_with_the_softmax_in_f32():
    # transformers eager attention in f16: softmax(w, dim=-1, dtype=torch.float32).to(torch.float16)
    check_rewrite(RecognizeAttention(), """
      ENTRY %main {
        %q = f16[2,8,16]{2,1,0} parameter(0)
        %k = f16[2,8,16]{2,1,0} parameter(1)
        %v = f16[2,8,16]{2,1,0} parameter(2)
        %s = f16[2,8,8]{2,1,0} dot(%q, %k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
        %c = f16[2,8,8]{2,1,0} constant(), splat=0.25
        %w = f16[2,8,8]{2,1,0} multiply(%s, %c)
        %w32 = f32[2,8,8]{2,1,0} convert(%w)
        %p32 = f32[2,8,8]{2,1,0} softmax(%w32), dimension=2
        %p = f16[2,8,8]{2,1,0} convert(%p32)
        %o = f16[2,8,16]{2,1,0} dot(%p, %v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
        ROOT %r = (f16[2,8,16]{2,1,0}) tuple(%o)
      }""", expected="""
      ENTRY %main {
        %q = f16[2,8,16]{2,1,0} parameter(0)
        %k = f16[2,8,16]{2,1,0} parameter(1)
        %v = f16[2,8,16]{2,1,0} parameter(2)
        %attention = f16[2,8,16]{2,1,0} attention(%q, %k, %v), causal=false, scale=0.25
        ROOT %r = (f16[2,8,16]{2,1,0}) tuple(%attention)
      }""", rtol=2e-3, atol=2e-3)


WIDENED = """
  ENTRY %main {
    %q = f16[2,8,16]{2,1,0} parameter(0)
    %k = f16[2,8,16]{2,1,0} parameter(1)
    %v = f16[2,8,16]{2,1,0} parameter(2)
    %bias = f32[2,8,8]{2,1,0} parameter(3)
    %s = f16[2,8,8]{2,1,0} dot(%q, %k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
    %s32 = f32[2,8,8]{2,1,0} convert(%s)
    %c = f32[2,8,8]{2,1,0} constant(), splat=0.25
    %w = f32[2,8,8]{2,1,0} multiply(%s32, %c)
    %b = f32[2,8,8]{2,1,0} subtract(%w, %bias)
    %p = f32[2,8,8]{2,1,0} softmax(%b), dimension=2
    %v32 = f32[2,8,16]{2,1,0} convert(%v)
    %o = f32[2,8,16]{2,1,0} dot(%p, %v32), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
    %y = f16[2,8,16]{2,1,0} convert(%o)
    ROOT %r = (f16[2,8,16]{2,1,0}) tuple(%y)
  }"""


def test_half_precision_inputs_with_scores_probabilities_and_product_in_f32():
    # ONNX FlexAttention on f16 inputs (softmax_precision f32): the dot's scores widened, a bias subtracted in
    # f32, the f32 product with the widened v rounded back to f16: one f16 attention op, the bias negated
    check_rewrite(RecognizeAttention(), WIDENED, expected="""
      ENTRY %main {
        %q = f16[2,8,16]{2,1,0} parameter(0)
        %k = f16[2,8,16]{2,1,0} parameter(1)
        %v = f16[2,8,16]{2,1,0} parameter(2)
        %bias = f32[2,8,8]{2,1,0} parameter(3)
        %attention = f32[2,8,8]{2,1,0} negate(%bias)
        %attention.1 = f16[2,8,16]{2,1,0} attention(%q, %k, %v, %attention), causal=false, scale=0.25
        %attention.2 = f32[2,8,16]{2,1,0} convert(%attention.1)
        %y = f16[2,8,16]{2,1,0} convert(%attention.2)
        ROOT %r = (f16[2,8,16]{2,1,0}) tuple(%y)
      }""", rtol=2e-3, atol=2e-3)


def test_an_f32_product_read_in_f32_is_not_narrowed_to_half_precision():
    # a user of the f32 product that keeps it in f32 would see it rounded to f16: left alone
    text = WIDENED.replace("ROOT %r = (f16[2,8,16]{2,1,0}) tuple(%y)",
                           "ROOT %r = (f16[2,8,16]{2,1,0}, f32[2,8,16]{2,1,0}) tuple(%y, %o)")
    check_rewrite(RecognizeAttention(), text, expected=None)


def test_grouped_query_attention_reads_the_shared_heads():
    # transformers' repeat_kv: k[:, :, None].expand(b, 2, 2, s, d).reshape(b, 4, s, d), for k and for v
    check_rewrite(RecognizeAttention(), """
      ENTRY %main {
        %q = f32[1,4,8,16]{3,2,1,0} parameter(0)
        %k = f32[1,2,8,16]{3,2,1,0} parameter(1)
        %v = f32[1,2,8,16]{3,2,1,0} parameter(2)
        %k5 = f32[1,2,1,8,16]{4,3,2,1,0} reshape(%k)
        %kb = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%k5), dimensions={0,1,2,3,4}
        %kr = f32[1,4,8,16]{3,2,1,0} reshape(%kb)
        %v5 = f32[1,2,1,8,16]{4,3,2,1,0} reshape(%v)
        %vb = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%v5), dimensions={0,1,2,3,4}
        %vr = f32[1,4,8,16]{3,2,1,0} reshape(%vb)
        %kt = f32[1,4,16,8]{3,2,1,0} transpose(%kr), dimensions={0,1,3,2}
        %s = f32[1,4,8,8]{3,2,1,0} dot(%q, %kt), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
        %c = f32[1,4,8,8]{3,2,1,0} constant(), splat=0.25
        %w = f32[1,4,8,8]{3,2,1,0} multiply(%s, %c)
        %p = f32[1,4,8,8]{3,2,1,0} softmax(%w), dimension=3
        %o = f32[1,4,8,16]{3,2,1,0} dot(%p, %vr), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
        ROOT %r = (f32[1,4,8,16]{3,2,1,0}) tuple(%o)
      }""", expected="""
      ENTRY %main {
        %q = f32[1,4,8,16]{3,2,1,0} parameter(0)
        %k = f32[1,2,8,16]{3,2,1,0} parameter(1)
        %v = f32[1,2,8,16]{3,2,1,0} parameter(2)
        %attention = f32[1,4,8,16]{3,2,1,0} attention(%q, %k, %v), causal=false, scale=0.25
        ROOT %r = (f32[1,4,8,16]{3,2,1,0}) tuple(%attention)
      }""")


def test_heads_repeated_in_another_order_are_not_shared():
    # tile-style repetition (h -> h % Hkv) is not grouped-query sharing: k stays expanded
    module = check_rewrite(RecognizeAttention(), """
      ENTRY %main {
        %q = f32[1,4,8,16]{3,2,1,0} parameter(0)
        %k = f32[1,2,8,16]{3,2,1,0} parameter(1)
        %v = f32[1,2,8,16]{3,2,1,0} parameter(2)
        %kb = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%k), dimensions={0,2,3,4}
        %kr = f32[1,4,8,16]{3,2,1,0} reshape(%kb)
        %vb = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%v), dimensions={0,2,3,4}
        %vr = f32[1,4,8,16]{3,2,1,0} reshape(%vb)
        %s = f32[1,4,8,8]{3,2,1,0} dot(%q, %kr), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}
        %p = f32[1,4,8,8]{3,2,1,0} softmax(%s), dimension=3
        %o = f32[1,4,8,16]{3,2,1,0} dot(%p, %vr), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
        ROOT %r = (f32[1,4,8,16]{3,2,1,0}) tuple(%o)
      }""", expected="""
      ENTRY %main {
        %q = f32[1,4,8,16]{3,2,1,0} parameter(0)
        %k = f32[1,2,8,16]{3,2,1,0} parameter(1)
        %v = f32[1,2,8,16]{3,2,1,0} parameter(2)
        %kb = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%k), dimensions={0,2,3,4}
        %kr = f32[1,4,8,16]{3,2,1,0} reshape(%kb)
        %vb = f32[1,2,2,8,16]{4,3,2,1,0} broadcast(%v), dimensions={0,2,3,4}
        %vr = f32[1,4,8,16]{3,2,1,0} reshape(%vb)
        %attention = f32[1,4,8,16]{3,2,1,0} attention(%q, %kr, %vr), causal=false, scale=1.0
        ROOT %r = (f32[1,4,8,16]{3,2,1,0}) tuple(%attention)
      }""")
    assert module is not None


def test_a_drop_mask_of_the_future_with_a_kv_cache_offset_is_causal():
    # examples/models/gpt2_kv_tiny.onnx: 4 new queries over 16 cached keys, where(triu(k=13), -inf, scores)
    drop = ~np.tril(np.ones((4, 16), bool), k=12)
    text = """
      ENTRY %main {
        %q = f32[1,4,4,16]{3,2,1,0} parameter(0)
        %k = f32[1,4,16,16]{3,2,1,0} parameter(1)
        %v = f32[1,4,16,16]{3,2,1,0} parameter(2)
        %s = f32[1,4,4,16]{3,2,1,0} dot(%q, %k), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}
        %c = f32[1,4,4,16]{3,2,1,0} constant(), splat=0.25
        %w = f32[1,4,4,16]{3,2,1,0} multiply(%s, %c)
        %drop = pred[4,16]{1,0} constant(), ref=drop
        %b = pred[1,4,4,16]{3,2,1,0} broadcast(%drop), dimensions={2,3}
        %ninf = f32[1,4,4,16]{3,2,1,0} constant(), splat=-inf
        %m = f32[1,4,4,16]{3,2,1,0} select(%b, %ninf, %w)
        %p = f32[1,4,4,16]{3,2,1,0} softmax(%m), dimension=3
        %o = f32[1,4,4,16]{3,2,1,0} dot(%p, %v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
        ROOT %r = (f32[1,4,4,16]{3,2,1,0}) tuple(%o)
      }"""
    expected = """
      ENTRY %main {
        %q = f32[1,4,4,16]{3,2,1,0} parameter(0)
        %k = f32[1,4,16,16]{3,2,1,0} parameter(1)
        %v = f32[1,4,16,16]{3,2,1,0} parameter(2)
        %attention = f32[1,4,4,16]{3,2,1,0} attention(%q, %k, %v), causal=true, scale=0.25
        ROOT %r = (f32[1,4,4,16]{3,2,1,0}) tuple(%attention)
      }"""
    check_rewrite(RecognizeAttention(), text, expected, constants={"drop": drop})
    # the same drop mask one column short of the offset is not causal: it stays, negated into a keep mask
    check_rewrite(RecognizeAttention(), text, constants={"drop": ~np.tril(np.ones((4, 16), bool), k=11)}, expected="""
      ENTRY %main {
        %q = f32[1,4,4,16]{3,2,1,0} parameter(0)
        %k = f32[1,4,16,16]{3,2,1,0} parameter(1)
        %v = f32[1,4,16,16]{3,2,1,0} parameter(2)
        %drop = pred[4,16]{1,0} constant(), ref=drop
        %attention = pred[4,16]{1,0} not(%drop)
        %attention.1 = f32[1,4,4,16]{3,2,1,0} attention(%q, %k, %v, %attention), causal=false, scale=0.25
        ROOT %r = (f32[1,4,4,16]{3,2,1,0}) tuple(%attention.1)
      }""")
