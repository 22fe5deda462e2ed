"""Loop kernels: elementwise and data-movement ops, and loop fusions of them.

One generator serves every op here. A kernel walks the output's elements in
physical order; for each element it asks for the value of the fused root at the
element's logical coordinates, and each op answers from its operands' values:
an elementwise op at the same coordinates, a data-movement op at remapped ones
(index arithmetic, not memory traffic), a parameter with a load at
``base + sum(coord * stride)`` through its operand's layout. A plain op is
lowered as a fusion of that one op.

The rules below produce statements (mlcc/emit/codegen/body.py); the Triton code of
each op is its entry in mlcc/emit/codegen/elementwise.py, each statement kind's in
templates/loop_ops.py.jinja.

Every value is a block (one element per lane) except constants, which are
broadcast where an op uses them; a load of one element for all lanes is
broadcast too. Triton's interpreter mistypes the result of a comparison of
scalars once it meets a block, so no op may see a scalar operand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlcc.emit.codegen.body import (Assign, BitcastConvert, Broadcast, Convert, ElementOp, Full, Index, Load, Select,
                                    Store, Table, format_body)
from mlcc.emit.codegen.builder import Body
from mlcc.emit.codegen.coords import upper
from mlcc.emit.codegen.elementwise import has_code
from mlcc.emit.codegen.indexing import (NEVER, Affine, Mask, Ranges, Size, exact_quotient, interval, linear_offset,
                                        row_major_strides, size, size_code, sound)
from mlcc.emit.codegen.kernel import (Kernel, LaunchConfig, grid_size, kernel_symbols, lowering, next_pow2, render,
                              triton_pointer)
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import DTYPE_BYTES, FLOAT_DTYPES, Computation, Instruction, Shape
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with
from mlcc.hlo.rules import RuleTable
from mlcc.hlo import symbolic
from mlcc.hlo.symbolic import Sym, as_sym

TEMPLATE = "loop.py.jinja"
LINEAR, TAIL_MASK = "lin", "mask"  # defined by the template: the lanes' positions, and which are < numel
INT32_SAFE = 2**31 - 1 - 2**16  # element counts above this index with int64 (room for one block)
GPU_BLOCK = 1024
INTERPRETER_BLOCK = 2**16
MAX_TABLE = 256  # constants with value={...} are inlined up to this many elements

# every data movement op with a kernel of its own (a bitcast is a view of its operand's buffer)
DATA_MOVEMENT_OPS = tuple(sorted(ops_with("data_movement") - ops_with("no_kernel")))
LOOP_OPS = tuple(sorted(ELEMENTWISE_OPS)) + DATA_MOVEMENT_OPS
FUSIBLE_OPS = frozenset(LOOP_OPS) | ops_with("loop_fusible") | {"parameter", "constant"}  # + a fusion's inputs

_HALF = ("f16", "bf16")
_PRED_RESULT = ops_with("predicate")
_VARIANT_ATTR = {"compare": "direction", "gelu": "approximate"}
_SCATTER_OPS = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


@dataclass(frozen=True)
class Value:
    name: str     # the Triton variable
    dtype: str    # its IR dtype
    block: bool   # one value per lane (else a scalar)


Coords = tuple[Affine, ...]
Rule = Callable[["LoopEmitter", Instruction, Coords, Mask], Value]
RULES: RuleTable[Rule] = RuleTable("loop emission rule")
rule = RULES.register


def category(dtype: str) -> str:
    if dtype in FLOAT_DTYPES:
        return "float"
    if dtype == "pred":
        return "pred"
    return "signed" if dtype.startswith("s") else "unsigned"


def int_range(dtype: str) -> tuple[int, int]:
    bits = DTYPE_BYTES[dtype] * 8
    if dtype.startswith("s"):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


class LoopEmitter:
    """Values of a computation's instructions at given coordinates, as kernel statements."""

    def __init__(self, inputs: Sequence[Shape], index_dtype: str, ranges: Ranges) -> None:
        self.inputs = list(inputs)
        self.body = Body(index_dtype, ranges)
        self.body.declare(LINEAR, index_dtype)
        self.body.declare(TAIL_MASK, "pred")
        self.ops = 0
        self.identity: Affine | None = None  # the offset of the element being computed, in the walk's layout
        self._memo: list[dict] = [{}]

    # ---- memoized evaluation
    def _lookup(self, key: tuple) -> Value | None:
        for scope in reversed(self._memo):
            if key in scope:
                return scope[key]
        return None

    def value(self, inst: Instruction, coords: Sequence[Affine], mask: Mask) -> Value:
        """inst's value at coords (logical, one per dim), reading memory only where mask holds."""
        coords = tuple(coords)
        key = (id(inst), coords, mask)
        found = self._lookup(key)
        if found is not None:
            return found
        if inst.shape.numel_expr() == 0:  # never read in a lane that stores
            v = self.full(0, inst.shape.dtype)
        else:
            fn = RULES.get(inst.opcode, _elementwise if inst.opcode in ELEMENTWISE_OPS else None)
            if fn is None:
                raise UnsupportedError(f"%{inst.name}: {inst.opcode} cannot be part of a loop kernel")
            v = fn(self, inst, coords, mask)
        self._memo[-1][key] = v
        return v

    def open_scope(self) -> None:
        self._memo.append({})

    def close_scope(self) -> None:
        self._memo.pop()

    # ---- value statements
    def full(self, value: float | bool, dtype: str) -> Value:
        return Value(self.body.add(Full, self.body.fresh("v"), False, value=value, dtype=dtype), dtype, False)

    def convert(self, v: Value, dtype: str) -> Value:
        if v.dtype == dtype:
            return v
        v = self.block(v)
        key = ("convert", v.name, dtype)
        found = self._lookup(key)
        if found is None:
            lo, hi = int_range(dtype) if category(dtype) in ("signed", "unsigned") else (0, 0)
            out = self.body.add(Convert, self.body.fresh("v"), v.block, x=v.name, src=v.dtype, dst=dtype,
                                lo=lo, hi=hi)
            found = self._memo[-1][key] = Value(out, dtype, v.block)
        return found

    def block(self, v: Value) -> Value:
        """v, broadcast when it is a constant (see the module docstring)."""
        if v.block:
            return v
        key = ("block", v.name)
        found = self._lookup(key)
        if found is None:
            out = self.body.add(Broadcast, self.body.fresh("v"), True, x=v.name)
            found = self._memo[-1][key] = Value(out, v.dtype, True)
        return found

    def assign(self, v: Value, out: str | None = None) -> Value:
        """A new block variable holding v (or ``out`` reassigned: a loop's accumulator)."""
        kind = Assign if v.block else Broadcast
        return Value(self.body.add(kind, out or self.body.fresh("acc"), True, x=v.name), v.dtype, True)

    def select(self, cond: Mask, a: Value, b: Value, out: str | None = None) -> Value:
        a, b = self.block(a), self.block(b)
        name = self.body.add(Select, out or self.body.fresh("v"), True, cond=cond, a=a.name, b=b.name)
        return Value(name, a.dtype, True)

    def apply(self, opcode: str, args: Sequence[Value], result_dtype: str, variant: str | None = None) -> Value:
        """An elementwise op; f16/bf16 operands compute in f32 and round to result_dtype."""
        dtype = args[-1].dtype
        compute = "f32" if dtype in _HALF and opcode != "select" else dtype
        args = [self.block(self.convert(a, compute) if a.dtype == dtype else a) for a in args]
        out_dtype = "pred" if opcode in _PRED_RESULT else compute
        width = DTYPE_BYTES[compute] * 8 if compute != "pred" else 8
        if not has_code(opcode, variant, category(compute)):
            raise UnsupportedError(f"no loop kernel code for {opcode}{'/' + variant if variant else ''} on {compute}")
        out = self.body.add(ElementOp, self.body.fresh("v"), True, op=opcode, variant=variant,
                            category=category(compute), dtype=compute, args=tuple(a.name for a in args),
                            bits=width, utype=f"u{width}", stype=f"s{width}", result=out_dtype)
        self.ops += 1
        return self.convert(Value(out, out_dtype, True), result_dtype)

    def load(self, ptr: str, offset: Affine, mask: Mask, shape: Shape) -> Value:
        offset_block = self.body.is_block(offset)
        if offset.is_const and shape.is_static and not 0 <= offset.const < shape.numel():
            raise AssertionError(f"constant offset {offset.const} outside {shape}")
        if offset.is_const or (mask == TAIL_MASK and not offset_block):
            mask = None  # the same element for every lane, in bounds (constant, clamped or a loop row)
        elif mask == TAIL_MASK and offset == self.identity:
            offset = Affine.var(LINEAR)  # laid out like the walk: contiguous lanes, vectorizable
        out = self.body.add(Load, self.body.fresh("v"), True, ptr=ptr, offset=offset, mask=mask,
                            offset_block=offset_block, index=self.body.index_dtype, dtype=shape.dtype)
        return Value(out, shape.dtype, True)

    def index(self, v: Value, size: Size, wrap: bool, clamp: tuple[Size, Size] | None) -> Affine:
        """A data-dependent coordinate along a dim of ``size``."""
        lo, hi = clamp if clamp is not None else (None, None)
        return self.body.index_value(v.name, v.dtype, v.block, size if wrap else None, lo, hi)


def _dims(shape: Shape) -> tuple[Size, ...]:
    """The dims: ints, and symbolic ones as Sym (a size the kernel receives at run time)."""
    return symbolic.sizes(shape.dims)


def _strides(shape: Shape) -> tuple[Size, ...]:
    """Element strides of each logical dim under the layout, symbolic where a minor dim is."""
    return symbolic.strides(shape.dims, shape.layout)


def _surely(diff: Size, ranges: Ranges) -> bool:
    """diff >= 0 for every value of its symbols."""
    return interval(size(diff), ranges)[0] >= 0


# ---------------------------------------------------------------- elementwise

def _elementwise(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    args = [em.value(op, coords if op.shape.rank else (), mask) for op in inst.operands]
    dtype = inst.shape.dtype
    if inst.opcode == "convert":
        return em.convert(args[0], dtype)
    if inst.opcode == "bitcast-convert":
        x = args[0]
        out = em.body.add(BitcastConvert, em.body.fresh("v"), x.block, x=x.name, src=x.dtype, dst=dtype)
        return Value(out, dtype, x.block)
    attr = _VARIANT_ATTR.get(inst.opcode)
    return em.apply(inst.opcode, args, dtype, inst.attrs[attr] if attr else None)


# ---------------------------------------------------------------- leaves

@rule("parameter")
def _parameter(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    i = inst.attrs["index"]
    shape = em.inputs[i]
    strides = _strides(shape)
    return em.load(f"in{i}", linear_offset(coords, strides), mask, shape)


@rule("constant")
def _constant(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    dtype = inst.shape.dtype
    if "splat" in inst.attrs:
        return em.full(inst.attrs["splat"], dtype)
    if "value" not in inst.attrs:
        raise UnsupportedError(f"%{inst.name}: a constant with ref= must be a fusion operand, not fused")
    values = list(inst.attrs["value"])
    flat = linear_offset(coords, row_major_strides(_dims(inst.shape)))
    if flat.is_const:
        return em.full(values[flat.const], dtype)
    if len(values) > MAX_TABLE:
        raise UnsupportedError(f"%{inst.name}: inline constant of {len(values)} elements (at most {MAX_TABLE})")
    x = em.body.materialize(flat).single_var
    block = em.body.is_block(x)
    out = em.body.add(Table, em.body.fresh("v"), block, x=x, entries=tuple(values), dtype=dtype)
    return Value(out, dtype, block)


@rule("iota")
def _iota(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    c = coords[inst.attrs["iota_dimension"]] if coords else Affine()
    if c.is_const and isinstance(c.const, Sym):
        x = em.body.add(Index, em.body.fresh("i"), False, expr=c)
        return em.convert(Value(x, em.body.index_dtype, False), inst.shape.dtype)
    if c.is_const:
        return em.full(c.const, inst.shape.dtype)
    x = em.body.materialize(c).single_var
    return em.convert(Value(x, em.body.index_dtype, em.body.is_block(x)), inst.shape.dtype)


@rule("size")
def _size(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    """A size expression's value: computed from the kernel's sym_ arguments, the same in every lane."""
    value = size(as_sym(inst.attrs["expr"]))
    if isinstance(value, int):
        return em.full(value, inst.shape.dtype)
    x = em.body.add(Index, em.body.fresh("i"), False, expr=Affine(const=value))
    return em.convert(Value(x, em.body.index_dtype, False), inst.shape.dtype)


# ---------------------------------------------------------------- pure index maps

@rule("copy")
def _copy(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    return em.value(inst.operands[0], coords, mask)


@rule("broadcast")
def _broadcast(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    x = inst.operands[0]
    new = [coords[d] if n != 1 else Affine() for d, n in zip(inst.attrs["dimensions"], _dims(x.shape))]
    return em.value(x, new, mask)


@rule("transpose")
def _transpose(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    perm = inst.attrs["dimensions"]
    new = [Affine()] * len(perm)
    for i, p in enumerate(perm):
        new[p] = coords[i]
    return em.value(inst.operands[0], new, mask)


@rule("slice")
def _slice(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    a = inst.attrs
    starts = [s if isinstance(s, int) else size(as_sym(s)) for s in a["start_indices"]]  # symbolic: text
    new = [c * st + s for c, s, st in zip(coords, starts, a["strides"])]
    return em.value(inst.operands[0], new, mask)


@rule("reverse")
def _reverse(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    dims = _dims(inst.shape)
    flip = set(inst.attrs["dimensions"])
    new = [(dims[d] - 1) - c if d in flip else c for d, c in enumerate(coords)]
    return em.value(inst.operands[0], new, mask)


@rule("reshape")
def _reshape(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    """Row-major reshape, group by group: dims whose products match map to each other."""
    x = inst.operands[0]
    rd, od = _dims(inst.shape), _dims(x.shape)
    r_idx = [i for i, d in enumerate(rd) if d != 1]
    o_idx = [j for j, d in enumerate(od) if d != 1]
    new = [Affine()] * len(od)
    i = j = 0
    while i < len(r_idx) and j < len(o_idx):
        gi, gj = [r_idx[i]], [o_idx[j]]
        pr, po = rd[r_idx[i]], od[o_idx[j]]
        i, j = i + 1, j + 1
        while pr != po:
            if _smaller(pr, po, inst):
                gi.append(r_idx[i])
                pr *= rd[r_idx[i]]
                i += 1
            else:
                gj.append(o_idx[j])
                po *= od[o_idx[j]]
                j += 1
        group_strides = row_major_strides([rd[k] for k in gi])
        flat = linear_offset([coords[k] for k in gi], group_strides)
        for k, c in zip(gj, em.body.unravel(flat, [od[k] for k in gj])):
            new[k] = c
    return em.value(x, new, mask)


def _smaller(a: Size, b: Size, inst: Instruction) -> bool:
    """Whether the group product a is the one to grow to meet b (a divides b, for symbolic sizes)."""
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    if exact_quotient(b, a) is not None:
        return True
    if exact_quotient(a, b) is not None:
        return False
    raise UnsupportedError(f"%{inst.name}: a reshape whose dim groups {a} and {b} do not divide each other")


@rule("bitcast")
def _bitcast(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    """The operand's bytes read under the result's layout: through the physical offset."""
    x = inst.operands[0]
    physical = linear_offset(coords, _strides(inst.shape))
    order = list(reversed(x.shape.layout))  # major to minor
    new = [Affine()] * x.shape.rank
    xdims = _dims(x.shape)
    for d, c in zip(order, em.body.unravel(physical, [xdims[d] for d in order])):
        new[d] = c
    return em.value(x, new, mask)


# ---------------------------------------------------------------- masked index maps

@rule("pad")
def _pad(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    x, padding = inst.operands
    a = inst.attrs
    out_dims, in_dims = _dims(inst.shape), _dims(x.shape)
    new, clauses = [], []
    for c, m, n, lo, step in zip(coords, out_dims, in_dims, a["edge_padding_low"],
                                 [i + 1 for i in a["interior_padding"]]):
        t = c - lo  # position in the interior-padded operand; in [-lo, m - lo)
        if lo > 0:
            clauses.append((t, ">=", 0))
        if step == 1:
            new.append(t)
            if not _surely(n - (m - lo), em.body.ranges):
                clauses.append((t, "<", n))
            continue
        q, r = em.body.divmod(t, step)
        new.append(q)
        clauses.append((r, "==", 0))
        if not isinstance(m, int) or not isinstance(n, int) or (m - 1 - lo) // step >= n:
            clauses.append((q, "<", n))
    pad_value = em.value(padding, (), None)
    inside = em.body.mask(mask, clauses)
    if inside is NEVER:
        return pad_value
    inner = em.value(x, new, inside)
    if inside == mask:
        return inner
    return em.select(inside, inner, pad_value)


@rule("concatenate")
def _concatenate(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    k = inst.attrs["dimension"]
    total = _dims(inst.shape)[k]
    c = coords[k]
    result, start = None, 0
    for op in inst.operands:
        extent = _dims(op.shape)[k]
        clauses = []
        if start != 0:
            clauses.append((c, ">=", start))
        if not _surely(start + extent - total, em.body.ranges):
            clauses.append((c, "<", start + extent))
        piece_mask = em.body.mask(mask, clauses) if extent != 0 else NEVER
        if piece_mask is not NEVER:
            piece = em.value(op, coords[:k] + (c - start,) + coords[k + 1:], piece_mask)
            result = piece if result is None or piece_mask == mask else em.select(piece_mask, piece, result)
        start = size(start + extent)
    if result is None:
        raise AssertionError(f"%{inst.name}: no operand covers the coordinate")
    return result


@rule("dynamic-slice")
def _dynamic_slice(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    x, *starts = inst.operands
    new = []
    for c, n, extent, s in zip(coords, _dims(x.shape), inst.attrs["slice_sizes"], starts):
        if _surely(extent - n, em.body.ranges):
            new.append(c)  # the start clamps to 0
            continue
        new.append(c + em.index(em.value(s, (), None), n, wrap=False, clamp=(0, size(n - extent))))
    return em.value(x, new, mask)


@rule("dynamic-update-slice")
def _dynamic_update_slice(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    x, update, *starts = inst.operands
    clauses, new = [], []
    for c, n, extent, s in zip(coords, _dims(x.shape), _dims(update.shape), starts):
        if _surely(extent - n, em.body.ranges):
            new.append(c)
            continue
        begin = em.index(em.value(s, (), None), n, wrap=False, clamp=(0, size(n - extent)))
        new.append(c - begin)
        clauses += [(c, ">=", begin), (c, "<", begin + extent)]
    old = em.value(x, coords, mask)
    inside = em.body.mask(mask, clauses)
    if inside is NEVER:
        return old
    new_value = em.value(update, new, inside)
    if not clauses:
        return new_value
    return em.select(inside, new_value, old)


# ---------------------------------------------------------------- data-dependent index maps

@rule("gather")
def _gather(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    data, indices = inst.operands
    axis, q = inst.attrs["axis"], indices.shape.rank
    n = _dims(data.shape)[axis]
    j = Affine() if n == 1 else em.index(em.value(indices, coords[axis:axis + q], mask), n, wrap=True,
                                         clamp=(0, size(n - 1)))
    return em.value(data, coords[:axis] + (j,) + coords[axis + q:], mask)


@rule("gather-elements")
def _gather_elements(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    data, indices = inst.operands
    axis = inst.attrs["axis"]
    n = _dims(data.shape)[axis]
    j = Affine() if n == 1 else em.index(em.value(indices, coords, mask), n, wrap=True, clamp=(0, size(n - 1)))
    return em.value(data, coords[:axis] + (j,) + coords[axis + 1:], mask)


@rule("gather-nd")
def _gather_nd(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    data, indices = inst.operands
    b = inst.attrs["batch_dims"]
    q, depth = indices.shape.rank, int(indices.shape.dims[-1])
    lead = coords[:q - 1]
    new = list(coords[:b])
    data_dims = _dims(data.shape)
    for j in range(depth):
        n = data_dims[b + j]
        iv = em.value(indices, lead + (Affine(const=j),), mask)
        new.append(Affine() if n == 1 else em.index(iv, n, wrap=True, clamp=(0, size(n - 1))))
    return em.value(data, tuple(new) + coords[q - 1:], mask)


@rule("scatter-nd")
def _scatter_nd(em: LoopEmitter, inst: Instruction, coords: Coords, mask: Mask) -> Value:
    """Every update row in order, applied where its index matches the element: the last write
    wins and reductions combine in the reference order, deterministically, without atomics."""
    data, indices, updates = inst.operands
    reduction = inst.attrs["reduction"]
    if reduction != "none" and reduction not in _SCATTER_OPS:
        raise UnsupportedError(f"%{inst.name}: scatter-nd reduction '{reduction}'")
    dtype = inst.shape.dtype
    # a half-precision add or multiply rounds each combination to the element type (XLA applies the body in order)
    compute = "f32" if dtype in _HALF and reduction not in ("add", "mul") else dtype
    depth = int(indices.shape.dims[-1])
    rows = _dims(indices.shape)[:-1]
    acc = em.assign(em.convert(em.value(data, coords, mask), compute))
    count: Size = 1
    for r in rows:
        count = size(count * r)
    row = em.body.loop(count)
    em.open_scope()
    row_coords = tuple(em.body.unravel(row, rows))
    clauses = []
    for j in range(depth):
        iv = em.value(indices, row_coords + (Affine(const=j),), None)
        clauses.append((coords[j], "==", em.index(iv, _dims(data.shape)[j], wrap=True, clamp=None)))
    match = em.body.mask(None, clauses)
    upd = em.convert(em.value(updates, row_coords + coords[depth:], mask), compute)
    if reduction != "none":
        upd = em.convert(em.apply(_SCATTER_OPS[reduction], [acc, upd], compute), compute)
    if match is None:
        em.assign(upd, out=acc.name)
    elif match is not NEVER:
        em.select(match, upd, acc, out=acc.name)
    em.close_scope()
    em.body.end_loop()
    return em.convert(acc, dtype)


# ---------------------------------------------------------------- kernels

def _check_fusible(comp: Computation) -> None:
    for inst in comp.instructions:
        if inst is comp.root and inst.opcode == "tuple":
            continue
        if inst.opcode not in FUSIBLE_OPS:
            raise UnsupportedError(f"%{inst.name}: {inst.opcode} cannot be part of a loop kernel")


def _index_dtype(comp: Computation, inputs: Sequence[Shape], outputs: Sequence[Shape], ranges: Ranges) -> str:
    shapes = list(inputs) + list(outputs) + [i.shape for i in comp.instructions if not i.shape.is_tuple]
    return "s64" if max(upper(s.numel_expr(), ranges) for s in shapes) > INT32_SAFE else "s32"


def _outputs(inst: Instruction) -> list[Shape]:
    return list(inst.shape.elements) if inst.shape.is_tuple else [inst.shape]


def loop_body(comp: Computation, inst: Instruction, ranges: Ranges) -> LoopEmitter:
    """The emitter holding the body of inst's loop kernel (a loop fusion calling comp, or one op wrapped in
    comp): its statements in ``em.body``, a store of each output at the end."""
    _check_fusible(comp)
    inputs = [op.shape for op in inst.operands]
    outputs = _outputs(inst)
    roots = list(comp.root.operands) if comp.root.opcode == "tuple" else [comp.root]
    first = outputs[0]
    if any(s.dims != first.dims for s in outputs):
        raise UnsupportedError(f"%{inst.name}: loop fusion outputs differ in dims: {[str(s) for s in outputs]}")
    n = size(first.numel_expr())
    em = LoopEmitter(inputs, _index_dtype(comp, inputs, outputs, ranges), ranges)
    if n != 0:
        em.body.bound(LINEAR, 0, upper(n, sound(ranges)) - 1)  # in the lanes that store; the others load and store nothing
        order = list(reversed(first.layout))  # major to minor: the physical order of the walk
        coords = [Affine()] * first.rank
        dims = _dims(first)
        for d, c in zip(order, em.body.unravel(Affine.var(LINEAR), [dims[d] for d in order])):
            coords[d] = c
        em.identity = linear_offset(coords, _strides(first))
        for k, (root, shape) in enumerate(zip(roots, outputs)):
            v = em.value(root, coords, TAIL_MASK)
            offset = Affine.var(LINEAR) if shape.layout == first.layout else linear_offset(coords, _strides(shape))
            em.body.add(Store, None, False, ptr=f"out{k}", offset=offset, x=v.name, mask=TAIL_MASK)
    return em


def loop_kernel(comp: Computation, inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    """The kernel computing inst (a loop fusion calling comp, or one op wrapped in comp), its tiles chosen for
    the largest sizes the symbols' ranges allow."""
    em = loop_body(comp, inst, ranges)
    inputs, outputs = [op.shape for op in inst.operands], _outputs(inst)
    n = size(outputs[0].numel_expr())
    symbols = kernel_symbols(*inputs, *outputs, *comp.instructions)
    params = [f"in{i}" for i in range(len(inputs))] + [f"out{k}" for k in range(len(outputs))]
    params += [f"sym_{s}" for s in symbols]
    body = em.body.live()
    source = render(TEMPLATE, kernel_name=kernel_name, params=params, numel=size_code(n), body=body,
                    int64=em.body.index_dtype == "s64", linear=LINEAR, tail_mask=TAIL_MASK)
    hint = upper(n, ranges)  # tiles are chosen for the largest size in range
    gpu_block = min(GPU_BLOCK, max(128, next_pow2(hint)))
    interpreter_block = min(INTERPRETER_BLOCK, next_pow2(max(hint, 1)))
    return Kernel(
        name=kernel_name,
        template=TEMPLATE,
        source=source,
        arg_types=[triton_pointer(s) for s in inputs + outputs] + ["i32"] * len(symbols),
        gpu=LaunchConfig({"BLOCK": gpu_block}, (grid_size(n, gpu_block), 1, 1), num_warps=4),
        interpreter=LaunchConfig({"BLOCK": interpreter_block}, (grid_size(n, interpreter_block), 1, 1)),
        flops=hint * em.ops,
        extra={"numel": n if isinstance(n, int) else str(n), "index_dtype": em.body.index_dtype},
        scalars=symbols,
        body_ir=format_body(body, em.body.inputs),
    )


def single_op_computation(inst: Instruction) -> Computation:
    """A computation applying inst's op to parameters shaped like its operands."""
    comp = Computation(f"{inst.opcode}.loop")
    params = [comp.add(Instruction(f"p{i}", "parameter", op.shape, (), {"index": i}))
              for i, op in enumerate(inst.operands)]
    comp.root = comp.add(Instruction(inst.name, inst.opcode, inst.shape, params, inst.attrs, inst.called))
    return comp


@lowering(*LOOP_OPS)
def lower_op(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    return loop_kernel(single_op_computation(inst), inst, kernel_name, ranges)


@lowering("fusion:loop")
def lower_loop_fusion(inst: Instruction, kernel_name: str, ranges: Ranges) -> Kernel:
    if inst.called is None:
        raise UnsupportedError(f"%{inst.name}: loop fusion without a called computation")
    return loop_kernel(inst.called, inst, kernel_name, ranges)
