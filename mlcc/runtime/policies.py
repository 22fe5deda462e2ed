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
        raise NotImplementedError

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
        w = self.w
        self.capacity = self.e.capacity
        largest_group = max((sum(w.items[weight_key(m.name, x)].bytes for x in g)
                             for m in w.models.values() for g in m.groups), default=0)
        kv_peak = w.all_resident_peak() - sum(w.items[k].bytes for k in w.weights())
        room = self.capacity - 2 * largest_group - kv_peak
        total = sum(w.items[k].bytes for k in w.weights()) or 1
        self.pins = set()
        for m in w.models.values():
            keys = [weight_key(m.name, x) for g in m.groups for x in g]
            share = room * sum(w.items[k].bytes for k in keys) // total
            for k in keys:  # in schedule order, until the first that does not fit
                if w.items[k].bytes > share:
                    break
                share -= w.items[k].bytes
                self.pins.add(k)

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

    def prefetch(self, t: int) -> list[tuple[str, int]]:
        st = self.w.steps[t]
        m = self.w.models[st.model]
        out = []
        for buf in m.prefetch.get(st.s, []):
            if buf in m.weight_uses:
                key = weight_key(m.name, buf)
                use = self.predicted_use(key, t)
                if use != INF:
                    out.append((key, int(use)))
            elif (m.name, buf) in self.present_of and self.live:
                # the cache the predicted next request of this model reads: the one waiting longest
                waiting = [r for r, mod in self.live.items() if mod == m.name and r != self.call.request]
                if waiting:
                    r = min(waiting, key=lambda q: (self.request_start[q], q))
                    key = kv_key(m.name, r, buf, self.tokens[r])
                    if key in self.w.items:
                        use = self.predicted_use(key, t)
                        if use != INF:
                            out.append((key, int(use)))
        return sorted(out, key=lambda p: (p[1], p[0]))

    def may_displace(self, victim: str, use: int, t: int) -> bool:
        return (self.predicted_use(victim, t) - t) / self.factor(victim) > use - t


def make_policy(name: str) -> Policy:
    classes = {"intent": IntentPolicy, "lru": LRU, "static": Static, "fnu": FurthestNextUse, "oracle": Oracle}
    if name not in classes:
        raise ValueError(f"unknown policy '{name}' ({', '.join(POLICIES)})")
    return classes[name]()
