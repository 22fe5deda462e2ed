"""Norm statistics from the producer: the kernel that computes a norm's input also stores its rows' statistics.

A layer-norm or rms-norm applied in a GEMM's A loads (mlcc/hlo/passes/a_prologue.py) whose rows are longer
than a K tile needs each row's statistics before its K loop. Without help the GEMM computes them itself, in a
loop over its rows before the K loop (templates/_norm_prologue.jinja's row_stats): every program reads its
rows twice. In a pre-norm transformer the norm's input is the residual stream, which a GEMM's epilogue has
just computed (the attention output projection or the MLP down projection, plus the residual): that kernel
holds each output tile in registers, so it also stores the tile's part of its rows' statistics, a second
small result, and the normalizing GEMM reads those instead of its rows:

    %fused_output.add {
      ...
      %add = f32[1,16,512]{2,1,0} add(%dot, %param_3)
      %row-stats = f32[1,16,8,2]{3,2,1,0} row-stats(%add), dimensions={2}, part=64, moments=mean-m2
      ROOT %tuple = (f32[1,16,512]{2,1,0}, f32[1,16,8,2]{3,2,1,0}) tuple(%add, %row-stats)
    }
    %fused_output.d {
      ...
      %n = f32[1,16,512]{2,1,0} layer-norm(%param_0, %param_1, %param_2, %param_4), dimensions={2}, ...
    }

A GEMM's output tile spans BLOCK_N columns, not the row, so the statistics are partials, one per `part`
(PART = 64) columns: each part's sum of squares for rms-norm, each part's mean and M2 for layer-norm (the
consumer combines those by Chan's formula, exact where a sum of squares would cancel). Every partial has
one writer (the program whose tile holds its columns: BLOCK_N is a multiple of PART), so no atomics and the
same result on every run. The consumer reads [rows, parts] (or [rows, parts, 2]) f32 values per row
instead of a second pass over the row.

Taken when the norm's input is an output fusion's only result, at its one dot's output coordinates with the
rows its dot's columns (no batch dims, one rhs free dim last), row-major, rows a multiple of PART, and the
consumers read at most MAX_PARAMETERS buffers with the statistics. Or when it is an input fusion's only
result, one reduce and an elementwise epilogue: the sum of a split-K GEMM's K slices plus the residual
(mlcc/hlo/passes/split_k.py; LLaMA's MLP down projection at hidden 512), whose kernel numbers its outputs by
rows (a static row-major operand reduced over leading or trailing dims, a row-major result), so a program's
BLOCK_O outputs, a multiple of PART, are whole partials. Refusals are explained (`--explain-fusion`: `row
statistics not computed by the producer: ...`); the GEMM then computes them itself.
"""

from __future__ import annotations

from mlcc.hlo.ir import Computation, Instruction, Module, Shape, TupleShape
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.passes.a_prologue import MAX_NORM_ROW
from mlcc.hlo.passes.fusion import MAX_PARAMETERS
from mlcc.hlo.passes.pass_manager import Pass

PART = 64  # columns a partial covers: a GEMM's BLOCK_N is a multiple of it (matmul_tiles' min_block_n)
ROW_NORMS = ops_with("row_norm")
REDUCTIONS = ops_with("input_fusible")  # an input fusion's heavy op
FLOATS = ("f32", "f16", "bf16")


def plain_arity(norm: Instruction) -> int:
    """A norm's operands without precomputed statistics: x and scale (and bias, for layer-norm)."""
    return 3 if norm.opcode == "layer-norm" else 2


def moments_of(norm: Instruction) -> str:
    return "mean-m2" if norm.opcode == "layer-norm" else "squares"


class NormStatistics(Pass):
    name = "norm-statistics"

    def __init__(self, kinds: frozenset[str] = frozenset({"output"})) -> None:
        self.kinds = kinds  # the fusion kinds the backend has kernels for

    def run(self, module: Module) -> bool:
        if "output" not in self.kinds:
            return False
        comp = module.entry
        explanations: list[str] = []
        readers: dict[int, tuple[Instruction, list[tuple[Instruction, Instruction]]]] = {}
        for inst in comp.instructions:
            norm = long_row_a_norm(inst)
            if norm is None:
                continue
            x = norm.operands[0]
            if x.opcode != "parameter":
                explanations.append(f"%{norm.name} -> %{inst.name}: row statistics not computed by the producer: "
                                    "the norm's input is computed in the GEMM's own loads")
                continue
            producer = inst.operands[x.attrs["index"]]
            why = producer_refusal(producer, norm)
            if why is None and len(inst.operands) + 1 > MAX_PARAMETERS:
                why = f"the GEMM would read more than {MAX_PARAMETERS} buffers"
            if why is None and id(producer) in readers and \
                    moments_of(readers[id(producer)][1][0][1]) != moments_of(norm):
                why = "another GEMM reads the other kind of statistics of the same rows"
            if why is not None:
                explanations.append(f"%{producer.name} -> %{inst.name}: row statistics not computed by the "
                                    f"producer: {why}")
                continue
            readers.setdefault(id(producer), (producer, []))[1].append((inst, norm))
        for producer, consumers in readers.values():
            stats = _add_statistics(comp, producer, moments_of(consumers[0][1]))
            for consumer, norm in consumers:
                _read_statistics(comp, consumer, norm, stats)
        module.analyses.fusion_explanations = list(module.analyses.fusion_explanations) + explanations
        return bool(readers)


def long_row_a_norm(fusion: Instruction) -> Instruction | None:
    """The row norm an output fusion's dot applies to its A tiles, when its rows are longer than a K tile and
    it computes their statistics itself (no statistics operand yet)."""
    if fusion.opcode != "fusion" or fusion.attrs.get("kind") != "output" or fusion.called is None:
        return None
    dots = [i for i in fusion.called.instructions if i.opcode == "dot"]
    if not dots:
        return None
    x = dots[0].operands[0]
    while x.opcode == "bitcast":
        x = x.operands[0]
    if x.opcode not in ROW_NORMS or len(x.operands) != plain_arity(x) or not isinstance(x.shape.dims[-1], int):
        return None
    return x if int(x.shape.dims[-1]) > MAX_NORM_ROW else None


def producer_refusal(producer: Instruction, norm: Instruction) -> str | None:
    """Why the kernel computing a norm's input cannot store its rows' statistics too, if so."""
    if producer.opcode == "fusion" and producer.attrs.get("kind") == "input":
        return _reduction_refusal(producer, norm)
    if producer.opcode != "fusion" or producer.attrs.get("kind") != "output":
        what = "is a model input" if producer.opcode in ("parameter", "constant") else (
            f"comes from a fusion of kind {producer.attrs.get('kind')}" if producer.opcode == "fusion"
            else f"comes from a kernel of its own ({producer.opcode})")
        return f"the norm's input {what}, not a GEMM's epilogue"
    if producer.shape.is_tuple:
        return "the GEMM already returns several results"
    body = producer.called
    heavy = [i for i in body.instructions if i.opcode in ROW_NORMS | {"dot", "convolution", "reduce"}]
    dots = [i for i in heavy if i.opcode == "dot"]
    a_norms = [i for i in heavy if i.opcode in ROW_NORMS and _feeds_lhs(i, dots)]
    if not dots or len(heavy) != len(dots) + len(a_norms) or len(dots) > 2:
        return "its kernel is not one GEMM (or a gated pair) with an elementwise epilogue"
    dot, root = dots[0], body.root
    rhs = dot.operands[1].shape
    if dot.attrs["lhs_batch_dims"] or rhs.rank - len(dot.attrs["rhs_contracting_dims"]) != 1:
        return "the GEMM has batch dims or more than one output column dim"
    if tuple(root.shape.dims) != tuple(dot.shape.dims) or not root.shape.is_row_major():
        return "the GEMM's result is not its output tile, row-major"
    if root.shape.dtype not in FLOATS:
        return f"a {root.shape.dtype} result"
    row = int(norm.shape.dims[-1])
    if root.shape.dims[-1] != row or row % PART:
        return f"its rows of {row} elements are not a multiple of {PART} (the partials' width)"
    return None


def _reduction_refusal(producer: Instruction, norm: Instruction) -> str | None:
    """Why an input fusion computing a norm's input cannot store its rows' statistics too, if so: it must be
    a reduce (a split-K GEMM's sum of its K slices' partials) with an elementwise epilogue (the residual add)
    whose kernel numbers its outputs row-major (a static row-major operand reduced over its leading or its
    trailing dims, so the kept ones are one run of strides; a row-major result), so a program's BLOCK_O
    outputs (a multiple of PART: templates/reduce.py.jinja) are whole partials."""
    if producer.shape.is_tuple:
        return "the reduction already returns several results"
    body = producer.called
    heavy = [i for i in body.instructions if i.opcode in REDUCTIONS]
    if len(heavy) != 1 or heavy[0].opcode != "reduce":
        return "its kernel is not one reduce with an elementwise epilogue"
    reduce, root = heavy[0], body.root
    if tuple(root.shape.dims) != tuple(reduce.shape.dims) or root.shape.dtype not in FLOATS:
        return "the reduction's result is not a float value at the reduce's output coordinates"
    x = reduce.operands[0].shape
    reduced = sorted(reduce.attrs["dimensions"])
    ends = (list(range(len(reduced))), list(range(x.rank - len(reduced), x.rank)))
    if not (root.shape.is_row_major() and x.is_row_major() and x.is_static and reduced in ends):
        return "the reduction's operand or result is not row-major (its outputs are not numbered by rows)"
    row = int(norm.shape.dims[-1])
    if root.shape.rank == 0 or root.shape.dims[-1] != row or row % PART:
        return f"its rows of {row} elements are not a multiple of {PART} (the partials' width)"
    return None


def _feeds_lhs(norm: Instruction, dots: list[Instruction]) -> bool:
    for d in dots:
        x = d.operands[0]
        while x.opcode == "bitcast":
            x = x.operands[0]
        if x is norm:
            return True
    return False


def _add_statistics(comp: Computation, producer: Instruction, moments: str) -> Instruction:
    """producer returning (its result, the row-stats of it); its readers read the first by get-tuple-element.
    The statistics' get-tuple-element."""
    body = producer.called
    root = body.root
    row = int(root.shape.dims[-1])
    dims = tuple(root.shape.dims[:-1]) + (row // PART,) + ((2,) if moments == "mean-m2" else ())
    stats = body.add(Instruction(body.unique_name("row-stats"), "row-stats", Shape("f32", dims),
                                 [root], {"dimensions": (root.shape.rank - 1,), "part": PART, "moments": moments},
                                 origin=root.origin))
    shape = TupleShape((root.shape, stats.shape))
    body.root = body.add(Instruction(body.unique_name("tuple"), "tuple", shape, [root, stats]))
    merged = comp.insert_before(producer, Instruction(producer.name, "fusion", shape, list(producer.operands),
                                                      dict(producer.attrs), body, producer.origin))
    result = comp.insert_before(producer, Instruction(comp.unique_name(root.name), "get-tuple-element", root.shape,
                                                      [merged], {"index": 0}, origin=producer.origin))
    out = comp.insert_before(producer, Instruction(comp.unique_name(stats.name), "get-tuple-element", stats.shape,
                                                   [merged], {"index": 1}, origin=producer.origin))
    producer.replace_all_uses_with(result)
    comp.remove(producer)
    return out


def _read_statistics(comp: Computation, consumer: Instruction, norm: Instruction, stats: Instruction) -> None:
    """consumer's norm reading the statistics as one more parameter (the last)."""
    body = consumer.called
    index = len(consumer.operands)
    param = body.add(Instruction(f"param_{index}", "parameter", stats.shape, (), {"index": index}))
    reading = body.insert_before(norm, Instruction(norm.name, norm.opcode, norm.shape, [*norm.operands, param],
                                                   dict(norm.attrs), None, norm.origin))
    norm.replace_all_uses_with(reading)
    body.remove(norm)
    body.instructions = body.parameters() + [i for i in body.instructions if i.opcode != "parameter"]
    fused = comp.insert_before(consumer, Instruction(consumer.name, "fusion", consumer.shape,
                                                     [*consumer.operands, stats], dict(consumer.attrs), body,
                                                     consumer.origin))
    consumer.replace_all_uses_with(fused)
    comp.remove(consumer)
