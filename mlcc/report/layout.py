"""A layered (Sugiyama-style) layout of a directed graph with clusters, flowing left to right.

1. cycles: edges that close a cycle in a depth-first search are laid out reversed;
2. layers: longest path from the sources; then, from the sinks back, a node with no more inputs than
   users, or whose users are all in its own cluster, moves right to just before its first user;
3. long edges get one dummy node per layer they cross, so they route around nodes;
4. order within a layer: barycenter sweeps, down and up, keeping the order with the
   fewest crossings; a cluster's nodes share one sort key, so each cluster is
   contiguous in every layer and two clusters keep the same relative order in every
   layer they share;
5. coordinates: a cluster is one block, a band of the same height across all its
   layers (its box); blocks are packed into layers in that order and then pulled
   toward the median of their neighbours, never past the blocks beside them, so
   boxes never overlap.

Pure Python, no graphviz: the report must build anywhere mlcc installs.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right, insort
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from statistics import median

Key = Hashable
LARGE = 3000  # nodes plus dummies beyond which ordering and placement take fewer rounds


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float


@dataclass
class Route:
    source: Key
    target: Key
    points: list[tuple[float, float]]   # from the source's right side to the target's left side
    stub: bool = False                  # drawn as a short stub into the target, not routed


@dataclass
class Layout:
    nodes: dict[Key, Box]
    clusters: dict[str, Box]
    edges: list[Route]
    width: float
    height: float
    layers: int


@dataclass
class Spacing:
    layer_gap: float = 56.0      # between layer columns (room for cluster padding and edge curves)
    node_gap: float = 12.0       # between blocks in a layer
    cluster_pad: float = 9.0
    cluster_header: float = 16.0 # room for the cluster's label above its nodes
    dummy_height: float = 2.0
    margin: float = 16.0
    sweeps: int = 10
    relax_rounds: int = 24


@dataclass
class _Block:
    id: str
    layers: range
    members: dict[int, list[Key]] = field(default_factory=dict)
    height: float = 0.0
    top: float = 0.0
    inset: float = 0.0            # header + padding above the first node (clusters only)


def _break_cycles(keys: list[Key], edges: list[tuple[Key, Key]]) -> set[tuple[Key, Key]]:
    out: dict[Key, list[Key]] = {k: [] for k in keys}
    for a, b in edges:
        out[a].append(b)
    state: dict[Key, int] = {}
    back: set[tuple[Key, Key]] = set()
    for s in keys:
        if s in state:
            continue
        state[s] = 1
        stack = [(s, iter(out[s]))]
        while stack:
            u, it = stack[-1]
            for v in it:
                if state.get(v) == 1:
                    back.add((u, v))
                elif v not in state:
                    state[v] = 1
                    stack.append((v, iter(out[v])))
                    break
            else:
                state[u] = 2
                stack.pop()
    return back


def _layers(keys: list[Key], dag: list[tuple[Key, Key]], cluster: dict[Key, str | None]) -> dict[Key, int]:
    preds: dict[Key, list[Key]] = {k: [] for k in keys}
    succs: dict[Key, list[Key]] = {k: [] for k in keys}
    for a, b in dag:
        preds[b].append(a)
        succs[a].append(b)
    indeg = {k: len(preds[k]) for k in keys}
    ready = [k for k in keys if indeg[k] == 0]
    order = []
    while ready:
        k = ready.pop()
        order.append(k)
        for s in succs[k]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    layer = {k: 0 for k in keys}
    for k in order:
        for s in succs[k]:
            layer[s] = max(layer[s], layer[k] + 1)
    for k in reversed(order):
        # Slack goes to in-edges: a node moves right to just before its first user when that does not
        # lengthen the edges in total (no more in-edges than users: a source, a broadcast of an input)
        # or when its users are all in its own cluster, which keeps a fusion's box narrow.
        own = cluster.get(k) is not None and all(cluster.get(s) == cluster[k] for s in succs[k])
        if succs[k] and (len(preds[k]) <= len(succs[k]) or own):
            layer[k] = min(layer[s] for s in succs[k]) - 1
    return layer


def _crossings(upper: list[Key], lower_pos: dict[Key, int], segs: dict[Key, list[Key]]) -> int:
    seen: list[int] = []
    count = 0
    for u in upper:
        targets = sorted(lower_pos[v] for v in segs.get(u, ()))
        for t in targets:
            count += len(seen) - bisect_right(seen, t)
        for t in targets:
            insort(seen, t)
    return count


def layered_layout(sizes: dict[Key, tuple[float, float]], edges: list[tuple[Key, Key]],
                   cluster_of: dict[Key, str | None], spacing: Spacing | None = None,
                   stub_fanout: int | None = None) -> Layout:
    """Lay out nodes (key -> (width, height)) and edges; cluster_of names the box each node is drawn in.

    stub_fanout: edges from a node with more users than this that cross more than two layers are not
    routed but drawn as stubs into their targets (a broadcast constant feeding every block, say).
    """
    sp = spacing or Spacing()
    keys = list(sizes)
    edges = [(a, b) for a, b in dict.fromkeys(edges) if a != b and a in sizes and b in sizes]
    back = _break_cycles(keys, edges)
    dag = list(dict.fromkeys((b, a) if (a, b) in back else (a, b) for a, b in edges))
    layer = _layers(keys, dag, cluster_of)
    stubbed: set[tuple[Key, Key]] = set()
    if stub_fanout is not None:
        fanout = Counter(a for a, _ in dag)
        stubbed = {(a, b) for a, b in dag if fanout[a] > stub_fanout and layer[b] - layer[a] > 2}

    # Long edges become chains of dummies, one per layer crossed.
    cluster: dict[Key, str | None] = {k: cluster_of.get(k) for k in keys}
    size = dict(sizes)
    chains: dict[tuple[Key, Key], list[Key]] = {}
    for i, (a, b) in enumerate(dag):
        if (a, b) in stubbed:
            continue
        chain = [a]
        c = cluster[a] if cluster[a] == cluster[b] else None
        for j, lay in enumerate(range(layer[a] + 1, layer[b])):
            d = ("__dummy__", i, j)
            layer[d], cluster[d], size[d] = lay, c, (0.0, sp.dummy_height)
            chain.append(d)
        chain.append(b)
        chains[(a, b)] = chain
    succs: dict[Key, list[Key]] = {k: [] for k in layer}
    preds: dict[Key, list[Key]] = {k: [] for k in layer}
    for chain in chains.values():
        for u, v in itertools.pairwise(chain):
            succs[u].append(v)
            preds[v].append(u)

    n_layers = max(layer.values(), default=-1) + 1
    layers = _initial_order(keys, layer, succs, preds, n_layers)
    if len(layer) > LARGE:  # thousands of nodes and dummies: fewer passes, the same guarantees
        sp = replace(sp, sweeps=min(sp.sweeps, 4), relax_rounds=min(sp.relax_rounds, 10))
    layers = _order(layers, cluster, succs, preds, sp.sweeps)
    sort_key = _sort_layers(layers, cluster, {k: float(j) for lay in layers for j, k in enumerate(lay)})
    blocks, block_of = _blocks(layers, cluster, size, sp)
    block_key = {block_of[k]: sort_key[k][:2] for k in block_of}
    _place(blocks, block_of, layers, size, succs, preds, sp, block_key)

    widths = [max((size[k][0] for k in lay), default=0.0) for lay in layers]
    xs, x = [], sp.margin
    for w in widths:
        xs.append(x)
        x += w + sp.layer_gap
    width = (x - sp.layer_gap + sp.margin) if layers else 2 * sp.margin
    ys = _node_tops(blocks, size, sp)
    boxes = {k: Box(xs[layer[k]] + (widths[layer[k]] - size[k][0]) / 2, ys[k], *size[k]) for k in keys}
    clusters = {}
    for b in blocks.values():
        if b.id.startswith("c:"):
            lo, hi = b.layers[0], b.layers[-1]
            x0 = xs[lo] - sp.cluster_pad
            clusters[b.id[2:]] = Box(x0, b.top, xs[hi] + widths[hi] + sp.cluster_pad - x0, b.height)
    routes = []
    stubs_into: Counter[Key] = Counter()
    for a, b in edges:
        e = (b, a) if (a, b) in back else (a, b)
        if e in stubbed:
            t = boxes[b]
            y = t.y + min(4.0 + 5.0 * stubs_into[b], t.h - 4.0)
            stubs_into[b] += 1
            routes.append(Route(a, b, [(t.x - 20.0, y), (t.x, y)], stub=True))
            continue
        chain = chains[e]
        pts: list[tuple[float, float]] = []
        for k in chain:
            lay = layer[k]
            cy = ys[k] + size[k][1] / 2
            if k == chain[0]:
                pts.append((boxes[k].x + boxes[k].w, cy))
            elif k == chain[-1]:
                pts.append((boxes[k].x, cy))
            else:
                pts += [(xs[lay], cy), (xs[lay] + widths[lay], cy)]
        if (a, b) in back:
            pts = [(boxes[a].x, pts[-1][1])] + pts[-2:0:-1] + [(boxes[b].x + boxes[b].w, pts[0][1])]
        routes.append(Route(a, b, pts))
    height = max((b.top + b.height for b in blocks.values()), default=0.0) + sp.margin
    return Layout(boxes, clusters, routes, width, height, n_layers)


def _initial_order(keys: list[Key], layer: dict[Key, int], succs: dict[Key, list[Key]],
                   preds: dict[Key, list[Key]], n_layers: int) -> list[list[Key]]:
    """Depth-first discovery order from the sources: chains start out side by side."""
    seen: dict[Key, int] = {}
    for s in [k for k in keys if not preds[k]] + keys:
        stack = [s]
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen[k] = len(seen)
            stack.extend(reversed(succs[k]))
    layers: list[list[Key]] = [[] for _ in range(n_layers)]
    for k in sorted(layer, key=lambda k: seen.get(k, len(seen))):
        layers[layer[k]].append(k)
    return layers


def _sort_layers(layers: list[list[Key]], cluster: dict[Key, str | None],
                 bary: dict[Key, float]) -> dict[Key, tuple[float, str, float]]:
    """Sort every layer by one consistent key: a cluster's mean barycenter, then the node's own."""
    sums: dict[str, list[float]] = {}
    for lay in layers:
        for k in lay:
            if cluster[k] is not None:
                sums.setdefault(cluster[k], []).append(bary[k])
    ckey = {c: sum(v) / len(v) for c, v in sums.items()}

    def key(k: Key) -> tuple[float, str, float]:
        c = cluster[k]
        return (ckey[c], "c:" + c, bary[k]) if c is not None else (bary[k], "", 0.0)
    keys = {k: key(k) for lay in layers for k in lay}
    for lay in layers:
        lay.sort(key=keys.__getitem__)
    return keys


def _order(layers: list[list[Key]], cluster: dict[Key, str | None], succs: dict[Key, list[Key]],
           preds: dict[Key, list[Key]], sweeps: int) -> list[list[Key]]:
    _sort_layers(layers, cluster, {k: float(i) for lay in layers for i, k in enumerate(lay)})
    pos = {k: float(i) for lay in layers for i, k in enumerate(lay)}
    bary = dict(pos)
    best = [list(lay) for lay in layers]
    best_cross = _total_crossings(layers, succs)
    for sweep in range(sweeps):
        down = sweep % 2 == 0
        order = range(1, len(layers)) if down else range(len(layers) - 2, -1, -1)
        for i in order:
            for k in layers[i]:
                nbrs = preds[k] if down else succs[k]
                if nbrs:
                    bary[k] = sum(pos[u] for u in nbrs) / len(nbrs)
            _sort_layers([layers[i]], cluster, bary)
            for j, k in enumerate(layers[i]):
                pos[k] = float(j)
        bary.update(pos)
        _sort_layers(layers, cluster, bary)  # make clusters consistent across layers
        for lay in layers:
            for j, k in enumerate(lay):
                pos[k] = bary[k] = float(j)
        cross = _total_crossings(layers, succs)
        if cross < best_cross:
            best, best_cross = [list(lay) for lay in layers], cross
    return best


def _total_crossings(layers: list[list[Key]], succs: dict[Key, list[Key]]) -> int:
    total = 0
    for upper, lower in itertools.pairwise(layers):
        lower_pos = {k: i for i, k in enumerate(lower)}
        total += _crossings(upper, lower_pos, succs)
    return total


def _blocks(layers: list[list[Key]], cluster: dict[Key, str | None], size: dict[Key, tuple[float, float]],
            sp: Spacing) -> tuple[dict[str, _Block], dict[Key, str]]:
    spans: dict[str, list[int]] = {}
    for i, lay in enumerate(layers):
        for k in lay:
            if cluster[k] is not None:
                spans.setdefault("c:" + cluster[k], []).append(i)
    blocks: dict[str, _Block] = {}
    block_of: dict[Key, str] = {}
    for i, lay in enumerate(layers):
        for j, k in enumerate(lay):
            bid = "c:" + cluster[k] if cluster[k] is not None else f"n:{i}:{j}"
            if bid not in blocks:
                span = spans.get(bid, [i])
                blocks[bid] = _Block(bid, range(min(span), max(span) + 1))
            blocks[bid].members.setdefault(i, []).append(k)
            block_of[k] = bid
    for b in blocks.values():
        stack = max(sum(size[k][1] for k in ks) + sp.node_gap * (len(ks) - 1) for ks in b.members.values())
        if b.id.startswith("c:"):
            b.inset = sp.cluster_header + sp.cluster_pad
            b.height = b.inset + stack + sp.cluster_pad
        else:
            b.height = stack
    return blocks, block_of


def _node_tops(blocks: dict[str, _Block], size: dict[Key, tuple[float, float]], sp: Spacing) -> dict[Key, float]:
    ys = {}
    for b in blocks.values():
        for ks in b.members.values():
            y = b.top + b.inset
            for k in ks:
                ys[k] = y
                y += size[k][1] + sp.node_gap
    return ys


def _place(blocks: dict[str, _Block], block_of: dict[Key, str], layers: list[list[Key]],
           size: dict[Key, tuple[float, float]], succs: dict[Key, list[Key]], preds: dict[Key, list[Key]],
           sp: Spacing, block_key: dict[str, tuple]) -> None:
    # One global order of blocks; each layer lists the blocks that span it in that order (a cluster also
    # reserves its band in layers of its span where it has no nodes).
    order = sorted(blocks, key=lambda bid: block_key[bid])
    seq: list[list[str]] = [[] for _ in layers]
    for bid in order:
        for i in blocks[bid].layers:
            seq[i].append(bid)
    skyline = [sp.margin] * len(layers)
    for bid in order:
        b = blocks[bid]
        b.top = max(skyline[i] for i in b.layers)
        for i in b.layers:
            skyline[i] = b.top + b.height + sp.node_gap
    position = {(i, bid): j for i, s in enumerate(seq) for j, bid in enumerate(s)}

    # Pull each block toward the median of where its neighbours want it, between the blocks beside it.
    ys = _node_tops(blocks, size, sp)
    offset = {k: ys[k] - blocks[block_of[k]].top + size[k][1] / 2 for k in ys}
    nbrs: dict[str, list[tuple[Key, Key]]] = {bid: [] for bid in blocks}
    for k in ys:
        for v in succs[k] + preds[k]:
            if block_of[v] != block_of[k]:
                nbrs[block_of[k]].append((k, v))
    for rnd in range(sp.relax_rounds):
        for bid in (order if rnd % 2 == 0 else reversed(order)):
            b = blocks[bid]
            targets = [blocks[block_of[v]].top + offset[v] - offset[k] for k, v in nbrs[bid]]
            if not targets:
                continue
            lo, hi = sp.margin, float("inf")
            for i in b.layers:
                j = position[(i, bid)]
                if j > 0:
                    p = blocks[seq[i][j - 1]]
                    lo = max(lo, p.top + p.height + sp.node_gap)
                if j + 1 < len(seq[i]):
                    hi = min(hi, blocks[seq[i][j + 1]].top - sp.node_gap - b.height)
            b.top = max(lo, min(median(targets), hi))
    shift = min((b.top for b in blocks.values()), default=sp.margin) - sp.margin
    for b in blocks.values():
        b.top -= shift
