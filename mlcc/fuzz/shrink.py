"""Shrink a failing model to a minimal one that still fails the same way, and save it as a regression.

Reductions, each kept only while the failure reproduces (same kind, and for crashes the same signature):

1. keep one graph output (the failing one first), and drop the nodes nothing needs any more;
2. end the graph earlier: make an intermediate value the only output (earliest first);
3. bypass: a node one of whose inputs has its output's type is deleted, its users reading that input;
4. cut above: replace a node's output with a fresh graph input of the same type, deleting the node and
   whatever only fed it.

Each candidate runs in a forked child (``check_model_isolated``), on inputs drawn from the same seed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import onnx
from onnx import helper

from mlcc.fuzz.runner import Outcome, check_model_isolated

REGRESSIONS = Path(__file__).resolve().parents[2] / "tests" / "fuzz" / "regressions"


def same_failure(original: Outcome, candidate: Outcome) -> bool:
    if not candidate.failed or candidate.kind != original.kind:
        return False
    if original.kind == "mismatch":
        return candidate.signature.split(":")[:2] == original.signature.split(":")[:2]
    return candidate.signature == original.signature


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    g = inferred.graph
    return {vi.name: vi.type for vi in list(g.value_info) + list(g.input) + list(g.output)}


def prune(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop nodes, initializers and graph inputs that no graph output needs."""
    g = model.graph
    needed = {o.name for o in g.output}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in needed for o in n.output):
            keep.append(n)
            needed |= {i for i in n.input if i}
    nodes = list(reversed(keep))
    graph = helper.make_graph(nodes, g.name, [i for i in g.input if i.name in needed], list(g.output),
                              [t for t in g.initializer if t.name in needed])
    out = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                            producer_name=model.producer_name)
    return out


def with_outputs(model: onnx.ModelProto, names: list[str], types: dict[str, onnx.TypeProto]) -> onnx.ModelProto | None:
    if any(n not in types for n in names):
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    for n in names:
        m.graph.output.append(helper.make_value_info(n, types[n]))
    return prune(m)


def cut_above(model: onnx.ModelProto, value: str, types: dict[str, onnx.TypeProto]) -> onnx.ModelProto | None:
    """``value`` becomes a graph input; its producer goes (and, after pruning, whatever only fed it)."""
    if value not in types or any(i.name == value for i in model.graph.input):
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    producer = [k for k, n in enumerate(g.node) if value in n.output]
    if not producer or len(g.node[producer[0]].output) > 1:
        return None
    del g.node[producer[0]]
    g.input.append(helper.make_value_info(value, types[value]))
    return prune(m)


def bypass(model: onnx.ModelProto, index: int, types: dict[str, onnx.TypeProto]) -> onnx.ModelProto | None:
    """Node ``index`` deleted, its users reading the first input of the same type as its (single) output."""
    node = model.graph.node[index]
    if len(node.output) != 1 or node.output[0] not in types:
        return None
    out = node.output[0]
    same = [i for i in node.input if i and i in types and types[i] == types[out]]
    if not same:
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    del g.node[index]
    for n in g.node:
        for k, name in enumerate(n.input):
            if name == out:
                n.input[k] = same[0]
    for k, o in enumerate(g.output):
        if o.name == out:
            if any(x.name == same[0] for x in g.output):
                return None
            g.output[k].name = same[0]
    return prune(m)


def shrink(model: onnx.ModelProto, seed: int, original: Outcome,
           check: Callable[[onnx.ModelProto, int], Outcome] | None = None, max_checks: int = 60,
           log: Callable[[str], None] = lambda s: None) -> tuple[onnx.ModelProto, Outcome]:
    """The smallest model found that still fails like ``original`` (and its outcome)."""
    check = check or (lambda m, s: check_model_isolated(m, s))
    best, best_outcome = model, original
    checks = 0

    def attempt(candidate: onnx.ModelProto | None) -> bool:
        nonlocal best, best_outcome, checks
        if candidate is None or checks >= max_checks or len(candidate.graph.node) == 0:
            return False
        if len(candidate.graph.node) > len(best.graph.node):
            return False
        if candidate.SerializeToString() == best.SerializeToString():
            return False
        try:
            onnx.checker.check_model(candidate)
        except onnx.checker.ValidationError:
            return False
        checks += 1
        outcome = check(candidate, seed)
        if same_failure(original, outcome):
            best, best_outcome = candidate, outcome
            log(f"  shrunk to {len(best.graph.node)} nodes ({' '.join(n.op_type for n in best.graph.node)})")
            return True
        return False

    types = _value_types(best)
    failing = [o.name for o in best.graph.output if f"'{o.name}'" in original.detail]
    for name in failing + [o.name for o in best.graph.output if o.name not in failing]:
        if len(best.graph.output) > 1 and attempt(with_outputs(best, [name], types)):
            break
    changed = True
    while changed and checks < max_checks:
        changed = False
        types = _value_types(best)
        for n in list(best.graph.node)[:-1]:  # end the graph earlier, earliest cut first
            if any(attempt(with_outputs(best, [o], types)) for o in n.output if o):
                changed = True
                break
        if changed:
            continue
        for k in range(len(best.graph.node)):
            if attempt(bypass(best, k, types)):
                changed = True
                break
        if changed:
            continue
        for n in list(best.graph.node):
            if any(attempt(cut_above(best, o, types)) for o in n.output if o and o not in
                   {x.name for x in best.graph.output}):
                changed = True
                break
    return best, best_outcome


def save_regression(model: onnx.ModelProto, seed: int, outcome: Outcome, original_ops: list[str],
                    directory: Path = REGRESSIONS, avoid: frozenset[str] = frozenset()) -> Path:
    """Write ``<hash>.onnx`` and ``<hash>.json`` (seed, failure, ops); returns the .onnx path."""
    directory.mkdir(parents=True, exist_ok=True)
    data = model.SerializeToString(deterministic=True)
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = directory / f"{digest}.onnx"
    path.write_bytes(data)
    info = {"seed": seed, "input_seed": seed, "avoid": sorted(avoid), "kind": outcome.kind,
            "signature": outcome.signature, "failure": outcome.detail,
            "original_ops": original_ops, "ops": [n.op_type for n in model.graph.node]}
    meta = directory / f"{digest}.json"
    if meta.exists():  # keep a diagnosis written by hand
        old = json.loads(meta.read_text())
        info = {**info, **{k: v for k, v in old.items() if k in ("known_bug", "diagnosis")}}
    meta.write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return path
