"""What the memory-intent sidecar is worth where a runtime cannot see the future.

    python benchmarks/intent.py --write-traces          # (re)write examples/traces/*.yaml
    python benchmarks/intent.py --gpt2 DIR --gpt2-kv DIR --resnet DIR [--budgets 30,50,70] [--markdown]

Bundles (compiled with ``mlcc compile MODEL -o DIR --target none``):
- GPT-2 small, seq 128: ``python tools/gpt2_export.py gpt2_small.onnx``;
- the GPT-2-small-shaped KV-cache decoder, one token per call, past length symbolic:
  ``python tools/gpt2_export.py gpt2_small_kv.onnx --kv-cache --dynamic --seq 1 --past 16 --positions 1024``,
  compiled with ``--shape seq=1 --shape past=0..511``;
- ResNet-50 with seeded random weights (onnx's light_resnet50.onnx through tools/light_models.py's
  ``randomize_light_weights(model, 0)``).

Workloads (examples/traces/): ``repeat`` (one model called 8 times: the old benchmark), ``decode`` (requests
with prompts of 6 to 40 tokens fed one per call, then 12 to 32 generated tokens, arriving over time and
served round robin), ``two_models`` (an image encoder and the decoder: each request runs the encoder once,
then its decoder calls, interleaved with the other requests'), ``budget_drop`` (the decode trace with
the budget cut to 75% of itself for its middle third: another tenant). For each workload and budget (% of
the footprint: what the runtime allocates with everything resident), bytes over the host link and the
modeled stall of every policy (mlcc/runtime/policies.py), and the lower bound (mlcc/runtime/lower_bound.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from mlcc.runtime.policies import BASELINES, POLICIES
from mlcc.runtime.simulate import BudgetError, repeat_trace, simulate_bundles
from mlcc.runtime.traces import Trace, TraceCall, parse_trace

TRACES = Path(__file__).resolve().parent.parent / "examples" / "traces"

# (prompt tokens, generated tokens, arrival call) per request
REQUESTS = [(24, 16, 0), (6, 32, 4), (40, 12, 10), (12, 24, 30), (18, 20, 45), (8, 28, 60)]


def _serve(requests: list[tuple[int, int, int]], encoder: str | None, decoder: str) -> list:
    """Round robin over the requests that have arrived: one call each per turn (the encoder once first)."""
    left = {f"r{i}": p + g for i, (p, g, _) in enumerate(requests)}
    arrive = {f"r{i}": a for i, (_, _, a) in enumerate(requests)}
    events: list = []
    waiting = list(left)
    active: list[str] = []
    made = 0
    while waiting or active:
        while waiting and arrive[waiting[0]] <= made:
            r = waiting.pop(0)
            if encoder is not None:
                events.append(TraceCall(encoder))
            active.append(r)
        if not active:
            made = arrive[waiting[0]]
            continue
        for r in list(active):
            left[r] -= 1
            events.append(TraceCall(decoder, r, 1, left[r] == 0))
            made += 1
            if left[r] == 0:
                active.remove(r)
    return events


def traces() -> dict[str, Trace]:
    decode = Trace(["decoder"], events=_serve(REQUESTS, None, "decoder"))
    two = Trace(["encoder", "decoder"], events=_serve(REQUESTS, "encoder", "decoder"))
    n = len(decode.events)
    drop = Trace(["decoder"], "50%", decode.events[:n // 3] + [("budget", "37.5%")] + decode.events[n // 3:2 * n // 3]
                 + [("budget", "50%")] + decode.events[2 * n // 3:])
    return {"decode": decode, "two_models": two, "budget_drop": drop}


def write_traces() -> None:
    import yaml
    TRACES.mkdir(parents=True, exist_ok=True)
    head = {"decode": "# Decode with growing KV caches: 6 requests, prompts fed one token per call, round robin.\n",
            "two_models": "# An image encoder and a KV-cache decoder on one device: encoder once per request.\n",
            "budget_drop": "# The decode trace at a 50% budget that falls to 37.5% for the middle third.\n"}
    for name, tr in traces().items():
        text = head[name] + "# Written by benchmarks/intent.py --write-traces.\n" + yaml.safe_dump(tr.to_json(), sort_keys=False)
        (TRACES / f"{name}.yaml").write_text(text)


def load(name: str) -> Trace:
    import yaml
    return parse_trace(yaml.safe_load((TRACES / f"{name}.yaml").read_text()), name)


def scaled(trace: Trace, pct: int) -> Trace:
    """The budget_drop trace (written for 50%) at ``pct``: each budget event scaled by pct / 50."""
    events = [e if not isinstance(e, tuple) else ("budget", f"{pct * float(e[1][:-1]) / 50:g}%") for e in trace.events]
    return Trace(trace.models, trace.budget, events)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-traces", action="store_true")
    ap.add_argument("--gpt2")
    ap.add_argument("--gpt2-kv")
    ap.add_argument("--resnet")
    ap.add_argument("--budgets", default="30,50,70")
    ap.add_argument("--json", dest="json_out", help="write the rows as JSON")
    ap.add_argument("--markdown", help="print the table of a --json file (BENCHMARKS.md)")
    a = ap.parse_args()
    if a.write_traces:
        write_traces()
        return 0
    if a.markdown:
        markdown(json.loads(Path(a.markdown).read_text()))
        return 0
    rows = []
    cases = []
    if a.gpt2:
        cases.append(("GPT-2 small", "repeat", [a.gpt2], repeat_trace("gpt2", 8)))
    if a.resnet:
        cases.append(("ResNet-50", "repeat", [a.resnet], repeat_trace("resnet", 8)))
    if a.gpt2_kv:
        cases.append(("GPT-2 small KV decoder", "decode", [a.gpt2_kv], load("decode")))
        cases.append(("GPT-2 small KV decoder", "budget_drop", [a.gpt2_kv], load("budget_drop")))
        if a.resnet:
            cases.append(("ResNet-50 + GPT-2 small KV decoder", "two_models", [a.resnet, a.gpt2_kv], load("two_models")))
    for label, workload, bundles, trace in cases:
        for pct in [int(p) for p in a.budgets.split(",")]:
            tr = scaled(trace, pct) if workload == "budget_drop" else trace
            t0 = time.time()
            try:
                r = simulate_bundles(bundles, tr, f"{pct}%")
            except BudgetError as e:
                rows.append({"model": label, "workload": workload, "budget_pct": pct, "infeasible": str(e)})
                print(f"{label} {workload} {pct}%: {e}", file=sys.stderr)
                continue
            r.update(model=label, workload=workload, budget_pct=pct, seconds=round(time.time() - t0, 1))
            rows.append(r)
            print_row(r)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(rows, indent=1, sort_keys=True))
    return 0


def stall_bound(r: dict) -> float:
    """No policy stalls less: its bytes cross one link (at least the lower bound's), and compute can hide at
    most all of its own time."""
    link = r["link_bandwidth"] if "link_bandwidth" in r else 64e9
    compute = r["policies"]["intent"]["compute_seconds"]
    return max(0.0, r["lower_bound_bytes"] / link - compute)


def markdown(rows: list[dict]) -> None:
    print("| model | workload | budget | footprint MB | " + " | ".join(POLICIES) + " | lower bound | stall bound | "
          "best baseline | intent / best (bytes, stall) |")
    print("|---|---|---:|---:|" + "---:|" * len(POLICIES) + "---:|---:|---|---|")
    for r in rows:
        if "infeasible" in r:
            print(f"| {r['model']} | {r['workload']} | {r['budget_pct']}% | | " + " | ".join("-" for _ in POLICIES)
                  + " | | | | cannot run: " + r["infeasible"].split(": ", 1)[-1].split(" cannot run this workload: ")[-1]
                  + " |")
            continue
        p = r["policies"]
        best = min(BASELINES, key=lambda b: p[b]["stall_seconds"])
        bbest = min(p[b]["bytes_moved"] for b in BASELINES)
        cells = " | ".join(f"{p[k]['bytes_moved'] / 1e9:,.2f} GB / {p[k]['stall_seconds'] * 1e3:,.1f} ms" for k in POLICIES)
        print(f"| {r['model']} | {r['workload']} | {r['budget_pct']}% | {r['footprint_bytes'] / 1e6:,.1f} | {cells} | "
              f"{r['lower_bound_bytes'] / 1e9:,.2f} GB | {stall_bound(r) * 1e3:,.1f} ms | {best} | "
              f"{p['intent']['bytes_moved'] / bbest:.2f}, {p['intent']['stall_seconds'] / p[best]['stall_seconds']:.2f} |")


def print_row(r: dict) -> None:
    p = r["policies"]
    best = min(BASELINES, key=lambda b: p[b]["stall_seconds"])
    lb = r["lower_bound_bytes"]
    cells = " | ".join(f"{p[k]['bytes_moved'] / 1e6:,.1f} / {p[k]['stall_seconds'] * 1e3:,.2f}" for k in POLICIES)
    ratio = p["intent"]["stall_seconds"] / p[best]["stall_seconds"] if p[best]["stall_seconds"] else float("nan")
    print(f"| {r['model']} | {r['workload']} | {r['budget_pct']}% | {r['footprint_bytes'] / 1e6:,.1f} | {cells} | "
          f"{lb / 1e6:,.1f} | {best} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
