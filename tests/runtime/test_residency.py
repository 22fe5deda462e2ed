"""The residency engine, its policies and the lower bound, on random workloads (seeded): random schedules
(weights of random sizes read at random steps, a KV cache read and extended at random steps), random traces
(several models, interleaved requests, budget changes).

The lower bound (mlcc/runtime/lower_bound.py) must never be above any policy's bytes, and the enumerated
optimum must equal an independent brute force over every eviction choice the device could make.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from mlcc.bundle.layout import align
from mlcc.runtime.lower_bound import exact_optimum, lower_bound
from mlcc.runtime.policies import POLICIES, make_policy
from mlcc.runtime.residency import BudgetError, Engine
from mlcc.runtime.workload import Model, Workload

DEVICE = {"name": "test", "host_link_bandwidth": 1e9, "hbm_bytes": 1 << 30, "hbm_bandwidth": 1e12,
          "l2_bytes": 1 << 20, "peak_flops": {}, "source": "test"}


def random_model(rng: np.random.Generator, name: str, kv: bool, steps: int | None = None,
                 weights: int | None = None) -> Model:
    n = steps or int(rng.integers(3, 8))
    buffers, tensors = [], []
    for i in range(weights or int(rng.integers(2, 6))):
        nbytes = int(rng.integers(1, 12)) * 200
        uses = sorted(set(int(u) for u in rng.integers(0, n, int(rng.integers(1, 3)))))
        tensors.append({"name": f"w{i}", "bytes": nbytes})
        buffers.append({"name": f"w{i}", "bytes": nbytes, "uses": uses, "tensor_class": "WEIGHT",
                        "layer_range": [i // 2, i // 2] if rng.random() < 0.7 else None,
                        "eviction_cost": nbytes / DEVICE["host_link_bandwidth"] * 1e6})
    manifest = {"weights": {"tensors": tensors}, "inputs": [], "outputs": [], "memory_plan": {"arena_bytes": 512},
                "symbols": {}}
    intent = {"steps": n, "step_seconds": [float(x) for x in rng.uniform(1e-7, 2e-6, n)], "device_model": DEVICE,
              "buffers": buffers, "prefetch": []}
    if kv:
        read = int(rng.integers(0, n))
        later = sorted({read, int(rng.integers(read, n))})
        per_token = int(rng.integers(1, 4)) * 64
        manifest["symbols"] = {"past": [0, 64]}
        manifest["inputs"] = [{"name": "past", "buffer": "kp", "shape": [1, "past"], "numpy_dtype": "float32"}]
        manifest["outputs"] = [{"name": "present", "buffer": "kq", "shape": [1, "past+1"], "numpy_dtype": "float32"}]
        buffers += [{"name": "kp", "bytes": 64 * per_token, "uses": [read], "tensor_class": "KV_CACHE",
                     "layer_range": None, "eviction_cost": 1.0},
                    {"name": "kq", "bytes": 65 * per_token, "uses": later, "tensor_class": "KV_CACHE",
                     "layer_range": None, "eviction_cost": 2.0}]
        intent["kv_caches"] = [{"past": "kp", "present": "kq", "axis": 1, "bytes_per_token": per_token,
                                "past_tokens": "past", "present_tokens": "past+1", "layer": None}]
    return Model.of(name, manifest, intent)


def random_workload(seed: int, calls: int | None = None, small: bool = False) -> Workload:
    rng = np.random.default_rng(seed)
    kinds = [bool(rng.random() < 0.5)] if small else [bool(rng.random() < 0.5), bool(rng.random() < 0.5)]
    models = {f"m{i}": random_model(rng, f"m{i}", kv, steps=3 if small else None, weights=2 if small else None)
              for i, kv in enumerate(kinds)}
    work = Workload(models)
    left = {f"{m}.{r}": int(rng.integers(1, 5)) for m in models for r in "ab"}
    for _ in range(calls or int(rng.integers(3, 10))):
        name = f"m{int(rng.integers(0, len(models)))}"
        if rng.random() < 0.15:
            work.set_budget(f"{int(rng.integers(40, 101))}%")
        if models[name].kv:
            live = [r for r, n in left.items() if n > 0 and r.startswith(name + ".")]
            if not live:
                continue
            r = live[int(rng.integers(0, len(live)))]
            left[r] -= 1
            work.add_call(name, r, 1, last=left[r] == 0)
        else:
            work.add_call(name)
    return work


def capacities(work: Workload, engine: Engine, base) -> list[int]:
    caps, cap = [], engine.capacity
    for st in work.steps:
        if st.s == 0 and st.call in work.budget_changes:
            cap = engine._capacity(work.budget_changes[st.call])
        caps.append(cap)
    return caps


def feasible_budget(work: Workload, rng: np.random.Generator) -> int:
    need = max(sum(work.items[k].bytes for k in st.needs) for st in work.steps)
    return int(rng.integers(work.fixed + need, work.footprint() + 1))


@pytest.mark.parametrize("seed", range(40))
def test_lower_bound_is_never_above_any_policy(seed):
    work = random_workload(seed)
    rng = np.random.default_rng(1000 + seed)
    budget = feasible_budget(work, rng)
    for spec in list(work.budget_changes):  # keep every budget change feasible
        work.budget_changes[spec] = max(budget, int(rng.integers(budget, work.footprint() + 1)))
    moved = {}
    for p in POLICIES:
        engine = Engine(work, make_policy(p), budget, 1e9, work.footprint())
        moved[p] = engine.run().bytes_moved
        assert engine.stats.peak_resident <= max([budget] + list(work.budget_changes.values())) - work.fixed
    engine = Engine(work, make_policy("lru"), budget, 1e9, work.footprint())
    bound = lower_bound(work, capacities(work, engine, budget))
    assert bound <= min(moved.values()) + 1e-6, (bound, moved)


def brute_force(work: Workload, caps: list[int]) -> float:
    """The fewest bytes over every sequence of device states: before each step, any subset of what is resident
    may be evicted (a KV cache still needed and never written back costs its write-back), then what the step
    needs is fetched (weights and written-back caches) or produced. At load, any set of weights that fits."""
    items = work.items
    born_at = {k: t for t, st in enumerate(work.steps) for k in st.born}
    last_use = {k: u[-1] for k, u in work.item_uses.items()}

    @functools.lru_cache(maxsize=None)
    def best(t: int, resident: frozenset, on_host: frozenset) -> float:
        if t == len(work.steps):
            return 0.0
        st = work.steps[t]
        need = set(st.needs)
        out = np.inf
        keepable = sorted(resident)
        for r in range(len(keepable) + 1):
            for evicted in itertools.combinations(keepable, r):
                cost, host = 0, set(on_host)
                for k in evicted:
                    if born_at.get(k) is not None and k not in host and last_use[k] >= t:
                        cost += items[k].moved
                        host.add(k)
                now = set(resident) - set(evicted)
                for k in need - now:
                    if k in born_at and born_at[k] == t:
                        continue
                    cost += items[k].moved
                now |= need
                if sum(items[k].bytes for k in now) > caps[t]:
                    continue
                after = frozenset(k for k in now if last_use[k] > t)
                out = min(out, cost + best(t + 1, after, frozenset(h for h in host if last_use[h] > t)))
        return out

    weights = [k for k, it in items.items() if it.kind == "weight" and k in work.item_uses]
    start = np.inf
    for r in range(len(weights) + 1):
        for pre in itertools.combinations(weights, r):
            if sum(items[k].bytes for k in pre) <= caps[0]:
                start = min(start, best(0, frozenset(pre), frozenset()))
    return float(start)


@pytest.mark.parametrize("seed", range(12))
def test_enumerated_optimum_equals_brute_force_and_bounds_it(seed):
    rng = np.random.default_rng(500 + seed)
    work = random_workload(seed, calls=int(rng.integers(2, 4)), small=True)
    budget = feasible_budget(work, rng)
    work.budget_changes.clear()
    engine = Engine(work, make_policy("lru"), budget, 1e9, work.footprint())
    caps = capacities(work, engine, budget)
    optimum = exact_optimum(work, caps)
    assert optimum == pytest.approx(brute_force(work, caps))
    assert lower_bound(work, caps) <= optimum + 1e-6
    for p in POLICIES:
        assert Engine(work, make_policy(p), budget, 1e9, work.footprint()).run().bytes_moved >= optimum - 1e-6


def test_budget_below_one_step_is_a_clear_error():
    work = random_workload(3)
    work.budget_changes.clear()
    need = max(sum(work.items[k].bytes for k in st.needs) for st in work.steps)
    with pytest.raises(BudgetError, match="needs .* device bytes at once"):
        Engine(work, make_policy("intent"), work.fixed + need - 1, 1e9, work.footprint()).run()


def test_kv_caches_grow_by_their_bytes_per_token_and_die_with_the_request():
    rng = np.random.default_rng(7)
    m = random_model(rng, "d", kv=True)
    work = Workload({"d": m})
    for i in range(3):
        work.add_call("d", "r", 1, last=i == 2)
    per_token = m.kv[0]["bytes_per_token"]
    caches = sorted((it for it in work.items.values() if it.kind == "kv"), key=lambda it: it.moved)
    assert [it.moved for it in caches] == [per_token, 2 * per_token, 3 * per_token]
    assert [it.bytes for it in caches] == [align(per_token * n) for n in (1, 2, 3)]
    dies = [k for st in work.steps for k in st.dies]
    assert sorted(dies) == sorted(it.key for it in caches)  # each version dies once; the last with the request
