"""Run a bundle in less device memory than it needs: the memory-intent sidecar decides what streams.

With ``mlcc.load(DIR, device, hbm_budget=...)`` the arena, inputs and outputs stay on the device, and so
do the weights that fit; the other weights stay in host memory (pinned on CUDA) and are copied into a
staging pool on the device before each step that reads them. intent.json says which weights to stream
(those with the longest reuse horizon, i.e. the most compute between uses, and the cheapest to reload)
and when to start each copy (its ``prefetch`` plan: the latest step at which the transfer still hides
behind compute under the device model). A copy for a use at step ``u`` starting at step ``s`` holds a
staging slot from ``s`` through ``u``; slots are packed into the pool by offset, so two copies share
bytes only when their step intervals are disjoint.

The copies run on their own stream: a copy waits until every step before its start step has finished
(so the slot's previous occupant, whose interval ended earlier, is no longer read), and the step that
reads the weight waits for its copy's event. On CUDA these are torch.cuda streams and events; the
simulated device (``sim:TARGET``) checks that every read follows its copy; on CPU copies are synchronous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlcc.bundle.layout import align
from mlcc.bundle.memory import fixed_bytes
from mlcc.runtime.device import Device, Event

LOOKAHEADS = (1 << 30, 8, 4, 2, 1, 0)  # how many steps before its use a copy may start (the plan's, then fewer)


class StreamingError(ValueError):
    """The budget cannot hold even the arena, the inputs and outputs, and the largest step's weights."""


@dataclass(frozen=True)
class Fetch:
    weight: str   # the weights.bin tensor's name (a buffer name)
    start: int    # the step at which the copy is issued
    use: int      # the step that reads it
    offset: int   # where in the staging pool
    nbytes: int


@dataclass
class StreamPlan:
    budget: int
    fixed_bytes: int                  # arena + inputs + outputs: always on the device
    resident: list[str]               # weights kept on the device
    streamed: list[str]               # weights kept in host memory
    fetches: list[Fetch]
    pool_bytes: int
    resident_bytes: int
    starts: dict[int, list[Fetch]] = field(default_factory=dict)  # step -> fetches issued then
    uses: dict[int, list[Fetch]] = field(default_factory=dict)    # step -> fetches it reads

    @property
    def device_bytes(self) -> int:
        return self.fixed_bytes + self.resident_bytes + self.pool_bytes

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.budget, "device_bytes": self.device_bytes, "fixed_bytes": self.fixed_bytes,
                "resident_bytes": self.resident_bytes, "pool_bytes": self.pool_bytes,
                "resident": len(self.resident), "streamed": len(self.streamed), "fetches": len(self.fetches)}


def _pack(fetches: list[tuple[str, int, int, int]]) -> tuple[list[Fetch], int]:
    """Offsets for (weight, start, use, bytes) intervals: the largest first, each at the lowest offset that
    no fetch with an overlapping step interval occupies. Returns the fetches and the pool's size."""
    placed: list[Fetch] = []
    for weight, start, use, nbytes in sorted(fetches, key=lambda f: (-f[3], f[1], f[2], f[0])):
        size = align(nbytes)
        busy = sorted((p.offset, p.offset + align(p.nbytes)) for p in placed
                      if p.start <= use and start <= p.use)
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.append(Fetch(weight, start, use, offset, nbytes))
    pool = max((p.offset + align(p.nbytes) for p in placed), default=0)
    return sorted(placed, key=lambda f: (f.start, f.use, f.weight)), pool


def plan_streaming(manifest: dict[str, Any], intent: dict[str, Any], budget: int) -> StreamPlan:
    """Which weights stay resident and when each streamed one is copied, to fit ``budget`` device bytes."""
    n_steps = len(manifest["schedule"])
    weights = {w["name"]: w for w in manifest["weights"]["tensors"]}
    entries = {b["name"]: b for b in intent["buffers"]}
    uses: dict[str, list[int]] = {name: [] for name in weights}
    for step, launch in enumerate(manifest["schedule"]):
        for arg in launch["args"]:
            if arg in uses and step not in uses[arg]:
                uses[arg].append(step)
    start_of: dict[tuple[str, int], int] = {}
    for entry in intent.get("prefetch", []):
        for name in entry["buffers"]:
            for u in uses.get(name, []):
                start_of.setdefault((name, u), entry["step"])

    def fetch_start(name: str, use: int) -> int:
        # The plan's start for this use; one that wraps into the previous inference starts at step 0, the
        # earliest this inference can; a use the plan leaves out (too close to the previous use) is fetched
        # on demand, at its own step.
        s = start_of.get((name, use), use)
        return s if s <= use else 0

    def key(name: str) -> tuple:  # stream first: the longest reuse horizon, then the cheapest to reload per byte
        e = entries.get(name, {})
        horizon = e.get("reuse_horizon") or n_steps
        cost = float(e.get("eviction_cost") or 0.0) / max(1, weights[name]["bytes"])
        return (-horizon, cost, -weights[name]["bytes"], name)

    fixed = fixed_bytes(manifest)
    used = [w for w in sorted(weights, key=key) if uses[w] and weights[w]["bytes"] > 0]  # empty ones stay put
    best: StreamPlan | None = None
    for count in range(len(used) + 1):  # stream one more weight until the plan fits
        streamed = used[:count]
        resident = sorted(set(weights) - set(streamed))
        resident_bytes = sum(align(weights[w]["bytes"]) for w in resident)
        if fixed + resident_bytes > budget and count < len(used):
            continue  # cannot fit whatever the pool (the last count is planned anyway, for the error)
        # Copies started early hide behind compute but hold their slot longer: start as early as the plan
        # says if that fits, else no more than LOOKAHEAD steps ahead, down to fetching on demand.
        for lookahead in LOOKAHEADS:
            requests = [(w, max(fetch_start(w, u), u - lookahead), u, weights[w]["bytes"])
                        for w in streamed for u in uses[w]]
            plan = StreamPlan(budget, fixed, resident, sorted(streamed), *_pack(requests), resident_bytes)
            if best is None or plan.device_bytes < best.device_bytes:
                best = plan
            if plan.device_bytes <= budget:
                break
        if best.device_bytes <= budget:
            break
    assert best is not None  # the last count is always planned
    if best.device_bytes > budget:
        raise StreamingError(f"a device memory budget of {budget} bytes is too small for this bundle: it needs at "
                             f"least {best.device_bytes} (arena, inputs and outputs {fixed}, weights streamed "
                             f"through a {best.pool_bytes}-byte staging pool)")
    for f in best.fetches:
        best.starts.setdefault(f.start, []).append(f)
        best.uses.setdefault(f.use, []).append(f)
    return best


class WeightStreamer:
    """Executes a StreamPlan on a device (mlcc/runtime/device.py): host copies of the streamed weights, a
    device staging pool, a copy stream, and the events that order the copies and the steps."""

    def __init__(self, plan: StreamPlan, host_views: dict[str, Any], device: Device) -> None:
        self.plan = plan
        self.device = device
        self.host = host_views  # weight name -> host tensor (pinned)
        self.pool = device.alloc(plan.pool_bytes)
        self.slots = {(f.weight, f.use): self.pool[f.offset:f.offset + f.nbytes].view(self.host[f.weight].dtype)
                      for f in plan.fetches}
        self.copy_stream = device.new_stream("copy")
        self.step_done: dict[int, Event] = {}
        self.copied: dict[tuple[str, int], Event] = {}

    def before_step(self, step: int, buffers: dict[str, Any]) -> None:
        """Issue the copies that start at ``step``, then bind (and wait for) the weights ``step`` reads."""
        for f in self.plan.starts.get(step, []):
            if step > 0:  # the slot's last reader has run
                self.device.wait(self.copy_stream, self.step_done[step - 1])
            label = f"copy of '{f.weight}' for step {f.use}"
            self.copied[(f.weight, f.use)] = self.device.copy(self.slots[(f.weight, f.use)], self.host[f.weight],
                                                              self.copy_stream, label)
        for f in self.plan.uses.get(step, []):
            self.wait_for_copy(f)
            buffers[f.weight] = self.slots[(f.weight, f.use)]

    def wait_for_copy(self, f: Fetch) -> None:
        """The compute stream waits for the copy that fills ``f``'s slot."""
        self.device.wait(self.device.compute_stream(), self.copied.pop((f.weight, f.use)))

    def after_step(self, step: int) -> None:
        self.step_done[step] = self.device.record(self.device.compute_stream(), f"step {step} done")
