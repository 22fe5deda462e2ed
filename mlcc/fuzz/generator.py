"""Random ONNX models that are valid by construction, in the manner of NNSmith (ASPLOS'23).

A model grows one node at a time. Each op has a generator in ``OPS`` that knows the op's constraints: which
operand dtypes and ranks it takes, how its attributes relate to the operand shapes (a Conv's filter channels,
a Concat's matching dims, a Gather's in-range indices), and what shape, dtype and value bound its result has.
An operand is an existing value (recent ones preferred, so graphs grow deep) or a fresh graph input or
initializer shaped to fit.

Two facts ride along with every value, so that a correct compiler never disagrees with onnxruntime by
accident:

- ``bound``, an upper bound on its magnitude. Ops that would overflow (exp of a large value, a long product,
  f16 past 65504) are not generated on it.
- ``exact``, whether every correct implementation computes it bit for bit (inputs, constants, data movement,
  integer arithmetic, comparisons of exact values). Ops that are discontinuous (Floor, Sign, comparisons,
  float->int casts, ArgMax) only take exact operands: a last-bit difference upstream must not flip them.

``generate(seed)`` is deterministic: the same seed gives the same model, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from mlcc.fuzz.builder import F32, IR_VERSION, OPSET, ModelBuilder, Skip, Value
from mlcc.fuzz.ops import OPS

# ---- whole models ----------------------------------------------------------------------------------------

@dataclass
class GeneratedModel:
    seed: int
    model: onnx.ModelProto
    ops: list[str]
    value_types: dict[str, tuple[int, tuple[int, ...]]]  # every value's dtype and dims, as the generator sees them


def _prune(g: ModelBuilder, outputs: list[Value]) -> list[onnx.NodeProto]:
    """The nodes the outputs need, in order."""
    needed = {v.name for v in outputs}
    keep = []
    for n in reversed(g.nodes):
        if any(o in needed for o in n.output):
            keep.append(n)
            needed |= {i for i in n.input if i}
    return list(reversed(keep))


AVOIDABLE = ("scalar-outputs", "empty-tensors")  # model features a campaign may leave out (a known bug's)


def generate(seed: int, max_nodes: int = 10, avoid: frozenset[str] = frozenset()) -> GeneratedModel:
    """A random valid model of 2 to ``max_nodes`` generated ops (a guarded op adds a node or two); the same
    arguments always give the same model.

    ``avoid`` leaves out features in AVOIDABLE, so a campaign can look past a bug already found.
    """
    unknown = set(avoid) - set(AVOIDABLE)
    if unknown:
        raise ValueError(f"cannot avoid {sorted(unknown)}; choose from {AVOIDABLE}")
    rng = np.random.default_rng([seed, 0x6d6c6363])
    g = ModelBuilder(rng, allow_empty="empty-tensors" not in avoid)
    target = g.int_in(2, max(2, max_nodes))
    names = list(OPS)
    weights = np.array([OPS[n][0] for n in names])
    attempts = 0
    while len(g.nodes) < target and attempts < 200:
        attempts += 1
        name = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        snapshot = (len(g.nodes), len(g.inputs), len(g.initializers), len(g.values), set(g.used), len(g.ops_used))
        try:
            OPS[name][1](g)
        except Skip:
            n_nodes, n_in, n_init, n_val, used, n_ops = snapshot
            del g.nodes[n_nodes:], g.inputs[n_in:], g.initializers[n_init:], g.values[n_val:], g.ops_used[n_ops:]
            g.used = used
    produced = [v for v in g.values if v not in g.inputs and not any(v.name == t.name for t in g.initializers)]
    if "scalar-outputs" in avoid:
        produced = [v for v in produced if v.rank > 0]
    leaves = [v for v in produced if v.name not in g.used]
    outputs = leaves[-4:] if leaves else produced[-1:]
    if not outputs:  # nothing fit (very unlikely): one Relu on a fresh input
        x = g.new_input(F32, (3, 17))
        outputs = g.node("Relu", [x], [(F32, x.shape, x.bound, True)])
    nodes = _prune(g, outputs)
    needed = {i for n in nodes for i in n.input}
    inputs = [v for v in g.inputs if v.name in needed]
    inits = [t for t in g.initializers if t.name in needed]
    graph = helper.make_graph(nodes, f"fuzz_{seed}",
                              [helper.make_tensor_value_info(v.name, v.dtype, v.shape) for v in inputs],
                              [helper.make_tensor_value_info(v.name, v.dtype, v.shape) for v in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="mlcc.fuzz")
    types = {v.name: (v.dtype, v.shape) for v in g.values}
    return GeneratedModel(seed, model, [n.op_type for n in nodes], types)


def check_generated(gm: GeneratedModel) -> None:
    """The generator's own invariant: ONNX's checker passes, and strict shape inference agrees with the
    dtype and dims the generator gave every value (raises on a generator bug)."""
    onnx.checker.check_model(gm.model, full_check=True)
    model = onnx.ModelProto()
    model.CopyFrom(gm.model)
    known = {v.name for v in list(model.graph.input) + list(model.graph.output)}
    for n in model.graph.node:
        for o in n.output:
            if o not in known and o in gm.value_types:
                dtype, shape = gm.value_types[o]
                model.graph.value_info.append(helper.make_tensor_value_info(o, dtype, shape))
    onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def random_inputs(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Inputs for the model's graph inputs: N(0,1) floats, ints in [-5, 5], random bools (seeded)."""
    rng = np.random.default_rng([seed, 0x696e70])
    init = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        tt = vi.type.tensor_type
        shape = tuple(d.dim_value for d in tt.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype.kind == "f":
            feeds[vi.name] = np.asarray(rng.standard_normal(shape)).astype(dtype)
        elif dtype.kind == "b":
            feeds[vi.name] = np.asarray(rng.random(shape) < 0.5)
        else:
            feeds[vi.name] = np.asarray(rng.integers(-5, 6, shape)).astype(dtype)
    return feeds
