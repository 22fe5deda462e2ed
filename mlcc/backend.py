"""ONNX's backend API (``onnx.backend.base``) on top of mlcc, like ``onnxruntime.backend``.

    import mlcc.backend
    rep = mlcc.backend.prepare(model)          # compiles into a temporary bundle, no GPU target
    (y,) = rep.run([x])                        # outputs in graph order
    mlcc.backend.run_node(node, [x, w])        # one node as a model

``prepare`` compiles the ModelProto with ``targets=[]`` (a bundle of Triton
sources, run by Triton's interpreter on CPU, or JIT-compiled on a CUDA device)
into a temporary directory that lives as long as the returned rep.

mlcc compiles ahead of time, so every value that fixes a shape (a Reshape's
shape, a Loop's trip count, an If's condition) must be known when compiling.
When such a value is a graph input, ``prepare`` cannot know it: the rep then
compiles at ``run`` time, once per distinct value of those inputs, with the
values baked in as initializers. Only the inputs the importer names (or that
the value it names is computed from) are baked; everything else stays a
runtime input. An optional-typed input fed None (an empty optional) is
likewise compiled in, as an empty ``Optional`` node, one bundle per set of
empty inputs. A sequence-typed input (a list of arrays) is fed as one tensor
input per element, ``NAME.0``, ``NAME.1``, ..., gathered by a
``SequenceConstruct`` (``SequenceEmpty`` for an empty list): one bundle per
count, element type and dims of the fed elements. A sequence-typed output comes
back from the bundle as ``NAME.0``, ``NAME.1``, ... and is returned as a list.
Errors from mlcc propagate unchanged.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

import mlcc
from mlcc.errors import MlccError, UnsupportedError

MAX_SPECIALIZATIONS = 16  # compiled variants a rep keeps for distinct values of its baked inputs
SHAPE_ONLY = {"Shape", "Size"}  # ops whose result depends on their input's dims, not its values
_NEEDED_INPUT = re.compile(r"\(input '([^']*)'\) (?:must be|is not) known at import time")


def _torch_device(device: str) -> str:
    d = Device(device)
    return "cpu" if d.type == DeviceType.CPU else f"cuda:{d.device_id}"


def _needed_input(error: MlccError) -> str | None:
    """The input an import error says must be known at compile time, if it names one."""
    m = _NEEDED_INPUT.search(str(error))
    return m.group(1) if m else None


def _inputs_feeding(graph: onnx.GraphProto, name: str) -> list[str]:
    """The graph inputs that value ``name`` of the graph is computed from, in graph input order.

    Values computed inside an If, Loop or Scan's branches count too (the importer names them when they
    must be known): such a value is computed from its node's inputs, and a node in a branch also reads
    the outer values its subgraph uses by name. The data inputs of Shape and Size do not count: their
    results depend on static dims only.
    """
    producer: dict[str, tuple[onnx.NodeProto, list[str]]] = {}
    _index_producers(graph, producer)
    seen: set[str] = set()
    todo = [name]
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        found = producer.get(value)
        if found is not None and found[0].op_type not in SHAPE_ONLY:
            todo.extend(found[1])
    return [vi.name for vi in graph.input if vi.name in seen]


def _index_producers(graph: onnx.GraphProto, producer: dict[str, tuple[onnx.NodeProto, list[str]]]) -> set[str]:
    """Map each value computed in ``graph`` (and its subgraphs) to its node and the values that node reads;
    return the names ``graph`` reads without defining them (what a subgraph captures from outside)."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    read: set[str] = set()
    for node in graph.node:
        reads = [x for x in node.input if x]
        for attr in node.attribute:
            subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subgraphs:
                reads.extend(sorted(_index_producers(sub, producer)))
        for out in node.output:
            if out:
                producer[out] = (node, reads)
        read.update(reads)
        defined.update(x for x in node.output if x)
    return read - defined


def _empty_inputs(graph: onnx.GraphProto, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Zero-element arrays for the inputs among ``names`` whose static dims include a 0."""
    out = {}
    for vi in graph.input:
        tt = vi.type.tensor_type
        if vi.name not in names or not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if None not in dims and 0 in dims:
            out[vi.name] = np.zeros(dims, dtype=helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return out


def _model_proto(model: Any) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model))
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model))
    raise TypeError(f"expected an onnx.ModelProto, bytes or a path, got {type(model).__name__}")


def _with_initializers(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The model with the graph inputs in ``values`` turned into initializers."""
    baked = onnx.ModelProto()
    baked.CopyFrom(model)
    kept = [vi for vi in baked.graph.input if vi.name not in values]
    del baked.graph.input[:]
    baked.graph.input.extend(kept)
    for name, value in values.items():
        baked.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return baked


def _with_empty_optionals(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """The model with the optional-typed graph inputs ``names`` turned into empty ``Optional`` nodes."""
    empty = onnx.ModelProto()
    empty.CopyFrom(model)
    kinds = {vi.name: vi.type.optional_type.elem_type for vi in empty.graph.input if vi.name in names}
    kept = [vi for vi in empty.graph.input if vi.name not in names]
    del empty.graph.input[:]
    empty.graph.input.extend(kept)
    nodes = [helper.make_node("Optional", [], [name], name=f"empty_{name}", type=kinds[name]) for name in names]
    old = list(empty.graph.node)
    del empty.graph.node[:]
    empty.graph.node.extend(nodes + old)
    return empty


def _is_sequence_type(type_proto: onnx.TypeProto) -> bool:
    if type_proto.HasField("optional_type"):
        type_proto = type_proto.optional_type.elem_type
    return type_proto.HasField("sequence_type")


def _sequence_elem_type(type_proto: onnx.TypeProto) -> int:
    if type_proto.HasField("optional_type"):
        type_proto = type_proto.optional_type.elem_type
    elem = type_proto.sequence_type.elem_type
    return elem.tensor_type.elem_type if elem.HasField("tensor_type") else onnx.TensorProto.FLOAT


def _with_sequence_inputs(model: onnx.ModelProto, values: Mapping[str, Sequence[np.ndarray]]) -> onnx.ModelProto:
    """The model with each sequence-typed graph input in ``values`` fed as one tensor input per element
    (``NAME.0``, ``NAME.1``, ...: the fed arrays' types and dims) and gathered by a SequenceConstruct."""
    fed = onnx.ModelProto()
    fed.CopyFrom(model)
    kinds = {vi.name: vi.type for vi in fed.graph.input if vi.name in values}
    inputs: list[onnx.ValueInfoProto] = []
    nodes = []
    for vi in model.graph.input:
        if vi.name not in values:
            inputs.append(vi)
            continue
        parts = [f"{vi.name}.{i}" for i in range(len(values[vi.name]))]
        for part, v in zip(parts, values[vi.name]):
            inputs.append(helper.make_tensor_value_info(part, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
        if parts:
            nodes.append(helper.make_node("SequenceConstruct", parts, [vi.name], name=f"feed_{vi.name}"))
        else:
            nodes.append(helper.make_node("SequenceEmpty", [], [vi.name], name=f"feed_{vi.name}",
                                          dtype=_sequence_elem_type(kinds[vi.name])))
    bound = _sequence_dims(model.graph, values)
    for vi in inputs:  # a symbolic dim the sequences' element type names takes the fed elements' size everywhere
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in bound:
                    d.dim_value = bound[d.dim_param]
    del fed.graph.input[:]
    fed.graph.input.extend(inputs)
    old = list(fed.graph.node)
    del fed.graph.node[:]
    fed.graph.node.extend(nodes + old)
    return fed


def _sequence_dims(graph: onnx.GraphProto, values: Mapping[str, Sequence[np.ndarray]]) -> dict[str, int]:
    """The symbolic dims of the sequence inputs' element types that every fed element gives one size."""
    sizes: dict[str, set[int]] = {}
    for vi in graph.input:
        if vi.name not in values:
            continue
        t = vi.type.optional_type.elem_type if vi.type.HasField("optional_type") else vi.type
        elem = t.sequence_type.elem_type
        if not elem.HasField("tensor_type") or not elem.tensor_type.HasField("shape"):
            continue
        dims = elem.tensor_type.shape.dim
        for v in values[vi.name]:
            if v.ndim != len(dims):
                continue
            for d, n in zip(dims, v.shape):
                if d.HasField("dim_param"):
                    sizes.setdefault(d.dim_param, set()).add(int(n))
    return {name: next(iter(s)) for name, s in sizes.items() if len(s) == 1}


class _Compiled:
    """One bundle in a temporary directory, loaded; the directory goes when this object does."""

    def __init__(self, model: onnx.ModelProto, device: str) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="mlcc-backend-")
        out = os.path.join(self._dir.name, "bundle")
        mlcc.compile(model, out, targets=[], cache_dir="", quiet=True)
        self.executable = mlcc.load(out, device=device)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.executable.run(feeds)


class MlccBackendRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns the outputs in graph order, as a namedtuple."""

    def __init__(self, model: onnx.ModelProto, device: str = "CPU") -> None:
        self.model = model
        self.device = device
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in initializers]
        self.output_names = [vo.name for vo in model.graph.output]
        self._outputs = namedtupledict("Outputs", self.output_names)
        # A zero-element input carries no data, only its (static) type and dims: it is compiled in
        # (which also spares the runtime, whose Executable.run cannot take a zero-element input today).
        empty = _empty_inputs(model.graph, self.input_names)
        self._model = _with_initializers(model, empty) if empty else model
        self.constant_inputs = set(empty)
        self.baked: list[str] = []  # inputs compiled in as constants, one bundle per distinct value
        self._variants: dict[bytes, _Compiled] = {}
        self._optional = {vi.name for vi in model.graph.input if vi.type.HasField("optional_type")}
        self._emptied: dict[tuple[str, ...], MlccBackendRep] = {}  # by the optional inputs fed None
        self._sequences = {vi.name for vi in model.graph.input if _is_sequence_type(vi.type)}
        self._sequenced: dict[bytes, MlccBackendRep] = {}  # by the count, types and dims of the fed elements
        self._sequence_outputs = {vo.name for vo in model.graph.output if _is_sequence_type(vo.type)}
        self._compiled = None if self._sequences else self._compile_or_defer()

    def _compile_or_defer(self) -> _Compiled | None:
        try:
            return _Compiled(self._model, _torch_device(self.device))
        except UnsupportedError as e:
            needed = self._inputs_needed(e)
            if not needed:
                raise
            self.baked.extend(needed)
            return None

    def _inputs_needed(self, error: UnsupportedError) -> list[str]:
        """The not yet baked graph inputs that the value ``error`` says must be known is computed from."""
        name = _needed_input(error)
        if name is None:
            return []
        return [n for n in _inputs_feeding(self.model.graph, name)
                if n in self.input_names and n not in self.baked and n not in self.constant_inputs]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        feeds = self._feeds(inputs)
        empty = tuple(sorted(name for name, v in feeds.items() if v is None))
        if empty:
            wrong = [name for name in empty if name not in self._optional]
            if wrong:
                raise ValueError(f"input '{wrong[0]}' is None but is not optional")
            if empty not in self._emptied:
                self._emptied[empty] = MlccBackendRep(_with_empty_optionals(self.model, empty), self.device)
            return self._emptied[empty].run({k: v for k, v in feeds.items() if v is not None})
        if self._sequences:
            return self._run_sequences(feeds)
        compiled = self._compiled or self._specialized(feeds)
        skip = self.constant_inputs.union(self.baked)
        results = compiled.run({k: v for k, v in feeds.items() if k not in skip})
        return self._outputs(*(self._output(results, name) for name in self.output_names))

    def _output(self, results: Mapping[str, np.ndarray], name: str) -> Any:
        """Output ``name`` from the bundle's results: a sequence output is its elements, ``NAME.0``, ... as a list."""
        if name not in self._sequence_outputs:
            return results[name]
        elements = []
        while f"{name}.{len(elements)}" in results:
            elements.append(results[f"{name}.{len(elements)}"])
        return elements

    def _run_sequences(self, feeds: Mapping[str, Any]) -> tuple[Any, ...]:
        """Run with the sequence inputs fed as one tensor per element (the bundle for their count and types)."""
        lists = {name: [np.asarray(v) for v in feeds[name]] for name in self._sequences}
        key = repr(sorted((name, [(v.dtype.str, v.shape) for v in vs]) for name, vs in lists.items())).encode()
        rep = self._sequenced.get(key)
        if rep is None:
            rep = MlccBackendRep(_with_sequence_inputs(self.model, lists), self.device)
            if len(self._sequenced) >= MAX_SPECIALIZATIONS:
                self._sequenced.pop(next(iter(self._sequenced)))
            self._sequenced[key] = rep
        flat = {k: v for k, v in feeds.items() if k not in lists}
        for name, vs in lists.items():
            flat.update({f"{name}.{i}": v for i, v in enumerate(vs)})
        return self._outputs(*rep.run(flat))

    def _feeds(self, inputs: Any) -> dict[str, Any]:
        """Inputs by name: arrays, None (an empty optional), or lists of arrays (sequences)."""
        if isinstance(inputs, Mapping):
            pairs = list(inputs.items())
        else:
            values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(values) != len(self.input_names):
                raise ValueError(f"the model takes {len(self.input_names)} inputs "
                                 f"({', '.join(self.input_names)}), got {len(values)}")
            pairs = list(zip(self.input_names, values))
        feeds = {k: None if v is None else [np.asarray(x) for x in v] if k in self._sequences else np.asarray(v)
                 for k, v in pairs}
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"missing inputs: {', '.join(missing)}")
        return feeds

    def _specialized(self, feeds: Mapping[str, np.ndarray]) -> _Compiled:
        """The bundle for these values of the baked inputs, compiled on first use."""
        while True:
            key = b"".join(name.encode() + repr((feeds[name].dtype.str, feeds[name].shape)).encode()
                           + np.ascontiguousarray(feeds[name]).tobytes() for name in self.baked)
            found = self._variants.get(key)
            if found is not None:
                return found
            model = _with_initializers(self._model, {name: feeds[name] for name in self.baked})
            try:
                compiled = _Compiled(model, _torch_device(self.device))
            except UnsupportedError as e:
                needed = self._inputs_needed(e)
                if not needed:
                    raise
                self.baked.extend(needed)
                continue
            if len(self._variants) >= MAX_SPECIALIZATIONS:
                self._variants.pop(next(iter(self._variants)))
            self._variants[key] = compiled
            return compiled


class MlccBackend(Backend):
    """``onnx.backend.base.Backend`` for mlcc: CPU always, CUDA where torch sees a device."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> MlccBackendRep:
        proto = _model_proto(model)
        onnx.checker.check_model(proto)
        if not cls.supports_device(device):
            raise RuntimeError(f"mlcc.backend does not support device '{device}' here")
        return MlccBackendRep(proto, device)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on ``inputs`` (a list in the node's input order, or a dict by input name)."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        names = [x for x in node.input if x]
        if isinstance(inputs, Mapping):
            values = [np.asarray(inputs[n]) for n in names]
        else:
            values = [np.asarray(v) for v in inputs]
        if len(values) != len(names):
            raise ValueError(f"node '{node.name or node.op_type}' takes {len(names)} inputs, got {len(values)}")
        graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                        for n, v in zip(names, values)]
        if outputs_info is not None:
            graph_outputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(t)), s)
                             for n, (t, s) in zip(node.output, outputs_info)]
        else:
            graph_outputs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs)
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        opsets = [helper.make_opsetid("", kwargs.get("opset_version", onnx.defs.onnx_opset_version()))]
        if domain:
            opsets.append(helper.make_opsetid(domain, onnx.defs.get_schema(node.op_type, domain=domain).since_version))
        model = helper.make_model(graph, opset_imports=opsets)
        if outputs_info is None:  # the outputs' types come from ONNX's shape inference
            model = onnx.shape_inference.infer_shapes(model)
        return cls.prepare(model, device).run(values)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            d = Device(device)
        except (AttributeError, ValueError):
            return False
        if d.type == DeviceType.CPU:
            return True
        try:
            import torch
        except ImportError:
            return False
        return bool(torch.cuda.is_available()) and d.device_id < torch.cuda.device_count()


prepare = MlccBackend.prepare
run_model = MlccBackend.run_model
run_node = MlccBackend.run_node
supports_device = MlccBackend.supports_device
is_compatible = MlccBackend.is_compatible
