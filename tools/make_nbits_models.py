"""Make the 4-bit (and 8-bit) weight-only test models in tests/data/models/nbits/.

A LLaMA-style decoder with random weights, built with onnx.helper (2 layers, hidden 64, 4 heads, RMSNorm,
causal attention without rotary over a symbolic sequence length ``seq``, gated SiLU MLP, untied embedding
and lm_head), then quantized with onnxruntime's MatMulNBitsQuantizer (RTN, QOperator format): every MatMul
with a constant weight becomes a com.microsoft MatMulNBits. Variants: block 32 and 128, symmetric and
asymmetric, 4 bits, and 8 bits at block 32. One variant also quantizes the embedding table into a
GatherBlockQuantized; the quantizer writes its data as UINT4 tensors, which this tool repacks into the op's
uint8 form (two values a byte, low nibble first, ``bits=4``), the form onnxruntime's LLM exports use for
tied embeddings. Expected outputs come from onnxruntime on CPU.

The ``qdq_*`` variants are the same quantizer with ``quant_format=QuantFormat.QDQ``: each MatMul's weight
becomes an INT4 (symmetric) or UINT4 (asymmetric, with UINT4 zero points) initializer, packed two a byte,
read by a DequantizeLinear with ``axis=0`` and ``block_size``. onnxruntime on CPU fuses such a DQ -> MatMul
into its MatMulNBits kernel, which by default (session option ``session.qdq_matmulnbits_accuracy_level``
4) quantizes the activations to int8 (a max error of 0.05 on these logits); their references are computed
with that option at 0 (float activations), which agrees with the unfused graph (ORT_DISABLE_ALL) to 1e-6.

    python tools/make_nbits_models.py     # rewrites tests/data/models/nbits/
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantFormat
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "models" / "nbits"
HIDDEN, HEADS, INTER, VOCAB, LAYERS, SEQ = 64, 4, 128, 128, 2, 4
EPS = 1e-5
# name: (bits, block_size, symmetric, quantize the embedding too)
VARIANTS = {
    "b32_asym": (4, 32, False, False),
    "b32_sym": (4, 32, True, False),
    "b128_asym": (4, 128, False, False),
    "b128_sym": (4, 128, True, False),
    "b32_8bit": (8, 32, False, False),
    "b32_asym_gbq": (4, 32, False, True),
}
# DequantizeLinear of INT4/UINT4 blocked weights (QuantFormat.QDQ): name: (block_size, symmetric)
QDQ_VARIANTS = {
    "qdq_b32_asym": (32, False),
    "qdq_b128_sym": (128, True),
}


def decoder() -> onnx.ModelProto:
    rng = np.random.default_rng(18)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def weight(name: str, shape: tuple[int, ...], scale: float) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def node(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def rms_norm(x: str, name: str) -> str:
        sq = node("Mul", [x, x], f"{name}_sq")
        mean = node("ReduceMean", [sq, "axes_last"], f"{name}_mean", keepdims=1)
        rstd = node("Reciprocal", [node("Sqrt", [node("Add", [mean, "eps"], f"{name}_add")], f"{name}_sqrt")],
                    f"{name}_rstd")
        gamma = const(f"{name}_gamma", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        return node("Mul", [node("Mul", [x, rstd], f"{name}_normed"), gamma], f"{name}_out")

    const("axes_last", np.array([-1], np.int64))
    const("eps", np.array(EPS, np.float32))
    dh = HIDDEN // HEADS
    const("heads_shape", np.array([1, -1, HEADS, dh], np.int64))
    const("merged_shape", np.array([1, -1, HIDDEN], np.int64))
    const("attn_scale", np.array(1 / np.sqrt(dh), np.float32))
    # the causal mask from the sequence length: -1e9 where the key comes after the query
    const("zero_i", np.array(0, np.int64))
    const("one_i", np.array(1, np.int64))
    const("one_axis", np.array([1], np.int64))
    const("neg", np.array(-1e9, np.float32))
    const("zero_f", np.array(0, np.float32))
    seq = node("Squeeze", [node("Slice", [node("Shape", ["input_ids"], "ids_shape"), "one_axis",
                                          const("two_axis", np.array([2], np.int64))], "seq_1"), "zero_axis"], "seq")
    const("zero_axis", np.array([0], np.int64))
    pos = node("Range", ["zero_i", seq, "one_i"], "positions")
    later = node("Greater", [node("Unsqueeze", [pos, "zero_axis"], "key_pos"),
                             node("Unsqueeze", [pos, "one_axis"], "query_pos")], "key_after_query")
    node("Where", [later, "neg", "zero_f"], "causal_mask")
    x = node("Gather", [weight("embed", (VOCAB, HIDDEN), 1.0), "input_ids"], "embedded", axis=0)
    for i in range(LAYERS):
        p = f"l{i}"
        h = rms_norm(x, f"{p}_ln1")
        q, k, v = (node("Transpose", [node("Reshape", [node("MatMul", [h, weight(f"{p}_w{t}", (HIDDEN, HIDDEN),
                                                                                    0.125)], f"{p}_{t}"),
                                                       "heads_shape"], f"{p}_{t}_heads")],
                        f"{p}_{t}_t", perm=[0, 2, 1, 3]) for t in "qkv")
        kt = node("Transpose", [k], f"{p}_kt", perm=[0, 1, 3, 2])
        scores = node("Add", [node("Mul", [node("MatMul", [q, kt], f"{p}_qk"), "attn_scale"], f"{p}_scaled"),
                              "causal_mask"], f"{p}_masked")
        ctx = node("MatMul", [node("Softmax", [scores], f"{p}_probs", axis=-1), v], f"{p}_ctx")
        merged = node("Reshape", [node("Transpose", [ctx], f"{p}_ctx_t", perm=[0, 2, 1, 3]), "merged_shape"],
                      f"{p}_merged")
        x = node("Add", [x, node("MatMul", [merged, weight(f"{p}_wo", (HIDDEN, HIDDEN), 0.125)], f"{p}_o")],
                 f"{p}_res1")
        h = rms_norm(x, f"{p}_ln2")
        gate = node("MatMul", [h, weight(f"{p}_wgate", (HIDDEN, INTER), 0.125)], f"{p}_gate")
        up = node("MatMul", [h, weight(f"{p}_wup", (HIDDEN, INTER), 0.125)], f"{p}_up")
        act = node("Mul", [gate, node("Sigmoid", [gate], f"{p}_sig")], f"{p}_silu")
        down = node("MatMul", [node("Mul", [act, up], f"{p}_gated"), weight(f"{p}_wdown", (INTER, HIDDEN), 0.09)],
                    f"{p}_down")
        x = node("Add", [x, down], f"{p}_res2")
    logits = node("MatMul", [rms_norm(x, "final_ln"), weight("lm_head", (HIDDEN, VOCAB), 0.125)], "logits")
    graph = helper.make_graph(nodes, "llama_tiny",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])],
                              [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, "seq", VOCAB])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def _pack_u4(values: np.ndarray) -> np.ndarray:
    """Two 4-bit values a byte along the last axis, low nibble first (odd lengths padded with 0)."""
    v = values.astype(np.uint8)
    if v.shape[-1] % 2:
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (1,), np.uint8)], axis=-1)
    return (v[..., 0::2] | (v[..., 1::2] << 4)).astype(np.uint8)


def _repack_gather(model: onnx.ModelProto) -> None:
    """The quantizer's GatherBlockQuantized reads INT4/UINT4 tensors: rewrite them as packed uint8 (bits=4)."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type != "GatherBlockQuantized":
            continue
        for name in [n.input[0]] + ([n.input[3]] if len(n.input) > 3 and n.input[3] else []):
            t = inits[name]
            if t.data_type not in (TensorProto.UINT4, TensorProto.INT4):
                continue
            values = numpy_helper.to_array(t)
            if t.data_type == TensorProto.INT4:  # symmetric: stored signed; uint8 form has the implicit zero point 8
                values = values.astype(np.int16) + 8
            packed = _pack_u4(values)
            t.CopyFrom(numpy_helper.from_array(packed, name))
        n.attribute.append(helper.make_attribute("bits", 4))


def quantize(model: onnx.ModelProto, bits: int, block: int, symmetric: bool, gather: bool) -> onnx.ModelProto:
    ops = ("MatMul", "Gather") if gather else ("MatMul",)
    q = MatMulNBitsQuantizer(model, bits=bits, block_size=block, is_symmetric=symmetric, op_types_to_quantize=ops,
                             quant_axes=(("MatMul", 0), ("Gather", 1)))
    q.process()
    out = q.model.model
    _repack_gather(out)
    return out


def quantize_qdq(model: onnx.ModelProto, block: int, symmetric: bool) -> onnx.ModelProto:
    """Every MatMul's constant weight as a blocked 4-bit DequantizeLinear (axis 0: blocks along K)."""
    q = MatMulNBitsQuantizer(model, bits=4, block_size=block, is_symmetric=symmetric, op_types_to_quantize=("MatMul",),
                             quant_axes=(("MatMul", 0),), quant_format=QuantFormat.QDQ)
    q.process()
    return q.model.model


def reference_session(path: Path) -> ort.InferenceSession:
    """onnxruntime on CPU, its DQ -> MatMul fusion keeping float activations (the module docstring says why)."""
    options = ort.SessionOptions()
    options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    OUT.mkdir(parents=True, exist_ok=True)
    float_model = decoder()
    onnx.save(float_model, OUT / "float.onnx")
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(1, SEQ)).astype(np.int64)
    np.savez(OUT / "inputs.npz", input_ids=ids)
    models = [("float", float_model)] + [(n, quantize(decoder(), *v)) for n, v in VARIANTS.items()] + \
        [(n, quantize_qdq(decoder(), *v)) for n, v in QDQ_VARIANTS.items()]
    for name, model in models:
        if name != "float":
            onnx.save(model, OUT / f"{name}.onnx")
        sess = reference_session(OUT / f"{name}.onnx")
        (logits,) = sess.run(None, {"input_ids": ids})
        np.savez(OUT / f"{name}.ref.npz", logits=logits)
        special = {n.op_type for n in model.graph.node if n.domain == "com.microsoft" or "uantizeLinear" in n.op_type}
        print(f"{name}: {(OUT / f'{name}.onnx').stat().st_size} bytes, {sorted(special)}")


if __name__ == "__main__":
    main()
