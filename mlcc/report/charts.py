"""Geometry for the report's charts: the memory timeline and the roofline.

Each function returns plain numbers and strings for the template to draw as SVG;
strings from the bundle go only into text and titles, which the template escapes.
"""

from __future__ import annotations

import math
from typing import Any

from mlcc.bundle.memory import planned_memory_plan
from mlcc.emit.target.targets import DeviceModel
from mlcc.inspect import human_bytes, human_seconds

# Fusion kind -> fill colour (Tableau 10); kinds not listed take the next spare colour.
KIND_COLORS = {"loop": "#4e79a7", "reduce": "#f28e2b", "matmul": "#e15759", "conv": "#76b7b2",
               "row_norm": "#59a14f", "attention": "#edc948", "pool": "#b07aa1", "scan": "#ff9da7",
               "argreduce": "#9c755f", "batch_norm": "#8cd17d"}
SPARE_COLORS = ("#86bcb6", "#d37295", "#fabfd2", "#b6992d", "#499894", "#79706e", "#d4a6c8", "#a0cbe8")
NEUTRAL = "#bab0ac"
ZERO_STEP = 9.0   # px between the markers of kernels with no FLOPs, in their own panel left of the roofline


def kind_colors(kinds: list[str]) -> dict[str, str]:
    out, spare = {}, 0
    for k in sorted(set(kinds)):
        if k in KIND_COLORS:
            out[k] = KIND_COLORS[k]
        else:
            out[k] = SPARE_COLORS[spare % len(SPARE_COLORS)]
            spare += 1
    return out


def _step_ticks(n: int, count: int = 10) -> list[int]:
    if n <= 0:
        return [0]
    stride = max(1, math.ceil(n / count))
    return list(range(0, n + 1, stride))


def memory_timeline(manifest: dict[str, Any], colors: dict[str, str], kernel_kind: dict[str, str],
                    width: float = 1080, height: float = 320) -> dict[str, Any]:
    """Arena buffers as bars: x = schedule steps they are live over, y = their byte range in the arena."""
    mp = planned_memory_plan(manifest)  # numbers, at the planned sizes where they are expressions
    steps = len(manifest["schedule"])
    arena = max(mp["arena_bytes"], 1)
    left, top = 78.0, 10.0
    cols = max(steps, 1)

    def x(step: float) -> float:
        return left + step * width / cols

    def y(offset: float) -> float:
        return top + offset / arena * height

    producer = {}
    for s in manifest["schedule"]:
        if s["args"]:
            producer.setdefault(s["args"][-1], s)
    bars = []
    live = [0] * cols
    for b in mp["buffers"]:
        first, last = max(b["first_step"], 0), min(max(b["last_step"], b["first_step"]), cols - 1)
        for s in range(first, last + 1):
            live[s] += b["bytes"]
        p = producer.get(b["name"])
        kind = kernel_kind.get(p["kernel"], "") if p else ""
        shape = f"{b.get('dtype', '')}[{','.join(str(d) for d in b.get('shape', []))}]"
        title = (f"{b['name']}: {b['bytes']:,} bytes {shape}\narena offset {b['offset']:,}"
                 f"\nlive over steps {first}-{last}" + (f"\nwritten by {p['kernel']} (step {p['step']})" if p else ""))
        bars.append({"x": x(first), "y": y(b["offset"]), "w": max(x(last + 1) - x(first) - 1, 1.0),
                     "h": max(b["bytes"] / arena * height, 1.0), "color": colors.get(kind, NEUTRAL), "title": title})
    live_points = []
    for s, v in enumerate(live):
        live_points += [(x(s), y(v)), (x(s + 1), y(v))]
    return {
        "width": left + width + 20, "height": top + height + 44, "left": left, "top": top,
        "plot_w": width, "plot_h": height, "bars": bars,
        "live": " ".join(f"{a:.1f},{b:.1f}" for a, b in live_points),
        "lower_bound_y": y(mp["lower_bound_bytes"]), "lower_bound": human_bytes(mp["lower_bound_bytes"]),
        "x_ticks": [{"x": x(t), "label": str(t)} for t in _step_ticks(steps)],
        "y_ticks": [{"y": y(arena * f / 4), "label": human_bytes(arena * f / 4) if mp["arena_bytes"] else "0"}
                    for f in range(5)],
        "empty": not mp["buffers"],
    }


def _decades(lo: float, hi: float) -> tuple[int, int]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, max(b, a + 1)


def _si(v: float) -> str:
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def roofline(kernels: list[dict[str, Any]], device: DeviceModel, colors: dict[str, str],
             width: float = 640, height: float = 380) -> dict[str, Any]:
    """Log-log: arithmetic intensity (FLOP/byte) against attainable FLOP/s, one roof per peak class used."""
    bw = device.hbm_bandwidth
    classes = sorted({"fp32"} | {k["peak_class"] for k in kernels})
    peaks = {c: device.peak_flops.get(c, device.peak_flops["fp32"]) for c in classes}
    ridges = {c: p / bw for c, p in peaks.items()}
    ais = [k["arithmetic_intensity"] for k in kernels if k["arithmetic_intensity"]]
    x0, x1 = _decades(min(ais + [min(ridges.values()) / 100]), max(ais + [max(ridges.values()) * 10]))
    y0, y1 = _decades(bw * 10.0 ** x0, max(peaks.values()) * 2)
    zero_kernels = [k for k in kernels if not k["arithmetic_intensity"]]
    zero_cols = max(math.ceil(len(zero_kernels) / 40), 1)
    zero_w = ZERO_STEP * zero_cols + 10 if zero_kernels else 0.0
    axis, top = 62.0, 12.0
    left = axis + zero_w + (16.0 if zero_kernels else 0.0)

    def px(ai: float) -> float:
        return left + (math.log10(ai) - x0) / (x1 - x0) * width

    def py(flops: float) -> float:
        return top + (y1 - math.log10(flops)) / (y1 - y0) * height

    roofs = []
    for c in classes:
        pts = [(px(10.0 ** x0), py(bw * 10.0 ** x0)), (px(ridges[c]), py(peaks[c])), (px(10.0 ** x1), py(peaks[c]))]
        roofs.append({"class": c, "points": " ".join(f"{a:.1f},{b:.1f}" for a, b in pts),
                      "ridge_x": px(ridges[c]), "ridge": f"{ridges[c]:.3g}", "label_y": py(peaks[c]) - 13,
                      "peak": _si(peaks[c]), "dashed": c != "fp32"})
    total = sum(k["total_seconds"] for k in kernels) or 1.0
    points, zero = [], []
    for k in kernels:
        share = k["total_seconds"] / total
        title = (f"{k['name']} ({k['fusion_kind']}), {k['launches']} launch(es)\n"
                 f"{k['flops']:,} FLOP, {k['bytes']:,} bytes per launch\n"
                 + (f"{k['arithmetic_intensity']:.3g} FLOP/byte, " if k["arithmetic_intensity"] else "0 FLOP/byte, ")
                 + f"{human_seconds(k['seconds'])} per launch, {k['bound']}-bound ({k['peak_class']} peak)")
        r = 3.0 + 7.0 * math.sqrt(share)
        color = colors.get(k["fusion_kind"], NEUTRAL)
        if k["arithmetic_intensity"]:
            ai = k["arithmetic_intensity"]
            attainable = min(peaks[k["peak_class"]], ai * bw)
            points.append({"x": px(ai), "y": py(attainable), "r": r, "color": color, "title": title})
        else:
            row, col = divmod(len(zero), zero_cols)
            zero.append({"x": axis + 5 + ZERO_STEP * (col + 0.5), "y": top + height - ZERO_STEP * (row + 0.5),
                         "r": 3.2, "color": color, "title": title})
    return {
        "width": left + width + 24, "height": top + height + 46, "left": left, "top": top,
        "axis": axis, "zero_w": zero_w,
        "plot_w": width, "plot_h": height, "roofs": roofs, "points": points, "zero": zero,
        "x_ticks": [{"x": px(10.0 ** e), "label": _si(10.0 ** e)} for e in range(x0, x1 + 1)],
        "y_ticks": [{"y": py(10.0 ** e), "label": _si(10.0 ** e)} for e in range(y0, y1 + 1)],
        "bandwidth": f"{bw / 1e12:.3g} TB/s",
    }
