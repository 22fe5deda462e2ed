"""Load a bundle and run it. Reads only the bundle's files, through the format's records (mlcc/bundle):
no compiler module is imported.

One schedule loop (Executable.run) runs on a device (mlcc/runtime/device.py), which alone decides how
memory is allocated, how copies and events order work, and how a kernel launches:
CPU: the bundle's Triton kernels run under Triton's interpreter, with the
interpreter launch configs the compiler chose (big tiles, few programs).
CUDA: the bundle's binaries for the device's architecture are launched directly,
each with its own launch config and grid (a target's tiles may differ from the
default "gpu" config the schedule's grid is for); a device whose architecture is
not among the bundle's targets gets the bundled sources compiled by Triton on
first use, with the default config.
sim:TARGET: the CUDA path for TARGET's binaries, on host memory, with the interpreter at the bottom and
the streams' ordering checked (mlcc/runtime/sim.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from mlcc.bundle.dtypes import (COMPLEX_NAMES, as_dtype, complex_pairs, from_complex_pairs, numpy_dtype, pack,
                                packed_bytes, torch_dtype, unpack)
from mlcc.bundle.errors import BundleError
from mlcc.bundle.layout import from_physical, to_physical
from mlcc.bundle.manifest import Count, KernelEntry, Launch, Manifest
from mlcc.bundle.memory import BudgetSpecError, footprint, parse_budget
from mlcc.bundle.schemas import SUPPORTED_SCHEMAS
from mlcc.bundle.sizes import SizeError, eval_size
from mlcc.runtime.arena import GrowingArena, is_growing
from mlcc.runtime.cuda import CudaDevice
from mlcc.runtime.device import Device, gpu_grid
from mlcc.runtime.interpreter import CpuDevice
from mlcc.runtime.sim import SimDevice, sim_targets
from mlcc.runtime.policies import make_policy
from mlcc.runtime.residency import Engine
from mlcc.runtime.streaming import ItemStore, ModelBinding, minimum_budget
from mlcc.runtime.workload import Model, Workload

__all__ = ["BundleError", "Executable", "load"]


def _host_bytes(arr: np.ndarray):
    import torch
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return torch.from_numpy(flat.copy())


def open_device(spec: str, kernels: list[KernelEntry]) -> Device:
    """The device named ``spec``: cpu, cuda, cuda:N, sim:TARGET or sim:TARGET:N (TARGET one of the bundle's)."""
    if spec == "cpu":
        return CpuDevice()
    if spec == "cuda" or spec.startswith("cuda:"):
        return CudaDevice(spec)
    if spec.startswith("sim:"):
        return SimDevice(spec, sim_targets(kernels))
    raise BundleError(f"unknown device '{spec}' (cpu, cuda, cuda:N or sim:TARGET)")


def _typed(raw, dtype_name: str):
    """Bytes seen as ``dtype_name``; no bytes, an empty tensor of that dtype: torch.from_numpy gives an
    empty array stride 0, and .view() of it as a wider dtype raises 'self.stride(-1) must be 1'."""
    import torch
    if raw.numel() == 0:
        return torch.empty(0, dtype=torch_dtype(dtype_name), device=raw.device)
    return raw.view(torch_dtype(dtype_name))


def _to_numpy(t, dtype: np.dtype) -> np.ndarray:
    import torch
    raw = t.contiguous().view(torch.uint8).numpy()
    return raw.view(dtype)


def torch_bytes(path: Path):
    """A file's bytes as a host uint8 tensor."""
    import torch
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8))


def read_manifest(path: Path) -> tuple[dict[str, Any], Manifest]:
    """A bundle's manifest.json, as JSON and as records; BundleError if it is missing, not JSON, of a schema
    version this runtime does not read, or missing what the format requires."""
    try:
        document = json.loads((path / "manifest.json").read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: no manifest.json (not an mlcc bundle)") from None
    except ValueError as e:
        raise BundleError(f"{path}/manifest.json: not valid JSON ({e})") from None
    version = document.get("schema_version") if isinstance(document, dict) else None
    if version not in SUPPORTED_SCHEMAS:
        raise BundleError(f"{path}: bundle schema {version} is not supported "
                          f"(this runtime reads {', '.join(map(str, SUPPORTED_SCHEMAS))})")
    try:
        return document, Manifest.from_json(document)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BundleError(f"{path}/manifest.json: not a bundle manifest ({type(e).__name__}: {e})") from None


class Executable:
    """A loaded bundle. ``run({input name: array}) -> {output name: array}``."""

    def __init__(self, path: str | Path, device: str = "cpu", hbm_budget: int | str | None = None,
                 policy: str = "intent", _session: Any = None) -> None:
        self.path = Path(path)
        self.manifest, m = read_manifest(self.path)  # the JSON (for callers), and the records this class reads
        self.records = m
        self.backend = _session[2] if _session is not None else open_device(device, m.kernels)
        self.device = device
        self._kernels: dict[str, KernelEntry] = {k.name: k for k in m.kernels}
        self._fns: dict[str, Any] = {}
        self._arch = self.backend.arch
        self._static: dict[str, Any] = {}
        self.streamer: ModelBinding | None = None  # under a budget: binds the engine's items to the steps
        self._name = self.path.name
        self._workload: Workload | None = None
        # A symbol with no upper end: the arena is allocated per run, as large as the run needs (runtime/arena.py).
        self._growing = GrowingArena(m) if is_growing(m.memory_plan) else None
        if self._growing is not None and (hbm_budget is not None or _session is not None):
            raise BundleError(f"{self.path}: a device memory budget (or a session's) needs every symbol to have "
                              f"a range, and "
                              f"{', '.join(k for k, (_, hi) in m.symbols.items() if hi is None)} has none "
                              f"(compile with --shape NAME=MIN..MAX)")
        with self.backend.guard():
            if self._growing is None:
                self._arena = self.backend.alloc(m.memory_plan.arena_bytes, zero=True)
            weights_path = self.path / m.weights.file
            if _session is not None:
                self._name = _session[0]
                self.streamer = _session[1]
            elif hbm_budget is None:
                self._weights = self.backend.upload(torch_bytes(weights_path))
                for w in m.weights.tensors:
                    self._static[w.name] = self._view(self._weights, w.offset, w.bytes, w.spec.numpy_dtype)
            else:
                self._load_streaming(weights_path, hbm_budget, policy)
            for b in m.memory_plan.buffers if self._growing is None else []:
                self._static[b.name] = self._view(self._arena, b.offset, b.bytes, b.spec.numpy_dtype)

    def _load_streaming(self, weights_path: Path, hbm_budget: int | str, policy: str) -> None:
        """Every weight an item of a one-model workload: the residency engine places what fits at load time and
        moves the rest, run after run, as ``policy`` decides (mlcc/runtime/streaming.py)."""
        try:
            intent = json.loads((self.path / "intent.json").read_text())
        except FileNotFoundError:
            raise BundleError(f"{self.path}: no intent.json, which a memory budget needs") from None
        model = Model.of(self._name, self.manifest, intent, manage_kv=False)
        work = Workload({self._name: model})
        try:
            engine = Engine(work, make_policy(policy), hbm_budget, link_bandwidth_of(intent), footprint(self.manifest))
        except (BudgetSpecError, ValueError) as e:
            raise BundleError(f"{self.path}: {e}") from None
        least = minimum_budget(engine)
        if parse_budget(hbm_budget, footprint(self.manifest)) < least:
            raise BundleError(f"{self.path}: a device memory budget of {parse_budget(hbm_budget, footprint(self.manifest))} "
                              f"bytes is too small for this bundle: it needs at least {least} (arena, inputs and "
                              f"outputs {work.fixed}, and the weights its largest step reads)")
        store = ItemStore(engine, self.backend)
        host = self.backend.pin(torch_bytes(weights_path))
        for w in self.records.weights.tensors:
            key = f"{self._name}:w:{w.name}"
            if key in work.items:
                store.host[key] = host[w.offset:w.offset + w.bytes]
            else:  # a weight no step reads (or an empty one): stays resident, as it costs nothing to keep
                self._static[w.name] = self._view(self.backend.upload(host[w.offset:w.offset + w.bytes].clone()), 0,
                                                  w.bytes, w.spec.numpy_dtype)
        store.preload()
        self._workload = work
        self.streamer = ModelBinding(self._name, store, {w.name: w.spec.numpy_dtype for w in self.records.weights.tensors}, {})

    @staticmethod
    def _view(base, offset: int, nbytes: int, dtype_name: str):
        return _typed(base[offset:offset + nbytes], dtype_name)

    # ---- kernels
    def _function(self, name: str) -> Any:
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = self.backend.load(self.path, self._kernels[name])
        return fn

    def _grid(self, kernel: KernelEntry, launch: Launch, env: Mapping[str, int]) -> tuple:
        """The grid of the binary a GPU of this executable's architecture runs (see device.gpu_grid)."""
        return gpu_grid(kernel, self._arch, launch, env)

    # ---- running
    def _bind_symbols(self, arrays: Mapping[str, np.ndarray]) -> dict[str, int]:
        """Each symbol's value, read off the inputs' shapes; BundleError naming the input and dim when a
        shape disagrees with the manifest or a size is outside the symbol's range."""
        ranges = self.records.symbols
        env: dict[str, int] = {}
        for s in self.records.inputs:  # a dim that is a bare symbol name binds it
            for k, (d, n) in enumerate(zip(s.spec.shape, arrays[s.name].shape)):
                if isinstance(d, str) and d in ranges and d not in env:
                    lo, hi = ranges[d]
                    if not lo <= n <= (n if hi is None else hi):
                        raise BundleError(f"input '{s.name}': dim {k} ('{d}') is {n}, the bundle was built "
                                          f"for {d} in {lo}..{'' if hi is None else hi}")
                    env[d] = int(n)
        for s in self.records.inputs:
            arr = arrays[s.name]
            try:
                want = [eval_size(d, env) for d in s.spec.shape]
            except SizeError as e:
                raise BundleError(f"input '{s.name}': shape {s.spec.shape}: {e}") from None
            if list(arr.shape) != want:
                raise BundleError(f"input '{s.name}': shape {list(arr.shape)}, the bundle expects "
                                  f"{s.spec.shape}" + (f" = {want} with {_show(env)}" if env else ""))
        return env

    def _check_inputs(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        spec = {i.name: i.spec for i in self.records.inputs}
        missing = [n for n in spec if n not in inputs]
        extra = [n for n in inputs if n not in spec]
        if missing or extra:
            raise BundleError(f"inputs do not match the bundle: missing {missing}, unexpected {extra}")
        complex_inputs = {i.name for i in self.records.inputs if i.complex}
        out = {}
        for name, s in spec.items():
            if name in complex_inputs:  # given complex, passed as its real pairs (a view where it is contiguous)
                out[name] = self._complex_input(name, inputs[name], s)
                continue
            arr = as_dtype(inputs[name], s.numpy_dtype)  # bf16 read from an .npz comes back as |V2
            want = numpy_dtype(s.numpy_dtype)
            if arr.dtype != want:
                if not np.can_cast(arr.dtype, want, casting="same_kind"):
                    raise BundleError(f"input '{name}': dtype {arr.dtype}, the bundle expects {want}")
                arr = arr.astype(want)
            if len(arr.shape) != len(s.shape):
                raise BundleError(f"input '{name}': shape {list(arr.shape)}, the bundle expects {s.shape}")
            out[name] = arr
        return out

    @staticmethod
    def _complex_input(name: str, value: Any, s: Any) -> np.ndarray:
        """A complex input (manifest ``"complex": true``) as the real pairs its buffer holds."""
        arr = np.asarray(value)
        want = np.dtype(COMPLEX_NAMES[s.numpy_dtype])
        if arr.dtype != want:
            if not np.can_cast(arr.dtype, want, casting="same_kind"):
                raise BundleError(f"input '{name}': dtype {arr.dtype}, the bundle expects {want}")
            arr = arr.astype(want)
        if arr.ndim != len(s.shape) - 1:
            raise BundleError(f"input '{name}': shape {list(arr.shape)}, the bundle expects {s.shape[:-1]} ({want})")
        return complex_pairs(arr)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Outputs for ``inputs``. Under a budget each run is one more call of the engine's workload."""
        if self._workload is not None:
            self._workload.add_call(self._name)
        return self._run(inputs)

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        m = self.records
        arrays = self._check_inputs(inputs)
        env = self._bind_symbols(arrays)
        device = self.backend
        managed = self.streamer.managed if self.streamer is not None else set()  # KV caches a session keeps
        with device.guard():
            buffers = dict(self._static)
            if self._growing is not None:
                buffers.update(self._growing.views(env, lambda n: device.alloc(n, zero=True), self._view))
            for s in m.inputs:
                if s.buffer in managed:
                    continue
                phys = to_physical(arrays[s.name], s.spec.layout)
                if s.packed:  # a 4- or 2-bit input's buffer holds its values packed (its layout is row-major)
                    phys = pack(phys, s.spec.numpy_dtype)
                buffers[s.buffer] = _typed(device.upload(_host_bytes(phys)), s.spec.numpy_dtype)
            counted = {c.symbol for launch in m.schedule for c in launch.counts}
            at_bound = {**env, **{c: m.symbols[c][1] for c in counted}}  # data-dependent outputs: room for the bound
            for s in m.outputs:
                if s.buffer in managed:
                    continue
                n = int(np.prod([eval_size(d, at_bound) for d in s.spec.shape], dtype=np.int64))
                itemsize = numpy_dtype(s.spec.numpy_dtype).itemsize
                nbytes = packed_bytes(n, s.spec.numpy_dtype) if s.packed else n * itemsize
                buffers[s.buffer] = _typed(device.alloc(nbytes)[:nbytes], s.spec.numpy_dtype)
            if self.streamer is not None:
                self.streamer.begin_call(buffers)
            for step, launch in enumerate(m.schedule):
                k = self._kernels[launch.kernel]
                fn = self._function(launch.kernel)
                if self.streamer is not None:
                    self.streamer.before_step(step, buffers)
                args = [buffers[b] for b in launch.args] + [env[s] for s in launch.scalars]
                device.launch(step, launch, k, fn, args, env)
                for c in launch.counts:
                    env[c.symbol] = self._count(c, buffers[c.buffer])
                if self.streamer is not None:
                    self.streamer.after_step(step)
            device.synchronize()
            out_dims = {s.name: [eval_size(d, env) for d in s.spec.shape] for s in m.outputs}
            result = {}
            for s in m.outputs:
                if s.buffer in managed:
                    continue
                flat = _to_numpy(device.download(buffers[s.buffer]), numpy_dtype(s.spec.numpy_dtype))
                n = int(np.prod(out_dims[s.name], dtype=np.int64))  # a data-dependent one: its count
                flat = unpack(flat, s.spec.numpy_dtype, n) if s.packed else flat[:n]
                # (np.ascontiguousarray would turn a rank-0 result into shape (1,))
                result[s.name] = np.array(from_physical(flat, out_dims[s.name], s.spec.layout), order="C")
                if s.complex:  # its real pairs, given back as the complex array (a view)
                    result[s.name] = from_complex_pairs(result[s.name])
        return result

    def _count(self, c: Count, buffer: Any) -> int:
        """A data-dependent dim's run-time count, read back from the s64 its launch wrote at element 0 of buffer;
        BundleError (exit 65) naming the tensor when it is outside the symbol's range: never a launch past the
        bound its buffers were planned for."""
        self.backend.synchronize()
        n = int(self.backend.download(buffer[:1]).view(-1)[0])
        lo, hi = self.records.symbols[c.symbol]
        if not lo <= n <= hi:
            raise BundleError(f"tensor '{c.tensor}': its data-dependent dim '{c.symbol}' is {n} at run time, "
                              f"above the bound {hi} the bundle was built for (compile with --shape {c.symbol}=..{n} "
                              f"or more)")
        return n

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.records.inputs]

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.records.outputs]


def _show(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items()))


def link_bandwidth_of(intent: Mapping[str, Any]) -> float:
    return float(intent["device_model"]["host_link_bandwidth"])


def load(path: str | Path, device: str = "cpu", hbm_budget: int | str | None = None,
         policy: str = "intent") -> Executable:
    """A loaded bundle. ``hbm_budget`` (bytes, or a percentage of the bundle's footprint such as "50%")
    caps the device memory it holds: weights beyond it move between host and device memory as ``policy``
    decides (mlcc/runtime/policies.py: intent, lru, static, fnu), the plan ``mlcc simulate`` models."""
    return Executable(path, device, hbm_budget, policy)
