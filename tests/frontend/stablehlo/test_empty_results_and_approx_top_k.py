"""Zero-size results of fft, convolution and dot_general (compiled to kernels on CPU, against numpy), and
custom_call @ApproxTopK (JAX's approx_max_k/approx_min_k), computed exactly as XLA does off TPU, against
numpy's sort; a custom_call to any other target stays a clean refusal."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, module_text, run_kernels, tensor

from mlcc.frontend.stablehlo import import_stablehlo
from mlcc.frontend.stablehlo.errors import UnsupportedOpsError

rng = np.random.default_rng(22)


@pytest.mark.parametrize("kind,length,shape,out_shape,out_element", [
    ("FFT", 5, (2, 0, 5), (2, 0, 5), "complex<f32>"),
    ("IFFT", 5, (0, 5), (0, 5), "complex<f32>"),
    ("IRFFT", 8, (3, 0, 5), (3, 0, 8), "f32"),
])
def test_fft_of_an_empty_operand_compiles_to_an_empty_result(tmp_path, kind, length, shape, out_shape, out_element):
    """The transform's dots over a zero-size dim used to crash the kernel generator (modulo by zero)."""
    dims = "".join(f"{d}x" for d in shape)
    out = "".join(f"{d}x" for d in out_shape)
    text = ("module @m {\n  func.func public @main(%arg0: tensor<" + dims + "complex<f32>>) -> tensor<" + out
            + out_element + "> {\n    %0 = stablehlo.fft %arg0, type = " + kind + f", length = [{length}] : "
            + "(tensor<" + dims + "complex<f32>>) -> tensor<" + out + out_element + ">\n"
            + "    return %0 : tensor<" + out + out_element + ">\n  }\n}\n")
    x = np.zeros(shape, np.complex64)
    want = {"FFT": np.fft.fft, "IFFT": np.fft.ifft}.get(kind, lambda a, n: np.fft.irfft(a, n))(x, length)
    (got,) = run_kernels(text, [x], tmp_path)
    assert got.shape == want.shape == out_shape
    assert got.dtype == (np.complex64 if out_element.startswith("complex") else np.float32)


def numpy_conv_nchw(x: np.ndarray, w: np.ndarray, rhs_dilation: tuple[int, int]) -> np.ndarray:
    """A valid (unpadded, stride 1) convolution with a dilated kernel, by loops."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    dh, dw = rhs_dilation
    oh, ow = max(0, h - (kh - 1) * dh), max(0, wd - (kw - 1) * dw)  # an empty result when the window outgrows x
    out = np.zeros((n, o, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i:i + (kh - 1) * dh + 1:dh, j:j + (kw - 1) * dw + 1:dw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


@pytest.mark.parametrize("rhs_dilation", [(2, 4), (1, 2)])
def test_convolution_whose_dilated_window_outgrows_the_input(tmp_path, rhs_dilation):
    """A kernel of 3 x 4 dilated by (2, 4) spans 5 x 13 > the 6 x 9 input along w: no output column. It used
    to be refused as invalid input (the IR's shape inference gave a negative dim); (1, 2) still has columns."""
    x = rng.standard_normal((2, 3, 6, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 4)).astype(np.float32)
    want = numpy_conv_nchw(x, w, rhs_dilation)
    body = (f"    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], "
            f"window = {{stride = [1, 1], pad = [[0, 0], [0, 0]], rhs_dilate = [{rhs_dilation[0]}, "
            f"{rhs_dilation[1]}]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : "
            f"({tensor(x.shape, x.dtype)}, {tensor(w.shape, w.dtype)}) -> {tensor(want.shape, want.dtype)}\n"
            f"    return %0 : {tensor(want.shape, want.dtype)}")
    text = module_text([x, w], [(want.shape, want.dtype)], body)
    (got,) = run_kernels(text, [x, w], tmp_path)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dot_general_with_an_empty_batch_dim_and_an_epilogue(tmp_path):
    """A batched product with no batch elements, feeding an add (fused as the dot's epilogue)."""
    a = np.zeros((0, 3, 4), np.float32)
    b = np.zeros((0, 4, 5), np.float32)
    c = np.zeros((0, 3, 5), np.float32)
    t_out = tensor(c.shape, c.dtype)
    body = (f"    %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1] : "
            f"({tensor(a.shape, a.dtype)}, {tensor(b.shape, b.dtype)}) -> {t_out}\n"
            f"    %1 = stablehlo.add %0, %arg2 : {t_out}\n    return %1 : {t_out}")
    text = module_text([a, b, c], [(c.shape, c.dtype)], body)
    (got,) = run_kernels(text, [a, b, c], tmp_path)
    assert got.shape == np.matmul(a, b).shape


# ---------------------------------------------------------------- ApproxTopK
def approx_top_k_text(x: np.ndarray, k: int, dim: int, largest: bool) -> str:
    element = tensor((), x.dtype)[len("tensor<"):-1]
    out_shape = list(x.shape)
    out_shape[dim] = k
    tx, ti = tensor(x.shape, x.dtype), tensor(x.shape, np.int32)
    ox, oi = tensor(out_shape, x.dtype), tensor(out_shape, np.int32)
    init_text = f"dense<{'-' if largest else ''}1.0e+30> : tensor<{element}>"  # the fallback reads no init
    direction = "GT" if largest else "LT"
    return f"""module @m {{
  func.func @cmp(%a: tensor<{element}>, %b: tensor<{element}>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {{
    %0 = stablehlo.compare {direction}, %a, %b : (tensor<{element}>, tensor<{element}>) -> tensor<i1>
    stablehlo.return %0 : tensor<i1>
  }}
  func.func public @main(%arg0: {tx}) -> ({ox}, {oi}) {{
    %0 = stablehlo.iota dim = {dim} : {ti}
    %c = stablehlo.constant dense<-1> : tensor<i32>
    %cst = stablehlo.constant {init_text}
    %1:2 = stablehlo.custom_call @ApproxTopK(%arg0, %0, %cst, %c) {{backend_config = "", called_computations = [@cmp], mhlo.backend_config = {{aggregate_to_topk = true, is_fallback = true, recall_target = 0.949999988 : f32, reduction_dim = {dim} : i64, reduction_input_size_override = -1 : i64, top_k = {k} : i64}}}} : ({tx}, {ti}, tensor<{element}>, tensor<i32>) -> ({ox}, {oi})
    return %1#0, %1#1 : {ox}, {oi}
  }}
}}
"""


def distinct(shape, dtype) -> np.ndarray:
    """Values with no ties (the order of ties is XLA's implementation's: an unstable sort)."""
    size = int(np.prod(shape))
    return (rng.permutation(size).astype(np.float32) - size / 2).reshape(shape).astype(dtype)


@pytest.mark.parametrize("shape,dim,k,largest,dtype", [
    ((40,), 0, 4, True, np.float32),
    ((40,), 0, 5, False, np.float32),
    ((6, 30), 1, 3, True, np.float32),
    ((30, 5), 0, 4, False, np.float32),
    ((4, 50), 1, 6, True, ml_dtypes.bfloat16),
])
def test_approx_top_k_is_the_exact_top_k(tmp_path, shape, dim, k, largest, dtype):
    x = distinct(shape, dtype)
    order = np.argsort(-x.astype(np.float64) if largest else x.astype(np.float64), axis=dim, kind="stable")
    want_i = np.take(order, np.arange(k), axis=dim).astype(np.int32)
    want_v = np.take_along_axis(x, want_i, axis=dim)
    text = approx_top_k_text(x, k, dim, largest)
    for got_v, got_i in (evaluate_text(text, [x]), run_kernels(text, [x], tmp_path)):
        assert_same(got_v, want_v, "values")
        assert_same(got_i, want_i, "indices")


def test_a_custom_call_to_another_target_is_refused_by_name():
    text = ("module @m {\n  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
            "    %0 = stablehlo.custom_call @SomethingElse(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n"
            "    return %0 : tensor<4xf32>\n  }\n}\n")
    with pytest.raises(UnsupportedOpsError, match="custom_call @SomethingElse"):
        import_stablehlo(text)


@pytest.mark.parametrize("groups", [2, 3])
def test_convolution_with_batch_groups(tmp_path, groups):
    """batch_group_count (how XLA writes a weight gradient): the spec's split of the lhs batch and the rhs
    output features into groups, one convolution per group, concatenated along the output features."""
    x = rng.standard_normal((2 * groups, 3, 6, 7)).astype(np.float32)
    w = rng.standard_normal((2 * groups, 3, 2, 3)).astype(np.float32)
    want = np.concatenate([numpy_conv_nchw(x[2 * g:2 * g + 2], w[2 * g:2 * g + 2], (1, 1)) for g in range(groups)],
                          axis=1)
    body = (f"    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], "
            f"window = {{stride = [1, 1], pad = [[0, 0], [0, 0]]}} {{batch_group_count = {groups} : i64, "
            f"feature_group_count = 1 : i64}} : ({tensor(x.shape, x.dtype)}, {tensor(w.shape, w.dtype)}) -> "
            f"{tensor(want.shape, want.dtype)}\n    return %0 : {tensor(want.shape, want.dtype)}")
    text = module_text([x, w], [(want.shape, want.dtype)], body)
    for (got,) in (evaluate_text(text, [x, w]), run_kernels(text, [x, w], tmp_path)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_approx_top_k_without_aggregation_keeps_the_results_size(tmp_path):
    """aggregate_to_topk = false: the results hold more than top_k elements (XLA's size for the recall
    target), all sorted."""
    x = distinct((3, 40), np.float32)
    text = approx_top_k_text(x, 2, 1, True).replace("aggregate_to_topk = true", "aggregate_to_topk = false")
    text = text.replace("3x2xf32", "3x8xf32").replace("3x2xi32", "3x8xi32")
    want_i = np.argsort(-x, axis=1, kind="stable")[:, :8].astype(np.int32)
    got_v, got_i = evaluate_text(text, [x])
    assert_same(got_i, want_i)
    assert_same(got_v, np.take_along_axis(x, want_i, axis=1))


@pytest.mark.parametrize("int_type,result", [(np.int8, ml_dtypes.bfloat16), (np.int16, ml_dtypes.bfloat16),
                                             (np.int8, np.float16), (np.int16, np.float32)])
def test_integer_dot_general_with_a_float_result(tmp_path, int_type, result):
    """JAX's preferred_element_type: integer operands, a float result (the operands converted to it first,
    as XLA does). The bf16 result came out of the kernels as the integer sums' bits."""
    a = rng.integers(-9, 10, (4, 5)).astype(int_type)
    b = rng.integers(-9, 10, (5, 6)).astype(int_type)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32).astype(result)  # exact sums, < 2^8
    body = (f"    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
            f"({tensor(a.shape, a.dtype)}, {tensor(b.shape, b.dtype)}) -> {tensor(want.shape, want.dtype)}\n"
            f"    return %0 : {tensor(want.shape, want.dtype)}")
    text = module_text([a, b], [(want.shape, want.dtype)], body)
    for (got,) in (evaluate_text(text, [a, b]), run_kernels(text, [a, b], tmp_path)):
        assert_same(got, want)
