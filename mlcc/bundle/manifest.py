"""manifest.json as typed records: what the compiler writes (mlcc/emit/writer) and the runtime reads.

Each record's ``to_json()`` gives the dict that the bundle's JSON text (``schemas.dumps``) is made of, and
``from_json()`` reads one back, so ``Manifest.from_json(m).to_json() == m`` for every manifest the schema
allows. Optional keys (``signature``, ``scalars``, ``symbols``, a binary's ``config``) are left out when
absent, as older bundles have them. ``model``, ``build`` and ``stats`` are free-form dicts (the schema only
names some of their keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mlcc.bundle.sizes import Size

Json = dict[str, Any]


@dataclass
class TensorSpec:
    """A tensor's element type and shape: the IR dtype, numpy's name for it, dims (ints or size
    expressions) and minor-to-major layout."""
    dtype: str
    numpy_dtype: str
    shape: list[Size]
    layout: list[int]

    def to_json(self) -> Json:
        return {"dtype": self.dtype, "numpy_dtype": self.numpy_dtype, "shape": list(self.shape),
                "layout": list(self.layout)}

    @staticmethod
    def from_json(d: Json) -> "TensorSpec":
        return TensorSpec(d["dtype"], d["numpy_dtype"], list(d["shape"]), list(d["layout"]))


@dataclass
class IoTensor:
    """An input or output: its name for the user and the buffer that holds it. ``packed``: a 4- or 2-bit
    integer tensor whose buffer holds its values packed (mlcc/bundle/dtypes.py pack), ceil(n * bits / 8)
    bytes. ``complex``: the user's value is complex (complex64 for an f32 spec, complex128 for f64) of the
    spec's shape without its last dim, and the buffer (the spec) holds its real pairs, last dim 2 (real,
    imaginary; mlcc/bundle/dtypes.py complex_pairs). Each key is written only when true."""
    name: str
    buffer: str
    spec: TensorSpec
    packed: bool = False
    complex: bool = False

    def to_json(self) -> Json:
        d = {"name": self.name, "buffer": self.buffer, **self.spec.to_json()}
        if self.packed:
            d["packed"] = True
        if self.complex:
            d["complex"] = True
        return d

    @staticmethod
    def from_json(d: Json) -> "IoTensor":
        return IoTensor(d["name"], d["buffer"], TensorSpec.from_json(d), bool(d.get("packed", False)),
                        bool(d.get("complex", False)))


@dataclass
class LaunchConfig:
    """A kernel's constexpr values, grid (ints or size expressions), warps and pipeline stages."""
    constexprs: dict[str, int]
    grid: list[Size]
    num_warps: int = 4
    num_stages: int = 2

    def to_json(self) -> Json:
        return {"constexprs": dict(sorted(self.constexprs.items())), "grid": list(self.grid),
                "num_warps": self.num_warps, "num_stages": self.num_stages}

    @staticmethod
    def from_json(d: Json) -> "LaunchConfig":
        return LaunchConfig(dict(d["constexprs"]), list(d["grid"]), d["num_warps"], d["num_stages"])


@dataclass
class Binary:
    """One kernel compiled for one target: the binary and Triton's metadata, and what it launches with."""
    path: str
    metadata: str
    shared: int
    num_warps: int
    num_stages: int
    function: str
    config: Optional[LaunchConfig] = None   # absent in older bundles: the kernel's gpu config
    config_from: Optional[str] = None       # "heuristic" or "tuning-db"

    def to_json(self) -> Json:
        d: Json = {"path": self.path, "metadata": self.metadata, "shared": self.shared, "num_warps": self.num_warps,
                   "num_stages": self.num_stages, "function": self.function}
        if self.config is not None:
            d["config"] = self.config.to_json()
        if self.config_from is not None:
            d["config_from"] = self.config_from
        return d

    @staticmethod
    def from_json(d: Json) -> "Binary":
        return Binary(d["path"], d["metadata"], d["shared"], d["num_warps"], d["num_stages"], d["function"],
                      LaunchConfig.from_json(d["config"]) if "config" in d else None, d.get("config_from"))


@dataclass
class KernelEntry:
    """A kernel: its source file, argument types, per-target binaries and the two default launch configs."""
    name: str
    source: str
    template: str
    arg_types: list[str]
    binaries: dict[str, Binary]
    gpu: LaunchConfig
    interpreter: LaunchConfig
    flops: int
    ops: list[str]
    signature: str = ""   # the tuning database's key; left out when empty

    def to_json(self) -> Json:
        d: Json = {"name": self.name, "source": self.source, "template": self.template,
                   "arg_types": list(self.arg_types), "binaries": {t: b.to_json() for t, b in self.binaries.items()},
                   "gpu": self.gpu.to_json(), "interpreter": self.interpreter.to_json(), "flops": self.flops,
                   "ops": list(self.ops)}
        if self.signature:
            d["signature"] = self.signature
        return d

    @staticmethod
    def from_json(d: Json) -> "KernelEntry":
        return KernelEntry(d["name"], d["source"], d["template"], list(d["arg_types"]),
                           {t: Binary.from_json(b) for t, b in d["binaries"].items()},
                           LaunchConfig.from_json(d["gpu"]), LaunchConfig.from_json(d["interpreter"]),
                           d["flops"], list(d["ops"]), d.get("signature", ""))


@dataclass
class Launch:
    """One step of the schedule: a kernel launched on buffers (operands, then results) and symbol values.
    The step's instruction, source ops, flops and bytes are informational: left out when None."""
    step: int
    kernel: str
    args: list[str]
    grid: list[Size]
    interpreter_grid: list[Size]
    scalars: list[str] = field(default_factory=list)  # left out when empty
    instruction: Optional[str] = None
    ops: Optional[list[str]] = None
    flops: Optional[int] = None
    bytes_read: Optional[int] = None
    bytes_written: Optional[int] = None
    # run-time counts this launch writes (schema 6): each binds a symbol to the s64 at element 0 of a buffer,
    # read back once the launch has run; left out when empty
    counts: list["Count"] = field(default_factory=list)

    _INFO = ("instruction", "ops", "flops", "bytes_read", "bytes_written")

    def to_json(self) -> Json:
        d: Json = {"step": self.step, "kernel": self.kernel, "args": list(self.args), "grid": list(self.grid),
                   "interpreter_grid": list(self.interpreter_grid)}
        if self.scalars:
            d["scalars"] = list(self.scalars)
        if self.counts:
            d["counts"] = [c.to_json() for c in self.counts]
        d.update({k: getattr(self, k) for k in self._INFO if getattr(self, k) is not None})
        return d

    @staticmethod
    def from_json(d: Json) -> "Launch":
        return Launch(d["step"], d["kernel"], list(d["args"]), list(d["grid"]), list(d["interpreter_grid"]),
                      list(d.get("scalars", [])), **{k: d[k] for k in Launch._INFO if k in d},
                      counts=[Count.from_json(c) for c in d.get("counts", [])])


@dataclass
class Count:
    """A data-dependent dim's run-time count: the s64 at element 0 of ``buffer``, the value of ``symbol`` (in the
    symbol's range, [0, bound]); ``tensor`` is the model's output of the op that counts, for errors."""
    symbol: str
    buffer: str
    tensor: str

    def to_json(self) -> Json:
        return {"symbol": self.symbol, "buffer": self.buffer, "tensor": self.tensor}

    @staticmethod
    def from_json(d: Json) -> "Count":
        return Count(d["symbol"], d["buffer"], d["tensor"])


@dataclass
class ArenaBuffer:
    """An activation's place in the arena and the steps it lives through."""
    name: str
    bytes: Size   # a number, or (a symbol with no upper end) an expression over the symbols
    offset: Size
    first_step: int
    last_step: int
    in_place_of: Optional[str]   # always written (null when it has its own bytes)
    spec: TensorSpec

    def to_json(self) -> Json:
        return {"name": self.name, "bytes": self.bytes, "offset": self.offset, "first_step": self.first_step,
                "last_step": self.last_step, "in_place_of": self.in_place_of, **self.spec.to_json()}

    @staticmethod
    def from_json(d: Json) -> "ArenaBuffer":
        return ArenaBuffer(d["name"], d["bytes"], d["offset"], d["first_step"], d["last_step"], d["in_place_of"],
                           TensorSpec.from_json(d))


@dataclass
class MemoryPlan:
    arena_bytes: Size  # a number, or (a symbol with no upper end) an expression evaluated per run
    lower_bound_bytes: int
    alignment: int
    buffers: list[ArenaBuffer]

    def to_json(self) -> Json:
        return {"arena_bytes": self.arena_bytes, "lower_bound_bytes": self.lower_bound_bytes,
                "alignment": self.alignment, "buffers": [b.to_json() for b in self.buffers]}

    @staticmethod
    def from_json(d: Json) -> "MemoryPlan":
        return MemoryPlan(d["arena_bytes"], d["lower_bound_bytes"], d["alignment"],
                          [ArenaBuffer.from_json(b) for b in d["buffers"]])


@dataclass
class WeightTensor:
    """A weight or constant in the weights file, in its layout's byte order."""
    name: str
    offset: int
    bytes: int
    spec: TensorSpec

    def to_json(self) -> Json:
        return {"name": self.name, "offset": self.offset, "bytes": self.bytes, **self.spec.to_json()}

    @staticmethod
    def from_json(d: Json) -> "WeightTensor":
        return WeightTensor(d["name"], d["offset"], d["bytes"], TensorSpec.from_json(d))


@dataclass
class Weights:
    file: str
    alignment: int
    tensors: list[WeightTensor]

    def to_json(self) -> Json:
        return {"file": self.file, "alignment": self.alignment, "tensors": [t.to_json() for t in self.tensors]}

    @staticmethod
    def from_json(d: Json) -> "Weights":
        return Weights(d["file"], d["alignment"], [WeightTensor.from_json(t) for t in d["tensors"]])


@dataclass
class BufferInfo:
    """Every buffer of the plan, whatever holds it: its class (INPUT, OUTPUT, WEIGHT, ...), bytes and type."""
    tensor_class: str
    bytes: Size
    spec: TensorSpec

    def to_json(self) -> Json:
        return {"tensor_class": self.tensor_class, "bytes": self.bytes, **self.spec.to_json()}

    @staticmethod
    def from_json(d: Json) -> "BufferInfo":
        return BufferInfo(d["tensor_class"], d["bytes"], TensorSpec.from_json(d))


@dataclass
class Manifest:
    schema_version: int
    model: Json
    build: Json
    targets: list[str]
    inputs: list[IoTensor]
    outputs: list[IoTensor]
    kernels: list[KernelEntry]
    schedule: list[Launch]
    memory_plan: MemoryPlan
    weights: Weights
    buffers: dict[str, BufferInfo]
    stats: Json
    ir: str = "model.hlo"
    intent: str = "intent.json"
    symbols: dict[str, list] = field(default_factory=dict)  # symbol -> [min, max or None]; left out when empty
    bundle_sha256: str = ""
    # A symbol with no upper end (max None): the size its tiles were planned at, and the element counts (size
    # expressions) that must stay at most "max" for its kernels' index arithmetic. Left out when empty.
    planned_sizes: dict[str, int] = field(default_factory=dict)
    index_limits: Json = field(default_factory=dict)   # set last: the digest of every other file (mlcc.bundle.digest.bundle_digest)

    def to_json(self) -> Json:
        d: Json = {"schema_version": self.schema_version, "model": self.model, "build": self.build,
                   "targets": list(self.targets), "inputs": [i.to_json() for i in self.inputs],
                   "outputs": [o.to_json() for o in self.outputs], "kernels": [k.to_json() for k in self.kernels],
                   "schedule": [s.to_json() for s in self.schedule], "memory_plan": self.memory_plan.to_json(),
                   "weights": self.weights.to_json(),
                   "buffers": {name: b.to_json() for name, b in self.buffers.items()},
                   "stats": self.stats, "ir": self.ir, "intent": self.intent}
        if self.symbols:
            d["symbols"] = {k: list(v) for k, v in self.symbols.items()}
        if self.planned_sizes:
            d["planned_sizes"] = dict(self.planned_sizes)
        if self.index_limits:
            d["index_limits"] = self.index_limits
        d["bundle_sha256"] = self.bundle_sha256
        return d

    @staticmethod
    def from_json(d: Json) -> "Manifest":
        return Manifest(d["schema_version"], d["model"], d["build"], list(d["targets"]),
                        [IoTensor.from_json(i) for i in d["inputs"]], [IoTensor.from_json(o) for o in d["outputs"]],
                        [KernelEntry.from_json(k) for k in d["kernels"]], [Launch.from_json(s) for s in d["schedule"]],
                        MemoryPlan.from_json(d["memory_plan"]), Weights.from_json(d["weights"]),
                        {name: BufferInfo.from_json(b) for name, b in d["buffers"].items()}, d["stats"], d["ir"],
                        d["intent"], {k: list(v) for k, v in d.get("symbols", {}).items()}, d["bundle_sha256"],
                        dict(d.get("planned_sizes", {})), dict(d.get("index_limits", {})))
