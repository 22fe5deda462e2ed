"""Write a bundle: manifest.json, intent.json, kernels/, weights.bin, model.hlo.

Everything is deterministic: sorted keys, no timestamps, names derived from content.
Written into a fresh directory that the caller swaps into place (mlcc/atomic.py).
"""

from __future__ import annotations

import hashlib
import json
import mmap
from pathlib import Path
from typing import Any

import numpy as np

from mlcc.device_models import DeviceModel
from mlcc.emit.compile import Binary, Target
from mlcc.emit.intent import build_intent
from mlcc.emit.codegen.kernel import Kernel
from mlcc.hashing import file_sha256
from mlcc.hlo.buffer_assignment import ALIGNMENT, BufferPlan, align
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.printer import format_module
from mlcc.hlo.traffic import kernel_bytes
from mlcc.runtime.physical import to_physical
from mlcc.schemas import validate

# 1: every binary launches with the schedule's grid (a binary's own "config" is informational);
# 2: some binary was compiled with tiles that need its own grid (kernels[i].binaries[target].config.grid):
#    a reader of version 1 would launch it with the schedule's grid and compute wrong results, so it must refuse.
# 3: the bundle has symbolic sizes ("symbols"): shapes and grids may be expressions and launches pass
#    "scalars"; an older reader would launch with sizes it cannot evaluate, so it must refuse.
SCHEMA_VERSION = 1
OWN_GRID_SCHEMA_VERSION = 2
SYMBOLIC_SCHEMA_VERSION = 3
INTENT_SCHEMA_VERSION = 1


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def shape_json(shape: Shape) -> dict[str, Any]:
    return {"dtype": shape.dtype, "numpy_dtype": numpy_dtype(shape.dtype).name,
            "shape": list(shape.dims), "layout": list(shape.layout)}


def constant_array(inst: Instruction, constants: dict[str, Any]) -> np.ndarray:
    dt = numpy_dtype(inst.shape.dtype)
    dims = tuple(inst.shape.dims)
    if "value" in inst.attrs:
        return np.array(inst.attrs["value"], dtype=dt).reshape(dims)
    if "splat" in inst.attrs:
        return np.full(dims, inst.attrs["splat"], dtype=dt)
    return np.asarray(constants[inst.attrs["ref"]]).astype(dt, copy=False).reshape(dims)


def write_weights(path: Path, module: Module, plan: BufferPlan) -> list[dict[str, Any]]:
    """Every WEIGHT/CONSTANT buffer, in its layout's byte order, at 256-byte aligned offsets."""
    entries = []
    offset = 0
    with open(path, "wb") as f:
        for inst in module.entry.instructions:
            if inst.opcode != "constant":
                continue
            buf = plan.buffers[inst.name]
            pad = align(offset) - offset
            f.write(b"\0" * pad)
            offset += pad
            written = _write_physical(f, constant_array(inst, module.constants), inst.shape.layout)
            entries.append({"name": buf.name, "offset": offset, "bytes": written, **shape_json(inst.shape)})
            offset += written
    return entries


CHUNK_BYTES = 64 << 20  # weights are written in slabs of about this size: never a second copy of a big weight


def _write_physical(f, arr: np.ndarray, layout) -> int:
    """Write ``arr`` in ``layout``'s byte order, a slab of its outermost physical dim at a time (a weight
    memory-mapped from external data is paged through, never held whole); returns the bytes written."""
    if arr.ndim == 0 or arr.nbytes <= CHUNK_BYTES:
        data = to_physical(arr, layout)
        f.write(_bytes_of(data))
        return data.nbytes
    phys = np.transpose(arr, tuple(reversed(tuple(layout))))  # a view: physical dims, outermost first
    rows = max(1, CHUNK_BYTES // max(1, phys[0].nbytes))
    mapping = _file_mapping(arr)
    for start in range(0, phys.shape[0], rows):
        slab = phys[start:start + rows]
        f.write(_bytes_of(np.ascontiguousarray(slab)))
        if mapping is not None and slab.flags.c_contiguous:
            _release(mapping, slab)  # pages already written need not stay resident
    if mapping is not None:
        _release(mapping, arr)
    return arr.nbytes


def _file_mapping(arr: np.ndarray) -> mmap.mmap | None:
    """The memory map of a file that ``arr`` views (a weight from external data), if any."""
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # numpy keeps a buffer it did not allocate as a memoryview of it
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def _release(mapping: mmap.mmap, view: np.ndarray) -> None:
    """Drop the resident pages of the file mapping under ``view`` (read-only and file-backed: touching them
    again reads them back from the file), so paging through a huge weight does not grow the RSS."""
    if not hasattr(mapping, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return
    origin = np.frombuffer(mapping, dtype=np.uint8).ctypes.data
    lo = view.ctypes.data - origin
    hi = lo + view.nbytes
    page = mmap.PAGESIZE
    lo, hi = -(-lo // page) * page, hi // page * page  # whole pages inside the view only
    if 0 <= lo < hi <= len(mapping):
        mapping.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _bytes_of(contiguous: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a uint8 view (any dtype, bfloat16 included), for file.write."""
    return contiguous.reshape(-1).view(np.uint8)


def write_bundle(out: Path, *, module: Module, plan: BufferPlan, kernels: dict[str, Kernel],
                 launches: list[tuple[Instruction, str]], binaries: dict[tuple[str, str], Binary],
                 targets: list[Target], model_info: dict[str, Any], build_info: dict[str, Any],
                 stats: dict[str, Any], device: DeviceModel) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    kdir = out / "kernels"
    kdir.mkdir(exist_ok=True)

    kernel_entries = []
    for name in sorted(kernels):
        k = kernels[name]
        (kdir / f"{name}.py").write_text(k.source)
        bins = {}
        for t in targets:
            b = binaries[(name, t.name)]
            bin_rel = f"kernels/{name}.{t.name}.{b.ext}"
            meta_rel = f"kernels/{name}.{t.name}.json"
            (out / bin_rel).write_bytes(b.data)
            (out / meta_rel).write_text(b.metadata)
            bins[t.name] = {"path": bin_rel, "metadata": meta_rel, "shared": b.shared,
                            "num_warps": b.num_warps, "num_stages": b.num_stages, "function": b.name,
                            "config": k.config_for(t.name).to_json(),
                            "config_from": "tuning-db" if t.name in k.tuned else "heuristic"}
        ops = sorted({o for inst, kn in launches if kn == name for o in inst.origin})
        entry = {"name": name, "source": f"kernels/{name}.py", "template": k.template,
                 "arg_types": k.arg_types, "binaries": bins, "gpu": k.gpu.to_json(),
                 "interpreter": k.interpreter.to_json(), "flops": k.flops, "ops": ops}
        if k.signature:
            entry["signature"] = k.signature
        kernel_entries.append(entry)

    schedule = []
    for step, (inst, kname) in enumerate(launches):
        k = kernels[kname]
        args = [plan.value_buffer[o.name] for o in inst.operands] + [plan.value_buffer[inst.name]]
        launch = {"step": step, "kernel": kname, "instruction": inst.name, "args": args,
                  "grid": list(k.gpu.grid), "interpreter_grid": list(k.interpreter.grid),
                  "ops": list(inst.origin), "flops": k.flops,
                  "bytes_read": kernel_bytes(inst)[0], "bytes_written": kernel_bytes(inst)[1]}
        if k.scalars:
            launch["scalars"] = list(k.scalars)
        schedule.append(launch)

    weights = write_weights(out / "weights.bin", module, plan)
    entry = module.entry
    params = {p.name: p for p in entry.parameters()}
    inputs = [{"name": p.attrs.get("name", p.name), "buffer": p.name, **shape_json(p.shape)}
              for p in params.values()]
    outputs = [{"name": n, "buffer": plan.value_buffer[o.name], **shape_json(o.shape)}
               for n, o in zip(module.output_names, entry.root.operands)]

    memory_plan = {
        "arena_bytes": plan.arena_bytes, "lower_bound_bytes": plan.lower_bound, "alignment": ALIGNMENT,
        "buffers": [{"name": b.name, "bytes": b.bytes, "offset": b.offset, "first_step": b.first_step,
                     "last_step": b.last_step, "in_place_of": plan.in_place.get(b.name), **shape_json(b.shape)}
                    for b in sorted(plan.arena_buffers(), key=lambda b: (b.first_step, b.name))],
    }
    (out / "model.hlo").write_text(format_module(module))
    names: dict[str, list[str]] = {}  # buffer -> the source names of what makes and reads it
    for inst in entry.instructions:
        buf = plan.value_buffer.get(inst.name)
        if buf is not None:
            names.setdefault(buf, []).extend(list(inst.origin) + ([inst.attrs["ref"]] if "ref" in inst.attrs else []))
        for o in inst.operands:
            if o.name in plan.value_buffer and inst.opcode != "tuple":
                names.setdefault(plan.value_buffer[o.name], []).extend(inst.origin)
    kv_cache: dict[str, list[int]] = {}
    for param_buffer, info in module.stats.get("kv_cache", {}).items():
        kv_cache[param_buffer] = info["token_range"]
        present = entry.root.operands[info["output_index"]]
        kv_cache[plan.value_buffer[present.name]] = info["present_tokens"]
    intent = build_intent(plan, launches, {n: k.flops for n, k in kernels.items()}, device, names, kv_cache)
    validate("intent", intent)
    (out / "intent.json").write_text(dumps(intent))

    manifest: dict[str, Any] = {
        "schema_version": SYMBOLIC_SCHEMA_VERSION if module.symbols else _schema_version(kernels, targets),
        "model": model_info,
        "build": build_info,
        "targets": [t.name for t in targets],
        "inputs": inputs,
        "outputs": outputs,
        "kernels": kernel_entries,
        "schedule": schedule,
        "memory_plan": memory_plan,
        "weights": {"file": "weights.bin", "alignment": ALIGNMENT, "tensors": weights},
        "buffers": {b.name: {"tensor_class": b.tensor_class, "bytes": b.bytes, **shape_json(b.shape)}
                    for b in plan.buffers.values()},
        "stats": stats,
        "ir": "model.hlo",
        "intent": "intent.json",
    }
    if module.symbols:
        manifest["symbols"] = {k: list(v) for k, v in sorted(module.symbols.items())}
    manifest["bundle_sha256"] = bundle_digest(out)
    validate("manifest", manifest)
    (out / "manifest.json").write_text(dumps(manifest))
    return manifest


def _schema_version(kernels: dict[str, Kernel], targets: list[Target]) -> int:
    """1 unless some binary needs a grid other than the schedule's (see OWN_GRID_SCHEMA_VERSION)."""
    own_grid = any(k.config_for(t.name).grid != k.gpu.grid for k in kernels.values() for t in targets)
    return OWN_GRID_SCHEMA_VERSION if own_grid else SCHEMA_VERSION


def bundle_digest(out: Path) -> str:
    """sha256 over every file but manifest.json: relative path and content, in sorted order."""
    h = hashlib.sha256()
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_file() and rel != "manifest.json":
            h.update(rel.encode() + b"\0" + bytes.fromhex(file_sha256(p)))
    return h.hexdigest()
