"""Run one lowered kernel under Triton's interpreter on numpy inputs (tests only)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from mlcc.emit.kernel import Kernel, LaunchConfig
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction
from mlcc.runtime.interpreter import launch, load_kernel
from mlcc.runtime.physical import from_physical, to_physical


def _torch_buffer(arr: np.ndarray) -> torch.Tensor:
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype == np.bool_:
        return torch.from_numpy(flat.view(np.uint8).copy()).view(torch.bool)
    if flat.dtype.name == "bfloat16":
        return torch.from_numpy(flat.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(flat.copy())


def _numpy_of(t: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(dtype)
    if t.dtype == torch.bool:
        return t.view(torch.uint8).numpy().view(np.bool_)
    return t.numpy()


def run_kernel(kernel: Kernel, inst: Instruction, inputs: Sequence[np.ndarray],
               config: LaunchConfig | None = None) -> list[np.ndarray]:
    """Lay inputs out per the operands' layouts, run, return the logical results."""
    config = config or kernel.interpreter
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{kernel.name}.py"
        path.write_text(kernel.source)
        fn = load_kernel(path, kernel.name)
        args = []
        for op, arr in zip(inst.operands, inputs):
            arr = np.asarray(arr, dtype=numpy_dtype(op.shape.dtype))
            args.append(_torch_buffer(to_physical(arr, op.shape.layout)))
        results = list(inst.shape.elements) if inst.shape.is_tuple else [inst.shape]
        outs = []
        for s in results:
            n = max(s.numel(), 1)
            outs.append(_torch_buffer(np.zeros(n, dtype=numpy_dtype(s.dtype))))
        launch(fn, config.grid, args + outs, config.constexprs, config.num_warps)
        return [from_physical(_numpy_of(o, numpy_dtype(s.dtype))[: s.numel()], s.dims, s.layout)
                for o, s in zip(outs, results)]
