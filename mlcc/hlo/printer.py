"""Text form of the IR, as XLA prints HLO: ``%d = f32[32,16]{1,0} dot(%a, %b), lhs_contracting_dims={1}``."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from mlcc.hlo.ir import SCHEDULED_PROPERTIES, Computation, Instruction, Module, Property

_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.>\-]*$")
_RESERVED = {"true", "false", "nan", "inf", "ROOT", "ENTRY", "HloModule"}


def format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        if _BARE.match(v) and v not in _RESERVED:
            return v
        return json.dumps(v, ensure_ascii=True)
    if isinstance(v, (tuple, list)):
        return "{" + ",".join(format_value(x) for x in v) + "}"
    if isinstance(v, Computation):
        return "%" + v.name
    raise TypeError(f"cannot print attribute value {v!r}")


def format_instruction(inst: Instruction, is_root: bool = False) -> str:
    attrs = dict(inst.attrs)
    if inst.opcode == "parameter":  # XLA spelling: parameter(0)
        operands = str(attrs.pop("index"))
    else:
        operands = ", ".join("%" + op.name for op in inst.operands)
    parts = [f"{'ROOT ' if is_root else ''}%{inst.name} = {inst.shape} {inst.opcode}({operands})"]
    if inst.called is not None:
        attrs["calls"] = inst.called
    for key in sorted(attrs):
        parts.append(f"{key}={format_value(attrs[key])}")
    if inst.origin:
        parts.append(f"origin={format_value(list(inst.origin))}")
    return ", ".join(parts)


def format_computation(comp: Computation) -> str:
    head = f"{'ENTRY ' if comp.is_entry else ''}%{comp.name} {{"
    lines = [head]
    for inst in comp.instructions:
        lines.append("  " + format_instruction(inst, inst is comp.root))
    lines.append("}")
    return "\n".join(lines)


def format_module(module: Module) -> str:
    header = f"HloModule {format_value(module.name)}"
    done = module.properties - {Property.BUFFERS_ASSIGNED}  # a buffer plan has no text form
    if done == SCHEDULED_PROPERTIES:
        header += ", is_scheduled=true"
    elif done:
        header += ", properties={" + ",".join(p.value for p in Property if p in done) + "}"
    if module.output_names:
        header += f", output_names={format_value(list(module.output_names))}"
    if module.packed_outputs:
        header += f", packed_outputs={format_value([f'{i}:{s}' for i, s in sorted(module.packed_outputs.items())])}"
    if module.complex_outputs:
        header += ", complex_outputs={" + ",".join(str(i) for i in sorted(module.complex_outputs)) + "}"
    if module.symbols:
        header += ", symbols={" + ", ".join(f"{k}={{{lo},{hi}}}" for k, (lo, hi) in sorted(module.symbols.items())) + "}"
    if module.unbounded:
        header += ", unbounded={" + ",".join(sorted(module.unbounded)) + "}"
    # Called computations first, entry last: definitions precede uses.
    comps = [c for c in module.computations if not c.is_entry] + [module.entry]
    return header + "\n\n" + "\n\n".join(format_computation(c) for c in comps) + "\n"
