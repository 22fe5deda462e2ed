"""mlcc inspect: what the compiler did, read back from a bundle.

Reads only the bundle (manifest.json, intent.json, model.hlo) and a device model:
per kernel its fusion kind, the source ops it covers, its launches, FLOPs, bytes,
arithmetic intensity and roofline-bound time; the layout conversions left in the
IR; the memory plan; the memory intent by tensor class.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mlcc.bundle.memory import largest_sizes, planned_memory_plan
from mlcc.bundle.sizes import eval_size
from mlcc.emit.target.binaries import binary_rows
from mlcc.emit.target.targets import DeviceModel, device_model
from mlcc.errors import InputMissingError, InvalidInputError, UnsupportedError
from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.parser import ParseError, parse_module

# Triton pointer types of a kernel's result -> the device model's peak-FLOP/s class (as intent.json does).
PEAK_CLASS = {"*fp16": "fp16", "*bf16": "bf16"}
DEFAULT_DEVICE = "H100"


@dataclass
class Bundle:
    """A bundle as read from disk: the manifest, and the intent sidecar and final IR when present."""

    path: Path
    manifest: dict[str, Any]
    intent: dict[str, Any] | None
    module: Module | None


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise InvalidInputError(f"{what} is not valid JSON ({e})", file=str(path)) from None


def load_bundle(bundle: str | Path) -> Bundle:
    path = Path(bundle)
    if not (path / "manifest.json").is_file():
        raise InputMissingError("no manifest.json here (not an mlcc bundle)", file=str(path))
    manifest = _read_json(path / "manifest.json", "manifest.json")
    for key in ("kernels", "schedule", "memory_plan", "buffers"):
        if key not in manifest:
            raise InvalidInputError(f"manifest.json has no '{key}'", file=str(path))
    intent_file = path / manifest.get("intent", "intent.json")
    intent = _read_json(intent_file, "intent.json") if _inside(path, intent_file) and intent_file.is_file() else None
    module = None
    ir_file = path / manifest.get("ir", "model.hlo")
    if _inside(path, ir_file) and ir_file.is_file():
        try:
            module = parse_module(ir_file.read_text())
        except ParseError as e:
            raise InvalidInputError(f"model.hlo does not parse ({e})", file=str(ir_file)) from None
    return Bundle(path, manifest, intent, module)


def _inside(root: Path, path: Path) -> bool:
    """A path named by the manifest must stay inside the bundle."""
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def kernel_source(bundle: Bundle, kernel: dict[str, Any]) -> str | None:
    """The kernel's generated Triton source, or None when the bundle lacks it."""
    p = bundle.path / kernel.get("source", f"kernels/{kernel['name']}.py")
    if not _inside(bundle.path, p) or not p.is_file():
        return None
    return p.read_text(errors="replace")


def resolve_device(name: str | None, manifest: dict[str, Any]) -> DeviceModel:
    """The named device model; by default the one the bundle was compiled for (else H100)."""
    if name is None:
        name = manifest.get("build", {}).get("options", {}).get("device_model") or DEFAULT_DEVICE
    try:
        return device_model(name)
    except ValueError as e:
        raise UnsupportedError(str(e)) from None


def fusion_kind(kernel: dict[str, Any]) -> str:
    """The manifest's fusion_kind when present, else the template's stem (matmul.py.jinja -> matmul)."""
    if kernel.get("fusion_kind"):
        return str(kernel["fusion_kind"])
    return str(kernel.get("template", "?")).split(".", 1)[0]


def peak_class(kernel: dict[str, Any]) -> str:
    types = kernel.get("arg_types") or []
    return PEAK_CLASS.get(types[-1], "fp32") if types else "fp32"


def launch_bytes(step: dict[str, Any], buffers: dict[str, Any]) -> tuple[int, int]:
    """(read, written) bytes of one launch: the manifest's figures, else the sizes of its argument buffers."""
    if "bytes_read" in step and "bytes_written" in step:
        return int(step["bytes_read"]), int(step["bytes_written"])
    sizes = [int(buffers.get(a, {}).get("bytes", 0)) for a in step["args"]]
    return sum(sizes[:-1]), sum(sizes[-1:])


def launch_origins(module: Module | None) -> dict[str, list[str]]:
    """Entry instruction name -> the source ops it covers (for a fusion: every op inside it)."""
    if module is None:
        return {}
    out = {}
    for inst in module.entry.instructions:
        names = list(inst.origin)
        if inst.called is not None:
            names += [o for inner in _all_inner(inst) for o in inner.origin]
        out[inst.name] = sorted(set(names))
    return out


def _all_inner(inst: Instruction) -> list[Instruction]:
    found, stack = [], [inst.called]
    while stack:
        comp = stack.pop()
        for i in comp.instructions:
            found.append(i)
            if i.called is not None:
                stack.append(i.called)
    return found


def kernel_rows(bundle: Bundle, device: DeviceModel) -> list[dict[str, Any]]:
    m = bundle.manifest
    origins = launch_origins(bundle.module)
    per_kernel: dict[str, list[dict[str, Any]]] = {}
    for step in m["schedule"]:
        per_kernel.setdefault(step["kernel"], []).append(step)
    rows = []
    for k in m["kernels"]:
        steps = per_kernel.get(k["name"], [])
        ops = set(k.get("ops", []))
        for s in steps:
            ops.update(s.get("ops", []))
            ops.update(origins.get(s.get("instruction", ""), []))
        flops = int(k.get("flops", 0))
        traffic = [launch_bytes(s, m["buffers"]) for s in steps]
        n = len(steps)
        read = sum(r for r, _ in traffic) // n if n else 0
        written = sum(w for _, w in traffic) // n if n else 0
        nbytes = read + written
        peak = peak_class(k)
        compute_s = flops / device.peak_flops.get(peak, device.peak_flops["fp32"])
        memory_s = nbytes / device.hbm_bandwidth
        seconds = device.kernel_seconds(flops, nbytes, peak)
        rows.append({
            "name": k["name"], "fusion_kind": fusion_kind(k), "template": k.get("template"),
            "ops": sorted(ops), "launches": n, "steps": [s["step"] for s in steps],
            "flops": flops, "bytes_read": read, "bytes_written": written, "bytes": nbytes,
            "arithmetic_intensity": flops / nbytes if nbytes else None,
            "peak_class": peak, "seconds": seconds, "total_seconds": seconds * n,
            "bound": "compute" if compute_s > memory_s else "memory",
            "targets": sorted(k.get("binaries", {})),
        })
    return rows


def _nbytes(shape: Any) -> int | None:
    try:
        return shape.nbytes() if isinstance(shape, Shape) else None
    except ValueError:
        return None


def layout_conversions(bundle: Bundle) -> dict[str, Any]:
    """copy instructions in model.hlo whose result layout differs from their operand's, and the bytes they move."""
    found = []
    module = bundle.module
    launched = {s.get("instruction"): s["kernel"] for s in bundle.manifest["schedule"]}
    if module is not None:
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode != "copy" or not inst.operands:
                    continue
                src, dst = inst.operands[0].shape, inst.shape
                if not isinstance(dst, Shape) or not isinstance(src, Shape) or src.layout == dst.layout:
                    continue
                size = _nbytes(dst)
                found.append({"instruction": inst.name, "computation": comp.name, "shape": str(dst),
                              "from_layout": list(src.layout), "to_layout": list(dst.layout),
                              "bytes": size, "ops": list(inst.origin),
                              "kernel": launched.get(inst.name) if comp.is_entry else None})
    return {"count": len(found), "bytes": sum(c["bytes"] or 0 for c in found),
            "manifest_stat": bundle.manifest.get("stats", {}).get("layout_conversions"),
            "copies": found}


def memory_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    mp = planned_memory_plan(manifest)  # numbers, at the planned sizes where they are expressions
    at = largest_sizes(manifest)
    bufs = mp["buffers"]
    steps = len(manifest["schedule"])
    live = [0] * max(steps, 1)
    for b in bufs:
        for s in range(max(b["first_step"], 0), min(b["last_step"], steps - 1) + 1):
            live[s] += b["bytes"]
    by_class: dict[str, dict[str, int]] = {}
    for b in manifest["buffers"].values():
        c = by_class.setdefault(b["tensor_class"], {"count": 0, "bytes": 0})
        c["count"] += 1
        c["bytes"] += eval_size(b["bytes"], at)
    largest = max(bufs, key=lambda b: b["bytes"], default=None)
    return {
        "arena_bytes": mp["arena_bytes"], "lower_bound_bytes": mp["lower_bound_bytes"],
        "efficiency": mp["lower_bound_bytes"] / mp["arena_bytes"] if mp["arena_bytes"] else 1.0,
        "arena_buffers": len(bufs), "buffer_bytes_without_reuse": sum(b["bytes"] for b in bufs),
        "peak_live_bytes": max(live) if bufs else 0,
        "largest_buffer": {"name": largest["name"], "bytes": largest["bytes"]} if largest else None,
        "alignment": mp.get("alignment"),
        "weights_bytes": sum(t["bytes"] for t in manifest.get("weights", {}).get("tensors", [])),
        "buffers_by_class": dict(sorted(by_class.items())),
    }


def intent_summary(intent: dict[str, Any] | None) -> dict[str, Any]:
    """Per tensor class: how many buffers, their bytes, and how often each tier and fallback is asked for."""
    if intent is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for b in intent["buffers"]:
        c = out.setdefault(b["tensor_class"], {"count": 0, "bytes": 0, "tier_preference": Counter(),
                                               "fallback_policy": Counter()})
        c["count"] += 1
        c["bytes"] += b["bytes"]
        c["tier_preference"][b["tier_preference"]] += 1
        c["fallback_policy"][b["fallback_policy"]] += 1
    return {k: {**v, "tier_preference": dict(sorted(v["tier_preference"].items())),
                "fallback_policy": dict(sorted(v["fallback_policy"].items()))} for k, v in sorted(out.items())}


def summarize(bundle: str | Path | Bundle, device_model: str | None = None) -> dict[str, Any]:
    b = bundle if isinstance(bundle, Bundle) else load_bundle(bundle)
    m = b.manifest
    device = resolve_device(device_model, m)
    kernels = kernel_rows(b, device)
    totals = {
        "launches": len(m["schedule"]), "distinct_kernels": len(m["kernels"]),
        "flops": sum(k["flops"] * k["launches"] for k in kernels),
        "bytes": sum(k["bytes"] * k["launches"] for k in kernels),
        "seconds": sum(k["total_seconds"] for k in kernels),
        "memory_bound_launches": sum(k["launches"] for k in kernels if k["bound"] == "memory"),
        "compute_bound_launches": sum(k["launches"] for k in kernels if k["bound"] == "compute"),
    }
    return {
        "model": m["model"], "targets": m.get("targets", []), "inputs": m.get("inputs", []),
        "symbols": m.get("symbols", {}),
        "outputs": m.get("outputs", []),
        "device_model": {"name": device.name, "hbm_bandwidth": device.hbm_bandwidth,
                         "peak_flops": dict(device.peak_flops), "source": device.source},
        "kernels": kernels, "totals": totals,
        "layout_conversions": layout_conversions(b),
        "memory": memory_summary(m),
        "intent": intent_summary(b.intent),
        "stats": m.get("stats", {}),
    }


# ---- rendering -------------------------------------------------------------

def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def human_seconds(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.3g} us"
    return f"{s * 1e9:.3g} ns"


def human_flops(n: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} "


def _ops_cell(ops: list[str], limit: int = 3) -> str:
    shown = ", ".join(ops[:limit])
    return shown + (f" (+{len(ops) - limit})" if len(ops) > limit else "")


KERNEL_HEADER = ("kernel", "kind", "launches", "flops/launch", "bytes/launch", "flop/byte", "time/launch",
                 "total time", "bound", "source ops")


def kernel_table(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    rows = []
    for k in summary["kernels"]:
        ai = k["arithmetic_intensity"]
        rows.append((k["name"], k["fusion_kind"], str(k["launches"]), f"{k['flops']:,}", f"{k['bytes']:,}",
                     "-" if ai is None else f"{ai:.3g}", human_seconds(k["seconds"]),
                     human_seconds(k["total_seconds"]), k["bound"], _ops_cell(k["ops"])))
    return rows


INTENT_HEADER = ("class", "buffers", "bytes", "tier preference", "fallback policy")


def intent_table(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    def counts(c: dict[str, int]) -> str:
        return " ".join(f"{k}:{v}" for k, v in c.items())
    return [(cls, str(v["count"]), f"{v['bytes']:,}", counts(v["tier_preference"]), counts(v["fallback_policy"]))
            for cls, v in summary["intent"].items()]


def io_text(tensors: list[dict[str, Any]], most: int = 8) -> str:
    """Inputs or outputs as the user sees them: ``x f32[1,seq]``, a complex one ``z c64[3,4]`` (its buffer's
    real pairs, f32[3,4,2]), a packed one ``w s4[8,8] packed``; the first ``most`` and a count of the rest."""
    def one(t: dict[str, Any]) -> str:
        if t.get("complex"):
            kind = {"f32": "c64", "f64": "c128"}[t["dtype"]]
            return f"{t['name']} {kind}[{','.join(str(d) for d in t['shape'][:-1])}]"
        return f"{t['name']} {t['dtype']}[{','.join(str(d) for d in t['shape'])}]" + (" packed" if t.get("packed") else "")
    text = ", ".join(one(t) for t in tensors[:most]) or "(none)"
    return text + (f" (+{len(tensors) - most} more)" if len(tensors) > most else "")


def header_lines(summary: dict[str, Any]) -> list[str]:
    m = summary["model"]
    t = summary["totals"]
    d = summary["device_model"]
    mem = summary["memory"]
    lc = summary["layout_conversions"]
    lines = [
        f"model      {m.get('file')} ({m.get('format')}, sha256 {str(m.get('sha256', ''))[:12]})",
        f"targets    {', '.join(summary['targets']) or '(none: interpreter only)'}",
        (f"device     {d['name']}: {d['hbm_bandwidth'] / 1e12:.3g} TB/s, "
        f"{d['peak_flops']['fp32'] / 1e12:.3g} TFLOP/s fp32, "
        f"{d['peak_flops'].get('fp16', 0) / 1e12:.4g} fp16/bf16 ({d['source']})"),
        (f"kernels    {t['distinct_kernels']} distinct, {t['launches']} launches per inference: "
        f"{human_flops(t['flops'])}FLOP, {human_bytes(t['bytes'])} moved, roofline bound "
        f"{human_seconds(t['seconds'])} ({t['memory_bound_launches']} memory-bound, "
        f"{t['compute_bound_launches']} compute-bound launches)"),
        (f"arena      {mem['arena_bytes']:,} bytes, lower bound {mem['lower_bound_bytes']:,} "
        f"({mem['efficiency']:.1%} of it is needed), {mem['arena_buffers']} buffers, "
        f"peak live {mem['peak_live_bytes']:,} bytes, {mem['buffer_bytes_without_reuse']:,} without reuse"),
        f"weights    {mem['weights_bytes']:,} bytes",
        f"inputs     {io_text(summary['inputs'])}",
        f"outputs    {io_text(summary['outputs'])}",
        *([("symbols    " + ", ".join(f"{k} in {lo}..{'' if hi is None else hi}" for k, (lo, hi) in summary["symbols"].items())
            + ": sizes, FLOPs, bytes and the arena are at the largest")] if summary.get("symbols") else []),
        f"layout     {lc['count']} copies change layout, {lc['bytes']:,} bytes"
        + (f" (manifest stats: {lc['manifest_stat']})" if lc["manifest_stat"] is not None else ""),
    ]
    for c in lc["copies"]:
        where = f"kernel {c['kernel']}" if c["kernel"] else f"in %{c['computation']}"
        lines.append(f"  %{c['instruction']} {c['shape']} from {{{','.join(map(str, c['from_layout']))}}} "
                     f"({c['bytes'] if c['bytes'] is not None else '?'} bytes, {where}"
                     + (f", from {_ops_cell(c['ops'])})" if c["ops"] else ")"))
    return lines


def _aligned(header: tuple[str, ...], rows: list[tuple[str, ...]], out: IO[str]) -> None:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(), file=out)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)


def render_text(summary: dict[str, Any], file: IO[str] | None = None) -> None:
    """Rich tables on a terminal, plain aligned text otherwise (pipes, files, tests)."""
    out = file or sys.stdout
    if out.isatty():
        _render_rich(summary, out)
        return
    for line in header_lines(summary):
        print(line, file=out)
    print(file=out)
    _aligned(KERNEL_HEADER, kernel_table(summary), out)
    if summary["intent"]:
        print(file=out)
        print("memory intent by tensor class", file=out)
        _aligned(INTENT_HEADER, intent_table(summary), out)


def _render_rich(summary: dict[str, Any], out: IO[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    console = Console(file=out)
    for line in header_lines(summary):
        console.print(line, highlight=False, markup=False)
    numeric = {"launches", "flops/launch", "bytes/launch", "flop/byte", "time/launch", "total time", "buffers", "bytes"}
    table = Table(title="kernels", title_justify="left")
    for h in KERNEL_HEADER:
        if h == "source ops":
            table.add_column(h, overflow="fold", min_width=12)
        else:
            table.add_column(h, justify="right" if h in numeric else "left", no_wrap=True)
    for r in kernel_table(summary):
        table.add_row(*(Text(c) for c in r))
    console.print(table)
    if summary["intent"]:
        it = Table(title="memory intent by tensor class", title_justify="left")
        for h in INTENT_HEADER:
            it.add_column(h, justify="right" if h in numeric else "left")
        for r in intent_table(summary):
            it.add_row(*(Text(c) for c in r))
        console.print(it)


# ---- mlcc inspect --binaries: the compiled binaries' registers, spills, shared memory, occupancy, MMA

BINARY_HEADER = ("kernel", "target", "template", "tile", "regs", "spill st/ld", "shared", "warps", "occupancy",
                 "limited by", "matrix instructions")


def binaries_summary(bundle: str | Path) -> dict[str, Any]:
    """Per kernel and target, what its binary says about itself (mlcc/emit/target/binaries.py)."""
    bundle = Path(bundle)
    if not (bundle / "manifest.json").is_file():
        raise InputMissingError("not a bundle (no manifest.json)", file=str(bundle))
    return {"bundle": str(bundle), "binaries": binary_rows(bundle)}


def _matrix_cell(row: dict[str, Any]) -> str:
    counts = [f"{n} {row[n]}" for n in ("wgmma", "mma", "mfma") if row.get(n)]
    if not counts and all(row.get(n) is None for n in ("wgmma", "mma", "mfma")):
        return "?"
    return ", ".join(counts) or "-"


def binaries_table(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    def num(v: Any) -> str:
        return "?" if v is None else str(v)
    return [(r["kernel"], r["target"], r["template"], r["tile"] or "-", num(r["registers"]),
             f"{num(r['spill_stores'])}/{num(r['spill_loads'])}", human_bytes(r["shared"]), str(r["num_warps"]),
             f"{r['warps_per_sm']} warps/SM ({r['occupancy']:.0%})", r["limited_by"], _matrix_cell(r))
            for r in summary["binaries"]]


def render_binaries(summary: dict[str, Any], file: IO[str] | None = None) -> None:
    out = file or sys.stdout
    if not summary["binaries"]:
        print(f"{summary['bundle']}: no binaries (built with --target none)", file=out)
        return
    _aligned(BINARY_HEADER, binaries_table(summary), out)
    spilling = [r for r in summary["binaries"] if r["spilled_bytes"]]
    print(f"{len(summary['binaries'])} binaries, {len(spilling)} spilling registers", file=out)
