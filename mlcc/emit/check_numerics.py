"""--check-numerics: run every generated kernel under Triton's interpreter, alone, on the reference
evaluator's values of its operands, and compare with the evaluator's value of its instruction (for a
fusion: the unfused computation it replaced). A mismatch names the kernel and the source nodes.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mlcc.bundle.kernels import import_jit
from mlcc.bundle.layout import from_physical, to_physical
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.errors import InternalError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.ir import Instruction, Module

TOLERANCES = {"f64": (1e-6, 1e-9), "f32": (1e-3, 1e-5), "f16": (1e-2, 1e-3), "bf16": (5e-2, 1e-2)}


def _torch_buffer(arr: np.ndarray):
    import torch
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype == np.bool_:
        return torch.from_numpy(flat.view(np.uint8).copy()).view(torch.bool)
    if flat.dtype.name == "bfloat16":
        return torch.from_numpy(flat.view(np.uint16).copy()).view(torch.bfloat16)
    if flat.dtype.itemsize == 1 and flat.dtype.kind not in "iub":  # fp8, fp4, int4...: their bits, as kernels hold them
        return torch.from_numpy(flat.view(np.uint8).copy())
    return torch.from_numpy(flat.copy())


def _numpy_of(t, dtype: np.dtype) -> np.ndarray:
    import torch
    return t.contiguous().view(torch.uint8).numpy().view(dtype)


def run_kernel(kernel: Kernel, inst: Instruction, inputs: Sequence[np.ndarray],
               config: LaunchConfig | None = None) -> list[np.ndarray]:
    """Run kernel (lowered from inst) under the interpreter: inputs laid out per the operands' layouts,
    results returned as logical arrays. The kernel source is loaded as a bundle's kernels/<name>.py is
    (mlcc.bundle.kernels) and wrapped in Triton's interpreter here: the compiler does not import the runtime."""
    from triton.runtime.interpreter import InterpretedFunction

    config = config or kernel.interpreter
    with tempfile.TemporaryDirectory(prefix="mlcc-check-") as tmp:
        path = Path(tmp) / f"{kernel.name}.py"
        path.write_text(kernel.source)
        fn = InterpretedFunction(import_jit(path, kernel.name, prefix="mlcc_check").fn)
        args = []
        for op, arr in zip(inst.operands, inputs):
            arr = np.asarray(arr, dtype=numpy_dtype(op.shape.dtype))
            args.append(_torch_buffer(to_physical(arr, op.shape.layout)))
        results = list(inst.shape.elements) if inst.shape.is_tuple else [inst.shape]
        outs = [_torch_buffer(np.zeros(max(s.numel(), 1), dtype=numpy_dtype(s.dtype))) for s in results]
        fn[tuple(config.grid)](*args, *outs, **config.constexprs)
        return [from_physical(_numpy_of(o, numpy_dtype(s.dtype))[: s.numel()], s.dims, s.layout)
                for o, s in zip(outs, results)]


@dataclass
class NumericsReport:
    kernels_checked: int
    worst: list[tuple[str, float]]


def reference_values(module: Module, inputs: dict[str, np.ndarray]) -> dict[int, Any]:
    values: dict[int, Any] = {}
    for inst in module.entry.instructions:
        if inst.opcode == "parameter":
            values[id(inst)] = np.asarray(inputs[inst.attrs.get("name", inst.name)], dtype=numpy_dtype(inst.shape.dtype))
        else:
            values[id(inst)] = evaluate_instruction(inst, [values[id(o)] for o in inst.operands], module.constants)
    return values


def seeded_inputs(module: Module, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for p in module.entry.parameters():
        s = p.shape
        dt = numpy_dtype(s.dtype)
        if dt.kind == "f" or s.dtype == "bf16":
            out[p.attrs.get("name", p.name)] = rng.standard_normal(s.dims).astype(np.float32).astype(dt)
        else:
            out[p.attrs.get("name", p.name)] = rng.integers(0, 2, s.dims).astype(dt)
    return out


def _tolerance(inst: Instruction, result_dtype: str) -> tuple[float, float] | None:
    """The loosest float tolerance among the values the kernel computes: a fusion that keeps an
    intermediate in f32 where the unfused graph rounded it to bf16 differs by that rounding."""
    dtypes = {result_dtype}
    comps = [inst.called] if inst.called is not None else []
    for c in comps:
        dtypes |= {i.shape.dtype for i in c.instructions if not i.shape.is_tuple}
    dtypes |= {o.shape.dtype for o in inst.operands if not o.shape.is_tuple}
    tols = [TOLERANCES[d] for d in dtypes if d in TOLERANCES]
    if result_dtype not in TOLERANCES:
        return None
    return max(t[0] for t in tols), max(t[1] for t in tols)


def check_numerics(module: Module, kernels: dict[str, Kernel], launches: list[tuple[Instruction, str]],
                   seed: int = 0) -> NumericsReport:
    values = reference_values(module, seeded_inputs(module, seed))
    worst = []
    for inst, kname in launches:
        try:
            got = run_kernel(kernels[kname], inst, [values[id(o)] for o in inst.operands])
        except Exception as e:  # noqa: BLE001 - a kernel that cannot even run is a miscompile too
            raise InternalError(f"--check-numerics: kernel {kname} (%{inst.name}) failed under the interpreter: "
                                f"{type(e).__name__}: {e}; source nodes: {', '.join(inst.origin[:8]) or 'none'}") from e
        want = values[id(inst)]
        wants = list(want) if isinstance(want, tuple) else [want]
        shapes = list(inst.shape.elements) if inst.shape.is_tuple else [inst.shape]
        for g, w, s in zip(got, wants, shapes):
            tol = _tolerance(inst, s.dtype)
            if tol is not None:
                rtol, atol = tol
                gw, ww = g.astype(np.float64), np.asarray(w).astype(np.float64)
                ok = np.allclose(gw, ww, rtol=rtol, atol=atol, equal_nan=True)
                err = float(np.nanmax(np.abs(gw - ww), initial=0.0)) if gw.size else 0.0
            else:
                ok = np.array_equal(g, np.asarray(w))
                err = 0.0 if ok else float("inf")
            worst.append((kname, err))
            if not ok:
                nodes = ", ".join(inst.origin[:8]) + (f" (+{len(inst.origin) - 8} more)" if len(inst.origin) > 8 else "")
                raise InternalError(f"--check-numerics: kernel {kname} (%{inst.name}, {inst.opcode}"
                                    f"{', ' + inst.attrs['kind'] if inst.opcode == 'fusion' else ''}) differs from the "
                                    f"reference evaluator by up to {err:.3g}; source nodes: {nodes or 'none'}")
    worst.sort(key=lambda kv: -kv[1])
    return NumericsReport(len(launches), worst[:5])
