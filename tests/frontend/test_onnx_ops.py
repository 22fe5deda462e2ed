"""Each ONNX op on a tiny model: import, verify, evaluate, compare with onnxruntime."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.ir import Module
from mlcc.hlo.verifier import verify_module

RNG = np.random.default_rng(0)
INT_MAX = np.iinfo(np.int64).max


def r(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def ri(*shape: int, lo: int = -5, hi: int = 6, dtype=np.int64) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(dtype)


def rb(*shape: int) -> np.ndarray:
    return RNG.random(shape) < 0.5


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@dataclass
class K:
    """An input given as an initializer (known at import time)."""
    value: np.ndarray


@dataclass
class Case:
    id: str
    op: str
    inputs: list[Any]           # arrays (graph inputs), K(array) (initializers) or None (absent optional input)
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 18
    outputs: int = 1
    domain: str = ""            # the op's domain ("ai.onnx.ml", ...); its opset is ``opset``, the default domain's 18


def build_model(nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray],
                outputs: list[str], opset: int, domain: str = "") -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in feeds.items()]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()]
    graph = helper.make_graph(nodes, "test", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    opsets = [helper.make_opsetid("", opset)] if not domain else [helper.make_opsetid("", 18),
                                                                   helper.make_opsetid(domain, opset)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    for out, value in zip(model.graph.output, run_ort(model, feeds).values()):  # declare what onnxruntime gives
        out.CopyFrom(helper.make_tensor_value_info(out.name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    return model


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def assert_matches(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def check_case(case: Case) -> Module:
    feeds, consts, names = {}, {}, []
    for i, x in enumerate(case.inputs):
        if x is None:
            names.append("")
        elif isinstance(x, K):
            consts[f"k{i}"] = x.value
            names.append(f"k{i}")
        else:
            feeds[f"x{i}"] = x
            names.append(f"x{i}")
    while names and names[-1] == "":
        names.pop()
    outputs = [f"y{j}" for j in range(case.outputs)]
    node = helper.make_node(case.op, names, outputs, name=f"{case.op}_node", domain=case.domain, **case.attrs)
    model = build_model([node], feeds, consts, outputs, case.opset, case.domain)
    want = run_ort(model, feeds)
    module = import_onnx(model)
    verify_module(module)
    assert_matches(evaluate(module, feeds), want)
    return module


X = r(2, 3, 4)
POS = r(2, 3, 4, lo=0.1, hi=3.0)
UNIT = r(2, 3, 4, lo=-0.9, hi=0.9)
IMG = r(1, 2, 4, 5)
Q, KEY, V = r(2, 4, 5, 8), r(2, 2, 6, 8), r(2, 2, 6, 3)
# a Scan body: state + x is both the next state and the scan output
SUM_BODY = helper.make_graph(
    [helper.make_node("Add", ["s", "x"], ["s_next"]), helper.make_node("Identity", ["s_next"], ["out"])], "sum",
    [helper.make_tensor_value_info("s", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    [helper.make_tensor_value_info("s_next", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])])

UNARY = ["Abs", "Neg", "Exp", "Tanh", "Erf", "Sigmoid", "Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh",
         "Floor", "Ceil", "Sign", "Reciprocal", "Relu", "Softplus", "Softsign"]
CASES: list[Case] = [Case(op, op, [X]) for op in UNARY] + [
    Case("Log", "Log", [POS]), Case("Sqrt", "Sqrt", [POS]), Case("Acosh", "Acosh", [POS + 1]),
    Case("Asin", "Asin", [UNIT]), Case("Acos", "Acos", [UNIT]), Case("Atanh", "Atanh", [UNIT]),
    Case("Round", "Round", [np.array([0.5, 1.5, 2.5, -0.5, -1.7, 2.2], np.float32)]),
    Case("Not", "Not", [rb(3, 4)]),
    Case("BitwiseNot", "BitwiseNot", [ri(3, 4, dtype=np.int32)]),
    Case("IsNaN", "IsNaN", [np.array([1.0, np.nan, -np.inf, 0.0], np.float32)]),
    Case("IsInf", "IsInf", [np.array([1.0, np.nan, -np.inf, np.inf], np.float32)]),
    Case("IsInf-pos", "IsInf", [np.array([1.0, np.nan, -np.inf, np.inf], np.float32)], {"detect_negative": 0}),
    Case("IsInf-neg", "IsInf", [np.array([1.0, np.nan, -np.inf, np.inf], np.float32)], {"detect_positive": 0}),
    # binary with numpy broadcasting
    Case("Add", "Add", [X, r(4)]), Case("Sub", "Sub", [r(2, 1, 4), r(3, 1)]), Case("Mul", "Mul", [X, K(r(3, 1))]),
    Case("Div", "Div", [X, r(2, 3, 4, lo=0.5, hi=2.0)]),
    Case("Div-int", "Div", [ri(3, 4, lo=-20, hi=20, dtype=np.int32), ri(3, 4, lo=1, hi=6, dtype=np.int32)]),
    Case("Add-scalar-const", "Add", [X, K(np.array(1.5, np.float32))]),
    Case("Mul-identity", "Mul", [X, K(np.ones((4,), np.float32))]),
    Case("Add-zero-broadcasts", "Add", [r(4), K(np.zeros((2, 3, 4), np.float32))]),
    Case("Pow", "Pow", [POS, r(2, 3, 4)]), Case("Pow-int-exp", "Pow", [X, K(i64(3))]),
    Case("Mod-int", "Mod", [ri(3, 4, lo=-20, hi=20), ri(3, 4, lo=1, hi=6) * np.where(rb(3, 4), 1, -1)]),
    Case("Mod-fmod", "Mod", [X * 5, r(2, 3, 4, lo=0.5, hi=2.0)], {"fmod": 1}),
    Case("And", "And", [rb(3, 4), rb(4)]), Case("Or", "Or", [rb(3, 4), rb(3, 4)]), Case("Xor", "Xor", [rb(3, 4), rb(1)]),
    Case("BitwiseAnd", "BitwiseAnd", [ri(3, 4, dtype=np.int32), ri(4, dtype=np.int32)]),
    Case("BitwiseOr", "BitwiseOr", [ri(3, 4, dtype=np.int32), ri(3, 4, dtype=np.int32)]),
    Case("BitwiseXor", "BitwiseXor", [ri(3, 4, dtype=np.int32), ri(3, 4, dtype=np.int32)]),
    Case("BitShift-left", "BitShift", [ri(6, lo=0, hi=40, dtype=np.uint8), ri(6, lo=0, hi=4, dtype=np.uint8)],
         {"direction": "LEFT"}),
    Case("BitShift-right", "BitShift", [ri(6, lo=0, hi=200, dtype=np.uint32), ri(6, lo=0, hi=4, dtype=np.uint32)],
         {"direction": "RIGHT"}),
    Case("Equal", "Equal", [ri(3, 4, lo=0, hi=3), ri(4, lo=0, hi=3)]),
    Case("Less", "Less", [X, r(4)]), Case("LessOrEqual", "LessOrEqual", [ri(3, 4), ri(3, 4)]),
    Case("Greater", "Greater", [X, r(3, 1)]), Case("GreaterOrEqual", "GreaterOrEqual", [ri(3, 4), ri(3, 1)]),
    Case("Max", "Max", [X, r(4), r(3, 1)]), Case("Min", "Min", [X, r(4)]), Case("Sum", "Sum", [X, r(4), r(2, 3, 4)]),
    Case("Mean", "Mean", [X, r(4), r(3, 4)]), Case("Max-one", "Max", [X]),
    Case("Where", "Where", [rb(3, 4), r(2, 3, 4), r(4)]),
    Case("Where-const", "Where", [rb(3, 4), K(np.array(0.0, np.float32)), K(np.array(-np.inf, np.float32))]),
    Case("Cast-f2i", "Cast", [X * 3], {"to": TensorProto.INT32}),
    Case("Cast-f2b", "Cast", [np.array([0.0, 1.5, -2.0, 0.0], np.float32)], {"to": TensorProto.BOOL}),
    Case("Cast-i2f", "Cast", [ri(3, 4)], {"to": TensorProto.FLOAT}),
    Case("Cast-b2f", "Cast", [rb(3, 4)], {"to": TensorProto.FLOAT}),
    Case("Cast-f2f16", "Cast", [X], {"to": TensorProto.FLOAT16}),
    Case("CastLike", "CastLike", [ri(3, 4), r(1)]),
    Case("Clip-attrs", "Clip", [X], {"min": -0.5, "max": 0.7}, opset=6),
    Case("Clip-both", "Clip", [X, K(np.array(-0.5, np.float32)), K(np.array(0.7, np.float32))]),
    Case("Clip-min", "Clip", [X, K(np.array(-0.5, np.float32))]),
    Case("Clip-max", "Clip", [X, None, np.array(0.3, np.float32)]),
    Case("Clip-int", "Clip", [ri(3, 4), K(i64(-2)[0]), K(i64(3)[0])]),
    # activations
    Case("LeakyRelu", "LeakyRelu", [X], {"alpha": 0.2}), Case("Elu", "Elu", [X], {"alpha": 0.7}),
    Case("Selu", "Selu", [X]), Case("Celu", "Celu", [X], {"alpha": 1.3}),
    Case("ThresholdedRelu", "ThresholdedRelu", [X], {"alpha": 0.5}),
    Case("HardSigmoid", "HardSigmoid", [X * 4], {"alpha": 0.3, "beta": 0.4}),
    Case("HardSwish", "HardSwish", [X * 4]), Case("Mish", "Mish", [X]),
    Case("PRelu", "PRelu", [X, K(r(3, 1))]), Case("PRelu-vec", "PRelu", [X, r(4)]),
    Case("Gelu", "Gelu", [X], opset=20), Case("Gelu-tanh", "Gelu", [X], {"approximate": "tanh"}, opset=20),
    Case("Shrink", "Shrink", [X], {"bias": 0.3, "lambd": 0.6}),
    # matrix products
    Case("MatMul-2d", "MatMul", [r(3, 4), r(4, 5)]), Case("MatMul-batch-weight", "MatMul", [X, K(r(4, 5))]),
    Case("MatMul-vec-mat", "MatMul", [r(4), r(2, 4, 5)]), Case("MatMul-mat-vec", "MatMul", [X, r(4)]),
    Case("MatMul-vec-vec", "MatMul", [r(4), r(4)]), Case("MatMul-batched", "MatMul", [X, r(2, 4, 5)]),
    Case("MatMul-bcast", "MatMul", [r(2, 1, 3, 4), r(3, 4, 5)]), Case("MatMul-mat-batch", "MatMul", [r(3, 4), r(2, 4, 5)]),
    Case("MatMul-ones-batch", "MatMul", [r(1, 3, 4), r(2, 4, 5)]), Case("MatMul-ones-rhs", "MatMul", [X, r(1, 1, 4, 5)]),
    Case("MatMul-int", "MatMul", [ri(3, 4, dtype=np.int32), ri(4, 2, dtype=np.int32)]),
    Case("Gemm", "Gemm", [r(3, 4), r(4, 5), r(5)]),
    Case("Gemm-trans", "Gemm", [r(4, 3), K(r(5, 4)), K(r(3, 5))], {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    Case("Gemm-noC", "Gemm", [r(3, 4), r(4, 5)], {"alpha": 1.5}),
    Case("Gemm-scalarC", "Gemm", [r(3, 4), r(4, 5), K(np.array([0.25], np.float32))], {"beta": 3.0}),
    Case("Gemm-C-input", "Gemm", [r(3, 4), r(4, 5), r(3, 1)], {"beta": 0.5}),
    Case("Einsum-mm", "Einsum", [r(3, 4), r(4, 5)], {"equation": "ij,jk->ik"}),
    Case("Einsum-bmm", "Einsum", [X, r(2, 4, 5)], {"equation": "bij,bjk->bik"}),
    Case("Einsum-attn", "Einsum", [r(1, 2, 3, 4), r(1, 2, 5, 4)], {"equation": "bhqd,bhkd->bhqk"}),
    Case("Einsum-transpose", "Einsum", [r(3, 4)], {"equation": "ij->ji"}),
    Case("Einsum-sum", "Einsum", [X], {"equation": "ijk->i"}),
    Case("Einsum-dot", "Einsum", [r(4), r(4)], {"equation": "i,i->"}),
    Case("Einsum-chain", "Einsum", [r(2, 3), r(3, 4), r(4, 5)], {"equation": "ij,jk,kl->il"}),
    Case("Einsum-ellipsis", "Einsum", [X, r(2, 4, 5)], {"equation": "...ij,...jk->...ik"}),
    Case("Einsum-implicit", "Einsum", [r(3, 4), r(5, 4)], {"equation": "ij,kj"}),
    Case("Einsum-outer", "Einsum", [r(3), r(4)], {"equation": "i,j->ij"}),
    # softmax family: before opset 13 the input is flattened to 2-D at axis
    Case("Softmax", "Softmax", [X], opset=13), Case("Softmax-axis1", "Softmax", [X], {"axis": 1}, opset=13),
    Case("Softmax-old", "Softmax", [X], opset=11), Case("Softmax-old-axis0", "Softmax", [X], {"axis": 0}, opset=11),
    Case("LogSoftmax", "LogSoftmax", [X], {"axis": 1}, opset=13), Case("LogSoftmax-old", "LogSoftmax", [X], opset=11),
    Case("Hardmax", "Hardmax", [X], {"axis": 1}, opset=13), Case("Hardmax-old", "Hardmax", [X], opset=11),
    # normalizations
    Case("LayerNorm", "LayerNormalization", [X, r(4), r(4)], {"epsilon": 1e-3}, opset=17),
    Case("LayerNorm-axis1", "LayerNormalization", [X, K(r(3, 4))], {"axis": 1}, opset=17),
    Case("BatchNorm", "BatchNormalization", [r(2, 3, 4, 5), r(3), r(3), r(3), r(3, lo=0.5, hi=2)], {"epsilon": 1e-3}),
    Case("BatchNorm-2d", "BatchNormalization", [r(4, 3), r(3), r(3), r(3), r(3, lo=0.5, hi=2)]),
    Case("InstanceNorm", "InstanceNormalization", [r(2, 3, 4, 5), r(3), r(3)]),
    Case("GroupNorm", "GroupNormalization", [r(2, 6, 4, 3), r(6), r(6)], {"num_groups": 3}, opset=21),
    Case("LRN", "LRN", [r(2, 5, 3, 3)], {"size": 3, "alpha": 0.01, "beta": 0.7, "bias": 1.5}),
    # reductions
    Case("ReduceMean-attr", "ReduceMean", [X], {"axes": [1]}, opset=13),
    Case("ReduceMean", "ReduceMean", [X, K(i64(-1, 0))], {"keepdims": 0}),
    Case("ReduceMean-all", "ReduceMean", [X]),
    Case("ReduceSum-attr", "ReduceSum", [X], {"axes": [0, 2], "keepdims": 0}, opset=11),
    Case("ReduceSum", "ReduceSum", [X, K(i64(1))], opset=13),
    Case("ReduceSum-noop", "ReduceSum", [X, K(np.zeros((0,), np.int64))], {"noop_with_empty_axes": 1}, opset=13),
    Case("ReduceSum-int", "ReduceSum", [ri(3, 4), K(i64(1))], opset=13),
    *[Case(op, op, [POS, K(i64(1, 2))]) for op in ("ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                                    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")],
    Case("ReduceLogSumExp-big", "ReduceLogSumExp", [X * 40, K(i64(2))], {"keepdims": 0}),
    Case("ReduceMax-attr", "ReduceMax", [X], {"axes": [-1], "keepdims": 0}, opset=13),
    Case("ArgMax", "ArgMax", [X], {"axis": 1}), Case("ArgMin", "ArgMin", [X], {"axis": -1, "keepdims": 0}),
    Case("ArgMax-last", "ArgMax", [np.array([[1, 3, 3], [2, 2, 0]], np.float32)], {"axis": 1, "select_last_index": 1}),
    Case("CumSum", "CumSum", [X, K(i64(1)[0])]),
    Case("CumSum-excl-rev", "CumSum", [X, K(i64(-1)[0])], {"exclusive": 1, "reverse": 1}),
    # shapes and data movement
    Case("Transpose", "Transpose", [X], {"perm": [1, 2, 0]}), Case("Transpose-default", "Transpose", [X]),
    Case("Reshape", "Reshape", [X, K(i64(0, -1))]), Case("Reshape-3", "Reshape", [X, K(i64(4, 1, -1))]),
    Case("Reshape-allowzero", "Reshape", [np.zeros((0, 3), np.float32), K(i64(3, 0))], {"allowzero": 1}),
    Case("Flatten", "Flatten", [X]), Case("Flatten-0", "Flatten", [X], {"axis": 0}),
    Case("Flatten-neg", "Flatten", [X], {"axis": -1}),
    Case("Squeeze-attr", "Squeeze", [r(2, 1, 3, 1)], {"axes": [1]}, opset=11),
    Case("Squeeze", "Squeeze", [r(2, 1, 3, 1), K(i64(-1, 1))], opset=13),
    Case("Squeeze-all", "Squeeze", [r(2, 1, 3, 1)], opset=13),
    Case("Unsqueeze-attr", "Unsqueeze", [X], {"axes": [0, 4]}, opset=11),
    Case("Unsqueeze", "Unsqueeze", [X, K(i64(-1, 1))], opset=13),
    Case("Expand", "Expand", [r(3, 1), K(i64(2, 1, 4))]), Case("Expand-smaller", "Expand", [X, K(i64(3, 1))]),
    Case("Concat", "Concat", [X, r(2, 1, 4), r(2, 2, 4)], {"axis": 1}),
    Case("Concat-neg", "Concat", [X, r(2, 3, 1)], {"axis": -1}),
    Case("Concat-empty", "Concat", [X, np.zeros((2, 0, 4), np.float32)], {"axis": 1}),
    Case("Split-attr", "Split", [r(2, 6)], {"axis": 1, "split": [1, 2, 3]}, opset=11, outputs=3),
    Case("Split", "Split", [r(2, 6), K(i64(4, 2))], {"axis": 1}, opset=13, outputs=2),
    Case("Split-even", "Split", [r(6, 2)], opset=13, outputs=3),
    Case("Split-num-outputs", "Split", [r(7, 2)], {"num_outputs": 3}, opset=18, outputs=3),
    Case("Slice-attrs", "Slice", [X], {"starts": [1, 0], "ends": [2, -1], "axes": [1, 2]}, opset=9),
    Case("Slice", "Slice", [X, K(i64(0, 1)), K(i64(INT_MAX, -1)), K(i64(0, 2)), K(i64(1, 2))], opset=13),
    Case("Slice-neg-step", "Slice", [X, K(i64(-1)), K(i64(-INT_MAX)), K(i64(2)), K(i64(-1))], opset=13),
    Case("Slice-neg-step2", "Slice", [r(2, 7), K(i64(5)), K(i64(0)), K(i64(1)), K(i64(-2))], opset=13),
    Case("Slice-clamped", "Slice", [X, K(i64(-10, 1)), K(i64(10, 100))], opset=13),
    Case("Slice-empty", "Slice", [X, K(i64(2)), K(i64(1)), K(i64(1))], opset=13),
    Case("Tile", "Tile", [r(2, 3), K(i64(2, 3))]), Case("Tile-ones", "Tile", [r(2, 3), K(i64(1, 2))]),
    Case("Pad", "Pad", [r(2, 3), K(i64(0, 1, 2, 0))], opset=13),
    Case("Pad-value", "Pad", [r(2, 3), K(i64(1, 1, 1, 1)), K(np.array(1.5, np.float32))], opset=13),
    Case("Pad-negative", "Pad", [r(3, 4), K(i64(-1, 2, 0, -1))], opset=13),
    Case("Pad-reflect", "Pad", [r(3, 4), K(i64(2, 1, 1, 3))], {"mode": "reflect"}, opset=13),
    Case("Pad-edge", "Pad", [r(3, 4), K(i64(2, 1, 1, 3))], {"mode": "edge"}, opset=13),
    Case("Pad-wrap", "Pad", [r(3, 4), K(i64(1, 2, 2, 1))], {"mode": "wrap"}, opset=19),
    Case("Pad-axes", "Pad", [X, K(i64(1, 2)), None, K(i64(-1))], opset=18),
    Case("Pad-attrs", "Pad", [r(2, 3)], {"pads": [0, 1, 1, 0], "value": 2.0}, opset=2),
    Case("Gather", "Gather", [r(5, 3), ri(2, 4, lo=-5, hi=5)]), Case("Gather-axis1", "Gather", [X, K(i64(2, 0))],
                                                                     {"axis": 1}),
    Case("Gather-scalar", "Gather", [X, K(np.array(-1, np.int64))], {"axis": 2}),
    Case("GatherElements", "GatherElements", [X, ri(2, 3, 2, lo=-4, hi=4)], {"axis": 2}),
    Case("GatherND", "GatherND", [X, ri(5, 2, lo=0, hi=2)]),
    Case("GatherND-batch", "GatherND", [X, ri(2, 1, lo=0, hi=3)], {"batch_dims": 1}),
    Case("ScatterND", "ScatterND", [X, K(i64(1, 0, 0, 2).reshape(2, 2)), r(2, 4)]),
    Case("ScatterND-add", "ScatterND", [X, K(i64(1, 0, 1, 0).reshape(2, 2)), r(2, 4)], {"reduction": "add"}),
    Case("Shape", "Shape", [X]), Case("Shape-slice", "Shape", [X], {"start": 1, "end": -1}, opset=15),
    Case("Size", "Size", [X]),
    Case("ConstantOfShape", "ConstantOfShape", [K(i64(2, 3))],
         {"value": numpy_helper.from_array(np.array([7], np.int32))}),
    Case("ConstantOfShape-big", "ConstantOfShape", [K(i64(80, 80))]),
    Case("Identity", "Identity", [X]), Case("Dropout", "Dropout", [X, K(np.array(0.3, np.float32))]),
    Case("Dropout-mask", "Dropout", [X], outputs=2),
    Case("Range", "Range", [K(np.array(1.0, np.float32)), K(np.array(4.0, np.float32)), K(np.array(0.5, np.float32))]),
    Case("Range-int", "Range", [K(i64(10)[0]), K(i64(1)[0]), K(i64(-3)[0])]),
    Case("Trilu", "Trilu", [X]), Case("Trilu-lower-k", "Trilu", [X, K(i64(1)[0])], {"upper": 0}),
    Case("Trilu-upper-negk", "Trilu", [r(4, 3), K(i64(-1)[0])]),
    Case("OneHot", "OneHot", [ri(2, 3, lo=-4, hi=4), K(i64(4)), K(np.array([0.5, 2.0], np.float32))]),
    Case("OneHot-axis0", "OneHot", [ri(3, lo=0, hi=4), K(i64(4)), K(i64(0, 1))], {"axis": 0}),
    Case("DepthToSpace", "DepthToSpace", [r(1, 8, 2, 3)], {"blocksize": 2}),
    Case("DepthToSpace-CRD", "DepthToSpace", [r(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}),
    Case("SpaceToDepth", "SpaceToDepth", [r(1, 2, 4, 6)], {"blocksize": 2}),
    Case("EyeLike", "EyeLike", [r(3, 4)], {"k": 1}),
    # convolutions and pooling
    Case("Conv-2d", "Conv", [r(1, 2, 5, 5), K(r(3, 2, 3, 3)), K(r(3))], {"pads": [1, 1, 1, 1]}),
    Case("Conv-strided", "Conv", [r(2, 4, 7, 6), r(4, 2, 3, 2)], {"strides": [2, 1], "dilations": [1, 2], "group": 2,
                                                                   "pads": [1, 0, 2, 1]}),
    Case("Conv-1d", "Conv", [r(2, 3, 9), r(4, 3, 3), r(4)], {"strides": [2]}),
    Case("Conv-3d", "Conv", [r(1, 2, 4, 4, 4), r(2, 2, 2, 2, 2)], {"auto_pad": "SAME_UPPER"}),
    Case("Conv-same-lower", "Conv", [r(1, 1, 6, 6), r(1, 1, 4, 4)], {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    Case("Conv-valid", "Conv", [r(1, 1, 6, 6), r(2, 1, 3, 3)], {"auto_pad": "VALID"}),
    Case("Conv-depthwise", "Conv", [r(1, 4, 5, 5), r(4, 1, 3, 3)], {"group": 4}),
    Case("ConvTranspose", "ConvTranspose", [r(1, 2, 3, 3), r(2, 3, 3, 3), r(3)], {"strides": [2, 2]}),
    Case("ConvTranspose-pads", "ConvTranspose", [r(1, 2, 4, 3), r(2, 1, 3, 2)],
         {"strides": [2, 3], "pads": [1, 0, 1, 1], "output_padding": [1, 1]}),
    Case("ConvTranspose-group", "ConvTranspose", [r(1, 4, 3, 3), r(4, 2, 2, 2)], {"group": 2, "dilations": [2, 1]}),
    Case("ConvTranspose-1d-same", "ConvTranspose", [r(1, 2, 5), r(2, 2, 3)], {"strides": [2], "auto_pad": "SAME_UPPER"}),
    Case("MaxPool", "MaxPool", [r(1, 2, 6, 6)], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    Case("MaxPool-pads", "MaxPool", [r(1, 2, 5, 5)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    Case("MaxPool-ceil", "MaxPool", [r(1, 1, 6, 7)], {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    Case("MaxPool-dilated", "MaxPool", [r(1, 1, 7, 7)], {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    Case("MaxPool-same", "MaxPool", [r(1, 1, 5, 5)], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER",
                                                     "strides": [2, 2]}),
    Case("MaxPool-1d", "MaxPool", [r(2, 3, 8)], {"kernel_shape": [3], "strides": [2]}),
    Case("AveragePool", "AveragePool", [r(1, 2, 5, 5)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    Case("AveragePool-incl", "AveragePool", [r(1, 2, 5, 5)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                              "count_include_pad": 1}),
    Case("AveragePool-ceil", "AveragePool", [r(1, 1, 6, 6)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                              "ceil_mode": 1}),
    Case("AveragePool-ceil-incl", "AveragePool", [r(1, 1, 6, 6)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                                   "pads": [1, 1, 0, 0], "ceil_mode": 1,
                                                                   "count_include_pad": 1}),
    Case("MaxPool-ceil-pad", "MaxPool", [r(1, 1, 5, 5)], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                         "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    Case("AveragePool-ceil-pad-incl", "AveragePool", [r(1, 1, 6, 7)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                                       "pads": [1, 1, 1, 1], "ceil_mode": 1,
                                                                       "count_include_pad": 1}),
    Case("AveragePool-dilated", "AveragePool", [r(1, 1, 7, 7)], {"kernel_shape": [2, 2], "dilations": [2, 2],
                                                                 "pads": [1, 1, 1, 1]}, opset=19),
    Case("AveragePool-same-lower", "AveragePool", [r(1, 1, 6, 6)], {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER",
                                                                    "count_include_pad": 1, "strides": [2, 2]}),
    Case("LpPool", "LpPool", [r(1, 2, 4, 4)], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    Case("GlobalAveragePool", "GlobalAveragePool", [r(2, 3, 4, 5)]),
    Case("GlobalMaxPool", "GlobalMaxPool", [r(2, 3, 4)]),
    # newer and less common ops
    Case("LpNormalization", "LpNormalization", [X], {"axis": 1}),
    Case("LpNormalization-p1", "LpNormalization", [X], {"p": 1}),
    Case("MeanVarianceNormalization", "MeanVarianceNormalization", [r(2, 3, 4, 5)]),
    Case("MeanVarianceNormalization-axes", "MeanVarianceNormalization", [X], {"axes": [1, 2]}),
    Case("QuantizeLinear", "QuantizeLinear", [X * 50, K(np.float32(0.5)), K(np.uint8(128))]),
    Case("QuantizeLinear-axis", "QuantizeLinear", [X * 50, K(np.float32([0.5, 1, 2])), K(np.int8([0, 3, -2]))],
         {"axis": 1}),
    Case("QuantizeLinear-no-zero-point", "QuantizeLinear", [X * 50, K(np.float32(0.7))]),
    Case("DequantizeLinear", "DequantizeLinear", [ri(2, 3, lo=0, hi=255, dtype=np.uint8), K(np.float32(0.5)),
                                                  K(np.uint8(128))]),
    Case("DequantizeLinear-axis", "DequantizeLinear", [ri(2, 3, lo=-100, hi=100, dtype=np.int8),
                                                       K(np.float32([0.5, 1, 2])), K(np.int8([0, 3, -2]))],
         {"axis": 1}),
    Case("DequantizeLinear-int32", "DequantizeLinear", [ri(2, 3, lo=-100, hi=100, dtype=np.int32),
                                                        K(np.float32(0.25))]),
    Case("ReduceMax-bool", "ReduceMax", [rb(3, 4), K(i64(1))], opset=20),
    Case("ReduceMin-bool", "ReduceMin", [rb(3, 4), K(i64(0))], {"keepdims": 0}, opset=20),
    Case("Swish", "Swish", [X], {"alpha": 0.7}, opset=24),
    Case("RMSNorm", "RMSNormalization", [X, r(4)], {"epsilon": 1e-3}, opset=23),
    Case("RMSNorm-axis1", "RMSNormalization", [X, r(3, 4)], {"axis": 1}, opset=23),
    Case("TopK", "TopK", [X, K(i64(2))], outputs=2),
    Case("TopK-smallest", "TopK", [X, K(i64(3))], {"axis": 1, "largest": 0}, outputs=2),
    Case("TopK-ties", "TopK", [np.array([[1, 3, 3, 2, 3]], np.float32), K(i64(4))], outputs=2),
    Case("TopK-int-k1", "TopK", [ri(3, 5), K(i64(1))], outputs=2),
    Case("TopK-attr", "TopK", [X], {"k": 2, "axis": 0}, opset=9, outputs=2),
    Case("TopK-runtime-k", "TopK", [X, i64(3)], {"axis": 1}, outputs=2),  # data-dependent (ops/dynamic.py)
    Case("NonZero", "NonZero", [ri(3, 4, lo=0, hi=2)]),
    Case("Unique", "Unique", [np.float32([2, 1, 1, 3, 4, 3, 0])], outputs=4),
    Case("Unique-axis-unsorted", "Unique", [np.float32([[1, 0], [0, 1], [1, 0], [0, 0]])], {"axis": 0, "sorted": 0},
         outputs=4),
    Case("NonMaxSuppression", "NonMaxSuppression",
         [np.float32([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0, 2.05, 1, 3]]]),
          np.float32([[[0.9, 0.8, 0.7, 0.95], [0.1, 0.6, 0.3, 0.2]]]), K(i64(2)), K(np.float32([0.5])),
          K(np.float32([0.15]))]),
    Case("Resize-nearest", "Resize", [IMG, None, K(np.float32([1, 1, 2, 1.5]))]),
    Case("Resize-nearest-sizes", "Resize", [IMG, None, None, K(i64(1, 2, 7, 3))]),
    Case("Resize-nearest-floor", "Resize", [IMG, None, K(np.float32([1, 1, 2, 2]))],
         {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    Case("Resize-nearest-ceil", "Resize", [IMG, None, K(np.float32([1, 1, 1.7, 2.3]))],
         {"coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"}),
    Case("Resize-linear", "Resize", [IMG, None, K(np.float32([1, 1, 2, 1.5]))], {"mode": "linear"}),
    Case("Resize-linear-down", "Resize", [IMG, None, K(np.float32([1, 1, 0.5, 0.6]))], {"mode": "linear"}),
    Case("Resize-linear-align", "Resize", [IMG, None, None, K(i64(1, 2, 7, 9))],
         {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    Case("Resize-linear-pytorch", "Resize", [IMG, None, None, K(i64(1, 2, 1, 9))],
         {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
    Case("Resize-axes", "Resize", [IMG, None, K(np.float32([2, 3]))], {"axes": [2, 3], "mode": "linear"}, opset=19),
    Case("Resize-symmetric", "Resize", [IMG, None, K(np.float32([1, 1, 1.5, 2.5]))],
         {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}, opset=19),
    Case("Resize-11-roi", "Resize", [IMG, K(np.zeros((0,), np.float32)), K(np.float32([1, 1, 2, 2]))], opset=11),
    Case("Attention", "Attention", [r(2, 4, 5, 8), r(2, 4, 6, 8), r(2, 4, 6, 3)], opset=23),
    Case("Attention-gqa-causal", "Attention", [Q, KEY, V], {"is_causal": 1}, opset=23),
    Case("Attention-causal-square", "Attention", [r(1, 2, 5, 4), r(1, 2, 5, 4), r(1, 2, 5, 4)], {"is_causal": 1},
         opset=23),
    Case("Attention-bool-mask", "Attention", [Q, KEY, V, rb(5, 6) | np.eye(5, 6, dtype=bool)], {"scale": 0.3},
         opset=23),
    Case("Attention-float-mask-causal", "Attention", [Q, KEY, V, r(2, 1, 5, 6)], {"is_causal": 1}, opset=23),
    Case("Attention-3d", "Attention", [r(2, 5, 16), r(2, 6, 8), r(2, 6, 6)], {"q_num_heads": 4, "kv_num_heads": 2},
         opset=23),
    Case("Rotary", "RotaryEmbedding", [r(2, 3, 5, 8), r(10, 4), r(10, 4), ri(2, 5, lo=0, hi=10)], opset=23),
    Case("Rotary-interleaved", "RotaryEmbedding", [r(2, 3, 5, 8), r(10, 4), r(10, 4), ri(2, 5, lo=0, hi=10)],
         {"interleaved": 1}, opset=23),
    Case("Rotary-3d-partial", "RotaryEmbedding", [r(2, 5, 24), r(2, 5, 2), r(2, 5, 2)],
         {"num_heads": 3, "rotary_embedding_dim": 4}, opset=23),
    Case("Upsample-nearest", "Upsample", [IMG, K(np.float32([1, 1, 2, 3]))], {"mode": "nearest"}, opset=9),
    Case("Upsample-nearest-frac", "Upsample", [IMG, K(np.float32([1, 1, 1.5, 2.5]))], opset=9),
    Case("Upsample-linear", "Upsample", [IMG, K(np.float32([1, 1, 2, 1.5]))], {"mode": "linear"}, opset=9),
    Case("Upsample-7", "Upsample", [IMG], {"scales": [1.0, 1.0, 3.0, 2.0]}, opset=7),
    Case("Scan-8", "Scan", [None, r(2, 3), r(2, 4, 3)], {"num_scan_inputs": 1, "body": SUM_BODY}, opset=8,
         outputs=2),
    Case("Scan-8-reverse", "Scan", [None, r(1, 3), r(1, 5, 3)],
         {"num_scan_inputs": 1, "body": SUM_BODY, "directions": [1]}, opset=8, outputs=2),
    Case("ArrayFeatureExtractor", "ArrayFeatureExtractor", [X, i64(3, 0, 3)], domain="ai.onnx.ml", opset=1),
    Case("ArrayFeatureExtractor-1d", "ArrayFeatureExtractor", [r(5), i64(4, 1)], domain="ai.onnx.ml", opset=1),
    Case("MelWeightMatrix", "MelWeightMatrix", [K(np.int32(8)), K(np.int32(16)), K(np.int32(8192)),
                                                K(np.float32(0)), K(np.float32(4096))], opset=17),
    Case("MelWeightMatrix-f64", "MelWeightMatrix", [K(np.int64(5)), K(np.int64(32)), K(np.int64(16000)),
                                                    K(np.float32(300)),
                                                    K(np.float32(6000))], {"output_datatype": 11}, opset=17),
    Case("Einsum-diagonal", "Einsum", [r(2, 4, 4)], {"equation": "bii->bi"}),
    Case("Einsum-trace", "Einsum", [r(4, 4)], {"equation": "ii->"}),
    Case("Einsum-diagonal-implicit", "Einsum", [r(3, 3, 2), r(2, 5)], {"equation": "iij,jk"}),
    Case("BatchNorm-training", "BatchNormalization", [r(2, 3, 4, 5), r(3), r(3), r(3), r(3, lo=0.5, hi=2)],
         {"training_mode": 1, "momentum": 0.8, "epsilon": 1e-3}, opset=15, outputs=3),
    Case("BatchNorm-training-2d", "BatchNormalization", [r(4, 3), r(3), r(3), r(3), r(3, lo=0.5, hi=2)],
         {"training_mode": 1}, opset=15, outputs=3),
    Case("MaxPool-indices", "MaxPool", [r(1, 2, 5, 5)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                         "strides": [2, 2]}, outputs=2),
    Case("MaxPool-indices-ties", "MaxPool", [ri(2, 2, 4, 6, lo=0, hi=3).astype(np.float32)],
         {"kernel_shape": [2, 3], "strides": [1, 2]}, outputs=2),
    Case("MaxPool-indices-column-major", "MaxPool", [r(2, 1, 4, 5)], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                                      "storage_order": 1}, outputs=2),
    Case("Det", "Det", [r(3, 3)]),
    Case("Det-batched", "Det", [r(2, 3, 4, 4)]),
    Case("Det-singular", "Det", [np.float32([[1, 2], [2, 4]])]),
    Case("MaxUnpool", "MaxUnpool", [r(1, 2, 2, 3),
                                    i64(1, 6, 10, 14, 19, 22, 25, 28, 36, 38, 40, 46).reshape(1, 2, 2, 3)],
         {"kernel_shape": [2, 2], "strides": [2, 2]}),
    Case("MaxUnpool-pads", "MaxUnpool", [r(1, 1, 3), i64(0, 3, 4).reshape(1, 1, 3)],
         {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    Case("Col2Im", "Col2Im", [r(2, 6, 12), K(i64(4, 5)), K(i64(1, 3))]),
    Case("Col2Im-strided", "Col2Im", [r(1, 8, 9), K(i64(5, 6)), K(i64(2, 2))],
         {"strides": [2, 2], "dilations": [1, 2], "pads": [1, 0, 0, 1]}),
    Case("GridSample", "GridSample", [IMG, r(1, 3, 6, 2, lo=-1.2, hi=1.2)], opset=16),
    Case("GridSample-nearest-border", "GridSample", [IMG, r(1, 3, 6, 2, lo=-1.5, hi=1.5)],
         {"mode": "nearest", "padding_mode": "border"}, opset=16),
    Case("GridSample-bicubic-reflection", "GridSample", [IMG, r(1, 3, 6, 2, lo=-2.5, hi=2.5)],
         {"mode": "bicubic", "padding_mode": "reflection", "align_corners": 1}, opset=16),
    Case("GridSample-linear-3d", "GridSample", [r(2, 2, 3, 4, 5), r(2, 2, 3, 2, 3, lo=-1.2, hi=1.2)],
         {"mode": "linear", "padding_mode": "zeros"}, opset=20),
    Case("STFT", "STFT", [r(2, 40, 1), K(np.int64(6)), r(8)], opset=17),
    Case("STFT-length", "STFT", [r(1, 40, 1), K(np.int64(4)), None, K(np.int64(16))], opset=17),
    Case("STFT-complex", "STFT", [r(1, 20, 2), K(np.int64(5)), None, K(np.int64(8))], {"onesided": 0}, opset=17),
    Case("TensorScatter", "TensorScatter", [r(2, 3, 6, 4), r(2, 3, 2, 4), i64(1, 4)], opset=24),
    Case("TensorScatter-circular", "TensorScatter", [r(3, 5, 2), r(3, 3, 2), i64(0, 3, 4)],
         {"mode": "circular", "axis": 1}, opset=24),
    Case("TensorScatter-no-indices", "TensorScatter", [r(2, 4, 3), r(2, 2, 3)], opset=24),
    Case("RoiAlign", "RoiAlign", [r(2, 3, 8, 9), np.float32([[0, 0, 5, 6], [1.5, 2.2, 7.9, 7.1], [-2, 3, 12, 4]]),
                                  i64(1, 0, 1)], {"output_height": 3, "output_width": 4, "sampling_ratio": 2,
                                                  "spatial_scale": 0.9}, opset=16),
    Case("RoiAlign-max", "RoiAlign", [r(1, 2, 6, 6), np.float32([[0.3, 0.4, 4.5, 3.2], [2, 2, 2.5, 2.2]]), i64(0, 0)],
         {"mode": "max", "output_height": 2, "output_width": 2, "sampling_ratio": 3,
          "coordinate_transformation_mode": "output_half_pixel"}, opset=16),
    Case("MaxPool-indices-1d-ceil", "MaxPool", [r(1, 3, 8)], {"kernel_shape": [3], "strides": [2], "ceil_mode": 1},
         outputs=2),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_matches_onnxruntime(case: Case) -> None:
    check_case(case)


# DequantizeLinear of known inputs stays a dequantize at import: quantized weights stay int8, and the
# quantized-contraction pass reads them as they are (a dequantize no contraction takes folds in the pipeline)
FOLDABLE = [c for c in CASES if (c.op not in ("Dropout",) or c.outputs == 1) and c.op != "DequantizeLinear"]


@pytest.mark.parametrize("case", FOLDABLE, ids=[c.id for c in FOLDABLE])
def test_op_on_known_inputs_folds_like_onnxruntime(case: Case) -> None:
    """Every input an initializer: small results are computed at import time and leave only constants."""
    known = Case(case.id, case.op, [K(x) if isinstance(x, np.ndarray) else x for x in case.inputs], case.attrs,
                 case.opset, case.outputs, case.domain)
    module = check_case(known)
    assert {i.opcode for i in module.entry.instructions} <= {"constant", "tuple"}
