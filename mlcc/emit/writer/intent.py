"""intent.json: per buffer, what it is, when it is next needed, what losing it costs,
where it wants to live and what to do if it cannot (seeds/000, section 6).

All costs assume a device model (mlcc/emit/target/targets.py). Steps index the manifest's schedule.
- reuse_horizon: the smallest gap, in steps, between consecutive uses. Persistent buffers
  (weights, constants, KV cache) wrap into the next inference, so a weight used once per
  inference has the schedule's length; a transient buffer used once has none (null).
- eviction_cost (microseconds): the cheapest way back. Weights, constants, inputs and a past KV cache
  are reloaded over the host link; a present KV cache (produced on the device) is written out and read back; an activation is either written out and read back (two
  transfers) or recomputed by re-running its producer, whichever the model says is cheaper.
- tier_preference: L2 for a small buffer reused within two steps, HOST for a persistent buffer
  whose reload hides under the compute between its uses, HBM otherwise.
- fallback_policy: RELOAD, RECOMPUTE, or NONE (outputs: never evicted).
- prefetch: for each step, the evictable buffers to start fetching then so that they arrive
  before their next use, given the modeled time of the kernels in between.
- kv_caches (bundles with a KV cache only): each past input paired with the present output that extends
  it, the token axis and the bytes one token adds: what a runtime keeping requests' caches between calls
  needs to know how each request's cache grows and which call's output is the next call's input.
"""

from __future__ import annotations

import re
from typing import Mapping

from mlcc.bundle.intent import PERSISTENT, Intent, IntentBuffer, KvCacheEntry, Prefetch
from mlcc.emit.target.targets import DeviceModel
from mlcc.hlo.buffer_assignment import Buffer, BufferPlan
from mlcc.hlo.ir import DTYPE_BYTES, Instruction
from mlcc.hlo.symbolic import upper

_LAYER = re.compile(r"(?:^|[/._])(?:h|layer|layers|block|blocks|blk)[._]?(\d+)(?=$|[/._])")


def layer_of(names: list[str]) -> list[int]:
    found = []
    for n in names:
        m = _LAYER.search(n)
        if m:
            found.append(int(m.group(1)))
    return found


def step_seconds(launches: list[tuple[Instruction, str]], plan: BufferPlan, flops: dict[str, int],
                 device: DeviceModel) -> list[float]:
    """Modeled time of each launch: its roofline bound over the bytes it reads and writes."""
    out = []
    for inst, kname in launches:
        nbytes = sum(plan.buffer_of(o).bytes for o in inst.operands) + sum(plan.buffers[b].bytes
                                                                          for b in plan.results_of(inst))
        dtype = {"f16": "fp16", "bf16": "bf16"}.get(plan.buffers[plan.results_of(inst)[0]].shape.dtype, "fp32")
        out.append(device.kernel_seconds(flops.get(kname, 0), nbytes, dtype))
    return out


def _reuse_horizon(b: Buffer, steps: int, persistent: bool) -> int | None:
    uses = sorted(set(b.uses))
    gaps = [q - p for p, q in zip(uses, uses[1:])]
    if persistent and uses:
        gaps.append(steps - uses[-1] + uses[0])
    return min(gaps) if gaps else None


def build_intent(plan: BufferPlan, launches: list[tuple[Instruction, str]], flops: dict[str, int],
                 device: DeviceModel, names: dict[str, list[str]] | None = None,
                 kv_cache: dict[str, list[int]] | None = None,
                 ranges: Mapping[str, tuple[int, int]] | None = None,
                 past_of: Mapping[str, str] | None = None) -> Intent:
    """names: buffer -> the source names it relates to (for layer ranges); kv_cache: buffer -> token range;
    past_of: present cache buffer -> the past cache buffer it extends (a kernel may write several)."""
    names = names or {}
    kv_cache = kv_cache or {}
    n_steps = len(launches)
    seconds = step_seconds(launches, plan, flops, device)
    producer: dict[str, str] = {}
    producer_step: dict[str, int] = {}
    consumers: dict[str, list[str]] = {}
    for s, (inst, kname) in enumerate(launches):
        for out in plan.results_of(inst):
            producer[out] = kname
            producer_step[out] = s
        for o in inst.operands:
            lst = consumers.setdefault(plan.value_buffer[o.name], [])
            if kname not in lst:
                lst.append(kname)

    entries = []
    for b in sorted(plan.buffers.values(), key=lambda b: b.name):
        cls = "KV_CACHE" if b.name in kv_cache else b.tensor_class
        persistent = cls in PERSISTENT
        horizon = _reuse_horizon(b, n_steps, persistent)
        reload_us = device.transfer_seconds(b.bytes) * 1e6
        if cls == "KV_CACHE" and b.name in producer_step:
            cost, policy = 2 * reload_us, "RELOAD"  # produced on the device: written out, then read back
        elif cls == "OUTPUT":
            cost, policy = reload_us, "NONE"
        elif cls == "ACTIVATION" and b.name in producer_step:
            recompute_us = seconds[producer_step[b.name]] * 1e6
            writeback_us = 2 * reload_us
            cost, policy = (recompute_us, "RECOMPUTE") if recompute_us <= writeback_us else (writeback_us, "RELOAD")
        else:
            cost, policy = reload_us, "RELOAD"
        tier = "HBM"
        if horizon is not None and horizon <= 2 and b.bytes <= device.l2_bytes // 4:
            tier = "L2"
        elif persistent and horizon is not None and _hidden(b, seconds, device):
            tier = "HOST"
        layers = layer_of(names.get(b.name, []))
        entries.append(IntentBuffer(
            name=b.name, tensor_class=cls, bytes=b.bytes, dtype=b.shape.dtype,
            shape=list(b.shape.dims), layout=list(b.shape.layout),
            producer=producer.get(b.name), consumers=consumers.get(b.name, []),
            first_step=b.first_step, last_step=b.last_step, uses=sorted(set(b.uses)),
            reuse_horizon=horizon, eviction_cost=round(cost, 6),
            tier_preference=tier, fallback_policy=policy,
            layer_range=[min(layers), max(layers)] if layers else None,
            token_range=kv_cache.get(b.name)))
    return Intent(device_model=device.to_json(), steps=n_steps, step_seconds=[float(f"{s:.9g}") for s in seconds],
                  buffers=entries, prefetch=prefetch_plan(plan, seconds, device, kv_cache, set(producer_step)),
                  kv_caches=kv_cache_pairs(plan, launches, kv_cache, names, ranges or {}, past_of))


def kv_cache_pairs(plan: BufferPlan, launches: list[tuple[Instruction, str]], kv_cache: dict[str, list],
                   names: dict[str, list[str]], ranges: Mapping[str, tuple[int, int]],
                   past_of: Mapping[str, str] | None = None) -> list[KvCacheEntry]:
    """Each past cache (an input) and the present cache (an output) the kernel that reads it produces (the
    one past_of names, when given: a kernel reading both caches writes both); a symbolic dim other than the
    token axis (a batch) counts at the top of its range."""
    pairs = []
    for inst, present in ((inst, b) for inst, _ in launches for b in plan.results_of(inst)):
        if present not in kv_cache or plan.buffers[present].tensor_class != "OUTPUT":
            continue
        for o in inst.operands:
            past = plan.value_buffer[o.name]
            if past not in kv_cache or plan.buffers[past].tensor_class != "INPUT":
                continue
            if past_of is not None and past_of.get(present) != past:
                continue
            shape = plan.buffers[present].shape
            stop = kv_cache[present][1]
            axis = next((i for i, d in enumerate(shape.dims) if d == stop), len(shape.dims) - 2)
            per_token = DTYPE_BYTES[shape.dtype]
            for i, d in enumerate(shape.dims):
                per_token *= upper(d, ranges) if i != axis else 1
            # the past's readers name its layer; a kernel writing several results reads it in a fused attention
            # whose sources may span layers (a mask shared by all), so there the present's own sources do
            layers = layer_of(names.get(present if len(plan.results_of(inst)) > 1 else past, []))
            pairs.append(KvCacheEntry(past, present, axis, per_token, kv_cache[past][1], stop,
                                      min(layers) if layers else None))
    return sorted(pairs, key=lambda k: k.past)


def _hidden(b: Buffer, seconds: list[float], device: DeviceModel) -> bool:
    """True when the compute between b's uses (wrapping) outlasts reloading b."""
    uses = sorted(set(b.uses))
    if not uses:
        return True
    total = sum(seconds)
    gaps = [sum(seconds[p + 1:q]) for p, q in zip(uses, uses[1:])]
    gaps.append(total - sum(seconds[uses[0]:uses[-1] + 1]))
    return min(gaps) >= device.transfer_seconds(b.bytes)


def prefetch_plan(plan: BufferPlan, seconds: list[float], device: DeviceModel,
                  kv_cache: dict[str, list[int]], produced: set[str] = frozenset()) -> list[Prefetch]:
    """For each use of a persistent buffer that no kernel produces (weights, the past KV cache), the
    latest step at which to start fetching it so that the transfer completes before the use."""
    n = len(seconds)
    requests = []
    for b in plan.buffers.values():
        cls = "KV_CACHE" if b.name in kv_cache else b.tensor_class
        if cls not in PERSISTENT or b.name in produced:
            continue
        for u in sorted(set(b.uses)):
            requests.append((u, b.name, device.transfer_seconds(b.bytes)))
    starts: dict[int, list[str]] = {}
    uses_of = {b.name: sorted(set(b.uses)) for b in plan.buffers.values()}
    for u, name, t in sorted(requests):
        uses = uses_of[name]
        prev = uses[uses.index(u) - 1]  # the use before this one, wrapping to the previous inference
        # Walk back from the use, adding up compute, until the transfer fits; a use that comes too soon
        # after the previous one gets no prefetch: the buffer is better kept resident in between.
        acc, s, hidden = 0.0, u, False
        for _ in range(n):
            s = (s - 1) % n
            if s == prev:
                break
            acc += seconds[s]
            if acc >= t:
                hidden = True
                break
        if hidden or (len(uses) == 1 and s == prev):
            starts.setdefault(s if hidden else (prev + 1) % n, []).append(name)
    return [Prefetch(s, sorted(set(v))) for s, v in sorted(starts.items())]
