"""A true lower bound on the bytes any policy moves over the host link for a workload and a budget, and the
exact optimum for small workloads.

The argument. Let item i be needed at global steps u_1 < ... < u_k (mlcc/runtime/workload.py). Every
policy has i resident at each u_j. Between two consecutive uses (an *interval*), either i stays resident
at every step strictly inside, or it leaves and must come back before u_{j+1}: a fetch of its b_i bytes.
A weight also has the interval from load time to u_1 (kept: placed at load time for free; not kept:
fetched). A KV cache is born on the device at u_1 and has no host copy: the first time it leaves while
still needed it is written back (b_i more bytes), once per version. Nothing else is forced, so for any
policy (b_i: the bytes a copy of item i moves; it takes s_i >= b_i device bytes, aligned)

    bytes moved >= sum over intervals not kept of b_i + sum over KV versions with an interval not kept of b_i,

where the kept intervals must fit: at every step t, the items step t needs (S_t device bytes) plus the s_i
of the kept intervals that strictly contain t fit in the capacity C_t (the budget less the fixed bytes). Prefetch
and timing do not matter: an early fetch only occupies more room. Conversely every choice of kept
intervals that fits is a policy (keep those, fetch the others at their use, evict right after), so the
minimum of this 0/1 problem is the optimum, which ``exact_optimum`` finds by enumeration for small
workloads. For big ones ``lower_bound`` solves its Lagrangian dual: for multipliers lam_t >= 0,

    L(lam) = -sum_t lam_t (C_t - S_t) + sum_i min over the keep choices of i of
             [sum of b_i over its dropped intervals (+ the write-back) + sum over its kept intervals of s_i * sum of lam_t inside]

is at most the 0/1 minimum for every lam (weak duality), so each iterate is a valid bound and the best one
is returned; lam is improved by projected subgradient steps. Intervals that cannot be kept at all (an
inside step with less free room than s_i) are dropped before.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from mlcc.runtime.workload import Workload


@dataclass
class Intervals:
    size: np.ndarray        # device bytes of each interval's item
    cost: np.ndarray        # bytes a fetch of it moves
    lo: np.ndarray          # first step strictly inside
    hi: np.ndarray          # one past the last step inside
    group: np.ndarray       # the item version it belongs to
    writeback: np.ndarray   # per group: bytes of the write-back if any interval of it is dropped (0 for weights)
    free: np.ndarray        # per step: capacity minus what the step needs
    forced: np.ndarray | None = None  # intervals that cannot be kept (too big for some step inside)


def intervals(work: Workload, capacity: list[int]) -> Intervals:
    sizes, costs, lo, hi, group, writeback = [], [], [], [], [], []
    need = np.zeros(len(work.steps), dtype=np.int64)
    for t, st in enumerate(work.steps):
        need[t] = sum(work.items[k].bytes for k in st.needs)
    born = {k for st in work.steps for k in st.born}
    for key, uses in work.item_uses.items():
        item = work.items[key]
        g = len(writeback)
        is_kv = key in born
        writeback.append(item.moved if is_kv else 0)
        starts = ([] if is_kv else [-1]) + uses[:-1]
        for a, b in zip(starts, uses):
            if b - a > 1 or a == -1:
                sizes.append(item.bytes)
                costs.append(item.moved)
                lo.append(a + 1)
                hi.append(b)
                group.append(g)
    return Intervals(np.array(sizes, dtype=np.float64), np.array(costs, dtype=np.float64), np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64),
                     np.array(group, dtype=np.int64), np.array(writeback, dtype=np.float64),
                     np.array(capacity, dtype=np.float64) - need)


def _dual(iv: Intervals, lam: np.ndarray) -> tuple[float, np.ndarray]:
    """L(lam) and (approximately) the keep choice attaining it, for the subgradient."""
    prefix = np.concatenate([[0.0], np.cumsum(lam)])
    keep_cost = iv.size * (prefix[iv.hi] - prefix[iv.lo])
    keep_cost = np.where(iv.forced, 1e300, keep_cost)
    drop_cost = iv.cost
    per = np.minimum(keep_cost, drop_cost)
    keep = keep_cost < drop_cost
    n_groups = len(iv.writeback)
    dirty = iv.writeback > 0
    on_dirty = dirty[iv.group]
    value = float(per[~on_dirty].sum())
    if on_dirty.any():
        g = iv.group
        all_keep = np.bincount(g, weights=np.where(on_dirty, keep_cost, 0.0), minlength=n_groups)
        some = np.bincount(g, weights=np.where(on_dirty, per, 0.0), minlength=n_groups) + iv.writeback
        dropped = np.bincount(g, weights=(~keep) & on_dirty, minlength=n_groups) > 0
        penalty = np.full(n_groups, np.inf)
        np.minimum.at(penalty, g, drop_cost - np.minimum(keep_cost, drop_cost))
        some = some + np.where(dropped, 0.0, np.where(np.isinf(penalty), 0.0, np.maximum(penalty, 0.0)))
        has = np.bincount(g, minlength=n_groups) > 0
        pick = np.where(dirty & has, np.minimum(all_keep, some), 0.0)
        value += float(pick.sum())
        keep = np.where(on_dirty & (all_keep <= some)[g], True, keep)
    value -= float(lam @ iv.free)
    return value, keep


def lower_bound(work: Workload, capacity: list[int], iterations: int = 400, target: float | None = None) -> float:
    """A lower bound on the bytes any policy moves (see the module docstring); ``target``: a known policy's
    bytes, which steers the step size (the bound is valid whatever it is)."""
    iv = intervals(work, capacity)
    if len(iv.size) == 0:
        return 0.0
    inside_min = np.full(len(iv.size), np.inf)
    free = iv.free
    # the least free room strictly inside each interval (a sparse table of minima over the steps)
    table = [free]
    span = 1
    while span * 2 <= len(free):
        prev = table[-1]
        table.append(np.minimum(prev[:-span], prev[span:]))
        span *= 2
    length = iv.hi - iv.lo
    ok = length > 0
    level = np.zeros(len(length), dtype=np.int64)
    level[ok] = np.floor(np.log2(length[ok])).astype(np.int64)
    for lv in np.unique(level[ok]):
        sel = ok & (level == lv)
        t = table[lv]
        inside_min[sel] = np.minimum(t[iv.lo[sel]], t[iv.hi[sel] - (1 << lv)])
    iv.forced = inside_min < iv.size
    lam = np.zeros(len(free))
    best, _ = _dual(iv, lam)
    goal = target if target is not None else float(iv.cost.sum() + iv.writeback.sum())
    mu = 1.0
    stale = 0
    for _ in range(iterations):
        value, keep = _dual(iv, lam)
        if value > best + 1e-9:
            best, stale = value, 0
        else:
            stale += 1
            if stale >= 15:
                mu, stale = mu / 2, 0
        use = np.zeros(len(free) + 1)
        np.add.at(use, iv.lo[keep], iv.size[keep])
        np.add.at(use, iv.hi[keep], -iv.size[keep])
        grad = np.cumsum(use)[:-1] - free
        grad = np.where((lam <= 0) & (grad < 0), 0.0, grad)
        norm = float(grad @ grad)
        if norm == 0 or mu < 1e-6:
            break
        lam = np.maximum(0.0, lam + mu * max(goal - value, 1.0) / norm * grad)
    return max(best, 0.0)


def exact_optimum(work: Workload, capacity: list[int], limit: int = 20) -> float:
    """The fewest bytes any policy moves, by enumerating which intervals stay (at most ``limit`` of them)."""
    iv = intervals(work, capacity)
    n = len(iv.size)
    if n > limit:
        raise ValueError(f"{n} intervals: too many to enumerate (limit {limit})")
    best = np.inf
    for keep in itertools.product((False, True), repeat=n):
        keep_arr = np.array(keep, dtype=bool)
        use = np.zeros(len(iv.free) + 1)
        np.add.at(use, iv.lo[keep_arr], iv.size[keep_arr])
        np.add.at(use, iv.hi[keep_arr], -iv.size[keep_arr])
        if np.any(np.cumsum(use)[:-1] > iv.free + 1e-9):
            continue
        dropped = ~keep_arr
        cost = iv.cost[dropped].sum()
        groups = np.unique(iv.group[dropped])
        cost += iv.writeback[groups].sum()
        best = min(best, cost)
    return float(best)


def step_capacities(engine_capacity_of, work: Workload) -> list[int]:
    """The capacity at each step (budget changes apply from their call on)."""
    caps = []
    cap = None
    for st in work.steps:
        if st.s == 0 and (cap is None or st.call in work.budget_changes):
            cap = engine_capacity_of(st.call)
        caps.append(cap)
    return caps
