"""softmax, layer-norm, rms-norm, batch-norm-inference and attention kernels (under the interpreter,
against torch), and ahead-of-time compilation of the heavy kernels for GPU targets."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mlcc.emit.codegen.attention  # noqa: F401  (registers the attention lowering)
import mlcc.emit.codegen.contraction  # noqa: F401  (registers dot/convolution, compiled below)
import mlcc.emit.codegen.normalization  # noqa: F401  (registers softmax/layer-norm/rms-norm/batch-norm-inference)
from mlcc.emit.codegen.kernel import lower
from mlcc.emit.target.aot import compile_kernel
from mlcc.emit.target.targets import parse_target
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

RNG = np.random.default_rng(2)
NP_TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
            "pred": np.bool_}
TOLERANCE = {"f16": 1e-3, "bf16": 1.6e-2, "f32": 1e-4, "f64": 1e-10}


def lower_and_run(body: str, inputs: list[np.ndarray], use_gpu_config: bool = False) -> np.ndarray:
    module = parse_module("ENTRY %main {\n" + body + "\n}")
    verify_module(module)
    inst = module.entry.root
    kernel = lower(inst, "kernel_under_test")
    (out,) = run_kernel(kernel, inst, inputs, kernel.gpu if use_gpu_config else None)
    return out


def shape_text(dtype: str, dims, layout=None) -> str:
    layout = tuple(range(len(dims) - 1, -1, -1)) if layout is None else layout
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}}}"


def random(dtype: str, dims, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(dims) * scale).astype(NP_TYPES[dtype])


def wide(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.astype(np.float64))


def assert_close(out: np.ndarray, expected, dtype: str, tol: float | None = None) -> None:
    expected = expected.numpy() if isinstance(expected, torch.Tensor) else expected
    tol = TOLERANCE[dtype] if tol is None else tol
    np.testing.assert_allclose(out.astype(np.float64), np.asarray(expected, np.float64), rtol=tol, atol=tol)


# ---- softmax -----------------------------------------------------------------

@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_softmax_non_minor_dim_with_layouts(log, use_gpu_config):
    x = random("f32", (6, 37, 5), 3.0)
    x[2, 5, 1] = -np.inf
    body = f"""  %x = f32[6,37,5]{{0,1,2}} parameter(0)
  ROOT %r = f32[6,37,5]{{1,0,2}} softmax(%x), dimension=1, log={str(log).lower()}"""
    fn = torch.log_softmax if log else torch.softmax
    assert_close(lower_and_run(body, [x], use_gpu_config), fn(wide(x), 1), "f32")


@pytest.mark.parametrize("log", [False, True])
def test_softmax_long_rows_in_chunks(log):
    x = random("f32", (3, 5000), 4.0)
    body = f"""  %x = f32[3,5000]{{1,0}} parameter(0)
  ROOT %r = f32[3,5000]{{1,0}} softmax(%x), dimension=1, log={str(log).lower()}"""
    fn = torch.log_softmax if log else torch.softmax
    # the GPU config walks a 5000-element row in 4096-element chunks
    assert_close(lower_and_run(body, [x], use_gpu_config=True), fn(wide(x), 1), "f32")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_softmax_half_types(dtype):
    x = random(dtype, (16, 300), 2.0)
    body = f"""  %x = {shape_text(dtype, (16, 300))} parameter(0)
  ROOT %r = {shape_text(dtype, (16, 300))} softmax(%x), dimension=1"""
    assert_close(lower_and_run(body, [x]), torch.softmax(wide(x), 1), dtype)


# ---- layer-norm / rms-norm -------------------------------------------------------

@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_layer_norm_two_normalized_dims_with_layouts(use_gpu_config):
    x, s, b = random("f32", (4, 3, 20), 2.0) + 1.5, random("f32", (3, 20)), random("f32", (3, 20))
    body = """  %x = f32[4,3,20]{1,2,0} parameter(0)
  %s = f32[3,20]{0,1} parameter(1)
  %b = f32[3,20]{1,0} parameter(2)
  ROOT %r = f32[4,3,20]{0,2,1} layer-norm(%x, %s, %b), dimensions={1,2}, epsilon=1e-5"""
    expected = F.layer_norm(wide(x), (3, 20), wide(s), wide(b), 1e-5)
    assert_close(lower_and_run(body, [x, s, b], use_gpu_config), expected, "f32")


def test_layer_norm_long_rows_in_chunks():
    x, s, b = random("f32", (2, 5000)) + 3.0, random("f32", (5000,)), random("f32", (5000,))
    body = """  %x = f32[2,5000]{1,0} parameter(0)
  %s = f32[5000]{0} parameter(1)
  %b = f32[5000]{0} parameter(2)
  ROOT %r = f32[2,5000]{1,0} layer-norm(%x, %s, %b), dimensions={1}, epsilon=1e-6"""
    expected = F.layer_norm(wide(x), (5000,), wide(s), wide(b), 1e-6)
    assert_close(lower_and_run(body, [x, s, b], use_gpu_config=True), expected, "f32")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_layer_norm_half_types(dtype):
    x, s, b = random(dtype, (8, 96)), random(dtype, (96,)), random(dtype, (96,))
    body = f"""  %x = {shape_text(dtype, (8, 96))} parameter(0)
  %s = {shape_text(dtype, (96,))} parameter(1)
  %b = {shape_text(dtype, (96,))} parameter(2)
  ROOT %r = {shape_text(dtype, (8, 96))} layer-norm(%x, %s, %b), dimensions={{1}}, epsilon=1e-5"""
    expected = F.layer_norm(wide(x), (96,), wide(s), wide(b), 1e-5)
    # f16 outputs of magnitude ~3 round by ~1e-3 themselves
    assert_close(lower_and_run(body, [x, s, b]), expected, dtype, 2e-3 if dtype == "f16" else None)


def rms_reference(x: np.ndarray, s: np.ndarray, eps: float) -> torch.Tensor:
    xt = wide(x)
    return xt / torch.sqrt((xt * xt).mean(-1, keepdim=True) + eps) * wide(s)


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_rms_norm(use_gpu_config):
    x, s = random("f32", (3, 4500)), random("f32", (4500,))
    body = """  %x = f32[3,4500]{0,1} parameter(0)
  %s = f32[4500]{0} parameter(1)
  ROOT %r = f32[3,4500]{1,0} rms-norm(%x, %s), dimensions={1}, epsilon=1e-6"""
    assert_close(lower_and_run(body, [x, s], use_gpu_config), rms_reference(x, s, 1e-6), "f32")


def test_rms_norm_bf16():
    x, s = random("bf16", (5, 64)), random("bf16", (64,))
    body = """  %x = bf16[5,64]{1,0} parameter(0)
  %s = bf16[64]{0} parameter(1)
  ROOT %r = bf16[5,64]{1,0} rms-norm(%x, %s), dimensions={1}, epsilon=1e-6"""
    assert_close(lower_and_run(body, [x, s]), rms_reference(x, s, 1e-6), "bf16")


def test_f64_softmax_and_layer_norm_keep_f64_statistics():
    x, s, b = random("f64", (4, 100)) + 1e3, random("f64", (100,)), random("f64", (100,))
    body = """  %x = f64[4,100]{0,1} parameter(0)
  %s = f64[100]{0} parameter(1)
  %b = f64[100]{0} parameter(2)
  ROOT %r = f64[4,100]{1,0} layer-norm(%x, %s, %b), dimensions={1}, epsilon=1e-5"""
    assert_close(lower_and_run(body, [x, s, b]), F.layer_norm(wide(x), (100,), wide(s), wide(b), 1e-5), "f64")
    body = """  %x = f64[4,100]{1,0} parameter(0)
  ROOT %r = f64[4,100]{1,0} softmax(%x), dimension=1"""
    assert_close(lower_and_run(body, [x - 1e3]), torch.softmax(wide(x - 1e3), 1), "f64")


# ---- batch-norm-inference ------------------------------------------------------

@pytest.mark.parametrize("dtype,dims,feature,layout", [
    ("f32", (2, 3, 4, 5), 1, (1, 3, 2, 0)),
    ("f32", (2, 4, 5, 3), 3, (3, 2, 1, 0)),
    ("f16", (3, 6, 7), 1, (2, 1, 0)),
])
def test_batch_norm_inference(dtype, dims, feature, layout):
    c = dims[feature]
    x = random(dtype, dims)
    scale, offset, mean = random(dtype, (c,)), random(dtype, (c,)), random(dtype, (c,))
    variance = RNG.uniform(0.5, 2.0, (c,)).astype(NP_TYPES[dtype])
    p = shape_text(dtype, (c,))
    body = f"""  %x = {shape_text(dtype, dims, layout)} parameter(0)
  %s = {p} parameter(1)
  %o = {p} parameter(2)
  %m = {p} parameter(3)
  %v = {p} parameter(4)
  ROOT %r = {shape_text(dtype, dims)} batch-norm-inference(%x, %s, %o, %m, %v), epsilon=0.001, feature_index={feature}"""
    channels_second = wide(np.moveaxis(x, feature, 1))
    expected = F.batch_norm(channels_second, wide(mean), wide(variance), wide(scale), wide(offset),
                            training=False, eps=1e-3)
    assert_close(lower_and_run(body, [x, scale, offset, mean, variance]), np.moveaxis(expected.numpy(), 1, feature),
                 dtype, 2e-3 if dtype == "f16" else None)


# ---- attention -------------------------------------------------------------------

def attention_reference(q, k, v, scale, causal, mask=None):
    """SDPA in float64 on heads repeated for grouped-query; rows with no key kept are zero."""
    qt, kt, vt = wide(q), wide(k), wide(v)
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        kt, vt = kt.repeat_interleave(group, -3), vt.repeat_interleave(group, -3)
    sq, sk = q.shape[-2], k.shape[-2]
    keep = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        keep = torch.from_numpy(np.tril(np.ones((sq, sk), bool), sk - sq))
    bias = torch.zeros(sq, sk, dtype=torch.float64)
    if mask is not None and mask.dtype == np.bool_:
        keep = keep & torch.from_numpy(mask)
    elif mask is not None:
        bias = wide(mask)
    bias = torch.where(keep, bias, -torch.inf)
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias, scale=scale)
    dead = torch.isneginf(bias + torch.zeros(q.shape[:-1] + (sk,), dtype=torch.float64)).all(-1, keepdim=True)
    return torch.where(dead, 0.0, out)


def masked_value_reference(q, k, v, scale, causal, mask, masked):
    """The model's own arithmetic: masked scores get + masked (finite), so a query whose keys are all masked
    takes the softmax of every score plus that value, not zeros."""
    qt, kt, vt = wide(q), wide(k), wide(v)
    sq, sk = q.shape[-2], k.shape[-2]
    keep = torch.from_numpy(mask) & (torch.from_numpy(np.tril(np.ones((sq, sk), bool), sk - sq)) if causal else True)
    scores = qt @ kt.transpose(-1, -2) * scale + torch.where(keep, 0.0, masked)
    return torch.softmax(scores, -1) @ vt


def attention_case(dtype, q_dims, k_dims, v_dims, scale, causal, mask=None, layouts=(None, None, None, None),
                   use_gpu_config=False, tol=None, masked_value=None):
    q, k, v = random(dtype, q_dims), random(dtype, k_dims), random(dtype, v_dims)
    out_dims = q_dims[:-1] + (v_dims[-1],)
    mask_param = ""
    operands = "%q, %k, %v"
    if mask is not None:
        mask_dtype = {np.dtype(np.bool_): "pred", np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}[mask.dtype]
        mask_param = f"\n  %m = {shape_text(mask_dtype, mask.shape, layouts[3])} parameter(3)"
        operands += ", %m"
    body = f"""  %q = {shape_text(dtype, q_dims, layouts[0])} parameter(0)
  %k = {shape_text(dtype, k_dims, layouts[1])} parameter(1)
  %v = {shape_text(dtype, v_dims, layouts[2])} parameter(2){mask_param}
  ROOT %a = {shape_text(dtype, out_dims)} attention({operands}), scale={scale}, causal={str(causal).lower()}"""
    if masked_value is not None:
        body += f", masked_value={masked_value!r}"
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    out = lower_and_run(body, inputs, use_gpu_config)
    expected = (attention_reference(q, k, v, scale, causal, mask) if masked_value is None
                else masked_value_reference(q, k, v, scale, causal, mask, masked_value))
    assert_close(out, expected, dtype, tol)
    return out


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_attention_plain(use_gpu_config):
    attention_case("f32", (2, 3, 20, 16), (2, 3, 70, 16), (2, 3, 70, 16), 0.25, False,
                   use_gpu_config=use_gpu_config)


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_attention_causal_grouped_query_bool_mask_layouts(use_gpu_config):
    mask = RNG.random((19, 45)) < 0.7
    # k stored as [B, S, H, D], v with its head dim major, mask column-major
    attention_case("f32", (2, 4, 19, 16), (2, 2, 45, 16), (2, 2, 45, 8), 0.3, True, mask,
                   layouts=(None, (3, 1, 2, 0), (2, 3, 1, 0), (0, 1)), use_gpu_config=use_gpu_config)


def test_attention_causal_more_queries_than_keys_gives_zero_rows():
    out = attention_case("f32", (1, 2, 30, 8), (1, 2, 12, 8), (1, 2, 12, 8), 0.5, True)
    assert np.all(out[:, :, :18] == 0)


def test_attention_additive_mask_broadcast_over_heads_with_dead_row():
    mask = RNG.standard_normal((2, 1, 24, 33)).astype(np.float32)
    mask[1, 0, 5, :] = -np.inf
    out = attention_case("f32", (2, 3, 24, 16), (2, 3, 33, 16), (2, 3, 33, 16), 0.25, False, mask)
    assert np.all(out[1, :, 5] == 0)


@pytest.mark.parametrize("use_gpu_config", [False, True])
def test_attention_rows_masked_whole_by_a_finite_value_average_every_key(use_gpu_config):
    # transformers masks by adding finfo.min: queries 0..2 and 5 keep no key, so the model gives them the
    # softmax of every score plus finfo.min (the mean of all 150 v rows, keys past the causal limit included,
    # which the first pass skips), over several key blocks
    mask = RNG.random((40, 150)) < 0.8
    mask[:3, :] = False
    mask[5, :] = False
    out = attention_case("f32", (1, 2, 40, 16), (1, 2, 150, 16), (1, 2, 150, 16), 0.25, True, mask,
                         use_gpu_config=use_gpu_config, masked_value=float(np.finfo(np.float32).min))
    assert not np.all(out[:, :, :3] == 0)


def test_attention_f64():
    attention_case("f64", (2, 20, 16), (2, 30, 16), (2, 30, 8), 0.25, True)


def test_attention_rank3_and_rank2():
    attention_case("f32", (4, 10, 12), (2, 17, 12), (2, 17, 20), 0.2, True)
    attention_case("f32", (10, 12), (17, 12), (17, 5), 0.2, False, RNG.random((10, 17)) < 0.5)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_attention_half_types(dtype):
    mask = RNG.standard_normal((1, 1, 1, 40)).astype(np.float16 if dtype == "f16" else np.float32)
    attention_case(dtype, (1, 4, 32, 32), (1, 2, 40, 32), (1, 2, 40, 32), 32 ** -0.5, True, mask,
                   tol=2e-3 if dtype == "f16" else None)


# ---- ahead-of-time compilation -------------------------------------------------------

AOT_CASES = {
    "matmul": """  %a = f16[512,256]{1,0} parameter(0)
  %b = f16[256,384]{0,1} parameter(1)
  ROOT %d = f16[512,384]{1,0} dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}""",
    "conv": """  %x = f32[8,56,56,64]{3,2,1,0} parameter(0)
  %w = f32[3,3,64,64]{3,2,1,0} parameter(1)
  ROOT %y = f32[8,28,28,64]{3,2,1,0} convolution(%x, %w), window_strides={2,2}, padding_low={0,0}, padding_high={1,1}, rhs_dilation={1,1}, feature_group_count=1, dim_labels=b01f_01io->b01f""",
    "layer_norm": """  %x = bf16[64,768]{1,0} parameter(0)
  %s = bf16[768]{0} parameter(1)
  %b = bf16[768]{0} parameter(2)
  ROOT %r = bf16[64,768]{1,0} layer-norm(%x, %s, %b), dimensions={1}, epsilon=1e-5""",
    "attention": """  %q = f16[2,8,128,64]{3,2,1,0} parameter(0)
  %k = f16[2,2,256,64]{3,2,1,0} parameter(1)
  %v = f16[2,2,256,64]{3,2,1,0} parameter(2)
  %m = pred[2,1,128,256]{3,2,1,0} parameter(3)
  ROOT %a = f16[2,8,128,64]{3,2,1,0} attention(%q, %k, %v, %m), scale=0.125, causal=true""",
}


def compile_for(name: str, target: str) -> bytes:
    module = parse_module("ENTRY %main {\n" + AOT_CASES[name] + "\n}")
    verify_module(module)
    kernel = lower(module.entry.root, f"aot_{name}")
    return compile_kernel(kernel, parse_target(target)).data


def test_aot_compile_for_sm90():
    for name in AOT_CASES:
        assert compile_for(name, "sm_90")[:4] == b"\x7fELF", name


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_aot_compile_sweep(target):
    for name in AOT_CASES:
        assert compile_for(name, target)[:4] == b"\x7fELF", name


@pytest.mark.slow
def test_aot_compile_int64_indexing_for_huge_tensors():
    # 2^33 elements: offsets no longer fit in int32, so the kernels index in int64
    body = """  %a = f16[4,65536,8192]{2,1,0} parameter(0)
  %b = f16[4,8192,256]{2,1,0} parameter(1)
  ROOT %d = f16[4,65536,256]{2,1,0} dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, \
rhs_contracting_dims={1}"""
    kernel = lower(parse_module("ENTRY %main {\n" + body + "\n}").entry.root, "aot_huge_matmul")
    assert ".to(tl.int64)" in kernel.source
    assert compile_kernel(kernel, parse_target("sm_90")).data[:4] == b"\x7fELF"
