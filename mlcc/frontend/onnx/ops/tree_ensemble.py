"""TreeEnsemble (ai.onnx.ml 5): a forest of decision trees, spelled as comparisons, dots and selects.

The trees are attributes, so each root-to-leaf path is known at import time. Every interior node's test is
one column of a [N, nodes] predicate (the sample's feature compared with the split by the node's mode, set
membership an OR of equalities, a NaN feature true where ``nodes_missing_value_tracks_true`` says so);
comparisons are made in f64, where every f16/f32/f64 feature and split is exact, as the reference compares
Python floats. A path is reached when all of its tests go its way: [cond, not cond] as 0/1 times a
[2 * nodes, paths] incidence matrix counts the tests a sample passes, and the path is reached when the count
equals its length (each tree reaches exactly one). Leaf weights then go to their targets: SUM and AVERAGE
through one dot with a [paths, targets] weight matrix, MIN and MAX as a masked reduce over the paths
(a target no reached leaf names keeps the dtype's max or min, as in the reference).
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, require_float
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction

DIRECTIONS = {0: "LE", 1: "LT", 2: "GE", 3: "GT", 4: "EQ", 5: "NE"}
MEMBER = 6
AGGREGATES = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}
WORK = "f64"


def _ints(node: OnnxNode, name: str, count: int | None) -> list[int]:
    values = [int(v) for v in node.attr(name)]
    if count is not None and len(values) != count:
        raise node.error(f"{name} has {len(values)} entries where {count} are needed")
    return values


def _paths(node: OnnxNode, roots: list[int], true_ids: list[int], false_ids: list[int], true_leaf: list[int],
           false_leaf: list[int], n_leaves: int) -> list[tuple[int, list[tuple[int, bool]]]]:
    """Every root-to-leaf path: (leaf index, [(interior node, branch taken)])."""
    n_nodes = len(true_ids)
    paths = []
    for root in roots:
        if not 0 <= root < n_nodes:
            raise node.error(f"tree root {root} is not a node index (there are {n_nodes})")
        if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]:
            if root >= n_leaves:
                raise node.error(f"the one-leaf tree at root {root} names no leaf (there are {n_leaves})")
            paths.append((root, []))  # the reference's degenerate tree: the root's index is its leaf's
            continue
        todo: list[tuple[int, list[tuple[int, bool]]]] = [(root, [])]
        while todo:
            at, path = todo.pop()
            if len(path) > n_nodes:
                raise node.error(f"the tree at root {root} has a cycle through node {at}")
            for branch, ids, leaf in ((True, true_ids, true_leaf), (False, false_ids, false_leaf)):
                step = path + [(at, branch)]
                if leaf[at]:
                    if not 0 <= ids[at] < n_leaves:
                        raise node.error(f"node {at} names leaf {ids[at]} (there are {n_leaves})")
                    paths.append((ids[at], step))
                elif not 0 <= ids[at] < n_nodes:
                    raise node.error(f"node {at} names node {ids[at]} (there are {n_nodes})")
                else:
                    todo.append((ids[at], step))
    return paths


def _member_sets(node: OnnxNode, modes: list[int]) -> dict[int, list[float]]:
    """Interior node -> its set of members (NaN-separated runs of membership_values, in node order)."""
    members = [i for i, m in enumerate(modes) if m == MEMBER]
    if not members:
        return {}
    if not node.has_attr("membership_values"):
        raise node.error("set membership nodes without membership_values")
    values = np.asarray(node.attr("membership_values"), np.float64).reshape(-1)
    runs: list[list[float]] = [[]]
    for v in values:
        if np.isnan(v):
            runs.append([])
        else:
            runs[-1].append(float(v))
    if len(runs) - 1 != len(members):
        raise node.error(f"membership_values has {len(runs) - 1} sets for {len(members)} set membership nodes")
    return dict(zip(members, runs))


def _conditions(b: Builder, node: OnnxNode, x: Instruction, used: list[int], features: list[int],
                splits: np.ndarray, modes: list[int], members: dict[int, list[float]],
                tracks: list[int]) -> Instruction:
    """[N, len(used)] predicate: node used[j]'s test on each sample."""
    n = x.shape.dims[0]
    dims = (n, len(used))
    feat = b.op("gather", [b.convert(x, WORK), b.constant(np.array([features[i] for i in used], np.int64))], axis=1)
    cond: Instruction | None = None

    def either(a: Instruction | None, c: Instruction) -> Instruction:
        return c if a is None else b.op("or", [a, c])

    def only(pred: Instruction, where: np.ndarray) -> Instruction:
        return b.op("and", [pred, broadcast_in_dims(b, b.constant(where), dims, [1])])

    used_modes = [modes[i] for i in used]
    for mode, direction in DIRECTIONS.items():
        where = np.array([m == mode for m in used_modes])
        if where.any():
            split = broadcast_in_dims(b, b.constant(np.array([splits[i] for i in used], np.float64)), dims, [1])
            cond = either(cond, only(b.op("compare", [feat, split], direction=direction), where))
    sets = [members.get(i, []) for i in used]
    for k in range(max((len(s) for s in sets), default=0)):
        column = np.array([s[k] if k < len(s) else np.nan for s in sets], np.float64)  # NaN equals nothing
        value = broadcast_in_dims(b, b.constant(column), dims, [1])
        cond = either(cond, b.op("compare", [feat, value], direction="EQ"))
    if cond is None:  # only set membership nodes with empty sets
        cond = b.splat(False, "pred", dims)
    track = np.array([bool(tracks[i]) for i in used])
    if track.any():
        cond = b.op("or", [cond, only(b.op("is-nan", [feat]), track)])
    return cond


@onnx_op("TreeEnsemble", since=5, domain="ai.onnx.ml")
def import_tree_ensemble(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    if x.shape.rank != 2 or not isinstance(x.shape.dims[1], int):
        raise node.error(f"input dims {list(x.shape.dims)} are not [N, features] with a static feature count")
    features_in = x.shape.dims[1]
    features = _ints(node, "nodes_featureids", None)
    count = len(features)
    splits = np.asarray(node.attr("nodes_splits"), np.float64).reshape(-1)
    modes = [int(m) for m in np.asarray(node.attr("nodes_modes")).reshape(-1)]
    if len(splits) != count or len(modes) != count:
        raise node.error(f"nodes_splits has {len(splits)} and nodes_modes {len(modes)} entries for {count} nodes")
    bad = [m for m in modes if m not in DIRECTIONS and m != MEMBER]
    if bad:
        raise node.error(f"unknown node mode {bad[0]} (0..6)")
    true_ids, false_ids = _ints(node, "nodes_truenodeids", count), _ints(node, "nodes_falsenodeids", count)
    true_leaf, false_leaf = _ints(node, "nodes_trueleafs", count), _ints(node, "nodes_falseleafs", count)
    tracks = _ints(node, "nodes_missing_value_tracks_true", count) if node.has_attr(
        "nodes_missing_value_tracks_true") else [0] * count
    targets = _ints(node, "leaf_targetids", None)
    leaf_weights = np.asarray(node.attr("leaf_weights"), np.float64).reshape(-1)
    if len(leaf_weights) != len(targets):
        raise node.error(f"leaf_weights has {len(leaf_weights)} entries for {len(targets)} leaf_targetids")
    n_targets = int(node.attr("n_targets"))
    if n_targets < 1 or any(not 0 <= t < n_targets for t in targets):
        raise node.error(f"leaf_targetids {targets} are not all below n_targets {n_targets}")
    aggregate = AGGREGATES.get(int(node.attr("aggregate_function", 1)))
    if aggregate is None:
        raise node.error(f"unknown aggregate_function {node.attr('aggregate_function')} (0..3)")
    post = int(node.attr("post_transform", 0))
    if post != 0:
        raise node.unsupported(f"post_transform {post} (NONE, 0, is supported)")
    if any(not 0 <= features[i] < features_in for i in range(count)):
        raise node.error(f"nodes_featureids {features} are not all below the input's {features_in} features")
    roots = _ints(node, "tree_roots", None)
    if not roots:
        raise node.error("tree_roots is empty")
    paths = _paths(node, roots, true_ids, false_ids, true_leaf, false_leaf, len(targets))
    members = _member_sets(node, modes)

    n, n_paths = x.shape.dims[0], len(paths)
    used = sorted({at for _, path in paths for at, _ in path})
    reached: Instruction
    if used:
        column = {at: j for j, at in enumerate(used)}
        cond = _conditions(b, node, x, used, features, splits, modes, members, tracks)
        incidence = np.zeros((2, len(used), n_paths), np.float64)
        for p, (_, path) in enumerate(paths):
            for at, branch in path:
                incidence[0 if branch else 1, column[at], p] = 1.0
        sides = b.op("concatenate", [cond, b.op("not", [cond])], dimension=1)
        passed = b.op("dot", [b.convert(sides, WORK), b.constant(incidence.reshape(2 * len(used), n_paths))],
                      lhs_batch_dims=(), lhs_contracting_dims=(1,), rhs_batch_dims=(), rhs_contracting_dims=(0,))
        lengths = np.array([len(path) for _, path in paths], np.float64)
        reached = b.op("compare", [passed, broadcast_in_dims(b, b.constant(lengths), (n, n_paths), [1])],
                       direction="EQ")
    else:
        reached = b.splat(True, "pred", (n, n_paths))
    weight = np.array([leaf_weights[leaf] for leaf, _ in paths])
    target = np.array([targets[leaf] for leaf, _ in paths])
    dtype = x.shape.dtype
    if aggregate in ("SUM", "AVERAGE"):
        table = np.zeros((n_paths, n_targets), np.float64)
        np.add.at(table, (np.arange(n_paths), target), weight / (len(roots) if aggregate == "AVERAGE" else 1))
        y = b.op("dot", [b.convert(reached, WORK), b.constant(table)], lhs_batch_dims=(), lhs_contracting_dims=(1,),
                 rhs_batch_dims=(), rhs_contracting_dims=(0,))
        return [b.convert(y, dtype)]
    info = np.finfo(numpy_dtype(dtype))
    start = float(info.max if aggregate == "MIN" else info.min)
    dims = (n, n_paths, n_targets)
    hits = b.op("and", [broadcast_in_dims(b, reached, dims, [0, 1]),
                        broadcast_in_dims(b, b.constant(target[:, None] == np.arange(n_targets)[None, :]), dims,
                                          [1, 2])])
    values = b.op("select", [hits, broadcast_in_dims(b, b.constant(weight), dims, [1]), b.splat(start, WORK, dims)])
    y = b.op("reduce", [values], dimensions=(1,), kind="minimum" if aggregate == "MIN" else "maximum")
    return [b.convert(y, dtype)]
