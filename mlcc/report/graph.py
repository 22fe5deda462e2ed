"""The source graph of a compiled bundle, read back from its final IR.

Nodes are source ops: every instruction contributes the node named by its origin
(the source node names it came from; the instruction's own name when it has
none). Instructions with the same origin launched by the same kernel are one
node, so a Gemm lowered to dot + add is one box and a layer norm recognised from
nine ONNX nodes is one box listing all nine. Edges follow the IR's dataflow,
through fusion bodies (a fused parameter stands for the fusion's operand) and
past tuples. Each launch is a group: the kernel its ops went into.

Constants (weights) are not drawn; inputs and outputs are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlcc.hlo.ir import Computation, Instruction, Module

TRANSPARENT = ("tuple", "get-tuple-element")
NodeKey = tuple


@dataclass
class Node:
    key: NodeKey
    label: str             # the first source op's name (or the instruction's)
    kind: str              # "op", "input", "output", or "group" (a collapsed group)
    group: int | None      # the schedule step that launched it, None when no kernel did
    sources: list[str] = field(default_factory=list)   # every source op name it stands for
    opcodes: list[str] = field(default_factory=list)   # IR opcodes it became


@dataclass
class Group:
    step: int
    kernel: str
    fusion_kind: str
    instruction: str
    collapsed: bool = False


@dataclass
class SourceGraph:
    nodes: dict[NodeKey, Node]
    edges: list[tuple[NodeKey, NodeKey]]
    groups: dict[int, Group]

    def members(self, step: int) -> list[Node]:
        return [n for n in self.nodes.values() if n.group == step]


class _Builder:
    def __init__(self, module: Module, launches: dict[str, tuple[int, str]]) -> None:
        self.module = module
        self.launches = launches
        self.nodes: dict[NodeKey, Node] = {}
        self.edges: dict[tuple[NodeKey, NodeKey], None] = {}

    def node(self, inst: Instruction, group: int | None) -> NodeKey:
        sources = list(inst.origin) or [f"%{inst.name}"]
        key = ("op", group, tuple(sources))
        n = self.nodes.get(key)
        if n is None:
            n = self.nodes[key] = Node(key, sources[0], "op", group, sources)
        if inst.opcode not in n.opcodes:
            n.opcodes.append(inst.opcode)
        return key

    def connect(self, producers: set[NodeKey], consumer: NodeKey) -> None:
        for p in sorted(producers, key=repr):
            if p != consumer:
                self.edges[(p, consumer)] = None

    def computation(self, comp: Computation, args: list[set[NodeKey]], group: int | None) -> set[NodeKey]:
        """Add comp's nodes and edges; args are the producers of its parameters. Returns the root's producers."""
        made: dict[str, set[NodeKey]] = {}
        for inst in comp.instructions:
            made[inst.name] = self.instruction(inst, made, args, group, comp.is_entry)
        return made[comp.root.name] if comp.root is not None else set()

    def instruction(self, inst: Instruction, made: dict[str, set[NodeKey]], args: list[set[NodeKey]],
                    group: int | None, is_entry: bool) -> set[NodeKey]:
        ins: set[NodeKey] = set()
        for o in inst.operands:
            ins |= made.get(o.name, set())
        if inst.opcode == "parameter":
            if not is_entry:
                index = inst.attrs.get("index", 0)
                return set(args[index]) if index < len(args) else set()
            name = str(inst.attrs.get("name", inst.name))
            key = ("input", name)
            self.nodes.setdefault(key, Node(key, name, "input", None, [name], ["parameter"]))
            return {key}
        if inst.opcode == "constant":
            return set()
        if inst.opcode in TRANSPARENT:
            return ins
        if is_entry and inst.name in self.launches:
            group = self.launches[inst.name][0]
        if inst.called is not None:
            inner_args = [made.get(o.name, set()) for o in inst.operands]
            out = self.computation(inst.called, inner_args, group)
            return out or {self._own(inst, ins, group)}
        return {self._own(inst, ins, group)}

    def _own(self, inst: Instruction, ins: set[NodeKey], group: int | None) -> NodeKey:
        key = self.node(inst, group)
        self.connect(ins, key)
        return key

    def outputs(self) -> None:
        entry = self.module.entry
        root = entry.root
        if root is None:
            return
        operands = root.operands if root.opcode == "tuple" else [root]
        made = self._entry_made
        for i, o in enumerate(operands):
            name = self.module.output_names[i] if i < len(self.module.output_names) else f"output{i}"
            key = ("output", name)
            self.nodes.setdefault(key, Node(key, name, "output", None, [name], []))
            self.connect(made.get(o.name, set()), key)

    def build(self) -> None:
        entry = self.module.entry
        made: dict[str, set[NodeKey]] = {}
        for inst in entry.instructions:
            made[inst.name] = self.instruction(inst, made, [], None, True)
        self._entry_made = made
        self.outputs()


def source_graph(module: Module, schedule: list[dict[str, Any]], kinds: dict[str, str]) -> SourceGraph:
    """The source graph of module; schedule is the manifest's, kinds maps a kernel name to its fusion kind."""
    launches = {s["instruction"]: (s["step"], s["kernel"]) for s in schedule if "instruction" in s}
    b = _Builder(module, launches)
    b.build()
    groups = {step: Group(step, kernel, kinds.get(kernel, "?"), inst) for inst, (step, kernel) in launches.items()}
    return SourceGraph(b.nodes, list(b.edges), dict(sorted(groups.items())))


def collapse(graph: SourceGraph, max_members: int) -> SourceGraph:
    """Replace every group of more than max_members nodes by one node standing for the whole group."""
    big = {g for g in graph.groups if len(graph.members(g)) > max_members}
    if not big:
        return graph
    remap: dict[NodeKey, NodeKey] = {}
    nodes: dict[NodeKey, Node] = {}
    for key, n in graph.nodes.items():
        if n.group in big:
            gkey = ("group", n.group)
            g = nodes.get(gkey)
            if g is None:
                grp = graph.groups[n.group]
                g = nodes[gkey] = Node(gkey, grp.kernel, "group", n.group, [], [])
            g.sources.extend(s for s in n.sources if s not in g.sources)
            g.opcodes.extend(o for o in n.opcodes if o not in g.opcodes)
            remap[key] = gkey
        else:
            nodes[key] = n
            remap[key] = key
    edges: dict[tuple[NodeKey, NodeKey], None] = {}
    for a, b in graph.edges:
        a, b = remap[a], remap[b]
        if a != b:
            edges[(a, b)] = None
    groups = {s: Group(g.step, g.kernel, g.fusion_kind, g.instruction, s in big) for s, g in graph.groups.items()}
    return SourceGraph(nodes, list(edges), groups)
