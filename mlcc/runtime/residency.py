"""The residency engine: which items (weights, KV caches; mlcc/runtime/workload.py) are on the device at each
step of a workload under a memory budget, decided by a policy (mlcc/runtime/policies.py) and nothing else.

The simulator replays a whole trace through it; the runtime runs the same engine call by call and performs
its actions (mlcc/runtime/session.py): so a simulated plan is the plan that runs. Before step ``t`` the
engine
1. evicts down to the step's capacity if the budget shrank (another tenant took memory);
2. fetches each needed item that is not resident (on demand) and allocates the items the step produces,
   evicting what the policy ranks first among the items this step does not need (items prefetched and
   not yet used last);
3. issues the prefetches the policy asks for (the copies overlap this step's compute), each only if the
   room can be made by evicting items the policy says may make way for it;
and after the step frees the items that died. Evicting a KV cache that exists only on the device and is
still needed writes it back to host memory first (then its host copy is valid: evicting it again is free).

Time model (for the modeled stall): one host link, copies in the order issued, each taking bytes / link
bandwidth (intent.json's device model); kernels run one after another on the compute stream in their
modeled time (intent.json's step_seconds); a step starts when the previous one has finished and every item
it needs has arrived. The stall is the time steps wait for copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from mlcc.bundle.memory import parse_budget
from mlcc.runtime.workload import Workload


class BudgetError(ValueError):
    """The budget cannot hold what one step needs at once."""


@dataclass
class Action:
    op: str          # "fetch", "prefetch", "evict", "writeback", "born", "free"
    key: str
    bytes: int       # fetch, prefetch, writeback: the bytes copied; evict, born, free: the device bytes

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "key": self.key, "bytes": self.bytes}


@dataclass
class Stats:
    policy: str
    bytes_moved: int = 0          # fetched + written back, during the workload
    fetched_bytes: int = 0
    writeback_bytes: int = 0
    preload_bytes: int = 0        # copied at load time (before the first call), not counted as moved
    fetches: int = 0
    writebacks: int = 0
    stall_seconds: float = 0.0
    compute_seconds: float = 0.0
    peak_resident: int = 0        # item bytes on the device at most (the fixed bytes come on top)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "bytes_moved": self.bytes_moved, "fetched_bytes": self.fetched_bytes,
                "writeback_bytes": self.writeback_bytes, "preload_bytes": self.preload_bytes,
                "fetches": self.fetches, "writebacks": self.writebacks, "stall_seconds": self.stall_seconds,
                "compute_seconds": self.compute_seconds, "peak_resident_bytes": self.peak_resident}


class Engine:
    """Runs a policy over a workload step by step. ``budget``: the device bytes (bytes or "N%" of the
    workload's footprint); the items get what the fixed bytes leave."""

    def __init__(self, work: Workload, policy: Any, budget: Any, link_bandwidth: float,
                 footprint: Optional[int] = None) -> None:
        self.work = work
        self.policy = policy
        self.link_bw = link_bandwidth
        self.footprint = footprint
        self.budget_spec = budget
        self.resident: dict[str, int] = {}
        self.used = 0
        self.host_valid: set[str] = set()       # KV items whose host copy is current
        self.dead: set[str] = set()
        self.existing: set[str] = set()         # KV items produced so far (a cache not yet produced cannot move)
        self.ready_at: dict[str, float] = {}
        self.last_touch: dict[str, int] = {}
        self.inflight: set[str] = set()         # prefetched, not yet used
        self.t = 0
        self.now = 0.0
        self.link_free = 0.0
        self.stats = Stats(policy.name)
        self.capacity = self._capacity(budget)
        self.on_action: Optional[Callable[[int, Action], None]] = None
        policy.attach(self)

    # ---- budget
    def _capacity(self, spec: Any) -> int:
        total = self.footprint if self.footprint is not None else self.work.footprint()
        return parse_budget(spec, total) - self.work.fixed

    def preload(self) -> list[Action]:
        """Load time: the policy's initial items, in its order, while they fit (copied, not counted as moved)."""
        actions = []
        for key in self.policy.initial():
            nbytes = self.work.items[key].bytes
            if key not in self.resident and self.used + nbytes <= self.capacity:
                self._add(key)
                self.ready_at[key] = 0.0
                self.stats.preload_bytes += self.work.items[key].moved
                actions.append(Action("fetch", key, self.work.items[key].moved))
        return actions

    # ---- state changes
    def _add(self, key: str) -> None:
        nbytes = self.work.items[key].bytes
        self.resident[key] = nbytes
        self.used += nbytes
        self.stats.peak_resident = max(self.stats.peak_resident, self.used)

    def _emit(self, out: list[Action], a: Action) -> None:
        out.append(a)

    def _evict(self, key: str, out: list[Action]) -> None:
        nbytes = self.resident.pop(key)
        self.used -= nbytes
        self.inflight.discard(key)
        item = self.work.items[key]
        if item.kind == "kv" and key not in self.host_valid and key not in self.dead:
            self.host_valid.add(key)
            self._transfer(item.moved, self.now)
            self.stats.writeback_bytes += item.moved
            self.stats.writebacks += 1
            self._emit(out, Action("writeback", key, item.moved))
        self._emit(out, Action("evict", key, nbytes))

    def _transfer(self, nbytes: int, start: float) -> float:
        begin = max(start, self.link_free)
        self.link_free = begin + nbytes / self.link_bw
        self.stats.bytes_moved += nbytes
        return self.link_free

    def make_room(self, need: int, protect: set[str], out: list[Action],
                  allowed: Optional[Callable[[str], bool]] = None) -> bool:
        """Evict, in the policy's order, until ``need`` more bytes fit; ``allowed`` limits the victims (a
        prefetch displaces only what the policy says may make way). False if it cannot."""
        if self.used + need <= self.capacity:
            return True
        candidates = [k for k in self.resident if k not in protect and not self.policy.pinned(k)
                      and (allowed is None or allowed(k))]
        if allowed is not None:  # a prefetch may not evict: count first, so that it evicts nothing in vain
            if self.used + need - sum(self.resident[k] for k in candidates) > self.capacity:
                return False
        # items prefetched and not yet used go last: evicting one wastes its copy
        ranked = sorted(candidates, key=lambda k: self.policy.rank(k, self.t), reverse=True)
        while self.used + need > self.capacity:
            if not ranked:
                return False
            self._evict(ranked.pop(0), out)
        return True

    # ---- one step
    def step(self) -> list[Action]:
        """Decide and account step ``self.t``; returns the actions to perform before it runs (then call
        ``finish_step``)."""
        t = self.t
        st = self.work.steps[t]
        out: list[Action] = []
        call = self.work.calls[st.call]
        if st.s == 0:
            if st.call in self.work.budget_changes:
                self.capacity = self._capacity(self.work.budget_changes[st.call])
            self.policy.on_call(call)
        need_now = set(st.needs)
        step_bytes = sum(self.work.items[k].bytes for k in need_now)
        if step_bytes > self.capacity:
            raise BudgetError(f"step {st.s} of '{st.model}' needs {step_bytes + self.work.fixed} device bytes at "
                              f"once (with the {self.work.fixed} fixed), the budget leaves {self.capacity} for them")
        if self.used > self.capacity:  # the budget shrank
            self.make_room(0, set(), out)
        wait = self.now
        born = set(st.born)
        for key in st.needs:
            if key in self.resident:
                wait = max(wait, self.ready_at.get(key, 0.0))
                continue
            nbytes = self.work.items[key].bytes
            if not self.make_room(nbytes, need_now, out):
                raise BudgetError(f"step {st.s} of '{st.model}': cannot fit its items in {self.capacity} bytes")
            self._add(key)
            if key in born:
                self.existing.add(key)
                self.ready_at[key] = 0.0
                self._emit(out, Action("born", key, nbytes))
                continue
            moved = self.work.items[key].moved
            self.ready_at[key] = self._transfer(moved, self.now)
            self.stats.fetched_bytes += moved
            self.stats.fetches += 1
            wait = max(wait, self.ready_at[key])
            self._emit(out, Action("fetch", key, moved))
        for key, use in self.policy.prefetch(t):
            if key in self.resident or key in self.dead or key not in self.work.items \
                    or (self.work.items[key].kind == "kv" and key not in self.existing):
                continue
            nbytes = self.work.items[key].bytes
            if self.make_room(nbytes, need_now | self.inflight,
                              out, allowed=lambda v, u=use: self.policy.may_displace(v, u, t)):
                self._add(key)
                self.inflight.add(key)
                moved = self.work.items[key].moved
                self.ready_at[key] = self._transfer(moved, self.now)
                self.stats.fetched_bytes += moved
                self.stats.fetches += 1
                self._emit(out, Action("prefetch", key, moved))
        self.stats.stall_seconds += wait - self.now
        self.now = wait + st.seconds
        self.stats.compute_seconds += st.seconds
        return out

    def finish_step(self) -> list[Action]:
        """After step ``self.t``: note the uses, free what died; move to the next step."""
        st = self.work.steps[self.t]
        out: list[Action] = []
        for key in st.needs:
            self.last_touch[key] = self.t
            self.inflight.discard(key)
        self.policy.touched(self.t)
        for key in st.dies:
            self.dead.add(key)
            if key in self.resident:
                self.used -= self.resident.pop(key)
                out.append(Action("free", key, self.work.items[key].bytes))
        self.t += 1
        return out

    def run(self) -> Stats:
        """Every step of the workload (the simulator)."""
        self.preload()
        while self.t < len(self.work.steps):
            self.step()
            self.finish_step()
        return self.stats
