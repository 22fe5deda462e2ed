"""Split-K for decode-sized dots: those that compute their weight in the K loop (packed 4-bit weights), and
dense ones over a long K (a CNN's classifier at batch 1).

At decode (a handful of rows: M <= MAX_ROWS) a [M, K] x [K, N] product has one row of output tiles, so
N / BLOCK_N programs stream the whole weight while most of the GPU idles. Splitting K into S slices gives
S times the programs: the dot becomes a batched dot over the slices, each writing its partial sums, and a
reduce over the slices adds them in a fixed order (the reduction kernel's), a second pass instead of
atomics, so the result is the same bytes on every run:

    y[m, n] = dot(x[m, K], w[n, K])
 -> p[s, m, n] = dot(x[m, s, K/S], w[n, s, K/S]), batch dims {s}     (S programs per output tile)
    y[m, n] = reduce(p, dimensions={0}, add)                          (epilogue ops fuse into the reduce)

x and w are split by reshapes (views: no copy), so the weight's chain from its constants still becomes
the partial dot's weight prologue (mlcc/hlo/passes/fusion.py) and the unpacked weight never reaches
memory. Partial sums are kept in f32 whatever the dot's type. How many slices, if any, is the tile
heuristics' decision (``choose(m, n, k, dtype)``, mlcc/emit/matmul_tiles.py: split_k_slices). A dense dot, whose
weight is read as it is stored (a constant or an argument, through views), is split the same way where
``dense(m, n, k, dtype)`` says so (matmul_tiles.dense_split_k_slices: float dots with K >= 1024).
"""

from __future__ import annotations

from typing import Callable

from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.passes.fusion import weight_prologue_cone
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.shape_inference import infer_shape

MAX_ROWS = 16  # decode-sized: at most this many lhs rows

Choose = Callable[[int, int, int, str], int]


def _rows_and_k(dot: Instruction) -> tuple[int, int, int] | None:
    """(M, N, K) of a dot without batch dims and with one contracting dim and static dims, else None."""
    a = dot.attrs
    if a["lhs_batch_dims"] or a["rhs_batch_dims"] or len(a["lhs_contracting_dims"]) != 1:
        return None
    x, w = dot.operands
    if not (x.shape.is_static and w.shape.is_static):
        return None
    (c,) = a["lhs_contracting_dims"]
    m = 1
    for i, d in enumerate(x.shape.dims):
        if i != c:
            m *= int(d)
    n = 1
    for i, d in enumerate(w.shape.dims):
        if i != a["rhs_contracting_dims"][0]:
            n *= int(d)
    return m, n, int(x.shape.dims[c])


def _stored(w: Instruction) -> bool:
    """The weight is read as it is stored: a constant or an argument, through views."""
    while w.opcode in ("bitcast", "reshape", "transpose"):
        w = w.operands[0]
    return w.opcode in ("constant", "parameter")


def _split(shape: Shape, dim: int, slices: int) -> tuple[int, ...]:
    dims = [int(d) for d in shape.dims]
    return tuple(dims[:dim] + [slices, dims[dim] // slices] + dims[dim + 1:])


class SplitK(Pass):
    name = "split-k"

    def __init__(self, choose: Choose, dense: Choose | None = None) -> None:
        self.choose = choose
        self.dense = dense  # the slices of a dense dot (None: dense dots are never split)

    def run(self, module: Module) -> bool:
        comp = module.entry
        changed = False
        for dot in [i for i in comp.instructions if i.opcode == "dot"]:
            sizes = _rows_and_k(dot)
            if sizes is None or sizes[0] > MAX_ROWS:
                continue
            _, why = weight_prologue_cone(dot, dot.operands[1], module.symbols)
            if why is None:
                slices = self.choose(*sizes, dot.shape.dtype)
            elif self.dense is not None and _stored(dot.operands[1]) and dot.operands[0].shape.dtype == dot.shape.dtype:
                slices = self.dense(*sizes, dot.shape.dtype)
            else:
                continue
            if slices > 1 and sizes[2] % slices == 0:
                self._rewrite(comp, dot, slices)
                changed = True
        return changed

    @staticmethod
    def _rewrite(comp, dot: Instruction, slices: int) -> None:
        x, w = dot.operands
        (c,) = dot.attrs["lhs_contracting_dims"]
        (rc,) = dot.attrs["rhs_contracting_dims"]

        def add(name: str, opcode: str, operands: list[Instruction], shape: Shape | None = None,
                **attrs) -> Instruction:
            result = infer_shape(opcode, [o.shape for o in operands], attrs, shape)
            inst = Instruction(comp.unique_name(f"{dot.name}.{name}"), opcode, result, operands, attrs,
                               origin=dot.origin)
            comp.insert_before(dot, inst)
            return inst

        xs = add("lhs_slices", "reshape", [x], Shape(x.shape.dtype, _split(x.shape, c, slices)))
        ws = add("rhs_slices", "reshape", [w], Shape(w.shape.dtype, _split(w.shape, rc, slices)))
        partial_dims = (slices,) + tuple(dot.shape.dims)
        partial = add("partials", "dot", [xs, ws], Shape("f32", partial_dims), lhs_batch_dims=(c,),
                      lhs_contracting_dims=(c + 1,), rhs_batch_dims=(rc,), rhs_contracting_dims=(rc + 1,))
        total = add("sum", "reduce", [partial], Shape("f32", tuple(dot.shape.dims)), dimensions=(0,), kind="add")
        if dot.shape.dtype != "f32":
            total = add("result", "convert", [total], Shape(dot.shape.dtype, tuple(dot.shape.dims)))
        dot.replace_all_uses_with(total)
        comp.remove(dot)
