"""Make the int8 quantized test models: tests/data/models/quant/.

    python tools/make_quant_models.py tests/data/models/quant

Two random-weight float models, built with onnx.helper (seed 0):
- encoder: a BERT-like encoder on embeddings x[1,16,64]: 2 layers, hidden 64, 4 heads, FFN 128, post-LayerNorm,
  erf GELU, softmax attention with a 1/sqrt(16) scale.
- cnn: conv3x3(3->16)+relu, maxpool 2, a residual block (conv+relu, conv, add, relu), conv 1x1 stride 2 +relu,
  global average pool, flatten, gemm (->10), on x[1,3,32,32].

From each, with onnxruntime.quantization: NAME_qdq (quantize_static, QuantFormat.QDQ, per-channel s8 weights,
u8 activations, calibrated on random data), NAME_qop (the same in QuantFormat.QOperator), and for the encoder
encoder_dyn (quantize_dynamic, u8 activations and s8 weights). Beside every model, NAME.ref.npz holds its input
and onnxruntime's outputs (`out:NAME`), the same input for every variant of a model.

fp8 (make_fp8): NAME_fp8, quantize_static in QuantFormat.QDQ with float8 e4m3fn activations and weights (per
tensor; onnxruntime 1.32 calibrates float types only with CalibrationMethod.Distribution). Its calibrator fails
on the encoder's LayerNorm and Softmax outputs ("Attributes 'avg' and/or 'std' missing"), so the encoder
quantizes its MatMuls only (op_types_to_quantize=["MatMul"]: the projections and the two attention matmuls).
onnxruntime's CPU provider runs the fp8 QDQ graphs: the references are its outputs.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)

OPSET = 17
HIDDEN, HEADS, FFN, SEQ, LAYERS = 64, 4, 128, 16, 2


class _Graph:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def name(self, hint: str) -> str:
        self.n += 1
        return f"{hint}_{self.n}"

    def weight(self, hint: str, shape: tuple[int, ...], scale: float) -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out


def _linear(g: _Graph, x: str, k: int, n: int) -> str:
    y = g.op("MatMul", [x, g.weight("w", (k, n), 1.0 / np.sqrt(k))])
    return g.op("Add", [y, g.weight("b", (n,), 0.1)])


def _layer_norm(g: _Graph, x: str) -> str:
    gamma = g.const("gamma", (1.0 + 0.1 * g.rng.standard_normal(HIDDEN)).astype(np.float32))
    beta = g.weight("beta", (HIDDEN,), 0.1)
    return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)


def _gelu(g: _Graph, x: str) -> str:
    inner = g.op("Erf", [g.op("Div", [x, g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))])])
    half = g.op("Mul", [x, g.const("half", np.array(0.5, np.float32))])
    return g.op("Mul", [half, g.op("Add", [inner, g.const("one", np.array(1.0, np.float32))])])


def encoder() -> onnx.ModelProto:
    g = _Graph(np.random.default_rng(0))
    head = HIDDEN // HEADS
    split = g.const("heads", np.array([1, SEQ, HEADS, head], np.int64))
    merge = g.const("merge", np.array([1, SEQ, HIDDEN], np.int64))
    x = "x"
    for _ in range(LAYERS):
        q, k, v = (g.op("Transpose", [g.op("Reshape", [_linear(g, x, HIDDEN, HIDDEN), split])], perm=[0, 2, 1, 3])
                   for _ in range(3))
        scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = g.op("Mul", [scores, g.const("scale", np.array(1.0 / np.sqrt(head), np.float32))])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        x = _layer_norm(g, g.op("Add", [x, _linear(g, ctx, HIDDEN, HIDDEN)]))
        ffn = _linear(g, _gelu(g, _linear(g, x, HIDDEN, FFN)), FFN, HIDDEN)
        x = _layer_norm(g, g.op("Add", [x, ffn]))
    g.nodes[-1].output[0] = "y"
    graph = helper.make_graph(g.nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, HIDDEN])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SEQ, HIDDEN])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def cnn() -> onnx.ModelProto:
    g = _Graph(np.random.default_rng(1))

    def conv(x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
        w = g.weight("w", (cout, cin, k, k), 1.0 / np.sqrt(cin * k * k))
        return g.op("Conv", [x, w, g.weight("b", (cout,), 0.1)], kernel_shape=[k, k], pads=[k // 2] * 4,
                    strides=[stride, stride])

    x = g.op("Relu", [conv("x", 3, 16, 3)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    y = conv(g.op("Relu", [conv(x, 16, 16, 3)]), 16, 16, 3)
    x = g.op("Relu", [g.op("Add", [x, y])])
    x = g.op("Relu", [conv(x, 16, 32, 1, stride=2)])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.nodes.append(helper.make_node("Gemm", [x, g.weight("w", (10, 32), 0.2), g.weight("b", (10,), 0.1)], ["y"],
                                    name="gemm", transB=1))
    graph = helper.make_graph(g.nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


class _RandomReader(CalibrationDataReader):
    def __init__(self, shape: tuple[int, ...], count: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(count)])

    def get_next(self):
        return next(self.batches, None)


def _ref(path: Path, x: np.ndarray) -> None:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))
    np.savez(path.with_suffix(".ref.npz"), x=x, **{f"out:{k}": v for k, v in outs.items()})


def make_fp8(out: Path, name: str, make) -> None:
    """NAME_fp8.onnx and its reference: float8 e4m3fn QDQ of the float model make() (saved as NAME.onnx)."""
    model = make()
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    q = out / f"{name}_fp8.onnx"
    quantize_static(str(out / f"{name}.onnx"), str(q), _RandomReader(shape, 8, 3), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QFLOAT8E4M3FN, weight_type=QuantType.QFLOAT8E4M3FN,
                    calibrate_method=CalibrationMethod.Distribution,
                    op_types_to_quantize=["MatMul"] if name == "encoder" else None)
    _ref(q, np.random.default_rng(7).standard_normal(shape).astype(np.float32))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    out = ap.parse_args().out
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice to pre-process
    out.mkdir(parents=True, exist_ok=True)
    for name, make in (("encoder", encoder), ("cnn", cnn)):
        model = make()
        onnx.checker.check_model(model)
        fp = out / f"{name}.onnx"
        onnx.save(model, fp)
        shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
        x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
        _ref(fp, x)
        for fmt, suffix in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qop")):
            q = out / f"{name}_{suffix}.onnx"
            quantize_static(str(fp), str(q), _RandomReader(shape, 8, 3), quant_format=fmt, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax)
            _ref(q, x)
        if name == "encoder":
            d = out / "encoder_dyn.onnx"
            quantize_dynamic(str(fp), str(d), weight_type=QuantType.QInt8, per_channel=True)
            _ref(d, x)
        make_fp8(out, name, make)
    for p in sorted(out.glob("*.onnx")):
        m = onnx.load(p)
        ops = sorted({f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in m.graph.node})
        print(f"{p.name}: {p.stat().st_size} bytes, {len(m.graph.node)} nodes: {' '.join(ops)}")


if __name__ == "__main__":
    main()
