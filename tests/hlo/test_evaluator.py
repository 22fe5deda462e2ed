"""The numpy evaluator against independent references: onnxruntime, torch, plain Python."""

from __future__ import annotations

import functools
import itertools
import math
import struct

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from mlcc.hlo.dtypes import dtype_of_numpy, numpy_dtype
from mlcc.hlo.evaluator import EVAL_RULES, EvaluationError, evaluate, evaluate_computation, evaluate_instruction
from mlcc.hlo.ir import Shape
from mlcc.hlo.opcodes import OPCODES
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from mlcc.bundle.layout import from_physical, to_physical

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)


# ---------------------------------------------------------------- helpers

def S(dtype: str, dims, layout=None) -> str:
    return str(Shape(dtype, tuple(dims), layout))


def L(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def parse(text: str):
    module = parse_module(text)
    verify_module(module)
    return module


def run(op_line: str, *args: np.ndarray, layouts=None, constants=None):
    """Evaluate ``ROOT %r = <op_line>`` with one parameter %pN per argument."""
    lines = [f"  %p{i} = {S(dtype_of_numpy(a.dtype), a.shape, layouts[i] if layouts else None)} parameter({i})"
             for i, a in enumerate(args)]
    text = "ENTRY %main {\n" + "\n".join(lines + [f"  ROOT %r = {op_line}"]) + "\n}\n"
    module = parse(text)
    return evaluate_computation(module.entry, list(args), constants or {})


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def T(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


_ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
               np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32}


def ort_run(op_type: str, inputs: list[np.ndarray], out_dtype=None, opset: int = 18, **attrs) -> np.ndarray:
    """Run a one-node ONNX model with onnxruntime."""
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    out_type = _ONNX_TYPES[np.dtype(out_dtype or inputs[0].dtype)]
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, _ONNX_TYPES[a.dtype], a.shape) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("y", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(names, inputs)))[0]


def wrap(v: int, bits: int, signed: bool = True) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


def test_every_opcode_has_a_rule():
    assert set(EVAL_RULES) == set(OPCODES)


# ---------------------------------------------------------------- unary

TORCH_UNARY = {
    "abs": torch.abs, "negate": torch.neg, "exp": torch.exp, "expm1": torch.expm1, "log": torch.log,
    "log-plus-one": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "cbrt": lambda t: torch.sign(t) * t.abs().pow(1 / 3), "tanh": torch.tanh, "erf": torch.special.erf,
    "logistic": torch.sigmoid, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "floor": torch.floor, "ceil": torch.ceil,
    "round-nearest-even": torch.round, "sign": torch.sign, "reciprocal": torch.reciprocal, "relu": torch.relu,
    "softplus": lambda t: F.softplus(t, threshold=1e9), "softsign": F.softsign, "mish": F.mish,
}


def _domain(opcode: str) -> tuple[float, float]:
    return {"log": (0.1, 5), "sqrt": (0.1, 5), "rsqrt": (0.1, 5), "asin": (-0.95, 0.95), "acos": (-0.95, 0.95),
            "atanh": (-0.95, 0.95), "acosh": (1.05, 5), "tan": (-1.3, 1.3)}.get(opcode, (-4, 4))


@pytest.mark.parametrize("opcode", sorted(TORCH_UNARY))
def test_unary_f32_matches_torch(opcode):
    x = rng(1).uniform(*_domain(opcode), (3, 5)).astype(np.float32)
    got = run(f"{S('f32', x.shape)} {opcode}(%p0)", x)
    want = TORCH_UNARY[opcode](T(x.astype(np.float64))).numpy()
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-6)


@pytest.mark.parametrize("opcode", ["exp", "erf", "logistic", "tanh", "log-plus-one"])
def test_unary_f64_keeps_double_precision(opcode):
    x = rng(2).uniform(-3, 3, 17)
    got = run(f"{S('f64', x.shape)} {opcode}(%p0)", x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, TORCH_UNARY[opcode](T(x)).numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("opcode", ["exp", "tanh", "erf", "logistic", "rsqrt", "softplus", "mish"])
def test_unary_half_computes_in_f32(dtype, opcode):
    x = rng(3).uniform(0.1, 3, 64).astype(numpy_dtype(dtype))
    got = run(f"{S(dtype, x.shape)} {opcode}(%p0)", x)
    half = torch.float16 if dtype == "f16" else torch.bfloat16
    want = TORCH_UNARY[opcode](T(x.astype(np.float32))).to(half).float().numpy()
    assert got.dtype == numpy_dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2.0 ** (-10 if dtype == "f16" else -7), atol=0)


def test_size_zero_and_size_one_dims():
    for dims in [(0, 3), (1, 1), ()]:
        x = np.full(dims, 0.5, np.float32)
        got = run(f"{S('f32', dims)} exp(%p0)", x)
        assert got.shape == dims
        np.testing.assert_allclose(got, np.full(dims, math.exp(0.5)), rtol=1e-6)


def test_rounding_ties():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 3.7, -3.7, np.inf], np.float32)
    even = run(f"{S('f32', x.shape)} round-nearest-even(%p0)", x)
    afz = run(f"{S('f32', x.shape)} round-nearest-afz(%p0)", x)
    assert even.tolist() == [-2, -2, 0, 0, 2, 2, 0, 0, 4, -4, math.inf]
    assert afz.tolist() == [-3, -2, -1, 1, 2, 3, 0, 0, 4, -4, math.inf]
    ints = np.array([-3, 4], np.int32)
    assert run(f"{S('s32', [2])} floor(%p0)", ints).tolist() == [-3, 4]


def test_logistic_and_softplus_are_stable_at_extremes():
    x = np.array([-1000, 1000, 0], np.float32)
    assert run(f"{S('f32', [3])} logistic(%p0)", x).tolist() == [0.0, 1.0, 0.5]
    sp = run(f"{S('f32', [3])} softplus(%p0)", x)
    np.testing.assert_allclose(sp, [0.0, 1000.0, math.log(2)], rtol=1e-6)


def test_classification_ops():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -0.0], np.float32)
    line = f"{S('pred', [5])} OP(%p0)"
    assert run(line.replace("OP", "is-finite"), x).tolist() == [math.isfinite(v) for v in x.tolist()]
    assert run(line.replace("OP", "is-nan"), x).tolist() == [math.isnan(v) for v in x.tolist()]
    assert run(line.replace("OP", "is-inf"), x).tolist() == [math.isinf(v) for v in x.tolist()]
    assert run(f"{S('pred', [2])} is-finite(%p0)", np.array([1, 2], np.int32)).tolist() == [True, True]


def test_not_and_popcnt():
    p = np.array([True, False])
    assert run(f"{S('pred', [2])} not(%p0)", p).tolist() == [False, True]
    i = np.array([0, 5, -6], np.int32)
    assert run(f"{S('s32', [3])} not(%p0)", i).tolist() == [~v for v in i.tolist()]
    b = np.array([-1, -128, 0, 7, 85], np.int8)
    assert run(f"{S('s8', [5])} popcnt(%p0)", b).tolist() == [(v & 0xFF).bit_count() for v in b.tolist()]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(approximate):
    x = rng(4).uniform(-5, 5, (4, 6)).astype(np.float32)
    got = run(f"{S('f32', x.shape)} gelu(%p0), approximate={approximate}", x)
    np.testing.assert_allclose(got, F.gelu(T(x).double(), approximate=approximate).numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- convert, bitcast-convert

def test_convert_float_to_int_truncates_and_saturates():
    x = np.array([1.7, -1.7, 2.5, -0.5, np.nan, 1e10, -1e10, np.inf, -np.inf], np.float32)
    got = run(f"{S('s32', x.shape)} convert(%p0)", x)
    imax, imin = 2**31 - 1, -(2**31)
    assert got.tolist() == [1, -1, 2, 0, 0, imax, imin, imax, imin]
    u = np.array([-3.0, 300.0, 254.9], np.float32)
    assert run(f"{S('u8', [3])} convert(%p0)", u).tolist() == [0, 255, 254]
    big = np.array([9.3e18, -9.3e18, 2.0**63], np.float64)
    assert run(f"{S('s64', [3])} convert(%p0)", big).tolist() == [2**63 - 1, -(2**63), 2**63 - 1]


def test_convert_between_other_types():
    f = np.array([0.0, -0.0, 0.5, np.nan], np.float32)
    assert run(f"{S('pred', [4])} convert(%p0)", f).tolist() == [False, False, True, True]
    i = np.array([65504, 70000, -3], np.int32)
    assert run(f"{S('f16', [3])} convert(%p0)", i).tolist() == [65504.0, math.inf, -3.0]
    assert run(f"{S('s8', [3])} convert(%p0)", np.array([200, -200, 127], np.int32)).tolist() == [-56, 56, 127]
    x = rng(5).normal(size=32).astype(np.float32)
    got = run(f"{S('bf16', [32])} convert(%p0)", x)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), T(x).to(torch.bfloat16).float().numpy())
    assert run(f"{S('f32', [2])} convert(%p0)", np.array([True, False])).tolist() == [1.0, 0.0]


def test_convert_f64_to_bf16_rounds_once():
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8 + 2**-30), 1e300, 2**-134 + 2**-140])
    got = run(f"{S('bf16', [6])} convert(%p0)", x)
    # ties go to even; anything above a tie rounds up, however little (a detour through f32 would lose it)
    assert got.astype(np.float64).tolist() == [1 + 2**-7, 1.0, 1 + 2**-6, -(1 + 2**-7), math.inf, 2**-133]


def test_bitcast_convert_reinterprets_bits():
    x = np.array([1.0, -2.5, 3e-40], np.float32)
    got = run(f"{S('s32', [3])} bitcast-convert(%p0)", x)
    assert got.tolist() == [struct.unpack("<i", struct.pack("<f", v))[0] for v in x.tolist()]
    h = np.array([1.0, -0.0], np.float16)
    assert run(f"{S('u16', [2])} bitcast-convert(%p0)", h).tolist() == [
        struct.unpack("<H", struct.pack("<e", v))[0] for v in h.tolist()]
    with pytest.raises(EvaluationError, match=r"%r \(bitcast-convert\)"):
        run(f"{S('u64', [3])} bitcast-convert(%p0)", x)


# ---------------------------------------------------------------- binary

TORCH_BINARY = {"add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "divide": torch.div,
                "remainder": torch.remainder, "fmod": torch.fmod, "power": torch.pow, "maximum": torch.maximum,
                "minimum": torch.minimum, "atan2": torch.atan2}


@pytest.mark.parametrize("opcode", sorted(TORCH_BINARY))
def test_binary_f32_matches_torch(opcode):
    g = rng(6)
    a = g.uniform(0.2 if opcode == "power" else -3, 3, (4, 5)).astype(np.float32)
    b = (g.uniform(0.5, 3, (4, 5)) * g.choice([-1, 1], (4, 5))).astype(np.float32)
    got = run(f"{S('f32', a.shape)} {opcode}(%p0, %p1)", a, b)
    want = TORCH_BINARY[opcode](T(a).double(), T(b).double()).numpy()
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-6)


def test_maximum_minimum_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, 3.0], np.float32)
    for opcode in ("maximum", "minimum"):
        got = run(f"{S('f32', [3])} {opcode}(%p0, %p1)", a, b)
        assert math.isnan(got[0]) and math.isnan(got[1]) and got[2] == (3.0 if opcode == "maximum" else 2.0)


def test_binary_bf16_rounds_once():
    a = rng(7).normal(size=16).astype(BF16)
    b = rng(8).normal(size=16).astype(BF16)
    got = run(f"{S('bf16', [16])} multiply(%p0, %p1)", a, b)
    want = (T(a.astype(np.float32)) * T(b.astype(np.float32))).to(torch.bfloat16).float().numpy()
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), want)


INT_MIN = -(2**31)
DIV_A = [7, -7, 7, -7, 5, INT_MIN, INT_MIN, 0, -5]
DIV_B = [2, 2, -2, -2, 0, -1, 1, 3, 0]


def test_integer_divide_truncates_and_defines_division_by_zero():
    a, b = np.array(DIV_A, np.int32), np.array(DIV_B, np.int32)
    got = run(f"{S('s32', a.shape)} divide(%p0, %p1)", a, b)
    want = [-1 if y == 0 else wrap((abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1), 32)
            for x, y in zip(DIV_A, DIV_B)]
    assert got.tolist() == want
    u = run(f"{S('u32', [2])} divide(%p0, %p1)", np.array([7, 9], np.uint32), np.array([0, 2], np.uint32))
    assert u.tolist() == [2**32 - 1, 4]


def test_integer_remainder_and_fmod():
    a, b = np.array(DIV_A, np.int32), np.array(DIV_B, np.int32)
    rem = run(f"{S('s32', a.shape)} remainder(%p0, %p1)", a, b)
    assert rem.tolist() == [x if y == 0 else x % y for x, y in zip(DIV_A, DIV_B)]
    fm = run(f"{S('s32', a.shape)} fmod(%p0, %p1)", a, b)
    assert fm.tolist() == [x if y == 0 else int(math.fmod(x, y)) for x, y in zip(DIV_A, DIV_B)]


def test_integer_power():
    pairs = [(2, 10), (3, 0), (-2, 3), (1, -5), (-1, -3), (-1, -4), (5, -1), (0, 0), (3, 40)]
    a = np.array([p[0] for p in pairs], np.int32)
    b = np.array([p[1] for p in pairs], np.int32)
    got = run(f"{S('s32', a.shape)} power(%p0, %p1)", a, b)

    def ref(x, y):
        if y >= 0:
            return wrap(x**y, 32)
        return 1 if x == 1 else ((-1) ** (-y) if x == -1 else 0)
    assert got.tolist() == [ref(x, y) for x, y in pairs]


@pytest.mark.parametrize("bits", [8, 32])
def test_shifts_match_xla_rules(bits):
    dtype = np.dtype(f"int{bits}")
    values = [1, -1, 100 % (2 ** (bits - 1)), -(2 ** (bits - 1)), 37]
    amounts = [0, 1, bits - 1, bits, bits + 3, -1]
    a = np.array([v for v in values for _ in amounts], dtype)
    b = np.array([s for _ in values for s in amounts], dtype)
    line = f"{S(f's{bits}', a.shape)} OP(%p0, %p1)"
    mask = (1 << bits) - 1

    def amount(s):
        return s & mask
    left = [wrap(x << amount(s), bits) if amount(s) < bits else 0 for x, s in zip(a.tolist(), b.tolist())]
    arith = [x >> min(amount(s), bits - 1) for x, s in zip(a.tolist(), b.tolist())]
    logical = [wrap((x & mask) >> amount(s), bits) if amount(s) < bits else 0 for x, s in zip(a.tolist(), b.tolist())]
    assert run(line.replace("OP", "shift-left"), a, b).tolist() == left
    assert run(line.replace("OP", "shift-right-arithmetic"), a, b).tolist() == arith
    assert run(line.replace("OP", "shift-right-logical"), a, b).tolist() == logical


def test_logical_and_bitwise_ops():
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    i, j = np.array([12, -7, 0, 255], np.int16), np.array([10, 3, -1, 15], np.int16)
    for opcode, fn in [("and", lambda x, y: x & y), ("or", lambda x, y: x | y), ("xor", lambda x, y: x ^ y)]:
        assert run(f"{S('pred', [4])} {opcode}(%p0, %p1)", p, q).tolist() == [
            bool(fn(x, y)) for x, y in zip(p.tolist(), q.tolist())]
        assert run(f"{S('s16', [4])} {opcode}(%p0, %p1)", i, j).tolist() == [
            fn(x, y) for x, y in zip(i.tolist(), j.tolist())]
    assert run(f"{S('pred', [4])} add(%p0, %p1)", p, q).tolist() == [True, True, True, False]


@pytest.mark.parametrize("direction,fn", [("EQ", lambda x, y: x == y), ("NE", lambda x, y: x != y),
                                          ("LT", lambda x, y: x < y), ("LE", lambda x, y: x <= y),
                                          ("GT", lambda x, y: x > y), ("GE", lambda x, y: x >= y)])
def test_compare(direction, fn):
    a = np.array([1.0, 2.0, np.nan, -0.0, 3.0], np.float32)
    b = np.array([1.0, 1.0, 1.0, 0.0, np.nan], np.float32)
    got = run(f"{S('pred', [5])} compare(%p0, %p1), direction={direction}", a, b)
    assert got.dtype == np.bool_
    assert got.tolist() == [fn(x, y) for x, y in zip(a.tolist(), b.tolist())]


def test_select_and_clamp():
    g = rng(9)
    p = g.random((3, 4)) > 0.5
    a, b = g.normal(size=(3, 4)).astype(np.float32), g.normal(size=(3, 4)).astype(np.float32)
    got = run(f"{S('f32', [3, 4])} select(%p0, %p1, %p2)", p, a, b)
    rows = zip(p.tolist(), a.tolist(), b.tolist())
    assert got.tolist() == [[x if c else y for c, x, y in zip(*row)] for row in rows]
    lo, hi = np.array(-0.5, np.float32), np.array(0.5, np.float32)
    got = run(f"{S('f32', [3, 4])} clamp(%p0, %p1, %p2)", lo, a, hi)
    np.testing.assert_array_equal(got, torch.clamp(T(a), -0.5, 0.5).numpy())
    lo_t, hi_t = -np.abs(b), np.abs(b)
    got = run(f"{S('f32', [3, 4])} clamp(%p0, %p1, %p2)", lo_t, a, hi_t)
    np.testing.assert_array_equal(got, torch.clamp(T(a), T(lo_t), T(hi_t)).numpy())


# ---------------------------------------------------------------- data movement

def test_broadcast():
    x = np.arange(3, dtype=np.float32)
    got = run(f"{S('f32', [2, 3, 4])} broadcast(%p0), dimensions={{1}}", x)
    np.testing.assert_array_equal(got, T(x)[None, :, None].expand(2, 3, 4).numpy())
    y = np.arange(3, dtype=np.int32).reshape(1, 3)
    got = run(f"{S('s32', [4, 3])} broadcast(%p0), dimensions={{0,1}}", y)
    assert got.tolist() == [[0, 1, 2]] * 4
    s = np.array(7, np.int32)
    assert run(f"{S('s32', [2, 2])} broadcast(%p0), dimensions={{}}", s).tolist() == [[7, 7], [7, 7]]


def test_reshape_copy_transpose_reverse():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run(f"{S('f32', [4, 6])} reshape(%p0)", x), T(x).reshape(4, 6).numpy())
    copied = run(f"{S('f32', [2, 3, 4], (0, 1, 2))} copy(%p0)", x)
    np.testing.assert_array_equal(copied, x)
    got = run(f"{S('f32', [4, 2, 3])} transpose(%p0), dimensions={{2,0,1}}", x)
    np.testing.assert_array_equal(got, T(x).permute(2, 0, 1).numpy())
    got = run(f"{S('f32', [2, 3, 4])} reverse(%p0), dimensions={{0,2}}", x)
    np.testing.assert_array_equal(got, T(x).flip(0, 2).numpy())


def test_slice_with_strides():
    x = np.arange(42, dtype=np.int32).reshape(6, 7)
    got = run(f"{S('s32', [2, 2])} slice(%p0), start_indices={{1,0}}, limit_indices={{4,5}}, strides={{2,3}}", x)
    assert got.tolist() == [[row[c] for c in range(0, 5, 3)] for row in x.tolist()[1:4:2]]


def test_concatenate_with_empty_operand():
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 0), np.float32)
    c = np.arange(4, dtype=np.float32).reshape(2, 2)
    got = run(f"{S('f32', [2, 5])} concatenate(%p0, %p1, %p2), dimension=1", a, b, c)
    np.testing.assert_array_equal(got, torch.cat([T(a), T(b), T(c)], 1).numpy())


def test_dynamic_slice_clamps_starts():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    line = f"{S('s32', [2, 3])} dynamic-slice(%p0, %p1, %p2), slice_sizes={{2,3}}"
    for r, c in [(1, 1), (3, -2), (-5, 9)]:
        got = run(line, x, np.array(r, np.int32), np.array(c, np.int64))
        r0, c0 = min(max(r, 0), 4 - 2), min(max(c, 0), 5 - 3)
        assert got.tolist() == [row[c0:c0 + 3] for row in x.tolist()[r0:r0 + 2]]


def test_dynamic_update_slice_clamps_starts():
    x = np.zeros((4, 5), np.float32)
    update = np.array([[1, 2], [3, 4]], np.float32)
    got = run(f"{S('f32', [4, 5])} dynamic-update-slice(%p0, %p1, %p2, %p3)",
              x, update, np.array(10, np.int32), np.array(1, np.int32))
    want = [[0.0] * 5 for _ in range(4)]
    for i in range(2):
        for j in range(2):
            want[2 + i][1 + j] = float(update[i, j])
    assert got.tolist() == want


def _pad_reference(x: np.ndarray, value, low, high, interior) -> np.ndarray:
    dims = [n + lo + hi + max(n - 1, 0) * i for n, lo, hi, i in zip(x.shape, low, high, interior)]
    out = np.full(dims, value, x.dtype)
    for index in itertools.product(*[range(n) for n in x.shape]):
        pos = [lo + j * (i + 1) for j, lo, i in zip(index, low, interior)]
        if all(0 <= p < m for p, m in zip(pos, dims)):
            out[tuple(pos)] = x[index]
    return out


@pytest.mark.parametrize("low,high,interior", [((1, -1), (2, 0), (1, 2)), ((-1, 0), (-1, 1), (0, 1)),
                                               ((0, 2), (0, 0), (0, 0)), ((-2, -6), (0, 1), (3, 1)),
                                               ((0, -4), (0, 0), (0, 0))])
def test_pad_with_negative_and_interior_padding(low, high, interior):
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    want = _pad_reference(x, -1.0, low, high, interior)
    got = run(f"{S('f32', want.shape)} pad(%p0, %p1), edge_padding_high={L(high)}, edge_padding_low={L(low)}, "
              f"interior_padding={L(interior)}", x, np.array(-1.0, np.float32))
    np.testing.assert_array_equal(got, want)


def test_iota():
    got = run(f"{S('s32', [2, 3])} iota(), iota_dimension=1")
    assert got.tolist() == [[0, 1, 2], [0, 1, 2]]
    got = run(f"{S('bf16', [3, 2])} iota(), iota_dimension=0")
    assert got.dtype == BF16 and got.astype(np.float32).tolist() == [[0, 0], [1, 1], [2, 2]]


@pytest.mark.parametrize("src_dims,src_layout,dst_dims,dst_layout", [
    ((2, 3), (0, 1), (3, 2), (1, 0)),
    ((2, 3, 4), (2, 1, 0), (6, 4), (1, 0)),
    ((2, 3, 4), (1, 2, 0), (2, 12), (0, 1)),
    ((4, 1, 3), (0, 2, 1), (3, 4), (1, 0)),
])
def test_bitcast_reads_physical_bytes(src_dims, src_layout, dst_dims, dst_layout):
    x = np.arange(math.prod(src_dims), dtype=np.float32).reshape(src_dims)
    got = run(f"{S('f32', dst_dims, dst_layout)} bitcast(%p0)", x, layouts=[src_layout])
    want = from_physical(to_physical(x, src_layout).reshape(-1), dst_dims, dst_layout)
    np.testing.assert_array_equal(got, want)
    if src_layout == (0, 1):  # column-major [2,3] read row-major as [3,2] is the transpose
        np.testing.assert_array_equal(got, x.T)


# ---------------------------------------------------------------- gather / scatter (onnxruntime)

def test_gather_matches_onnx():
    data = rng(10).normal(size=(4, 3)).astype(np.float32)
    idx = np.array([[0, -1], [2, -3]], np.int64)
    got = run(f"{S('f32', [4, 2, 2])} gather(%p0, %p1), axis=1", data, idx)
    np.testing.assert_array_equal(got, ort_run("Gather", [data, idx], axis=1))
    idx32 = np.array([3, -4, 1], np.int32)
    got = run(f"{S('f32', [3, 3])} gather(%p0, %p1), axis=0", data, idx32)
    np.testing.assert_array_equal(got, ort_run("Gather", [data, idx32], axis=0))


def test_gather_out_of_bounds_is_an_evaluation_error():
    data = np.zeros((4, 3), np.float32)
    with pytest.raises(EvaluationError, match=r"%r \(gather\): index 3 out of bounds"):
        run(f"{S('f32', [4, 1])} gather(%p0, %p1), axis=1", data, np.array([3], np.int64))


def test_gather_elements_matches_onnx():
    data = rng(11).normal(size=(3, 4)).astype(np.float32)
    idx = np.array([[0, -1, 2, 1], [-3, 1, 0, 2]], np.int64)
    got = run(f"{S('f32', [2, 4])} gather-elements(%p0, %p1), axis=0", data, idx)
    np.testing.assert_array_equal(got, ort_run("GatherElements", [data, idx], axis=0))
    idx2 = np.array([[3, 0], [1, -1]], np.int64)
    got = run(f"{S('f32', [2, 2])} gather-elements(%p0, %p1), axis=1", data, idx2)
    np.testing.assert_array_equal(got, ort_run("GatherElements", [data, idx2], axis=1))


@pytest.mark.parametrize("data_shape,idx,batch_dims", [
    ((3, 4, 2), [[0, 1], [2, -1]], 0),
    ((3, 4, 2), [[[1]], [[0]]], 0),
    ((2, 3, 4), [[[1, 2]], [[0, -1]]], 1),
    ((2, 3, 4), [[1], [2]], 1),
])
def test_gather_nd_matches_onnx(data_shape, idx, batch_dims):
    data = rng(12).normal(size=data_shape).astype(np.float32)
    idx = np.array(idx, np.int64)
    want = ort_run("GatherND", [data, idx], batch_dims=batch_dims)
    got = run(f"{S('f32', want.shape)} gather-nd(%p0, %p1), batch_dims={batch_dims}", data, idx)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_matches_onnx(reduction):
    g = rng(13)
    data = g.normal(size=(4, 3)).astype(np.float32)
    idx = np.array([[1], [3]] if reduction == "none" else [[1], [3], [1]], np.int64)
    updates = g.normal(size=(len(idx), 3)).astype(np.float32)
    got = run(f"{S('f32', [4, 3])} scatter-nd(%p0, %p1, %p2), reduction={reduction}", data, idx, updates)
    want = ort_run("ScatterND", [data, idx, updates], reduction=reduction)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    idx2 = np.array([[0, 1], [-1, 2]], np.int64)
    upd2 = np.array([5.0, 6.0], np.float32)
    got = run(f"{S('f32', [4, 3])} scatter-nd(%p0, %p1, %p2), reduction={reduction}", data, idx2, upd2)
    np.testing.assert_allclose(got, ort_run("ScatterND", [data, idx2, upd2], reduction=reduction), rtol=1e-6)


# ---------------------------------------------------------------- reductions

@pytest.mark.parametrize("kind,fn", [("add", lambda t, d: t.sum(d)),
                                     ("multiply", lambda t, d: t.prod(d[0]).prod(d[1] - 1)),
                                     ("maximum", lambda t, d: t.amax(d)), ("minimum", lambda t, d: t.amin(d))])
def test_reduce_float_kinds_match_torch(kind, fn):
    x = rng(14).uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    got = run(f"{S('f32', [4])} reduce(%p0), dimensions={{0,2}}, kind={kind}", x)
    np.testing.assert_allclose(got, fn(T(x).double(), (0, 2)).numpy(), rtol=1e-5)


@pytest.mark.parametrize("kind,fn", [("and", lambda x, y: x & y), ("or", lambda x, y: x | y),
                                     ("xor", lambda x, y: x ^ y), ("add", lambda x, y: wrap(x + y, 8)),
                                     ("maximum", max), ("minimum", min)])
def test_reduce_integer_kinds(kind, fn):
    x = rng(15).integers(-128, 128, (3, 5)).astype(np.int8)
    got = run(f"{S('s8', [3])} reduce(%p0), dimensions={{1}}, kind={kind}", x)
    assert got.tolist() == [functools.reduce(fn, row) for row in x.tolist()]


def test_reduce_pred_and_empty_reductions():
    p = np.array([[True, False], [True, True]])
    assert run(f"{S('pred', [2])} reduce(%p0), dimensions={{1}}, kind=and", p).tolist() == [False, True]
    assert run(f"{S('pred', [2])} reduce(%p0), dimensions={{0}}, kind=or", p).tolist() == [True, True]
    e = np.zeros((0, 3), np.float32)
    assert run(f"{S('f32', [3])} reduce(%p0), dimensions={{0}}, kind=add", e).tolist() == [0, 0, 0]
    assert run(f"{S('f32', [3])} reduce(%p0), dimensions={{0}}, kind=maximum", e).tolist() == [-math.inf] * 3
    ei = np.zeros((0, 2), np.int32)
    assert run(f"{S('s32', [2])} reduce(%p0), dimensions={{0}}, kind=minimum", ei).tolist() == [2**31 - 1] * 2


def test_reduce_f16_accumulates_in_f32():
    x = np.full(4096, 0.1, np.float16)
    got = run(f"{S('f16', [])} reduce(%p0), dimensions={{0}}, kind=add", x)
    assert got.dtype == F16
    np.testing.assert_allclose(float(got), 4096 * float(np.float16(0.1)), rtol=1e-3)


@pytest.mark.parametrize("opcode,onnx_op", [("argmax", "ArgMax"), ("argmin", "ArgMin")])
@pytest.mark.parametrize("last", [False, True])
def test_argmax_argmin_match_onnx(opcode, onnx_op, last):
    x = rng(16).integers(0, 3, (4, 6)).astype(np.float32)  # many ties
    for axis in (0, 1):
        want = ort_run(onnx_op, [x], out_dtype=np.int64, axis=axis, keepdims=0, select_last_index=int(last))
        extra = ", select_last_index=true" if last else ""
        got = run(f"{S('s64', want.shape)} {opcode}(%p0), dimension={axis}{extra}", x)
        np.testing.assert_array_equal(got, want)


def _pool_line(kind, out_shape, window, strides, low, high, dilations=None, extra=""):
    line = (f"{S('f32', out_shape)} reduce-window(%p0), kind={kind}, padding_high={L(high)}, "
            f"padding_low={L(low)}, window_dimensions={L(window)}, window_strides={L(strides)}")
    if dilations is not None:
        line += f", window_dilations={L(dilations)}"
    return line + extra


def test_reduce_window_max_matches_onnx_maxpool():
    x = rng(17).normal(size=(2, 3, 7, 6)).astype(np.float32)
    want = ort_run("MaxPool", [x], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], dilations=[2, 1])
    got = run(_pool_line("maximum", want.shape, (1, 1, 3, 2), (1, 1, 2, 1), (0, 0, 1, 0), (0, 0, 1, 1),
                         (1, 1, 2, 1)), x)
    np.testing.assert_array_equal(got, want)
    want_min = -ort_run("MaxPool", [-x], kernel_shape=[2, 2], strides=[1, 2], pads=[0, 1, 1, 0])
    got = run(_pool_line("minimum", want_min.shape, (1, 1, 2, 2), (1, 1, 1, 2), (0, 0, 0, 1), (0, 0, 1, 0)), x)
    np.testing.assert_array_equal(got, want_min)


@pytest.mark.parametrize("include_pad", [False, True])
def test_reduce_window_avg_matches_onnx_averagepool(include_pad):
    x = rng(18).normal(size=(1, 2, 6, 7)).astype(np.float32)
    want = ort_run("AveragePool", [x], opset=19, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 2],
                   count_include_pad=int(include_pad))
    extra = ", count_include_pad=true" if include_pad else ""
    got = run(_pool_line("avg", want.shape, (1, 1, 3, 3), (1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 2), extra=extra), x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if include_pad:  # add = average over the whole window times its size
        got = run(_pool_line("add", want.shape, (1, 1, 3, 3), (1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 2)), x)
        np.testing.assert_allclose(got, want * 9, rtol=1e-5, atol=1e-5)


def test_reduce_window_nhwc_and_empty_batch():
    x = rng(19).normal(size=(1, 7, 6, 2)).astype(np.float32)
    want = ort_run("MaxPool", [x.transpose(0, 3, 1, 2)], kernel_shape=[3, 3], strides=[2, 2]).transpose(0, 2, 3, 1)
    got = run(_pool_line("maximum", want.shape, (1, 3, 3, 1), (1, 2, 2, 1), (0,) * 4, (0,) * 4), x)
    np.testing.assert_array_equal(got, want)
    empty = np.zeros((0, 2, 4, 4), np.float32)
    got = run(_pool_line("maximum", (0, 2, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2), (0,) * 4, (0,) * 4), empty)
    assert got.shape == (0, 2, 2, 2)


def test_reduce_window_integer_max():
    x = rng(20).integers(-100, 100, (1, 1, 5, 5)).astype(np.int32)
    want = ort_run("MaxPool", [x.astype(np.float32)], kernel_shape=[2, 2], strides=[1, 1], pads=[1, 1, 0, 0])
    line = _pool_line("maximum", want.shape, (1, 1, 2, 2), (1, 1, 1, 1), (0, 0, 1, 1), (0,) * 4)
    got = run(line.replace("f32", "s32", 1), x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumsum_matches_onnx(exclusive, reverse):
    x = rng(21).normal(size=(3, 5)).astype(np.float32)
    want = ort_run("CumSum", [x, np.array(1, np.int64)], exclusive=int(exclusive), reverse=int(reverse))
    extra = (", exclusive=true" if exclusive else "") + (", reverse=true" if reverse else "")
    got = run(f"{S('f32', [3, 5])} cumsum(%p0), dimension=1{extra}", x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- dot

def _dot_line(dtype, out_shape, lb, lc, rb, rc):
    return (f"{S(dtype, out_shape)} dot(%p0, %p1), lhs_batch_dims={L(lb)}, lhs_contracting_dims={L(lc)}, "
            f"rhs_batch_dims={L(rb)}, rhs_contracting_dims={L(rc)}")


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims,subscripts", [
    ((3, 4), (4, 5), ((), (1,), (), (0,)), "ik,kj->ij"),
    ((4, 2, 3), (2, 4, 5), ((1,), (0,), (0,), (1,)), "kbi,bkj->bij"),
    ((2, 3, 4, 5), (5, 2, 4, 6), ((0,), (2, 3), (1,), (2, 0)), "bilm,mbld->bid"),
    ((2, 0), (0, 3), ((), (1,), (), (0,)), "ik,kj->ij"),
])
def test_dot_general_matches_einsum(lhs_shape, rhs_shape, dims, subscripts):
    g = rng(22)
    a, b = g.normal(size=lhs_shape).astype(np.float32), g.normal(size=rhs_shape).astype(np.float32)
    want = torch.einsum(subscripts, T(a).double(), T(b).double()).numpy()
    got = run(_dot_line("f32", want.shape, *dims), a, b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dot_half_accumulates_in_f32():
    g = rng(23)
    a, b = g.uniform(0, 1, (2, 2048)).astype(np.float16), g.uniform(0, 1, (2048, 3)).astype(np.float16)
    got = run(_dot_line("f16", (2, 3), (), (1,), (), (0,)), a, b)
    assert got.dtype == F16
    np.testing.assert_allclose(got.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3)


def test_dot_s8_into_s32():
    g = rng(24)
    a, b = g.integers(-128, 128, (3, 64)).astype(np.int8), g.integers(-128, 128, (64, 2)).astype(np.int8)
    got = run(_dot_line("s32", (3, 2), (), (1,), (), (0,)), a, b)
    assert got.dtype == np.int32
    assert got.tolist() == [[sum(x * y for x, y in zip(row, col)) for col in zip(*b.tolist())] for row in a.tolist()]


# ---------------------------------------------------------------- convolution

def _conv_line(dtype, out_shape, labels, strides, low, high, dilation, groups):
    return (f"{S(dtype, out_shape)} convolution(%p0, %p1), dim_labels={labels}, feature_group_count={groups}, "
            f"padding_high={L(high)}, padding_low={L(low)}, rhs_dilation={L(dilation)}, window_strides={L(strides)}")


def test_convolution_nchw_matches_onnx_conv():
    g = rng(25)
    x, w = g.normal(size=(2, 4, 9, 8)).astype(np.float32), g.normal(size=(6, 2, 3, 3)).astype(np.float32)
    want = ort_run("Conv", [x, w], group=2, strides=[2, 1], pads=[1, 0, 2, 1], dilations=[1, 2])
    got = run(_conv_line("f32", want.shape, "bf01_oi01->bf01", (2, 1), (1, 0), (2, 1), (1, 2), 2), x, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_convolution_nhwc_hwio_matches_torch():
    g = rng(26)
    x, w = g.normal(size=(2, 8, 7, 3)).astype(np.float32), g.normal(size=(3, 2, 3, 5)).astype(np.float32)
    want = F.conv2d(T(x).permute(0, 3, 1, 2), T(w).permute(3, 2, 0, 1), stride=(1, 2), padding=(1, 1))
    want = want.permute(0, 2, 3, 1)
    got = run(_conv_line("f32", want.shape, "b01f_01io->b01f", (1, 2), (1, 1), (1, 1), (1, 1), 1), x, w)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_convolution_depthwise_and_odd_labels_match_torch():
    g = rng(27)
    x, w = g.normal(size=(1, 4, 6, 6)).astype(np.float32), g.normal(size=(8, 1, 3, 3)).astype(np.float32)
    want = F.conv2d(T(x), T(w), groups=4, dilation=2, padding=2).numpy()
    got = run(_conv_line("f32", want.shape, "bf01_oi01->bf01", (1, 1), (2, 2), (2, 2), (2, 2), 4), x, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # input f,b,0,1; filter 1,0,i,o; output 0,b,f,1
    xt, wt = np.ascontiguousarray(x.transpose(1, 0, 2, 3)), np.ascontiguousarray(w.transpose(3, 2, 1, 0))
    want_t = want.transpose(2, 0, 1, 3)
    got = run(_conv_line("f32", want_t.shape, "fb01_10io->0bf1", (1, 1), (2, 2), (2, 2), (2, 2), 4), xt, wt)
    np.testing.assert_allclose(got, want_t, rtol=1e-4, atol=1e-4)


def test_convolution_1d_and_3d_match_torch():
    g = rng(28)
    x, w = g.normal(size=(2, 3, 10)).astype(np.float32), g.normal(size=(4, 3, 3)).astype(np.float32)
    want = F.conv1d(T(x), T(w), stride=3, padding=2).numpy()
    got = run(_conv_line("f32", want.shape, "bf0_oi0->bf0", (3,), (2,), (2,), (1,), 1), x, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    x3, w3 = g.normal(size=(1, 2, 4, 5, 3)).astype(np.float32), g.normal(size=(2, 2, 2, 3, 1)).astype(np.float32)
    want = F.conv3d(T(x3), T(w3), padding=(1, 0, 0)).numpy()
    got = run(_conv_line("f32", want.shape, "bf012_oi012->bf012", (1, 1, 1), (1, 0, 0), (1, 0, 0), (1, 1, 1), 1),
              x3, w3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_convolution_f16_and_empty_batch():
    g = rng(29)
    x, w = g.normal(size=(1, 8, 5, 5)).astype(np.float16), g.normal(size=(4, 8, 3, 3)).astype(np.float16)
    want = F.conv2d(T(x).float(), T(w).float()).half().float().numpy()
    got = run(_conv_line("f16", want.shape, "bf01_oi01->bf01", (1, 1), (0, 0), (0, 0), (1, 1), 1), x, w)
    assert got.dtype == F16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    empty = np.zeros((0, 8, 5, 5), np.float16)
    got = run(_conv_line("f16", (0, 4, 3, 3), "bf01_oi01->bf01", (1, 1), (0, 0), (0, 0), (1, 1), 1), empty, w)
    assert got.shape == (0, 4, 3, 3)


# ---------------------------------------------------------------- composites

@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_torch(log):
    x = rng(30).normal(size=(3, 4, 5)).astype(np.float32) * 10
    extra = ", log=true" if log else ""
    got = run(f"{S('f32', x.shape)} softmax(%p0), dimension=1{extra}", x)
    fn = torch.log_softmax if log else torch.softmax
    np.testing.assert_allclose(got, fn(T(x).double(), 1).numpy(), rtol=1e-5, atol=1e-6)
    xh = x.astype(np.float16)
    got = run(f"{S('f16', x.shape)} softmax(%p0), dimension=2{extra}", xh)
    np.testing.assert_allclose(got.astype(np.float32), fn(T(xh).float(), 2).half().float().numpy(),
                               rtol=2e-3, atol=2e-3)


def test_layer_norm_matches_onnx():
    g = rng(31)
    x = g.normal(size=(2, 3, 4, 5)).astype(np.float32) * 3 + 1
    scale, bias = g.normal(size=(4, 5)).astype(np.float32), g.normal(size=(4, 5)).astype(np.float32)
    want = ort_run("LayerNormalization", [x, scale, bias], opset=17, axis=-2, epsilon=1e-3)
    got = run(f"{S('f32', x.shape)} layer-norm(%p0, %p1, %p2), dimensions={{2,3}}, epsilon=0.001", x, scale, bias)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_rms_norm_matches_torch():
    g = rng(32)
    x, scale = g.normal(size=(3, 8)).astype(np.float32), g.normal(size=(8,)).astype(np.float32)
    want = F.rms_norm(T(x).double(), (8,), T(scale).double(), eps=1e-6).numpy()
    got = run(f"{S('f32', x.shape)} rms-norm(%p0, %p1), dimensions={{1}}, epsilon=1e-06", x, scale)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    xb = x.astype(BF16)
    got = run(f"{S('bf16', x.shape)} rms-norm(%p0, %p1), dimensions={{1}}, epsilon=1e-06", xb, scale.astype(BF16))
    assert got.dtype == BF16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_batch_norm_inference_matches_onnx_and_torch():
    g = rng(33)
    x = g.normal(size=(2, 3, 4, 4)).astype(np.float32)
    scale, offset, mean = (g.normal(size=3).astype(np.float32) for _ in range(3))
    var = g.uniform(0.5, 2, 3).astype(np.float32)
    want = ort_run("BatchNormalization", [x, scale, offset, mean, var], opset=15, epsilon=1e-5)
    got = run(f"{S('f32', x.shape)} batch-norm-inference(%p0, %p1, %p2, %p3, %p4), epsilon=1e-05, feature_index=1",
              x, scale, offset, mean, var)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    got = run(f"{S('f32', xt.shape)} batch-norm-inference(%p0, %p1, %p2, %p3, %p4), epsilon=1e-05, feature_index=3",
              xt, scale, offset, mean, var)
    want_t = F.batch_norm(T(x), T(mean), T(var), T(scale), T(offset), eps=1e-5).permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(got, want_t, rtol=1e-5, atol=1e-5)


def _attention_line(q, v, n_operands, scale, causal, dtype="f32"):
    operands = ", ".join(f"%p{i}" for i in range(n_operands))
    out = q.shape[:-1] + v.shape[-1:]
    return f"{S(dtype, out)} attention({operands}), causal={'true' if causal else 'false'}, scale={scale}"


def _qkv(seed, q_shape, k_shape, dv, dtype=np.float32):
    g = rng(seed)
    return (g.normal(size=q_shape).astype(dtype), g.normal(size=k_shape).astype(dtype),
            g.normal(size=k_shape[:-1] + (dv,)).astype(dtype))


def test_attention_plain_and_causal_match_torch():
    q, k, v = _qkv(34, (2, 4, 5, 8), (2, 4, 7, 8), 6)
    got = run(_attention_line(q, v, 3, 0.3, False), q, k, v)
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), scale=0.3).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    q, k, v = _qkv(35, (2, 3, 6, 4), (2, 3, 6, 4), 4)
    got = run(_attention_line(q, v, 3, 0.5, True), q, k, v)
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), scale=0.5, is_causal=True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_causal_aligns_to_the_bottom_right():
    q, k, v = _qkv(36, (1, 2, 3, 4), (1, 2, 6, 4), 5)
    got = run(_attention_line(q, v, 3, 0.5, True), q, k, v)
    allowed = torch.tensor([[j <= i + 3 for j in range(6)] for i in range(3)])
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), attn_mask=allowed, scale=0.5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_masks_match_torch():
    q, k, v = _qkv(37, (2, 2, 5, 4), (2, 2, 7, 4), 3)
    keep = rng(38).random((5, 7)) > 0.4
    keep[:, 0] = True
    got = run(_attention_line(q, v, 4, 0.5, False), q, k, v, keep)
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), attn_mask=T(keep), scale=0.5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    bias = rng(39).normal(size=(2, 1, 5, 7)).astype(np.float32)
    got = run(_attention_line(q, v, 4, 0.5, False), q, k, v, bias)
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), attn_mask=T(bias).double(),
                                          scale=0.5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_fully_masked_row_is_zero():
    q, k, v = _qkv(40, (1, 4, 4), (1, 5, 4), 2)
    keep = np.ones((4, 5), bool)
    keep[2] = False
    got = run(_attention_line(q, v, 4, 1.0, False), q, k, v, keep)
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), attn_mask=T(keep), scale=1.0)
    assert np.all(got[:, 2] == 0)
    rows = [0, 1, 3]
    np.testing.assert_allclose(got[:, rows], want.numpy()[:, rows], rtol=1e-5, atol=1e-6)


def test_attention_grouped_query_heads_match_torch():
    q, k, v = _qkv(41, (2, 8, 5, 4), (2, 2, 5, 4), 4)
    got = run(_attention_line(q, v, 3, 0.5, True), q, k, v)
    want = F.scaled_dot_product_attention(T(q).double(), T(k).double(), T(v).double(), scale=0.5, is_causal=True,
                                          enable_gqa=True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_f16_and_rank_two():
    q, k, v = _qkv(42, (5, 8), (7, 8), 3, np.float16)
    got = run(_attention_line(q, v, 3, 0.25, False, "f16"), q, k, v)
    want = F.scaled_dot_product_attention(T(q).float()[None], T(k).float()[None], T(v).float()[None], scale=0.25)
    assert got.dtype == F16
    np.testing.assert_allclose(got.astype(np.float32), want[0].numpy(), rtol=3e-3, atol=3e-3)


# ---------------------------------------------------------------- structural: modules, fusions, constants

MODULE = """HloModule m, output_names={sum,parts}

%fused {
  %a = f32[2,3]{1,0} parameter(0)
  %b = f32[2,3]{1,0} parameter(1)
  %s = f32[2,3]{1,0} add(%a, %b)
  %e = f32[2,3]{1,0} exp(%s)
  ROOT %t = (f32[2,3]{1,0}, f32[2,3]{1,0}) tuple(%s, %e)
}

ENTRY %main {
  %x = f32[2,3]{1,0} parameter(0), name=x
  %y = f32[2,3]{1,0} parameter(1), name=y
  %f = (f32[2,3]{1,0}, f32[2,3]{1,0}) fusion(%x, %y), kind=multi_output, calls=%fused
  %g0 = f32[2,3]{1,0} get-tuple-element(%f), index=0
  %g1 = f32[2,3]{1,0} get-tuple-element(%f), index=1
  %r = f32[2]{0} reduce(%g1), dimensions={1}, kind=add
  ROOT %out = (f32[2,3]{1,0}, f32[2]{0}) tuple(%g0, %r)
}
"""


def test_evaluate_module_with_multi_output_fusion():
    module = parse(MODULE)
    g = rng(43)
    x, y = g.normal(size=(2, 3)).astype(np.float32), g.normal(size=(2, 3)).astype(np.float32)
    out = evaluate(module, {"y": y, "x": x})
    assert list(out) == ["sum", "parts"]
    np.testing.assert_allclose(out["sum"], [[a + b for a, b in zip(r, s)] for r, s in zip(x.tolist(), y.tolist())],
                               rtol=1e-6)
    np.testing.assert_allclose(out["parts"], [sum(math.exp(a + b) for a, b in zip(r, s))
                                              for r, s in zip(x.tolist(), y.tolist())], rtol=1e-5)
    with pytest.raises(EvaluationError, match="no input named 'y'"):
        evaluate(module, {"x": x})


def test_evaluate_unnamed_parameter_by_position():
    module = parse("""HloModule m, output_names={d}

ENTRY %main {
  %a = s32[2]{0} parameter(0), name=a
  %b = s32[2]{0} parameter(1)
  %d = s32[2]{0} subtract(%a, %b)
  ROOT %t = (s32[2]{0}) tuple(%d)
}
""")
    out = evaluate(module, {"a": np.array([5, 6], np.int32), "second": np.array([1, 1], np.int32)})
    assert out["d"].tolist() == [4, 5]


def test_constants_value_splat_and_ref():
    module = parse("""ENTRY %main {
  %v = s32[2,2]{1,0} constant(), value={1,2,3,4}
  %s = s32[2,2]{1,0} constant(), splat=10
  %w = s32[2,2]{1,0} constant(), ref=weights
  %a = s32[2,2]{1,0} add(%v, %s)
  ROOT %m = s32[2,2]{1,0} multiply(%a, %w)
}
""")
    module.constants["weights"] = np.array([1.0, 2.0, 3.0, -1.0])  # reshaped and cast to s32
    got = evaluate_computation(module.entry, [], module.constants)
    assert got.dtype == np.int32 and got.tolist() == [[11, 24], [39, -14]]
    with pytest.raises(EvaluationError, match=r"%w \(constant\): no data for ref 'weights'"):
        evaluate_computation(module.entry, [], {})
    half = parse("ENTRY %main {\n  ROOT %c = bf16[3]{0} constant(), value={1.5,-inf,0.1}\n}\n")
    got = evaluate_computation(half.entry, [], {})
    assert got.dtype == BF16 and got.astype(np.float32).tolist() == [1.5, -math.inf, float(ml_dtypes.bfloat16(0.1))]


def test_symbolic_dims_bind_from_arguments():
    module = parse("""ENTRY %main {
  %x = f32[N,3]{1,0} parameter(0), name=x
  %t = f32[3,N]{1,0} transpose(%x), dimensions={1,0}
  %flat = f32[M]{0} reshape(%t)
  %b = f32[2,M]{1,0} broadcast(%flat), dimensions={1}
  %i = s32[N]{0} iota(), iota_dimension=0
  ROOT %out = (f32[2,M]{1,0}, s32[N]{0}) tuple(%b, %i)
}
""")
    for n in (1, 4):
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        flat, iota = evaluate_computation(module.entry, [x], {})
        np.testing.assert_array_equal(flat, np.stack([x.T.reshape(-1)] * 2))
        assert iota.tolist() == list(range(n))


def test_evaluate_instruction_folds_one_op():
    module = parse(f"ENTRY %main {{\n  %a = {S('f16', [3])} parameter(0)\n  ROOT %e = {S('f16', [3])} exp(%a)\n}}\n")
    got = evaluate_instruction(module.entry.root, [np.array([0.0, 1.0, 2.0], np.float16)])
    assert got.dtype == F16
    assert got.tolist() == [float(np.float16(math.exp(v))) for v in (0.0, 1.0, 2.0)]


def test_rule_returning_wrong_dims_is_reported(monkeypatch):
    monkeypatch.setitem(EVAL_RULES, "exp", lambda inst, ops: ops[0][:1])
    with pytest.raises(EvaluationError, match=r"%r \(exp\): result has dims \[1, 3\], expected \[2, 3\]"):
        run(f"{S('f32', [2, 3])} exp(%p0)", np.zeros((2, 3), np.float32))


def test_numpy_errors_name_the_instruction():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(EvaluationError, match=r"%p0 \(parameter\)"):
        parsed = parse(f"ENTRY %main {{\n  ROOT %p0 = {S('f32', [2, 3])} parameter(0)\n}}\n")
        evaluate_computation(parsed.entry, [np.zeros((3, 2), np.float32)], {})
    with pytest.raises(EvaluationError, match=r"%r \(dynamic-slice\): window of size 5"):
        run(f"{S('f32', [5, 1])} dynamic-slice(%p0, %p1, %p1), slice_sizes={{5,1}}", x, np.array(0, np.int32))
