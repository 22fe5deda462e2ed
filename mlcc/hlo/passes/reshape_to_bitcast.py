"""A reshape between layouts that keep the same byte order is a bitcast: no kernel, no copy."""

from __future__ import annotations

from mlcc.hlo.ir import Module, Shape
from mlcc.hlo.passes.pass_manager import Pass


def preserves_byte_order(src: Shape, dst: Shape) -> bool:
    """True when reading src's bytes in dst's layout gives dst's logical row-major reshape."""
    def squeeze(s: Shape) -> tuple[int, ...]:
        return tuple(d for d in s.layout if s.dims[d] != 1)
    # Row-major on both sides (ignoring size-1 dims, which occupy no stride) keeps element order.
    src_rm = squeeze(src) == tuple(d for d in reversed(range(src.rank)) if src.dims[d] != 1)
    dst_rm = squeeze(dst) == tuple(d for d in reversed(range(dst.rank)) if dst.dims[d] != 1)
    return src_rm and dst_rm


class ReshapeToBitcast(Pass):
    name = "reshape-to-bitcast"

    def run(self, module: Module) -> bool:
        changed = False
        for inst in module.entry.instructions:
            if inst.opcode == "reshape" and preserves_byte_order(inst.operands[0].shape, inst.shape):
                inst.opcode = "bitcast"
                changed = True
        return changed
