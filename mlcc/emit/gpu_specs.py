"""What a GPU target offers a kernel's tiles: warp width, shared memory, SM count, pipeline depth.

The tile heuristics (mlcc/emit/tiling.py) read these numbers to pick a launch config per target,
and `mlcc tune` filters its candidates with them. Shared memory is the most one program may
allocate (the opt-in limit per block), from the vendors' tuning guides:
- sm_80 (A100): 164 KiB per SM, 163 KiB per block; 108 SMs.
- sm_90 (H100 SXM): 228 KiB per SM, 227 KiB per block; 132 SMs. Deeper pipelines and wider tiles pay
  off (more shared memory and the TMA/wgmma path Triton uses there).
- gfx942 (MI300X): 64 KiB LDS per CU, wavefronts of 64 lanes (Triton's num_warps counts wavefronts);
  304 CUs. Triton's AMD pipeliner double-buffers (2 stages) at most usefully; attention runs unpipelined.
- gfx90a (MI250X, one GCD): 64 KiB LDS, 110 CUs. gfx950 (MI355X): 160 KiB LDS, 256 CUs.
A target not in the table gets GENERIC (NVIDIA) or AMD_GENERIC: the configs every part of its
vendor can run, with no SM count to shrink tiles for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class GpuSpec:
    name: str
    vendor: str               # nvidia | amd
    warp_size: int            # lanes per warp (a wavefront on AMD): num_warps counts these
    shared_bytes: int         # shared memory (LDS) one program may allocate
    registers: int            # 32-bit registers one thread may use
    sms: int                  # SMs (CUs); 0: unknown, tiles are not shrunk to fill the device
    matmul_stages: int        # software-pipeline depth of a matmul's K loop
    attention_stages: int     # pipeline depth of attention's K/V loop; 0: the generic choice by dtype
    half_tile: tuple[int, int, int]    # largest (BLOCK_M, BLOCK_N, BLOCK_K) for f16/bf16 dots
    float_tile: tuple[int, int, int]   # largest tile for f32/f64 dots (FMA units: registers bound it)
    eight_warps_area: int     # BLOCK_M * BLOCK_N from which a matmul program runs 8 warps, not 4

    @property
    def max_warps(self) -> int:
        """A program has at most 1024 threads."""
        return 1024 // self.warp_size


GENERIC = GpuSpec("generic", "nvidia", 32, 99 * KIB, 255, 0, 3, 0, (128, 128, 64), (64, 64, 32), 128 * 128)
AMD_GENERIC = GpuSpec("amd", "amd", 64, 64 * KIB, 512, 0, 2, 1, (128, 128, 32), (64, 64, 32), 128 * 256)

GPU_SPECS = {
    "sm_80": GpuSpec("sm_80", "nvidia", 32, 163 * KIB, 255, 108, 3, 0, (128, 128, 64), (64, 64, 32), 128 * 128),
    "sm_90": GpuSpec("sm_90", "nvidia", 32, 227 * KIB, 255, 132, 4, 3, (128, 256, 64), (64, 64, 32), 128 * 128),
    "gfx90a": GpuSpec("gfx90a", "amd", 64, 64 * KIB, 512, 110, 2, 1, (128, 128, 32), (64, 64, 32), 128 * 256),
    "gfx942": GpuSpec("gfx942", "amd", 64, 64 * KIB, 512, 304, 2, 1, (128, 128, 32), (64, 64, 32), 128 * 256),
    "gfx950": GpuSpec("gfx950", "amd", 64, 160 * KIB, 512, 256, 2, 1, (128, 128, 64), (64, 64, 32), 128 * 256),
}

_ARCH_SUFFIX = re.compile(r"^(sm_\d+)a$")   # sm_90a: sm_90 with its arch-specific instructions


def gpu_spec(target: str) -> GpuSpec:
    """The spec of a target name (sm_90, sm_90a, gfx942); GENERIC or AMD_GENERIC when unknown."""
    m = _ARCH_SUFFIX.match(target)
    name = m.group(1) if m else target
    if name in GPU_SPECS:
        return GPU_SPECS[name]
    return AMD_GENERIC if name.startswith("gfx") else GENERIC
