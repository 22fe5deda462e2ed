"""Control flow known at import time: an If with a known condition is its chosen branch; a Loop with a
known trip count (and conditions known at import time) is unrolled, and so is a Scan (its length is static)."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.registry import Deferred, OnnxNode, Result, Tensor, onnx_op
from mlcc.hlo.builder import Builder

MAX_UNROLLED_ITERATIONS = 256


def _result(t: Tensor) -> Result:
    if t.seq is not None:  # a sequence (ops/sequence.py) passes as it is
        return t
    if t.value is not None:
        return t.value
    if t.inst is not None:
        return t.inst
    return Deferred(t.deferred or "has no value")


def _known_bool(node: OnnxNode, t: Tensor, what: str) -> bool:
    if t.value is None:
        raise node.unsupported(f"the {what} (input '{t.name}') must be known at import time")
    if t.value.size != 1:
        raise node.error(f"the {what} has {t.value.size} elements")
    return bool(t.value.reshape(-1)[0])


@onnx_op("If", since=1, fold=False)
def import_if(b: Builder, node: OnnxNode) -> list[Result]:
    branch = node.attr("then_branch" if _known_bool(node, node.tensor(0), "condition") else "else_branch")
    if len(branch.output) != node.num_outputs:
        raise node.error(f"the branch has {len(branch.output)} outputs for {node.num_outputs}")
    assert node.ctx.import_subgraph is not None
    return [_result(t) for t in node.ctx.import_subgraph(branch, node.name)]


@onnx_op("Loop", since=1, fold=False, sequences=True)
def import_loop(b: Builder, node: OnnxNode) -> list[Result]:
    body = node.attr("body")
    trips = int(node.const(0, "trip count").reshape(-1)[0]) if node.has_input(0) else None
    keep_going = _known_bool(node, node.tensor(1), "loop condition") if node.has_input(1) else True
    carried = [node.tensor(i) for i in range(2, node.num_inputs)]
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan < 0 or len(body.input) != 2 + len(carried):
        raise node.error(f"the body's inputs and outputs do not match {len(carried)} loop-carried values")
    scans: list[list[Tensor]] = [[] for _ in range(n_scan)]
    assert node.ctx.import_subgraph is not None
    i = 0
    while keep_going and (trips is None or i < trips):
        if i == MAX_UNROLLED_ITERATIONS:
            raise node.unsupported(f"loops of more than {MAX_UNROLLED_ITERATIONS} iterations")
        counter = Tensor("iteration", "s64", (), value=np.array(i, dtype=np.int64))
        cond = Tensor("condition", "pred", (), value=np.array(True))
        outs = node.ctx.import_subgraph(body, f"{node.name}/{i}", [counter, cond] + carried)
        keep_going = _known_bool(node, outs[0], "loop condition")
        carried = outs[1:1 + len(carried)]
        for scan, t in zip(scans, outs[1 + len(carried):]):
            scan.append(t)
        i += 1
    stacked: list[Result] = []
    for scan in scans:
        if not scan:
            raise node.unsupported("scan outputs of a loop that runs no iteration")
        if all(t.value is not None for t in scan):
            stacked.append(np.stack([t.value for t in scan]))
            continue
        parts = [b.reshape(node.ctx.materialize(b, t), (1,) + tuple(t.dims)) for t in scan]
        stacked.append(parts[0] if len(parts) == 1 else b.op("concatenate", parts, dimension=0))
    return [_result(t) for t in carried] + stacked


def _axes(node: OnnxNode, name: str, count: int, ranks: list[int]) -> list[int]:
    axes = node.attr(name, [0] * count)
    if len(axes) != count:
        raise node.error(f"{name} has {len(axes)} entries for {count} values")
    return [node.axis(a, r) for a, r in zip(axes, ranks)]


def _scan_slice(b: Builder, node: OnnxNode, t: Tensor, axis: int, index: int) -> Tensor:
    """Element ``index`` of t along ``axis``, that axis removed."""
    dims = tuple(d for i, d in enumerate(t.dims) if i != axis)
    if t.value is not None:
        return Tensor(t.name, t.dtype, dims, value=np.take(t.value, index, axis=axis))
    x = node.ctx.materialize(b, t)
    starts = [0] * len(t.dims)
    limits = list(t.dims)
    starts[axis], limits[axis] = index, index + 1
    piece = b.op("slice", [x], start_indices=tuple(starts), limit_indices=tuple(limits),
                 strides=(1,) * len(t.dims))
    return Tensor(t.name, t.dtype, dims, inst=b.reshape(piece, dims))


def _stack(b: Builder, node: OnnxNode, pieces: list[Tensor], axis: int) -> Result:
    if all(t.value is not None for t in pieces):
        return np.stack([t.value for t in pieces], axis=axis)
    parts = []
    for t in pieces:
        dims = list(t.dims)
        dims.insert(axis, 1)
        parts.append(b.reshape(node.ctx.materialize(b, t), tuple(dims)))
    return parts[0] if len(parts) == 1 else b.op("concatenate", parts, dimension=axis)


@onnx_op("Scan", since=9, fold=False)
def import_scan(b: Builder, node: OnnxNode) -> list[Result]:
    """Unrolled: the body is imported once per element of the scanned axis (the sequence length is static)."""
    m = node.attr("num_scan_inputs")
    n_state = node.num_inputs - m
    states = [node.tensor(i) for i in range(n_state)]
    scanned = [node.tensor(i) for i in range(n_state, node.num_inputs)]
    in_axes = _axes(node, "scan_input_axes", m, [len(t.dims) for t in scanned])
    in_reverse = node.attr("scan_input_directions", [0] * m)
    states, outputs = _unroll(b, node, node.name, states, scanned, in_axes, in_reverse)
    out_axes = _axes(node, "scan_output_axes", len(outputs), [len(c[0].dims) + 1 for c in outputs])
    out_reverse = node.attr("scan_output_directions", [0] * len(outputs))
    stacked = [_stack(b, node, column[::-1] if rev else column, a)
               for column, a, rev in zip(outputs, out_axes, out_reverse)]
    return [_result(t) for t in states] + stacked


@onnx_op("Scan", since=8, fold=False)
def import_scan8(b: Builder, node: OnnxNode) -> list[Result]:
    """Scan-8: states and scan inputs have a batch axis first (the sequence is axis 1), and an optional
    first input ``sequence_lens``; each batch element is scanned on its own, the results stacked on axis 0."""
    m = node.attr("num_scan_inputs")
    if node.has_input(0):
        lens = node.const(0, "sequence_lens")
        scanned_len = {node.dims(i)[1] for i in range(node.num_inputs - m, node.num_inputs)}
        if {int(v) for v in lens.reshape(-1)} != scanned_len:
            raise node.unsupported(f"sequence_lens {lens.reshape(-1).tolist()} shorter than the scan inputs")
    n_state = node.num_inputs - 1 - m
    all_states = [node.tensor(i) for i in range(1, 1 + n_state)]
    all_scanned = [node.tensor(i) for i in range(1 + n_state, node.num_inputs)]
    batches = {t.dims[0] for t in all_states + all_scanned}
    if len(batches) != 1 or not isinstance(next(iter(batches)), int):
        raise node.unsupported(f"batch sizes {sorted(map(str, batches))} (one static batch size is needed)")
    reverse = node.attr("directions", [0] * m)
    finals: list[list[Tensor]] = []
    columns: list[list[Tensor]] = []
    for i in range(int(next(iter(batches)))):
        states = [_scan_slice(b, node, t, 0, i) for t in all_states]
        scanned = [_scan_slice(b, node, t, 0, i) for t in all_scanned]
        states, outputs = _unroll(b, node, f"{node.name}/b{i}", states, scanned, [0] * m, reverse)
        finals.append(states)
        columns.append([_as_tensor(_stack(b, node, column, 0), column[0]) for column in outputs])
    return [_stack(b, node, list(per_value), 0) for per_value in zip(*finals)] + \
        [_stack(b, node, list(per_value), 0) for per_value in zip(*columns)]


def _as_tensor(value: Result, like: Tensor) -> Tensor:
    if isinstance(value, np.ndarray):
        return Tensor(like.name, like.dtype, value.shape, value=value)
    return Tensor(like.name, like.dtype, tuple(value.shape.dims), inst=value)


def _unroll(b: Builder, node: OnnxNode, prefix: str, states: list[Tensor], scanned: list[Tensor],
            in_axes: list[int], in_reverse: list[int]) -> tuple[list[Tensor], list[list[Tensor]]]:
    """The body imported once per scanned element: the final states, and per scan output its pieces."""
    body = node.attr("body")
    n_state, m = len(states), len(scanned)
    n_out = len(body.output) - n_state
    if m < 1 or n_out < 0 or len(body.input) != n_state + m:
        raise node.error(f"the body's inputs and outputs do not match {n_state} states and {m} scan inputs")
    lengths = {t.dims[a] for t, a in zip(scanned, in_axes)}
    if len(lengths) != 1 or not isinstance(next(iter(lengths)), int):
        raise node.unsupported(f"scan inputs of lengths {sorted(map(str, lengths))} (one static length is needed)")
    length = int(next(iter(lengths)))
    if length > MAX_UNROLLED_ITERATIONS:
        raise node.unsupported(f"scans of more than {MAX_UNROLLED_ITERATIONS} iterations")
    if length == 0:
        raise node.unsupported("a scan over zero elements")
    outputs: list[list[Tensor]] = [[] for _ in range(n_out)]
    assert node.ctx.import_subgraph is not None
    for i in range(length):
        slices = [_scan_slice(b, node, t, a, length - 1 - i if rev else i)
                  for t, a, rev in zip(scanned, in_axes, in_reverse)]
        outs = node.ctx.import_subgraph(body, f"{prefix}/{i}", states + slices)
        states = outs[:n_state]
        for column, t in zip(outputs, outs[n_state:]):
            column.append(t)
    return states, outputs
