"""Reading an ONNX model: the file, its external data (only from inside the model's folder), and node order."""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Iterator

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto

from mlcc.frontend.onnx.errors import InvalidModelError, ModelNotFoundError


def load_model(path: Path) -> onnx.ModelProto:
    """The model at ``path`` with its external data read in, rejecting data paths that leave its folder."""
    label = path.name
    if not path.is_file():
        raise ModelNotFoundError(f"model file '{path}' does not exist", file=label)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends
        raise InvalidModelError(f"cannot parse the model: {type(e).__name__}: {e}", file=label) from None
    load_external_data(model, path.parent, label)
    return model


def all_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """Every TensorProto of the model: initializers and tensor attributes, subgraphs and functions included."""
    yield from _graph_tensors(model.graph)
    for fn in model.functions:
        for node in fn.node:
            yield from _node_tensors(node)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: onnx.NodeProto) -> Iterator[TensorProto]:
    for a in node.attribute:
        if a.type == AttributeProto.TENSOR:
            yield a.t
        elif a.type == AttributeProto.TENSORS:
            yield from a.tensors
        elif a.type == AttributeProto.SPARSE_TENSOR:
            yield a.sparse_tensor.values
            yield a.sparse_tensor.indices
        elif a.type == AttributeProto.GRAPH:
            yield from _graph_tensors(a.g)
        elif a.type == AttributeProto.GRAPHS:
            for g in a.graphs:
                yield from _graph_tensors(g)


def uses_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == TensorProto.EXTERNAL for t in all_tensors(model))


def load_external_data(model: onnx.ModelProto, base_dir: Path, label: str) -> None:
    for tensor in all_tensors(model):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        path = _safe_data_path(base_dir, location, tensor.name, label)
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise InvalidModelError(f"tensor '{tensor.name}': bad external data offset or length", file=label) from None
        size = path.stat().st_size
        if offset < 0 or offset > size or (length is not None and (length < 0 or offset + length > size)):
            raise InvalidModelError(f"tensor '{tensor.name}': external data range [{offset}, +{length}) "
                                    f"is outside '{location}' ({size} bytes)", file=label)
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read() if length is None else f.read(length)
        tensor.raw_data = data
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _safe_data_path(base_dir: Path, location: str, tensor: str, label: str) -> Path:
    where = f"tensor '{tensor}': external data location '{location}'"
    if not location:
        raise InvalidModelError(f"tensor '{tensor}': external data without a location", file=label)
    rel = Path(location)
    if rel.is_absolute() or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise InvalidModelError(f"{where} is an absolute path", file=label)
    if any(part == ".." for part in Path(location.replace("\\", "/")).parts):
        raise InvalidModelError(f"{where} leaves the model's folder", file=label)
    path = base_dir
    for part in rel.parts:
        path = path / part
        if path.is_symlink():
            raise InvalidModelError(f"{where} goes through a symbolic link", file=label)
    if not path.is_file():
        raise ModelNotFoundError(f"{where} does not exist", file=label)
    if os.path.commonpath([path.resolve(), base_dir.resolve()]) != str(base_dir.resolve()):
        raise InvalidModelError(f"{where} leaves the model's folder", file=label)
    return path


def node_label(node: onnx.NodeProto, index: int, scope: str = "") -> str:
    """A node's name, or a stable stand-in for an unnamed node (``scope`` prefixes nodes of subgraphs)."""
    return node.name or f"{scope}{node.op_type}_{index}"


def subgraph_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read from the enclosing scope."""
    names: set[str] = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs) if a.type == AttributeProto.GRAPHS else []
        for g in graphs:
            defined = {i.name for i in g.input} | {i.name for i in g.initializer}
            for n in g.node:
                names |= {x for x in n.input if x and x not in defined} | (subgraph_inputs(n) - defined)
                defined |= set(n.output)
    return names


def topological_order(graph: onnx.GraphProto, label: str | None) -> list[int]:
    """Node indices in an order where producers precede consumers (stable); a cycle is an error naming its nodes."""
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if out:
                producer[out] = i
    deps: list[set[int]] = []
    for i, node in enumerate(graph.node):
        names = {x for x in node.input if x} | subgraph_inputs(node)
        deps.append({producer[x] for x in names if x in producer})
    users: list[list[int]] = [[] for _ in graph.node]
    pending = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(graph.node):
        left = {i for i, n in enumerate(pending) if n > 0}
        cycle = _find_cycle(left, deps)
        names = " -> ".join(f"'{node_label(graph.node[i], i)}' ({graph.node[i].op_type})" for i in cycle)
        raise InvalidModelError(f"the graph has a cycle: {names}", file=label)
    return order


def _find_cycle(left: set[int], deps: list[set[int]]) -> list[int]:
    """A cycle among ``left``, where every node has a dependency in ``left``."""
    path: list[int] = []
    seen: dict[int, int] = {}
    node = min(left)
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min(d for d in deps[node] if d in left)
    return path[seen[node]:] + [node]


def dense_of_sparse(sparse: onnx.SparseTensorProto) -> np.ndarray:
    values = onnx.numpy_helper.to_array(sparse.values)
    indices = onnx.numpy_helper.to_array(sparse.indices)
    dense = np.zeros(tuple(sparse.dims), dtype=values.dtype)
    flat = dense.reshape(-1)
    if indices.ndim == 1:
        flat[indices] = values
    else:
        dense[tuple(indices.T)] = values
    return dense
