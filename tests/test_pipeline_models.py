"""The default pipeline on the shared models: what it recognizes, and that the compiled bundle
still computes the reference outputs (onnxruntime / JAX, in NAME.ref.npz) on CPU."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import mlcc
from mlcc.hlo.passes.pipelines import default_pipeline

MODELS = ["gpt2_tiny.onnx", "gpt2_tiny_legacy.onnx", "bert_tiny.onnx", "mlp.onnx", "convnet.onnx",
          "convnet_noopt.onnx", "mlp.stablehlo.mlir", "attention.stablehlo.mlir", "cnn.stablehlo.mlir"]

# what the author wrote, per model: composite op -> count after the pipeline
EXPECTED = {
    "gpt2_tiny.onnx": {"attention": 2, "layer-norm": 5, "gelu": 2, "softmax": 0},
    "gpt2_tiny_legacy.onnx": {"attention": 2, "layer-norm": 5, "gelu": 2, "softmax": 0},
    "bert_tiny.onnx": {"attention": 2, "layer-norm": 5, "gelu": 2, "softmax": 0},
    "mlp.onnx": {"gelu": 1},
    "convnet.onnx": {"convolution": 2},
    "convnet_noopt.onnx": {"convolution": 2, "batch-norm-inference": 0},
    "mlp.stablehlo.mlir": {"gelu": 1, "tanh": 0},
    "attention.stablehlo.mlir": {"attention": 1, "layer-norm": 1, "softmax": 0, "reduce": 0, "exp": 0},
    "cnn.stablehlo.mlir": {"convolution": 2, "relu": 2, "maximum": 0, "multiply": 0},
}
# a decomposed GELU, LayerNorm or softmax leaves one of these behind
PRIMITIVES = ("power", "erf", "sqrt", "rsqrt", "exp", "reduce")
CAUSAL = {"gpt2_tiny.onnx": True, "gpt2_tiny_legacy.onnx": True, "bert_tiny.onnx": False,
          "attention.stablehlo.mlir": True}


def _import(path: Path):
    if path.suffix == ".onnx":
        from mlcc.frontend.onnx import import_onnx
        return import_onnx(path)
    from mlcc.frontend.stablehlo import import_stablehlo
    return import_stablehlo(path)


def _reference(path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    ref = np.load(path.with_name(path.name.replace(".onnx", "").replace(".mlir", "") + ".ref.npz"))
    inputs = {k: ref[k] for k in ref.files if not k.startswith("out")}
    outputs = {k.removeprefix("out:"): ref[k] for k in ref.files if k.startswith("out")}
    return inputs, outputs


@pytest.mark.parametrize("name", MODELS)
def test_pipeline_recognizes_and_the_bundle_matches_the_reference(name, shared_models, tmp_path):
    path = shared_models / name
    if not path.exists():
        pytest.skip(f"{name} is not in the shared models")
    module = _import(path)
    before = Counter(i.opcode for i in module.all_instructions())
    default_pipeline().run(module)
    after = Counter(i.opcode for i in module.all_instructions())
    print(f"{name}: {sum(before.values())} -> {sum(after.values())} instructions; after: {dict(after)}")

    for opcode, count in EXPECTED[name].items():
        assert after[opcode] == count, f"{name}: {after[opcode]} {opcode}, expected {count}\n{dict(after)}"
    if any(op in EXPECTED[name] for op in ("attention", "layer-norm", "gelu")):
        assert not {op: after[op] for op in PRIMITIVES if after[op]}, f"{name}: leftovers {dict(after)}"
    for inst in module.all_instructions():
        if inst.opcode == "attention":
            assert inst.attrs["causal"] is CAUSAL[name]
            assert inst.attrs["scale"] == pytest.approx(0.25)
    assert sum(after.values()) <= sum(before.values())

    mlcc.compile(str(path), tmp_path / "bundle", targets=[])
    inputs, want = _reference(path)
    got = mlcc.load(tmp_path / "bundle").run(inputs)
    for key, expected in want.items():
        np.testing.assert_allclose(got[key], expected, rtol=1e-3, atol=1e-4, err_msg=f"{name}: output {key}")
