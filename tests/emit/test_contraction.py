"""dot and convolution kernels, run under the interpreter against numpy and torch."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mlcc.emit.codegen.contraction  # noqa: F401  (registers the dot/convolution lowerings)
from mlcc.emit.codegen.kernel import lower
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

RNG = np.random.default_rng(1)
NP_TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
            "s32": np.int32, "s8": np.int8}
TOLERANCE = {"f16": 1e-3, "bf16": 1.6e-2, "f32": 1e-4, "f64": 1e-10}


def lower_and_run(body: str, inputs: list[np.ndarray], use_gpu_config: bool = False,
                  template: str | None = None) -> np.ndarray:
    module = parse_module("ENTRY %main {\n" + body + "\n}")
    verify_module(module)
    inst = module.entry.root
    kernel = lower(inst, "kernel_under_test")
    if template is not None:
        assert kernel.template == template
    (out,) = run_kernel(kernel, inst, inputs, kernel.gpu if use_gpu_config else None)
    return out


def shape_text(dtype: str, dims, layout=None) -> str:
    layout = tuple(range(len(dims) - 1, -1, -1)) if layout is None else layout
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}}}"


def braces(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def random(dtype: str, dims) -> np.ndarray:
    if dtype in ("s32", "s8"):
        return RNG.integers(-8, 8, dims).astype(NP_TYPES[dtype])
    return RNG.standard_normal(dims).astype(NP_TYPES[dtype])


def assert_close(out: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    if dtype in ("s32", "s8"):
        np.testing.assert_array_equal(out, expected)
    else:
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol)


# ---- dot ---------------------------------------------------------------------

def dot_case(dtype, lhs_dims, rhs_dims, lb, lc, rb, rc, lhs_layout=None, rhs_layout=None, out_layout=None,
             out_dtype=None, use_gpu_config=False):
    """Run dot and compare with an einsum over float64 (or int64) copies of the inputs."""
    lhs, rhs = random(dtype, lhs_dims), random(dtype, rhs_dims)
    letters = iter("abcdefghijklmnop")
    lhs_sub, rhs_sub = [""] * len(lhs_dims), [""] * len(rhs_dims)
    for i, j in zip(lb + lc, rb + rc):
        lhs_sub[i] = rhs_sub[j] = next(letters)
    for i in range(len(lhs_dims)):
        lhs_sub[i] = lhs_sub[i] or next(letters)
    for j in range(len(rhs_dims)):
        rhs_sub[j] = rhs_sub[j] or next(letters)
    lf = [lhs_sub[i] for i in range(len(lhs_dims)) if i not in lb + lc]
    rf = [rhs_sub[j] for j in range(len(rhs_dims)) if j not in rb + rc]
    out_sub = "".join([lhs_sub[i] for i in lb] + lf + rf)
    wide = np.int64 if dtype in ("s32", "s8") else np.float64
    expected = np.einsum(f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{out_sub}", lhs.astype(wide), rhs.astype(wide))
    out_dtype = out_dtype or dtype
    expected = expected.astype(NP_TYPES[out_dtype])
    body = f"""  %a = {shape_text(dtype, lhs_dims, lhs_layout)} parameter(0)
  %b = {shape_text(dtype, rhs_dims, rhs_layout)} parameter(1)
  ROOT %d = {shape_text(out_dtype, expected.shape, out_layout)} dot(%a, %b), lhs_batch_dims={braces(lb)}, lhs_contracting_dims={braces(lc)}, rhs_batch_dims={braces(rb)}, rhs_contracting_dims={braces(rc)}"""
    out = lower_and_run(body, [lhs, rhs], use_gpu_config)
    assert_close(out, expected, out_dtype)


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_dot_sizes_not_multiple_of_tiles(use_gpu_config):
    dot_case("f32", (17, 19), (19, 33), [], [1], [], [0], use_gpu_config=use_gpu_config)


def test_dot_many_tiles_with_gpu_config():
    dot_case("f32", (130, 100), (100, 70), [], [1], [], [0], use_gpu_config=True)


def test_dot_transposed_layouts_everywhere():
    dot_case("f32", (17, 19), (19, 33), [], [1], [], [0], lhs_layout=(0, 1), rhs_layout=(0, 1), out_layout=(0, 1))


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_batched_dot_transposed_operands(use_gpu_config):
    # lhs contracts its middle dim (a transposed A), rhs is stored column-major
    dot_case("f32", (3, 19, 17), (3, 19, 33), [0], [1], [0], [1], lhs_layout=(1, 2, 0), rhs_layout=(1, 2, 0),
             use_gpu_config=use_gpu_config)


def test_dot_batch_dims_in_the_middle_and_two_contracting_dims():
    dot_case("f32", (5, 2, 3, 4), (4, 2, 6, 3), [1], [2, 3], [1], [3, 0], lhs_layout=(0, 3, 2, 1))


def test_dot_size_one_dims():
    dot_case("f32", (1, 5), (5, 1), [], [1], [], [0])
    dot_case("f32", (2, 1, 7), (2, 7, 1), [0], [2], [0], [1])


def test_dot_vector_vector():
    dot_case("f32", (19,), (19,), [], [0], [], [0])


def test_dot_matrix_vector_two_free_dims():
    dot_case("f32", (3, 4, 10), (10,), [], [2], [], [0])


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f64", "s32", "s8"])
def test_dot_dtypes(dtype):
    dot_case(dtype, (40, 96), (96, 24), [], [1], [], [0], rhs_layout=(0, 1))


def test_dot_half_inputs_f32_result():
    dot_case("f16", (2, 33, 40), (2, 40, 20), [0], [2], [0], [1], out_dtype="f32")


@pytest.mark.parametrize("out_dtype", ["bf16", "f16", "f32"])
def test_dot_int8_inputs_float_result(out_dtype):
    # an int32 sum stored as bf16 went straight into the interpreter's raw bf16 bits (2e-39 for 22)
    dot_case("s8", (8, 32), (32, 8), [], [1], [], [0], out_dtype=out_dtype)


# ---- convolution ---------------------------------------------------------------

def conv_reference(x, w, stride, pad_lo, pad_hi, dilation, groups):
    """torch conv on NC<spatial> / OI<spatial> float64 tensors, with asymmetric padding done by F.pad."""
    spatial = x.ndim - 2
    pads = []
    for lo, hi in reversed(list(zip(pad_lo, pad_hi))):
        pads += [lo, hi]
    xt = F.pad(torch.from_numpy(x.astype(np.float64)), pads)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    return fn(xt, torch.from_numpy(w.astype(np.float64)), stride=stride, dilation=dilation, groups=groups).numpy()


def conv_case(dtype, x_ncs, w_ois, stride, pad_lo, pad_hi, dilation, groups, channels_last=False,
              filter_layout=None, use_gpu_config=False, template="conv.py.jinja"):
    x, w = random(dtype, x_ncs), random(dtype, w_ois)
    expected = conv_reference(x, w, stride, pad_lo, pad_hi, dilation, groups)
    n = len(x_ncs) - 2
    digits = "".join(str(i) for i in range(n))
    if channels_last:
        # NHWC input and output, HWIO filter: hand the kernel permuted logical arrays
        x_in, w_in = np.moveaxis(x, 1, -1), np.moveaxis(w, (0, 1), (-1, -2))
        expected = np.moveaxis(expected, 1, -1)
        labels = f"b{digits}f_{digits}io->b{digits}f"
    else:
        x_in, w_in = x, w
        labels = f"bf{digits}_oi{digits}->bf{digits}"
    body = f"""  %x = {shape_text(dtype, x_in.shape)} parameter(0)
  %w = {shape_text(dtype, w_in.shape, filter_layout)} parameter(1)
  ROOT %y = {shape_text(dtype, expected.shape)} convolution(%x, %w), window_strides={braces(stride)}, padding_low={braces(pad_lo)}, padding_high={braces(pad_hi)}, rhs_dilation={braces(dilation)}, feature_group_count={groups}, dim_labels={labels}"""
    out = lower_and_run(body, [x_in, w_in], use_gpu_config, template)
    assert_close(out, expected.astype(NP_TYPES[dtype]), dtype)


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_conv2d_nchw_same_padding(use_gpu_config):
    conv_case("f32", (2, 5, 9, 8), (7, 5, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1, use_gpu_config=use_gpu_config)


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_conv2d_groups_one_matmul_per_group(use_gpu_config):
    # 16 output features per group: a tl.dot tile per group, groups on grid axis 1
    conv_case("f32", (2, 6, 9, 10), (32, 3, 3, 3), (2, 2), (1, 2), (1, 1), (1, 2), 2, use_gpu_config=use_gpu_config)


@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d_narrow_groups_stride2_asymmetric_padding_dilation(channels_last):
    conv_case("f32", (2, 4, 9, 10), (6, 2, 3, 3), (2, 2), (1, 2), (1, 1), (1, 2), 2, channels_last=channels_last,
              template="grouped_conv.py.jinja")


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_conv2d_nhwc_depthwise_multiplier_stride2(use_gpu_config):
    conv_case("f32", (2, 4, 11, 9), (8, 1, 3, 3), (2, 2), (0, 1), (2, 1), (1, 1), 4, channels_last=True,
              use_gpu_config=use_gpu_config, template="grouped_conv.py.jinja")


def test_conv2d_nchw_depthwise_many_channels():
    conv_case("f32", (1, 48, 12, 12), (48, 1, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 48,
              template="grouped_conv.py.jinja")


def test_conv2d_nhwc_groups_dilation():
    conv_case("f32", (1, 6, 10, 10), (9, 2, 3, 2), (1, 2), (2, 0), (0, 1), (2, 1), 3, channels_last=True,
              template="grouped_conv.py.jinja")


def test_conv2d_non_default_filter_layout():
    conv_case("f32", (1, 3, 7, 7), (4, 3, 2, 2), (1, 1), (0, 0), (0, 0), (1, 1), 1, filter_layout=(1, 0, 3, 2))


def test_conv1d_dilated():
    conv_case("f32", (2, 3, 20), (4, 3, 3), (1,), (2,), (2,), (2,), 1)


def test_conv3d_strided():
    conv_case("f32", (1, 2, 6, 7, 5), (3, 2, 2, 3, 2), (2, 1, 2), (1, 1, 0), (0, 1, 1), (1, 1, 1), 1)


def test_conv_1x1_negative_padding_crops():
    conv_case("f32", (1, 3, 6, 6), (5, 3, 1, 1), (1, 1), (-1, 0), (0, -2), (1, 1), 1)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "s32"])
def test_conv_dtypes(dtype):
    conv_case(dtype, (1, 8, 8, 8), (16, 8, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1)


@pytest.mark.parametrize("dtype", ["f16", "s32"])
def test_depthwise_conv_dtypes(dtype):
    conv_case(dtype, (1, 8, 6, 6), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 8, template="grouped_conv.py.jinja")
