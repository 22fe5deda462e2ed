"""intent.json as typed records: per buffer of a bundle, what it is, when it is used (in schedule steps),
what losing it costs and where it wants to live; and when to start fetching the buffers that stream.
``Intent.from_json(d).to_json() == d``; every key is always written (null where it has no value), except
``kv_caches``, written only by a bundle that has a KV cache (so the sidecars of other models are unchanged)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mlcc.bundle.schemas import INTENT_SCHEMA_VERSION
from mlcc.bundle.sizes import Size

Json = dict[str, Any]
PERSISTENT = ("WEIGHT", "CONSTANT", "KV_CACHE")  # tensor classes that outlive an inference


@dataclass
class IntentBuffer:
    name: str
    tensor_class: str                 # WEIGHT, ACTIVATION, INPUT, OUTPUT, KV_CACHE, WORKSPACE, CONSTANT
    bytes: int
    dtype: str
    shape: list[Size]
    layout: list[int]
    producer: Optional[str]           # the kernel that writes it; None for inputs and weights
    consumers: list[str]
    first_step: int
    last_step: int
    uses: list[int]
    reuse_horizon: Optional[int]      # smallest gap in steps between uses (persistent: wrapping); None: used once
    eviction_cost: float              # microseconds to get it back under the device model
    tier_preference: str              # HBM, L2, HOST
    fallback_policy: str              # RELOAD, RECOMPUTE, NONE
    layer_range: Optional[list[int]]
    token_range: Optional[list[Size]]  # [start, stop) of cached tokens; sizes may be expressions (past, past+1)

    def to_json(self) -> Json:
        return {"name": self.name, "tensor_class": self.tensor_class, "bytes": self.bytes, "dtype": self.dtype,
                "shape": list(self.shape), "layout": list(self.layout), "producer": self.producer,
                "consumers": list(self.consumers), "first_step": self.first_step, "last_step": self.last_step,
                "uses": list(self.uses), "reuse_horizon": self.reuse_horizon, "eviction_cost": self.eviction_cost,
                "tier_preference": self.tier_preference, "fallback_policy": self.fallback_policy,
                "layer_range": self.layer_range, "token_range": self.token_range}

    @staticmethod
    def from_json(d: Json) -> "IntentBuffer":
        return IntentBuffer(**{k: d[k] for k in IntentBuffer.__dataclass_fields__})


@dataclass
class Prefetch:
    """At ``step``, start fetching ``buffers`` so that they arrive before their next use."""
    step: int
    buffers: list[str]

    def to_json(self) -> Json:
        return {"step": self.step, "buffers": list(self.buffers)}

    @staticmethod
    def from_json(d: Json) -> "Prefetch":
        return Prefetch(d["step"], list(d["buffers"]))


@dataclass
class KvCacheEntry:
    """A decoder cache: ``present`` (an output) is ``past`` (an input) extended by this call's tokens, so a
    runtime that keeps a request's cache between calls passes one call's present as the next call's past.
    ``bytes_per_token``: what one cached token takes (how fast a request's cache grows)."""
    past: str
    present: str
    axis: int
    bytes_per_token: int
    past_tokens: Size
    present_tokens: Size
    layer: Optional[int]

    def to_json(self) -> Json:
        return {"past": self.past, "present": self.present, "axis": self.axis, "bytes_per_token": self.bytes_per_token,
                "past_tokens": self.past_tokens, "present_tokens": self.present_tokens, "layer": self.layer}

    @staticmethod
    def from_json(d: Json) -> "KvCacheEntry":
        return KvCacheEntry(**{k: d[k] for k in KvCacheEntry.__dataclass_fields__})


@dataclass
class Intent:
    device_model: Json                # the device model the costs assume (DeviceModel.to_json, mlcc/emit/target/targets.py)
    steps: int
    step_seconds: list[float]
    buffers: list[IntentBuffer]
    prefetch: list[Prefetch]
    schema_version: int = INTENT_SCHEMA_VERSION
    kv_caches: list[KvCacheEntry] = field(default_factory=list)

    def to_json(self) -> Json:
        d = {"schema_version": self.schema_version, "device_model": self.device_model, "steps": self.steps,
             "step_seconds": list(self.step_seconds), "buffers": [b.to_json() for b in self.buffers],
             "prefetch": [p.to_json() for p in self.prefetch]}
        if self.kv_caches:
            d["kv_caches"] = [k.to_json() for k in self.kv_caches]
        return d

    @staticmethod
    def from_json(d: Json) -> "Intent":
        return Intent(d["device_model"], d["steps"], list(d["step_seconds"]),
                      [IntentBuffer.from_json(b) for b in d["buffers"]], [Prefetch.from_json(p) for p in d["prefetch"]],
                      d["schema_version"], [KvCacheEntry.from_json(k) for k in d.get("kv_caches", [])])
