"""Reading an ONNX model: the file, its external data (only from inside the model's folder), and node order."""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import mmap
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto

from mlcc.frontend.onnx.errors import InvalidModelError, ModelNotFoundError
from mlcc.frontend.onnx.inline_data import load_without_payloads
from mlcc.frontend.onnx.types import PACKED_BITS

LAZY_MIN_BYTES = 1 << 20  # initializers this large are memory-mapped, not read (external data or inline)


def load_model(path: Path) -> tuple[onnx.ModelProto, list[Path], dict[str, np.ndarray]]:
    """The model at ``path`` with its external data checked, rejecting data paths that leave its folder;
    also the external data files and the large initializers, memory-mapped (see load_external_data)."""
    label = path.name
    if not path.is_file():
        raise ModelNotFoundError(f"model file '{path}' does not exist", file=label)
    model, inline = _load_mapped(path, label)
    files, mapped = load_external_data(model, path.parent, label)
    return model, files, {**inline, **mapped}


def _load_mapped(path: Path, label: str, min_bytes: int = LAZY_MIN_BYTES) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model's proto, its large inline initializers left in the file and returned as arrays over a
    memory map of it (mlcc/frontend/onnx/inline_data.py): their bytes are read once, when used."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > 0:
                view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # the map outlives the descriptor
                try:
                    found = load_without_payloads(view, min_bytes, _mappable_dtype)
                except Exception:  # protobuf's DecodeError on a damaged field: onnx.load below says what it is
                    found = None
                if found is not None:
                    return found
                with contextlib.suppress(BufferError):  # an array over it may still be referenced
                    view.close()
        return onnx.load(str(path), load_external_data=False), {}
    except Exception as e:  # protobuf's DecodeError and friends
        raise InvalidModelError(f"cannot parse the model: {type(e).__name__}: {e}", file=label) from None


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


EXTERNAL_DATA_KEYS = frozenset({"location", "offset", "length", "checksum"})  # the ONNX spec's keys, nothing else
_DIGITS = re.compile(r"[0-9]{1,19}")  # a non-negative decimal that fits in int64



def load_external_data(model: onnx.ModelProto, base_dir: Path, label: str,
                       lazy_min_bytes: int = LAZY_MIN_BYTES) -> tuple[list[Path], dict[str, np.ndarray]]:
    """Check every external tensor and make its bytes available; returns the data files (for the manifest)
    and the memory-mapped initializers.

    The location must name a regular file inside ``base_dir`` reached without symbolic links
    (RELIABILITY.md items 1-8): it is opened component by component relative to the folder with
    ``O_NOFOLLOW``, so a file or folder swapped for a link after the checks fails to open.

    Initializers of the main graph of at least ``lazy_min_bytes`` stay external in the proto (which
    so stays small, whatever the weights weigh) and come back as read-only arrays over a memory map
    of the checked file: a model larger than RAM is never read whole. Smaller tensors, and those of
    subgraphs and attributes, are read into the proto (shape inference may need their values).
    """
    files: dict[str, Path] = {}
    mapped: dict[str, np.ndarray] = {}
    checked: set[tuple[str, str]] = set()
    count = len(model.graph.initializer)  # all_tensors yields them first (protobuf wrappers have no stable id)
    for index, tensor in enumerate(all_tensors(model)):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = _external_data_info(tensor, label)
        location = info.get("location", "")
        path, checked_stat = _safe_data_path(base_dir, location, tensor.name, label)
        where = f"tensor '{tensor.name}': external data '{location}'"
        offset = _external_int(info, "offset", 0, tensor.name, label)
        length = _external_int(info, "length", None, tensor.name, label)
        expected = _payload_bytes(tensor, label)
        if length is not None and expected is not None and length != expected:
            raise InvalidModelError(f"{where}: length {length} does not match the {expected} bytes "
                                    f"its dims {list(tensor.dims)} need", file=label)
        dtype = _mappable_dtype(tensor)
        lazy = index < count and dtype is not None and (expected or 0) >= lazy_min_bytes
        with _open_inside(base_dir, path, checked_stat, where, label) as f:
            size = os.fstat(f.fileno()).st_size
            want = length if length is not None else expected if expected is not None else size - offset
            if offset > size or want < 0 or offset + want > size:
                raise InvalidModelError(f"{where}: range [{offset}, +{want}) is outside the file "
                                        f"({size} bytes)", file=label)
            if "checksum" in info and (location, info["checksum"]) not in checked:
                _check_checksum(f, info["checksum"], where, label)
                checked.add((location, info["checksum"]))
            if lazy:
                view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # the map outlives the descriptor
                arr = np.frombuffer(view, dtype=dtype, count=want // dtype.itemsize, offset=offset)
                mapped[tensor.name] = arr.reshape(tuple(tensor.dims))
            else:
                f.seek(offset)
                data = f.read(want)
                if len(data) != want:
                    raise InvalidModelError(f"{where}: the file shrank while it was read", file=label)
        files.setdefault(str(path), path)
        if lazy:
            continue
        tensor.raw_data = data
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT
    return list(files.values()), mapped


def detach_mapped(model: onnx.ModelProto, mapped: dict[str, np.ndarray]) -> None:
    """Turn the memory-mapped initializers into graph inputs of the same type, in place.

    The ONNX checker resolves external data against the current directory when it checks a proto,
    and shape inference cannot read it: both see these tensors as typed inputs instead, and the
    importer binds the names to the mapped arrays (values of a megabyte or more are never shapes).
    """
    if not mapped:
        return
    inputs = {i.name for i in model.graph.input}
    kept = [t for t in model.graph.initializer if t.name not in mapped]
    detached = [t for t in model.graph.initializer if t.name in mapped]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    for t in detached:
        if t.name not in inputs:
            model.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))


def _mappable_dtype(tensor: TensorProto) -> np.dtype | None:
    """The little-endian numpy dtype an external tensor's bytes are an array of; None where they are not one
    (strings, sub-byte and 8-bit float types, which need unpacking)."""
    try:
        dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, ValueError, TypeError):
        return None
    plain = dt.kind in "biu" or tensor.data_type in (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)
    return dt.newbyteorder("<") if plain else None


def _external_data_info(tensor: TensorProto, label: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for e in tensor.external_data:
        if e.key not in EXTERNAL_DATA_KEYS:
            raise InvalidModelError(f"tensor '{tensor.name}': unknown external data key {e.key!r} "
                                    f"(allowed: {', '.join(sorted(EXTERNAL_DATA_KEYS))})", file=label)
        if e.key in info:
            raise InvalidModelError(f"tensor '{tensor.name}': external data key {e.key!r} given twice", file=label)
        info[e.key] = e.value
    return info


def _external_int(info: dict[str, str], key: str, default: int | None, tensor: str, label: str) -> int | None:
    if key not in info:
        return default
    text = info[key]
    if not _DIGITS.fullmatch(text) or int(text) >= 2**63:
        raise InvalidModelError(f"tensor '{tensor}': bad external data {key} {text[:40]!r} "
                                f"(a non-negative integer below 2**63)", file=label)
    return int(text)


def _payload_bytes(tensor: TensorProto, label: str) -> int | None:
    """The bytes a tensor's dims and element type need (checked arithmetic); None for types of unknown width."""
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None
    if tensor.data_type in (TensorProto.STRING,) or itemsize == 0:
        return None
    count = 1
    for d in tensor.dims:
        if d < 0:
            raise InvalidModelError(f"tensor '{tensor.name}' has a negative dim {d}", file=label)
        count *= d
        if count * itemsize >= 2**63:
            raise InvalidModelError(f"tensor '{tensor.name}': dims {list(tensor.dims)} overflow int64", file=label)
    if tensor.data_type in PACKED_BITS:  # 4- and 2-bit types: packed, the last byte padded
        return -(-count * PACKED_BITS[tensor.data_type] // 8)
    return count * itemsize


def _check_checksum(f, checksum: str, where: str, label: str) -> None:
    """``checksum`` is the hex digest of the whole file: SHA-1 (the ONNX spec's) or SHA-256."""
    algo = {40: "sha1", 64: "sha256"}.get(len(checksum))
    if algo is None or not re.fullmatch(r"[0-9a-fA-F]+", checksum):
        raise InvalidModelError(f"{where}: checksum {checksum[:80]!r} is not a SHA-1 or SHA-256 hex digest",
                                file=label)
    h = hashlib.new(algo)
    f.seek(0)
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    if h.hexdigest() != checksum.lower():
        raise InvalidModelError(f"{where}: {algo} checksum mismatch (the file is not the one the model was "
                                f"saved with)", file=label)


def _safe_data_path(base_dir: Path, location: str, tensor: str, label: str) -> tuple[Path, os.stat_result]:
    """The checked path of an external data file (relative, no '..', no link on the way, a regular file with
    one link) and its lstat at the time of the check."""
    where = f"tensor '{tensor}': external data location '{location}'"
    if not location:
        raise InvalidModelError(f"tensor '{tensor}': external data without a location", file=label)
    if "\x00" in location:
        raise InvalidModelError(f"{where} contains a NUL byte", file=label)
    posix = location.replace("\\", "/")
    if posix.startswith("/") or (len(location) > 1 and location[1] == ":") or Path(location).is_absolute():
        raise InvalidModelError(f"{where} is an absolute path", file=label)
    parts = [p for p in posix.split("/") if p not in ("", ".")]
    if any(part == ".." for part in parts) or not parts:
        raise InvalidModelError(f"{where} leaves the model's folder", file=label)
    path = base_dir
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise InvalidModelError(f"{where} goes through a symbolic link", file=label)
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise ModelNotFoundError(f"{where} does not exist", file=label) from None
    except OSError as e:
        raise InvalidModelError(f"{where} cannot be read: {e.strerror}", file=label) from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidModelError(f"{where} is not a regular file", file=label)
    if st.st_nlink > 1:
        raise InvalidModelError(f"{where} has {st.st_nlink} hard links (refused: it may be a file from "
                                f"elsewhere)", file=label)
    base = base_dir.resolve()
    if os.path.commonpath([path.resolve(), base]) != str(base):
        raise InvalidModelError(f"{where} leaves the model's folder", file=label)
    return path, st


@contextlib.contextmanager
def _open_inside(base_dir: Path, path: Path, checked: os.stat_result, where: str, label: str) -> Iterator[BinaryIO]:
    """Open ``path`` (checked by _safe_data_path, which saw ``checked``) again without following any link,
    and make sure it is still the regular, singly linked file that was checked (same device and inode)."""
    parts = path.relative_to(base_dir).parts
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    directory = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow
    fds: list[int] = []
    try:
        try:
            if os.open in os.supports_dir_fd:  # each component relative to its parent's descriptor
                fds.append(os.open(base_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)))
                for part in parts[:-1]:
                    fds.append(os.open(part, directory, dir_fd=fds[-1]))
                fd = os.open(parts[-1], os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0), dir_fd=fds[-1])
            else:  # no openat: the inode comparison below still catches a swapped file
                fd = os.open(path, os.O_RDONLY | nofollow | getattr(os, "O_BINARY", 0))
        except OSError as e:
            raise InvalidModelError(f"{where} changed while it was opened ({e.strerror})", file=label) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino) \
                or st.st_nlink > 1:
            os.close(fd)
            raise InvalidModelError(f"{where} changed while it was opened (not the file that was checked)",
                                    file=label)
        with os.fdopen(fd, "rb") as f:
            yield f
    finally:
        for d in fds:
            os.close(d)


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
    graph_values = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in graph_values:
                if out in producer:
                    j = producer[out]
                    first = f"node '{node_label(graph.node[j], j)}' ({graph.node[j].op_type})"
                else:
                    first = "a graph input or initializer"
                raise InvalidModelError(f"value '{out}' is defined twice: by {first} and by node "
                                        f"'{node_label(node, i)}' ({node.op_type})", file=label)
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
