"""reduce, argmax/argmin, cumsum and reduce-window kernels, run under the interpreter against numpy/torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mlcc.emit.codegen.pooling  # noqa: F401  (registers the reduce-window lowering)
import mlcc.emit.codegen.reduction  # noqa: F401  (registers the reduce/argmax/argmin/cumsum lowerings)
from mlcc.emit.codegen.kernel import lower
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

RNG = np.random.default_rng(0)


def lower_and_run(body: str, inputs: list[np.ndarray], use_gpu_config: bool = False) -> np.ndarray:
    """Parse an entry body, lower its root, run it (with the GPU launch config if asked) and return the result."""
    module = parse_module("ENTRY %main {\n" + body + "\n}")
    verify_module(module)
    inst = module.entry.root
    kernel = lower(inst, "kernel_under_test")
    (out,) = run_kernel(kernel, inst, inputs, kernel.gpu if use_gpu_config else None)
    return out


def shape_text(dtype: str, dims: tuple[int, ...], layout: tuple[int, ...] | None = None) -> str:
    layout = tuple(range(len(dims) - 1, -1, -1)) if layout is None else layout
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}}}"


def random(dtype: str, dims: tuple[int, ...]) -> np.ndarray:
    if dtype == "pred":
        return RNG.random(dims) < 0.5
    np_type = numpy_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        return RNG.integers(max(info.min, -1000), min(info.max, 1000), dims, endpoint=True).astype(np_type)
    return RNG.standard_normal(dims).astype(np_type)


# ---- reduce ------------------------------------------------------------------

def reduce_reference(x: np.ndarray, dims: tuple[int, ...], kind: str) -> np.ndarray:
    if x.dtype.name in ("float16", "bfloat16", "float32"):
        acc = x.astype(np.float32)   # halves and f32 accumulate in f32
    else:
        acc = x
    ufunc = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
             "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
    if x.dtype == np.bool_:
        ufunc = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[kind]
    out = ufunc.reduce(acc, axis=dims, dtype=acc.dtype) if x.dtype != np.bool_ else ufunc.reduce(acc, axis=dims)
    return np.asarray(out).astype(x.dtype)


REDUCE_CASES = [
    # dtype, dims, layout, reduced dims, kind
    ("f32", (5, 7, 9), (0, 2, 1), (0, 2), "add"),
    ("f32", (33, 65), (0, 1), (0,), "maximum"),
    ("f32", (6, 300), (1, 0), (1,), "minimum"),
    ("f32", (4, 5, 6), (2, 1, 0), (0, 1, 2), "add"),
    ("f32", (1, 9, 1), (2, 1, 0), (1,), "add"),
    ("f32", (4, 7, 5), (1, 2, 0), (1,), "multiply"),
    ("f64", (3, 50), (0, 1), (1,), "add"),
    ("f16", (64, 129), (1, 0), (1,), "add"),
    ("bf16", (3, 1000), (1, 0), (1,), "add"),
    ("f16", (17, 3, 11), (0, 1, 2), (0, 2), "maximum"),
    ("s32", (7, 13), (0, 1), (0,), "add"),
    ("s32", (6, 20), (1, 0), (1,), "and"),
    ("s32", (6, 20), (1, 0), (1,), "or"),
    ("s32", (6, 2000), (0, 1), (1,), "xor"),
    ("s8", (9, 31), (1, 0), (1,), "maximum"),
    ("s8", (9, 31), (1, 0), (0,), "minimum"),
    ("u8", (5, 40), (1, 0), (1,), "add"),
    ("s64", (4, 10), (1, 0), (1,), "multiply"),
    ("pred", (5, 8), (1, 0), (1,), "and"),
    ("pred", (5, 8), (0, 1), (1,), "or"),
    ("pred", (5, 8), (1, 0), (0,), "xor"),
]


@pytest.mark.parametrize("dtype,dims,layout,reduced,kind", REDUCE_CASES)
def test_reduce(dtype, dims, layout, reduced, kind):
    x = random(dtype, dims)
    if kind == "multiply" and dtype.startswith("f"):
        x = RNG.uniform(0.5, 1.5, dims).astype(x.dtype)
    if kind == "multiply" and dtype.startswith("s"):
        x = RNG.integers(-3, 4, dims).astype(x.dtype)
    out_dims = tuple(d for i, d in enumerate(dims) if i not in reduced)
    body = f"""  %x = {shape_text(dtype, dims, layout)} parameter(0)
  ROOT %r = {shape_text(dtype, out_dims)} reduce(%x), dimensions={{{','.join(map(str, reduced))}}}, kind={kind}"""
    expected = reduce_reference(x, reduced, kind)
    tol = {"f16": 1e-3, "bf16": 1.6e-2}.get(dtype, 1e-5)
    for use_gpu_config in (False, True):
        out = lower_and_run(body, [x], use_gpu_config)
        if dtype.startswith(("f", "b")):
            np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(out, expected)


def test_reduce_max_propagates_nan_and_sees_negative_infinity():
    x = RNG.standard_normal((4, 300)).astype(np.float32)
    x[1, 257] = np.nan
    x[2, :] = -np.inf
    body = """  %x = f32[4,300]{1,0} parameter(0)
  ROOT %r = f32[4]{0} reduce(%x), dimensions={1}, kind=maximum"""
    out = lower_and_run(body, [x])
    np.testing.assert_array_equal(out, np.max(x, axis=1))


def test_reduce_output_layout_is_respected():
    x = random("f32", (6, 4, 5))
    body = """  %x = f32[6,4,5]{2,1,0} parameter(0)
  ROOT %r = f32[6,5]{0,1} reduce(%x), dimensions={1}, kind=add"""
    np.testing.assert_allclose(lower_and_run(body, [x]), x.sum(axis=1), rtol=1e-5, atol=1e-5)


# ---- argmax / argmin ---------------------------------------------------------

def arg_reference(x: np.ndarray, axis: int, is_max: bool, last: bool) -> np.ndarray:
    fn = np.argmax if is_max else np.argmin
    if not last:
        return fn(x, axis=axis)
    n = x.shape[axis]
    return n - 1 - fn(np.flip(x, axis=axis), axis=axis)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("last", [False, True])
def test_argmax_argmin_ties_and_nan(op, last):
    x = RNG.integers(0, 5, (6, 700)).astype(np.float32)   # many ties
    x[3, 11] = np.nan
    x[3, 600] = np.nan
    body = f"""  %x = f32[6,700]{{0,1}} parameter(0)
  ROOT %r = s64[6]{{0}} {op}(%x), dimension=1, select_last_index={'true' if last else 'false'}"""
    expected = arg_reference(x, 1, op == "argmax", last)
    for use_gpu_config in (False, True):
        np.testing.assert_array_equal(lower_and_run(body, [x], use_gpu_config), expected)


@pytest.mark.parametrize("dtype", ["s32", "f16"])
def test_argmax_over_a_non_minor_dim(dtype):
    x = random(dtype, (9, 4, 7))
    body = f"""  %x = {shape_text(dtype, (9, 4, 7), (1, 2, 0))} parameter(0)
  ROOT %r = s64[4,7]{{0,1}} argmax(%x), dimension=0"""
    np.testing.assert_array_equal(lower_and_run(body, [x]), np.argmax(x, axis=0))


def test_argmin_all_negative_infinity_row():
    x = np.full((2, 5), -np.inf, np.float32)
    x[1, 3] = -1.0
    body = """  %x = f32[2,5]{1,0} parameter(0)
  ROOT %r = s64[2]{0} argmax(%x), dimension=1"""
    np.testing.assert_array_equal(lower_and_run(body, [x]), [0, 3])


# ---- cumsum ------------------------------------------------------------------

def cumsum_reference(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    acc_type = np.float32 if x.dtype.name in ("float16", "bfloat16", "float32") else x.dtype
    y = np.flip(x, axis) if reverse else x
    out = np.cumsum(y.astype(acc_type), axis=axis, dtype=acc_type)
    if exclusive:
        out = out - y.astype(acc_type)
    return (np.flip(out, axis) if reverse else out).astype(x.dtype)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_flags(exclusive, reverse):
    x = random("f32", (5, 1100))
    body = f"""  %x = f32[5,1100]{{0,1}} parameter(0)
  ROOT %r = f32[5,1100]{{1,0}} cumsum(%x), dimension=1, exclusive={str(exclusive).lower()}, reverse={str(reverse).lower()}"""
    expected = cumsum_reference(x, 1, exclusive, reverse)
    for use_gpu_config in (False, True):
        np.testing.assert_allclose(lower_and_run(body, [x], use_gpu_config), expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["s32", "f16"])
def test_cumsum_over_a_major_dim(dtype):
    x = random(dtype, (30, 3, 4))
    body = f"""  %x = {shape_text(dtype, (30, 3, 4), (2, 0, 1))} parameter(0)
  ROOT %r = {shape_text(dtype, (30, 3, 4))} cumsum(%x), dimension=0"""
    out = lower_and_run(body, [x])
    expected = cumsum_reference(x, 0, False, False)
    if dtype == "s32":
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out.astype(np.float32), expected.astype(np.float32), rtol=1e-3, atol=1e-2)


# ---- reduce-window -----------------------------------------------------------

def braces(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def window_body(dtype, in_dims, out_dims, kind, window, strides, lo, hi, layout=None, extra=""):
    return f"""  %x = {shape_text(dtype, in_dims, layout)} parameter(0)
  ROOT %r = {shape_text(dtype, out_dims)} reduce-window(%x), kind={kind}, window_dimensions={braces(window)}, \
window_strides={braces(strides)}, padding_low={braces(lo)}, padding_high={braces(hi)}{extra}"""


def test_max_pool_2d_nchw_padded():
    x = random("f32", (2, 3, 9, 10))
    body = window_body("f32", (2, 3, 9, 10), (2, 3, 5, 5), "maximum", (1, 1, 3, 3), (1, 1, 2, 2),
                       (0, 0, 1, 1), (0, 0, 1, 1))
    expected = F.max_pool2d(torch.from_numpy(x), 3, stride=2, padding=1).numpy()
    for use_gpu_config in (False, True):
        np.testing.assert_array_equal(lower_and_run(body, [x], use_gpu_config), expected)


def test_max_pool_2d_nhwc_ceil_mode_dilated():
    x = random("f16", (2, 11, 10, 4))
    # ceil_mode: one more output per spatial dim, realized as extra padding_high
    expected = F.max_pool2d(torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2), 2, stride=2, dilation=2,
                            ceil_mode=True).permute(0, 2, 3, 1).numpy()
    out_dims = (2,) + expected.shape[1:3] + (4,)
    body = window_body("f16", (2, 11, 10, 4), out_dims, "maximum", (1, 2, 2, 1), (1, 2, 2, 1),
                       (0, 0, 0, 0), (0, 1, 1, 0), layout=(3, 2, 1, 0), extra=", window_dilations={1,2,2,1}")
    np.testing.assert_array_equal(lower_and_run(body, [x]).astype(np.float32), expected)


@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool_2d_padding_count(count_include_pad):
    x = random("f32", (2, 3, 8, 7))
    expected = F.avg_pool2d(torch.from_numpy(x), 3, stride=2, padding=1,
                            count_include_pad=count_include_pad).numpy()
    body = window_body("f32", (2, 3, 8, 7), expected.shape, "avg", (1, 1, 3, 3), (1, 1, 2, 2),
                       (0, 0, 1, 1), (0, 0, 1, 1), layout=(1, 3, 2, 0),
                       extra=f", count_include_pad={str(count_include_pad).lower()}")
    np.testing.assert_allclose(lower_and_run(body, [x]), expected, rtol=1e-5, atol=1e-6)


def test_avg_pool_ceil_mode_excludes_the_overhang():
    x = random("f32", (1, 2, 10, 10))
    expected = F.avg_pool2d(torch.from_numpy(x), 3, stride=2, ceil_mode=True, count_include_pad=False).numpy()
    body = window_body("f32", (1, 2, 10, 10), expected.shape, "avg", (1, 1, 3, 3), (1, 1, 2, 2),
                       (0, 0, 0, 0), (0, 0, 1, 1))
    np.testing.assert_allclose(lower_and_run(body, [x]), expected, rtol=1e-5, atol=1e-6)


def test_max_pool_3d_and_min_window():
    x = random("f32", (1, 2, 6, 7, 5))
    expected = F.max_pool3d(torch.from_numpy(x), (2, 3, 2), stride=(2, 2, 1), padding=(1, 1, 0)).numpy()
    body = window_body("f32", x.shape, expected.shape, "maximum", (1, 1, 2, 3, 2), (1, 1, 2, 2, 1),
                       (0, 0, 1, 1, 0), (0, 0, 1, 1, 0))
    np.testing.assert_array_equal(lower_and_run(body, [x]), expected)
    neg = -x
    body = window_body("f32", x.shape, expected.shape, "minimum", (1, 1, 2, 3, 2), (1, 1, 2, 2, 1),
                       (0, 0, 1, 1, 0), (0, 0, 1, 1, 0))
    np.testing.assert_array_equal(lower_and_run(body, [neg]), -expected)


def test_sum_window_1d_integer():
    x = random("s32", (3, 20))
    # window 4, stride 3, padding 2 low / 1 high, along dim 1
    padded = np.pad(x, ((0, 0), (2, 1)))
    expected = np.stack([padded[:, i:i + 4].sum(axis=1) for i in range(0, padded.shape[1] - 3, 3)], axis=1)
    body = window_body("s32", (3, 20), expected.shape, "add", (1, 4), (1, 3), (0, 2), (0, 1), layout=(0, 1))
    np.testing.assert_array_equal(lower_and_run(body, [x]), expected.astype(np.int32))
