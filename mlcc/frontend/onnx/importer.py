"""ONNX ModelProto -> mlcc IR Module.

Load, check, infer shapes (with data propagation), order the nodes, then import
each node with its rule from the registry. Values known at import time
(initializers, Constant nodes, shapes of static tensors, and small results of
nodes whose inputs are all known) stay numpy arrays and become IR constants
only when an IR instruction needs them, so exporter shape chains such as
Shape -> Gather -> Unsqueeze -> Concat -> Reshape leave nothing in the IR.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import onnx
import onnx.inliner

from mlcc.frontend.onnx.errors import (DeferredValueError, FrontendError, InvalidModelError,
                                       UnsupportedFeatureError, UnsupportedNode, UnsupportedOpError)
from mlcc.frontend.onnx.loading import dense_of_sparse, detach_mapped, load_model, node_label, topological_order, uses_external_data
from mlcc.frontend.onnx.registry import (COUNT_SYMBOL, Deferred, ImportContext, OnnxNode, Result, Rule, Tensor, find_rule,
                                         normalize_domain)
from mlcc.frontend.onnx.symbolic_values import collapse, fold_symbolic
from mlcc.frontend.onnx.types import INT32_DATA_RANGES, ONNX_OF_IR_DTYPE, PACKED_BITS, as_ir_array, ir_dtype, onnx_type_name
from mlcc.hlo.blockquant import (PACKED_DTYPE_BITS, packed_bytes, packed_bytes_symbolic, symbolic_packed_count,
                                 unpacked, unpacked_symbolic)
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import dtype_of_numpy, numpy_dtype
from mlcc.hlo.evaluator import EvaluationError, evaluate_computation
from mlcc.hlo.ir import MAX_VALUE_BYTES, Dim, Instruction, Module, Shape
from mlcc.hlo.shape_inference import ShapeError
from mlcc.hlo.symbolic import NAME, Sym
from mlcc.hlo.verifier import storage_misuse
from mlcc.names import sanitize_identifier

FOLD_LIMIT = 4096  # a node with all inputs known is computed at import when each output has at most this many elements

InputShapes = dict[str, list[int | str]]


def import_onnx(model: str | os.PathLike | onnx.ModelProto, *, shapes: InputShapes | None = None,
                name: str | None = None, dim_ranges: dict[str, tuple[int, int]] | None = None) -> Module:
    """Import an ONNX model (a path or a ModelProto) as an IR module.

    ``shapes`` overrides the dims of graph inputs by input name (ints or
    symbolic names); ``name`` overrides the module name. ``dim_ranges`` gives
    symbolic dims their inclusive (lo, hi) ranges, recorded as ``Module.symbols``
    and used to decide comparisons of sizes at import (Slice clamping).
    """
    if isinstance(model, onnx.ModelProto):
        label = None
        if uses_external_data(model):
            raise InvalidModelError("the model refers to external data; import it by path", file=label)
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
        default_name = model.graph.name or "model"
        data_files: list[Path] = []
        mapped: dict[str, np.ndarray] = {}
    else:
        path = Path(model)
        label = path.name
        proto, data_files, mapped = load_model(path)
        detach_mapped(proto, mapped)
        default_name = path.stem
    proto, symbols, renamed = _prepare(proto, label, shapes or {})
    given = dim_ranges or {}
    counted = {k: v for k, v in given.items() if k not in symbols and renamed.get(k, k) not in symbols
               and COUNT_SYMBOL.match(k)}  # bounds of data-dependent dims (nonzero_0=..100)
    ranges = _symbol_ranges({k: v for k, v in given.items() if k not in counted}, symbols, renamed, label)
    module_name = sanitize_identifier(name or default_name)
    importer = _GraphImporter(proto, label, module_name, symbols, mapped, ranges)
    importer.ctx.count_bounds = {k: _symbol_ranges({k: v}, {k}, {}, label)[k] for k, v in counted.items()}
    module = importer.run()
    _check_storage_types(module, label)
    unused = sorted(set(counted) - set(module.symbols))
    if unused:
        raise InvalidModelError(f"dim_ranges names '{unused[0]}', which is neither a symbolic dim of the model "
                                f"nor a data-dependent dim of one", file=label)
    module.source_files = data_files  # external data files: hashed into the manifest with the model (item 9)
    return module


def unsupported_nodes(graph: onnx.GraphProto, opsets: dict[str, int],
                      local_functions: frozenset[tuple[str, str]] = frozenset(),
                      scope: str = "") -> list[UnsupportedNode]:
    """Every node without an import rule (calls of ``local_functions``, (domain, name), excepted), looking
    inside the subgraphs of nodes that have one (If branches)."""
    missing: list[UnsupportedNode] = []
    pending = [(graph, scope)]
    while pending:  # a worklist: subgraphs may nest deep
        g, prefix = pending.pop()
        for index, node in enumerate(g.node):
            domain = normalize_domain(node.domain)
            if (domain, node.op_type) in local_functions:
                continue
            opset = opsets.get(domain, 0)
            label = node_label(node, index, prefix)
            if find_rule(domain, node.op_type, opset) is None:
                missing.append(UnsupportedNode(node.op_type, domain, opset, label))
                continue
            for a in node.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    pending.append((sub, f"{label}/"))
    return missing


# The newest IR version and opsets this onnx release knows (release, IR version, ai.onnx, ai.onnx.ml, training).
_NEWEST = onnx.helper.VERSION_TABLE[-1]
MAX_IR_VERSION = _NEWEST[1]
MAX_OPSETS = {"": _NEWEST[2], "ai.onnx.ml": _NEWEST[3], "ai.onnx.training": _NEWEST[4],
              "ai.onnx.preview.training": _NEWEST[4]}


def _check_versions(model: onnx.ModelProto, label: str | None) -> dict[str, int]:
    """The model's opsets by domain; an IR version or a standard opset newer than supported is unsupported."""
    if model.ir_version > MAX_IR_VERSION:
        raise UnsupportedFeatureError(f"IR version {model.ir_version} is newer than supported "
                                      f"(at most {MAX_IR_VERSION})", file=label)
    opsets: dict[str, int] = {}
    for o in model.opset_import:
        domain = normalize_domain(o.domain)
        newest = MAX_OPSETS.get(domain)
        if newest is not None and o.version > newest:
            raise UnsupportedFeatureError(f"{domain or 'ai.onnx'} opset {o.version} is newer than supported "
                                          f"(at most {newest})", file=label)
        opsets[domain] = o.version
    return opsets


def _check_all_supported(model: onnx.ModelProto, label: str | None) -> None:
    """Unsupported ops, listed all at once, before the ONNX checker (which stops at the first one it
    does not know); the bodies of model-local functions are checked too."""
    opsets = _check_versions(model, label)
    local = frozenset((normalize_domain(f.domain), f.name) for f in model.functions)
    missing = unsupported_nodes(model.graph, opsets, local)
    for f in model.functions:
        f_opsets = opsets | {normalize_domain(o.domain): o.version for o in f.opset_import}
        body = onnx.GraphProto(node=f.node)
        missing += unsupported_nodes(body, f_opsets, local, f"{f.name}/")
    if missing:
        raise UnsupportedOpError(missing, file=label)


def _prepare(model: onnx.ModelProto, label: str | None,
             shapes: InputShapes) -> tuple[onnx.ModelProto, set[str], dict[str, str]]:
    """Sort, check, inline local functions, fix input dims and run ONNX shape inference.

    Also returns the model's own symbolic dim names: a name that shape inference
    makes up (``unk__3``) stands for an unknown dim; and the dim names renamed
    to identifiers (the form symbolic dims take in the IR), by original name.
    """
    order = topological_order(model.graph, label)
    _check_all_supported(model, label)
    if order != list(range(len(order))):
        nodes = [model.graph.node[i] for i in order]
        copies = [onnx.NodeProto() for _ in nodes]
        for c, n in zip(copies, nodes):
            c.CopyFrom(n)
        del model.graph.node[:]
        model.graph.node.extend(copies)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise InvalidModelError(f"the ONNX checker rejects the model: {_first_line(e)}", file=label) from None
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
    _set_input_dims(model, label, shapes)
    _check_input_dims(model, label)
    renamed = _rename_dims(model)
    g = model.graph
    symbols = {d.dim_param for v in list(g.input) + list(g.output) + list(g.value_info)
               if v.type.HasField("tensor_type") for d in v.type.tensor_type.shape.dim if d.HasField("dim_param")}
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True), symbols, renamed
    except Exception as e:  # onnx raises InferenceError and, for some ops, plain RuntimeError
        raise InvalidModelError(f"ONNX shape inference fails: {_first_line(e)}", file=label) from None


def _check_storage_types(module: Module, label: str) -> None:
    """InvalidModelError (exit 65) naming the node whose op computes on an fp8, fp4, 4- or 2-bit value: ONNX
    allows those types only in casts, quantize/dequantize and data movement (ReduceSum of an INT4 tensor breaks
    ReduceSum's type constraint, which onnx's checker does not enforce)."""
    for inst in module.entry.instructions:
        found = storage_misuse(inst)
        if found is not None and inst.origin:
            raise InvalidModelError(f"node '{inst.origin[0]}': its op does not take {onnx_type_name(ONNX_OF_IR_DTYPE[found])} "
                                    f"values (the op's type constraints)", file=label)


def _dim_protos(model: onnx.ModelProto) -> list[onnx.TensorShapeProto.Dimension]:
    g = model.graph
    return [d for v in list(g.input) + list(g.output) + list(g.value_info) if v.type.HasField("tensor_type")
            for d in v.type.tensor_type.shape.dim]


def _rename_dims(model: onnx.ModelProto) -> dict[str, str]:
    """Give every symbolic dim whose name is not an identifier (``batch size``) one, the same everywhere:
    an IR dim is an expression over identifiers."""
    params = sorted({d.dim_param for d in _dim_protos(model) if d.HasField("dim_param")})
    taken = {p for p in params if NAME.match(p)}
    renamed = {p: sanitize_identifier(p, taken) for p in params if not NAME.match(p)}
    for d in _dim_protos(model):
        if d.HasField("dim_param") and d.dim_param in renamed:
            d.dim_param = renamed[d.dim_param]
    return renamed


def _symbol_ranges(dim_ranges: dict[str, tuple[int, int]], symbols: set[str], renamed: dict[str, str],
                   label: str | None) -> dict[str, tuple[int, int]]:
    """``dim_ranges`` by the IR's symbol names (a renamed dim may be given by its model name)."""
    ranges: dict[str, tuple[int, int]] = {}
    for key, rng in dim_ranges.items():
        name = renamed.get(key, key)
        if name not in symbols:
            raise InvalidModelError(f"dim_ranges names '{key}', which is not a symbolic dim of the model", file=label)
        try:
            lo, hi = (int(v) for v in rng)
        except (TypeError, ValueError):
            raise InvalidModelError(f"dim_ranges gives '{key}' {rng!r}: a range is (lo, hi)", file=label) from None
        if not 0 <= lo <= hi:
            raise InvalidModelError(f"dim_ranges gives '{key}' the empty or negative range ({lo}, {hi})", file=label)
        ranges[name] = (lo, hi)
    return ranges


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return " ".join(lines[:3]) if lines else type(e).__name__


def _set_input_dims(model: onnx.ModelProto, label: str | None, shapes: InputShapes) -> None:
    """Apply ``shapes`` to the graph inputs and name every unknown input dim, so shape inference sees them."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input}
    symbols = {d.dim_param for i in model.graph.input if i.type.HasField("tensor_type")
               for d in i.type.tensor_type.shape.dim if d.HasField("dim_param")}
    named_dims: dict[str, int] = {}  # --shape batch=1: a symbolic dim by its name, wherever it appears
    for key in list(shapes):
        if key in inputs and key not in initializers:
            continue
        if key in symbols and len(shapes[key]) == 1 and isinstance(shapes[key][0], (int, np.integer)) \
                and not isinstance(shapes[key][0], bool) and shapes[key][0] >= 0:
            named_dims[key] = int(shapes[key][0])
            continue
        if key in symbols:
            raise InvalidModelError(f"shapes gives dim '{key}' {list(shapes[key])}: a dim takes one size", file=label)
        raise InvalidModelError(f"shapes names '{key}', which is neither a graph input nor a symbolic dim of one",
                                file=label)
    shapes = {k: v for k, v in shapes.items() if k not in named_dims}
    bound = _bound_symbols(inputs, shapes, label)
    for name, size in named_dims.items():
        if bound.setdefault(name, size) != size:
            raise InvalidModelError(f"shapes gives dim '{name}' two values, {bound[name]} and {size}", file=label)
    for inp in model.graph.input:
        if inp.name in initializers or not inp.type.HasField("tensor_type"):
            continue
        tt = inp.type.tensor_type
        if inp.name in shapes:
            dims = list(shapes[inp.name])
            if tt.HasField("shape") and len(tt.shape.dim) != len(dims):
                raise InvalidModelError(f"input '{inp.name}' has rank {len(tt.shape.dim)}, "
                                        f"shapes gives {len(dims)} dims", file=label)
            del tt.shape.dim[:]
            tt.shape.SetInParent()
            for d in dims:
                dim = tt.shape.dim.add()
                if isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
                    dim.dim_value = int(d)
                elif isinstance(d, str) and d:
                    dim.dim_param = d
                else:
                    raise InvalidModelError(f"input '{inp.name}': bad dim {d!r} in shapes", file=label)
        elif not tt.HasField("shape"):
            raise UnsupportedFeatureError(f"input '{inp.name}' has no shape (give its dims in shapes=)", file=label)
        for k, dim in enumerate(tt.shape.dim):
            if dim.HasField("dim_param") and dim.dim_param in bound:
                dim.dim_value = bound[dim.dim_param]
            elif not dim.HasField("dim_value") and not dim.HasField("dim_param"):
                dim.dim_param = f"{sanitize_identifier(inp.name)}_d{k}"


MAX_TENSOR_BYTES = MAX_VALUE_BYTES  # (a product of dims past 2**63 would also overflow the int64 sizes downstream)


def _check_input_dims(model: onnx.ModelProto, label: str | None) -> None:
    """Graph inputs with a negative dim, or dims whose byte size overflows int64 (checked arithmetic)."""
    for inp in model.graph.input:
        if not inp.type.HasField("tensor_type"):
            continue
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim if d.HasField("dim_value")]
        check_tensor_size(inp.name, dims, inp.type.tensor_type.elem_type, label)


def check_tensor_size(name: str, dims: Sequence[Dim | None], elem_type: int | str, label: str | None,
                      node: str | None = None, op_type: str | None = None) -> None:
    """Reject a negative dim, or static dims whose byte size does not fit in int64 (RELIABILITY.md item 13)."""
    itemsize = numpy_dtype(elem_type).itemsize if isinstance(elem_type, str) else \
        (np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize if ir_dtype(elem_type) else 1)
    size = max(itemsize, 1)
    for d in dims:
        if not isinstance(d, int):
            continue
        if d < 0:
            raise InvalidModelError(f"value '{name}' has a negative dim {d} in {list(dims)}", file=label, node=node,
                                    op_type=op_type)
        size *= d
    if size > MAX_TENSOR_BYTES:
        raise InvalidModelError(f"value '{name}' with dims {list(dims)} needs {size} bytes, more than 2**48 "
                                f"(256 TiB, more than any device addresses)",
                                file=label, node=node, op_type=op_type)


def _bound_symbols(inputs: dict[str, onnx.ValueInfoProto], shapes: InputShapes, label: str | None) -> dict[str, int]:
    """Symbolic dims that ``shapes`` fixes to a number; other inputs sharing the symbol get the same number."""
    bound: dict[str, int] = {}
    for key, dims in shapes.items():
        tt = inputs[key].type.tensor_type
        if not tt.HasField("shape") or len(tt.shape.dim) != len(dims):
            continue
        for dim, d in zip(tt.shape.dim, dims):
            if dim.HasField("dim_param") and isinstance(d, (int, np.integer)) and not isinstance(d, bool):
                if bound.setdefault(dim.dim_param, int(d)) != int(d):
                    raise InvalidModelError(f"shapes gives dim '{dim.dim_param}' two values, "
                                            f"{bound[dim.dim_param]} and {d}", file=label)
    return bound


def _dims_of(type_proto: onnx.TypeProto, symbols: set[str]) -> tuple[int, tuple[Dim | None, ...] | None] | None:
    """(element type, dims) of a tensor type, or of an optional's tensor type (an optional that holds a tensor is
    that tensor: ops/optional.py); dims unknown to the model (made up by shape inference) are None."""
    if type_proto.HasField("optional_type"):
        type_proto = type_proto.optional_type.elem_type
    if not type_proto.HasField("tensor_type"):
        return None
    tt = type_proto.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    dims: list[Dim | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param if d.HasField("dim_param") and d.dim_param in symbols else None)
    return tt.elem_type, tuple(dims)


class _GraphImporter:
    def __init__(self, model: onnx.ModelProto, label: str | None, module_name: str, symbols: set[str],
                 mapped: dict[str, np.ndarray] | None = None,
                 ranges: dict[str, tuple[int, int]] | None = None) -> None:
        self.model = model
        self.mapped = mapped or {}  # main-graph initializers memory-mapped from their external data file
        self.graph = model.graph
        opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
        self.ctx = ImportContext(file=label, opsets=opsets, ranges=dict(ranges or {}))
        self.b = Builder(module_name)
        for graph in _graphs(self.graph):
            for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
                info = _dims_of(vi.type, symbols)
                if info is not None:
                    self.ctx.inferred[vi.name] = info
        self.ctx.used = _used_names(self.graph)
        self.ctx.import_subgraph = self._import_subgraph

    def run(self) -> Module:
        self._check_supported()
        self._add_initializers()
        self._add_parameters()
        for index, node in enumerate(self.graph.node):
            self._import_node(node, index)
        outputs, names, packed = [], [], {}
        for out_name, t in self._output_tensors():
            if t.inst is None and t.value is None:
                raise UnsupportedFeatureError(f"output '{out_name}' {t.deferred}", file=self.ctx.file)
            inst = self.ctx.materialize(self.b, t)
            if inst.shape.dtype in PACKED_DTYPE_BITS and inst.shape.rank and inst.shape.is_static \
                    and inst.shape.numel() > 0:
                packed[len(outputs)] = Shape(inst.shape.dtype, inst.shape.dims)  # returned packed, as inputs come
                inst = packed_bytes(self.b, inst)
            elif inst.shape.dtype in PACKED_DTYPE_BITS and inst.shape.rank and not inst.shape.is_static and \
                    symbolic_packed_count(inst.shape.dims, PACKED_DTYPE_BITS[inst.shape.dtype]) is not None:
                packed[len(outputs)] = Shape(inst.shape.dtype, inst.shape.dims)  # whole bytes at every size
                inst = packed_bytes_symbolic(self.b, inst)
            outputs.append(inst)
            names.append(out_name)
        module = self.b.finish(outputs, names)
        module.packed_outputs = packed
        module.symbols = dict(self.ctx.ranges)
        return module

    def _output_tensors(self) -> list[tuple[str, Tensor]]:
        """The graph outputs by name; a sequence output is one output per element, ``NAME.0``, ``NAME.1``, ..."""
        found: list[tuple[str, Tensor]] = []
        for out in self.graph.output:
            t = self.ctx.tensor(out.name)
            if t.seq is None:
                found.append((out.name, t))
                continue
            for i, e in enumerate(t.seq):
                if e.seq is not None:
                    raise UnsupportedFeatureError(f"output '{out.name}' is a sequence of sequences", file=self.ctx.file)
                found.append((f"{out.name}.{i}", e))
        return found

    # ---- setup
    def _check_supported(self) -> None:
        missing = unsupported_nodes(self.graph, self.ctx.opsets)
        if missing:
            raise UnsupportedOpError(missing, file=self.ctx.file)

    def _import_subgraph(self, graph: onnx.GraphProto, scope: str, inputs: Sequence[Tensor] = ()) -> list[Tensor]:
        """Import a subgraph's nodes inline (they may read outer values), its inputs bound to ``inputs``.

        Returns its output tensors. Importing the same subgraph again (a loop body)
        rebinds its names, so each import sees the values of its own iteration.
        """
        if len(inputs) != len(graph.input):
            raise InvalidModelError(f"subgraph '{graph.name}' takes {len(graph.input)} inputs, gets {len(inputs)}",
                                    file=self.ctx.file)
        for formal, actual in zip(graph.input, inputs):
            self.ctx.tensors[formal.name] = dataclasses.replace(actual, name=formal.name)
        for init in graph.initializer:
            self.ctx.tensors[init.name] = self._initializer(init)
        for index in topological_order(graph, self.ctx.file):
            self._import_node(graph.node[index], index, f"{scope}/")
        return [self.ctx.tensor(out.name) for out in graph.output]

    def _add_initializers(self) -> None:
        for init in self.graph.initializer:
            self.ctx.tensors[init.name] = self._initializer(init)
        for name, arr in self.mapped.items():  # graph inputs for the checker (detach_mapped), constants here
            self.ctx.tensors[name] = self._known(name, arr)
        for sparse in self.graph.sparse_initializer:
            name = sparse.values.name
            self.ctx.tensors[name] = self._known(name, dense_of_sparse(sparse))

    def _initializer(self, tensor: onnx.TensorProto) -> Tensor:
        """A known value; one of a type mlcc lacks is an error only if something uses it."""
        if ir_dtype(tensor.data_type) is None:
            return Tensor(tensor.name, "u8", tuple(tensor.dims),
                          deferred=f"has element type {onnx_type_name(tensor.data_type)}, which mlcc does not support")
        self._check_int_data(tensor)
        return self._known(tensor.name, onnx.numpy_helper.to_array(tensor))

    def _check_int_data(self, tensor: onnx.TensorProto) -> None:
        """Packed 4- and 2-bit data of the length its dims need, and small integers (int32_data) within their
        type's range: onnx.numpy_helper would silently truncate or wrap either."""
        what = f"initializer '{tensor.name}' ({onnx_type_name(tensor.data_type)}, dims {list(tensor.dims)})"
        bits = PACKED_BITS.get(tensor.data_type)
        if bits is not None:
            numel = int(np.prod(tensor.dims, dtype=np.int64))
            want = -(-numel * bits // 8)
            have = len(tensor.raw_data) if tensor.HasField("raw_data") else len(tensor.int32_data)
            if have != want:
                raise InvalidModelError(f"{what} has {have} bytes of packed data, not {want}", file=self.ctx.file)
            lo, hi = 0, 255
        elif tensor.data_type in INT32_DATA_RANGES:
            lo, hi = INT32_DATA_RANGES[tensor.data_type]
        else:
            return
        if not tensor.HasField("raw_data") and len(tensor.int32_data):
            data = np.asarray(tensor.int32_data, dtype=np.int64)
            if data.min() < lo or data.max() > hi:
                bad = int(data[(data < lo) | (data > hi)][0])
                raise InvalidModelError(f"{what} holds {bad}, out of its type's range [{lo}, {hi}]",
                                        file=self.ctx.file)

    def _known(self, name: str, arr: np.ndarray, origin: tuple[str, ...] = ()) -> Tensor:
        arr = np.asarray(arr)
        try:
            dtype = dtype_of_numpy(arr.dtype)
        except TypeError:
            raise UnsupportedFeatureError(f"value '{name}' has numpy dtype {arr.dtype}", file=self.ctx.file) from None
        return Tensor(name, dtype, tuple(int(d) for d in arr.shape), value=arr, origin=origin)

    def _symbolic(self, name: str, arr: np.ndarray, origin: tuple[str, ...]) -> Tensor:
        """A value known at import in terms of symbolic dims: it folds on through shape ops, has no IR form."""
        info = self.ctx.inferred.get(name)
        dtype = (ir_dtype(info[0]) if info else None) or "s64"
        names = sorted({s for x in arr.reshape(-1) if isinstance(x, Sym) for s in x.symbols()})
        return Tensor(name, dtype, tuple(int(d) for d in arr.shape), origin=origin, sym=arr,
                      deferred=f"is computed from symbolic dims ({', '.join(names)}) and has no IR value")

    def _add_parameters(self) -> None:
        for inp in self.graph.input:
            if inp.name in self.ctx.tensors:  # an initializer: a constant (IR version >= 4 semantics)
                continue
            info = self.ctx.inferred.get(inp.name)
            dtype = ir_dtype(info[0]) if info else None
            if info is None and _holds_sequence(inp.type):
                raise UnsupportedFeatureError(f"input '{inp.name}' is a sequence: a compiled model takes tensors "
                                              "(mlcc.backend feeds a sequence as one input per element)",
                                              file=self.ctx.file)
            if info is None or dtype is None:
                what = onnx_type_name(info[0]) if info else "a non-tensor type"
                raise UnsupportedFeatureError(f"input '{inp.name}' has {what}", file=self.ctx.file)
            if info[1] is None or None in info[1]:
                raise UnsupportedFeatureError(f"input '{inp.name}' has unknown dims", file=self.ctx.file)
            dims: tuple[Dim, ...] = tuple(info[1])  # type: ignore[arg-type]
            if dtype in PACKED_DTYPE_BITS and dims and all(isinstance(d, int) and d > 0 for d in dims):
                # a 4- or 2-bit input arrives packed (README "The bundle"): its bytes, unpacked where read
                n = int(np.prod(dims, dtype=np.int64))
                raw = self.b.parameter(inp.name, Shape("u8", (-(-n * PACKED_DTYPE_BITS[dtype] // 8),)))
                raw.attrs.update(packed=dtype, packed_dims=tuple(int(d) for d in dims))
                inst = unpacked(self.b, raw, dtype, tuple(int(d) for d in dims))
            elif dtype in PACKED_DTYPE_BITS and dims and not all(isinstance(d, int) for d in dims) \
                    and symbolic_packed_count(dims, PACKED_DTYPE_BITS[dtype]) is not None:
                # symbolic dims whose values are whole bytes at every size: packed too
                count = symbolic_packed_count(dims, PACKED_DTYPE_BITS[dtype])
                raw = self.b.parameter(inp.name, Shape("u8", (count,)))
                raw.attrs.update(packed=dtype, packed_dims=tuple(dims))
                inst = unpacked_symbolic(self.b, raw, dtype, dims)
            else:
                inst = self.b.parameter(inp.name, Shape(dtype, dims))
            self.ctx.tensors[inp.name] = Tensor(inp.name, dtype, dims, inst=inst)

    # ---- nodes
    def _import_node(self, proto: onnx.NodeProto, index: int, scope: str = "") -> None:
        domain = normalize_domain(proto.domain)
        opset = self.ctx.opsets.get(domain, 0)
        rule = find_rule(domain, proto.op_type, opset)
        assert rule is not None  # _check_supported ran
        label = node_label(proto, index, scope)
        inputs = [self.ctx.tensor(x) for x in proto.input if x]
        if not rule.sequences:
            seq = next((t for t in inputs if t.seq is not None), None)
            if seq is not None:
                raise InvalidModelError(f"input '{seq.name}' is a sequence, and this op takes tensors (its type "
                                        "constraints)", file=self.ctx.file, node=label, op_type=proto.op_type)
        try:
            if any(t.is_symbolic for t in inputs) and all(t.is_known or t.is_symbolic for t in inputs):
                node = OnnxNode(proto, label, opset, self.ctx, lambda t: self.ctx.materialize(self.b, t))
                folded = fold_symbolic(node)
                if folded is not None:
                    self._record(proto, label, folded)
                    return
            if rule.fold and all(t.is_known for t in inputs):
                results = self._fold(rule, proto, label, opset)
                if results is not None:
                    self._record(proto, label, results)
                    return
            node = OnnxNode(proto, label, opset, self.ctx, lambda t: self.ctx.materialize(self.b, t))
            try:
                with self.b.origin(label):
                    results = list(rule.fn(self.b, node))
            except DeferredValueError as e:
                if not all(t.is_known or t.deferred for t in inputs):
                    raise
                # only values known at import or computed from symbolic dims: so is this node's output
                source = next((t for t in inputs if t.deferred), None)
                reason = None if source is None else source.deferred if source.deferred.startswith(
                    "is computed from") else f"is computed from '{source.name}', which {source.deferred}"
                results = [Deferred(reason or e.message)] * len(proto.output)
            self._record(proto, label, results)
        except FrontendError:
            raise
        except (ShapeError, ValueError) as e:
            raise InvalidModelError(str(e), file=self.ctx.file, node=label, op_type=proto.op_type) from e
        except TypeError as e:
            symbolic = [t.name for t in inputs if not all(isinstance(d, int) for d in t.dims)]
            if not symbolic:
                raise
            raise UnsupportedFeatureError(f"this op on inputs with symbolic dims ({', '.join(symbolic)}): {e}",
                                          file=self.ctx.file, node=label, op_type=proto.op_type) from e

    def _fold(self, rule: Rule, proto: onnx.NodeProto, label: str, opset: int) -> list[Result] | None:
        """Run the rule on known inputs in a scratch builder and evaluate it; None when an output is too big."""
        for out in proto.output:
            info = self.ctx.inferred.get(out)
            if info and info[1] is not None and all(isinstance(d, int) for d in info[1]):
                if int(np.prod(info[1], dtype=np.int64)) > FOLD_LIMIT:  # type: ignore[arg-type]
                    return None
        scratch = Builder("fold")
        made: dict[str, Instruction] = {}

        def materialize(t: Tensor) -> Instruction:
            if t.name not in made:
                made[t.name] = scratch.constant(t.value, ref_hint=t.name)
            return made[t.name]

        node = OnnxNode(proto, label, opset, self.ctx, materialize)
        results = list(rule.fn(scratch, node))
        pending = [r for r in results if isinstance(r, Instruction)]
        for r in pending:
            if r.shape.is_tuple or not r.shape.is_static or r.shape.numel() > FOLD_LIMIT:
                return None
        if not pending:
            return results
        values = _evaluate(scratch, pending)
        if values is None:
            return None
        by_id = {id(r): v for r, v in zip(pending, values)}
        return [by_id[id(r)] if isinstance(r, Instruction) else r for r in results]

    def _record(self, proto: onnx.NodeProto, label: str, results: Sequence[Result]) -> None:
        if len(results) > len(proto.output):
            raise InvalidModelError(f"{len(results)} results for {len(proto.output)} outputs",
                                    file=self.ctx.file, node=label, op_type=proto.op_type)
        for j, out in enumerate(proto.output):
            if not out:
                continue
            r = results[j] if j < len(results) else None
            if r is None:
                if out in self.ctx.used:
                    raise UnsupportedFeatureError(f"output {j} ('{out}') is not supported",
                                                  file=self.ctx.file, node=label, op_type=proto.op_type)
                continue
            if isinstance(r, Tensor):  # another value as it stands (a sequence, or one of its elements)
                t = dataclasses.replace(r, name=out, origin=r.origin or (label,))
                if t.seq is None:
                    self._check_inferred(t, label, proto.op_type)
                self.ctx.tensors[out] = t
                continue
            if isinstance(r, Instruction):
                if not r.shape.is_tuple:
                    check_tensor_size(out, r.shape.dims, r.shape.dtype, self.ctx.file, label, proto.op_type)
                t = Tensor(out, r.shape.dtype, tuple(r.shape.dims), inst=r, origin=(label,))
            elif isinstance(r, Deferred):
                info = self.ctx.inferred.get(out)
                dtype = (ir_dtype(info[0]) if info else None) or "s64"
                dims = tuple(d if d is not None else "?" for d in (info[1] or ())) if info else ()
                self.ctx.tensors[out] = Tensor(out, dtype, dims, origin=(label,), deferred=r.reason)
                continue
            elif (arr := collapse(np.asarray(r))).dtype == object:  # still symbolic after constant folding
                t = self._symbolic(out, arr, (label,))
            else:
                info = self.ctx.inferred.get(out)
                want = ir_dtype(info[0]) if info else None
                if want is not None:
                    arr = as_ir_array(arr, want)
                t = self._known(out, arr, origin=(label,))
            self._check_inferred(t, label, proto.op_type)
            self.ctx.tensors[out] = t

    def _check_inferred(self, t: Tensor, label: str, op_type: str) -> None:
        info = self.ctx.inferred.get(t.name)
        if info is None:
            return
        want = ir_dtype(info[0])
        if want is not None and want != t.dtype:
            raise InvalidModelError(f"output '{t.name}' is {t.dtype} but ONNX infers {want}",
                                    file=self.ctx.file, node=label, op_type=op_type)
        dims = info[1]
        if dims is not None and all(isinstance(d, int) for d in dims) and all(isinstance(d, int) for d in t.dims):
            if tuple(dims) != tuple(t.dims):
                raise InvalidModelError(f"output '{t.name}' has dims {list(t.dims)} but ONNX infers {list(dims)}",
                                        file=self.ctx.file, node=label, op_type=op_type)


def _holds_sequence(type_proto: onnx.TypeProto) -> bool:
    """Whether a value of this type is a sequence, or an optional of one."""
    if type_proto.HasField("optional_type"):
        type_proto = type_proto.optional_type.elem_type
    return type_proto.HasField("sequence_type")


def _evaluate(scratch: Builder, outputs: list[Instruction]) -> list[np.ndarray] | None:
    scratch.finish(outputs, [f"out{i}" for i in range(len(outputs))])
    try:
        result = evaluate_computation(scratch.comp, [], scratch.module.constants)
    except EvaluationError:  # leave it to the compiled model
        return None
    values = list(result) if isinstance(result, tuple) else [result]
    return [as_ir_array(v, r.shape.dtype) for v, r in zip(values, outputs)]


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """The graph and all its subgraphs."""
    out = [graph]
    for node in graph.node:
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                out.extend(_graphs(g))
    return out


def _used_names(graph: onnx.GraphProto) -> set[str]:
    used = {o.name for o in graph.output}
    for node in graph.node:
        used |= {x for x in node.input if x}
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                used |= _used_names(g)
    return used
