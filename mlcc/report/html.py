"""mlcc report: one self-contained HTML file describing a compiled bundle.

Everything is drawn server-side as inline SVG: no scripts run, nothing is fetched.
Every string from the bundle (model, node and kernel names, kernel sources) reaches
the page only through the template's autoescaping; the one raw block is the
summary as JSON in a ``<script type="application/json">``, with ``<``, ``>`` and
``&`` written as ``\\u`` escapes so it can never close its element.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from mlcc.atomic import write_file_atomic
from mlcc.emit.codegen.kernel import template_dir
from mlcc.errors import OutputError
from mlcc.inspect import (
    Bundle,
    human_bytes,
    human_flops,
    human_seconds,
    kernel_source,
    load_bundle,
    resolve_device,
    summarize,
)
from mlcc.report.charts import NEUTRAL, kind_colors, memory_timeline, roofline
from mlcc.report.graph import Node, SourceGraph, collapse, source_graph
from mlcc.report.layout import Spacing, layered_layout

TEMPLATE = "report.html.jinja"
CHAR_W = 6.7           # px per character of the 11px monospace labels
LABEL_CHARS = 26
GROUP_MAX_NODES = 8    # a fusion group with more nodes is drawn as one box
LARGE_GRAPH = 400      # from this many nodes on, groups of more than 3 nodes are drawn as one box
STUB_FANOUT = 6        # long edges from a node with more users than this are drawn as stubs
CLUSTER_CHAR_W = 6.1   # px per character of the 10px fusion-group labels
CLUSTER_LABEL_MAX = 170.0


def _truncate(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _truncate_middle(s: str, n: int) -> str:
    """Keep both ends: kernel names differ in their hash suffix."""
    if len(s) <= n:
        return s
    head = (n - 1) // 2
    return s[:head] + "\u2026" + s[len(s) - (n - 1 - head):]


def _node_view(n: Node, graph: SourceGraph) -> dict[str, Any]:
    grp = graph.groups.get(n.group) if n.group is not None else None
    if n.kind == "group":
        sub = f"{len(n.sources)} ops \u00b7 {grp.fusion_kind if grp else '?'}"
    elif len(n.sources) > 1:
        sub = f"+{len(n.sources) - 1} \u00b7 {', '.join(n.opcodes)}"
    else:
        sub = ", ".join(n.opcodes)
    lines = [f"source ops: {', '.join(n.sources)}"] if n.kind in ("op", "group") else [f"{n.kind}: {n.label}"]
    if n.opcodes:
        lines.append(f"IR: {', '.join(n.opcodes)}")
    if grp is not None:
        lines.append(f"kernel {grp.kernel} ({grp.fusion_kind}), launch step {grp.step}")
    elif n.kind == "op":
        lines.append("no kernel (a view of its operand)")
    return {"label": _truncate(n.label, LABEL_CHARS), "sub": _truncate(sub, LABEL_CHARS), "kind": n.kind,
            "title": "\n".join(lines)}


def graph_view(bundle: Bundle, kinds: dict[str, str], colors: dict[str, str]) -> dict[str, Any]:
    """The source graph laid out: nodes, fusion-group boxes and edge paths, in SVG coordinates."""
    if bundle.module is None:
        return {"width": 400, "height": 40, "nodes": [], "clusters": [], "edges": [],
                "note": "no model.hlo in the bundle"}
    full = source_graph(bundle.module, bundle.manifest["schedule"], kinds)
    limit = 3 if len(full.nodes) >= LARGE_GRAPH else GROUP_MAX_NODES
    graph = collapse(full, limit)
    views = {k: _node_view(n, graph) for k, n in graph.nodes.items()}
    cluster_of = {k: f"g{n.group}" for k, n in graph.nodes.items()
                  if n.group is not None and n.kind == "op"}
    spacing = Spacing()
    members = Counter(n.group for n in graph.nodes.values())
    sizes = {}
    for k, v in views.items():
        h = 30.0 if v["kind"] in ("op", "group") else 22.0
        text = max(len(v["label"]), len(v["sub"]) if v["kind"] not in ("input", "output") else 0)
        w = max(text * CHAR_W + 14, 56.0)
        if k in cluster_of and members[graph.nodes[k].group] <= 2:  # room for the kernel's name
            kernel = graph.groups[graph.nodes[k].group].kernel
            w = max(w, min(len(kernel) * CLUSTER_CHAR_W + 8, CLUSTER_LABEL_MAX) - 2 * spacing.cluster_pad)
        sizes[k] = (w, h)
    lay = layered_layout(sizes, graph.edges, cluster_of, spacing, stub_fanout=STUB_FANOUT)
    nodes = []
    for k, n in graph.nodes.items():
        b = lay.nodes[k]
        grp = graph.groups.get(n.group) if n.group is not None else None
        color = colors.get(grp.fusion_kind, NEUTRAL) if grp else NEUTRAL
        nodes.append({**views[k], "x": b.x, "y": b.y, "w": b.w, "h": b.h, "cx": b.x + b.w / 2, "color": color})
    clusters = []
    for cid, b in lay.clusters.items():
        grp = graph.groups[int(cid[1:])]
        clusters.append({"x": b.x, "y": b.y, "w": b.w, "h": b.h, "color": colors.get(grp.fusion_kind, NEUTRAL),
                         "label": _truncate_middle(grp.kernel, max(int((b.w - 8) / CLUSTER_CHAR_W), 5)),
                         "title": f"kernel {grp.kernel} ({grp.fusion_kind}), launch step {grp.step}: "
                                  f"{members[grp.step]} source node(s)"})
    edges = [{"d": _path(r.points), "stub": r.stub,
              "title": f"from {graph.nodes[r.source].label} (edge not drawn in full: its source has many users)"
              if r.stub else "", "x": r.points[0][0], "y": r.points[0][1]} for r in lay.edges]
    collapsed = sum(1 for g in graph.groups.values() if g.collapsed)
    note = (f"{len(full.nodes)} nodes, {len(full.edges)} edges, {len(full.groups)} launches, {lay.layers} layers"
            + (f"; {collapsed} fusion group(s) of more than {limit} nodes drawn as one box" if collapsed else ""))
    return {"width": lay.width, "height": lay.height, "nodes": nodes, "clusters": clusters, "edges": edges,
            "note": note}


def _path(points: list[tuple[float, float]]) -> str:
    """A smooth path through the route's points: horizontal tangents at each, so curves meet nodes square."""
    (x, y), rest = points[0], points[1:]
    parts = [f"M{x:.1f},{y:.1f}"]
    for nx, ny in rest:
        if abs(ny - y) < 0.5:
            parts.append(f"L{nx:.1f},{ny:.1f}")
        else:
            dx = (nx - x) / 2
            parts.append(f"C{x + dx:.1f},{y:.1f} {nx - dx:.1f},{ny:.1f} {nx:.1f},{ny:.1f}")
        x, y = nx, ny
    return " ".join(parts)


def _json_block(data: Any) -> Markup:
    text = json.dumps(data, sort_keys=True, allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return Markup(text)


def build_context(bundle: Bundle, device_model: str | None) -> dict[str, Any]:
    device = resolve_device(device_model, bundle.manifest)
    summary = summarize(bundle, device.name)
    kernels = summary["kernels"]
    kinds = {k["name"]: k["fusion_kind"] for k in kernels}
    colors = kind_colors(list(kinds.values()))
    total = summary["totals"]["seconds"] or 1.0
    rows = []
    for k in sorted(kernels, key=lambda k: (-k["total_seconds"], k["name"])):
        ai = k["arithmetic_intensity"]
        rows.append({**k, "flops_s": f"{k['flops']:,}", "bytes_s": f"{k['bytes']:,}",
                     "ai_s": "-" if ai is None else f"{ai:.3g}", "time_s": human_seconds(k["seconds"]),
                     "total_s": human_seconds(k["total_seconds"]), "share": k["total_seconds"] / total,
                     "share_s": f"{k['total_seconds'] / total:.1%}", "color": colors.get(k["fusion_kind"], NEUTRAL),
                     "ops_shown": ", ".join(k["ops"][:6]), "ops_more": max(len(k["ops"]) - 6, 0),
                     "ops_all": ", ".join(k["ops"])})
    sources = [{"name": k["name"], "template": k.get("template", ""), "kind": kinds[k["name"]],
                "text": kernel_source(bundle, k)} for k in bundle.manifest["kernels"]]
    t = summary["totals"]
    mem = summary["memory"]
    return {
        "title": str(summary["model"].get("file") or "model"),
        "summary": summary, "device": device,
        "facts": [
            ("model", (f"{summary['model'].get('file')} ({summary['model'].get('format')}), "
                      f"sha256 {str(summary['model'].get('sha256', ''))[:16]}")),
            ("targets", ", ".join(summary["targets"]) or "none (interpreter only)"),
            ("device model", (f"{device.name}: {device.hbm_bandwidth / 1e12:.3g} TB/s HBM, "
                             f"{device.peak_flops['fp32'] / 1e12:.3g} TFLOP/s fp32, "
                             f"{device.peak_flops.get('fp16', 0) / 1e12:.4g} TFLOP/s fp16/bf16 "
                             f"\u2014 {device.source}")),
            ("kernels", f"{t['distinct_kernels']} distinct, {t['launches']} launches per inference"),
            ("work", (f"{human_flops(t['flops'])}FLOP, {human_bytes(t['bytes'])} read+written, roofline bound "
                     f"{human_seconds(t['seconds'])} ({t['memory_bound_launches']} memory-bound, "
                     f"{t['compute_bound_launches']} compute-bound launches)")),
            ("arena", (f"{mem['arena_bytes']:,} bytes; lower bound {mem['lower_bound_bytes']:,} "
                      f"({mem['efficiency']:.1%}); {mem['arena_buffers']} buffers; "
                      f"{mem['buffer_bytes_without_reuse']:,} bytes without reuse")),
            ("weights", f"{mem['weights_bytes']:,} bytes"),
            ("layout conversions", f"{summary['layout_conversions']['count']} copies change layout, "
                                   f"{summary['layout_conversions']['bytes']:,} bytes"
                                   + (f" (manifest stats: {summary['layout_conversions']['manifest_stat']})"
                                      if summary["layout_conversions"]["manifest_stat"] is not None else "")),
        ],
        "kernels": rows, "legend": sorted(colors.items()),
        "graph": graph_view(bundle, kinds, colors),
        "memory": memory_timeline(bundle.manifest, colors, kinds),
        "roofline": roofline(kernels, device, colors),
        "sources": sources,
        "intent": [{"cls": c, **v, "tiers": ", ".join(f"{a} {b}" for a, b in v["tier_preference"].items()),
                    "fallbacks": ", ".join(f"{a} {b}" for a, b in v["fallback_policy"].items()),
                    "bytes_s": f"{v['bytes']:,}"} for c, v in summary["intent"].items()],
        "conversions": summary["layout_conversions"]["copies"],
        "summary_json": _json_block(summary),
    }


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_report(bundle_dir: str | Path, device_model: str | None = "H100") -> str:
    """The report for the bundle at bundle_dir as one HTML string (device_model None: the bundle's own)."""
    bundle = load_bundle(bundle_dir)
    return _environment().get_template(TEMPLATE).render(**build_context(bundle, device_model))


def write_report(bundle_dir: str | Path, out_path: str | Path, device_model: str | None = "H100") -> Path:
    """Write the report for the bundle at bundle_dir to out_path (replaced atomically); returns out_path."""
    html = render_report(bundle_dir, device_model)
    out = Path(out_path)
    try:
        write_file_atomic(out, html.encode("utf-8"))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(out, 0o666 & ~umask)  # an ordinary file, readable as the user's umask allows
    except OSError as e:
        raise OutputError(f"cannot write the report ({e.strerror or e})", file=str(out)) from None
    return out
