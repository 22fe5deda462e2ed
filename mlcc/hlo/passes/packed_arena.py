"""4- and 2-bit values materialized in the arena are stored packed (README "The bundle").

After fusion, a value of type s4, u4, s2 or u2 that one kernel stores and other kernels load takes a byte a
value in the arena unless it is packed. This pass rewrites such a value as packed outputs and inputs are
(mlcc/hlo/blockquant.py): the producing kernel's root becomes the value's ONNX-order bytes,
u8[ceil(n * bits / 8)], and every loading kernel takes those bytes and unpacks them in its loads. The buffer
plan, the modeled bytes and the intent then see the packed size through the u8 shape.

Writers: a loop kernel computes each byte from its own values; a reduction, softmax, layer-norm or rms-norm
(an input fusion) and a dot's or a convolution's output fusion keep the value at their result's dims and
their templates store whole bytes (mlcc.hlo.blockquant.packed_source finds the value in the root). Readers:
loop kernels, input fusions and attention fusions, whose prologues (q, k and v sections) compute any loop op
at the tile's coordinates. Only values with static dims, with every reader one of those, are rewritten; of
writers other than loop kernels only values in the default (row-major) layout (their templates pack the
result's row-major order). A loop kernel computes each value at its logical coordinates whatever layout the
value was given (a convolution's input is laid out as the convolution reads it), and the packed bytes hold
the values in row-major order. An elementwise op left unfused becomes a loop fusion of itself first.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mlcc.hlo.blockquant import PACKED_DTYPE_BITS, packed_bytes, unpacked
from mlcc.hlo.builder import ValueOps
from mlcc.hlo.ir import Computation, Instruction, Module, Shape
from mlcc.hlo.opcodes import ELEMENTWISE_OPS
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.reshape_to_bitcast import preserves_byte_order
from mlcc.hlo.shape_inference import conv_dim_labels, infer_shape


class _Emitter(ValueOps):
    """The Builder's methods blockquant uses, appending to a fused computation (sorted after)."""

    def __init__(self, comp: Computation, origin: tuple[str, ...]) -> None:
        self.comp = comp
        self.origin = origin

    def _add(self, opcode: str, operands: Sequence[Instruction], shape: Any, attrs: dict[str, Any]) -> Instruction:
        inst = Instruction(self.comp.unique_name(opcode), opcode, shape, operands, attrs, origin=self.origin)
        return self.comp.add(inst)

    def op(self, opcode: str, operands: Sequence[Instruction], shape: Shape | None = None, **attrs: Any) -> Instruction:
        attrs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
        result = infer_shape(opcode, [o.shape for o in operands], attrs, shape)
        result = Shape(result.dtype, result.dims)  # row-major, as every value here is
        if opcode == "reshape" and preserves_byte_order(operands[0].shape, result):
            opcode = "bitcast"  # what reshape-to-bitcast made of every row-major reshape before fusion
        return self._add(opcode, operands, result, attrs)

    def constant(self, data: Any, dtype: str, ref_hint: str = "c") -> Instruction:
        arr = np.asarray(data)
        return self._add("constant", (), Shape(dtype, arr.shape), {"value": tuple(int(v) for v in arr.reshape(-1))})

    def splat(self, value: int, dtype: str, dims: Sequence[Any] = ()) -> Instruction:
        attrs: dict[str, Any] = {"splat": int(value)} if dims else {"value": (int(value),)}
        return self._add("constant", (), Shape(dtype, tuple(dims)), attrs)


def _loop_kernel(inst: Instruction) -> bool:
    """A loop fusion, or an elementwise op left unfused (a loop kernel of its own)."""
    if inst.opcode == "fusion":
        return inst.attrs.get("kind") == "loop" and isinstance(inst.shape, Shape)
    return inst.opcode in ELEMENTWISE_OPS


# The heavy ops of input fusions whose kernels store a 4/2-bit result as whole bytes (the fused root is
# packed_bytes of the value, recognized by mlcc.hlo.blockquant.packed_source), and the fusion kinds whose
# kernels unpack a packed operand in their loads (an input fusion's prologue, or an attention kernel's q, k
# and v sections, computes any loop op at the tile's coordinates).
PACKED_WRITERS = frozenset({"reduce", "softmax", "layer-norm", "rms-norm"})
PACKED_READERS = frozenset({"input", "attention"})
# A row kernel (softmax, layer-norm, rms-norm) packs rows of a length that is not a multiple of the values a
# byte by reading a program's rows in one tile up to this length; longer such rows in chunks whose bytes carry
# across (row_norm.py.jinja, README "The bundle").
MAX_ODD_PACKED_ROW = 16384


def _heavy(inst: Instruction) -> Instruction | None:
    """The heavy op of a fusion whose kernel can store its 4/2-bit result packed, if inst is one: an output
    fusion's dot (_packing_dot) or convolution (_packing_conv); an input fusion's reduction always (its outputs are one flat index); an
    input fusion's row kernel when its rows are the result's innermost dims (a row is consecutive values)."""
    if inst.opcode != "fusion" or inst.called is None:
        return None
    if inst.attrs.get("kind") == "output":
        return _packing_dot(inst) or _packing_conv(inst)
    if inst.attrs.get("kind") != "input":
        return None
    heavy = [i for i in inst.called.instructions if i.opcode in PACKED_WRITERS]
    if len(heavy) != 1 or tuple(heavy[0].shape.dims) != tuple(inst.shape.dims):
        return None
    h = heavy[0]
    if h.opcode == "reduce":
        return h
    rank = h.shape.rank
    normalized = [h.attrs["dimension"]] if h.opcode == "softmax" else sorted(h.attrs["dimensions"])
    return h if normalized == list(range(rank - len(normalized), rank)) else None


# Dots whose tiles may span whole rows (matmul_tiles' whole_rows: tl.dot dtypes) and the longest such row:
# a dot whose rows are an odd count of 4/2-bit values stores them packed from tiles of whole rows.
_WHOLE_ROW_DOTS = ("f16", "bf16", "f32", "f64", "s8", "u8")
MAX_ODD_PACKED_DOT_ROW = 256


def _packing_dot(inst: Instruction) -> Instruction | None:
    """An output fusion's one dot (no convolution, second contraction or row norm in it), if its kernel can
    store its result packed: rows (the rhs free dims, innermost in the result) a multiple of the values a
    byte (every [BLOCK_M, BLOCK_N] tile row is then whole bytes); or, for other rows up to
    MAX_ODD_PACKED_DOT_ROW long, when its tiles can span whole rows (both operands read as they are, a
    tl.dot dtype) and each batch element's values start a byte (one batch element, or whole bytes each)."""
    heavy = [i for i in inst.called.instructions if i.opcode in ("dot", "convolution", "softmax", "layer-norm",
                                                                  "rms-norm", "reduce")]
    if len(heavy) != 1 or heavy[0].opcode != "dot" or tuple(heavy[0].shape.dims) != tuple(inst.shape.dims):
        return None
    dot = heavy[0]
    lhs, rhs = (o.shape for o in dot.operands)
    rb, rc = tuple(dot.attrs["rhs_batch_dims"]), tuple(dot.attrs["rhs_contracting_dims"])
    n = int(np.prod([int(rhs.dims[d]) for d in range(rhs.rank) if d not in rb + rc], dtype=np.int64))
    per_byte = 8 // PACKED_DTYPE_BITS[inst.shape.dtype]
    if n % per_byte == 0:
        return dot
    batch = int(np.prod([int(rhs.dims[d]) for d in rb], dtype=np.int64))
    per_batch = int(np.prod([int(d) for d in dot.shape.dims], dtype=np.int64)) // max(batch, 1)
    as_is = all(o.opcode == "parameter" for o in dot.operands)
    if as_is and lhs.dtype in _WHOLE_ROW_DOTS and n <= MAX_ODD_PACKED_DOT_ROW \
            and (batch == 1 or per_batch % per_byte == 0):
        return dot
    return None


def _packing_conv(inst: Instruction) -> Instruction | None:
    """An output fusion's one convolution (conv.py.jinja: one group, a tl.dot dtype, so BLOCK_M and BLOCK_N
    are at least 16), if its kernel can store its result packed: the tile's values that share a byte are
    neighbours along one tile axis, starting a byte. With the output features innermost in the result, along
    N: features a multiple of the values a byte. Otherwise along M (batch and positions, walked in the
    result's order): the innermost run of dims without the features (a batch element's positions, H x W in
    NCHW) a multiple of the values a byte, so every other dim's stride is whole bytes."""
    heavy = [i for i in inst.called.instructions if i.opcode in ("dot", "convolution", "softmax", "layer-norm",
                                                                  "rms-norm", "reduce")]
    if len(heavy) != 1 or heavy[0].opcode != "convolution" or tuple(heavy[0].shape.dims) != tuple(inst.shape.dims):
        return None
    conv = heavy[0]
    if conv.attrs["feature_group_count"] != 1 or conv.operands[0].shape.dtype not in _WHOLE_ROW_DOTS:
        return None
    feature = conv_dim_labels(conv.attrs["dim_labels"])[2].index("f")
    dims = [int(d) for d in inst.shape.dims]
    per_byte = 8 // PACKED_DTYPE_BITS[inst.shape.dtype]
    if feature == len(dims) - 1:
        run = dims[feature]
    else:
        run = int(np.prod(dims[feature + 1:], dtype=np.int64))
    return conv if run % per_byte == 0 else None


def _writer(inst: Instruction) -> bool:
    return _loop_kernel(inst) or _heavy(inst) is not None


def _reader(inst: Instruction) -> bool:
    return _loop_kernel(inst) or (inst.opcode == "fusion" and inst.attrs.get("kind") in PACKED_READERS)


def _packable(inst: Instruction) -> bool:
    s = inst.shape
    if not isinstance(s, Shape) or s.dtype not in PACKED_DTYPE_BITS or not s.rank or not s.is_static:
        return False
    if not s.numel or not inst.users or not _writer(inst):
        return False
    if not s.is_row_major() and (not _loop_kernel(inst) or _bitcast_read(inst)):
        return False  # the templates pack their result's row-major order; a bitcast reads the layout
    return all(_reader(u) and u.parent is inst.parent for u in inst.users)


def _bitcast_read(value: Instruction) -> bool:
    """Whether a reader fusion bitcasts the value: a bitcast reinterprets its operand's layout, and a reader
    takes the unpacked values in the default layout, so a value of another layout keeps it then."""
    for user in value.users:
        if user.opcode != "fusion":
            continue
        indices = {i for i, o in enumerate(user.operands) if o is value}
        for p in user.called.parameters():
            if p.attrs["index"] in indices and any(u.opcode == "bitcast" for u in p.users):
                return True
    return False


class PackArenaValues(Pass):
    name = "pack-arena-values"

    def run(self, module: Module) -> bool:
        comp = module.entry
        names = {c.name for c in module.computations}
        changed, again = False, True
        while again:  # a loading kernel wrapped into a fusion may store a 4/2-bit value of its own
            again = False
            for inst in list(comp.instructions):
                if inst.parent is comp and _packable(inst):
                    self._pack(module, comp, inst, names)
                    changed = again = True
        return changed

    def _pack(self, module: Module, comp: Computation, value: Instruction, names: set[str]) -> None:
        dtype, dims = value.shape.dtype, tuple(int(d) for d in value.shape.dims)
        users = list(dict.fromkeys(value.users))
        value = _as_fusion(module, comp, value, names)
        body = value.called
        e = _Emitter(body, value.origin)
        body.root = packed_bytes(e, body.root)
        body.topological_sort()
        value.shape = body.root.shape
        for user in users:
            user = _as_fusion(module, comp, user, names)
            ubody = user.called
            for i, operand in enumerate(user.operands):
                if operand is not value:
                    continue
                param = next(p for p in ubody.parameters() if p.attrs["index"] == i)
                readers = list(dict.fromkeys(param.users))
                param.shape = value.shape
                values = unpacked(_Emitter(ubody, user.origin), param, dtype, dims)
                for r in readers:
                    for j, o in enumerate(r.operands):
                        if o is param:
                            r.set_operand(j, values)
                if ubody.root is param:
                    ubody.root = values
            ubody.topological_sort()


def _as_fusion(module: Module, comp: Computation, inst: Instruction, names: set[str]) -> Instruction:
    """inst itself when a fusion, else a loop fusion of inst alone, put in its place."""
    if inst.opcode == "fusion":
        return inst
    hint, n = f"fused_loop.{inst.name}", 1
    name = hint
    while name in names:
        name, n = f"{hint}.{n}", n + 1
    names.add(name)
    body = Computation(name)
    params = list(dict.fromkeys(inst.operands))
    mapping = {id(p): body.add(Instruction(f"param_{i}", "parameter", p.shape, (), {"index": i}))
               for i, p in enumerate(params)}
    body.root = body.add(Instruction(inst.name, inst.opcode, inst.shape, [mapping[id(o)] for o in inst.operands],
                                     inst.attrs, inst.called, inst.origin))
    module.add_computation(body)
    fused = Instruction(comp.unique_name(f"fusion.{inst.name}"), "fusion", inst.shape, params, {"kind": "loop"},
                        body, inst.origin)
    comp.insert_before(inst, fused)
    inst.replace_all_uses_with(fused)
    comp.remove(inst)
    return fused
