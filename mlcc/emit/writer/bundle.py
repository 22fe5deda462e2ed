"""Write a bundle: manifest.json, intent.json, kernels/, weights.bin, model.hlo.

The compiler's side of the format in mlcc/bundle: what the compiled module, its kernels and its buffer
plan are, as the typed records the format defines (mlcc.bundle.manifest, mlcc.bundle.intent), serialized
and checked against the JSON Schemas there. Everything is deterministic: sorted keys, no timestamps, names
derived from content. Written into a fresh directory that the caller swaps into place (mlcc/atomic.py).
"""

from __future__ import annotations

import mmap
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mlcc.bundle.digest import bundle_digest
from mlcc.bundle.layout import ALIGNMENT, align, major_to_minor, to_physical
from mlcc.bundle.manifest import (ArenaBuffer, Binary as BinaryEntry, BufferInfo, Count, IoTensor, KernelEntry, Launch,
                                  LaunchConfig as ConfigEntry, Manifest, MemoryPlan, TensorSpec, Weights,
                                  WeightTensor)
from mlcc.bundle.schemas import (COUNT_SCHEMA_VERSION, OWN_GRID_SCHEMA_VERSION, PACKED_IO_SCHEMA_VERSION,
                                 SCHEMA_VERSION, SYMBOLIC_SCHEMA_VERSION, UNBOUNDED_SCHEMA_VERSION, dumps, validate)
from mlcc.bundle.schemas import COMPLEX_IO_SCHEMA_VERSION
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.codegen.loop import INT32_SAFE
from mlcc.emit.target.aot import Binary
from mlcc.emit.target.targets import DeviceModel, Target
from mlcc.emit.writer.intent import build_intent
from mlcc.errors import UnsupportedError
from mlcc.hlo.buffer_assignment import BufferPlan
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.lazy_constants import ConcatenatedWeights, block
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.printer import format_module
from mlcc.hlo.traffic import kernel_bytes
from mlcc.hlo.symbolic import Sym, as_sym

def tensor_spec(shape: Shape) -> TensorSpec:
    return TensorSpec(shape.dtype, numpy_dtype(shape.dtype).name, list(shape.dims), list(shape.layout))


def input_entry(p: Instruction) -> IoTensor:
    """An entry parameter as a bundle input: a packed one (attribute ``packed``) by its values' type and dims."""
    if "packed" in p.attrs:
        values = Shape(p.attrs["packed"], p.attrs["packed_dims"])
        return IoTensor(p.attrs.get("name", p.name), p.name, tensor_spec(values), True)
    return IoTensor(p.attrs.get("name", p.name), p.name, tensor_spec(p.shape), complex=bool(p.attrs.get("complex")))


def config_entry(config: LaunchConfig) -> ConfigEntry:
    return ConfigEntry(dict(config.constexprs), list(config.grid), config.num_warps, config.num_stages)


def constant_source(inst: Instruction, constants: dict[str, Any]) -> np.ndarray:
    """The constant's logical value as the module holds it: a weight in the dtype it was imported with
    (a memory-mapped array stays one), which may differ from the IR dtype after --precision."""
    dt = numpy_dtype(inst.shape.dtype)
    dims = tuple(inst.shape.dims)
    if "value" in inst.attrs:
        return np.array(inst.attrs["value"], dtype=dt).reshape(dims)
    if "splat" in inst.attrs:
        return np.full(dims, inst.attrs["splat"], dtype=dt)
    value = constants[inst.attrs["ref"]]
    return (value if isinstance(value, ConcatenatedWeights) else np.asarray(value)).reshape(dims)


def write_weights(path: Path, module: Module, plan: BufferPlan,
                  progress: Callable[[int, int], None] | None = None) -> list[WeightTensor]:
    """Every WEIGHT/CONSTANT buffer, in its layout's byte order, at ALIGNMENT-aligned offsets; progress, if
    given, is told the bytes written so far and the total after each tensor."""
    entries = []
    offset = 0
    constants = [inst for inst in module.entry.instructions if inst.opcode == "constant"]
    total = sum(plan.buffers[inst.name].bytes for inst in constants)
    done = 0
    with open(path, "wb") as f:
        for inst in constants:
            if progress is not None:
                progress(done, total)
            buf = plan.buffers[inst.name]
            pad = align(offset) - offset
            f.write(b"\0" * pad)
            offset += pad
            written = _write_physical(f, constant_source(inst, module.constants), inst.shape.layout,
                                      numpy_dtype(inst.shape.dtype))
            entries.append(WeightTensor(buf.name, offset, written, tensor_spec(inst.shape)))
            offset += written
            done += written
    if progress is not None:
        progress(done, max(total, done))
    return entries


CHUNK_BYTES = 64 << 20  # weights are written in slabs of about this size: never a second copy of a big weight


def _write_physical(f, arr, layout, dtype: np.dtype | None = None) -> int:
    """Write ``arr`` (an ndarray, or weights concatenated lazily) converted to ``dtype`` (default: its own)
    in ``layout``'s byte order, a slab of its outermost physical dim at a time: a weight memory-mapped from
    the model is paged through, never held whole, and a conversion (--precision), a layout change or a
    concatenation holds one slab of the result at a time. Returns the bytes written."""
    dtype = np.dtype(dtype if dtype is not None else arr.dtype)
    out_bytes = arr.size * dtype.itemsize
    sources = arr.mapped_parts() if isinstance(arr, ConcatenatedWeights) else [arr]
    if arr.ndim == 0 or max(arr.nbytes, out_bytes) <= CHUNK_BYTES:
        data = to_physical(np.asarray(arr).astype(dtype, copy=False), layout)
        f.write(_bytes_of(data))
    else:
        order = major_to_minor(layout)  # logical dims, the outermost physical one first
        outer = order[0]
        n = arr.shape[outer]
        row_bytes = max(1, arr.size // max(1, n) * max(arr.dtype.itemsize, dtype.itemsize))
        rows = max(1, CHUNK_BYTES // row_bytes)
        mapping = _file_mapping(arr) if isinstance(arr, np.ndarray) else None
        for start in range(0, n, rows):
            piece = block(arr, outer, start, min(start + rows, n))
            f.write(_bytes_of(np.transpose(piece, order).astype(dtype, order="C")))  # one copy, converted
            if mapping is not None and piece.flags.c_contiguous:
                _release(mapping, piece)  # pages already written need not stay resident
    for source in sources:
        mapping = _file_mapping(source)
        if mapping is not None:
            _release(mapping, source)
    return out_bytes


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

COUNTING_OPS = ops_with("binds_count")  # their launches read back a run-time count (Launch.counts)


def write_bundle(out: Path, *, module: Module, plan: BufferPlan, kernels: dict[str, Kernel],
                 launches: list[tuple[Instruction, str]], binaries: dict[tuple[str, str], Binary],
                 targets: list[Target], model_info: dict[str, Any], build_info: dict[str, Any],
                 stats: dict[str, Any], device: DeviceModel,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write every file of the bundle into ``out``; returns the manifest as written. progress, if given, is
    told the weight bytes written so far and their total as weights.bin is written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernels").mkdir(exist_ok=True)
    by_kernel: dict[str, list[tuple[Instruction, str]]] = {}
    for inst, name in launches:  # each kernel's own launches: not every launch read once per kernel
        by_kernel.setdefault(name, []).append((inst, name))
    kernel_entries = [write_kernel(out, kernels[name], by_kernel.get(name, []), binaries, targets)
                      for name in sorted(kernels)]
    weights = write_weights(out / "weights.bin", module, plan, progress)
    (out / "model.hlo").write_text(format_module(module))
    intent = build_intent(plan, launches, {n: k.flops for n, k in kernels.items()}, device,
                          source_names(module, plan), kv_cache_ranges(module, plan), module.symbols,
                          present_to_past(module, plan)).to_json()
    validate("intent", intent)
    (out / "intent.json").write_text(dumps(intent))

    entry = module.entry
    schedule = [launch_entry(step, inst, kernels[kname], plan, module.symbols) for step, (inst, kname) in enumerate(launches)]
    manifest = Manifest(
        schema_version=_schema_version(kernels, targets, module, schedule),
        model=model_info, build=build_info, targets=[t.name for t in targets],
        inputs=[input_entry(p) for p in entry.parameters()],
        outputs=[IoTensor(n, plan.value_buffer[o.name], tensor_spec(module.packed_outputs.get(i, o.shape)),
                          i in module.packed_outputs, i in module.complex_outputs)
                 for i, (n, o) in enumerate(zip(module.output_names, entry.root.operands))],
        kernels=kernel_entries,
        schedule=schedule,
        memory_plan=memory_plan(plan),
        weights=Weights("weights.bin", ALIGNMENT, weights),
        buffers={b.name: BufferInfo(b.tensor_class, b.bytes_expr, tensor_spec(b.shape)) for b in plan.buffers.values()},
        stats=stats, ir="model.hlo", intent="intent.json",
        symbols={k: [lo, None if k in module.unbounded else hi] for k, (lo, hi) in sorted(module.symbols.items())},
        planned_sizes={k: module.symbols[k][1] for k in sorted(module.unbounded)},
        index_limits=index_limits(module))
    if set(module.symbols) - {d for s in manifest.inputs for d in s.spec.shape if isinstance(d, str)}:
        _check_counted_before_use(schedule, manifest.inputs, manifest.outputs)
    manifest.bundle_sha256 = bundle_digest(out)
    document = manifest.to_json()
    validate("manifest", document)
    (out / "manifest.json").write_text(dumps(document))
    return document


def write_kernel(out: Path, k: Kernel, launches: list[tuple[Instruction, str]],
                 binaries: dict[tuple[str, str], Binary], targets: list[Target]) -> KernelEntry:
    """kernels/<name>.py and each target's binary and metadata; the kernel's manifest entry."""
    (out / "kernels" / f"{k.name}.py").write_text(k.source)
    bins = {}
    for t in targets:
        b = binaries[(k.name, t.name)]
        bin_rel = f"kernels/{k.name}.{t.name}.{b.ext}"
        meta_rel = f"kernels/{k.name}.{t.name}.json"
        (out / bin_rel).write_bytes(b.data)
        (out / meta_rel).write_text(b.metadata)
        bins[t.name] = BinaryEntry(bin_rel, meta_rel, b.shared, b.num_warps, b.num_stages, b.name,
                                   config_entry(k.config_for(t)),
                                   "tuning-db" if t.name in k.tuned else "heuristic")
    ops = sorted({o for inst, kn in launches if kn == k.name for o in inst.origin})
    return KernelEntry(k.name, f"kernels/{k.name}.py", k.template, k.arg_types, bins, config_entry(k.gpu),
                       config_entry(k.interpreter), k.flops, ops, k.signature)


def launch_entry(step: int, inst: Instruction, k: Kernel, plan: BufferPlan,
                 symbols: dict[str, tuple[int, int]]) -> Launch:
    args = [plan.value_buffer[o.name] for o in inst.operands] + plan.results_of(inst)
    read, written = kernel_bytes(inst, symbols)
    counts = [Count(inst.attrs["symbol"], plan.value_buffer[inst.name], inst.attrs["tensor"])] \
        if inst.opcode in COUNTING_OPS else []
    return Launch(step, k.name, args, list(k.gpu.grid), list(k.interpreter.grid), list(k.scalars), inst.name,
                  list(inst.origin), k.flops, read, written, counts)


def _check_counted_before_use(schedule: list[Launch], inputs: list[IoTensor], outputs: list[IoTensor]) -> None:
    """Every size a launch or an output needs is known by then: the inputs' shapes bind their symbols, and a
    data-dependent dim's is bound by the launch that counts it. A size read without its data (Shape of a NonZero's
    output) may come before that launch, or without it when the data is unused."""
    counted = {c.symbol: launch for launch in schedule for c in launch.counts}
    known = {d for s in inputs for d in s.spec.shape if isinstance(d, str)}

    def check(names: set[str], user: str) -> None:
        early = sorted(names - known)
        if early:
            by = counted.get(early[0])
            when = f"before %{by.instruction} counts it" if by else "and nothing that counts it is computed"
            raise UnsupportedError(f"{user} uses the size of the data-dependent dim '{early[0]}' {when} "
                                   f"(its size is read without its data)")

    for launch in schedule:
        check(set(launch.scalars) | _size_names(launch.grid), f"%{launch.instruction}")
        known.update(c.symbol for c in launch.counts)
    for s in outputs:
        check(_size_names(s.spec.shape), f"output '{s.name}'")


def _size_names(sizes: list) -> set[str]:
    """The symbols size expressions name (not the grammar's functions)."""
    return {n for v in sizes if isinstance(v, str) for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", v)} \
        - {"cdiv", "max", "min"}


def memory_plan(plan: BufferPlan) -> MemoryPlan:
    """The arena: in numbers, or where a symbol has no upper end, sizes and offsets that are expressions."""
    unbounded = plan.arena_expr is not None
    return MemoryPlan(plan.arena_expr if unbounded else plan.arena_bytes, plan.lower_bound, ALIGNMENT,
                      [ArenaBuffer(b.name, b.bytes_expr, b.offset_expr if unbounded else b.offset, b.first_step,
                                   b.last_step, plan.in_place.get(b.name), tensor_spec(b.shape))
                       for b in sorted(plan.arena_buffers(), key=lambda b: (b.first_step, b.name))])


def index_limits(module: Module) -> dict[str, Any]:
    """Where a symbol has no upper end: the element counts of every value a kernel indexes (each instruction's,
    fused ones too, and each attention's scores) that grow with it, which a run must keep within 32-bit index
    arithmetic (kernels index in int32 wherever the planned sizes allow; the margin is one block, as
    mlcc/emit/codegen/loop.py's INT32_SAFE)."""
    if not module.unbounded:
        return {}
    counts: set[Sym] = set()
    for inst in module.all_instructions():
        shapes = inst.shape.elements if inst.shape.is_tuple else [inst.shape]
        found = [as_sym(s.numel_expr()) for s in shapes]
        if inst.opcode == "attention" and len(inst.operands) >= 2:
            q, k = inst.operands[0].shape, inst.operands[1].shape
            found.append(as_sym(q.numel_expr()) // as_sym(q.dims[-1]) * as_sym(k.dims[-2]))
        counts.update(c for c in found if set(c.symbols()) & module.unbounded)
    return {"max": INT32_SAFE, "counts": sorted(str(c) for c in counts)}


def source_names(module: Module, plan: BufferPlan) -> dict[str, list[str]]:
    """Buffer -> the source names of what makes and reads it (intent.json's layer ranges)."""
    names: dict[str, list[str]] = {}
    for inst in module.entry.instructions:
        buf = plan.value_buffer.get(inst.name)
        if buf is not None:
            names.setdefault(buf, []).extend(list(inst.origin) + ([inst.attrs["ref"]] if "ref" in inst.attrs else []))
        for o in inst.operands:
            if o.name in plan.value_buffer and inst.opcode != "tuple":
                names.setdefault(plan.value_buffer[o.name], []).extend(inst.origin)
    return names


def kv_cache_ranges(module: Module, plan: BufferPlan) -> dict[str, list[int]]:
    """KV-cache buffer -> its token range: the past cache's parameter, and the present cache it becomes."""
    kv_cache: dict[str, list[int]] = {}
    for param_buffer, info in module.analyses.kv_cache.items():
        kv_cache[param_buffer] = info.token_range
        present = module.entry.root.operands[info.output_index]
        kv_cache[plan.value_buffer[present.name]] = info.present_tokens
    return kv_cache


def present_to_past(module: Module, plan: BufferPlan) -> dict[str, str]:
    """Present KV-cache buffer -> the past cache buffer it extends (module.analyses.kv_cache)."""
    return {plan.value_buffer[module.entry.root.operands[info.output_index].name]: past
            for past, info in module.analyses.kv_cache.items()}


def _schema_version(kernels: dict[str, Kernel], targets: list[Target], module: Module,
                    schedule: list[Launch]) -> int:
    """The highest version the bundle's features need (mlcc/bundle/schemas.py says what each asks of a reader):
    7 with complex inputs or outputs, 6 when a launch counts a data-dependent dim, 5 with packed inputs or
    outputs, 4 with a symbol that has no upper end, 3 with symbolic sizes, 2 where some binary needs a grid
    other than the schedule's, else 1."""
    if module.complex_outputs or any(p.attrs.get("complex") for p in module.entry.parameters()):
        return COMPLEX_IO_SCHEMA_VERSION
    if any(launch.counts for launch in schedule):
        return COUNT_SCHEMA_VERSION
    if module.packed_outputs or any("packed" in p.attrs for p in module.entry.parameters()):
        return PACKED_IO_SCHEMA_VERSION
    if module.unbounded:
        return UNBOUNDED_SCHEMA_VERSION
    if module.symbols:
        return SYMBOLIC_SCHEMA_VERSION
    own_grid = any(k.config_for(t).grid != k.gpu.grid for k in kernels.values() for t in targets)
    return OWN_GRID_SCHEMA_VERSION if own_grid else SCHEMA_VERSION
