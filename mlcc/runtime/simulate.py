"""mlcc simulate: replay a bundle's schedule under a device-memory budget smaller than its footprint.

Three eviction policies move buffers over the host link:
- intent: what intent.json says: next use from each buffer's `uses` (wrapping by `reuse_horizon`
  for persistent buffers), ties broken by `eviction_cost`, and transfers started early per the
  `prefetch` plan so they overlap compute;
- lru: evict the least recently used buffer, fetch on demand;
- belady: evict the buffer used furthest in the future (the offline optimum for unit-size
  pages; a strong bound here), fetch on demand.
Activations are born on the device and freed after their last use; evicting one that is still
needed writes it out (counted) and brings it back before its next use. Weights are clean: evicting
one costs nothing, reloading it moves its bytes. The time model serializes transfers on one link
and compute on one stream; a kernel waits for its operands (stall time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlcc.bundle.intent import PERSISTENT
from mlcc.bundle.memory import intent_footprint, parse_budget


@dataclass
class SimResult:
    policy: str
    bytes_moved: int = 0
    stall_seconds: float = 0.0
    compute_seconds: float = 0.0
    fetches: int = 0
    writebacks: int = 0
    peak_resident: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "bytes_moved": self.bytes_moved, "stall_seconds": self.stall_seconds,
                "compute_seconds": self.compute_seconds, "fetches": self.fetches, "writebacks": self.writebacks,
                "peak_resident_bytes": self.peak_resident}


class BudgetError(ValueError):
    pass


class _Trace:
    """Which buffers each step touches, over `iterations` inferences."""

    def __init__(self, intent: dict[str, Any], iterations: int) -> None:
        self.n = intent["steps"]
        self.buffers = {b["name"]: b for b in intent["buffers"]}
        per_step: list[list[str]] = [[] for _ in range(self.n)]
        for b in intent["buffers"]:
            for u in b["uses"]:
                per_step[u].append(b["name"])
        self.steps = [sorted(s) for s in per_step] * (iterations + 1)  # + one warm-up inference
        self.total = len(self.steps)
        self.seconds = list(intent["step_seconds"]) * (iterations + 1)
        # Exact future uses (the oracle Belady gets).
        self.future: dict[str, list[int]] = {}
        for t, names in enumerate(self.steps):
            for name in names:
                self.future.setdefault(name, []).append(t)

    def next_use_exact(self, name: str, t: int) -> float:
        import bisect
        uses = self.future.get(name, [])
        i = bisect.bisect_left(uses, t)
        return uses[i] if i < len(uses) else float("inf")

    def is_persistent(self, name: str) -> bool:
        return self.buffers[name]["tensor_class"] in PERSISTENT

    def born_here(self, name: str, t: int) -> bool:
        """A transient buffer's first use in an inference: produced (or fed) then, nothing to fetch."""
        b = self.buffers[name]
        return not self.is_persistent(name) and t % self.n == b["first_step"]

    def dead_after(self, name: str, t: int) -> bool:
        b = self.buffers[name]
        return not self.is_persistent(name) and t % self.n == b["last_step"]


def _intent_next_use(b: dict[str, Any], n: int, t: int) -> float:
    """Next use after step t from the sidecar alone: its uses this inference, else (persistent) the next one."""
    step = t % n
    base = t - step
    for u in b["uses"]:
        if u > step:
            return base + u
    if b["tensor_class"] in PERSISTENT and b["uses"]:
        return base + n + b["uses"][0]
    return float("inf")


def simulate(intent: dict[str, Any], budget: int, policy: str, iterations: int = 3) -> SimResult:
    """Totals over `iterations` steady-state inferences (after one warm-up inference)."""
    if policy not in ("intent", "lru", "belady"):
        raise ValueError(f"unknown policy {policy}")
    tr = _Trace(intent, iterations)
    link_bw = intent["device_model"]["host_link_bandwidth"]
    biggest_step = max((sum(tr.buffers[x]["bytes"] for x in names) for names in tr.steps[:tr.n]), default=0)
    if budget < biggest_step:
        raise BudgetError(f"budget {budget} bytes is below the {biggest_step} bytes one step needs at once")

    res = SimResult(policy)
    resident: dict[str, int] = {}        # name -> bytes
    last_access: dict[str, int] = {}
    ready_at: dict[str, float] = {}      # when an in-flight fetch lands
    spilled: set[str] = set()            # activations written out while still needed
    now = 0.0
    link_free = 0.0
    prefetch = {p["step"]: p["buffers"] for p in intent.get("prefetch", [])}

    def next_use(name: str, t: int) -> float:
        if policy == "intent":
            return _intent_next_use(tr.buffers[name], tr.n, t)
        return tr.next_use_exact(name, t + 1)

    def used(t: int) -> int:
        return sum(resident.values())

    inflight: set[str] = set()           # prefetched, not yet used: evicted only as a last resort

    def make_room(need: int, t: int, protect: set[str], horizon: float = float("inf")) -> bool:
        while used(t) + need > budget:
            candidates = [x for x in resident if x not in protect]
            if policy == "intent" and any(x not in inflight for x in candidates):
                candidates = [x for x in candidates if x not in inflight]
            if policy == "lru":
                candidates = sorted(candidates, key=lambda x: (last_access.get(x, -1), x))
            else:
                def key(x: str):
                    cost = tr.buffers[x].get("eviction_cost", 0.0)
                    return (-next_use(x, t), cost if policy == "intent" else 0, x)
                candidates = sorted(candidates, key=key)
                if horizon != float("inf"):
                    # A prefetch takes free space only (or space nothing will read again): evicting a live
                    # buffer early would forgo the room that dying activations free before the use.
                    candidates = [x for x in candidates if next_use(x, t) == float("inf")]
            if not candidates:
                return False
            victim = candidates[0]
            nbytes = resident.pop(victim)
            if not tr.is_persistent(victim) and next_use(victim, t) != float("inf"):
                spilled.add(victim)     # live activation: write it out
                res.bytes_moved += nbytes
                res.writebacks += 1
        return True

    def fetch(name: str, start: float) -> float:
        nonlocal link_free
        nbytes = tr.buffers[name]["bytes"]
        begin = max(start, link_free)
        link_free = begin + nbytes / link_bw
        res.bytes_moved += nbytes
        res.fetches += 1
        spilled.discard(name)
        return link_free

    for t, names in enumerate(tr.steps):
        if t == tr.n:  # the first inference warms the device up; count the steady state only
            res = SimResult(policy, peak_resident=res.peak_resident)
        if policy == "intent" and t % tr.n in prefetch:
            for name in prefetch[t % tr.n]:
                if name in resident:
                    continue
                nu = next_use(name, t - 1)
                # Only when the steps before its use will not need the room: a prefetch that forces an
                # eviction later moves more bytes than it saves stall.
                window = range(t, min(int(nu), tr.total)) if nu != float("inf") else range(0)
                later = max((sum(tr.buffers[x]["bytes"] for x in tr.steps[w] if x not in resident) for w in window),
                            default=0)
                if used(t) + tr.buffers[name]["bytes"] + later > budget:
                    continue
                if make_room(tr.buffers[name]["bytes"], t, set(names) | inflight, horizon=nu):
                    resident[name] = tr.buffers[name]["bytes"]
                    ready_at[name] = fetch(name, now)
                    inflight.add(name)
        need = set(names)
        wait = now
        for name in names:
            if name in resident:
                wait = max(wait, ready_at.get(name, 0.0))
                continue
            if not make_room(tr.buffers[name]["bytes"], t, need):
                raise BudgetError(f"step {t % tr.n}: cannot fit its buffers in {budget} bytes")
            resident[name] = tr.buffers[name]["bytes"]
            if tr.born_here(name, t) and name not in spilled:
                ready_at[name] = 0.0
            else:
                ready_at[name] = fetch(name, now)
                wait = max(wait, ready_at[name])
        res.stall_seconds += wait - now
        now = wait + tr.seconds[t]
        res.compute_seconds += tr.seconds[t]
        res.peak_resident = max(res.peak_resident, used(t))
        for name in names:
            last_access[name] = t
            inflight.discard(name)
            if tr.dead_after(name, t):
                resident.pop(name, None)
    return res


def simulate_bundle(bundle: str | Path, budget_spec: str, iterations: int = 3) -> dict[str, Any]:
    intent = json.loads((Path(bundle) / "intent.json").read_text())
    total = intent_footprint(intent)
    budget = parse_budget(budget_spec, total)
    results = {p: simulate(intent, budget, p, iterations).to_json() for p in ("intent", "lru", "belady")}
    return {"footprint_bytes": total, "budget_bytes": budget, "iterations": iterations,
            "device_model": intent["device_model"]["name"], "policies": results}
