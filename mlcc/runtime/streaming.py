"""Run bundles in less device memory than they need: the residency engine (mlcc/runtime/residency.py) decides,
step by step, what is on the device, and this module does it on a device (mlcc/runtime/device.py).

With ``mlcc.load(DIR, device, hbm_budget=..., policy=...)`` (or a Session of several bundles,
mlcc/runtime/session.py) the arena and the inputs and outputs stay on the device; the weights (and, in a
session, each request's KV cache) are *items* the engine moves. The engine is the one the simulator runs
(``mlcc simulate``), with the same policy code, so the plan that runs is the plan simulated; the bytes this
module copies are counted here, from the copies it makes (``ItemStore.copied_bytes``).

Each resident item is a device allocation of its own. A fetch allocates it and copies the host bytes in on a
copy stream; the copy first waits for the compute stream's last finished step (memory just freed by an
eviction may be what it is given), and the step that reads the item waits for the copy's event. A KV cache
evicted while its request still needs it is copied back to host memory first (after the device
synchronizes). On CUDA these are torch.cuda streams and events; the simulated device (``sim:TARGET``)
checks every read follows its copy; on CPU copies are synchronous.
"""

from __future__ import annotations

from typing import Any, Optional

from mlcc.bundle.dtypes import torch_dtype
from mlcc.runtime.device import Device, Event
from mlcc.runtime.residency import Action, Engine
from mlcc.runtime.workload import Step


class StreamingError(ValueError):
    """The budget cannot hold the fixed bytes and what one step needs at once."""


def _typed(raw: Any, dtype_name: str) -> Any:
    import torch
    if raw.numel() == 0:
        return torch.empty(0, dtype=torch_dtype(dtype_name), device=raw.device)
    return raw.view(torch_dtype(dtype_name))


class ItemStore:
    """The device and host bytes of a workload's items, changed only by the engine's actions."""

    def __init__(self, engine: Engine, device: Device) -> None:
        self.engine = engine
        self.device = device
        self.host: dict[str, Any] = {}          # item -> host bytes (uint8; pinned)
        self.dev: dict[str, Any] = {}           # item -> device bytes (uint8, the copy's size)
        self.pending: dict[str, Event] = {}     # item -> the event of the copy that fills it
        self.copy_stream = device.new_stream("copy")
        self.last_done: Optional[Event] = None
        self.copied_bytes = 0                   # host <-> device bytes copied while running (not at load)
        self.preload_bytes = 0
        self.copies = 0

    def preload(self) -> None:
        self._perform(self.engine.preload(), counted=False)

    def perform(self, actions: list[Action]) -> None:
        self._perform(actions, counted=True)

    def _perform(self, actions: list[Action], counted: bool) -> None:
        items = self.engine.work.items
        for a in actions:
            item = items[a.key]
            if a.op in ("fetch", "prefetch"):
                dst = self.device.alloc(item.bytes)[:item.moved]
                if self.last_done is not None:  # the slot may be memory a finished step just released
                    self.device.wait(self.copy_stream, self.last_done)
                src = self.host[a.key]
                self.pending[a.key] = self.device.copy(dst, src, self.copy_stream, f"copy of '{a.key}'")
                self.dev[a.key] = dst
                if counted:
                    self.copied_bytes += src.numel()
                    self.copies += 1
                else:
                    self.preload_bytes += src.numel()
            elif a.op == "writeback":
                self.device.synchronize()
                self.host[a.key] = self.device.pin(self.device.download(self.dev[a.key]).clone())
                self.copied_bytes += self.host[a.key].numel()
                self.copies += 1
            elif a.op in ("evict", "free"):
                self.dev.pop(a.key, None)
                ev = self.pending.pop(a.key, None)
                if ev is not None:  # a prefetch never read: its memory is not reused before its copy is done
                    self.device.wait(self.device.compute_stream(), ev)
                if a.op == "free":
                    self.host.pop(a.key, None)
            elif a.op == "born":
                self.dev[a.key] = self.device.alloc(item.bytes)[:item.moved]

    def tensor(self, key: str) -> Any:
        """An item's device bytes, once the compute stream has waited for the copy that fills them."""
        ev = self.pending.pop(key, None)
        if ev is not None:
            self.wait_for_copy(key, ev)
        return self.dev[key]

    def wait_for_copy(self, key: str, ev: Event) -> None:
        self.device.wait(self.device.compute_stream(), ev)

    def step_done(self, label: str) -> None:
        self.last_done = self.device.record(self.device.compute_stream(), label)


class ModelBinding:
    """One bundle's steps in the engine's workload: binds the items each step reads to its buffers."""

    def __init__(self, name: str, store: ItemStore, dtypes: dict[str, str], present_of: dict[str, str]) -> None:
        self.name = name
        self.store = store
        self.dtypes = dtypes            # buffer -> dtype name (weights, KV inputs and outputs)
        self.present_of = present_of    # past buffer -> present buffer
        self.managed = set(present_of) | set(present_of.values())

    def begin_call(self, buffers: dict[str, Any]) -> None:
        """A request's first call reads empty caches: no item, an empty tensor."""
        engine = self.store.engine
        call = engine.work.calls[engine.work.steps[engine.t].call]
        if call.past == 0:
            for past in self.present_of:
                buffers[past] = _typed(self.store.device.alloc(0)[:0], self.dtypes[past])

    def before_step(self, step: int, buffers: dict[str, Any]) -> None:
        engine = self.store.engine
        st: Step = engine.work.steps[engine.t]
        if st.model != self.name or st.s != step:
            raise RuntimeError(f"the engine is at step {st.s} of '{st.model}', the run at step {step} of "
                               f"'{self.name}'")
        self.store.perform(engine.step())
        call = engine.work.calls[st.call]
        for key in st.needs:
            item = engine.work.items[key]
            buf = item.buffer
            if item.kind == "kv" and int(key.rsplit(":", 1)[1]) != call.past:
                buf = self.present_of[buf]
            buffers[buf] = _typed(self.store.tensor(key), self.dtypes[buf])

    def after_step(self, step: int) -> None:
        self.store.step_done(f"step {step} of '{self.name}' done")
        self.store.perform(self.store.engine.finish_step())


def minimum_budget(engine: Engine) -> int:
    """The fixed bytes and the most one step of the model needs at once (the least budget that can run)."""
    work = engine.work
    per_step: dict[tuple[str, int], int] = {}
    for m in work.models.values():
        for w, uses in m.weight_uses.items():
            for u in uses:
                per_step[(m.name, u)] = per_step.get((m.name, u), 0) + work.items[f"{m.name}:w:{w}"].bytes
    return work.fixed + max(per_step.values(), default=0)
