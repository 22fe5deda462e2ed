"""Synthetic ONNX graphs of any length, for compile-time scaling (benchmarks/pass_scaling.py) and its slow test.

    python tools/synthetic_graphs.py chain:20000 -o chain20k.onnx

- chain:N    N elementwise nodes in a row (Add/Mul/Sigmoid/Sub of a [16, 16] value and small constants);
- fanout:N   one value feeding N consumers (Mul by N different constants), summed pairwise back into one output;
- layers:N   N stacked pre-norm transformer layers at hidden 32, 2 heads, sequence 8: LayerNorm, a fused QKV
             MatMul, softmax attention, an output projection, a GELU MLP (tanh form, spelled out), two residuals.
Weights are seeded random and tiny: the graph's length is what grows.
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, inits, name: str) -> onnx.ModelProto:
    return helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits), opset_imports=OPSET)


def elementwise_chain(n: int) -> onnx.ModelProto:
    """n elementwise nodes, each reading the previous one's result."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"c{k}") for k in range(4)]
    ops = ["Add", "Mul", "Sigmoid", "Sub"]
    nodes, prev = [], "x"
    for i in range(n):
        op = ops[i % 4]
        out = f"v{i}"
        nodes.append(helper.make_node(op, [prev] if op == "Sigmoid" else [prev, f"c{i % 4}"], [out], name=f"n{i}"))
        prev = out
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 16])], inits, f"chain{n}")


def fan_out(n: int) -> onnx.ModelProto:
    """One value read by n consumers (each a Mul by its own constant), combined by a balanced tree of Adds."""
    rng = np.random.default_rng(0)
    inits, nodes = [], [helper.make_node("Sigmoid", ["x"], ["s"], name="src")]
    level = []
    for i in range(n):
        inits.append(numpy_helper.from_array(rng.standard_normal((16,)).astype(np.float32), f"k{i}"))
        nodes.append(helper.make_node("Mul", ["s", f"k{i}"], [f"m{i}"], name=f"mul{i}"))
        level.append(f"m{i}")
    depth = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            out = f"a{depth}_{j}"
            nodes.append(helper.make_node("Add", [level[j], level[j + 1]], [out], name=f"add{depth}_{j}"))
            nxt.append(out)
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    nodes.append(helper.make_node("Identity", [level[0]], ["y"], name="out"))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 16])], inits, f"fanout{n}")


def transformer_layers(n: int, hidden: int = 32, heads: int = 2, seq: int = 8) -> onnx.ModelProto:
    """n pre-norm transformer layers (LayerNorm, QKV, softmax attention, projection, GELU MLP, residuals)."""
    rng = np.random.default_rng(0)
    hd = hidden // heads
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def weight(name: str, shape: tuple[int, ...], scale: float = 0.1) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name: str, values, dtype=np.int64) -> str:
        inits.append(numpy_helper.from_array(np.array(values, dtype), name))
        return name

    def node(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    split_shape = const("split_shape", [1, seq, heads, hd])
    merge_shape = const("merge_shape", [1, seq, hidden])
    thirds = const("thirds", [hidden] * 3)
    scale = weight("scale", (), 0.0)
    inits[-1] = numpy_helper.from_array(np.array(1.0 / np.sqrt(hd), np.float32), "scale")
    h = "x"
    for i in range(n):
        p = f"l{i}_"
        ln1 = node("LayerNormalization", [h, weight(p + "g1", (hidden,)), weight(p + "b1", (hidden,))], p + "ln1",
                   axis=-1, epsilon=1e-5)
        qkv = node("Add", [node("MatMul", [ln1, weight(p + "wqkv", (hidden, 3 * hidden))], p + "qkv_mm"),
                           weight(p + "bqkv", (3 * hidden,))], p + "qkv")
        q, k, v = p + "q", p + "k", p + "v"
        nodes.append(helper.make_node("Split", [qkv, thirds], [q, k, v], name=p + "split", axis=-1))
        heads_of = {}
        for name, perm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])):
            heads_of[name] = node("Transpose", [node("Reshape", [name, split_shape], name + "_r")], name + "_t",
                                  perm=perm)
        scores = node("Mul", [node("MatMul", [heads_of[q], heads_of[k]], p + "qk"), scale], p + "scores")
        probs = node("Softmax", [scores], p + "probs", axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, heads_of[v]], p + "pv")], p + "ctx_t",
                                    perm=[0, 2, 1, 3]), merge_shape], p + "ctx")
        attn = node("Add", [node("MatMul", [ctx, weight(p + "wo", (hidden, hidden))], p + "o_mm"),
                            weight(p + "bo", (hidden,))], p + "o")
        h1 = node("Add", [h, attn], p + "res1")
        ln2 = node("LayerNormalization", [h1, weight(p + "g2", (hidden,)), weight(p + "b2", (hidden,))], p + "ln2",
                   axis=-1, epsilon=1e-5)
        up = node("Add", [node("MatMul", [ln2, weight(p + "w1", (hidden, 4 * hidden))], p + "up_mm"),
                          weight(p + "b1_", (4 * hidden,))], p + "up")
        # GELU (tanh form) spelled out, as exporters write it
        cube = node("Mul", [up, node("Mul", [up, up], p + "sq")], p + "cube")
        inner = node("Add", [up, node("Mul", [cube, weight(p + "c044", (), 0.0)], p + "c3")], p + "inner")
        inits[-1] = numpy_helper.from_array(np.array(0.044715, np.float32), p + "c044")
        t = node("Tanh", [node("Mul", [inner, weight(p + "c079", (), 0.0)], p + "scaled")], p + "tanh")
        inits[-1] = numpy_helper.from_array(np.array(0.7978845608, np.float32), p + "c079")
        one = p + "one"
        inits.append(numpy_helper.from_array(np.array(1.0, np.float32), one))
        half = p + "half"
        inits.append(numpy_helper.from_array(np.array(0.5, np.float32), half))
        gelu = node("Mul", [node("Mul", [up, half], p + "hx"), node("Add", [t, one], p + "t1")], p + "gelu")
        down = node("Add", [node("MatMul", [gelu, weight(p + "w2", (4 * hidden, hidden))], p + "down_mm"),
                            weight(p + "b2_", (hidden,))], p + "down")
        h = node("Add", [h1, down], p + "res2")
    nodes.append(helper.make_node("Identity", [h], ["y"], name="out"))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], inits, f"layers{n}")


GRAPHS = {"chain": elementwise_chain, "fanout": fan_out, "layers": transformer_layers}


def build(spec: str) -> onnx.ModelProto:
    """The graph a KIND:N spec names."""
    kind, _, size = spec.partition(":")
    if kind not in GRAPHS or not size.isdigit():
        raise ValueError(f"'{spec}': expected KIND:N with KIND one of {', '.join(GRAPHS)}")
    return GRAPHS[kind](int(size))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", help="KIND:N (chain, fanout, layers)")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    onnx.save(build(a.spec), a.output)


if __name__ == "__main__":
    main()
