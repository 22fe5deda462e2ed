"""A dot's first pass over its activation for the activation's min and max (its dynamic quantization's
range: mlcc/hlo/passes/a_prologue.py's quantized_rows_cone): the reductions a fusion holds are computed by
the kernel before its K loop, into scalar variables the A-tile prologue and the epilogue read
(templates/_norm_prologue.jinja's a_stats)."""

from __future__ import annotations

from mlcc.emit.codegen.fused import pointer_params
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import Instruction

STATS_BLOCK = 1024  # elements of the activation each step of the first pass reads


def _stats(fusion: Instruction | None) -> list[Instruction]:
    if fusion is None:
        return []
    return [i for i in fusion.called.instructions if i.opcode == "reduce" and i.shape.rank == 0
            and i.attrs.get("kind") in ("minimum", "maximum")]


def activation_stats(fusion: Instruction | None) -> list[tuple[Instruction, str]]:
    """(reduction, the template variable holding its value) for each min or max the kernel computes first."""
    return [(r, f"a_{r.attrs['kind'][:3]}") for r in _stats(fusion)]


def stats_pass(fusion: Instruction | None) -> dict | None:
    """What the template's first pass needs: the activation's pointer and element count, and the variables
    its min and max go to (None where the fusion needs only the other)."""
    found = _stats(fusion)
    if not found:
        return None
    sources = set()
    for r in found:
        x = r.operands[0]
        while x.opcode == "bitcast":
            x = x.operands[0]
        if x.opcode != "parameter" or x.shape.dtype != "f32" or not x.shape.is_static:
            raise UnsupportedError(f"%{fusion.name}: the %{r.name} of the dot's first pass must reduce a static f32 "
                                   f"fusion parameter, not a {x.opcode} of {x.shape}")
        sources.add(int(x.attrs["index"]))
    if len(sources) != 1:
        raise UnsupportedError(f"%{fusion.name}: the dot's first pass reduces one activation, not {len(sources)}")
    (index,) = sources
    numel = fusion.operands[index].shape.numel()
    block = min(STATS_BLOCK, 1 << max(numel - 1, 0).bit_length())
    names = dict((r.attrs["kind"], var) for r, var in activation_stats(fusion))
    return {"ptr": pointer_params(fusion)[index], "numel": numel, "block": block,
            "min": names.get("minimum"), "max": names.get("maximum")}
