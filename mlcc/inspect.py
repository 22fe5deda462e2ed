"""mlcc inspect: what the compiler did, read back from a bundle's manifest."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from mlcc.errors import InputMissingError, InvalidInputError


def summarize(bundle: str | Path) -> dict[str, Any]:
    path = Path(bundle)
    try:
        m = json.loads((path / "manifest.json").read_text())
    except FileNotFoundError:
        raise InputMissingError("no manifest.json here (not an mlcc bundle)", file=str(path)) from None
    except ValueError as e:
        raise InvalidInputError(f"manifest.json is not valid JSON ({e})", file=str(path)) from None
    launches = Counter(s["kernel"] for s in m["schedule"])
    kernels = [{"name": k["name"], "template": k["template"], "launches": launches.get(k["name"], 0),
                "flops": k["flops"], "ops": k["ops"], "targets": sorted(k["binaries"])} for k in m["kernels"]]
    classes: Counter[str] = Counter()
    class_bytes: Counter[str] = Counter()
    for b in m["buffers"].values():
        classes[b["tensor_class"]] += 1
        class_bytes[b["tensor_class"]] += b["bytes"]
    mp = m["memory_plan"]
    return {
        "model": m["model"], "targets": m["targets"], "inputs": m["inputs"], "outputs": m["outputs"],
        "kernels": kernels, "launches": len(m["schedule"]), "distinct_kernels": len(m["kernels"]),
        "memory": {"arena_bytes": mp["arena_bytes"], "lower_bound_bytes": mp["lower_bound_bytes"],
                   "arena_buffers": len(mp["buffers"])},
        "buffers_by_class": {c: {"count": classes[c], "bytes": class_bytes[c]} for c in sorted(classes)},
        "stats": m.get("stats", {}),
    }


def _rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    return [(k["name"], k["template"], str(k["launches"]), f"{k['flops']:,}", ", ".join(k["ops"][:3]) +
             (f" (+{len(k['ops']) - 3})" if len(k["ops"]) > 3 else "")) for k in summary["kernels"]]


def render_text(summary: dict[str, Any], file=None) -> None:
    out = file or sys.stdout
    m = summary["model"]
    mem = summary["memory"]
    head = [f"model      {m.get('file')} ({m.get('format')}, sha256 {m.get('sha256', '')[:12]})",
            f"targets    {', '.join(summary['targets'])}",
            f"kernels    {summary['distinct_kernels']} distinct, {summary['launches']} launches per inference",
            f"arena      {mem['arena_bytes']:,} bytes (lower bound {mem['lower_bound_bytes']:,}; "
            f"{mem['arena_buffers']} buffers)"]
    for c, v in summary["buffers_by_class"].items():
        head.append(f"  {c:<11}{v['count']:>5} buffers {v['bytes']:>14,} bytes")
    header = ("kernel", "template", "launches", "flops", "source ops")
    rows = _rows(summary)
    if out.isatty():
        from rich.console import Console
        from rich.table import Table
        console = Console(file=out)
        for line in head:
            console.print(line, highlight=False)
        table = Table(*header)
        for r in rows:
            table.add_row(*r)
        console.print(table)
        return
    for line in head:
        print(line, file=out)
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)), file=out)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)), file=out)
