"""The table of ONNX import rules, and the node wrapper the rules read.

A rule is a small function registered by op type, domain and the opset it
appeared in::

    @onnx_op("Gemm", since=11)
    def import_gemm(b: Builder, node: OnnxNode) -> list[Result]: ...

For a model whose opset for that domain is N, the rule with the largest
``since <= N`` applies. A rule returns one entry per node output: an IR
instruction, a numpy array (a value known at import time, which becomes an IR
constant only if something needs it; an object array of ints and Syms is a
value known in terms of symbolic dims, e.g. Shape of ``[1, seq]``, which has no
IR form), a Deferred (see there), or None (an output that is absent or unused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Union

import numpy as np
import onnx
from onnx import AttributeProto

from mlcc.frontend.onnx.errors import DeferredValueError, InvalidModelError, UnsupportedFeatureError
from mlcc.hlo.blockquant import PACKED_DTYPE_BITS, packed_constant, packs
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Dim, Instruction, Shape
from mlcc.hlo.symbolic import Sym


@dataclass(frozen=True)
class Deferred:
    """A result with no IR value and no known value: it is computed from symbolic dims.

    Consumers that only need its value at import time fall back to ONNX's
    inferred output shapes; using it as data is an error that quotes ``reason``.
    """

    reason: str


Result = Union[Instruction, np.ndarray, Deferred, "Tensor", None]
RuleFn = Callable[[Builder, "OnnxNode"], Sequence[Result]]

DEFAULT_DOMAIN = ""


def normalize_domain(domain: str) -> str:
    return DEFAULT_DOMAIN if domain in ("", "ai.onnx") else domain


@dataclass(frozen=True)
class Rule:
    op_type: str
    domain: str
    since: int
    fn: RuleFn
    fold: bool  # may run on known inputs at import time (False for rules with side conditions)
    sequences: bool = False  # takes sequence inputs (ops/sequence.py); others are refused one naming the input


_RULES: dict[tuple[str, str], list[Rule]] = {}


def onnx_op(op_type: str, since: int = 1, domain: str = DEFAULT_DOMAIN,
            fold: bool = True, sequences: bool = False) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as the import rule of ``op_type`` from opset ``since`` on (decorators stack)."""

    def register(fn: RuleFn) -> RuleFn:
        key = (normalize_domain(domain), op_type)
        rules = _RULES.setdefault(key, [])
        if any(r.since == since for r in rules):
            raise ValueError(f"two import rules for {op_type} since opset {since}")
        rules.append(Rule(op_type, key[0], since, fn, fold, sequences))
        rules.sort(key=lambda r: r.since)
        return fn

    return register


def find_rule(domain: str, op_type: str, opset: int) -> Rule | None:
    """The rule with the largest ``since <= opset``, or None."""
    best = None
    for rule in _RULES.get((normalize_domain(domain), op_type), []):
        if rule.since <= opset:
            best = rule
    return best


def registered_ops() -> list[tuple[str, str, int]]:
    """(domain, op type, since) of every rule, sorted."""
    return sorted((r.domain, r.op_type, r.since) for rules in _RULES.values() for r in rules)


@dataclass
class Tensor:
    """What the importer knows about one ONNX value.

    ``value`` is set when the value is known at import time; ``inst`` once it
    exists in the IR. ``deferred`` explains a value that has neither: one
    computed from symbolic dims (only its consumers' inferred shapes are known),
    or an initializer of a type mlcc lacks (an error only if something uses it).
    ``sym`` holds a value known in terms of symbolic dims (mlcc.frontend.onnx.
    symbolic_values); such a value also has ``deferred`` set, since rules that
    need data see it as unknown.
    """

    name: str
    dtype: str
    dims: tuple[Dim, ...]
    value: np.ndarray | None = None
    inst: Instruction | None = None
    origin: tuple[str, ...] = ()
    deferred: str | None = None
    sym: np.ndarray | None = None  # a symbolic known value: an object array of ints and Syms (then deferred says why)
    seq: tuple[Tensor, ...] | None = None  # the elements of a sequence (ops/sequence.py)

    @property
    def shape(self) -> Shape:
        return Shape(self.dtype, self.dims)

    @property
    def is_known(self) -> bool:
        return self.value is not None

    @property
    def is_symbolic(self) -> bool:
        return self.sym is not None

    @property
    def is_sequence(self) -> bool:
        return self.seq is not None


SEQUENCE = "is a sequence (of tensors), not a tensor"


def sequence(name: str, dtype: str, elements: Sequence[Tensor], origin: tuple[str, ...] = ()) -> Tensor:
    """A sequence value of known length: ``elements`` of element type ``dtype``."""
    return Tensor(name, dtype, (), origin=origin, deferred=SEQUENCE, seq=tuple(elements))


# The symbol of a data-dependent dim (mlcc/frontend/onnx/ops/dynamic.py): the op's name and its number among the
# graph's ops of that kind, in graph order; `--shape nonzero_0=..100` bounds it.
COUNT_SYMBOL = re.compile(r"^(nonzero|unique|nms|topk)_[0-9]+$")


@dataclass
class ImportContext:
    """State shared by all nodes of one import: the tensors so far and ONNX's inferred types."""

    file: str | None
    opsets: dict[str, int]
    tensors: dict[str, Tensor] = field(default_factory=dict)
    inferred: dict[str, tuple[int, tuple[Dim | None, ...] | None]] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # inclusive ranges of symbolic dims
    import_subgraph: Callable[..., list[Tensor]] | None = None  # (graph, scope, inputs) -> outputs; set by the importer
    count_bounds: dict[str, tuple[int, int]] = field(default_factory=dict)  # --shape bounds of data-dependent dims

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise InvalidModelError(f"value '{name}' is used but never defined", file=self.file) from None

    def materialize(self, b: Builder, t: Tensor) -> Instruction:
        """The IR instruction of ``t``, creating a constant for a known value on first use."""
        if t.inst is not None:
            return t.inst
        if t.sym is not None and t.dtype in INDEX_DTYPES:
            with b.origin(*t.origin):
                t.inst = symbolic_value_ir(b, t.sym, t.dtype)
            return t.inst
        if t.value is None:
            raise InvalidModelError(f"value '{t.name}' {t.deferred or 'has no IR value'}", file=self.file)
        with b.origin(*t.origin):
            if t.dtype in PACKED_DTYPE_BITS and packs(t.value):
                t.inst = packed_constant(b, t.value, t.dtype, PACKED_DTYPE_BITS[t.dtype], ref_hint=t.name)
            else:
                t.inst = b.constant(t.value, ref_hint=t.name)
        return t.inst


INDEX_DTYPES = ("s32", "s64")


def symbolic_value_ir(b: Builder, values: np.ndarray, dtype: str) -> Instruction:
    """A value known in terms of symbolic dims (Shape of [1, seq], its arithmetic) as IR, where a rule needs
    it as data (a length cast to float): each element a constant or a ``size`` op over the symbols, the
    kernels computing it from their sym_ arguments."""
    parts = []
    for x in values.reshape(-1):
        if isinstance(x, Sym):
            part = b.op("size", [], Shape("s64", ()), expr=str(x))
        else:
            part = b.constant(np.array(int(x), np.int64))
        parts.append(part if values.ndim == 0 else b.reshape(part, (1,)))
    out = parts[0] if values.ndim == 0 else b.op("concatenate", parts, dimension=0) if len(parts) > 1 else parts[0]
    return b.convert(b.reshape(out, values.shape), dtype)


_MISSING = object()


class OnnxNode:
    """One ONNX node as a rule sees it: typed attributes, inputs as IR values or known arrays."""

    def __init__(self, proto: onnx.NodeProto, name: str, opset: int, ctx: ImportContext,
                 materialize: Callable[[Tensor], Instruction]) -> None:
        self.proto = proto
        self.name = name
        self.op_type = proto.op_type
        self.domain = normalize_domain(proto.domain)
        self.opset = opset
        self.ctx = ctx
        self._materialize = materialize
        self._attrs = {a.name: a for a in proto.attribute}

    # ---- errors that name this node
    def error(self, message: str) -> InvalidModelError:
        return InvalidModelError(message, file=self.ctx.file, node=self.name, op_type=self.op_type)

    def unsupported(self, message: str) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(message, file=self.ctx.file, node=self.name, op_type=self.op_type)

    # ---- attributes
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        """The attribute's Python value (str for strings, list for repeated, numpy for tensors)."""
        a = self._attrs.get(name)
        if a is None:
            if default is _MISSING:
                raise self.error(f"missing required attribute '{name}'")
            return default
        if a.type == AttributeProto.TENSOR:
            return onnx.numpy_helper.to_array(a.t)
        if a.type == AttributeProto.GRAPH:
            return a.g
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            return value.decode("utf-8")
        if isinstance(value, list):
            return [v.decode("utf-8") if isinstance(v, bytes) else v for v in value]
        return value

    # ---- inputs
    @property
    def num_inputs(self) -> int:
        return len(self.proto.input)

    def has_input(self, i: int) -> bool:
        return i < len(self.proto.input) and self.proto.input[i] != ""

    def tensor(self, i: int) -> Tensor:
        if not self.has_input(i):
            raise self.error(f"input {i} is required")
        return self.ctx.tensor(self.proto.input[i])

    def input(self, i: int) -> Instruction:
        """Input ``i`` as an IR value (a known value becomes a constant)."""
        t = self.tensor(i)
        if t.inst is None and t.value is None and not (t.sym is not None and t.dtype in INDEX_DTYPES):
            raise DeferredValueError(f"input '{t.name}' {t.deferred}", file=self.ctx.file, node=self.name,
                                     op_type=self.op_type)
        return self._materialize(t)

    def inputs(self) -> list[Instruction]:
        return [self.input(i) for i in range(self.num_inputs) if self.has_input(i)]

    def value(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value if it is known at import time."""
        return self.tensor(i).value if self.has_input(i) else None

    def const(self, i: int, what: str) -> np.ndarray:
        """Input ``i``'s value, which this op needs at import time (``what`` it is, for the message)."""
        v = self.value(i)
        if v is None:
            raise self.unsupported(f"the {what} (input '{self.proto.input[i]}') must be known at import time")
        return v

    def ints(self, i: int, what: str) -> list[int]:
        return [int(x) for x in np.asarray(self.const(i, what)).reshape(-1)]

    def sym_value(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value known at import, symbolic or not, as an object array of ints and Syms."""
        if not self.has_input(i):
            return None
        t = self.tensor(i)
        if t.sym is not None:
            return t.sym
        if t.value is None or t.value.dtype.kind not in "iub":
            return None
        return np.array([int(v) for v in t.value.reshape(-1)], dtype=object).reshape(t.value.shape)

    def sizes(self, i: int, what: str) -> list[int | Sym]:
        """Input ``i``'s values as sizes: ints, or Syms of symbolic dims (a shape computed from Shape)."""
        v = self.sym_value(i)
        if v is None:
            return [int(x) for x in np.asarray(self.const(i, what)).reshape(-1)]
        return list(v.reshape(-1))

    def shape(self, i: int) -> Shape:
        return self.tensor(i).shape

    def dims(self, i: int) -> tuple[Dim, ...]:
        return self.tensor(i).dims

    def dtype(self, i: int) -> str:
        return self.tensor(i).dtype

    def rank(self, i: int) -> int:
        return len(self.tensor(i).dims)

    # ---- outputs
    @property
    def num_outputs(self) -> int:
        return len(self.proto.output)

    def output_used(self, j: int) -> bool:
        return j < len(self.proto.output) and self.proto.output[j] != "" and self.proto.output[j] in self.ctx.used

    def output_dims(self, j: int = 0) -> tuple[Dim, ...] | None:
        """ONNX's inferred dims of output ``j`` (None when unknown or partly unknown)."""
        info = self.ctx.inferred.get(self.proto.output[j]) if j < len(self.proto.output) else None
        if info is None or info[1] is None or any(d is None for d in info[1]):
            return None
        return tuple(info[1])  # type: ignore[arg-type]

    def output_elem_type(self, j: int = 0) -> int | None:
        info = self.ctx.inferred.get(self.proto.output[j]) if j < len(self.proto.output) else None
        return info[0] if info else None

    def inferred_dims(self, j: int, what: str, source: int | None = None) -> tuple[Dim, ...]:
        """Fallback when an input that fixes output ``j``'s shape is not known: ONNX's inferred dims.

        ``source`` is that input's index, named in the error (so a caller can supply its value).
        """
        dims = self.output_dims(j)
        if dims is None:
            named = f" (input '{self.proto.input[source]}')" if source is not None and self.has_input(source) else ""
            raise self.unsupported(f"the {what}{named} is not known at import time "
                                   "and ONNX could not infer the output shape")
        return dims

    def axis(self, axis: int, rank: int) -> int:
        """A possibly negative axis, normalized into [0, rank)."""
        if not -rank <= axis < max(rank, 1):
            raise self.error(f"axis {axis} is out of range for rank {rank}")
        return axis % rank if rank else 0
