"""Builder: the one way frontends create IR.

Shapes are inferred from the opcode table's rules; names are ``opcode.N``;
every instruction records the source nodes it came from (``with b.origin(...)``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np

from mlcc.hlo.dtypes import dtype_of_numpy, numpy_dtype
from mlcc.hlo.ir import Computation, Dim, Instruction, Module, Shape
from mlcc.hlo.shape_inference import infer_shape

INLINE_CONSTANT_ELEMENTS = 16


class ValueOps:
    """reshape and convert on top of an ``op`` method: the Builder's, and those of the emitters passes hand to
    mlcc.hlo.blockquant in a Builder's place."""

    def reshape(self, x: Instruction, dims: Sequence[Dim]) -> Instruction:
        if tuple(dims) == tuple(x.shape.dims):
            return x
        return self.op("reshape", [x], Shape(x.shape.dtype, tuple(dims)))  # type: ignore[attr-defined]

    def convert(self, x: Instruction, dtype: str) -> Instruction:
        if x.shape.dtype == dtype:
            return x
        return self.op("convert", [x], Shape(dtype, x.shape.dims))  # type: ignore[attr-defined]


class Builder(ValueOps):
    def __init__(self, module_name: str, computation_name: str = "main", is_entry: bool = True,
                 module: Module | None = None) -> None:
        self.module = module or Module(module_name)
        self.comp = Computation(computation_name, is_entry=is_entry)
        self.module.add_computation(self.comp)
        self._counter: dict[str, int] = {}
        self._origin: tuple[str, ...] = ()
        self._nparams = 0

    # ---- naming and provenance
    def fresh_name(self, hint: str) -> str:
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return hint if n == 0 and hint != "" else f"{hint}.{n}"

    @contextlib.contextmanager
    def origin(self, *names: str) -> Iterator[None]:
        saved = self._origin
        self._origin = tuple(names)
        try:
            yield
        finally:
            self._origin = saved

    # ---- generic creation
    def op(self, opcode: str, operands: Sequence[Instruction], shape: Shape | None = None, **attrs: Any) -> Instruction:
        attrs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
        result = infer_shape(opcode, [o.shape for o in operands], attrs, shape)
        inst = Instruction(self.fresh_name(opcode), opcode, result, operands, attrs, origin=self._origin)
        return self.comp.add(inst)

    def parameter(self, name: str | None, shape: Shape) -> Instruction:
        attrs: dict[str, Any] = {"index": self._nparams}
        if name is not None:
            attrs["name"] = name
        self._nparams += 1
        inst = Instruction(self.fresh_name("p" if name is None else "arg"), "parameter", shape, (), attrs,
                           origin=self._origin)
        return self.comp.add(inst)

    def constant(self, data: Any, dtype: str | None = None, ref_hint: str = "c") -> Instruction:
        """A constant from an array: inline when tiny, a splat when uniform, else a ref into module.constants."""
        arr = np.asarray(data)
        if dtype is not None:
            arr = arr.astype(numpy_dtype(dtype))
        dt = dtype_of_numpy(arr.dtype)
        shape = Shape(dt, arr.shape)
        flat = arr.reshape(-1)
        if arr.size <= INLINE_CONSTANT_ELEMENTS and (arr.size <= 1 or not _uniform(flat)):
            attrs: dict[str, Any] = {"value": tuple(_py(v, dt) for v in flat)}
        elif arr.size > 0 and _uniform(flat):
            attrs = {"splat": _py(flat[0], dt)}
        else:
            key = self._constant_key(ref_hint)
            self.module.constants[key] = arr
            attrs = {"ref": key}
        inst = Instruction(self.fresh_name("constant"), "constant", shape, (), attrs, origin=self._origin)
        return self.comp.add(inst)

    def splat(self, value: float | int | bool, dtype: str, dims: Sequence[Dim] = ()) -> Instruction:
        shape = Shape(dtype, tuple(dims))
        attrs: dict[str, Any] = {"value": (_py(value, dtype),)} if not dims else {"splat": _py(value, dtype)}
        inst = Instruction(self.fresh_name("constant"), "constant", shape, (), attrs, origin=self._origin)
        return self.comp.add(inst)

    def _constant_key(self, hint: str) -> str:
        key, n = hint, 0
        while key in self.module.constants:
            n += 1
            key = f"{hint}.{n}"
        return key

    # ---- helpers shared by frontends (reshape and convert: ValueOps)
    def transpose(self, x: Instruction, perm: Sequence[int]) -> Instruction:
        if list(perm) == list(range(len(perm))):
            return x
        return self.op("transpose", [x], dimensions=tuple(perm))

    def broadcast_to(self, x: Instruction, dims: Sequence[Dim]) -> Instruction:
        """Numpy-style broadcast of x to dims (x's dims align to the right)."""
        dims = tuple(dims)
        if tuple(x.shape.dims) == dims:
            return x
        r = len(dims) - x.shape.rank
        if r < 0:
            raise ValueError(f"cannot broadcast {x.shape} to {list(dims)}")
        return self.op("broadcast", [x], Shape(x.shape.dtype, dims), dimensions=tuple(range(r, len(dims))))

    def broadcast_shapes(self, *shapes: Sequence[Dim]) -> tuple[Dim, ...]:
        rank = max(len(s) for s in shapes)
        out: list[Dim] = []
        for i in range(rank):
            ds = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0}
            ds.discard(1)
            if len(ds) > 1:
                raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
            out.append(ds.pop() if ds else 1)
        return tuple(out)

    def elementwise(self, opcode: str, *xs: Instruction, **attrs: Any) -> Instruction:
        """Elementwise op with numpy broadcasting of its operands."""
        dims = self.broadcast_shapes(*[x.shape.dims for x in xs])
        return self.op(opcode, [self.broadcast_to(x, dims) for x in xs], **attrs)

    def finish(self, outputs: Sequence[Instruction], names: Sequence[str]) -> Module:
        root = self.op("tuple", list(outputs))
        self.comp.root = root
        self.module.output_names = list(names)
        return self.module


def _uniform(flat: np.ndarray, chunk: int = 1 << 16) -> bool:
    """Whether every element equals the first (bit for bit in sign, NaN equal to NaN). Looks a chunk at a
    time and stops at the first that differs: a big weight (maybe memory-mapped) is never copied whole."""
    if flat.size == 0:
        return False
    first = flat[0]
    for start in range(0, flat.size, chunk):
        part = flat[start:start + chunk]
        if flat.dtype.kind == "f":
            same = np.all((part == first) | (np.isnan(part) & np.isnan(first))) and np.all(
                np.signbit(part) == np.signbit(first))
        else:
            same = np.all(part == first)
        if not same:
            return False
    return True


def _py(v: Any, dtype: str) -> Any:
    if dtype == "pred":
        return bool(v)
    if dtype.startswith(("s", "u")):
        return int(v)
    return float(v)
