"""GPU targets: one record per target, with everything mlcc knows about it, and the devices of the cost model.

A `Target` is what `--target sm_80,sm_90,gfx942` names: Triton's backend and architecture and the binary
format AOT compilation produces (mlcc/emit/target/aot.py), what the tile heuristics fit a kernel's tiles to
(warp width, shared memory, registers, SM count, pipeline depths: mlcc/emit/tiling.py), and the chip's
figures the cost model uses (L2, dense peak FLOP/s). `parse_target` is the one way from a name to a record;
everything downstream passes records, and only the bundle and the tuning database spell names.

Shared memory is the most one program may allocate (the opt-in limit per block), from the vendors'
tuning guides:
- sm_80 (A100): 164 KiB per SM, 163 KiB per block; 108 SMs.
- sm_90 (H100/H200 SXM): 228 KiB per SM, 227 KiB per block; 132 SMs. Deeper pipelines and wider tiles
  pay off (more shared memory and the TMA/wgmma path Triton uses there).
- gfx942 (MI300X): 64 KiB LDS per CU, wavefronts of 64 lanes (Triton's num_warps counts wavefronts);
  304 CUs. Triton's AMD pipeliner double-buffers (2 stages) at most usefully; attention runs unpipelined.
- gfx90a (MI250X, one GCD): 64 KiB LDS, 110 CUs. gfx950 (MI355X): 160 KiB LDS, 256 CUs.
Occupancy figures (CUDA C Programming Guide, "Compute capabilities" table; AMD CDNA ISA guides): sm_80 and
sm_90 hold 64 warps, 32 blocks and 64 Ki registers per SM (allocated per warp in units of 256), and the
driver reserves 1 KiB of shared memory per block; a generic NVIDIA part is assumed to hold 48 warps (sm_86).
A valid name not in the table (sm_75, gfx1100) gets GENERIC's or AMD_GENERIC's figures: the configs every
part of its vendor can run, with no SM count to shrink tiles for. sm_90a is sm_90 with its arch-specific
instructions: sm_90's figures under its own name.

A `DeviceModel` (`--device-model H100|H200|A100`) is a board built on a target's chip: its memory, memory
bandwidth and host link; the chip's L2 and peaks come from the target. The figures are the vendors'
published datasheet numbers (dense, no sparsity):
- H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (2023): 3.35 TB/s HBM3, 80 GB, 50 MB L2,
  989.4 TFLOP/s FP16/BF16 tensor, 494.7 TF32 tensor, 66.9 FP32; PCIe Gen5 x16 = 64 GB/s per direction.
- H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024): 4.8 TB/s HBM3e, 141 GB, 50 MB L2,
  same compute peaks as H100 SXM (the same sm_90 chip); PCIe Gen5 x16 = 64 GB/s.
- A100 SXM4 80GB: NVIDIA A100 Tensor Core GPU datasheet (2021): 2.039 TB/s HBM2e, 80 GB, 40 MB L2,
  312 TFLOP/s FP16/BF16 tensor, 156 TF32 tensor, 19.5 FP32; PCIe Gen4 x16 = 32 GB/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

KIB = 1024
MIB = 1024 * KIB
GB = 10**9
PEAK_CLASSES = ("fp16", "bf16", "tf32", "fp32")   # the dtype classes a peak is given for


class TargetError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    name: str                 # sm_80, sm_90a, gfx942: as --target, the bundle and the tuning database spell it
    backend: str              # Triton's backend: cuda | hip
    arch: int | str           # Triton's architecture: the compute capability (80) or the gfx name ("gfx942")
    binary_format: str        # what AOT compilation produces: cubin | hsaco
    warp_size: int            # lanes per warp (a wavefront on AMD): num_warps counts these
    shared_bytes: int         # shared memory (LDS) one program may allocate
    registers: int            # 32-bit registers one thread may use
    sms: int                  # SMs (CUs); 0: unknown, tiles are not shrunk to fill the device
    matmul_stages: int        # software-pipeline depth of a matmul's K loop
    attention_stages: int     # pipeline depth of attention's K/V loop; 0: the generic choice by dtype
    half_tile: tuple[int, int, int]    # largest (BLOCK_M, BLOCK_N, BLOCK_K) for f16/bf16 dots
    float_tile: tuple[int, int, int]   # largest tile for f32/f64 dots (FMA units: registers bound it)
    eight_warps_area: int     # BLOCK_M * BLOCK_N from which a matmul program runs 8 warps, not 4
    l2_bytes: int = 0         # the chip's L2 cache; 0: no figure
    peak_flops: tuple[tuple[str, float], ...] = ()   # dense peak FLOP/s by PEAK_CLASSES; (): no figures
    # What one SM (CU) holds, for occupancy (mlcc/emit/target/binaries.py), and the launch limits:
    sm_shared_bytes: int = 0            # shared memory (LDS) per SM (CU)
    shared_reserved_per_block: int = 0  # shared memory the driver reserves per resident program
    sm_max_warps: int = 64              # resident warps (wavefronts) per SM (CU)
    sm_max_blocks: int = 32             # resident programs per SM (CU)
    register_file: int = 65536          # NVIDIA: 32-bit registers per SM; AMD: VGPRs per lane of one SIMD
    register_granule: int = 256         # NVIDIA: registers allocated per warp in these units; AMD: VGPRs
    simds: int = 1                      # AMD: SIMDs per CU a workgroup's wavefronts spread over
    grid_limits: tuple[int, int, int] = (2**31 - 1, 65535, 65535)   # most programs per grid dimension
    # the fp8 types the tensor (matrix) cores multiply, in any pairing: sm_90's fp8 wgmma takes e4m3fn and e5m2
    # (Triton's float8e4nv, float8e5), gfx942's fp8/bf8 MFMA e4m3fnuz and e5m2fnuz (float8e4b8, float8e5b16)
    fp8_dot: tuple[str, ...] = ()

    def multiplies_fp8(self, lhs: str, rhs: str) -> bool:
        """Whether the tensor cores take an lhs x rhs fp8 product (templates/_fp8_dot.jinja's FP8_DOT)."""
        return lhs in self.fp8_dot and rhs in self.fp8_dot

    @property
    def vendor(self) -> str:
        return "nvidia" if self.backend == "cuda" else "amd"

    @property
    def max_warps(self) -> int:
        """A program has at most 1024 threads."""
        return 1024 // self.warp_size


def _nvidia(name: str, arch: int, *, shared_kib: int = 99, sms: int = 0, matmul_stages: int = 3,
            attention_stages: int = 0, half_tile: tuple[int, int, int] = (128, 128, 64), l2_bytes: int = 0,
            peaks: tuple[float, float, float, float] | None = None, sm_shared_kib: int = 0,
            sm_max_warps: int = 48, fp8_dot: tuple[str, ...] = ()) -> Target:
    return Target(name, "cuda", arch, "cubin", 32, shared_kib * KIB, 255, sms, matmul_stages, attention_stages,
                  half_tile, (64, 64, 32), 128 * 128, l2_bytes, tuple(zip(PEAK_CLASSES, peaks)) if peaks else (),
                  sm_shared_bytes=(sm_shared_kib or shared_kib + 1) * KIB, shared_reserved_per_block=KIB,
                  sm_max_warps=sm_max_warps, fp8_dot=fp8_dot)


def _amd(name: str, *, shared_kib: int = 64, sms: int = 0, half_tile: tuple[int, int, int] = (128, 128, 32),
         fp8_dot: tuple[str, ...] = ()) -> Target:
    # CDNA: 4 SIMDs per CU, 8 wavefronts per SIMD, 512 VGPRs (arch + accumulation) per lane, granule 8;
    # HIP's maxGridSize is (2^31-1, 65536, 65536) programs.
    return Target(name, "hip", name, "hsaco", 64, shared_kib * KIB, 512, sms, 2, 1, half_tile, (64, 64, 32), 128 * 256,
                  sm_shared_bytes=shared_kib * KIB, sm_max_warps=32, register_file=512, register_granule=8,
                  simds=4, grid_limits=(2**31 - 1, 65536, 65536), fp8_dot=fp8_dot)


# What every part of a vendor can run: the portable config (Kernel.gpu) is tiled for GENERIC, and a valid
# target name without a row below takes its vendor's figures. Neither names an architecture to compile for.
GENERIC = _nvidia("generic", 0)
AMD_GENERIC = _amd("amd")

TARGETS: dict[str, Target] = {t.name: t for t in (
    _nvidia("sm_80", 80, shared_kib=163, sms=108, l2_bytes=40 * MIB, peaks=(312e12, 312e12, 156e12, 19.5e12),
            sm_shared_kib=164, sm_max_warps=64),
    _nvidia("sm_90", 90, shared_kib=227, sms=132, matmul_stages=4, attention_stages=3, half_tile=(128, 256, 64),
            l2_bytes=50 * MIB, peaks=(989.4e12, 989.4e12, 494.7e12, 66.9e12), sm_shared_kib=228, sm_max_warps=64,
            fp8_dot=("f8e4m3fn", "f8e5m2")),
    _amd("gfx90a", sms=110),
    _amd("gfx942", sms=304, fp8_dot=("f8e4m3fnuz", "f8e5m2fnuz")),
    _amd("gfx950", shared_kib=160, sms=256, half_tile=(128, 128, 64)),
)}

_NVIDIA_NAME = re.compile(r"^sm_(\d+)(a?)$")   # sm_90a: sm_90 with its arch-specific instructions
_AMD_NAME = re.compile(r"^gfx[0-9a-f]+$")


def parse_target(name: str) -> Target:
    """The record of a target name (sm_80, sm_90a, gfx942); TargetError if it names no GPU."""
    name = name.strip()
    if name in TARGETS:
        return TARGETS[name]
    m = _NVIDIA_NAME.match(name)
    if m:
        base = TARGETS.get(f"sm_{m.group(1)}")
        return replace(base or GENERIC, name=name, arch=int(m.group(1)))
    if _AMD_NAME.match(name):
        return replace(AMD_GENERIC, name=name, arch=name)
    raise TargetError(f"unknown target '{name}' (expected sm_NN or gfxNNN)")


def parse_targets(spec: str | list[str] | tuple[str, ...]) -> list[Target]:
    """The records of a comma-separated list (or a list) of names, each once, in order."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    seen: dict[str, Target] = {}
    for t in (parse_target(n) for n in names if n.strip()):
        seen.setdefault(t.name, t)
    return list(seen.values())


@dataclass(frozen=True)
class DeviceModel:
    """A board the cost model assumes (what intent.json's costs and the rooflines are computed for)."""
    name: str
    target: Target              # its chip: L2 and peak FLOP/s
    hbm_bytes: int
    hbm_bandwidth: float        # bytes/s
    host_link_bandwidth: float  # bytes/s, one direction
    source: str

    @property
    def l2_bytes(self) -> int:
        return self.target.l2_bytes

    @property
    def peak_flops(self) -> dict[str, float]:
        """Dense peak FLOP/s by dtype class: fp16, bf16, tf32, fp32."""
        return dict(self.target.peak_flops)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "hbm_bytes": self.hbm_bytes, "hbm_bandwidth": self.hbm_bandwidth,
                "l2_bytes": self.l2_bytes, "host_link_bandwidth": self.host_link_bandwidth,
                "peak_flops": self.peak_flops, "source": self.source}

    def kernel_seconds(self, flops: float, nbytes: float, dtype: str = "fp32") -> float:
        """Roofline-bound time: the slower of compute at peak and memory traffic at full bandwidth."""
        peaks = self.peak_flops
        return max(flops / peaks.get(dtype, peaks["fp32"]), nbytes / self.hbm_bandwidth)

    def transfer_seconds(self, nbytes: float) -> float:
        return nbytes / self.host_link_bandwidth


DEVICE_MODELS: dict[str, DeviceModel] = {d.name: d for d in (
    DeviceModel("H100", TARGETS["sm_90"], 80 * GB, 3.35e12, 64e9, "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column"),
    DeviceModel("H200", TARGETS["sm_90"], 141 * GB, 4.8e12, 64e9, "NVIDIA H200 Tensor Core GPU datasheet, SXM column"),
    DeviceModel("A100", TARGETS["sm_80"], 80 * GB, 2.039e12, 32e9,
                "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column"),
)}


def device_model(name: str) -> DeviceModel:
    """The device model --device-model names (case-insensitive); ValueError if unknown."""
    try:
        return DEVICE_MODELS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown device model '{name}' (known: {', '.join(DEVICE_MODELS)})") from None
