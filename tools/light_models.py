"""The nine ``light_*.onnx`` models in the onnx wheel, and a way to give them random weights.

onnx ships small-on-disk versions of the ONNX model zoo's classic CNNs
(``onnx/backend/test/data/light/``), with ``light_<name>_output_0.pb`` holding
the expected output for BackendTest's dummy input (``arange(n) / n`` in the
input's shape). Their big weights are ``ConstantOfShape(0.02)`` nodes, which
makes every logit equal: ``randomize_light_weights`` replaces each such node by
a seeded random initializer with a He-style scale chosen from what consumes it
(conv and dense weights, biases, batch-norm statistics, scale/shift vectors),
so activations stay finite and the logits differ.

    from light_models import load_light_model, randomize_light_weights, dummy_input
    model = randomize_light_weights(load_light_model("squeezenet"), seed=0)

Tests and benchmarks import this file with ``tools/`` on ``sys.path``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
                "squeezenet", "vgg19", "zfnet512"]
PASS_THROUGH = {"Unsqueeze", "Reshape", "Flatten", "Squeeze", "Identity"}  # followed to the real consumer
LOGITS = "logits"
RESIDUAL_SUMS = {"Sum", "Add"}
RESIDUAL_SCALE = 0.2  # batch-norm scale at the end of a residual branch (as zero-init-residual, but not dead)


def light_model_path(name: str) -> Path:
    return LIGHT_DIR / f"light_{name}.onnx"


def load_light_model(name: str) -> onnx.ModelProto:
    return onnx.load(str(light_model_path(name)))


def expected_outputs(name: str) -> list[np.ndarray]:
    """The outputs onnx ships for ``dummy_input`` (BackendTest's reference for the light models)."""
    out = []
    for i in range(len(load_light_model(name).graph.output)):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((LIGHT_DIR / f"light_{name}_output_{i}.pb").read_bytes())
        out.append(numpy_helper.to_array(tensor))
    return out


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs that are not initializers (these IR version 3 models list their weights as inputs too)."""
    initializers = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in initializers]


def _dims(vi: onnx.ValueInfoProto) -> tuple[int, ...]:
    return tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)


def dummy_input(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """BackendTest's input for a light model: ``arange(n) / n`` in each float input's shape."""
    feeds = {}
    for vi in graph_inputs(model):
        shape = _dims(vi)
        n = int(np.prod(shape))
        feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def random_input(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded standard-normal inputs (an image-like input with some structure for random weights)."""
    rng = np.random.default_rng(seed)
    return {vi.name: rng.standard_normal(_dims(vi)).astype(np.float32) for vi in graph_inputs(model)}


def _consumers(graph: onnx.GraphProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = defaultdict(list)
    for node in graph.node:
        for k, name in enumerate(node.input):
            uses[name].append((node, k))
    return uses


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _weight(rng: np.random.Generator, shape: tuple[int, ...], node: onnx.NodeProto | None, index: int,
            seen_shape: tuple[int, ...], residual: bool) -> np.ndarray:
    """A random tensor for a weight used as input ``index`` of ``node`` (seen there with ``seen_shape``)."""
    op = node.op_type if node is not None else ""
    normal = rng.standard_normal(shape).astype(np.float32)
    if op == "BatchNormalization":
        if index == 4:  # running variance: positive
            return rng.uniform(0.5, 1.5, shape).astype(np.float32)
        if index == 1:  # the last norm of a residual branch gets a small scale, so sums do not blow up
            return (1.0 + 0.1 * normal) * np.float32(RESIDUAL_SCALE if residual else 1.0)
        return 0.1 * normal  # bias and running mean
    if op == "Mul":  # a per-channel scale (exported BN)
        return 1.0 + 0.1 * normal
    if op == "Gemm" and index == 1 and len(seen_shape) == 2:
        fan_in = seen_shape[1] if _attr(node, "transB", 0) else seen_shape[0]
        return normal * np.float32(np.sqrt(2.0 / fan_in))
    if len(seen_shape) >= 2:  # a conv filter [O, I, kh, kw] or a matrix: He normal over the fan-in
        fan_in = int(np.prod(seen_shape[1:]))
        return normal * np.float32(np.sqrt(2.0 / fan_in))
    return 0.05 * normal  # biases and shifts


def randomize_light_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """The model with every ``ConstantOfShape`` weight replaced by a seeded random initializer.

    The scale comes from the weight's consumer (followed through Reshape and
    Unsqueeze): He normal for conv filters and dense matrices, 1 +- 0.1 for
    scales (0.2 times that for a batch norm that ends a residual branch), a
    positive variance for batch norm, small values for biases.
    """
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {vi.name: _dims(vi) for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}
    initializers = {t.name: t for t in model.graph.initializer}
    uses = _consumers(model.graph)
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept, dropped_shapes = [], set()
    new_weights = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in initializers:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(initializers[node.input[0]]).reshape(-1))
        name = node.output[0]
        consumer, index, seen = None, 0, name
        while uses.get(seen):
            consumer, index = uses[seen][0]
            if consumer.op_type not in PASS_THROUGH:
                break
            seen = consumer.output[0]
        seen_shape = shapes.get(seen, shape) if seen != name else shape
        residual = consumer is not None and any(user.op_type in RESIDUAL_SUMS for user, _ in uses[consumer.output[0]])
        weight = _weight(rng, shape, consumer, index, seen_shape, residual)
        new_weights.append(numpy_helper.from_array(weight, name))
        dropped_shapes.add(node.input[0])
    del out.graph.node[:]
    out.graph.node.extend(kept)
    still_used = {x for n in kept for x in n.input}
    inits = [t for t in out.graph.initializer if t.name not in dropped_shapes or t.name in still_used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(inits + new_weights)
    inputs = [vi for vi in out.graph.input if vi.name not in dropped_shapes or vi.name in still_used]
    if model.ir_version < 4:  # before IR version 4 every initializer is also a graph input
        listed = {vi.name for vi in inputs}
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                   for t in new_weights if t.name not in listed]
    del out.graph.input[:]
    out.graph.input.extend(inputs)
    onnx.checker.check_model(out)
    return out


def with_logits_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with the input of its final Softmax added as a second output named ``logits``.

    A model without a Softmax (densenet121 ends at its classifier) is returned
    as it is: its output already is the logits.
    """
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
    if not softmax:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inferred = onnx.shape_inference.infer_shapes(model)
    source = softmax[-1].input[0]
    shape = next((_dims(vi) for vi in inferred.graph.value_info if vi.name == source), None)
    identity = helper.make_node("Identity", [source], [LOGITS], name="logits_output")
    out.graph.node.append(identity)
    out.graph.output.append(helper.make_tensor_value_info(LOGITS, onnx.TensorProto.FLOAT, shape))
    return out
