"""Control flow known at import time: an If with a known condition is its chosen branch; a Loop with a
known trip count (and conditions known at import time) is unrolled."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.registry import Deferred, OnnxNode, Result, Tensor, onnx_op
from mlcc.hlo.builder import Builder

MAX_UNROLLED_ITERATIONS = 256


def _result(t: Tensor) -> Result:
    if t.value is not None:
        return t.value
    if t.inst is not None:
        return t.inst
    return Deferred(t.deferred or "has no value")


def _known_bool(node: OnnxNode, t: Tensor, what: str) -> bool:
    if t.value is None:
        raise node.unsupported(f"the {what} must be known at import time")
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


@onnx_op("Loop", since=1, fold=False)
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
