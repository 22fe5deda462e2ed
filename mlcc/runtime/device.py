"""The bottom layer of the runtime: what one schedule loop (mlcc/runtime/bundle.py) asks of a device.

A device allocates memory, copies between host and device memory on streams, records events and makes
streams wait on them, holds the device guard (the context under which its launches and kernel loads run),
and launches one kernel of the bundle with the launch config it chooses. Three implementations:

- ``cpu`` (mlcc/runtime/cpu.py): Triton's interpreter with the interpreter launch configs the compiler chose
  (big tiles, few programs); one stream, copies are synchronous.
- ``cuda`` / ``cuda:N`` (mlcc/runtime/cuda.py): the bundle's AOT binaries for the device's architecture, each
  with its own launch config and grid; torch.cuda streams and events; launches under ``torch.cuda.device(N)``.
- ``sim:TARGET`` / ``sim:TARGET:N`` (mlcc/runtime/sim.py): every choice the CUDA path makes (TARGET's
  binary entries, their constexprs and grids, a copy stream, events, pinned host memory, the device guard)
  with host memory for device memory and Triton's interpreter for execution; streams and events are
  modelled so that a kernel reading bytes whose copy it has not waited for is an error, not a race.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Optional, Sequence

from mlcc.bundle.errors import InternalError
from mlcc.bundle.manifest import KernelEntry, Launch, LaunchConfig
from mlcc.bundle.sizes import eval_size


class DeviceMisuseError(InternalError):
    """The runtime used a device wrongly (a bug in mlcc, exit code 70): caught by the simulated device."""


class StreamHazardError(DeviceMisuseError):
    """A kernel read bytes a copy on another stream writes, before its stream waited for that copy's event
    (or a copy overwrote bytes a kernel on another stream may still read)."""


class DeviceGuardError(DeviceMisuseError):
    """A kernel was loaded or launched while another device than the executable's was the current one."""


def binary_config(kernel: KernelEntry, arch: str) -> Optional[LaunchConfig]:
    """The launch config ``arch``'s binary was compiled with (older bundles: the kernel's "gpu" config);
    None when the bundle has no binary for ``arch``."""
    entry = kernel.binaries.get(arch)
    if entry is None:
        return None
    return entry.config or kernel.gpu


def gpu_grid(kernel: KernelEntry, arch: Optional[str], launch: Launch, env: Mapping[str, int]) -> tuple[int, ...]:
    """The grid of the binary a GPU runs: its own config's where the binary has one (a target's tiles may
    differ from the default "gpu" config the schedule's grid is for), else the schedule's."""
    entry = kernel.binaries.get(arch) if arch is not None else None
    config = entry.config if entry is not None else None
    return tuple(eval_size(g, env) for g in (config.grid if config else launch.grid))


class Stream:
    """A device's queue of work, by name; implementations keep what they need on it."""

    def __init__(self, name: str, handle: Any = None) -> None:
        self.name = name
        self.handle = handle

    def __repr__(self) -> str:
        return f"Stream({self.name})"


class Event:
    """A point in a stream's work that another stream (or the host) can wait for."""

    def __init__(self, label: str, handle: Any = None) -> None:
        self.label = label
        self.handle = handle


class Device:
    """The device interface the schedule loop runs on. ``spec`` is what the user named (``cpu``,
    ``cuda:1``, ``sim:sm_90``); ``torch_device`` where its tensors live; ``arch`` whose binaries run."""

    spec: str
    torch_device: str
    arch: Optional[str] = None
    index: int = 0

    # ---- the guard
    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Make this device the current one (launches and kernel loads run on the current device)."""
        yield

    # ---- memory
    def alloc(self, nbytes: int, zero: bool = False) -> Any:
        """``nbytes`` (at least 1) of device memory as a uint8 tensor."""
        import torch
        size = max(nbytes, 1)
        if zero:
            return torch.zeros(size, dtype=torch.uint8, device=self.torch_device)
        return torch.empty(size, dtype=torch.uint8, device=self.torch_device)

    def pin(self, host: Any) -> Any:
        """Host memory that copies can read asynchronously (page-locked on CUDA)."""
        return host

    def upload(self, host: Any) -> Any:
        """A device copy of a host tensor, made on the compute stream before anything after it runs."""
        return host.to(self.torch_device)

    def download(self, t: Any) -> Any:
        """A host copy of a device tensor (after ``synchronize``)."""
        return t.detach().to("cpu")

    # ---- streams and events
    def compute_stream(self) -> Stream:
        return Stream("compute")

    def new_stream(self, name: str) -> Stream:
        return Stream(name)

    def copy(self, dst: Any, src: Any, stream: Stream, label: str) -> Event:
        """Copy host ``src`` into device ``dst`` on ``stream``; the event is recorded after the copy."""
        dst.copy_(src)
        return Event(label)

    def record(self, stream: Stream, label: str) -> Event:
        return Event(label)

    def wait(self, stream: Stream, event: Event) -> None:
        """Work issued on ``stream`` after this runs after ``event``."""

    def synchronize(self) -> None:
        """The host waits for every stream."""

    # ---- kernels
    def load(self, bundle: Any, kernel: KernelEntry) -> Any:
        """The launchable form of ``kernel`` (called once per kernel, under the guard)."""
        raise NotImplementedError

    def launch(self, step: int, launch: Launch, kernel: KernelEntry, fn: Any, args: Sequence[Any],
               env: Mapping[str, int]) -> None:
        """Run step ``step`` of the schedule: ``kernel`` (loaded as ``fn``) on ``args`` (the tensors of
        ``launch.args``, then the symbol values), on the compute stream, with this device's launch config."""
        raise NotImplementedError
