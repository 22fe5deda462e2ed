"""Launch a bundle's kernels on a CUDA (or ROCm) device: the ``cuda`` / ``cuda:N`` device.

load_binary rebuilds Triton's CompiledKernel from the bundle's binary and
metadata, with the constexprs of the binary's own launch config (older bundles:
the kernel's "gpu" config): nothing is recompiled. The device launches it with
that config's grid. load_source compiles the bundled source with
Triton for a device whose architecture the bundle was not built for.
Every kernel load and launch runs under ``torch.cuda.device(N)`` (the device guard):
Triton launches on the current device, which need not be N.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from mlcc.bundle.errors import BundleError
from mlcc.bundle.kernels import import_jit
from mlcc.bundle.manifest import KernelEntry, Launch
from mlcc.runtime.device import Device, Event, Stream, binary_config, gpu_grid


def load_binary(bundle: Path, kernel: KernelEntry, arch: str) -> Callable:
    from triton.compiler import ASTSource
    from triton.compiler.compiler import CompiledKernel

    entry = kernel.binaries[arch]
    jit_fn = import_jit(bundle / kernel.source, kernel.name, prefix="mlcc_cuda_kernel")
    constexprs = binary_config(kernel, arch).constexprs   # what this binary was compiled with
    runtime = [a for a in jit_fn.arg_names if a not in constexprs]
    signature = dict(zip(runtime, kernel.arg_types))
    signature.update({c: "constexpr" for c in constexprs})
    attrs = {(jit_fn.arg_names.index(a),): [["tt.divisibility", 16]]
             for a, t in zip(runtime, kernel.arg_types) if t.startswith("*")}
    src = ASTSource(fn=jit_fn, signature=signature, constexprs=dict(constexprs), attrs=attrs)
    binary = bundle / entry.path
    group = {f"{entry.function}.json": str(bundle / entry.metadata),
             f"{entry.function}.{binary.suffix[1:]}": str(binary)}
    compiled = CompiledKernel(src, group, hash=kernel.name)

    def run(grid: tuple, args: list, _kernel: KernelEntry) -> None:
        compiled[grid](*args)
    return run


def load_source(source: Path, name: str) -> Callable:
    jit_fn = import_jit(source, name, prefix="mlcc_cuda_kernel")

    def run(grid: tuple, args: list, kernel: KernelEntry) -> None:
        cfg = kernel.gpu
        jit_fn[grid](*args, **cfg.constexprs, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                     enable_fp_fusion=True)
    return run


def device_arch(torch_device: str) -> str:
    """sm_XY for an NVIDIA device, gfxNNN for an AMD one."""
    import torch
    if getattr(torch.version, "hip", None):
        return torch.cuda.get_device_properties(torch_device).gcnArchName.split(":")[0]
    major, minor = torch.cuda.get_device_capability(torch_device)
    return f"sm_{major}{minor}"


class CudaDevice(Device):
    """A real GPU: device memory, pinned host memory, torch.cuda streams and events, the AOT binaries."""

    def __init__(self, spec: str) -> None:
        import torch
        if not torch.cuda.is_available():
            raise BundleError(f"device '{spec}' requested but no CUDA device is available")
        self.spec = spec
        self.index = int(spec.split(":", 1)[1]) if ":" in spec else 0
        if not 0 <= self.index < torch.cuda.device_count():
            raise BundleError(f"device '{spec}': there are {torch.cuda.device_count()} CUDA devices")
        self.torch_device = f"cuda:{self.index}"
        self.arch = device_arch(self.torch_device)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        import torch
        with torch.cuda.device(self.index):
            yield

    def pin(self, host: Any) -> Any:
        return host.pin_memory()

    def compute_stream(self) -> Stream:
        import torch
        return Stream("compute", torch.cuda.current_stream(self.torch_device))

    def new_stream(self, name: str) -> Stream:
        import torch
        return Stream(name, torch.cuda.Stream(device=self.torch_device))

    def copy(self, dst: Any, src: Any, stream: Stream, label: str) -> Event:
        import torch
        with torch.cuda.stream(stream.handle):
            dst.copy_(src, non_blocking=True)
        return self.record(stream, label)

    def record(self, stream: Stream, label: str) -> Event:
        import torch
        done = torch.cuda.Event()
        done.record(stream.handle)
        return Event(label, done)

    def wait(self, stream: Stream, event: Event) -> None:
        stream.handle.wait_event(event.handle)

    def synchronize(self) -> None:
        import torch
        torch.cuda.synchronize(self.torch_device)

    def load(self, bundle: Path, kernel: KernelEntry) -> Any:
        if self.arch in kernel.binaries:
            return load_binary(bundle, kernel, self.arch)
        return load_source(bundle / kernel.source, kernel.name)

    def launch(self, step: int, launch: Launch, kernel: KernelEntry, fn: Any, args: Sequence[Any],
               env: Mapping[str, int]) -> None:
        fn(gpu_grid(kernel, self.arch, launch, env), list(args), kernel)
