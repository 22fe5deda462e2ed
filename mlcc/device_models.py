"""Device models: the bandwidths, capacities and peaks that costs and rooflines assume.

Figures are the vendors' published datasheet numbers (dense, no sparsity):
- H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (2023): 3.35 TB/s HBM3, 80 GB, 50 MB L2,
  989.4 TFLOP/s FP16/BF16 tensor, 494.7 TF32 tensor, 66.9 FP32; PCIe Gen5 x16 = 64 GB/s per direction.
- H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024): 4.8 TB/s HBM3e, 141 GB, 50 MB L2,
  same compute peaks as H100 SXM; PCIe Gen5 x16 = 64 GB/s.
- A100 SXM4 80GB: NVIDIA A100 Tensor Core GPU datasheet (2021): 2.039 TB/s HBM2e, 80 GB, 40 MB L2,
  312 TFLOP/s FP16/BF16 tensor, 156 TF32 tensor, 19.5 FP32; PCIe Gen4 x16 = 32 GB/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceModel:
    name: str
    hbm_bytes: int
    hbm_bandwidth: float        # bytes/s
    l2_bytes: int
    host_link_bandwidth: float  # bytes/s, one direction
    peak_flops: dict[str, float]  # by dtype class: fp16, bf16, tf32, fp32
    source: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def kernel_seconds(self, flops: float, nbytes: float, dtype: str = "fp32") -> float:
        """Roofline-bound time: the slower of compute at peak and memory traffic at full bandwidth."""
        peak = self.peak_flops.get(dtype, self.peak_flops["fp32"])
        return max(flops / peak, nbytes / self.hbm_bandwidth)

    def transfer_seconds(self, nbytes: float) -> float:
        return nbytes / self.host_link_bandwidth


GB = 10**9
DEVICE_MODELS = {
    "H100": DeviceModel("H100", 80 * GB, 3.35e12, 50 * 2**20, 64e9,
                        {"fp16": 989.4e12, "bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
                        "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column"),
    "H200": DeviceModel("H200", 141 * GB, 4.8e12, 50 * 2**20, 64e9,
                        {"fp16": 989.4e12, "bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
                        "NVIDIA H200 Tensor Core GPU datasheet, SXM column"),
    "A100": DeviceModel("A100", 80 * GB, 2.039e12, 40 * 2**20, 32e9,
                        {"fp16": 312e12, "bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
                        "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column"),
}


def device_model(name: str) -> DeviceModel:
    try:
        return DEVICE_MODELS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown device model '{name}' (known: {', '.join(DEVICE_MODELS)})") from None
