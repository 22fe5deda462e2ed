"""Helpers for the StableHLO op tests: program text, a numpy-loop reading of the spec, and running a program
through the evaluator and through the generated kernels (Triton's interpreter on CPU)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

import mlcc
from mlcc.frontend.stablehlo import import_stablehlo
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

MLIR_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
              np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
              np.dtype(np.int8): "i8", np.dtype(np.uint8): "ui8", np.dtype(np.uint32): "ui32",
              np.dtype(np.bool_): "i1", np.dtype(np.int16): "i16"}


def tensor(shape: Sequence[int], dtype: np.dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + MLIR_TYPES[np.dtype(dtype)] + ">"


def module_text(args: Sequence[np.ndarray], results: Sequence[tuple[Sequence[int], np.dtype]], body: str) -> str:
    params = ", ".join(f"%arg{i}: {tensor(a.shape, a.dtype)}" for i, a in enumerate(args))
    outs = ", ".join(tensor(s, d) for s, d in results)
    return f"module @m {{\n  func.func public @main({params}) -> ({outs}) {{\n{body}\n  }}\n}}\n"


def dims_text(name: str, values: Sequence[int]) -> str:
    return f"{name} = [{', '.join(str(v) for v in values)}]"


def evaluate_text(text: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    module = import_stablehlo(text)
    verify_module(module)
    out = evaluate(module, {f"arg{i}": x for i, x in enumerate(inputs)})
    return [out[name] for name in module.output_names]


def run_kernels(text: str, inputs: Sequence[np.ndarray], tmp: Path) -> list[np.ndarray]:
    """The program compiled to a bundle (no AOT targets) and run on CPU by its generated kernels."""
    src = tmp / "p.mlir"
    src.write_text(text)
    mlcc.compile(src, tmp / "bundle", targets=[])
    got = mlcc.load(tmp / "bundle").run({f"arg{i}": x for i, x in enumerate(inputs)})
    return [got[f"out{i}"] for i in range(len(got))]


def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Equal values (bitwise for floats: every half-precision result to the ulp; NaN equal to NaN)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
        same = (got.astype(np.float64) == want.astype(np.float64)) | (np.isnan(got.astype(np.float64))
                                                                      & np.isnan(want.astype(np.float64)))
        assert same.all(), f"{what}: {got} != {want}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# ---------------------------------------------------------------- the spec's gather and scatter, as loops
def spec_gather(operand: np.ndarray, start_indices: np.ndarray, *, offset_dims: Sequence[int],
                collapsed: Sequence[int], operand_batching: Sequence[int] = (), indices_batching: Sequence[int] = (),
                start_map: Sequence[int], ivd: int, slice_sizes: Sequence[int]) -> np.ndarray:
    rank = operand.ndim
    batch_shape = [n for i, n in enumerate(start_indices.shape) if i != ivd]
    offset_operand = [d for d in range(rank) if d not in collapsed and d not in operand_batching]
    out_rank = len(batch_shape) + len(offset_operand)
    batch_dims = [d for d in range(out_rank) if d not in offset_dims]
    shape = [0] * out_rank
    for p, n in zip(batch_dims, batch_shape):
        shape[p] = n
    for p, d in zip(offset_dims, offset_operand):
        shape[p] = slice_sizes[d]
    out = np.zeros(shape, operand.dtype)
    for r in itertools.product(*[range(n) for n in shape]):
        batch_index = [r[d] for d in batch_dims]
        where: list = list(batch_index)
        if ivd < start_indices.ndim:
            where.insert(ivd, slice(None))
        start_index = np.atleast_1d(start_indices[tuple(where)]).astype(np.int64)
        index = [0] * rank
        for k, d in enumerate(start_map):
            index[d] += int(np.clip(start_index[k], 0, operand.shape[d] - slice_sizes[d]))
        for d_operand, d_start in zip(operand_batching, indices_batching):
            index[d_operand] += batch_index[d_start if d_start < ivd else d_start - 1]
        for k, d in enumerate(offset_operand):
            index[d] += r[offset_dims[k]]
        out[r] = operand[tuple(index)]
    return out


def spec_scatter(operands: Sequence[np.ndarray], indices: np.ndarray, updates: Sequence[np.ndarray],
                 body: Callable[..., tuple], *, window_dims: Sequence[int], inserted: Sequence[int],
                 input_batching: Sequence[int] = (), indices_batching: Sequence[int] = (),
                 to_operand: Sequence[int], ivd: int) -> list[np.ndarray]:
    """Update elements in row-major order; a window whose start is out of bounds is skipped (XLA's rule)."""
    results = [o.copy() for o in operands]
    rank = operands[0].ndim
    upd_shape = updates[0].shape
    scatter_dims = [d for d in range(len(upd_shape)) if d not in window_dims]
    window_operand = [d for d in range(rank) if d not in inserted and d not in input_batching]
    window_size = [1] * rank
    for k, d in enumerate(window_operand):
        window_size[d] = upd_shape[window_dims[k]]
    for u in itertools.product(*[range(n) for n in upd_shape]):
        usi = [u[d] for d in scatter_dims]
        where: list = list(usi)
        if ivd < indices.ndim:
            where.insert(ivd, slice(None))
        start = np.atleast_1d(indices[tuple(where)]).astype(np.int64)
        full_start = [0] * rank
        for k, d in enumerate(to_operand):
            full_start[d] = int(start[k])
        if any(not 0 <= full_start[d] <= operand_dim - window_size[d]
               for d, operand_dim in enumerate(operands[0].shape)):
            continue
        index = list(full_start)
        for d_operand, d_indices in zip(input_batching, indices_batching):
            index[d_operand] += usi[d_indices if d_indices < ivd else d_indices - 1]
        for k, d in enumerate(window_operand):
            index[d] += u[window_dims[k]]
        olds = [r[tuple(index)] for r in results]
        news = body(*olds, *[up[u] for up in updates])
        for r, v in zip(results, news):
            r[tuple(index)] = v
    return results
