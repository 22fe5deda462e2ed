"""The simulated CUDA device ``sim:TARGET`` (``sim:TARGET:N``): the CUDA path, with host memory and Triton's
interpreter at the bottom.

What it keeps from the CUDA path: TARGET's binary entries and the launch config each was compiled with
(its constexprs, and its grid evaluated as the CUDA device evaluates it), the arena, the pinned host weights
and the staging pool under ``hbm_budget``, the copy stream and its events, the device guard. What it
replaces: device memory is host memory (CPU tensors), and each launch runs the kernel's bundled source
under the interpreter with the binary's constexprs and grid.

Work runs at once, in issue order, so the numbers are always right; what the simulator checks is that
they would be right on a GPU too. Each stream keeps a vector clock (how far into each stream's work it
has waited), each event a snapshot of its stream's clock, and a log records which stream last wrote
(a copy) or used (a kernel) each byte range. A kernel that uses bytes a copy on another stream wrote,
with no wait on that copy's event (or a later one of its stream) in between, is a StreamHazardError naming
the step, the buffer and the copy; so is a copy that overwrites bytes a kernel on another stream may still
be reading, and an asynchronous copy from host memory that is not pinned. A kernel loaded or launched
while the current device is not this one is a DeviceGuardError.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from mlcc.bundle.errors import UnsupportedError
from mlcc.bundle.manifest import KernelEntry, Launch
from mlcc.runtime.device import (Device, DeviceGuardError, Event, Stream, StreamHazardError, binary_config,
                                 gpu_grid)
from mlcc.runtime.interpreter import load_kernel

_current_device = [0]   # the simulated process's current device, as torch.cuda.current_device() is the real one's


def current_device() -> int:
    return _current_device[0]


@dataclass
class _Access:
    """One stream's use of a byte range: a copy that wrote it, or a kernel that read or wrote it."""
    lo: int
    hi: int
    stream: int
    seq: int
    what: str        # "copy of 'w' for step 5" / "step 3 (fused_dot_ab12)"
    buffer: str
    is_copy: bool


def _extent(t: Any) -> tuple[int, int]:
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


class SimDevice(Device):
    """TARGET's binaries, run by the interpreter on host memory, with the streams' ordering checked."""

    def __init__(self, spec: str, targets: Sequence[str]) -> None:
        parts = spec.split(":")
        target = parts[1] if len(parts) > 1 else ""
        if len(parts) > 3 or (len(parts) == 3 and not parts[2].isdigit()):
            raise UnsupportedError(f"device '{spec}': expected sim:TARGET or sim:TARGET:N")
        if target not in targets:
            raise UnsupportedError(f"device '{spec}': the bundle has no binaries for '{target}' (its targets: "
                                   f"{', '.join(sorted(targets)) or 'none'})")
        self.spec = spec
        self.torch_device = "cpu"
        self.arch = target
        self.index = int(parts[2]) if len(parts) == 3 else 0
        self.guard_log: list[int] = []   # the current device at each kernel load and launch
        self._clocks: dict[int, dict[int, int]] = {}   # stream id -> {stream id: ops of it this stream follows}
        self._names: dict[int, str] = {}
        self._log: list[_Access] = []
        self._pinned: list[tuple[int, int]] = []
        self._compute = self.new_stream("compute")

    # ---- the guard
    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        previous = _current_device[0]
        _current_device[0] = self.index
        try:
            yield
        finally:
            _current_device[0] = previous

    def _check_guard(self, what: str) -> None:
        self.guard_log.append(_current_device[0])
        if _current_device[0] != self.index:
            raise DeviceGuardError(f"{self.spec}: {what} ran with device {_current_device[0]} current, not "
                                   f"{self.index} (no device guard)")

    # ---- memory
    def pin(self, host: Any) -> Any:
        self._pinned.append(_extent(host))
        return host

    def upload(self, host: Any) -> Any:
        t = host.to(self.torch_device, copy=True)
        self._access(self._compute, t, "upload", "an upload", is_copy=True)
        return t

    # ---- streams and events
    def compute_stream(self) -> Stream:
        return self._compute

    def new_stream(self, name: str) -> Stream:
        sid = len(self._clocks)
        self._clocks[sid] = {sid: 0}
        self._names[sid] = name
        return Stream(name, sid)

    def _tick(self, stream: Stream) -> int:
        clock = self._clocks[stream.handle]
        clock[stream.handle] += 1
        return clock[stream.handle]

    def _follows(self, stream: Stream, a: _Access) -> bool:
        """Whether work issued on ``stream`` now runs after access ``a``."""
        return self._clocks[stream.handle].get(a.stream, 0) >= a.seq

    def _access(self, stream: Stream, t: Any, buffer: str, what: str, is_copy: bool) -> _Access:
        lo, hi = _extent(t)
        a = _Access(lo, hi, stream.handle, self._tick(stream), what, buffer, is_copy)
        if hi > lo:
            self._log.append(a)
        return a

    def _overlapping(self, stream: Stream, t: Any) -> Iterator[_Access]:
        lo, hi = _extent(t)
        for a in self._log:
            if a.stream != stream.handle and a.lo < hi and lo < a.hi and not self._follows(stream, a):
                yield a

    def copy(self, dst: Any, src: Any, stream: Stream, label: str) -> Event:
        lo, hi = _extent(src)
        if hi > lo and not any(plo <= lo and hi <= phi for plo, phi in self._pinned):
            raise StreamHazardError(f"{self.spec}: {label} on stream '{stream.name}' reads pageable host memory "
                                    f"(not pinned: the copy would not be asynchronous)")
        for a in self._overlapping(stream, dst):
            if not a.is_copy:
                raise StreamHazardError(f"{self.spec}: {label} on stream '{stream.name}' overwrites the bytes of "
                                        f"buffer '{a.buffer}' that {a.what} on stream '{self._names[a.stream]}' "
                                        f"uses, before waiting for an event recorded after it")
        dst.copy_(src)
        self._access(stream, dst, label, label, is_copy=True)
        return self.record(stream, label)

    def record(self, stream: Stream, label: str) -> Event:
        return Event(label, dict(self._clocks[stream.handle]))

    def wait(self, stream: Stream, event: Event) -> None:
        clock = self._clocks[stream.handle]
        for sid, seq in event.handle.items():
            clock[sid] = max(clock.get(sid, 0), seq)
        self._prune()

    def _prune(self) -> None:
        """Forget accesses that every stream already follows: nothing can race with them any more."""
        self._log = [a for a in self._log if not all(c.get(a.stream, 0) >= a.seq for c in self._clocks.values())]

    def synchronize(self) -> None:
        merged: dict[int, int] = {}
        for clock in self._clocks.values():
            for sid, seq in clock.items():
                merged[sid] = max(merged.get(sid, 0), seq)
        for clock in self._clocks.values():
            clock.update(merged)
        self._log = []

    # ---- kernels
    def load(self, bundle: Path, kernel: KernelEntry) -> Any:
        self._check_guard(f"loading kernel {kernel.name}")
        return load_kernel(bundle / kernel.source, kernel.name)

    def launch_config(self, kernel: KernelEntry, launch: Launch,
                      env: Mapping[str, int]) -> tuple[tuple[int, ...], dict[str, int]]:
        """The grid and constexprs the CUDA device would launch ``kernel`` with on this target."""
        config = binary_config(kernel, self.arch)
        assert config is not None  # every kernel has a binary for each of the bundle's targets
        return gpu_grid(kernel, self.arch, launch, env), dict(config.constexprs)

    def launch(self, step: int, launch: Launch, kernel: KernelEntry, fn: Any, args: Sequence[Any],
               env: Mapping[str, int]) -> None:
        what = f"step {step} ({kernel.name})"
        self._check_guard(what)
        for name, t in zip(launch.args, args):
            for a in self._overlapping(self._compute, t):
                if a.is_copy:
                    raise StreamHazardError(f"{self.spec}: {what} reads buffer '{name}' before the compute "
                                            f"stream waited for the event of the {a.what} on stream "
                                            f"'{self._names[a.stream]}'")
        grid, constexprs = self.launch_config(kernel, launch, env)
        fn[grid](*args, **constexprs)
        for name, t in zip(launch.args, args):
            self._access(self._compute, t, name, what, is_copy=False)


def sim_targets(kernels: Sequence[KernelEntry]) -> list[str]:
    """The targets a bundle can be simulated on: those every kernel has a binary for."""
    if not kernels:
        return []
    common: Optional[set[str]] = None
    for k in kernels:
        common = set(k.binaries) if common is None else common & set(k.binaries)
    return sorted(common or ())
