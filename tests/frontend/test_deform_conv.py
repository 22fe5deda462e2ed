"""DeformConv beyond the node suite's four cases: random inputs with several groups and offset groups, strides,
dilations, pads, with and without mask and bias, against onnxruntime (2-D) and a numpy implementation written
from the spec (1-D, 2-D, 3-D; checked against onnxruntime on the 2-D cases); the kernels under Triton's
interpreter; inconsistent shapes a one-line error naming the node (exit 65)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import mlcc.backend
from mlcc.frontend.onnx import InvalidModelError, import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module


def _model(shapes: dict[str, tuple[int, ...]], dtype: int = TensorProto.FLOAT, name: str = "dc",
           **attrs) -> onnx.ModelProto:
    names = [n if n in shapes else "" for n in ("x", "w", "offset", "b", "mask")]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DeformConv", names, ["y"], name=name, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", dtype, [None] * len(shapes["x"]))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)


def _bilinear(plane: np.ndarray, pos: np.ndarray) -> float:
    """plane read at the fractional position pos, linearly per axis, 0 outside (GridSample's zeros padding)."""
    low = np.floor(pos).astype(np.int64)
    total = 0.0
    for corner in itertools.product((0, 1), repeat=len(pos)):
        idx = low + np.array(corner)
        if np.all(idx >= 0) and np.all(idx < plane.shape):
            frac = pos - low
            weight = np.prod(np.where(np.array(corner) == 1, frac, 1 - frac))
            total += weight * float(plane[tuple(idx)])
    return total


def deform_conv_numpy(x, w, offset, b=None, mask=None, strides=None, dilations=None, pads=None, group=1,
                      offset_group=1) -> np.ndarray:
    """The spec's deformable convolution, one output element at a time, in float64."""
    n_batch, channels, *sizes = x.shape
    out_channels, per_group, *kernel = w.shape
    n = len(sizes)
    strides, dilations, pads = strides or [1] * n, dilations or [1] * n, pads or [0] * (2 * n)
    out = offset.shape[2:]
    taps = math.prod(kernel)
    off = offset.reshape(n_batch, offset_group, taps, n, *out)
    msk = (mask.reshape(n_batch, offset_group, taps, *out) if mask is not None
           else np.ones((n_batch, offset_group, taps, *out)))
    y = np.zeros((n_batch, out_channels, *out))
    per_out, per_offset = out_channels // group, channels // offset_group
    for bi, oc, o in itertools.product(range(n_batch), range(out_channels), itertools.product(*map(range, out))):
        g = oc // per_out
        acc = 0.0 if b is None else float(b[oc])
        for ci in range(per_group):
            c = g * per_group + ci
            og = c // per_offset
            for t, k in enumerate(itertools.product(*map(range, kernel))):
                pos = np.array([-pads[i] + strides[i] * o[i] + dilations[i] * k[i] + off[(bi, og, t, i) + o]
                                for i in range(n)], dtype=np.float64)
                acc += float(w[(oc, ci) + k]) * float(msk[(bi, og, t) + o]) * _bilinear(x[bi, c], pos)
        y[(bi, oc) + o] = acc
    return y


CASES = {  # id: (x dims, out channels, kernel, group, offset_group, attrs, mask, bias)
    "plain-3x3-pad1": ((1, 2, 5, 5), 3, (3, 3), 1, 1, {"pads": [1, 1, 1, 1]}, False, False),
    "groups-offset-groups-mask-bias": ((2, 4, 6, 5), 6, (2, 3), 2, 2, {"pads": [1, 0, 0, 1]}, True, True),
    "stride-dilation": ((1, 3, 9, 8), 2, (3, 2), 1, 3, {"strides": [2, 1], "dilations": [2, 3], "pads": [2, 2, 1, 3]},
                        True, False),
    "depthwise-4-offset-groups": ((1, 4, 4, 6), 8, (2, 2), 4, 4, {"strides": [1, 2]}, False, True),
}


def _inputs(rng, x_dims, out_channels, kernel, group, offset_group, attrs, with_mask, with_bias):
    n = len(kernel)
    x = rng.standard_normal(x_dims).astype(np.float32)
    w = rng.standard_normal((out_channels, x_dims[1] // group) + kernel).astype(np.float32)
    strides, dilations = attrs.get("strides", [1] * n), attrs.get("dilations", [1] * n)
    pads = attrs.get("pads", [0] * 2 * n)
    out = tuple((s + pads[i] + pads[n + i] - (k - 1) * d - 1) // st + 1
                for i, (s, k, st, d) in enumerate(zip(x_dims[2:], kernel, strides, dilations)))
    taps = math.prod(kernel)
    feeds = {"x": x, "w": w,
             "offset": rng.uniform(-2.5, 2.5, (x_dims[0], offset_group * taps * n) + out).astype(np.float32)}
    if with_bias:
        feeds["b"] = rng.standard_normal(out_channels).astype(np.float32)
    if with_mask:
        feeds["mask"] = rng.uniform(0, 1, (x_dims[0], offset_group * taps) + out).astype(np.float32)
    return feeds


def _case(case_id: str, seed: int = 0):
    x_dims, out_channels, kernel, group, offset_group, attrs, with_mask, with_bias = CASES[case_id]
    feeds = _inputs(np.random.default_rng(seed), x_dims, out_channels, kernel, group, offset_group, attrs,
                    with_mask, with_bias)
    attrs = dict(attrs, group=group, offset_group=offset_group)
    model = _model({k: v.shape for k, v in feeds.items()}, **attrs)
    return model, feeds, attrs


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_deform_conv_matches_onnxruntime_and_the_numpy_reference(case_id: str) -> None:
    model, feeds, attrs = _case(case_id)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    mine = deform_conv_numpy(feeds["x"], feeds["w"], feeds["offset"], feeds.get("b"), feeds.get("mask"),
                             attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"), attrs["group"],
                             attrs["offset_group"])
    np.testing.assert_allclose(mine, want, rtol=1e-4, atol=1e-4)  # the numpy reference agrees with onnxruntime
    module = import_onnx(model)
    verify_module(module)
    got = evaluate(module, feeds)["y"]
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_dims,kernel,attrs", [
    ((2, 2, 11), (3,), {"strides": [2], "dilations": [2], "pads": [1, 2]}),
    ((1, 2, 4, 5, 3), (2, 2, 2), {"pads": [1, 0, 1, 0, 1, 0], "strides": [1, 2, 1]}),
], ids=["1d", "3d"])
def test_deform_conv_in_1d_and_3d_matches_the_numpy_reference(x_dims, kernel, attrs) -> None:
    feeds = _inputs(np.random.default_rng(1), x_dims, 4, kernel, 2, 2, attrs, True, True)
    attrs = dict(attrs, group=2, offset_group=2)
    module = import_onnx(_model({k: v.shape for k, v in feeds.items()}, **attrs))
    verify_module(module)
    want = deform_conv_numpy(feeds["x"], feeds["w"], feeds["offset"], feeds["b"], feeds["mask"],
                             attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"), 2, 2)
    np.testing.assert_allclose(evaluate(module, feeds)["y"], want, rtol=1e-4, atol=1e-4)


def test_deform_conv_kernels_match_onnxruntime() -> None:
    """The compiled bundle, its kernels run by Triton's interpreter."""
    model, feeds, _ = _case("groups-offset-groups-mask-bias", seed=3)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = mlcc.backend.prepare(model).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_deform_conv_with_a_symbolic_batch_compiles_once_and_matches_onnxruntime() -> None:
    """The batch dim a symbol "N" in x, offset, mask and y: one bundle, run at two batch sizes."""
    x_dims, out_channels, kernel, group, offset_group, attrs, _, _ = CASES["groups-offset-groups-mask-bias"]
    attrs = dict(attrs, group=group, offset_group=offset_group)
    shapes = {k: v.shape for k, v in _inputs(np.random.default_rng(0), x_dims, out_channels, kernel, group,
                                              offset_group, attrs, True, True).items()}
    model = _model({k: ("N", *v[1:]) if k in ("x", "offset", "mask") else v for k, v in shapes.items()}, **attrs)
    rep = mlcc.backend.prepare(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        feeds = _inputs(np.random.default_rng(batch), (batch, *x_dims[1:]), out_channels, kernel, group,
                        offset_group, attrs, True, True)
        got = rep.run(feeds)[0]
        assert got.shape[0] == batch
        np.testing.assert_allclose(got, sess.run(None, feeds)[0], rtol=1e-4, atol=1e-4)
    assert rep.baked == []  # nothing was compiled in: one bundle serves both sizes


def test_deform_conv_in_f16_matches_the_f32_result_rounded() -> None:
    model, feeds, _ = _case("plain-3x3-pad1", seed=4)
    half = {k: v.astype(np.float16) for k, v in feeds.items()}
    exact = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {k: v.astype(np.float32) for k, v in half.items()})[0]
    got = evaluate(import_onnx(_model({k: v.shape for k, v in half.items()}, TensorProto.FLOAT16,
                                      pads=[1, 1, 1, 1])), half)["y"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), exact, rtol=2e-3, atol=2e-3)


BAD = [
    ({"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "offset": (1, 16, 3, 3)},
     {}, "offset dims [1, 16, 3, 3] are not [1, 18, 3, 3] (batch, offset_group * kernel taps * 2, output dims)"),
    ({"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "offset": (1, 18, 4, 4)},
     {}, "offset dims [1, 18, 4, 4] are not [1, 18, 3, 3]"),
    ({"x": (1, 4, 5, 5), "w": (3, 2, 3, 3), "offset": (1, 18, 3, 3)},
     {"group": 2}, "group 2 does not split 4 input channels into weights of 2 and 3 output channels"),
    ({"x": (1, 4, 5, 5), "w": (2, 4, 3, 3), "offset": (1, 54, 3, 3)},
     {"offset_group": 3}, "offset_group 3 does not divide 4 input channels"),
    ({"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "offset": (1, 18, 3, 3), "mask": (1, 18, 3, 3)},
     {}, "mask dims [1, 18, 3, 3] are not [1, 9, 3, 3] (batch, offset_group * kernel taps, output dims)"),
    ({"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "offset": (1, 18, 3, 3), "b": (2,)},
     {}, "bias dims [2] are not [3]"),
    ({"x": (1, 2, 5, 5), "w": (3, 2, 3), "offset": (1, 18, 3, 3)},
     {}, "weight dims [3, 2, 3] do not match an input of dims [1, 2, 5, 5]"),
    ({"x": (1, 2, 2, 2), "w": (3, 2, 3, 3), "offset": (1, 18, 1, 1)},
     {}, "the kernel [3, 3] (dilations [1, 1]) is larger than the padded input [2, 2]"),
]


@pytest.mark.parametrize("shapes,attrs,message", BAD, ids=range(len(BAD)))
def test_inconsistent_shapes_are_one_line_errors_naming_the_node(tmp_path: Path, shapes, attrs, message) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(shapes, name="dc_7", **attrs), path)
    with pytest.raises(InvalidModelError) as err:
        import_onnx(path)
    text = str(err.value)
    assert text.startswith("model.onnx: node 'dc_7' (DeformConv): ") and message in text and "\n" not in text
    assert err.value.exit_code == 65
