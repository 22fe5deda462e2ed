"""Compare a bundle's outputs with an independent reference: onnxruntime for ONNX models,
the expected outputs in a reference npz (``out:<name>`` or ``outN``) otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from mlcc.errors import InputMissingError, InvalidInputError, UnsupportedError
from mlcc.bundle.dtypes import STORAGE_NAMES, complex_input, complex_pairs, numpy_dtype
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


def symbol_sizes(symbols: Mapping[str, Any], planned: Mapping[str, int] | None = None) -> list[dict[str, int]]:
    """The sizes a bundle with symbolic dims is checked at: every symbol at the smallest, a middle and the
    largest size of its range (one run each); a symbol with no upper end at its smallest non-empty size, the
    size it was planned at (``planned``) and twice that; a static bundle runs once."""
    if not symbols:
        return [{}]
    planned = planned or {}
    symbols = {k: (max(lo, 1), 2 * planned[k]) if hi is None else (lo, hi) for k, (lo, hi) in symbols.items()}
    picks = [{k: lo for k, (lo, hi) in symbols.items()},
             {k: planned.get(k, (lo + hi) // 2) for k, (lo, hi) in symbols.items()},
             {k: hi for k, (lo, hi) in symbols.items()}]
    return [p for i, p in enumerate(picks) if p not in picks[:i]]


def random_inputs(spec: list[dict[str, Any]], seed: int = 0, sizes: Mapping[str, int] | None = None,
                  ranges: Mapping[str, tuple[int, int]] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs: floats ~ N(0,1) (complex: each part), random booleans, integers over ``ranges[name]`` = [lo, hi) (the valid
    indices of what the input indexes, see integer_ranges) or else in {0, 1} (masks, flags); symbolic dims at
    ``sizes``."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in spec:
        shape = [eval_size(d, sizes or {}) for d in s["shape"]]
        if s.get("complex"):  # a complex input: normal real and imaginary parts (its buffer's last dim is the pair)
            out[s["name"]] = complex_input(rng, shape[:-1], s["numpy_dtype"])
            continue
        if s["numpy_dtype"] in STORAGE_NAMES:  # fp8/fp4 ~ N(0,1) (e8m0: |N(0,1)|); 4- and 2-bit ints over their range
            dt = numpy_dtype(s["numpy_dtype"])
            x = rng.standard_normal(shape).astype(np.float32)
            if s["numpy_dtype"].startswith("float"):
                out[s["name"]] = (np.abs(x) if "e8m0" in s["numpy_dtype"] else x).astype(dt)
            else:
                bits = 4 if "4" in s["numpy_dtype"] else 2
                lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if s["numpy_dtype"][0] == "i" else (0, 1 << bits)
                out[s["name"]] = rng.integers(lo, hi, shape).astype(dt)
            continue
        dt = np.dtype(s["numpy_dtype"]) if s["numpy_dtype"] != "bfloat16" else None
        if dt is None or dt.kind == "f":
            arr = rng.standard_normal(shape).astype(np.float32)
            out[s["name"]] = arr.astype(dt) if dt is not None else arr
        elif dt.kind == "b":
            out[s["name"]] = rng.integers(0, 2, shape).astype(bool)
        else:
            lo, hi = (ranges or {}).get(s["name"], (0, 2))
            out[s["name"]] = rng.integers(lo, hi, shape).astype(dt)
    return out


# Ops whose output holds the same integers as their first input (what an index flows through to a Gather).
_PASS_THROUGH = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand", "Transpose", "Slice",
                 "Concat", "Tile"}
# op type -> (index input, the data input it indexes, the data axis: an attribute name and its default)
_INDEXING = {"Gather": (1, 0, ("axis", 0)), "GatherElements": (1, 0, ("axis", 0))}


def integer_ranges(model: Any) -> dict[str, tuple[int, int]]:
    """For each integer graph input that indexes a tensor (token ids into an embedding table, positions into a
    position table), the valid range [0, n) of the axis it indexes, read from the graph: the smallest such axis
    when it indexes several. Inputs that index nothing (masks) are absent. ``model``: an onnx.ModelProto or a
    path (read without external data: only shapes are needed)."""
    import onnx
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model), load_external_data=False)
    graph = model.graph
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - shapes are a help here: without them, initializers' dims still serve
        inferred = graph
    dims: dict[str, list[int | None]] = {}
    for vi in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    dims.update({t.name: list(t.dims) for t in graph.initializer})
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    ranges: dict[str, tuple[int, int]] = {}
    initializers = {t.name for t in graph.initializer}
    for vi in graph.input:
        if vi.name in initializers:
            continue
        sizes, todo, seen = [], [vi.name], set()
        while todo:
            value = todo.pop()
            if value in seen:
                continue
            seen.add(value)
            for node in consumers.get(value, []):
                if node.op_type in _PASS_THROUGH and node.input and node.input[0] == value:
                    todo.extend(node.output)
                elif node.op_type in _INDEXING and node.input[_INDEXING[node.op_type][0]] == value:
                    _, data, (attr, default) = _INDEXING[node.op_type]
                    axis = next((a.i for a in node.attribute if a.name == attr), default)
                    shape = dims.get(node.input[data])
                    if shape and -len(shape) <= axis < len(shape) and shape[axis]:
                        sizes.append(shape[axis])
        if sizes:
            ranges[vi.name] = (0, min(sizes))
    return ranges


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    p = Path(path)
    if not p.exists():
        raise InputMissingError("no such file", file=str(p))
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise InvalidInputError(f"not a readable .npz file ({e})", file=str(p)) from None


class ReferenceUnavailableError(UnsupportedError):
    """onnxruntime cannot run the model (a kernel it lacks, such as bfloat16 Max on CPU): mlcc has no reference to
    compare with unless the expected outputs are given."""


# fp8 arrays go to onnxruntime as OrtValues of their bits (its binding takes no ml_dtypes array), and come back so.
ORT_FP8 = {"float8_e4m3fn": 17, "float8_e4m3fnuz": 18, "float8_e5m2": 19, "float8_e5m2fnuz": 20}  # TensorProto ids
ORT_FP8_OUTPUTS = {"tensor(float8e4m3fn)": "float8_e4m3fn", "tensor(float8e4m3fnuz)": "float8_e4m3fnuz",
                   "tensor(float8e5m2)": "float8_e5m2", "tensor(float8e5m2fnuz)": "float8_e5m2fnuz"}


def _run_fp8(ort: Any, sess: Any, names: list[str], feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    values = {}
    for name, v in feed.items():
        v = np.ascontiguousarray(v)
        values[name] = (ort.OrtValue.ortvalue_from_numpy_with_onnx_type(v.view(np.uint8), ORT_FP8[v.dtype.name])
                        if v.dtype.name in ORT_FP8 else ort.OrtValue.ortvalue_from_numpy(v))
    types = {o.name: o.type for o in sess.get_outputs()}
    out = {}
    for name, r in zip(names, sess.run_with_ort_values(names, values)):
        arr = r.numpy()
        out[name] = arr.view(numpy_dtype(ORT_FP8_OUTPUTS[types[name]])) if types[name] in ORT_FP8_OUTPUTS else arr
    return out


def _flat(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A sequence output (a list) as one output per element, ``NAME.0``, ``NAME.1``, ..., as a bundle returns it."""
    flat: dict[str, np.ndarray] = {}
    for name, value in outputs.items():
        if isinstance(value, list):
            flat.update({f"{name}.{i}": np.asarray(v) for i, v in enumerate(value)})
        else:
            flat[name] = value
    return flat


def onnxruntime_outputs(model_path: str | Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    unreadable: tuple[type, ...] = ()
    if any(np.asarray(v).dtype.name in STORAGE_NAMES for v in inputs.values()):
        unreadable = (RuntimeError,)  # its Python binding takes no ml_dtypes fp8/int4 array ("Numpy_type 272")
    try:
        sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
        if any(np.asarray(v).dtype.name in ORT_FP8 for v in feed.values()) or \
                any(o.type in ORT_FP8_OUTPUTS for o in sess.get_outputs()):
            return _run_fp8(ort, sess, names, feed)
        return _flat(dict(zip(names, sess.run(names, feed))))
    except (ort_errors.Fail, ort_errors.NotImplemented, ort_errors.InvalidGraph, ort_errors.RuntimeException,
            *unreadable) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ReferenceUnavailableError(f"onnxruntime cannot run this model, so there is no reference ({first}); "
                                        f"give the expected outputs in --inputs as out:<name>",
                                        file=Path(model_path).name) from None


def compare(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
            rtol: float | None = None, atol: float | None = None) -> list[OutputCheck]:
    checks = []
    for name, exp in expected.items():
        exp = np.asarray(exp)
        got = np.asarray(actual[name])
        shape, shown = tuple(exp.shape), exp.dtype.name
        if exp.dtype.kind == "c" and got.shape == exp.shape:  # complex: each part within its type's tolerance
            exp, got = complex_pairs(exp), complex_pairs(got.astype(exp.dtype))
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
        checks.append(OutputCheck(name, ok, max_abs, max_rel, shape, shown))
    return checks
