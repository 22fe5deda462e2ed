"""Post-training static int8 quantization of a float ONNX model (``mlcc compile --quantize int8 --calibration F``).

The result is the QDQ model onnxruntime's ``quantize_static`` writes for the same float model and the same
calibration data with ``QuantFormat.QDQ``, ``per_channel=True``, ``reduce_range=False``, u8 activations, s8
weights and ``CalibrationMethod.MinMax``; it is then imported like any QDQ model, so the contractions go through
the int8 path the imported QDQ models take (hlo/passes/quantized_dot.py, recognize/quant_attention.py).

Two steps, both at the ONNX level, before import (the QDQ placement rules are stated per ONNX op type: which
ops are quantized, Reshape/Transpose outputs sharing their input's parameters, a Relu folded into its
producer's range, int32 biases; once imported, those ops are decomposed and the rules cannot be told apart):

1. Calibration (mlcc's own, :func:`calibrate`): the float model runs in onnxruntime (a core dependency of
   mlcc; the calibrated values are then the float values onnxruntime's MinMaxCalibrater sees, bit for bit,
   with graph optimizations off as it runs them) on every sample of the calibration file, with every float
   non-constant tensor read or written by a node made a graph output; each tensor's range is the min and
   the max over all samples (NaN ignored, as ``np.nanmin``/``np.nanmax`` in the calibrator).
2. The rewrite (:func:`quantize_int8`): onnxruntime's QDQQuantizer, given those ranges, computes the
   parameters (u8 asymmetric: the range widened to include 0, ``scale = (rmax - rmin) / 255`` in float64
   stored as float32, ``zero_point = round(-rmin / scale)``; s8 per-channel weights symmetric:
   ``scale = 2 max|w| / 254`` per output channel, zero point 0; int32 biases at input scale x weight scale)
   and places the Q/DQ nodes. Using its placement rather than a copy of it keeps the result the model
   ``quantize_static`` writes (about 1,500 lines of per-op rules), which is what this option promises.

The calibration file is an .npz keyed by input name. An array whose shape is the input's shape is one
sample; an array with one more leading axis holds that many samples (every input the same count).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from mlcc.errors import InputMissingError, InvalidInputError, UnsupportedError

_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)


def _input_dims(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    """The graph's runtime inputs (not initializers) and their dims (None for a symbolic dim)."""
    inits = {t.name for t in model.graph.initializer}
    dims = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = vi.type.tensor_type.shape
        dims[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in shape.dim)
    return dims


def _fits(shape: tuple[int, ...], dims: tuple[int | None, ...]) -> bool:
    return len(shape) == len(dims) and all(d is None or d == s for s, d in zip(shape, dims))


def load_calibration(path: str | Path, model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """The calibration samples of ``path`` for the model's inputs; exit 66 if the file is missing, 65 naming
    the file and the input when an input is missing or its array fits neither convention."""
    path = Path(path)
    if not path.is_file():
        raise InputMissingError("no such calibration file", file=str(path))
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # a truncated or non-npz file
        raise InvalidInputError(f"not a readable .npz calibration file ({str(e).splitlines()[0]})",
                                file=str(path)) from None
    counts = {}
    samples: dict[str, list[np.ndarray]] = {}
    types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    for name, dims in _input_dims(model).items():
        if name not in arrays:
            raise InvalidInputError(f"calibration data has no array for input '{name}' (it has: "
                                    f"{', '.join(sorted(arrays)) or 'nothing'})", file=str(path))
        a = arrays[name]
        want = onnx.helper.tensor_dtype_to_np_dtype(types[name])
        kinds = {a.dtype.kind, np.dtype(want).kind}
        if a.dtype != want and not (kinds == {"f"} or kinds <= {"i", "u"}):  # another float or integer width is cast
            raise InvalidInputError(f"calibration input '{name}' is {a.dtype}, the model's input is {want}",
                                    file=str(path))
        shown = "x".join("?" if d is None else str(d) for d in dims)
        if _fits(a.shape, dims):
            samples[name] = [a.astype(want)]
        elif a.ndim == len(dims) + 1 and _fits(a.shape[1:], dims) and a.shape[0] > 0:
            samples[name] = [s.astype(want) for s in a]
        else:
            raise InvalidInputError(f"calibration input '{name}' has shape {'x'.join(map(str, a.shape))}; the "
                                    f"model's input is {shown} (one sample) or Sx{shown} (S samples)", file=str(path))
        counts[name] = len(samples[name])
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"'{n}' {c}" for n, c in counts.items())
        raise InvalidInputError(f"calibration inputs hold different numbers of samples: {listed}", file=str(path))
    n = next(iter(counts.values()), 0)
    return [{name: s[i] for name, s in samples.items()} for i in range(n)]


def _inferred(model: onnx.ModelProto, label: str) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception as e:
        raise InvalidInputError(f"shape inference failed ({str(e).splitlines()[0]})", file=label) from None


def tensors_to_calibrate(model: onnx.ModelProto) -> list[str]:
    """Float tensors read or written by a node that are not constants (the calibrator's choice, in node order);
    ``model`` has its shapes inferred."""
    infos = {vi.name: vi for vi in [*model.graph.value_info, *model.graph.output, *model.graph.input]}
    inits = {t.name for t in model.graph.initializer}
    names: list[str] = []
    for node in model.graph.node:
        for t in [*node.input, *node.output]:
            vi = infos.get(t)
            if (vi is not None and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in _FLOAT_TYPES
                    and t not in inits and t not in names):
                names.append(t)
    return names


def calibrate(model: onnx.ModelProto, samples: list[dict[str, np.ndarray]],
              label: str = "model") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per tensor (tensors_to_calibrate), the (min, max) over every sample, as float32 scalars; ``model`` has
    its shapes inferred."""
    import onnxruntime as ort
    names = tensors_to_calibrate(model)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {o.name for o in probe.graph.output}
    infos = {vi.name: vi for vi in [*model.graph.value_info, *model.graph.input]}
    probe.graph.output.extend([infos[n] for n in names if n not in outputs])
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as the calibrator runs it
    try:
        sess = ort.InferenceSession(probe.SerializeToString(), so, providers=["CPUExecutionProvider"])
        fetched = [dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds))) for feeds in samples]
    except Exception as e:
        raise InvalidInputError(f"calibration run failed ({str(e).splitlines()[0]})", file=label) from None
    ranges = {}
    for n in names:
        lows = [np.min(r[n]) if r[n].size else np.float32(np.nan) for r in fetched]
        highs = [np.max(r[n]) if r[n].size else np.float32(np.nan) for r in fetched]
        lo, hi = np.nanmin(np.array(lows, np.float32)), np.nanmax(np.array(highs, np.float32))
        if np.isfinite(lo) and np.isfinite(hi):
            ranges[n] = (np.float32(lo), np.float32(hi))
    return ranges


def quantize_int8(model: onnx.ModelProto, ranges: dict[str, tuple[np.ndarray, np.ndarray]]) -> onnx.ModelProto:
    """The QDQ model quantize_static (QDQ, per-channel, u8 activations, s8 weights) writes for ``model``
    (shapes inferred) calibrated to ``ranges``."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorData, TensorsData
    from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
    from onnxruntime.quantization.quant_utils import update_opset_version
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry
    model = update_opset_version(model, QuantType.QInt8, QuantType.QUInt8)
    data = TensorsData(CalibrationMethod.MinMax,
                       {n: TensorData(lowest=lo, highest=hi) for n, (lo, hi) in ranges.items()})
    op_types = sorted(set(QLinearOpsRegistry) | set(QDQRegistry))  # quantize_static's default: every op it knows
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, its notes on scales it adjusted
    try:
        quantizer = QDQQuantizer(model, True, False, QuantType.QInt8, QuantType.QUInt8, data, [], [], op_types, {})
        quantizer.quantize_model()
        quantizer.model.topological_sort()  # as quantize_static's save does: its node order, so the same IR
    finally:
        logging.getLogger().setLevel(level)
    return quantizer.model.model


def quantize_static_int8(model: onnx.ModelProto, calibration: str | Path, label: str = "model") -> onnx.ModelProto:
    """--quantize int8: ``model`` calibrated on the samples of ``calibration`` and rewritten to QDQ."""
    if any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer):
        raise UnsupportedError("--quantize int8 needs the weights loaded (external data not found)", file=label)
    samples = load_calibration(calibration, model)
    if not samples:
        raise InvalidInputError("calibration file holds no samples (the model has no inputs)", file=str(calibration))
    inferred = _inferred(model, label)
    return quantize_int8(inferred, calibrate(inferred, samples, label))
