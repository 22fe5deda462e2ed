"""Loop kernels (mlcc/emit/codegen/loop.py): every elementwise and data-movement op, and loop fusions,
run under Triton's interpreter and checked against numpy (and the numpy evaluator, which
defines what each op means)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mlcc.emit.codegen import loop
from mlcc.emit.codegen.kernel import LaunchConfig, lower
from mlcc.errors import UnsupportedError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate_computation
from mlcc.hlo.ir import Instruction
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

# The interpreter runs numpy on masked-off and special lanes too (log of a negative, 0 / 0...).
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BF16 = np.dtype(ml_dtypes.bfloat16)
RTOL = {"f64": 1e-12, "f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}
FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-3, -7.25, 100.0, np.inf, -np.inf, np.nan]


def entry(text: str) -> Instruction:
    """The root of a module given as IR text (verified)."""
    module = parse_module(text)
    verify_module(module)
    return module.entry.root


def run(inst: Instruction, inputs: list[np.ndarray], config: LaunchConfig | None = None) -> list[np.ndarray]:
    return run_kernel(lower(inst, "kernel"), inst, inputs, config)


def reference(inst: Instruction, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The evaluator's value of a fusion's computation, or of the op alone."""
    if inst.opcode == "fusion":
        out = evaluate_computation(inst.called, inputs, {})
    else:
        out = evaluate_computation(loop.single_op_computation(inst), inputs, {})
    return list(out) if isinstance(out, tuple) else [out]


def assert_same(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if dtype == "bits" and got.dtype != np.bool_:
        unsigned = np.dtype(f"u{got.dtype.itemsize}")
        np.testing.assert_array_equal(got.view(unsigned), want.view(unsigned))
    elif dtype in RTOL:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL[dtype],
                                   atol=RTOL[dtype] * 1e-2, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def random(dtype: str, dims: tuple[int, ...], rng: np.random.Generator, scale: float = 3.0,
           low: int = -100, high: int = 100) -> np.ndarray:
    """Values of dtype, floats with the special values mixed in."""
    nd = numpy_dtype(dtype)
    n = int(np.prod(dims))
    if dtype == "pred":
        return rng.random(dims) < 0.5
    if nd.kind == "f" or nd == BF16:
        x = (rng.standard_normal(n) * scale).astype(np.float64)
        k = min(n, len(FLOAT_SPECIALS))
        x[rng.choice(n, k, replace=False)] = FLOAT_SPECIALS[:k]
        return x.astype(nd).reshape(dims)
    info = np.iinfo(nd)
    x = rng.integers(max(low, info.min), min(high, info.max), n, endpoint=True).astype(nd)
    extremes = np.array([info.min, info.max, 0], dtype=nd)[:n]
    x[:len(extremes)] = extremes
    return rng.permutation(x).reshape(dims)


# ---------------------------------------------------------------- elementwise sweep

FLOATS = ("f32", "f16", "bf16", "f64")
SIGNED = ("s8", "s32", "s64")
UNSIGNED = ("u8", "u16", "u32", "u64")
FLOAT_UNARY = ("exp", "expm1", "log", "log-plus-one", "sqrt", "rsqrt", "cbrt", "tanh", "erf", "logistic",
               "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
               "floor", "ceil", "round-nearest-even", "round-nearest-afz", "reciprocal", "softplus", "softsign", "mish",
               "abs", "negate", "sign", "relu", "is-finite", "is-nan", "is-inf")
INT_UNARY = ("abs", "negate", "sign", "relu", "not", "popcnt", "floor", "round-nearest-even", "is-finite")
FLOAT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "fmod", "power", "maximum", "minimum",
                "atan2")
INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "fmod", "power", "maximum", "minimum",
              "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical")


def _unary_cases():
    for op in FLOAT_UNARY:
        for dt in (("f32", "f16", "bf16", "f64") if op in ("tanh", "erf", "exp", "atan", "sign", "mish") else ("f32",)):
            yield op, dt
    for op in ("floor", "round-nearest-even", "sqrt", "cbrt", "expm1", "log-plus-one", "asinh", "sinh"):
        yield op, "f64"
    for op in INT_UNARY:
        for dt in ("s8", "s32", "u16", "u64"):
            yield op, dt
    yield "not", "pred"
    yield "popcnt", "s64"


@pytest.mark.parametrize("op,dtype", list(_unary_cases()))
def test_unary(op, dtype):
    result = "pred" if op.startswith("is-") else dtype
    inst = entry(f"""ENTRY %main {{
      %x = {dtype}[5,23]{{1,0}} parameter(0)
      ROOT %r = {result}[5,23]{{0,1}} {op}(%x)
    }}""")
    x = random(dtype, (5, 23), np.random.default_rng(len(op)))
    (got,) = run(inst, [x])
    assert_same(got, reference(inst, [x])[0], result)


def _binary_cases():
    for op in FLOAT_BINARY:
        for dt in (("f32", "f16", "bf16", "f64") if op in ("add", "divide", "maximum", "power") else ("f32", "f64")):
            yield op, dt
    for op in INT_BINARY:
        for dt in ("s8", "s32", "u8", "u64") if op not in ("divide", "remainder") else SIGNED + UNSIGNED:
            yield op, dt
    for op in ("add", "multiply", "maximum", "minimum", "and", "or", "xor"):
        yield op, "pred"


@pytest.mark.parametrize("op,dtype", list(_binary_cases()))
def test_binary(op, dtype):
    inst = entry(f"""ENTRY %main {{
      %x = {dtype}[7,19]{{0,1}} parameter(0)
      %y = {dtype}[7,19]{{1,0}} parameter(1)
      ROOT %r = {dtype}[7,19]{{1,0}} {op}(%x, %y)
    }}""")
    rng = np.random.default_rng(len(op) + len(dtype))
    x = random(dtype, (7, 19), rng)
    if op.startswith("shift"):
        y = random(dtype, (7, 19), rng, low=-2, high=numpy_dtype(dtype).itemsize * 8 + 2)
    elif op == "power" and dtype not in FLOATS:
        x = random(dtype, (7, 19), rng, low=-3, high=3)
        y = random(dtype, (7, 19), rng, low=-2, high=5)
    elif op == "power":
        y = np.where(rng.random((7, 19)) < 0.5, rng.integers(-3, 4, (7, 19)), rng.standard_normal((7, 19)))
        y = y.astype(numpy_dtype(dtype))
    else:
        y = random(dtype, (7, 19), rng)
    if dtype not in FLOATS and dtype != "pred" and op in ("divide", "remainder", "fmod"):
        y.flat[:4] = [0, 1, 2, 3] if dtype.startswith("u") else [0, -1, -3, 3]
        x.flat[:4] = [7, np.iinfo(x.dtype).min, -7 if dtype.startswith("s") else 7, 7]
    (got,) = run(inst, [x, y])
    assert_same(got, reference(inst, [x, y])[0], dtype)


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
@pytest.mark.parametrize("dtype", ["f32", "bf16", "s16", "u32", "pred"])
def test_compare(direction, dtype):
    inst = entry(f"""ENTRY %main {{
      %x = {dtype}[6,11]{{1,0}} parameter(0)
      %y = {dtype}[6,11]{{1,0}} parameter(1)
      ROOT %r = pred[6,11]{{1,0}} compare(%x, %y), direction={direction}
    }}""")
    rng = np.random.default_rng(3)
    x = random(dtype, (6, 11), rng, low=-3, high=3)
    y = np.where(rng.random((6, 11)) < 0.3, x, random(dtype, (6, 11), rng, low=-3, high=3))
    (got,) = run(inst, [x, y])
    ops = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
           "GE": np.greater_equal}
    assert_same(got, ops[direction](x, y), "pred")


@pytest.mark.parametrize("dtype", ["f32", "bf16", "s8", "pred"])
def test_select(dtype):
    inst = entry(f"""ENTRY %main {{
      %p = pred[9,10]{{1,0}} parameter(0)
      %x = {dtype}[9,10]{{0,1}} parameter(1)
      %y = {dtype}[9,10]{{1,0}} parameter(2)
      ROOT %r = {dtype}[9,10]{{1,0}} select(%p, %x, %y)
    }}""")
    rng = np.random.default_rng(4)
    p, x, y = random("pred", (9, 10), rng), random(dtype, (9, 10), rng), random(dtype, (9, 10), rng)
    (got,) = run(inst, [p, x, y])
    assert_same(got, np.where(p, x, y), dtype)


@pytest.mark.parametrize("dtype,bounds", [("f32", "scalar"), ("f16", "full"), ("s32", "scalar"), ("u8", "full")])
def test_clamp(dtype, bounds):
    dims = "" if bounds == "scalar" else "5,8"
    layout = "" if bounds == "scalar" else "{0,1}"
    inst = entry(f"""ENTRY %main {{
      %lo = {dtype}[{dims}]{layout} parameter(0)
      %x = {dtype}[5,8]{{1,0}} parameter(1)
      %hi = {dtype}[{dims}]{layout} parameter(2)
      ROOT %r = {dtype}[5,8]{{1,0}} clamp(%lo, %x, %hi)
    }}""")
    rng = np.random.default_rng(5)
    shape = () if bounds == "scalar" else (5, 8)
    lo = random(dtype, shape, rng, low=0, high=20) if shape else np.array(10, numpy_dtype(dtype))
    hi = (lo + np.array(30, lo.dtype)).astype(lo.dtype)
    x = random(dtype, (5, 8), rng, low=0, high=60)
    (got,) = run(inst, [lo, x, hi])
    assert_same(got, reference(inst, [lo, x, hi])[0], dtype)


CONVERSIONS = [("f32", "s32"), ("f32", "u8"), ("f64", "s64"), ("f16", "s16"), ("bf16", "s8"), ("f32", "u64"),
               ("f32", "pred"), ("bf16", "pred"), ("s32", "f32"), ("u64", "f32"), ("s64", "bf16"), ("s16", "f16"),
               ("pred", "f32"), ("pred", "bf16"), ("pred", "s32"), ("s8", "u8"), ("u32", "s16"), ("s64", "s32"),
               ("u8", "s64"), ("s32", "pred"), ("f32", "f16"), ("f32", "bf16"), ("bf16", "f16"), ("f16", "f64"),
               ("bf16", "f64"), ("f64", "f32"), ("f16", "bf16")]


@pytest.mark.parametrize("src,dst", CONVERSIONS)
def test_convert(src, dst):
    inst = entry(f"""ENTRY %main {{
      %x = {src}[4,17]{{1,0}} parameter(0)
      ROOT %r = {dst}[4,17]{{1,0}} convert(%x)
    }}""")
    x = random(src, (4, 17), np.random.default_rng(6), scale=150.0, low=-300, high=300)
    if src in FLOATS and dst not in FLOATS and dst != "pred":
        x.flat[:4] = [1e30, -1e30, 3e9, -3e9] if src in ("f32", "f64") else [60000, -60000, 300, -300]
    (got,) = run(inst, [x])
    assert_same(got, reference(inst, [x])[0], dst)
    if src in FLOATS and dst.startswith("s"):  # truncation toward zero, saturation, NaN -> 0
        info = np.iinfo(numpy_dtype(dst))
        xf = x.astype(np.float64)
        want = np.where(np.isnan(xf), 0, np.clip(np.trunc(np.nan_to_num(xf)), info.min, info.max))
        np.testing.assert_array_equal(got.astype(np.float64), want)


@pytest.mark.parametrize("src,dst", [("f32", "s32"), ("s32", "f32"), ("f16", "u16"), ("bf16", "s16"),
                                     ("u8", "s8"), ("f64", "u64"), ("pred", "u8"), ("u8", "pred")])
def test_bitcast_convert(src, dst):
    inst = entry(f"""ENTRY %main {{
      %x = {src}[3,13]{{1,0}} parameter(0)
      ROOT %r = {dst}[3,13]{{1,0}} bitcast-convert(%x)
    }}""")
    low, high = (0, 1) if dst == "pred" else (-100, 100)
    x = random(src, (3, 13), np.random.default_rng(7), low=low, high=high)
    (got,) = run(inst, [x])
    if src == "pred" or dst == "pred":
        want = x.astype(numpy_dtype(dst))
    else:
        want = x.view(numpy_dtype(dst))
    assert_same(got, want, "bits")


@pytest.mark.parametrize("approximate,dtype", [("none", "f32"), ("tanh", "f32"), ("none", "bf16"), ("tanh", "f16")])
def test_gelu(approximate, dtype):
    inst = entry(f"""ENTRY %main {{
      %x = {dtype}[8,16]{{1,0}} parameter(0)
      ROOT %r = {dtype}[8,16]{{1,0}} gelu(%x), approximate={approximate}
    }}""")
    x = random(dtype, (8, 16), np.random.default_rng(8))
    (got,) = run(inst, [x])
    xf = x.astype(np.float64)
    if approximate == "none":
        from math import erf
        want = 0.5 * xf * (1 + np.vectorize(erf)(xf / np.sqrt(2)))
    else:
        want = 0.5 * xf * (1 + np.tanh(np.sqrt(2 / np.pi) * (xf + 0.044715 * xf**3)))
    # 1 + tanh(...) cancels for negative x in any f32 evaluation: compare absolutely there.
    np.testing.assert_allclose(got.astype(np.float64), want.astype(x.dtype).astype(np.float64),
                               rtol=RTOL[dtype], atol=RTOL[dtype] * 0.1, equal_nan=True)


def test_transcendentals_at_extremes():
    """Accuracy away from the random sample: tiny, near-one and huge arguments."""
    x = np.array([1e-30, -1e-30, 1e-7, -1e-7, 0.49, -0.49, 0.51, 0.29, -0.3, 0.41, 0.42, 0.999, -0.999,
                  1.001, 20.0, -20.0, 80.0, 88.0, -88.0, 1e10, 3e38, -3e38, 2.0**-126, 2.0**-149], np.float32)
    for op, fn in [("expm1", np.expm1), ("log-plus-one", np.log1p), ("tanh", np.tanh), ("sinh", np.sinh),
                   ("cosh", np.cosh), ("asinh", np.arcsinh), ("atan", np.arctan), ("cbrt", np.cbrt),
                   ("atanh", np.arctanh), ("acosh", np.arccosh), ("asin", np.arcsin)]:
        inst = entry(f"""ENTRY %main {{
          %x = f32[24]{{0}} parameter(0)
          ROOT %r = f32[24]{{0}} {op}(%x)
        }}""")
        (got,) = run(inst, [x])
        with np.errstate(all="ignore"):
            want = fn(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=4e-7, atol=1e-44, equal_nan=True, err_msg=op)


def test_unsupported_dtype_is_reported():
    inst = entry("""ENTRY %main {
      %x = s32[4]{0} parameter(0)
      ROOT %r = s32[4]{0} exp(%x)
    }""")
    with pytest.raises(UnsupportedError, match="exp"):
        lower(inst, "kernel")


# ---------------------------------------------------------------- data movement


def test_broadcast_with_size_one_dim_and_layouts():
    inst = entry("""ENTRY %main {
      %x = f32[3,1]{0,1} parameter(0)
      ROOT %r = f32[2,3,5]{0,2,1} broadcast(%x), dimensions={1,2}
    }""")
    x = np.arange(3, dtype=np.float32).reshape(3, 1) + 0.5
    (got,) = run(inst, [x])
    np.testing.assert_array_equal(got, np.broadcast_to(x[None, :, :], (2, 3, 5)))


def test_broadcast_scalar_and_rank0():
    inst = entry("""ENTRY %main {
      %x = s64[] parameter(0)
      ROOT %r = s64[4,3]{0,1} broadcast(%x), dimensions={}
    }""")
    (got,) = run(inst, [np.array(-7, np.int64)])
    np.testing.assert_array_equal(got, np.full((4, 3), -7, np.int64))
    scalar = entry("""ENTRY %main {
      %x = f16[] parameter(0)
      %y = f16[] parameter(1)
      ROOT %r = f16[] multiply(%x, %y)
    }""")
    (got,) = run(scalar, [np.array(1.5, np.float16), np.array(-3, np.float16)])
    assert got.shape == () and got == np.float16(-4.5)


def test_transpose_and_copy_change_layout():
    inst = entry("""ENTRY %main {
      %x = bf16[2,3,4]{1,2,0} parameter(0)
      ROOT %r = bf16[4,2,3]{0,1,2} transpose(%x), dimensions={2,0,1}
    }""")
    x = random("bf16", (2, 3, 4), np.random.default_rng(10))
    (got,) = run(inst, [x])
    assert_same(got, np.transpose(x, (2, 0, 1)), "bits")
    copy = entry("""ENTRY %main {
      %x = f32[4,5]{1,0} parameter(0)
      ROOT %r = f32[4,5]{0,1} copy(%x)
    }""")
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    (got,) = run(copy, [x])
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("src,dst", [
    ("f32[2,3,4]{2,1,0}", "f32[6,4]{1,0}"),
    ("f32[6,4]{0,1}", "f32[4,6]{1,0}"),
    ("f32[4,6]{1,0}", "f32[2,1,2,3,2]{4,3,2,1,0}"),
    ("f32[12,1,5]{2,1,0}", "f32[3,20]{0,1}"),
    ("f32[]", "f32[1,1]{1,0}"),
])
def test_reshape(src, dst):
    inst = entry(f"""ENTRY %main {{
      %x = {src} parameter(0)
      ROOT %r = {dst} reshape(%x)
    }}""")
    dims = tuple(int(d) for d in inst.operands[0].shape.dims)
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    (got,) = run(inst, [x])
    np.testing.assert_array_equal(got, x.reshape([int(d) for d in inst.shape.dims]))


def test_slice_with_strides():
    inst = entry("""ENTRY %main {
      %x = s32[10,9]{0,1} parameter(0)
      ROOT %r = s32[3,4]{1,0} slice(%x), start_indices={1,0}, limit_indices={8,8}, strides={3,2}
    }""")
    x = np.arange(90, dtype=np.int32).reshape(10, 9)
    (got,) = run(inst, [x])
    np.testing.assert_array_equal(got, x[1:8:3, 0:8:2])


def test_concatenate_three_inputs():
    inst = entry("""ENTRY %main {
      %a = f32[2,3]{1,0} parameter(0)
      %b = f32[2,1]{0,1} parameter(1)
      %c = f32[2,4]{0,1} parameter(2)
      ROOT %r = f32[2,8]{0,1} concatenate(%a, %b, %c), dimension=1
    }""")
    rng = np.random.default_rng(11)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (2, 1), (2, 4)])
    (got,) = run(inst, [a, b, c])
    np.testing.assert_array_equal(got, np.concatenate([a, b, c], axis=1))


def _numpy_pad(x, value, low, high, interior):
    """XLA pad written independently: interior-dilate, edge-pad by max(0, .), then crop negatives."""
    dims = [n + max(n - 1, 0) * i for n, i in zip(x.shape, interior)]
    dilated = np.full(dims, value, x.dtype)
    dilated[tuple(slice(None, None, i + 1) for i in interior)] = x
    padded = np.pad(dilated, [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)], constant_values=value)
    crop = tuple(slice(max(-lo, 0), padded.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(zip(low, high)))
    return padded[crop]


@pytest.mark.parametrize("low,high,interior", [((1, -2), (2, 3), (0, 1)), ((-1, 2), (-3, 0), (2, 0)),
                                                ((0, 0), (0, 0), (1, 1)), ((-3, 1), (4, -5), (1, 2))])
def test_pad(low, high, interior):
    x = np.arange(1, 4 * 5 + 1, dtype=np.float32).reshape(4, 5)
    want = _numpy_pad(x, np.float32(-1), low, high, interior)
    attrs = ", ".join(f"{name}={{{a},{b}}}" for name, (a, b) in
                      [("edge_padding_low", low), ("edge_padding_high", high), ("interior_padding", interior)])
    inst = entry(f"""ENTRY %main {{
      %x = f32[4,5]{{0,1}} parameter(0)
      %v = f32[] parameter(1)
      ROOT %r = f32[{want.shape[0]},{want.shape[1]}]{{1,0}} pad(%x, %v), {attrs}
    }}""")
    (got,) = run(inst, [x, np.array(-1, np.float32)])
    np.testing.assert_array_equal(got, want)


def test_reverse_and_iota():
    inst = entry("""ENTRY %main {
      %x = u16[3,4,5]{0,1,2} parameter(0)
      ROOT %r = u16[3,4,5]{2,1,0} reverse(%x), dimensions={0,2}
    }""")
    x = np.arange(60, dtype=np.uint16).reshape(3, 4, 5)
    (got,) = run(inst, [x])
    np.testing.assert_array_equal(got, x[::-1, :, ::-1])
    for dtype, layout in [("f32", "{0,1}"), ("s64", "{1,0}"), ("bf16", "{1,0}")]:
        iota = entry(f"""ENTRY %main {{
          ROOT %r = {dtype}[6,7]{layout} iota(), iota_dimension=1
        }}""")
        (got,) = run(iota, [])
        np.testing.assert_array_equal(got.astype(np.float64), np.broadcast_to(np.arange(7.0), (6, 7)))


@pytest.mark.parametrize("index_dtype", ["s32", "s64"])
def test_gather_with_negative_indices(index_dtype):
    inst = entry(f"""ENTRY %main {{
      %d = f32[3,5,2]{{0,2,1}} parameter(0)
      %i = {index_dtype}[2,3]{{0,1}} parameter(1)
      ROOT %r = f32[3,2,3,2]{{3,2,1,0}} gather(%d, %i), axis=1
    }}""")
    data = np.arange(30, dtype=np.float32).reshape(3, 5, 2)
    idx = np.array([[0, -1, 3], [-5, 4, 2]], numpy_dtype(index_dtype))
    (got,) = run(inst, [data, idx])
    np.testing.assert_array_equal(got, np.take(data, idx, axis=1))


def test_gather_elements_and_gather_nd():
    inst = entry("""ENTRY %main {
      %d = s32[4,3]{0,1} parameter(0)
      %i = s64[2,3]{1,0} parameter(1)
      ROOT %r = s32[2,3]{1,0} gather-elements(%d, %i), axis=0
    }""")
    data = np.arange(12, dtype=np.int32).reshape(4, 3)
    idx = np.array([[0, -1, 2], [-4, 1, 3]], np.int64)
    (got,) = run(inst, [data, idx])
    np.testing.assert_array_equal(got, np.take_along_axis(data, np.where(idx < 0, idx + 4, idx), axis=0))
    nd = entry("""ENTRY %main {
      %d = f16[2,3,4,5]{3,2,1,0} parameter(0)
      %i = s32[2,6,2]{2,0,1} parameter(1)
      ROOT %r = f16[2,6,5]{2,1,0} gather-nd(%d, %i), batch_dims=1
    }""")
    data = np.arange(120).astype(np.float16).reshape(2, 3, 4, 5)
    rng = np.random.default_rng(12)
    idx = np.stack([rng.integers(-3, 3, (2, 6)), rng.integers(-4, 4, (2, 6))], axis=-1).astype(np.int32)
    (got,) = run(nd, [data, idx])
    want = np.stack([data[b][idx[b, :, 0], idx[b, :, 1]] for b in range(2)])
    np.testing.assert_array_equal(got, want)


def test_dynamic_slice_clamps_starts():
    inst = entry("""ENTRY %main {
      %x = f32[6,7]{0,1} parameter(0)
      %s0 = s32[] parameter(1)
      %s1 = s64[] parameter(2)
      ROOT %r = f32[3,4]{1,0} dynamic-slice(%x, %s0, %s1), slice_sizes={3,4}
    }""")
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    for s0, s1 in [(1, 2), (5, -3), (-2, 9)]:
        (got,) = run(inst, [x, np.array(s0, np.int32), np.array(s1, np.int64)])
        b0, b1 = min(max(s0, 0), 3), min(max(s1, 0), 3)
        np.testing.assert_array_equal(got, x[b0:b0 + 3, b1:b1 + 4])


def test_dynamic_update_slice():
    inst = entry("""ENTRY %main {
      %x = bf16[5,6]{1,0} parameter(0)
      %u = bf16[2,6]{0,1} parameter(1)
      %s0 = s32[] parameter(2)
      %s1 = s32[] parameter(3)
      ROOT %r = bf16[5,6]{0,1} dynamic-update-slice(%x, %u, %s0, %s1)
    }""")
    x = np.zeros((5, 6), BF16)
    u = (np.arange(12).reshape(2, 6) + 1).astype(BF16)
    for s0 in (1, 4, -1):
        (got,) = run(inst, [x, u, np.array(s0, np.int32), np.array(3, np.int32)])
        b = min(max(s0, 0), 3)
        want = x.copy()
        want[b:b + 2] = u
        assert_same(got, want, "bits")


@pytest.mark.parametrize("reduction,dtype", [("none", "f32"), ("add", "f32"), ("add", "f16"), ("mul", "s32"),
                                             ("max", "bf16"), ("min", "u8")])
def test_scatter_nd(reduction, dtype):
    inst = entry(f"""ENTRY %main {{
      %d = {dtype}[4,3,2]{{0,1,2}} parameter(0)
      %i = s64[5,2]{{1,0}} parameter(1)
      %u = {dtype}[5,2]{{0,1}} parameter(2)
      ROOT %r = {dtype}[4,3,2]{{2,1,0}} scatter-nd(%d, %i, %u), reduction={reduction}
    }}""")
    rng = np.random.default_rng(13)
    data = random(dtype, (4, 3, 2), rng, scale=2.0, low=1, high=9)
    idx = np.array([[0, 1], [3, -1], [0, 1], [-4, 0], [2, 2]], np.int64)  # duplicates: rows 0, 2 and 3
    upd = random(dtype, (5, 2), rng, scale=2.0, low=1, high=9)
    data, upd = np.nan_to_num(data, posinf=1, neginf=-1), np.nan_to_num(upd, posinf=2, neginf=-2)
    (got,) = run(inst, [data, idx, upd])
    want = data.astype(np.float64 if dtype in FLOATS else np.int64)
    fn = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}.get(reduction)
    for row, (a, b) in enumerate(idx):
        want[a, b] = upd[row] if fn is None else fn(want[a, b], upd[row])
    assert_same(got, want.astype(data.dtype), dtype)


# ---------------------------------------------------------------- sizes, blocks, index width


def test_many_programs_and_tail():
    rng = np.random.default_rng(14)
    x, y = rng.standard_normal((37, 29)).astype(np.float32), rng.standard_normal((29, 37)).astype(np.float32)
    fused = entry("""%fused {
      %p0 = f32[37,29]{1,0} parameter(0)
      %p1 = f32[29,37]{1,0} parameter(1)
      %t = f32[37,29]{1,0} transpose(%p1), dimensions={1,0}
      ROOT %r = f32[37,29]{1,0} subtract(%p0, %t)
    }
    ENTRY %main {
      %x = f32[37,29]{0,1} parameter(0)
      %y = f32[29,37]{1,0} parameter(1)
      ROOT %f = f32[37,29]{1,0} fusion(%x, %y), kind=loop, calls=%fused
    }""")
    kernel = lower(fused, "kernel")
    assert kernel.gpu.constexprs["BLOCK"] == 1024 and kernel.gpu.grid == (2, 1, 1)
    assert kernel.interpreter.grid == (1, 1, 1)
    for config in (kernel.gpu, LaunchConfig({"BLOCK": 64}, (17, 1, 1))):  # 1073 = 16 * 64 + 49
        (got,) = run_kernel(kernel, fused, [x, y], config)
        np.testing.assert_array_equal(got, x - y.T)


def test_empty_output():
    inst = entry("""ENTRY %main {
      %x = f32[0,3]{1,0} parameter(0)
      ROOT %r = f32[0,3]{1,0} exp(%x)
    }""")
    kernel = lower(inst, "kernel")
    assert kernel.gpu.grid == (1, 1, 1) and kernel.interpreter.grid == (1, 1, 1)
    (got,) = run_kernel(kernel, inst, [np.zeros((0, 3), np.float32)])
    assert got.shape == (0, 3)


def test_int64_indexing(monkeypatch):
    big = entry("""ENTRY %main {
      %x = f32[] parameter(0)
      ROOT %r = f32[65536,32769]{1,0} broadcast(%x), dimensions={}
    }""")
    kernel = lower(big, "kernel")
    assert kernel.extra["index_dtype"] == "s64" and kernel.gpu.grid[0] == -(-65536 * 32769 // 1024)
    assert "tl.int64" in kernel.source
    # The 64-bit path computes the same values (forced on a small fusion).
    monkeypatch.setattr(loop, "INT32_SAFE", 10)
    inst = entry("""%fused {
      %d = f32[4,6]{0,1} parameter(0)
      %i = s32[3]{0} parameter(1)
      %g = f32[4,3]{1,0} gather(%d, %i), axis=1
      %r = f32[3,4]{1,0} reshape(%g)
      %u = f32[2,4]{1,0} parameter(2)
      %s = s32[2,1]{1,0} parameter(3)
      ROOT %sc = f32[3,4]{1,0} scatter-nd(%r, %s, %u), reduction=add
    }
    ENTRY %main {
      %d = f32[4,6]{0,1} parameter(0)
      %i = s32[3]{0} parameter(1)
      %u = f32[2,4]{1,0} parameter(2)
      %s = s32[2,1]{1,0} parameter(3)
      ROOT %f = f32[3,4]{0,1} fusion(%d, %i, %u, %s), kind=loop, calls=%fused
    }""")
    d = np.arange(24, dtype=np.float32).reshape(4, 6)
    i, u, s = np.array([5, -6, 2], np.int32), np.ones((2, 4), np.float32), np.array([[2], [-1]], np.int32)
    kernel = lower(inst, "kernel")
    assert kernel.extra["index_dtype"] == "s64"
    (got,) = run_kernel(kernel, inst, [d, i, u, s])
    want = np.take(d, i, axis=1).reshape(3, 4)
    want[2] += 2
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- fusions


def test_fusion_bias_gelu_to_half_with_layouts():
    inst = entry("""%fused {
      %x = f32[8,12]{1,0} parameter(0)
      %b = f32[12]{0} parameter(1)
      %bb = f32[8,12]{1,0} broadcast(%b), dimensions={1}
      %s = f32[8,12]{1,0} add(%x, %bb)
      %half = f32[8,12]{1,0} constant(), splat=0.5
      %one = f32[8,12]{1,0} constant(), splat=1
      %c = f32[8,12]{1,0} constant(), splat=0.7071067811865476
      %sc = f32[8,12]{1,0} multiply(%s, %c)
      %e = f32[8,12]{1,0} erf(%sc)
      %e1 = f32[8,12]{1,0} add(%e, %one)
      %h = f32[8,12]{1,0} multiply(%s, %half)
      %g = f32[8,12]{1,0} multiply(%h, %e1)
      ROOT %o = f16[8,12]{1,0} convert(%g)
    }
    ENTRY %main {
      %x = f32[8,12]{0,1} parameter(0)
      %b = f32[12]{0} parameter(1)
      ROOT %f = f16[8,12]{0,1} fusion(%x, %b), kind=loop, calls=%fused
    }""")
    rng = np.random.default_rng(20)
    x, b = rng.standard_normal((8, 12)).astype(np.float32), rng.standard_normal(12).astype(np.float32)
    (got,) = run(inst, [x, b])
    from math import erf
    s = (x + b).astype(np.float64)
    want = (0.5 * s * (1 + np.vectorize(erf)(s / np.sqrt(2)))).astype(np.float16)
    assert_same(got, want, "f16")
    assert_same(got, reference(inst, [x, b])[0], "f16")


def test_fusion_multi_output_with_different_layouts():
    inst = entry("""%fused {
      %x = f32[5,7]{1,0} parameter(0)
      %y = f32[7,5]{1,0} parameter(1)
      %t = f32[5,7]{1,0} transpose(%y), dimensions={1,0}
      %s = f32[5,7]{1,0} add(%x, %t)
      %e = f32[5,7]{1,0} exp(%t)
      %c = pred[5,7]{1,0} compare(%s, %e), direction=GT
      ROOT %out = (f32[5,7]{1,0}, f32[5,7]{0,1}, pred[5,7]{1,0}) tuple(%s, %e, %c)
    }
    ENTRY %main {
      %x = f32[5,7]{1,0} parameter(0)
      %y = f32[7,5]{0,1} parameter(1)
      ROOT %f = (f32[5,7]{1,0}, f32[5,7]{0,1}, pred[5,7]{1,0}) fusion(%x, %y), kind=loop, calls=%fused
    }""")
    rng = np.random.default_rng(21)
    x, y = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 5)).astype(np.float32)
    s, e, c = run(inst, [x, y])
    np.testing.assert_allclose(s, x + y.T, rtol=1e-6)
    np.testing.assert_allclose(e, np.exp(y.T), rtol=1e-6)
    np.testing.assert_array_equal(c, (x + y.T) > np.exp(y.T))


def test_fusion_of_data_movement_is_index_arithmetic():
    inst = entry("""%fused {
      %x = f32[4,6]{1,0} parameter(0)
      %v = f32[] parameter(1)
      %sl = f32[4,3]{1,0} slice(%x), start_indices={0,1}, limit_indices={4,6}, strides={1,2}
      %rv = f32[4,3]{1,0} reverse(%sl), dimensions={0}
      %p = f32[5,5]{1,0} pad(%rv, %v), edge_padding_low={1,-1}, edge_padding_high={0,1}, interior_padding={0,1}
      %rs = f32[25]{0} reshape(%p)
      %i = f32[25]{0} iota(), iota_dimension=0
      %cat = f32[50]{0} concatenate(%rs, %i), dimension=0
      ROOT %n = f32[50]{0} negate(%cat)
    }
    ENTRY %main {
      %x = f32[4,6]{0,1} parameter(0)
      %v = f32[] parameter(1)
      ROOT %f = f32[50]{0} fusion(%x, %v), kind=loop, calls=%fused
    }""")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    (got,) = run(inst, [x, np.array(9, np.float32)])
    padded = _numpy_pad(x[:, 1:6:2][::-1], np.float32(9), (1, -1), (0, 1), (0, 1))
    want = -np.concatenate([padded.reshape(-1), np.arange(25, dtype=np.float32)])
    np.testing.assert_array_equal(got, want)
    kernel = lower(inst, "kernel")
    assert kernel.source.count("tl.load(") == 2  # x and the padding value, nothing in between


def test_fusion_outputs_must_share_dims():
    inst = entry("""%fused {
      %x = f32[4,6]{1,0} parameter(0)
      %e = f32[4,6]{1,0} exp(%x)
      %s = f32[4,3]{1,0} slice(%x), start_indices={0,0}, limit_indices={4,3}, strides={1,1}
      ROOT %t = (f32[4,6]{1,0}, f32[4,3]{1,0}) tuple(%e, %s)
    }
    ENTRY %main {
      %x = f32[4,6]{1,0} parameter(0)
      ROOT %f = (f32[4,6]{1,0}, f32[4,3]{1,0}) fusion(%x), kind=loop, calls=%fused
    }""")
    with pytest.raises(UnsupportedError, match="differ in dims"):
        lower(inst, "kernel")


def test_fusion_masked_kv_update_and_attention_mask():
    inst = entry("""%fused {
      %s = f32[4,6]{1,0} parameter(0)
      %cache = bf16[4,6]{1,0} parameter(1)
      %new = bf16[1,6]{1,0} parameter(2)
      %pos = s32[] parameter(3)
      %zero = s32[] constant(), value={0}
      %row = s32[4,6]{1,0} iota(), iota_dimension=0
      %col = s32[4,6]{1,0} iota(), iota_dimension=1
      %two = s32[4,6]{1,0} constant(), splat=2
      %lim = s32[4,6]{1,0} add(%row, %two)
      %keep = pred[4,6]{1,0} compare(%col, %lim), direction=LE
      %ninf = f32[4,6]{1,0} constant(), splat=-inf
      %masked = f32[4,6]{1,0} select(%keep, %s, %ninf)
      %upd = bf16[4,6]{1,0} dynamic-update-slice(%cache, %new, %pos, %zero)
      %w = f32[4,6]{1,0} convert(%upd)
      %out = f32[4,6]{1,0} add(%masked, %w)
      ROOT %t = (f32[4,6]{0,1}, bf16[4,6]{1,0}) tuple(%out, %upd)
    }
    ENTRY %main {
      %s = f32[4,6]{1,0} parameter(0)
      %cache = bf16[4,6]{0,1} parameter(1)
      %new = bf16[1,6]{1,0} parameter(2)
      %pos = s32[] parameter(3)
      ROOT %f = (f32[4,6]{0,1}, bf16[4,6]{1,0}) fusion(%s, %cache, %new, %pos), kind=loop, calls=%fused
    }""")
    rng = np.random.default_rng(22)
    s = rng.standard_normal((4, 6)).astype(np.float32)
    cache = rng.standard_normal((4, 6)).astype(BF16)
    new = rng.standard_normal((1, 6)).astype(BF16)
    out, upd = run(inst, [s, cache, new, np.array(2, np.int32)])
    want_upd = cache.copy()
    want_upd[2] = new[0]
    keep = np.arange(6)[None, :] <= np.arange(4)[:, None] + 2
    want_out = np.where(keep, s, -np.inf) + want_upd.astype(np.float32)
    assert_same(upd, want_upd, "bits")
    np.testing.assert_array_equal(out, want_out)
    for got, want in zip((out, upd), reference(inst, [s, cache, new, np.array(2, np.int32)])):
        assert_same(got, want, "bits")


def test_fusion_with_inline_constant_table_and_bitcast():
    inst = entry("""%fused {
      %x = s32[2,3]{1,0} parameter(0)
      %k = s32[2,3]{1,0} constant(), value={10,20,30,40,50,60}
      %a = s32[2,3]{1,0} add(%x, %k)
      %b = s32[3,2]{0,1} bitcast(%a)
      %f = f32[3,2]{0,1} bitcast-convert(%b)
      ROOT %r = f32[3,2]{1,0} copy(%f)
    }
    ENTRY %main {
      %x = s32[2,3]{1,0} parameter(0)
      ROOT %f = f32[3,2]{1,0} fusion(%x), kind=loop, calls=%fused
    }""")
    x = np.arange(6, dtype=np.int32).reshape(2, 3) * 1000
    (got,) = run(inst, [x])
    a = x + np.arange(10, 70, 10, dtype=np.int32).reshape(2, 3)
    want = a.reshape(-1).reshape(2, 3).T.view(np.float32)  # {0,1} bytes of a row-major [2,3] read as [3,2]
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    assert_same(got, reference(inst, [x])[0], "bits")


def test_fusion_with_constant_operands():
    """Constants meet blocks everywhere (GPT-2's pow(x, 3)); a scalar predicate must never reach one."""
    inst = entry("""%fused {
      %x = f32[4,8]{1,0} parameter(0)
      %three = f32[4,8]{1,0} constant(), splat=3
      %cube = f32[4,8]{1,0} power(%x, %three)
      %k = f32[] constant(), value={0.25}
      %kb = f32[4,8]{1,0} broadcast(%k), dimensions={}
      %big = pred[4,8]{1,0} compare(%kb, %x), direction=LT
      %nan = pred[4,8]{1,0} is-nan(%three)
      %either = pred[4,8]{1,0} or(%big, %nan)
      %zero = f32[4,8]{1,0} constant(), splat=0
      ROOT %r = f32[4,8]{1,0} select(%either, %cube, %zero)
    }
    ENTRY %main {
      %x = f32[4,8]{1,0} parameter(0)
      ROOT %f = f32[4,8]{1,0} fusion(%x), kind=loop, calls=%fused
    }""")
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    (got,) = run(inst, [x])
    np.testing.assert_allclose(got, np.where(x > 0.25, x**3, 0), rtol=1e-6)


@pytest.mark.parametrize("k", [-11, -10, -3, 0, 1, 2, 6, 7, 9, 10])
def test_fusion_concatenate_and_pad_read_at_a_known_index(k):
    """A gather whose index is a constant reads the concatenate and the pad at one position for every
    lane: their masks compare a scalar index, and must still be masks over the block (regressions
    71204e0baf6fc77b and 42e1135dd51dc6dc)."""
    inst = entry(f"""%fused {{
      %a = f32[5]{{0}} parameter(0)
      %b = f32[3]{{0}} parameter(1)
      %v = f32[] parameter(2)
      %cat = f32[8]{{0}} concatenate(%a, %b), dimension=0
      %p = f32[11]{{0}} pad(%cat, %v), edge_padding_low={{2}}, edge_padding_high={{1}}, interior_padding={{0}}
      %i = s64[1]{{0}} constant(), value={{{k}}}
      %g = f32[1]{{0}} gather(%p, %i), axis=0
      %gb = f32[4]{{0}} broadcast(%g), dimensions={{0}}
      %x = f32[4]{{0}} parameter(3)
      ROOT %r = f32[4]{{0}} add(%gb, %x)
    }}
    ENTRY %main {{
      %a = f32[5]{{0}} parameter(0)
      %b = f32[3]{{0}} parameter(1)
      %v = f32[] parameter(2)
      %x = f32[4]{{0}} parameter(3)
      ROOT %f = f32[4]{{0}} fusion(%a, %b, %v, %x), kind=loop, calls=%fused
    }}""")
    a, b = np.arange(1, 6, dtype=np.float32), np.arange(10, 13, dtype=np.float32)
    v, x = np.array(-7, np.float32), np.array([0, 100, 200, 300], np.float32)
    (got,) = run(inst, [a, b, v, x])
    padded = np.pad(np.concatenate([a, b]), (2, 1), constant_values=v)
    np.testing.assert_array_equal(got, padded[k] + x)


def test_fusion_scatter_with_concatenated_indices():
    """Inside scatter-nd's loop over rows, the indices are read at scalar coordinates (the loop variable): the
    concatenate's masks compare scalars there too, and come out as masks over the block."""
    inst = entry("""%fused {
      %d = f32[6,2]{1,0} parameter(0)
      %i0 = s32[1,1]{1,0} parameter(1)
      %i1 = s32[2,1]{1,0} parameter(2)
      %idx = s32[3,1]{1,0} concatenate(%i0, %i1), dimension=0
      %u = f32[3,2]{1,0} parameter(3)
      ROOT %s = f32[6,2]{1,0} scatter-nd(%d, %idx, %u), reduction=add
    }
    ENTRY %main {
      %d = f32[6,2]{1,0} parameter(0)
      %i0 = s32[1,1]{1,0} parameter(1)
      %i1 = s32[2,1]{1,0} parameter(2)
      %u = f32[3,2]{1,0} parameter(3)
      ROOT %f = f32[6,2]{1,0} fusion(%d, %i0, %i1, %u), kind=loop, calls=%fused
    }""")
    d = np.arange(12, dtype=np.float32).reshape(6, 2)
    i0, i1 = np.array([[4]], np.int32), np.array([[-1], [4]], np.int32)
    u = np.array([[1, 2], [30, 40], [500, 600]], np.float32)
    (got,) = run(inst, [d, i0, i1, u])
    want = d.copy()
    np.add.at(want, np.concatenate([i0, i1])[:, 0] % 6, u)
    np.testing.assert_array_equal(got, want)


def test_fusion_rejects_non_loop_ops():
    inst = entry("""%fused {
      %x = f32[4,6]{1,0} parameter(0)
      ROOT %r = f32[4]{0} reduce(%x), dimensions={1}, kind=add
    }
    ENTRY %main {
      %x = f32[4,6]{1,0} parameter(0)
      ROOT %f = f32[4]{0} fusion(%x), kind=loop, calls=%fused
    }""")
    with pytest.raises(UnsupportedError, match="reduce"):
        lower(inst, "kernel")


# ---------------------------------------------------------------- ahead-of-time compilation


def _aot_kernels():
    elementwise = entry("""%fused {
      %x = bf16[33,65]{1,0} parameter(0)
      %e = bf16[33,65]{1,0} erf(%x)
      %t = bf16[33,65]{1,0} tanh(%e)
      %p = bf16[33,65]{1,0} power(%t, %x)
      ROOT %a = bf16[33,65]{0,1} atan2(%p, %x)
    }
    ENTRY %main {
      %x = bf16[33,65]{1,0} parameter(0)
      ROOT %f = bf16[33,65]{0,1} fusion(%x), kind=loop, calls=%fused
    }""")
    gather = entry("""ENTRY %main {
      %d = f16[64,128]{0,1} parameter(0)
      %i = s64[7,3]{1,0} parameter(1)
      ROOT %r = f16[7,3,128]{2,1,0} gather(%d, %i), axis=0
    }""")
    scatter = entry("""%fused {
      %d = f32[40,8]{1,0} parameter(0)
      %i = s32[6,1]{1,0} parameter(1)
      %u = f32[6,8]{1,0} parameter(2)
      %s = f32[40,8]{1,0} scatter-nd(%d, %i, %u), reduction=add
      %v = f32[] parameter(3)
      %p = f32[44,9]{1,0} pad(%s, %v), edge_padding_low={2,0}, edge_padding_high={2,1}, interior_padding={0,0}
      %c = s8[44,9]{0,1} convert(%p)
      %k = s8[44,9]{0,1} popcnt(%c)
      ROOT %o = (s8[44,9]{0,1}, f32[44,9]{1,0}) tuple(%k, %p)
    }
    ENTRY %main {
      %d = f32[40,8]{1,0} parameter(0)
      %i = s32[6,1]{1,0} parameter(1)
      %u = f32[6,8]{1,0} parameter(2)
      %v = f32[] parameter(3)
      ROOT %f = (s8[44,9]{0,1}, f32[44,9]{1,0}) fusion(%d, %i, %u, %v), kind=loop, calls=%fused
    }""")
    return [("elementwise", elementwise), ("gather", gather), ("fusion", scatter)]


def _check_binaries(targets: list[str]) -> None:
    from mlcc.emit.target.aot import compile_kernel
    from mlcc.emit.target.targets import parse_target
    for _, inst in _aot_kernels():
        kernel = lower(inst, "kernel")
        for target in targets:
            binary = compile_kernel(kernel, parse_target(target))
            assert binary.data[:4] == b"\x7fELF", (target, kernel.name)


def test_aot_compile_sm90():
    _check_binaries(["sm_90"])


def test_aot_compile_other_targets():
    _check_binaries(["sm_80", "gfx942"])
