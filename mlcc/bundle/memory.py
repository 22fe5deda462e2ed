"""Device memory a bundle needs, and the budgets users give for it (``--hbm-budget``: bytes, with a unit or not, or a percentage).

One footprint: ``footprint(manifest)`` is what the runtime allocates with every weight resident (the arena,
the inputs and outputs at their largest sizes, each weight aligned); budgets given as a percentage are of it,
in ``mlcc.load`` and in ``mlcc simulate`` alike (a trace's footprint adds the KV caches alive at its busiest
step: mlcc/runtime/workload.py).
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from mlcc.bundle.dtypes import numpy_dtype, packed_bytes
from mlcc.bundle.layout import align
from mlcc.bundle.sizes import eval_size


class BudgetSpecError(ValueError):
    """A memory budget that is neither bytes nor a percentage."""


def tensor_bytes(spec: Mapping[str, Any], sizes: Mapping[str, int]) -> int:
    """The bytes of an input or output (``shape``, ``numpy_dtype``) with its symbols at ``sizes``."""
    n = 1
    for d in spec["shape"]:
        n *= eval_size(d, sizes)
    if spec.get("packed"):
        return packed_bytes(n, spec["numpy_dtype"])
    return n * numpy_dtype(spec["numpy_dtype"]).itemsize


def largest_sizes(manifest: Mapping[str, Any]) -> dict[str, int]:
    """Each symbol at the top of its range: the sizes the bundle's buffers are planned for (a symbol with no
    upper end at the size it was planned at, ``planned_sizes``)."""
    planned = manifest.get("planned_sizes", {})
    return {name: planned[name] if hi is None else hi for name, (_, hi) in manifest.get("symbols", {}).items()}


def planned_memory_plan(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """manifest["memory_plan"] in numbers: where sizes are expressions (a symbol with no upper end), their
    values at the planned sizes (largest_sizes), as reports and summaries show them."""
    mp = manifest["memory_plan"]
    at = largest_sizes(manifest)
    return {**mp, "arena_bytes": eval_size(mp["arena_bytes"], at),
            "buffers": [{**b, "bytes": eval_size(b["bytes"], at), "offset": eval_size(b["offset"], at)}
                        for b in mp["buffers"]]}


def fixed_bytes(manifest: Mapping[str, Any], exclude: Collection[str] = ()) -> int:
    """Device bytes that never stream: the arena, and the inputs and outputs at their largest (but those whose
    buffers are in ``exclude``: KV caches a session keeps as items of their own, mlcc/runtime/workload.py)."""
    largest = largest_sizes(manifest)
    io = sum(align(max(1, tensor_bytes(s, largest))) for s in manifest["inputs"] + manifest["outputs"]
             if s["buffer"] not in exclude)
    return eval_size(manifest["memory_plan"]["arena_bytes"], largest) + io


def footprint(manifest: Mapping[str, Any]) -> int:
    """Device bytes the bundle needs with every weight resident."""
    weights = sum(align(w["bytes"]) for w in manifest["weights"]["tensors"])
    return weights + fixed_bytes(manifest)


UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def parse_budget(spec: int | str, total: int) -> int:
    """A memory budget in bytes: ``spec`` is bytes (with a unit: ``8GiB``, ``512MB``), or a percentage of
    ``total`` (``"50%"``)."""
    if isinstance(spec, int):
        return spec
    text = str(spec).strip()
    try:
        if text.endswith("%"):
            return int(total * float(text[:-1]) / 100)
        for unit, scale in UNITS.items():
            if text.endswith(unit):
                return int(float(text[:-len(unit)]) * scale)
        return int(float(text))
    except ValueError:
        raise BudgetSpecError(f"bad memory budget {spec!r} (bytes such as 8GiB or 512MB, or a percentage "
                              f"such as 50%)") from None
