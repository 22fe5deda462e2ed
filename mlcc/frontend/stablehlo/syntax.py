"""What the parser produces: ops with operands, attributes and regions, and their types.

Operations keep MLIR's generic shape whichever form they were written in: a
pretty ``stablehlo.broadcast_in_dim %x, dims = [1]`` and a generic
``"stablehlo.broadcast_in_dim"(%x) <{broadcast_dimensions = array<i64: 1>}>``
give the same Op, with the generic attribute names. Values are objects, so the
importer maps them to IR instructions without caring about SSA names or scopes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# MLIR element type -> IR dtype
ELEMENT_TYPES = {
    "i1": "pred", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64",
    "si8": "s8", "si16": "s16", "si32": "s32", "si64": "s64",
    "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64",
    "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
}
# complex element types -> the IR dtype of each part (the importer lowers a complex value to two real ones)
COMPLEX_TYPES = {"complex<f32>": "f32", "complex<f64>": "f64"}


# storage types of ``!quant.uniform`` (the quant dialect's spelling: ``i8`` is signed) -> IR dtype
STORAGE_TYPES = {"i2": "s2", "i4": "s4", "i8": "s8", "i16": "s16", "i32": "s32",
                 "u2": "u2", "u4": "u4", "u8": "u8", "u16": "u16", "u32": "u32"}
EXPRESSED_TYPES = ("f16", "bf16", "f32", "f64")


@dataclass(frozen=True)
class QuantType:
    """``!quant.uniform<i8<-127:127>:f32:1, {0.1:-3, 0.2:4}>``: integers of ``storage`` between storage_min and
    storage_max standing for (i - zero_point) * scale of the ``expressed`` float type; one (scale, zero point)
    per tensor (dim None) or one per index of dim."""

    storage: str          # the quant dialect's spelling (i8, u8, i4...)
    storage_min: int
    storage_max: int
    expressed: str        # f16, bf16, f32, f64
    dim: int | None
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    text: str = field(compare=False)  # as written, for messages (1e-1 and 0.1 are one type)

    @property
    def dtype(self) -> str:
        return STORAGE_TYPES[self.storage]

    def canonical(self) -> str:
        """One spelling of the type (``1.000000e-01`` and ``0.1`` are one scale), to compare types by."""
        params = [f"{s!r}:{z}" for s, z in zip(self.scales, self.zero_points)]
        return (f"!quant.uniform<{self.storage}<{self.storage_min}:{self.storage_max}>:{self.expressed}"
                + (f":{self.dim}, {{{', '.join(params)}}}>" if self.dim is not None else f", {params[0]}>"))

    def same_values(self, other: "QuantType") -> bool:
        """The same integers mean the same numbers (the quantization dim aside)."""
        return (self.dtype, self.storage_min, self.storage_max, self.expressed, self.scales, self.zero_points) == \
            (other.dtype, other.storage_min, other.storage_max, other.expressed, other.scales, other.zero_points)


@dataclass(frozen=True)
class TensorType:
    """``tensor<2x3xf32>``: element is the MLIR spelling; dims are ints (None for ``?``). A quantized tensor
    (``tensor<2x!quant.uniform<i8:f32, 0.1>>``) has ``quant``, and its IR dtype is the storage type."""

    element: str
    dims: tuple[int | None, ...]
    quant: QuantType | None = None

    @property
    def dtype(self) -> str | None:
        """The IR dtype, or None for an element type the IR lacks (complex, f8, i4...)."""
        if self.quant is not None:
            return self.quant.dtype
        return ELEMENT_TYPES.get(self.element)

    def expressed(self) -> "TensorType":
        """A quantized tensor's float counterpart (itself when not quantized)."""
        return self if self.quant is None else TensorType(self.quant.expressed, self.dims)

    @property
    def complex_part(self) -> str | None:
        """For complex<f32> and complex<f64>, the IR dtype of the real and imaginary parts; else None."""
        return COMPLEX_TYPES.get(self.element)

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.dims)
        return f"tensor<{dims}{self.quant.text if self.quant is not None else self.element}>"


@dataclass(frozen=True)
class OtherType:
    """Any type that is not a ranked tensor (``!stablehlo.token``, ``tuple<...>``, ``i32``)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class TupleType:
    """``tuple<tensor<f32>, tuple<...>>``: flattened away at import (mlcc/frontend/stablehlo/tuples.py)."""

    elements: tuple[Any, ...]

    def __str__(self) -> str:
        return f"tuple<{', '.join(map(str, self.elements))}>"


@dataclass(frozen=True)
class FunctionType:
    inputs: tuple[Any, ...]
    results: tuple[Any, ...]

    def __str__(self) -> str:
        return f"({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.results))})"


@dataclass(frozen=True)
class SymbolRef:
    name: str


@dataclass(frozen=True)
class OpaqueAttr:
    """An attribute kept as text: one no rule reads (``#sdy.sharding<...>``, an alias), or a dense literal of an
    element type the IR lacks (``dense<(1.0,2.0)> : tensor<complex<f32>>``), which keeps its type."""

    text: str
    type: TensorType | None = None


@dataclass
class DenseAttr:
    """``dense<...> : tensor<...>``, decoded to a numpy array of the tensor's shape."""

    type: TensorType
    array: np.ndarray


@dataclass(eq=False)
class Value:
    name: str
    type: Any  # TensorType, OtherType, or None when the defining op's syntax was skipped

    def __repr__(self) -> str:
        return f"<{self.name}: {self.type}>"


@dataclass(eq=False)
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)


@dataclass(eq=False)
class Op:
    name: str
    operands: list[Value]
    results: list[Value]
    attrs: dict[str, Any]
    regions: list[list[Block]]
    line: int
    col: int
    location: str | None = None   # the name in ``loc("...")``, when the file has debug info

    def walk(self):
        yield self
        for region in self.regions:
            for block in region:
                for op in block.ops:
                    yield from op.walk()


@dataclass(eq=False)
class Function:
    name: str
    args: list[Value]
    result_types: list[Any]
    body: Block
    visibility: str
    line: int
    col: int


@dataclass(eq=False)
class ParsedModule:
    name: str | None
    functions: dict[str, Function]
    filename: str


def as_array(value: Any) -> np.ndarray:
    """An attribute that holds numbers (``array<...>``, ``[..]``, ``dense<...>``) as a numpy array."""
    if isinstance(value, DenseAttr):
        return value.array
    return np.asarray(value)
