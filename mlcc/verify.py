"""Compare a bundle's outputs with an independent reference: onnxruntime for ONNX models,
the expected outputs in a reference npz (``out:<name>`` or ``outN``) otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from mlcc.errors import InputMissingError, InvalidInputError
from mlcc.bundle.sizes import eval_size

TOLERANCES = {  # rtol, atol (RELIABILITY.md, "Tolerances that the anchors use")
    "float64": (1e-3, 1e-7), "float32": (1e-3, 1e-5), "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5),
}


# A model compiled at reduced precision, compared with the fp32 reference: the half types' own
# rounding (fp16 2^-11, bf16 2^-8 relative per op) accumulates over a network's depth.
PRECISION_TOLERANCES = {"fp32": None, "tf32": (5e-3, 1e-4), "fp16": (1e-2, 1e-3), "bf16": (6e-2, 1e-2)}


@dataclass
class OutputCheck:
    name: str
    ok: bool
    max_abs: float
    max_rel: float
    shape: tuple
    dtype: str


def symbol_sizes(symbols: Mapping[str, Any]) -> list[dict[str, int]]:
    """The sizes a bundle with symbolic dims is checked at: every symbol at the smallest, a middle and the
    largest size of its range (one run each); a static bundle runs once."""
    if not symbols:
        return [{}]
    picks = [{k: lo for k, (lo, hi) in symbols.items()}, {k: (lo + hi) // 2 for k, (lo, hi) in symbols.items()},
             {k: hi for k, (lo, hi) in symbols.items()}]
    return [p for i, p in enumerate(picks) if p not in picks[:i]]


def random_inputs(spec: list[dict[str, Any]], seed: int = 0, sizes: Mapping[str, int] | None = None
                  ) -> dict[str, np.ndarray]:
    """Seeded inputs: floats ~ N(0,1), integers in {0, 1} (valid ids and masks), random booleans; symbolic
    dims at ``sizes``."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in spec:
        shape = [eval_size(d, sizes or {}) for d in s["shape"]]
        dt = np.dtype(s["numpy_dtype"]) if s["numpy_dtype"] != "bfloat16" else None
        if dt is None or dt.kind == "f":
            arr = rng.standard_normal(shape).astype(np.float32)
            out[s["name"]] = arr.astype(dt) if dt is not None else arr
        elif dt.kind == "b":
            out[s["name"]] = rng.integers(0, 2, shape).astype(bool)
        else:
            out[s["name"]] = rng.integers(0, 2, shape).astype(dt)
    return out


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    p = Path(path)
    if not p.exists():
        raise InputMissingError("no such file", file=str(p))
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise InvalidInputError(f"not a readable .npz file ({e})", file=str(p)) from None


def onnxruntime_outputs(model_path: str | Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    return dict(zip(names, sess.run(names, feed)))


def compare(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
            rtol: float | None = None, atol: float | None = None) -> list[OutputCheck]:
    checks = []
    for name, exp in expected.items():
        exp = np.asarray(exp)
        got = np.asarray(actual[name])
        dt = exp.dtype.name
        r, a = TOLERANCES.get(dt, (0.0, 0.0))
        r = r if rtol is None else rtol
        a = a if atol is None else atol
        if got.shape != exp.shape:
            checks.append(OutputCheck(name, False, float("inf"), float("inf"), got.shape, dt))
            continue
        if exp.dtype.kind in "fc" or dt == "bfloat16":
            g, e = got.astype(np.float64), exp.astype(np.float64)
            diff = np.abs(g - e)
            both_nan = np.isnan(g) & np.isnan(e)
            same_inf = np.isinf(g) & np.isinf(e) & (np.sign(g) == np.sign(e))
            diff = np.where(both_nan | same_inf, 0.0, diff)
            max_abs = float(np.nanmax(diff, initial=0.0)) if diff.size else 0.0
            if np.isnan(diff).any():
                max_abs = float("nan")
            rel = diff / np.maximum(np.abs(e), 1e-30)
            max_rel = float(np.max(np.where(diff == 0, 0.0, rel), initial=0.0)) if diff.size else 0.0
            ok = bool(np.all(diff <= a + r * np.abs(np.where(np.isfinite(e), e, 0.0))))
        else:
            ok = bool(np.array_equal(got, exp))
            max_abs = float(np.max(np.abs(got.astype(np.float64) - exp.astype(np.float64)), initial=0.0)) if exp.size else 0.0
            max_rel = 0.0 if ok else float("inf")
        checks.append(OutputCheck(name, ok, max_abs, max_rel, tuple(exp.shape), dt))
    return checks
