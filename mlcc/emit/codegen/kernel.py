"""What a lowering produces: a Triton kernel's source plus how to launch it.

A lowering turns one entry instruction (an op, or a fusion) into a Kernel. The
kernel's pointer parameters are, in order, the instruction's operands and then
its result (for a tuple-shaped result, each element in order). Everything else
is a ``tl.constexpr`` named in the launch configs. Sources come only from jinja2
templates in ``templates/`` (StrictUndefined); templates receive numbers,
dtype names and mangled identifiers, never a string from the model.

A size a template prints is kernel source: the environment's ``finalize``
renders a symbolic one (``Sym``) as ``size_code`` does, the expression over the
kernel's ``sym_`` arguments (``(4*sym_seq)``), and the ``code`` filter does the
same inside an expression; ``str()`` of a Sym stays the canonical IR text.
"""

from __future__ import annotations

import ast
import functools
import importlib.resources
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import jinja2

from mlcc.emit.codegen import narrow
from mlcc.emit.codegen.elementwise import element_code
from mlcc.emit.codegen.indexing import NO_RANGES, Ranges, size_code
from mlcc.emit.codegen.triton_types import tl_type, triton_type
from mlcc.emit.target.targets import Target
from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.rules import RuleTable
from mlcc.hlo.symbolic import Sym, symbols_of


@dataclass
class LaunchConfig:
    constexprs: dict[str, int]
    grid: tuple[int | str, ...]  # programs per axis; a str is an expression over symbols (cdiv, max) for the runtime
    num_warps: int = 4
    num_stages: int = 2

    def to_json(self) -> dict[str, Any]:
        return {"constexprs": dict(sorted(self.constexprs.items())), "grid": list(self.grid),
                "num_warps": self.num_warps, "num_stages": self.num_stages}


@dataclass
class Kernel:
    name: str                 # the @triton.jit function's name, a mangled identifier
    template: str             # template file it was rendered from
    source: str               # a whole Python module defining that function
    arg_types: list[str]      # Triton types of the pointer params, operands then results ("*fp32")
    gpu: LaunchConfig         # config compiled ahead of time for GPU targets
    interpreter: LaunchConfig # config used under TRITON_INTERPRET on CPU (big tiles, few programs)
    flops: int = 0
    extra: dict[str, Any] = field(default_factory=dict)   # "problem": the dims a tiling's configs follow from
    # Per-target overrides of gpu (mlcc/emit/tiling.py): a target's own heuristic config, or its tuning-database
    # entry (those targets are in `tuned`); a target without one compiles and launches with gpu.
    targets: dict[str, LaunchConfig] = field(default_factory=dict)
    tuned: list[str] = field(default_factory=list)
    signature: str = ""       # what the tuning database keys it by (mlcc/emit/codegen/lower_module.py)
    # Symbols whose values the kernel takes at run time, after the pointers (params sym_<name>, i32).
    scalars: list[str] = field(default_factory=list)
    # The kernel-body IR it was rendered from, printed (mlcc/emit/codegen/body.py): for debugging, never
    # part of the bundle. Loop kernels only; "" for the others.
    body_ir: str = ""

    def config_for(self, target: Target) -> LaunchConfig:
        """The launch config a binary for target is compiled and launched with."""
        return self.targets.get(target.name, self.gpu)


def triton_pointer(shape: Shape) -> str:
    return "*" + triton_type(shape.dtype)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grid_size(n: "int | Sym", block: int) -> int | str:
    """Programs for n items in blocks of block: a number, or the expression the runtime evaluates
    (mlcc/bundle/sizes.py) when n is symbolic."""
    if isinstance(n, int):
        return max(1, cdiv(n, block))
    return f"max(1, cdiv({n}, {block}))"  # the runtime's grammar: the canonical text


def scalar_params(*shapes: "Shape | Instruction") -> tuple[list[str], list[str], list[str]]:
    """What a kernel over these shapes adds for its symbols: the params (``sym_<name>``), their argument
    types (i32) and the symbols' names (Kernel.scalars), in the same sorted order."""
    names = kernel_symbols(*shapes)
    return [f"sym_{n}" for n in names], ["i32"] * len(names), names


def kernel_symbols(*items: "Shape | Instruction") -> list[str]:
    """The symbols a kernel over these shapes (or instructions: their shapes, and a size op's expression)
    takes as run-time arguments (``sym_<name>``, sorted)."""
    names: set[str] = set()
    for item in items:
        if isinstance(item, Instruction):
            if item.opcode == "size":
                names.update(symbols_of([item.attrs["expr"]]))
            item = item.shape
        for e in (item.elements if item.is_tuple else (item,)):
            names.update(symbols_of(e.dims))
    return sorted(names)


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


# ---- templates -------------------------------------------------------------

def template_dir() -> Path:
    """templates/ in a checkout, or the copy installed as package data (mlcc/_templates)."""
    override = os.environ.get("MLCC_TEMPLATE_DIR")
    if override:
        return Path(override)
    package = Path(__file__).resolve().parents[2]  # mlcc/ (this file is mlcc/emit/codegen/kernel.py)
    checkout = package.parent / "templates"
    if checkout.is_dir():
        return checkout
    return Path(str(importlib.resources.files("mlcc") / "_templates"))


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False, finalize=_finalize)
    env.filters["code"] = size_code  # a size inside a template expression, as kernel source
    env.globals["tl_type"] = tl_type
    env.globals["element_code"] = element_code  # an elementwise op statement's code (loop_ops.py.jinja)
    env.globals["is_storage"] = narrow.is_storage  # fp8/fp4/int4 conversions (loop_ops.py.jinja convert)
    env.globals["narrow_convert"] = narrow.convert_lines
    env.globals["const_bits"] = narrow.bits
    return env


def _finalize(value: Any) -> Any:
    """What ``{{ value }}`` prints: a symbolic size as kernel source, anything else as it is."""
    return size_code(value) if isinstance(value, Sym) else value


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render(template: str, **context: Any) -> str:
    """Render a kernel template; the result must parse as Python."""
    name = context.get("kernel_name")
    if name is not None and not _IDENT.match(name):
        raise ValueError(f"kernel name {name!r} is not a mangled identifier")
    source = _env().get_template(template).render(**context)
    ast.parse(source)
    return source


# ---- the lowering table ----------------------------------------------------

Lowering = Callable[[Instruction, str, Ranges], Kernel]  # (instruction, kernel name, the symbols' ranges)
LOWERINGS: RuleTable[Lowering] = RuleTable("lowering", keys="any")
lowering = LOWERINGS.register  # register a lowering for opcodes (fusions register as ``fusion:<kind>``)


def lowering_key(inst: Instruction) -> str:
    return f"fusion:{inst.attrs['kind']}" if inst.opcode == "fusion" else inst.opcode


def lower(inst: Instruction, kernel_name: str, ranges: Ranges = NO_RANGES) -> Kernel:
    """inst's kernel; a symbolic size's decisions (tiles, masks, loop bounds) follow ranges (Module.symbols),
    so an instruction with symbolic shapes needs its module's."""
    key = lowering_key(inst)
    fn = LOWERINGS.get(key)
    if fn is None:
        raise NotImplementedError(f"no kernel template for {key} (%{inst.name})")
    return fn(inst, kernel_name, ranges)
