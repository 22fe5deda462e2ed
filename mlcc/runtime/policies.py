"""Residency policies: what the engine (mlcc/runtime/residency.py) evicts and prefetches. One implementation
each, used by the simulator and the runtime alike.

Every policy sees only what a runtime has when it decides: the calls so far, the current call (its model,
request and sizes; the schedule says which step reads what), the bundles' files. None sees the next call,
except ``oracle``, an offline reference and no runtime's policy. Baselines, as real offloading systems do it:

- ``lru``: least recently used, with next-layer prefetch: when a step starts a layer group (intent.json's
  layer_range, or each weight-reading step), the next group's weights are fetched, evicting least recently
  used items (the caching allocators of offloading runtimes; prefetch of the next module as in DeepSpeed's
  ZeRO parameter prefetch).
- ``static``: static layer offload: a fixed set of weights is pinned on the device, filling in schedule order
  what the budget leaves after a staging area (two layer groups: the one running and the next) and the
  KV caches' peak (the configured maximum: batch x length, as FlexGen's policy sizes it); the rest stream
  through the staging area one group ahead (accelerate's ``device_map`` with offloaded layers, FlexGen,
  DeepSpeed ZeRO-Inference). Budgets shared by two models are split in proportion to their weights.
- ``fnu``: furthest next use, the replay that assumes the future is the current call repeated (what a runtime
  can infer from one schedule): items the current call still reads, then those the same call would read next
  time, then the rest (other models' weights, other requests' caches) first; fetches one step ahead. A
  heuristic, not an optimum: with items of different sizes furthest-next-use is not optimal even with the
  true future (the lower bound is mlcc/runtime/lower_bound.py).
- ``intent``: what intent.json says, per model: the uses of every buffer in the schedule, each buffer's
  eviction cost (a produced KV cache costs a write-back and a reload: twice a weight's per byte), the
  prefetch plan, the KV caches' pairing and growth per token (``kv_caches``); with what the runtime observed:
  how often each model and each request is called. It predicts each item's next use (this call's schedule;
  else the model's or the request's next call, from the observed gaps), evicts the item with the furthest
  predicted use per unit of eviction cost, and starts fetches where the plan says, displacing only items
  predicted to be needed later.
- ``oracle``: furthest next use with the true future of the whole trace (a reference for how much knowing
  the future is worth; still not optimal with mixed sizes).
"""

from __future__ import annotations

import bisect
from typing import Any, Optional

from mlcc.runtime.workload import Call, kv_key, weight_key

INF = float("inf")
POLICIES = ("intent", "lru", "static", "fnu", "oracle")
BASELINES = ("lru", "static", "fnu")


class Policy:
    name = ""

    def attach(self, engine: Any) -> None:
        self.e = engine
        self.w = engine.work
        self.call: Optional[Call] = None

    def initial(self) -> list[str]:
        """Weights to place at load time, in order (each model's in schedule order)."""
        return sorted(self.w.weights(), key=lambda k: (list(self.w.models).index(self.w.items[k].model),
                                                       self.w.items[k].first_use, k))

    def on_call(self, call: Call) -> None:
        self.call = call

    def touched(self, t: int) -> None:
        pass

    def pinned(self, key: str) -> bool:
        return False

    def rank(self, key: str, t: int) -> Any:
        """The eviction order: the item with the largest rank goes first (every policy defines it)."""
        raise NotImplementedError(f"policy {type(self).__name__} has no rank()")

    def prefetch(self, t: int) -> list[tuple[str, int]]:
        return []

    def may_displace(self, victim: str, use: int, t: int) -> bool:
        return True

    # ---- what every policy may know: the current call's schedule
    def call_end(self) -> int:
        return self.call.start + self.call.steps

    def next_in_call(self, key: str, t: int) -> float:
        uses = self.w.item_uses.get(key, [])
        i = bisect.bisect_right(uses, t)
        return uses[i] if i < len(uses) and uses[i] < self.call_end() else INF


class LRU(Policy):
    name = "lru"

    def rank(self, key: str, t: int) -> Any:
        return (-self.e.last_touch.get(key, -1), key)

    def next_group(self, t: int) -> list[tuple[str, int]]:
        st = self.w.steps[t]
        m = self.w.models[st.model]
        g = m.step_group[st.s]
        if g < 0 or (st.s > 0 and m.step_group[st.s - 1] == g) or g + 1 >= len(m.groups):
            return []
        return [(weight_key(m.name, x), self.call.start + m.weight_uses[x][0]) for x in m.groups[g + 1]]

    def prefetch(self, t: int) -> list[tuple[str, int]]:
        return [(k, u) for k, u in self.next_group(t) if not self.pinned(k)]


class Static(LRU):
    name = "static"

    def attach(self, engine: Any) -> None:
        super().attach(engine)
        self.capacity = None
        self.pins: set[str] = set()
        self.replan()

    def replan(self) -> None:
        """Pin weights in schedule order (skipping one that does not fit, which accelerate's in-order fill
        would not), keeping room for the two largest streamed layer groups (the one running and the one being
        prefetched) and the KV caches' peak; two models split the pins in proportion to their weights."""
        w = self.w
        self.capacity = self.e.capacity
        kv_peak = w.all_resident_peak() - sum(w.items[k].bytes for k in w.weights())
        total = sum(w.items[k].bytes for k in w.weights()) or 1
        groups = [[weight_key(m.name, x) for x in g] for m in w.models.values() for g in m.groups]
        self.pins = set()

        def staging() -> int:
            streamed = sorted((sum(w.items[k].bytes for k in g if k not in self.pins) for g in groups), reverse=True)
            return sum(streamed[:2])

        pinned = 0
        for m in w.models.values():
            keys = [weight_key(m.name, x) for g in m.groups for x in g]
            share = (self.capacity - kv_peak) * sum(w.items[k].bytes for k in keys) / total
            mine = 0
            for k in keys:
                nbytes = w.items[k].bytes
                self.pins.add(k)
                if mine + nbytes + staging() * share / max(1, self.capacity - kv_peak) > share \
                        or pinned + nbytes + staging() + kv_peak > self.capacity:
                    self.pins.discard(k)
                    continue
                mine += nbytes
                pinned += nbytes

    def initial(self) -> list[str]:
        return [k for k in super().initial() if k in self.pins]

    def on_call(self, call: Call) -> None:
        super().on_call(call)
        if self.e.capacity != self.capacity:  # the budget changed: re-plan what stays (a pin not resident is
            self.replan()                      # fetched when next read, and stays)

    def pinned(self, key: str) -> bool:
        return key in self.pins and key in self.e.resident


class FurthestNextUse(Policy):
    """Next use assuming the current call repeats; ``exact`` (the oracle): the trace's true next use."""
    name = "fnu"
    exact = False

    def next_use(self, key: str, t: int) -> float:
        if self.exact:
            uses = self.w.item_uses.get(key, [])
            i = bisect.bisect_right(uses, t)
            return uses[i] if i < len(uses) else INF
        nxt = self.next_in_call(key, t)
        if nxt != INF:
            return nxt
        item = self.w.items[key]
        if item.model != self.call.model:
            return INF
        if item.kind == "kv" and key != kv_key(item.model, self.call.request, item.buffer,
                                                self.call.past + self.call.tokens):
            return INF
        return self.call_end() + item.first_use

    def rank(self, key: str, t: int) -> Any:
        return (self.next_use(key, t), self.w.items[key].bytes, key)

    def prefetch(self, t: int) -> list[tuple[str, int]]:
        if t + 1 >= len(self.w.steps) or (not self.exact and t + 1 >= self.call_end()):
            return []
        return [(k, t + 1) for k in self.w.steps[t + 1].needs if k not in self.w.steps[t + 1].born]

    def may_displace(self, victim: str, use: int, t: int) -> bool:
        return self.next_use(victim, t) > use


class Oracle(FurthestNextUse):
    name = "oracle"
    exact = True


class IntentPolicy(Policy):
    name = "intent"

    def attach(self, engine: Any) -> None:
        super().attach(engine)
        self.model_start: dict[str, int] = {}
        self.model_gap: dict[str, float] = {}
        self.request_start: dict[str, int] = {}
        self.request_gap: Optional[float] = None
        self.tokens: dict[str, int] = {}            # request -> tokens cached, as the runtime saw them
        self.live: dict[str, str] = {}              # request -> model
        self.cost_factor: dict[tuple[str, str], float] = {}
        for m in self.w.models.values():
            link = m.intent["device_model"]["host_link_bandwidth"]
            for b in m.intent["buffers"]:
                reload_us = b["bytes"] / link * 1e6
                self.cost_factor[(m.name, b["name"])] = b["eviction_cost"] / reload_us if reload_us else 1.0
        self.present_of = {(m.name, k["past"]): k["present"] for m in self.w.models.values() for k in m.kv}
        self._horizon: dict[str, int] = {}

    @staticmethod
    def _ema(old: Optional[float], new: float) -> float:
        return new if old is None else 0.5 * old + 0.5 * new

    def on_call(self, call: Call) -> None:
        super().on_call(call)
        if call.model in self.model_start:
            self.model_gap[call.model] = self._ema(self.model_gap.get(call.model), call.start - self.model_start[call.model])
        self.model_start[call.model] = call.start
        if call.request is not None:
            if call.request in self.request_start:
                self.request_gap = self._ema(self.request_gap, call.start - self.request_start[call.request])
            self.request_start[call.request] = call.start
            self.tokens[call.request] = call.past + call.tokens
            self.live[call.request] = call.model

    def touched(self, t: int) -> None:
        if t == self.call_end() - 1 and self.call.last:
            self.live.pop(self.call.request, None)

    def next_call_start(self, item_model: str, request: Optional[str]) -> float:
        end = self.call_end()
        if request is not None:
            if request not in self.live:
                return INF
            if self.request_gap is None:  # round robin over the live requests until a gap is seen
                return end + (len(self.live) - 1) * self.call.steps
            return max(end, self.request_start[request] + self.request_gap)
        if item_model in self.model_gap:
            return max(end, self.model_start[item_model] + self.model_gap[item_model])
        return end

    def predicted_use(self, key: str, t: int) -> float:
        nxt = self.next_in_call(key, t)
        if nxt != INF:
            return nxt
        item = self.w.items[key]
        if item.kind == "kv":
            request = key.split(":")[2]
            if request not in self.live:
                return INF
            if key != kv_key(item.model, request, item.buffer, self.tokens[request]):
                return INF  # an older version: dead once this call has read it
            return self.next_call_start(item.model, request) + item.first_use
        return self.next_call_start(item.model, None) + item.first_use

    def factor(self, key: str) -> float:
        item = self.w.items[key]
        if item.kind == "kv":
            if key in self.e.host_valid:
                return 1.0
            return self.cost_factor.get((item.model, self.present_of.get((item.model, item.buffer), "")), 1.0)
        return self.cost_factor.get((item.model, item.buffer), 1.0)

    def rank(self, key: str, t: int) -> Any:
        return ((self.predicted_use(key, t) - t) / self.factor(key), self.w.items[key].bytes, key)

    def upcoming(self, t: int, horizon: int) -> list[tuple[str, int]]:
        """Items not resident that the next ``horizon`` steps read, in order of use: the rest of this call,
        then (predicted) the next call of this model: its schedule's weights and the KV caches of the request
        that has waited longest (round robin)."""
        e = self.e
        out: list[tuple[str, int]] = []
        seen: set[str] = set()
        end = self.call_end()
        for u in range(t + 1, min(end, t + 1 + horizon)):
            st = self.w.steps[u]
            for k in st.needs:
                if k not in e.resident and k not in seen and k not in st.born:
                    seen.add(k)
                    out.append((k, u))
        if t + 1 + horizon <= end:
            return out
        m = self.w.models[self.call.model]
        start = int(self.next_call_start(m.name, None))
        if start == INF or start != end:  # another model (or a gap) is predicted next: its needs are unknown
            return out
        waiting = [r for r, mod in self.live.items() if mod == m.name]
        nxt = min(waiting, key=lambda q: (self.request_start[q], q)) if waiting else None
        caches = {k["past"] for k in m.kv}
        for s in range(0, min(m.steps, t + 1 + horizon - end)):
            keys = [weight_key(m.name, w) for w in m.step_weights[s]]
            if nxt is not None and self.tokens.get(nxt, 0) > 0:
                keys += [kv_key(m.name, nxt, b, self.tokens[nxt]) for b in sorted(caches) if s in m.uses.get(b, [])]
            for k in keys:
                if k in self.w.items and k not in e.resident and k not in seen and k not in e.dead:
                    seen.add(k)
                    out.append((k, start + s))
        return out

    def prefetch(self, t: int) -> list[tuple[str, int]]:
        e = self.e
        if e.used >= e.capacity or e.link_free >= e.now + self.w.steps[t].seconds:
            return []
        return self._prefetch(t)

    def _prefetch(self, t: int) -> list[tuple[str, int]]:
        """Keep the host link busy with what is needed soonest: while the copies queued so far would leave the
        link idle before this step ends, the next missing item, if room for it can be made from items needed
        later (so a prefetch never forces out something needed sooner). The horizon is the sidecar's: the
        longest a prefetch plan entry starts before its use."""
        e = self.e
        st = self.w.steps[t]
        idle_from = e.now + st.seconds
        admitted, taken = [], 0
        link_free = e.link_free
        for key, use in self.upcoming(t, self.horizon(st.model)):
            if link_free >= idle_from:
                break
            nbytes = self.w.items[key].bytes
            if self.room_until(use, t) - taken < nbytes:
                break
            admitted.append((key, use))
            taken += nbytes
            link_free = max(link_free, e.now) + nbytes / e.link_bw
        return admitted

    def horizon(self, model: str) -> int:
        if model not in self._horizon:
            m = self.w.models[model]
            reach = [(u - s) % m.steps for s, names in m.prefetch.items() for b in names
                     for u in m.uses.get(b, [])[:1]]
            self._horizon[model] = max(reach, default=1) or 1
        return self._horizon[model]

    def room_until(self, use: int, t: int) -> int:
        """Bytes a prefetch for step ``use`` can take without forcing anything out: the free room less what the
        steps in between bring in. (Under a full cache a prefetch would have to evict early, before the item
        the step now reads can go: more bytes, not less stall, since the link is the bottleneck.)"""
        e = self.e
        supply = e.capacity - e.used
        end = self.call_end()
        demand = 0
        seen: set[str] = set()
        end = min(use, end)
        for step in self.w.steps[t + 1:end]:
            for k in step.needs:
                if k not in e.resident and k not in seen:
                    seen.add(k)
                    demand += self.w.items[k].bytes
        if use > end:  # the rest of the window is the predicted next call of this model: its schedule's weights
            m = self.w.models[self.call.model]
            for s in range(0, use - self.call_end()):
                for w in m.step_weights[s] if s < len(m.step_weights) else ():
                    k = weight_key(m.name, w)
                    if k not in e.resident and k not in seen:
                        seen.add(k)
                        demand += self.w.items[k].bytes
        return supply - demand

    def may_displace(self, victim: str, use: int, t: int) -> bool:
        return False  # prefetches take free room only (room_until)


def make_policy(name: str) -> Policy:
    classes = {"intent": IntentPolicy, "lru": LRU, "static": Static, "fnu": FurthestNextUse, "oracle": Oracle}
    if name not in classes:
        raise ValueError(f"unknown policy '{name}' ({', '.join(POLICIES)})")
    return classes[name]()
