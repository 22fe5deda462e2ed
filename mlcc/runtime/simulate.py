"""mlcc simulate: replay a workload (a trace of calls to one or more bundles, or one bundle called again and
again) under a device-memory budget, for every residency policy, against a lower bound.

The footprint is what the runtime allocates to run the workload with everything resident: each bundle's
arena and inputs and outputs at their largest (mlcc/bundle/memory.py's fixed_bytes, the function
``mlcc.load`` uses), every weight, and the KV caches alive at the busiest step. A budget of "50%" is half
of that. The policies (mlcc/runtime/policies.py) run in the residency engine (mlcc/runtime/residency.py),
the code the runtime runs under ``hbm_budget``; the bound is mlcc/runtime/lower_bound.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from mlcc.bundle.memory import parse_budget
from mlcc.runtime.lower_bound import lower_bound, step_capacities
from mlcc.runtime.policies import POLICIES, make_policy
from mlcc.runtime.residency import BudgetError, Engine, Stats
from mlcc.runtime.traces import Trace, TraceCall
from mlcc.runtime.workload import Model, Workload, WorkloadError

__all__ = ["BudgetError", "WorkloadError", "load_models", "simulate", "simulate_bundles", "repeat_trace"]


def load_models(bundles: Sequence[str | Path], names: Optional[Sequence[str]] = None) -> dict[str, Model]:
    """Each bundle's manifest.json and intent.json, by name (the trace's names, else the directories')."""
    names = list(names) if names is not None else [Path(b).name for b in bundles]
    if len(names) != len(bundles):
        raise WorkloadError(f"the trace names {len(names)} models ({', '.join(names)}), {len(bundles)} bundles given")
    models = {}
    for name, b in zip(names, bundles):
        d = Path(b)
        manifest = json.loads((d / "manifest.json").read_text())
        intent = json.loads((d / "intent.json").read_text())
        models[name] = Model.of(name, manifest, intent)
    return models


def repeat_trace(model: str, calls: int) -> Trace:
    """One bundle without a KV cache called ``calls`` times (the workload when no trace is given)."""
    return Trace([model], events=[TraceCall(model) for _ in range(calls)])


def link_bandwidth(models: dict[str, Model]) -> float:
    return min(m.intent["device_model"]["host_link_bandwidth"] for m in models.values())


def simulate(work: Workload, budget: Any, policy: str) -> Stats:
    """One policy over the workload (the same engine and policy code the runtime runs)."""
    return Engine(work, make_policy(policy), budget, link_bandwidth(work.models), work.footprint()).run()


def simulate_bundles(bundles: Sequence[str | Path], trace: Trace, budget_spec: Any,
                     policies: Sequence[str] = POLICIES, bound: bool = True) -> dict[str, Any]:
    models = load_models(bundles, trace.models)
    work = trace.fill(Workload(models))
    total = work.footprint()
    budget = parse_budget(budget_spec, total)
    out: dict[str, Any] = {"footprint_bytes": total, "fixed_bytes": work.fixed, "budget_bytes": budget,
                           "minimum_budget_bytes": minimum_budget(work), "calls": len(work.calls),
                           "steps": len(work.steps),
                           "device_model": next(iter(models.values())).intent["device_model"]["name"]}
    if min([budget] + [parse_budget(b, total) for b in work.budget_changes.values()]) < out["minimum_budget_bytes"]:
        raise BudgetError(f"a budget of {budget:,} bytes ({100 * budget / total:.0f}% of the {total:,}-byte footprint) "
                          f"cannot run this workload: one step needs {out['minimum_budget_bytes']:,} at once "
                          f"({100 * out['minimum_budget_bytes'] / total:.1f}%)")
    results = {p: simulate(work, budget_spec, p).to_json() for p in policies}
    out["policies"] = results
    if bound:
        engine = Engine(work, make_policy("lru"), budget_spec, link_bandwidth(models), total)
        caps = step_capacities(lambda c: engine._capacity(work.budget_changes.get(c, budget_spec))
                               if c in work.budget_changes else None, work)
        caps = _carry(caps, engine.capacity)
        best = min(r["bytes_moved"] for r in results.values())
        out["lower_bound_bytes"] = int(lower_bound(work, caps, target=best))
    return out


def minimum_budget(work: Workload) -> int:
    """The least budget any policy can run the workload in: the fixed bytes and the largest step's items."""
    return work.fixed + max((sum(work.items[k].bytes for k in st.needs) for st in work.steps), default=0)


def _carry(caps: list[Optional[int]], first: int) -> list[int]:
    out, cur = [], first
    for c in caps:
        cur = c if c is not None else cur
        out.append(cur)
    return out
