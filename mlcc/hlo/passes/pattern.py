"""Named rewrite rules: a pattern of opcodes, captures and constants, paired with a rewrite.

In the spirit of tinygrad's ``PatternMatcher([(UPat(...), fn)])`` and onnxscript's
rewriter rules::

    Rule("mul-by-one", op("multiply", var("x"), scalar(value=1)), lambda rw, m: m.x)

``RewritePass`` tries its rules at every instruction, replaces the matched root by
what the rewrite returns, and drops what became dead. Instructions a rule creates
are named after the rule (``%mul-by-one``, ``%attention.1``), so a dump says which
rule fired; ``RewritePass.fired`` counts them.

A rewrite may look further than its pattern and return None when the graph does
not fit; instructions it created before giving up are removed again.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mlcc.errors import InternalError
from mlcc.hlo.builder import INLINE_CONSTANT_ELEMENTS
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import EvaluationError, evaluate_instruction
from mlcc.hlo.ir import Computation, Instruction, Module, Shape, is_float
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.shape_inference import infer_shape

log = logging.getLogger(__name__)

VIEWS = ops_with("view")  # a uniform operand gives a uniform result
COMMUTATIVE = ops_with("commutative")
UNIFORM_CHECK_ELEMENTS = 1024  # a larger ref constant is not scanned for uniformity (the importer makes splats)


# ---------------------------------------------------------------- constants

def python_scalar(v: Any, dtype: str) -> bool | int | float:
    """A numpy element as the Python value the printer writes for ``dtype``."""
    if dtype == "pred":
        return bool(v)
    if dtype.startswith(("s", "u")):
        return int(v)
    return float(v)


def constant_array(inst: Instruction, module: Module | None) -> np.ndarray | None:
    """The value of a constant instruction (None when it is not one, or its data is missing)."""
    if inst.opcode != "constant" or not inst.shape.is_static:
        return None
    if "ref" in inst.attrs and (module is None or inst.attrs["ref"] not in module.constants):
        return None
    try:
        return evaluate_instruction(inst, [], module.constants if module is not None else {})
    except EvaluationError:
        return None


def scalar_value(inst: Instruction, module: Module | None = None) -> bool | int | float | None:
    """The one value of a uniform constant, seen through views (broadcast, reshape, ...); else None."""
    while inst.opcode in VIEWS:
        inst = inst.operands[0]
    if inst.opcode != "constant" or inst.shape.is_tuple:
        return None
    dtype = inst.shape.dtype
    if "splat" in inst.attrs:
        return python_scalar(inst.attrs["splat"], dtype)
    if "value" in inst.attrs:
        values = inst.attrs["value"]
        if not values:
            return None
        first = values[0]
        if all(_same_scalar(v, first) for v in values[1:]):
            return python_scalar(first, dtype)
        return None
    if inst.shape.is_static and inst.shape.numel() <= UNIFORM_CHECK_ELEMENTS:
        data = constant_array(inst, module)
        if data is not None and data.size and uniform(data.reshape(-1)):
            return python_scalar(data.reshape(-1)[0], dtype)
    return None


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (a != a and b != b)
    return a == b


def uniform(flat: np.ndarray) -> bool:
    if flat.size == 0:
        return False
    first = flat[0]
    if flat.dtype.kind == "f" or flat.dtype == numpy_dtype("bf16"):
        wide = flat.astype(np.float64)
        f = wide[0]
        return bool(np.all((wide == f) | (np.isnan(wide) & np.isnan(f)))) and bool(
            np.all(np.signbit(wide) == np.signbit(f)))
    return bool(np.all(flat == first))


def constant_attrs(module: Module, data: np.ndarray, dtype: str, ref_hint: str) -> dict[str, Any]:
    """value= when tiny, splat= when uniform, else ref= to fresh data in module.constants."""
    flat = np.asarray(data).reshape(-1)
    if flat.size and flat.size > 1 and uniform(flat):
        return {"splat": python_scalar(flat[0], dtype)}
    if flat.size <= INLINE_CONSTANT_ELEMENTS:
        return {"value": tuple(python_scalar(v, dtype) for v in flat)}
    key, n = ref_hint, 0
    while key in module.constants:
        n += 1
        key = f"{ref_hint}.{n}"
    module.constants[key] = np.ascontiguousarray(data).astype(numpy_dtype(dtype), copy=False)
    return {"ref": key}


# ---------------------------------------------------------------- patterns

@dataclass(frozen=True)
class Pat:
    """One node of a pattern. ``opcodes`` None matches any instruction."""

    opcodes: tuple[str, ...] | None = None
    operands: tuple["Pat", ...] | None = None
    capture: str | None = None
    attrs: tuple[tuple[str, Any], ...] = ()
    where: Callable[[Instruction], bool] | None = None
    commutative: bool = False
    scalar: bool = False          # matches a uniform constant; captures its value
    value: Any = None             # the scalar's required value (None: any)
    one_use: bool = False


def op(opcode: str | Sequence[str], *operands: Pat, name: str | None = None, commutative: bool | None = None,
       where: Callable[[Instruction], bool] | None = None, one_use: bool = False, **attrs: Any) -> Pat:
    """An instruction of ``opcode`` (or one of several) whose operands match ``operands`` (if given)."""
    opcodes = (opcode,) if isinstance(opcode, str) else tuple(opcode)
    if commutative is None:
        commutative = len(operands) == 2 and all(o in COMMUTATIVE for o in opcodes)
    return Pat(opcodes, tuple(operands) if operands else None, name,
               tuple(sorted(attrs.items())), where, commutative, one_use=one_use)


def var(name: str, where: Callable[[Instruction], bool] | None = None) -> Pat:
    """Any instruction, captured as ``name``; a name used twice must be the same instruction."""
    return Pat(capture=name, where=where)


def scalar(name: str | None = None, value: Any = None) -> Pat:
    """A uniform constant (a splat, a one-value constant, or a view of one); ``value`` checks it exactly."""
    return Pat(capture=name, scalar=True, value=value)


class Match(dict):
    """Captured values by name; also readable as attributes (``m.x``). ``m.root`` is the matched root."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def match(pat: Pat, inst: Instruction, module: Module | None = None) -> Match | None:
    m = Match()
    if not _match(pat, inst, m, module):
        return None
    m["root"] = inst
    return m


def _match(pat: Pat, inst: Instruction, m: Match, module: Module | None) -> bool:
    if pat.scalar:
        v = scalar_value(inst, module)
        if v is None or (pat.value is not None and not v == pat.value):
            return False
        if pat.capture is not None:
            m[pat.capture] = v
            m[pat.capture + "_inst"] = inst
        return True
    if pat.opcodes is not None and inst.opcode not in pat.opcodes:
        return False
    if pat.one_use and len(inst.users) != 1:
        return False
    for k, v in pat.attrs:
        if inst.attrs.get(k) != v:
            return False
    if pat.where is not None and not pat.where(inst):
        return False
    if pat.capture is not None:
        prior = m.get(pat.capture)
        if prior is not None and prior is not inst:
            return False
    if pat.operands is not None:
        if len(pat.operands) != len(inst.operands):
            return False
        orders = [inst.operands]
        if pat.commutative:
            orders.append(list(reversed(inst.operands)))
        for operands in orders:
            trial = Match(m)
            if all(_match(p, o, trial, module) for p, o in zip(pat.operands, operands)):
                m.clear()
                m.update(trial)
                break
        else:
            return False
    if pat.capture is not None:
        m[pat.capture] = inst
    return True


# ---------------------------------------------------------------- rewriting

class Rewriter:
    """Creates instructions for one rewrite: inserted before the matched root, named after the rule."""

    def __init__(self, module: Module, comp: Computation, root: Instruction, rule: str) -> None:
        self.module = module
        self.comp = comp
        self.root = root
        self.rule = rule
        self.created: list[Instruction] = []

    def op(self, opcode: str, operands: Sequence[Instruction], shape: Shape | None = None, **attrs: Any) -> Instruction:
        """A new instruction; its shape is inferred (``shape`` gives dims/dtype where the op cannot infer them)."""
        attrs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
        result = infer_shape(opcode, [o.shape for o in operands], attrs, shape)
        if isinstance(result, Shape):
            result = Shape(result.dtype, result.dims)  # default layout: layout assignment decides later
        inst = Instruction(self.comp.unique_name(self.rule), opcode, result, operands, attrs, origin=self.root.origin)
        self.comp.insert_before(self.root, inst)
        self.created.append(inst)
        return inst

    def reshape(self, x: Instruction, dims: Sequence[Any]) -> Instruction:
        if tuple(dims) == tuple(x.shape.dims):
            return x
        return self.op("reshape", [x], Shape(x.shape.dtype, tuple(dims)))

    def transpose(self, x: Instruction, perm: Sequence[int]) -> Instruction:
        if list(perm) == list(range(len(perm))):
            return x
        return self.op("transpose", [x], dimensions=tuple(perm))

    def broadcast(self, x: Instruction, dims: Sequence[Any], dimensions: Sequence[int]) -> Instruction:
        if tuple(dims) == tuple(x.shape.dims) and list(dimensions) == list(range(len(dims))):
            return x
        return self.op("broadcast", [x], Shape(x.shape.dtype, tuple(dims)), dimensions=tuple(dimensions))

    def constant(self, data: Any, dtype: str, dims: Sequence[Any] | None = None) -> Instruction:
        """A constant of ``data`` (an array, or a scalar broadcast to ``dims``): value=, splat= or ref=."""
        arr = np.asarray(data)
        if dims is not None and tuple(arr.shape) != tuple(dims):
            if arr.size != 1:
                raise ValueError(f"constant of {arr.shape} for dims {list(dims)}")
            value = python_scalar(arr.reshape(-1)[0], dtype)
            attrs: dict[str, Any] = {"splat": value} if len(dims) else {"value": (value,)}
            shape = Shape(dtype, tuple(dims))
        else:
            arr = _cast(arr, dtype)
            shape = Shape(dtype, arr.shape)
            attrs = constant_attrs(self.module, arr, dtype, self.rule)
        inst = Instruction(self.comp.unique_name(self.rule), "constant", shape, (), attrs, origin=self.root.origin)
        self.comp.insert_before(self.root, inst)
        self.created.append(inst)
        return inst

    def discard(self) -> None:
        for inst in reversed(self.created):
            if inst.parent is self.comp and not inst.users:
                self.comp.remove(inst)
        self.created = []


def _cast(arr: np.ndarray, dtype: str) -> np.ndarray:
    target = numpy_dtype(dtype)
    if arr.dtype == target:
        return arr
    if is_float(dtype):
        return arr.astype(np.float64).astype(target)
    return arr.astype(target)


RewriteFn = Callable[[Rewriter, Match], "Instruction | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: Pat
    rewrite: RewriteFn


def replace(comp: Computation, old: Instruction, new: Instruction) -> list[Instruction]:
    """Route every use of ``old`` to ``new`` and drop what became dead; returns what was dropped."""
    old.replace_all_uses_with(new)
    return remove_dead(comp, [old])


def _same_logical(a: Any, b: Any) -> bool:
    return not a.is_tuple and not b.is_tuple and a.dtype == b.dtype and tuple(a.dims) == tuple(b.dims)


def remove_dead(comp: Computation, candidates: Iterable[Instruction]) -> list[Instruction]:
    """Remove each candidate without users (and then its operands that lost their last user)."""
    removed = []
    work = list(candidates)
    while work:
        inst = work.pop()
        if inst.parent is not comp or inst.users or inst is comp.root or inst.opcode == "parameter":
            continue
        operands = list(inst.operands)
        comp.remove(inst)
        removed.append(inst)
        work.extend(operands)
    return removed


def merged_origin(instructions: Iterable[Instruction]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for inst in instructions for name in inst.origin))


class RewritePass(Pass):
    """Applies named rules at every instruction until none fires (at most ``max_sweeps`` sweeps)."""

    def __init__(self, name: str, rules: Sequence[Rule], max_sweeps: int = 16) -> None:
        self.name = name
        self.rules = list(rules)
        self.max_sweeps = max_sweeps
        self.fired: Counter = Counter()
        self._by_opcode: dict[str | None, list[Rule]] = {}
        for r in self.rules:
            for opcode in r.pattern.opcodes or (None,):
                self._by_opcode.setdefault(opcode, []).append(r)

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.computations):
            for _ in range(self.max_sweeps):
                if not self._sweep(module, comp):
                    break
                changed = True
        return changed

    def _sweep(self, module: Module, comp: Computation) -> bool:
        changed = False
        snapshot = list(comp.instructions)
        position = {id(i): k for k, i in enumerate(snapshot)}
        for k, inst in enumerate(snapshot):
            if inst.parent is not comp:
                continue
            for r in self._by_opcode.get(inst.opcode, []) + self._by_opcode.get(None, []):
                m = match(r.pattern, inst, module)
                if m is None:
                    continue
                rw = Rewriter(module, comp, inst, r.name)
                new = r.rewrite(rw, m)
                if new is None or new is inst:
                    rw.discard()
                    continue
                if not _same_logical(new.shape, inst.shape):
                    raise InternalError(f"rule {r.name} replaced {inst.shape} %{inst.name} by {new.shape} %{new.name}")
                if new.shape.layout != inst.shape.layout:
                    if any(c is new for c in rw.created):
                        new.shape = inst.shape  # a fresh value takes the layout its users were given
                    else:
                        new = rw.op("copy", [new])
                        new.shape = inst.shape
                removed = replace(comp, inst, new)
                if any(c is new for c in rw.created):
                    # the new op stands for everything it replaced: keep their source nodes, in program order
                    removed.sort(key=lambda i: position.get(id(i), k - 0.5))  # made this sweep: before inst
                    new.origin = merged_origin(removed + [new])
                self.fired[r.name] += 1
                log.debug("%s: rule %s rewrote %%%s", self.name, r.name, inst.name)
                changed = True
                break
        return changed
