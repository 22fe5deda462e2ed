"""ParsedModule -> IR Module, one rule per op name, built only through the Builder.

A rule is a small function registered by op name::

    @stablehlo_op("stablehlo.transpose")
    def import_transpose(cx: Context, op: Op, args: list[Instruction]) -> Results: ...

It returns one instruction per op result. Private functions are inlined at each
``func.call``; while loops whose trip count is known at import time are
unrolled. Ops without a rule are all reported together before anything is built.

Complex values (complex<f32>, complex<f64>) are lowered here: the environment binds such a value to a
``Complex`` pair of real instructions (its real and imaginary parts), and an op that reads or makes one is
imported by its rule in ``COMPLEX_RULES`` (mlcc/frontend/stablehlo/ops/complex.py: products, quotients,
exponentials... written as real ops), or, for an op in ``COMPONENTWISE`` (data movement, add), by its real
rule applied to each part in turn. The IR itself has no complex type.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np

from mlcc.frontend.stablehlo import fold, quantized
from mlcc.frontend.stablehlo.errors import (StableHLOParseError, StableHLOUnsupportedError, UnsupportedOp,
                                            UnsupportedOpsError)
from mlcc.frontend.stablehlo.known_ops import KNOWN_OPS
from mlcc.frontend.stablehlo.syntax import (ELEMENT_TYPES, Block, Function, Op, ParsedModule, SymbolRef, TensorType,
                                            Value)
from mlcc.frontend.stablehlo.tuples import flatten_tuples
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.rules import RuleTable
from mlcc.hlo.shape_inference import ShapeError

Results = Instruction | Sequence[Instruction]
Rule = Callable[["Context", Op, list[Instruction]], Results]
RULES: RuleTable[Rule] = RuleTable("StableHLO import rule", keys=KNOWN_OPS)

TERMINATORS = ("func.return", "stablehlo.return")
# ops a scalar region may apply over a whole tensor at once (Context.import_lifted): elementwise, no shape attrs
LIFTABLE = frozenset(f"stablehlo.{n}" for n in """
abs add and atan2 bitcast_convert cbrt ceil clamp compare constant convert cosine divide exponential
exponential_minus_one floor is_finite log log_plus_one logistic maximum minimum multiply negate not or popcnt power
remainder round_nearest_afz round_nearest_even rsqrt select shift_left shift_right_arithmetic shift_right_logical
sign sine sqrt subtract tan tanh xor real imag complex uniform_quantize uniform_dequantize""".split())
# ops whose complex form is their real form applied to the real parts and to the imaginary parts
# (an op with a body only when the body adds or passes values through: see componentwise_body)
COMPONENTWISE = frozenset(f"stablehlo.{n}" for n in """
add subtract negate reshape transpose slice dynamic_slice dynamic_update_slice concatenate pad reverse
broadcast_in_dim select gather scatter reduce_window optimization_barrier""".split())
MAX_UNROLLED_OPS = 20000  # ops a module may grow to by unrolling loops and inlining calls


def stablehlo_op(*names: str) -> Callable[[Rule], Rule]:
    """Register fn as the import rule of each op name (one rule per name, a name KNOWN_OPS lists)."""
    return RULES.register(*names)


# stablehlo.custom_call's rules, keyed by call_target_name (lapack_spotrf_ffi...); a rule gets the operands as
# any rule does, Complex pairs included, and a target with no rule is listed with the unsupported ops
CUSTOM_CALLS: RuleTable[Rule] = RuleTable("custom_call target rule", keys="any")


# custom_call targets known and refused: target -> the reason, shown where the op is listed as unsupported (a
# refused target's rule imports only the call on empty operands)
REFUSED_CUSTOM_CALLS: dict[str, str] = {}


def empty_operands(op: Op) -> bool:
    """Whether an operand has no elements (a refused target may still be imported then: nothing to compute)."""
    return any(isinstance(v.type, TensorType) and 0 in v.type.dims for v in op.operands)


def custom_call_target(*names: str) -> Callable[[Rule], Rule]:
    """Register fn as the rule of stablehlo.custom_call with each of these call targets."""
    return CUSTOM_CALLS.register(*names)


class Complex(NamedTuple):
    """A complex tensor as its real and imaginary parts (two real instructions of one shape)."""

    re: Instruction
    im: Instruction


ComplexRule = Callable[["Context", Op, list[Any]], Any]
COMPLEX_RULES: RuleTable[ComplexRule] = RuleTable("StableHLO complex import rule", keys=KNOWN_OPS)


def complex_op(*names: str) -> Callable[[ComplexRule], ComplexRule]:
    """Register fn as the rule of each op name when an operand or result is complex (args may be Complex)."""
    return COMPLEX_RULES.register(*names)


def is_complex_type(t: Any) -> bool:
    return isinstance(t, TensorType) and t.complex_part is not None


class Env:
    """Values -> instructions for one inlined function body or one loop iteration."""

    def __init__(self, parent: "Env | None" = None) -> None:
        self.parent = parent
        self.values: dict[int, Instruction] = {}

    def bind(self, value: Value, inst: Instruction) -> None:
        self.values[id(value)] = inst

    def get(self, value: Value) -> Instruction | None:
        env: Env | None = self
        while env is not None:
            inst = env.values.get(id(value))
            if inst is not None:
                return inst
            env = env.parent
        return None


class Context:
    def __init__(self, parsed: ParsedModule, name: str) -> None:
        self.parsed = parsed
        self.filename = parsed.filename
        self.b = Builder(name)
        self.known: dict[int, np.ndarray] = {}
        self.env = Env()
        self.call_stack: list[str] = []
        self.imported_ops = 0
        self.lifted: tuple[int, ...] | None = None  # dims a scalar region is applied over (see import_lifted)

    # ---- errors
    def error(self, op: Op, message: str) -> StableHLOParseError:
        return StableHLOParseError(f"{op.name}: {message}", file=self.filename, line=op.line, col=op.col)

    def unsupported(self, op: Op, message: str) -> StableHLOUnsupportedError:
        return StableHLOUnsupportedError(f"{op.name}: {message}", file=self.filename, line=op.line, col=op.col)

    # ---- values known at import time
    def constant(self, array: np.ndarray, ref_hint: str = "c") -> Instruction:
        inst = self.b.constant(array, ref_hint=ref_hint)
        self.known[id(inst)] = np.asarray(array)
        return inst

    def value_of(self, inst: Instruction) -> np.ndarray | None:
        return self.known.get(id(inst))

    def scalar(self, value: Any, dtype: str) -> Instruction:
        return self.constant(np.array(value, dtype=numpy_dtype(dtype)))

    # ---- shapes
    def shape(self, op: Op, t: Any) -> Shape:
        if not isinstance(t, TensorType):
            raise self.unsupported(op, f"values of type {t} are not supported (only ranked tensors)")
        if t.dtype is None and t.complex_part is None:
            raise self.unsupported(op, f"element type {t.element} is not supported")
        if any(d is None for d in t.dims):
            raise self.unsupported(op, f"dynamic shape {t} is not supported (static shapes only)")
        return Shape(t.dtype or t.complex_part, t.dims)  # a complex type: the shape of each part

    def result_shape(self, op: Op, index: int = 0) -> Shape:
        return self.shape(op, op.results[index].type)

    def empty_result(self, op: Op, index: int = 0) -> Any:
        """The op's result when it has no elements (its shape has a 0 dim), else None: the kernels of a
        contraction or transform over nothing are never built (they would index by a zero-size dim)."""
        t = op.results[index].type
        shape = self.result_shape(op, index)
        if 0 not in shape.dims:
            return None
        if is_complex_type(t):
            return Complex(self.b.splat(0, shape.dtype, shape.dims), self.b.splat(0, shape.dtype, shape.dims))
        return self.b.splat(0, shape.dtype, shape.dims)

    # ---- importing
    def import_function(self, fn: Function, args: Sequence[Instruction], op: Op | None = None) -> list[Instruction]:
        if fn.name in self.call_stack:
            raise StableHLOUnsupportedError(f"recursive call of @{fn.name}", file=self.filename,
                                            line=op.line if op else fn.line, col=op.col if op else fn.col)
        self.call_stack.append(fn.name)
        saved = self.env
        self.env = Env()
        try:
            return self.import_block(fn.body, args)
        finally:
            self.env = saved
            self.call_stack.pop()

    def import_region(self, region: list[Block], args: Sequence[Instruction]) -> list[Instruction]:
        """A region that may read values of the enclosing body (a loop body)."""
        saved = self.env
        self.env = Env(saved)
        try:
            return self.import_block(region[0], args)
        finally:
            self.env = saved

    def import_lifted(self, region: list[Block], args: Sequence[Instruction], dims: Sequence[int]) -> list[Instruction]:
        """A region written on scalars (a comparator, a scatter body) applied at once to tensors of dims:
        its elementwise ops take the tensors, and its rank-0 values are broadcast where they meet them."""
        saved = self.lifted
        self.lifted = tuple(dims)
        try:
            return self.import_region(region, args)
        finally:
            self.lifted = saved

    def import_block(self, block: Block, args: Sequence[Instruction]) -> list[Instruction]:
        if len(block.args) != len(args):
            raise StableHLOParseError(f"a block of {len(block.args)} arguments receives {len(args)} values",
                                      file=self.filename)
        for value, inst in zip(block.args, args):
            self.env.bind(value, inst)
        for op in block.ops:
            if op.name in TERMINATORS:
                return [self.lookup(op, v) for v in op.operands]
            self.import_op(op)
        raise StableHLOParseError("block does not end with a return", file=self.filename)

    def lookup(self, op: Op, value: Value) -> Instruction:
        inst = self.env.get(value)
        if inst is None:
            raise self.error(op, f"value {value.name} is not available here")
        return inst

    def import_op(self, op: Op) -> None:
        self.imported_ops += 1
        if self.imported_ops > MAX_UNROLLED_OPS:
            raise self.unsupported(op, f"the program grows past {MAX_UNROLLED_OPS} ops once calls are inlined "
                                       "and loops unrolled")
        args: list[Any] = [self.lookup(op, v) for v in op.operands]
        declared, requantize = op, None
        if quantized.involved(op) and op.name not in quantized.OWN_RULES:
            with self.b.origin(self.origin(op)):
                op, args, requantize = quantized.lower(self, op, args)
        if self.lifted is not None:
            if op.name not in LIFTABLE and op.name != "func.call" and not op.name.startswith("chlo."):
                raise self.unsupported(op, "only elementwise ops can be applied over a tensor in this region")
            if any(_part(a).shape.rank for a in args):
                args = [self._lift(a) for a in args]
        with self.b.origin(self.origin(op)):
            try:
                complex_values = (any(isinstance(a, Complex) for a in args)
                                  or any(is_complex_type(r.type) for r in op.results))
                if complex_values and op.name != "func.call":
                    out = self.import_complex(op, args)
                else:
                    out = None if complex_values else self.fold(op, args)
                if out is None:
                    rule = RULES.get(op.name)
                    if rule is None:
                        raise self.unsupported(op, "no import rule")
                    out = rule(self, op, args)
                results = [out] if isinstance(out, (Instruction, Complex)) else list(out)
                if requantize is not None and len(results) == len(requantize):
                    results = quantized.requantize(self.b, results, requantize)
            except ShapeError as e:
                raise self.error(op, str(e)) from None
        op = declared
        if len(results) != len(op.results):
            raise self.error(op, f"produced {len(results)} values for {len(op.results)} results")
        for value, inst in zip(op.results, results):
            self.check_result(op, value, inst)
            self.env.bind(value, inst)

    def _lift(self, a: Any) -> Any:
        assert self.lifted is not None
        if isinstance(a, Complex):
            return Complex(*(self._lift(p) for p in a))
        return self.b.broadcast_to(a, self.lifted) if a.shape.rank == 0 else a

    def import_complex(self, op: Op, args: list[Any]) -> Results:
        """An op that reads or makes a complex value: its complex rule, or its real rule on each part."""
        rule = COMPLEX_RULES.get(op.name)
        if rule is not None:
            return rule(self, op, args)
        real_rule = RULES.get(op.name)
        if op.name not in COMPONENTWISE or real_rule is None or not componentwise_body(op):
            raise self.unsupported(op, "this op on complex values is not supported")
        parts = [real_rule(self, op, [a[k] if isinstance(a, Complex) else a for a in args]) for k in (0, 1)]
        re, im = ([p] if isinstance(p, Instruction) else list(p) for p in parts)
        return [Complex(r, i) if is_complex_type(v.type) else r for r, i, v in zip(re, im, op.results)]

    def fold(self, op: Op, args: list[Instruction]) -> Instruction | None:
        """A scalar result computed now from values known now (loop counters, reduction inits)."""
        if len(op.results) != 1 or not isinstance(op.results[0].type, TensorType) or op.results[0].type.rank:
            return None
        values = [self.value_of(a) for a in args]
        if any(v is None for v in values):
            return None
        out = fold.evaluate(op, values, self.result_shape(op).dtype)  # type: ignore[arg-type]
        return None if out is None else self.constant(out)

    def check_result(self, op: Op, value: Value, inst: Any) -> None:
        if isinstance(inst, Complex) != is_complex_type(value.type):
            raise self.error(op, f"result {value.name} is declared {value.type} but its rule gives "
                                 f"{'a complex' if isinstance(inst, Complex) else 'a real'} value")
        if isinstance(inst, Complex):
            self.check_result(op, Value(value.name, TensorType(value.type.complex_part, value.type.dims)), inst.re)
            self.check_result(op, Value(value.name, TensorType(value.type.complex_part, value.type.dims)), inst.im)
            return
        declared = self.shape(op, value.type)
        if self.lifted is not None and not declared.dims and tuple(inst.shape.dims) == self.lifted:
            declared = Shape(declared.dtype, self.lifted)
        if inst.shape.is_tuple or inst.shape.dtype != declared.dtype or tuple(inst.shape.dims) != declared.dims:
            raise self.error(op, f"result {value.name} is declared {value.type} but its operands give "
                                 f"{_tensor_text(inst.shape)}")

    def origin(self, op: Op) -> str:
        if op.location:
            return op.location
        name = op.results[0].name if op.results else op.name
        return f"{'/'.join(self.call_stack)}/{name}"

    def call(self, op: Op, callee: Any, args: list[Instruction]) -> list[Instruction]:
        name = callee.name if isinstance(callee, SymbolRef) else str(callee)
        fn = self.parsed.functions.get(name)
        if fn is None:
            raise self.error(op, f"call of undefined function @{name}")
        if len(args) != len(fn.args):
            raise self.error(op, f"@{name} takes {len(fn.args)} arguments, the call passes {len(args)}")
        for i, (value, arg) in enumerate(zip(fn.args, args)):
            if isinstance(arg, Complex) != is_complex_type(value.type):
                raise self.error(op, f"argument {i} of @{name} is {value.type}, the call passes a "
                                     f"{'complex' if isinstance(arg, Complex) else 'real'} value")
            inst = _part(arg)
            declared = self.shape(op, value.type)
            if self.lifted is not None and not declared.dims and tuple(inst.shape.dims) == self.lifted:
                declared = Shape(declared.dtype, self.lifted)
            if declared.dtype != inst.shape.dtype or declared.dims != tuple(inst.shape.dims):
                raise self.error(op, f"argument {i} of @{name} is {value.type}, the call passes "
                                     f"{_tensor_text(inst.shape)}")
        results = self.import_function(fn, args, op)
        if len(results) != len(op.results):
            raise self.error(op, f"@{name} returns {len(results)} values for {len(op.results)} results")
        return results


@stablehlo_op("stablehlo.custom_call")
@complex_op("stablehlo.custom_call")
def import_custom_call(cx: Context, op: Op, args: list[Any]) -> Results:
    return CUSTOM_CALLS[op.attrs["call_target_name"]](cx, op, args)


def _part(value: Any) -> Instruction:
    """An instruction, or a complex value's real part (for its shape)."""
    return value.re if isinstance(value, Complex) else value


def componentwise_body(op: Op) -> bool:
    """No body, or one whose ops are adds (reduce, scatter...) or none (a scatter that replaces): applied to the
    real parts and to the imaginary parts, such a body gives the parts of the complex result."""
    return all(o.name in ("stablehlo.add", "stablehlo.return") for region in op.regions for block in region
               for o in block.ops)


def _tensor_text(shape: Any) -> str:
    if shape.is_tuple:
        return str(shape)
    element = {v: k for k, v in reversed(list(ELEMENT_TYPES.items()))}.get(shape.dtype, shape.dtype)
    return str(TensorType(element, tuple(shape.dims)))


# ---------------------------------------------------------------- module
def entry_function(parsed: ParsedModule) -> Function:
    if "main" in parsed.functions:
        return parsed.functions["main"]
    public = [f for f in parsed.functions.values() if f.visibility == "public"]
    if len(public) == 1:
        return public[0]
    raise StableHLOParseError("no @main function (and not exactly one public function)", file=parsed.filename)


def reachable_ops(parsed: ParsedModule, entry: Function) -> Iterator[Op]:
    seen: set[str] = set()
    todo = [entry]
    while todo:
        fn = todo.pop()
        if fn.name in seen:
            continue
        seen.add(fn.name)
        for top in fn.body.ops:
            for op in top.walk():
                yield op
                for key in ("callee", "decomposition", "called_computations"):
                    refs = op.attrs.get(key)
                    for ref in refs if isinstance(refs, list) else [refs]:
                        if isinstance(ref, SymbolRef) and ref.name in parsed.functions:
                            todo.append(parsed.functions[ref.name])


def unsupported_ops(parsed: ParsedModule, entry: Function) -> list[UnsupportedOp]:
    found: list[UnsupportedOp] = []
    for op in reachable_ops(parsed, entry):
        types = [v.type for v in op.results + op.operands if isinstance(v.type, TensorType)]
        bad = sorted({t.element for t in types if t.dtype is None and t.complex_part is None})
        if op.name in TERMINATORS:
            pass
        elif op.attrs.get("_skipped"):
            found.append(UnsupportedOp(op.name, op.line))
        elif op.name == "stablehlo.custom_call" and (op.attrs.get("call_target_name") not in CUSTOM_CALLS
                                                     or (str(op.attrs.get("call_target_name")) in REFUSED_CUSTOM_CALLS
                                                         and not empty_operands(op))):
            target = op.attrs.get("call_target_name")
            reason = REFUSED_CUSTOM_CALLS.get(str(target))
            found.append(UnsupportedOp(op.name, op.line, f"@{target}" + (f" ({reason})" if reason else "")))
        elif op.name not in RULES:
            target = op.attrs.get("call_target_name")
            found.append(UnsupportedOp(op.name, op.line, f"@{target}" if target else ""))
        elif bad:
            found.append(UnsupportedOp(op.name, op.line, f"with element type {', '.join(bad)}"))
    return found


def _complex_parameter(cx: Context, name: str, t: TensorType) -> Complex:
    """A complex argument as a real one with a last dim of 2 (real, imaginary), marked complex=true: numpy's
    complex array x as ``x[..., None].view(x.real.dtype)``, which the bundle's user passes as x itself."""
    dims = tuple(int(d) for d in t.dims)  # type: ignore[arg-type]
    pairs = cx.b.parameter(name, Shape(t.complex_part, dims + (2,)))  # type: ignore[arg-type]
    pairs.attrs["complex"] = True
    zeros, limit, ones = (0,) * len(dims), dims, (1,) * (len(dims) + 1)
    re, im = (cx.b.reshape(cx.b.op("slice", [pairs], start_indices=zeros + (k,), limit_indices=limit + (k + 1,),
                                   strides=ones), dims) for k in (0, 1))
    return Complex(re, im)


def _complex_output(cx: Context, value: Complex) -> Instruction:
    dims = tuple(value.re.shape.dims)
    return cx.b.op("concatenate", [cx.b.reshape(p, dims + (1,)) for p in value], dimension=len(dims))


def import_module(parsed: ParsedModule, name: str | None = None) -> Module:
    """Complex arguments and results of the entry become real ones with a last dim of 2 (the real and imaginary
    parts): parameters with complex=true and outputs in ``module.complex_outputs``, which a bundle takes and
    gives as complex arrays (README "The bundle")."""
    flatten_tuples(parsed)
    entry = entry_function(parsed)
    problems = unsupported_ops(parsed, entry)
    if problems:
        raise UnsupportedOpsError(problems, file=parsed.filename)
    cx = Context(parsed, name or parsed.name or "main")
    params: list[Any] = []
    for i, value in enumerate(entry.args):
        t = value.type
        if not isinstance(t, TensorType) or (t.dtype is None and t.complex_part is None) or None in t.dims:
            raise StableHLOUnsupportedError(f"argument {i} of @{entry.name} has unsupported type {t}",
                                            file=parsed.filename, line=entry.line, col=entry.col)
        params.append(_complex_parameter(cx, f"arg{i}", t) if t.complex_part is not None
                      else cx.b.parameter(f"arg{i}", Shape(t.dtype, t.dims)))
    outputs = cx.import_function(entry, params)
    complex_outputs = {i for i, o in enumerate(outputs) if isinstance(o, Complex)}
    outputs = [_complex_output(cx, o) if isinstance(o, Complex) else o for o in outputs]
    module = cx.b.finish(outputs, [f"out{i}" for i in range(len(outputs))])
    module.complex_outputs = complex_outputs
    _drop_unused_constants(module)
    return module


def _drop_unused_constants(module: Module) -> None:
    """Scalars folded while importing (loop counters, reduction inits) that no op ended up reading."""
    comp = module.entry
    for inst in reversed(list(comp.instructions)):
        if inst.opcode == "constant" and not inst.users and inst is not comp.root:
            comp.remove(inst)
    used = {inst.attrs["ref"] for inst in comp.instructions if inst.opcode == "constant" and "ref" in inst.attrs}
    for key in [k for k in module.constants if k not in used]:
        del module.constants[key]
