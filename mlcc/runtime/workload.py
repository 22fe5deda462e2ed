"""A workload: calls to one or more loaded bundles, expanded into the steps a device runs and the memory each
step needs. The simulator (mlcc/runtime/simulate.py) and the runtime (mlcc/runtime/session.py) build the
same workload and run the same residency engine over it (mlcc/runtime/residency.py).

Only what a runtime holds under a budget is modelled as *items* that can move between host and device:
- each bundle's weights (``MODEL:w:BUFFER``), always valid in host memory (evicting one costs nothing);
- each request's KV cache (``MODEL:kv:REQUEST:PAST_BUFFER:TOKENS``), for bundles whose intent.json lists
  ``kv_caches``: a call reads the request's cache of ``past`` tokens and produces the next one (``past +
  tokens``) on the device; a produced cache exists only on the device until written back, so evicting it
  while the request still needs it costs a write-back. A call's past cache dies after its last read in the
  call (the present replaces it); the present dies after the request's last call.
The rest (the arena, the other inputs and outputs at their largest sizes) is ``fixed``: always resident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mlcc.bundle.layout import align
from mlcc.bundle.memory import fixed_bytes
from mlcc.bundle.sizes import eval_size


class WorkloadError(ValueError):
    """A call the bundles cannot serve (unknown model, a cache longer than the bundle allows)."""


@dataclass
class Item:
    key: str
    bytes: int                 # device bytes it takes (aligned)
    model: str
    kind: str                  # "weight" or "kv"
    buffer: str                # the bundle buffer it binds to (a weight, or a KV cache's past buffer)
    first_use: int             # its first use in its model's schedule (KV: the step that reads the past)
    group: int = -1            # weights: the layer group that reads it first (for next-layer prefetch)
    moved: int = 0             # bytes a copy of it moves (the tensor's own size)


@dataclass
class Step:
    model: str
    call: int
    s: int                     # the step in the model's schedule
    seconds: float
    needs: tuple[str, ...]     # items resident during this step (read or written by it)
    born: tuple[str, ...] = ()  # produced by this step on the device (KV present caches)
    dies: tuple[str, ...] = ()  # dead after this step


@dataclass
class Call:
    model: str
    request: Optional[str]
    tokens: int
    past: int                  # tokens the request had cached before this call
    start: int                 # its first global step
    steps: int
    last: bool = False         # the request's last call


@dataclass
class Model:
    """What a runtime knows about one loaded bundle: its manifest and its sidecar."""
    name: str
    manifest: dict[str, Any]
    intent: dict[str, Any]
    weight_uses: dict[str, list[int]] = field(default_factory=dict)
    groups: list[list[str]] = field(default_factory=list)      # weights by layer group, in schedule order
    step_group: list[int] = field(default_factory=list)        # schedule step -> the group it reads (-1: none)
    kv: list[dict[str, Any]] = field(default_factory=list)     # intent.json's kv_caches
    uses: dict[str, list[int]] = field(default_factory=dict)   # every buffer's uses (intent.json)
    prefetch: dict[int, list[str]] = field(default_factory=dict)
    step_weights: list[list[str]] = field(default_factory=list)  # schedule step -> the weights it reads

    @staticmethod
    def of(name: str, manifest: dict[str, Any], intent: dict[str, Any], manage_kv: bool = True) -> "Model":
        """``manage_kv``: keep requests' KV caches as items (a session); else they stay inputs and outputs."""
        m = Model(name, manifest, intent)
        weights = {w["name"] for w in manifest["weights"]["tensors"] if w["bytes"] > 0}
        entries = {b["name"]: b for b in intent["buffers"]}
        m.uses = {b["name"]: list(b["uses"]) for b in intent["buffers"]}
        m.weight_uses = {w: m.uses.get(w, []) for w in sorted(weights) if m.uses.get(w)}
        # a cache of a fixed length cannot grow from call to call: it stays an input and an output
        m.kv = [k for k in intent.get("kv_caches", []) if isinstance(k["past_tokens"], str)] if manage_kv else []
        m.prefetch = {p["step"]: list(p["buffers"]) for p in intent.get("prefetch", [])}
        m.step_weights = [[] for _ in range(intent["steps"])]
        for w, uses in m.weight_uses.items():
            for u in uses:
                m.step_weights[u].append(w)
        # Layer groups: consecutive schedule steps whose weights belong to the same layer (intent.json's
        # layer_range), or one group per step that reads weights when the names carry no layers.
        n = intent["steps"]
        per_step: list[list[str]] = [[] for _ in range(n)]
        for w, uses in m.weight_uses.items():
            per_step[uses[0]].append(w)
        m.step_group = [-1] * n
        last_layer: object = object()
        for s in range(n):
            if not per_step[s]:
                continue
            layers = {tuple(entries[w]["layer_range"] or ()) for w in per_step[s]}
            layer = layers.pop() if len(layers) == 1 and () not in layers else None
            if layer is None or layer != last_layer or not m.groups:
                m.groups.append([])
            last_layer = layer if layer is not None else object()
            m.groups[-1].extend(sorted(per_step[s]))
            m.step_group[s] = len(m.groups) - 1
        for s in range(n):  # a step that reads only weights first read earlier belongs to the group before
            if m.step_group[s] == -1 and s > 0:
                m.step_group[s] = m.step_group[s - 1]
        return m

    @property
    def steps(self) -> int:
        return self.intent["steps"]

    def fixed_bytes(self) -> int:
        managed = {k["past"] for k in self.kv} | {k["present"] for k in self.kv}
        return fixed_bytes(self.manifest, exclude=managed)

    def kv_symbol(self) -> Optional[str]:
        """The symbol that counts the past tokens (``past``), when the caches are symbolic."""
        for k in self.kv:
            if isinstance(k["past_tokens"], str):
                return k["past_tokens"]
        return None


class Workload:
    """Calls appended one by one (the runtime learns them as they come; the simulator adds a whole trace)."""

    def __init__(self, models: dict[str, Model]) -> None:
        self.models = models
        self.items: dict[str, Item] = {}
        self.steps: list[Step] = []
        self.calls: list[Call] = []
        self.cached: dict[str, int] = {}       # request -> tokens cached
        self.request_model: dict[str, str] = {}
        self.budget_changes: dict[int, Any] = {}  # call index -> the budget from that call on (bytes or "N%")
        self.item_uses: dict[str, list[int]] = {}  # item -> the global steps that need it, in order
        for m in models.values():
            entries = {b["name"]: b for b in m.intent["buffers"]}
            for g, names in enumerate(m.groups):
                for w in names:
                    key = weight_key(m.name, w)
                    self.items[key] = Item(key, align(entries[w]["bytes"]), m.name, "weight", w,
                                           m.weight_uses[w][0], g, entries[w]["bytes"])

    @property
    def fixed(self) -> int:
        return sum(m.fixed_bytes() for m in self.models.values())

    def weights(self) -> list[str]:
        return [k for k, it in self.items.items() if it.kind == "weight"]

    def set_budget(self, spec: Any) -> None:
        """From the next call on, the budget is ``spec``."""
        self.budget_changes[len(self.calls)] = spec

    def add_call(self, model: str, request: Optional[str] = None, tokens: int = 1, last: bool = False) -> Call:
        if model not in self.models:
            raise WorkloadError(f"no bundle named '{model}' (loaded: {', '.join(sorted(self.models))})")
        m = self.models[model]
        if m.kv and request is None:
            raise WorkloadError(f"'{model}' has a KV cache: each call names its request")
        if request is not None and self.request_model.setdefault(request, model) != model:
            raise WorkloadError(f"request '{request}' belongs to '{self.request_model[request]}', not '{model}'")
        past = self.cached.get(request, 0) if m.kv else 0
        env = self._sizes(m, past, tokens)
        call = Call(model, request, tokens, past, len(self.steps), m.steps, last)
        index = len(self.calls)
        self.calls.append(call)
        needs: list[list[str]] = [[] for _ in range(m.steps)]
        born: list[list[str]] = [[] for _ in range(m.steps)]
        dies: list[list[str]] = [[] for _ in range(m.steps)]
        for w, uses in m.weight_uses.items():
            for u in uses:
                needs[u].append(weight_key(model, w))
        for k in m.kv:
            per_token = k["bytes_per_token"]
            if past > 0:  # the cache this call extends
                key = kv_key(model, request, k["past"], past)
                uses = m.uses.get(k["past"], [])
                for u in uses:
                    needs[u].append(key)
                if uses:
                    dies[uses[-1]].append(key)
            present = past + tokens
            if eval_size(k["present_tokens"], env) != present:
                raise WorkloadError(f"'{model}': {k['present']} holds {k['present_tokens']} tokens, not past+tokens")
            key = kv_key(model, request, k["past"], present)
            self.items[key] = Item(key, align(present * per_token), model, "kv", k["past"],
                                   (m.uses.get(k["past"]) or [0])[0], -1, present * per_token)
            uses = m.uses.get(k["present"], [])
            for u in uses:
                needs[u].append(key)
            born[uses[0]].append(key)
            if last:
                dies[uses[-1]].append(key)
        if m.kv:
            self.cached[request] = past + tokens
            if last:
                del self.cached[request]
        seconds = m.intent["step_seconds"]
        for s in range(m.steps):
            for key in sorted(set(needs[s])):
                self.item_uses.setdefault(key, []).append(call.start + s)
            self.steps.append(Step(model, index, s, seconds[s], tuple(sorted(set(needs[s]))), tuple(born[s]),
                                   tuple(dies[s])))
        return call

    def _sizes(self, m: Model, past: int, tokens: int) -> dict[str, int]:
        symbols = m.manifest.get("symbols", {})
        env = {name: hi for name, (_, hi) in symbols.items()}
        sym = m.kv_symbol()
        if sym is not None:
            lo, hi = symbols[sym]
            if not lo <= past <= hi:
                raise WorkloadError(f"'{m.name}': a call with {past} cached tokens, the bundle takes {sym} in {lo}..{hi}")
            env[sym] = past
        elif m.kv and past != m.kv[0]["past_tokens"]:
            raise WorkloadError(f"'{m.name}' was compiled for {m.kv[0]['past_tokens']} cached tokens, not {past}")
        for name, (lo, hi) in symbols.items():
            if name != sym and name in ("seq", "tokens"):
                if not lo <= tokens <= hi:
                    raise WorkloadError(f"'{m.name}': a call of {tokens} tokens, the bundle takes {name} in {lo}..{hi}")
                env[name] = tokens
        return env

    def all_resident_peak(self) -> int:
        """The most item bytes alive at once when nothing is ever evicted: every weight, plus the KV caches
        alive at that step (the footprint of this workload, with ``fixed``)."""
        weights = sum(self.items[k].bytes for k in self.weights())
        live = peak = 0
        for st in self.steps:
            live += sum(self.items[k].bytes for k in st.born)
            peak = max(peak, live)
            live -= sum(self.items[k].bytes for k in st.dies)
        return weights + peak

    def footprint(self) -> int:
        return self.fixed + self.all_resident_peak()


def weight_key(model: str, buffer: str) -> str:
    return f"{model}:w:{buffer}"


def kv_key(model: str, request: Optional[str], past_buffer: str, tokens: int) -> str:
    return f"{model}:kv:{request}:{past_buffer}:{tokens}"
