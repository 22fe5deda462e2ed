"""ONNX's official backend conformance suite (onnx.backend.test) run through mlcc.backend.

The default suite runs SUBSET: about 130 node cases, one or two per op family
(elementwise math, casts, reductions, pooling, convolution, matmul and einsum,
normalizations, attention with a KV cache and softcap, resize, control flow,
losses, gathers and scatters), each as BackendTest runs it: prepare, run every
data set, compare with the case's own tolerance.

The full run (marked slow; conftest.py builds it only when slow tests are
selected) is ``onnx.backend.test.BackendTest(mlcc.backend, __name__)`` over
every node case, with the cases in expected_failures.yaml marked expected
failures, so a case that starts passing fails the run until it leaves the list.
For a faster, parallel run with grouped failure reasons use
``python tools/run_node_conformance.py --jobs N --expected tests/backend/expected_failures.yaml``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import unittest
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

import mlcc.backend

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from run_node_conformance import check_case  # noqa: E402  (BackendTest's run of one case, shared with the tool)

EXPECTED_FAILURES_FILE = Path(__file__).with_name("expected_failures.yaml")

# case name -> the onnx.backend.test.case.node module that generates it (only these are imported)
SUBSET = {
    "test_abs": "abs",
    "test_nonmaxsuppression_suppress_by_IOU": "nonmaxsuppression",
    "test_unique_not_sorted_without_axis": "unique",
    "test_dynamicquantizelinear": "dynamicquantizelinear",
    "test_matmulinteger": "matmulinteger",
    "test_qlinearmatmul_2D_uint8_float32": "qlinearmatmul",
    "test_acos_example": "acos",
    "test_add_int8": "add",
    "test_and3d": "and_",
    "test_argmax_negative_axis_keepdims_example_select_last_index": "argmax",
    "test_argmin_default_axis_example": "argmin",
    "test_atan_example": "atan",
    "test_attention_3d_transpose_verification": "attention",
    "test_attention_4d_with_past_and_present": "attention",
    "test_attention_3d_gqa_softcap": "attention",
    "test_averagepool_2d_ceil": "averagepool",
    "test_batchnorm_example": "batch_normalization",
    "test_bitcast_int8_to_uint8": "bitcast",
    "test_bitshift_right_uint64": "bitshift",
    "test_bitwise_and_i16_3d": "bitwiseand",
    "test_bitwise_not_3d": "bitwisenot",
    "test_cast_FLOAT_to_DOUBLE": "cast",
    "test_castlike_DOUBLE_to_FLOAT": "castlike",
    "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2": "cast",
    "test_cast_FLOAT_to_FLOAT4E2M1": "cast",
    "test_cast_e8m0_FLOAT_to_FLOAT8E8M0": "cast",
    "test_castlike_INT4_to_FLOAT": "castlike",
    "test_ceil_example": "ceil",
    "test_clip_example": "clip",
    "test_concat_2d_axis_0": "concat",
    "test_constant": "constant",
    "test_constantofshape_int_shape_zero": "constantofshape",
    "test_conv_with_strides_no_padding": "conv",
    "test_conv_with_autopad_same": "conv",
    "test_convtranspose_pads": "convtranspose",
    "test_convtranspose_1d": "convtranspose",
    "test_cos_example": "cos",
    "test_cumsum_1d_reverse_exclusive": "cumsum",
    "test_depthtospace_crd_mode_example": "depthtospace",
    "test_dequantizelinear_uint16": "dequantizelinear",
    "test_dequantizelinear_blocked": "dequantizelinear",
    "test_dequantizelinear_e4m3fn_float16": "dequantizelinear",
    "test_div_uint8": "div",
    "test_dropout_default_mask": "dropout",
    "test_einsum_transpose": "einsum",
    "test_einsum_batch_matmul": "einsum",
    "test_elu": "elu",
    "test_equal_uint8": "equal",
    "test_erf": "erf",
    "test_exp": "exp",
    "test_expand_dim_unchanged": "expand",
    "test_eyelike_with_dtype": "eyelike",
    "test_flatten_negative_axis4": "flatten",
    "test_gather_negative_indices": "gather",
    "test_gather_elements_negative_indices": "gatherelements",
    "test_gathernd_example_int32": "gathernd",
    "test_gelu_tanh_2": "gelu",
    "test_gemm_beta": "gemm",
    "test_gemm_all_attributes": "gemm",
    "test_globalaveragepool": "globalaveragepool",
    "test_globalmaxpool_precomputed": "globalmaxpool",
    "test_greater_uint32": "greater",
    "test_group_normalization_example": "groupnormalization",
    "test_hardmax_axis_0": "hardmax",
    "test_hardswish": "hardswish",
    "test_identity": "identity",
    "test_if": "if_",
    "test_instancenorm_epsilon": "instance_normalization",
    "test_isinf": "isinf",
    "test_isnan_float16": "isnan",
    "test_layer_normalization_3d_axis_negative_2_epsilon": "layernormalization",
    "test_layer_normalization_4d_axis_negative_1": "layernormalization",
    "test_leakyrelu_example": "leakyrelu",
    "test_less_uint64": "less",
    "test_log_example": "log",
    "test_logsoftmax_negative_axis": "logsoftmax",
    "test_loop11": "loop",
    "test_l1normalization_axis_last": "lpnormalization",
    "test_lppool_2d_same_upper": "lppool",
    "test_lrn": "lrn",
    "test_matmul_1d_1d": "matmul",
    "test_matmul_4d": "matmul",
    "test_max_uint16": "max",
    "test_maxpool_3d_dilations_use_ref_impl": "maxpool",
    "test_maxpool_2d_pads": "maxpool",
    "test_mvn": "meanvariancenormalization",
    "test_mish": "mish",
    "test_mod_float32_mixed_sign_fmod_0": "mod",
    "test_mul_uint8": "mul",
    "test_nllloss_NCd1": "negativeloglikelihoodloss",
    "test_not_2d": "not_",
    "test_onehot_with_axis": "onehot",
    "test_or_bcast4v3d": "or_",
    "test_constant_pad": "pad",
    "test_reflect_pad": "pad",
    "test_pow_types_float32_uint32": "pow",
    "test_prelu_broadcast": "prelu",
    "test_quantizelinear": "quantizelinear",
    "test_quantizelinear_int4": "quantizelinear",
    "test_quantizelinear_blocked_asymmetric": "quantizelinear",
    "test_quantizelinear_e4m3fn": "quantizelinear",
    "test_range_float_type_positive_delta": "rangeop",
    "test_reduce_log_sum_exp_default_axes_keepdims_example": "reduce_log_sum_exp",
    "test_reduce_l2_default_axes_keepdims_random": "reducel2",
    "test_reduce_max_default_axes_keepdim_example": "reducemax",
    "test_reduce_mean_default_axes_keepdims_random": "reducemean",
    "test_reduce_prod_default_axes_keepdims_random": "reduceprod",
    "test_reduce_sum_default_axes_keepdims_example": "reducesum",
    "test_reduce_sum_keepdims_random": "reducesum",
    "test_relu": "relu",
    "test_reshape_allowzero_reordered": "reshape",
    "test_reshape_reordered_all_dims": "reshape",
    "test_resize_upsample_sizes_nearest_axes_3_2": "resize",
    "test_resize_upsample_scales_linear": "resize",
    "test_rms_normalization_4d_axis1": "rmsnormalization",
    "test_rotary_embedding_no_position_ids_rotary_dim": "rotaryembedding",
    "test_round": "round",
    "test_scan9_sum": "scan",
    "test_scatternd_min": "scatternd",
    "test_selu_default": "selu",
    "test_shape_start_1": "shape",
    "test_shrink_hard": "shrink",
    "test_sigmoid_example": "sigmoid",
    "test_sin_example": "sin",
    "test_slice": "slice",
    "test_softmax_example": "softmax",
    "test_sce_mean_weight_log_prob": "softmax_cross_entropy_loss",
    "test_softplus_example": "softplus",
    "test_spacetodepth": "spacetodepth",
    "test_split_zero_size_splits_opset13": "split",
    "test_squeeze": "squeeze",
    "test_sub_example": "sub",
    "test_sum_one_input": "sum",
    "test_swiglu_float16": "swiglu",
    "test_swish": "swish",
    "test_tanh": "tanh",
    "test_tile_precomputed": "tile",
    "test_top_k_same_values_2d": "topk",
    "test_transpose_all_permutations_5": "transpose",
    "test_tril_one_row_neg": "trilu",
    "test_unsqueeze_unsorted_axes": "unsqueeze",
    "test_where_long_example": "where",
    "test_upsample_nearest": "upsample",
    "test_scan_sum": "scan",
    "test_melweightmatrix": "melweightmatrix",
    "test_affine_grid_2d_expanded": "affinegrid",
    "test_batchnorm_example_training_mode": "batch_normalization",
    "test_maxpool_with_argmax_2d_precomputed_strides": "maxpool",
    "test_einsum_batch_diagonal": "einsum",
    "test_det_nd": "det",
    "test_roialign_mode_max": "roialign",
    "test_tensorscatter_circular": "tensorscatter",
    "test_stft_with_window": "stft",
    "test_adam_multiple": "adam",
    "test_nesterov_momentum": "momentum",
    "test_gridsample_bicubic_align_corners_1_additional_1": "gridsample",
    "test_gridsample_volumetric_nearest_align_corners_0": "gridsample",
    "test_gridsample_reflection_padding": "gridsample",
    "test_maxunpool_export_with_output_shape": "maxunpool",
    "test_col2im_pads": "col2im",
    "test_ai_onnx_ml_array_feature_extractor": "ai_onnx_ml.array_feature_extractor",
    "test_deform_conv_with_multiple_offset_groups": "deformconv",
    "test_causal_conv_with_state_silu_with_past_state": "causal_conv_with_state",
    "test_flexattention_causal_mask": "flexattention",
    "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5": "tfidfvectorizer",
    "test_ai_onnx_ml_tree_ensemble_set_membership": "ai_onnx_ml.tree_ensemble",
    "test_optional_has_element_empty_optional_input": "optionalhaselement",
    "test_optional_get_element_optional_sequence": "optionalgetelement",
    "test_sequence_insert_at_front": "sequenceinsert",
    "test_split_to_sequence_nokeepdims": "splittosequence",
    "test_sequence_map_add_1_sequence_1_tensor": "sequence_map",
    "test_loop13_seq": "loop",
}


def expected_failures() -> dict[str, str]:
    """case name -> the reason it is expected to fail."""
    groups = yaml.safe_load(EXPECTED_FAILURES_FILE.read_text())
    return {name: group["reason"] for group in groups.values() for name in group["cases"]}


def _subset_cases() -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in sorted(set(SUBSET.values())):
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
        from onnx.backend.test.case.node import collect_testcases
        return {c.name: c for c in collect_testcases(None) if c.name in SUBSET}


@pytest.fixture(scope="module")
def subset_cases() -> dict:
    return _subset_cases()


def test_expected_failure_file_is_well_formed() -> None:
    groups = yaml.safe_load(EXPECTED_FAILURES_FILE.read_text())
    seen: dict[str, str] = {}
    for gid, group in groups.items():
        assert group["reason"].strip(), f"group {gid} has no reason"
        assert group["cases"], f"group {gid} is empty"
        for name in group["cases"]:
            assert re.fullmatch(r"test_\w+", name), name
            assert name not in seen, f"{name} is in groups {seen[name]} and {gid}"
            seen[name] = gid
    assert not set(SUBSET) & set(seen), "the default subset must only hold cases expected to pass"


@pytest.mark.parametrize("name", sorted(SUBSET))
def test_node_case(name: str, subset_cases: dict) -> None:
    """What BackendTest does for one node case (onnx/backend/test/runner, run_node)."""
    check_case(subset_cases[name])


def test_backend_api() -> None:
    """run_node, run_model, supports_device and the namedtuple of outputs, as onnx's API expects."""
    node = onnx.helper.make_node("Add", ["a", "b"], ["c"])
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
    (c,) = mlcc.backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, a + b)
    assert mlcc.backend.supports_device("CPU")
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    z = onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 3])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"]),
                                    onnx.helper.make_node("Neg", ["x"], ["z"])], "g", [x], [y, z])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    out = mlcc.backend.run_model(model, [a - 2])
    np.testing.assert_array_equal(out.y, np.maximum(a - 2, 0))
    np.testing.assert_array_equal(out["z"], 2 - a)
    np.testing.assert_array_equal(out[1], 2 - a)


def test_bundles_live_in_temporary_directories_that_go_with_the_rep(tmp_path, monkeypatch) -> None:
    import gc
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rep = mlcc.backend.prepare(_relu_model())
    np.testing.assert_array_equal(rep.run([np.array([-1.0, 2.0], np.float32)])[0], [0.0, 2.0])
    assert [p.name.startswith("mlcc-backend-") for p in tmp_path.iterdir()] == [True]
    del rep
    gc.collect()
    assert not list(tmp_path.iterdir())


def test_shape_inputs_are_compiled_in_per_value() -> None:
    """A Reshape whose shape is a graph input compiles at run time, once per distinct shape value."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    shape = onnx.helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, None])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Reshape", ["x", "shape"], ["y"])], "g", [x, shape], [y])
    rep = mlcc.backend.prepare(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]))
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(rep.run([data, np.array([3, 2])])[0], data.reshape(3, 2))
    np.testing.assert_array_equal(rep.run([data, np.array([6, 1])])[0], data.reshape(6, 1))
    assert rep.baked == ["shape"]


def test_values_computed_inside_if_branches_are_traced_to_graph_inputs() -> None:
    """A Reshape inside an If branch whose shape is computed there from a graph input: the input is baked."""
    s = onnx.helper.make_tensor_value_info
    branch = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["n", "one"], ["rows"]),
         onnx.helper.make_node("Concat", ["rows", "minus_one"], ["target"], axis=0),
         onnx.helper.make_node("Reshape", ["x", "target"], ["y_then"])],
        "then", [], [s("y_then", onnx.TensorProto.FLOAT, [None, None])],
        [onnx.numpy_helper.from_array(np.array([1]), "one"), onnx.numpy_helper.from_array(np.array([-1]), "minus_one")])
    other = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y_else"])], "else", [],
                                   [s("y_else", onnx.TensorProto.FLOAT, [None, None])])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)], "g",
        [s("c", onnx.TensorProto.BOOL, []), s("x", onnx.TensorProto.FLOAT, [2, 6]),
         s("n", onnx.TensorProto.INT64, [1])],
        [s("y", onnx.TensorProto.FLOAT, [None, None])])
    rep = mlcc.backend.prepare(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]))
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(rep.run([np.array(True), data, np.array([2])])[0], data.reshape(3, 4))
    np.testing.assert_array_equal(rep.run([np.array(True), data, np.array([3])])[0], data.reshape(4, 3))
    assert sorted(rep.baked) == ["c", "n"]


def _relu_model() -> onnx.ModelProto:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


def test_unsupported_op_raises_mlccs_error() -> None:
    from mlcc.errors import UnsupportedError
    node = onnx.helper.make_node("ImageDecoder", ["x"], ["y"])
    with pytest.raises(UnsupportedError, match="ImageDecoder"):
        mlcc.backend.run_node(node, [np.zeros(16, dtype=np.uint8)])


if os.environ.get("MLCC_NODE_SUITE") == "full":
    import onnx.backend.test

    backend_test = onnx.backend.test.BackendTest(mlcc.backend, __name__)
    for _name in expected_failures():
        backend_test.xfail(f"^{_name}_(cpu|cuda)$")
    OnnxBackendNodeModelTest: type[unittest.TestCase] = backend_test.test_cases["OnnxBackendNodeModelTest"]
    OnnxBackendNodeModelTest.pytestmark = [pytest.mark.slow]
