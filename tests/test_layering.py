"""The house rules of ARCHITECTURE.md, checked on the source: no import cycles, no function-local import of an
mlcc module (outside the CLI's lazy loading), the layers import only what they may, the IR
names no third-party library, and no module grows past 800 lines.

Imports are read with ``ast``, never executed, so a violation anywhere in the tree is found whether or not a
test happens to import that module."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mlcc"
LAZY_LOADERS = {"mlcc.cli"}   # the CLI loads each subcommand's modules when it runs
MAX_LINES = 800


@dataclass(frozen=True)
class Edge:
    source: str        # importing module
    target: str        # imported mlcc module (a package's __init__ when a package is imported)
    line: int
    local: bool        # inside a function or class body
    typing_only: bool  # under `if TYPE_CHECKING:` (never executed)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    rel = PACKAGE.parent.joinpath(*name.split("."))
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(source: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "mlcc"]
    base = _resolve(source, is_package, node)
    if base.split(".")[0] != "mlcc":
        return []
    found = [f"{base}.{a.name}" for a in node.names if is_module(f"{base}.{a.name}")]
    return found if len(found) == len(node.names) else found + [base]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def edges_of(path: Path) -> list[Edge]:
    source, tree = module_name(path), ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: list[Edge] = []

    def walk(nodes: list[ast.stmt], local: bool, typing_only: bool) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.extend(Edge(source, t, node.lineno, local, typing_only)
                             for t in _targets(source, is_package, node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(node.body, True, typing_only)
            elif isinstance(node, ast.If):
                walk(node.body, local, typing_only or _is_type_checking(node.test))
                walk(node.orelse, local, typing_only)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        walk([n for n in inner if isinstance(n, ast.stmt)] +
                             [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body], local, typing_only)
    walk(tree.body, False, False)
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))
EDGES = [e for p in SOURCES for e in edges_of(p)]


def _where(e: Edge) -> str:
    return f"{e.source} line {e.line} imports {e.target}"


def test_no_function_local_imports_of_mlcc_modules():
    local = [_where(e) for e in EDGES if e.local and e.source not in LAZY_LOADERS]
    assert not local, "function-local imports of mlcc modules:\n" + "\n".join(local)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    return components


def test_no_import_cycles():
    graph: dict[str, set[str]] = {module_name(p): set() for p in SOURCES}
    for e in EDGES:
        if not e.typing_only and not (e.local and e.source in LAZY_LOADERS):
            graph[e.source].add(e.target)
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_strongly_connected_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


# (layer, what it must not import): ARCHITECTURE.md's layering rules
FORBIDDEN = [
    ("mlcc.runtime", ("mlcc.frontend", "mlcc.hlo", "mlcc.emit", "mlcc.compiler", "mlcc.cli")),
    ("mlcc.bundle", ("mlcc.frontend", "mlcc.hlo", "mlcc.emit", "mlcc.compiler", "mlcc.cli", "mlcc.runtime")),
    ("mlcc.hlo", ("mlcc.frontend", "mlcc.emit", "mlcc.runtime", "mlcc.cli", "mlcc.compiler")),
    ("mlcc.frontend", ("mlcc.emit", "mlcc.runtime", "mlcc.cli", "mlcc.compiler")),
]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("layer,forbidden", FORBIDDEN, ids=[layer for layer, _ in FORBIDDEN])
def test_layers_import_only_what_they_may(layer, forbidden):
    bad = [_where(e) for e in EDGES if _within(e.source, layer) and any(_within(e.target, f) for f in forbidden)]
    assert not bad, f"{layer} may not import {', '.join(forbidden)}:\n" + "\n".join(bad)


def test_runtime_and_bundle_import_only_themselves():
    """A bundle runs where the compiler's modules were never imported: the runtime reads the format (mlcc.bundle)
    and nothing else of mlcc; the format imports nothing else of mlcc."""
    allowed = {"mlcc.runtime": ("mlcc.runtime", "mlcc.bundle"), "mlcc.bundle": ("mlcc.bundle",)}
    bad = [_where(e) for e in EDGES for layer, ok in allowed.items()
           if _within(e.source, layer) and not any(_within(e.target, o) for o in ok)]
    assert not bad, "\n".join(bad)


def test_ir_names_no_third_party_library():
    tree = ast.parse((PACKAGE / "hlo" / "ir.py").read_text())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not roots & {"onnx", "numpy", "triton", "jinja2", "torch"}


def test_no_module_over_800_lines():
    long = [f"{p.relative_to(PACKAGE.parent)}: {n} lines" for p in SOURCES
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)
