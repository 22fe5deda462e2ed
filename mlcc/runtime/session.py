"""Several bundles sharing one device under one budget, called as a trace says (mlcc/runtime/traces.py).

A session keeps each request's KV cache between calls (for bundles whose intent.json lists ``kv_caches``): a
call's present caches are the next call's past ones, on the device or, when the policy evicted them, in host
memory. Every weight and cache is an item of one workload, moved by one residency engine
(mlcc/runtime/residency.py) with one policy: the engine ``mlcc simulate --trace`` runs, so the bytes a
replay copies (counted by the copies, mlcc/runtime/streaming.py) are the bytes the simulator reports.

    s = Session({"encoder": "build/enc", "decoder": "build/dec"}, device="sim:sm_90", hbm_budget="50%")
    s.call("encoder", {"x": image})
    s.call("decoder", {"input_ids": ids}, request="r1")       # past caches: the session's
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from mlcc.bundle.dtypes import complex_input
from mlcc.bundle.errors import BundleError
from mlcc.bundle.memory import BudgetSpecError, largest_sizes
from mlcc.bundle.sizes import eval_size
from mlcc.runtime.bundle import Executable, link_bandwidth_of, open_device, read_manifest, torch_bytes
from mlcc.runtime.policies import make_policy
from mlcc.runtime.residency import Engine
from mlcc.runtime.streaming import ItemStore, ModelBinding
from mlcc.runtime.traces import Trace, TraceCall
from mlcc.runtime.workload import Model, Workload, WorkloadError, weight_key


class Session:
    """``bundles``: name -> bundle directory. ``trace``: the calls to come, when known (a replay); else calls
    are appended as they are made. Policies other than the offline ``oracle`` never look past the current call."""

    def __init__(self, bundles: Mapping[str, str | Path], device: str = "cpu", hbm_budget: Any = "100%",
                 policy: str = "intent", trace: Optional[Trace] = None) -> None:
        models = {}
        self.paths = {name: Path(p) for name, p in bundles.items()}
        for name, p in self.paths.items():
            document, _ = read_manifest(p)
            try:
                intent = json.loads((p / "intent.json").read_text())
            except FileNotFoundError:
                raise BundleError(f"{p}: no intent.json, which a session needs") from None
            models[name] = Model.of(name, document, intent)
        self.work = Workload(models)
        self.trace = trace
        if trace is not None:
            trace.fill(self.work)
        self.next_call = 0
        first = next(iter(models.values()))
        try:
            self.engine = Engine(self.work, make_policy(policy), hbm_budget, link_bandwidth_of(first.intent),
                                 self.work.footprint())
        except (BudgetSpecError, ValueError) as e:
            raise BundleError(f"session: {e}") from None
        kernels = [k for p in self.paths.values() for k in read_manifest(p)[1].kernels]
        self.device = open_device(device, kernels)
        self.store = ItemStore(self.engine, self.device)
        self.executables: dict[str, Executable] = {}
        with self.device.guard():
            for name, p in self.paths.items():
                m = models[name]
                exe_records = read_manifest(p)[1]
                dtypes = {w.name: w.spec.numpy_dtype for w in exe_records.weights.tensors}
                dtypes.update({s.buffer: s.spec.numpy_dtype for s in exe_records.inputs + exe_records.outputs})
                binding = ModelBinding(name, self.store, dtypes, {k["past"]: k["present"] for k in m.kv})
                exe = Executable(p, device, _session=(name, binding, self.device))  # one device: one set of streams
                host = self.device.pin(torch_bytes(p / exe_records.weights.file))
                for w in exe_records.weights.tensors:
                    key = weight_key(name, w.name)
                    if key in self.work.items:
                        self.store.host[key] = host[w.offset:w.offset + w.bytes]
                    else:
                        exe._static[w.name] = exe._view(self.device.upload(host[w.offset:w.offset + w.bytes].clone()),
                                                        0, w.bytes, w.spec.numpy_dtype)
                self.executables[name] = exe
            self.store.preload()

    @property
    def copied_bytes(self) -> int:
        return self.store.copied_bytes

    def call(self, model: str, inputs: Mapping[str, Any], request: Optional[str] = None, tokens: int = 1,
             last: bool = False) -> dict[str, np.ndarray]:
        """Run one call; a KV-cache bundle's past caches come from the session (do not pass them)."""
        if self.trace is not None:
            if self.next_call >= len(self.work.calls):
                raise WorkloadError("the trace has no more calls")
            want = self.work.calls[self.next_call]
            if (want.model, want.request, want.tokens) != (model, request, tokens):
                raise WorkloadError(f"call {self.next_call}: the trace says {want.model} ({want.request}), "
                                    f"not {model} ({request})")
        else:
            self.work.add_call(model, request, tokens, last)
        call = self.work.calls[self.next_call]
        self.next_call += 1
        exe = self.executables[model]
        feeds = dict(inputs)
        m = self.work.models[model]
        if m.kv:  # shape-only stand-ins for the caches the session binds (they bind the symbols)
            env = {m.kv_symbol(): call.past}
            for s in exe.records.inputs:
                if s.buffer in exe.streamer.managed:
                    shape = [eval_size(d, env) for d in s.spec.shape]
                    feeds[s.name] = np.empty(shape, dtype=np.dtype(s.spec.numpy_dtype))
        return exe._run(feeds)

    def replay(self, feeds: Mapping[str, Mapping[str, Any]]) -> list[dict[str, np.ndarray]]:
        """Every call of the trace, with ``feeds[model]`` as each call's inputs (a KV bundle's past caches are
        the session's)."""
        if self.trace is None:
            raise WorkloadError("a replay needs the session's trace")
        outs = []
        for e in self.trace.events:
            if isinstance(e, TraceCall):
                outs.append(self.call(e.model, feeds[e.model], e.request, e.tokens))
        return outs


def random_inputs(session: Session, model: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for a model's calls in a replay: integers in 0..7 (valid token ids and indices), normal
    floats; the sizes at the top of their symbols' ranges, but the caches the session keeps."""
    exe = session.executables[model]
    rng = np.random.default_rng(seed)
    env = largest_sizes(exe.manifest)
    m = session.work.models[model]
    if m.kv_symbol() is not None:
        env[m.kv_symbol()] = 0
    out = {}
    for s in exe.records.inputs:
        if s.buffer in exe.streamer.managed:
            continue
        shape = [eval_size(d, env) for d in s.spec.shape]
        dtype = np.dtype(s.spec.numpy_dtype) if s.spec.numpy_dtype != "bfloat16" else np.dtype(np.float32)
        if s.complex:  # a complex input: normal real and imaginary parts (its buffer's shape ends in the pair)
            out[s.name] = complex_input(rng, shape[:-1], s.spec.numpy_dtype)
        elif np.issubdtype(dtype, np.integer) or dtype == np.bool_:
            out[s.name] = rng.integers(0, 8, shape).astype(dtype)
        else:
            out[s.name] = rng.standard_normal(shape).astype(dtype)
    return out

