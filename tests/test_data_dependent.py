"""Data-dependent output shapes, bounded (docs/data-dependent-shapes.md): NonZero, Unique, TopK with a run-time k
and NonMaxSuppression compile to bundles whose outputs have the run-time size, checked against onnxruntime on
CPU (Triton's interpreter), with counts of 0, in between and at the bound; a bound that cannot be derived and a
count above a user's bound fail with one line naming what to change."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h

import mlcc
from mlcc.cli import main
from mlcc.bundle.errors import BundleError
from mlcc.bundle.manifest import Manifest
from mlcc.bundle.schemas import validate
from mlcc.errors import InternalError, MlccError, UnsupportedError
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import ParseError, parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import VerifierError, verify_module


def _out(name: str, elem: int, rank: int) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, elem, [None] * rank)


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)], ir_version=9)


def _reference(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _check(exe, model: onnx.ModelProto, feeds: dict) -> dict:
    got = exe.run(feeds)
    for (name, g), r in zip(got.items(), _reference(model, feeds)):
        assert g.shape == r.shape, (name, g.shape, r.shape)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, err_msg=name)
    return got


def _detector(max_per_class: int | None) -> onnx.ModelProto:
    """A detection head: a 1x1 conv over a feature map gives 4 box coordinates and 2 class scores per cell;
    NonMaxSuppression picks boxes, and a Gather of the selected box indices returns their coordinates."""
    rng = np.random.default_rng(7)
    w = onnx.numpy_helper.from_array(rng.standard_normal((6, 3, 1, 1)).astype(np.float32), "w")
    inits = [w, onnx.numpy_helper.from_array(np.array([0.3], np.float32), "iou"),
             onnx.numpy_helper.from_array(np.array([0, 2], np.int64), "col"),
             onnx.numpy_helper.from_array(np.array([1, 4, 16], np.int64), "boxes_shape"),
             onnx.numpy_helper.from_array(np.array([1, 2, 16], np.int64), "scores_shape")]
    nms_inputs = ["boxes", "scores", "max_out", "iou", "score_min"]
    if max_per_class is not None:
        inits.append(onnx.numpy_helper.from_array(np.array([max_per_class], np.int64), "max_out"))
    nodes = [
        h.make_node("Conv", ["x", "w"], ["head"]),                                    # [1, 6, 4, 4]
        h.make_node("Slice", ["head", "zero", "four", "one"], ["box_raw"]),          # [1, 4, 4, 4]
        h.make_node("Slice", ["head", "four", "six", "one"], ["score_raw"]),         # [1, 2, 4, 4]
        h.make_node("Reshape", ["box_raw", "boxes_shape"], ["box_t"]),
        h.make_node("Transpose", ["box_t"], ["boxes"], perm=[0, 2, 1]),               # [1, 16, 4]
        h.make_node("Reshape", ["score_raw", "scores_shape"], ["score_r"]),
        h.make_node("Sigmoid", ["score_r"], ["scores"]),                              # [1, 2, 16]
        h.make_node("NonMaxSuppression", nms_inputs, ["selected"]),
        h.make_node("Gather", ["selected", "col"], ["picked"], axis=1),              # [n, 2]: batch, box
        h.make_node("Gather", ["picked", "two"], ["box_index"], axis=1),             # [n]
        h.make_node("Squeeze", ["boxes", "zero"], ["boxes2d"]),                       # [16, 4]
        h.make_node("Gather", ["boxes2d", "box_index"], ["selected_boxes"], axis=0),  # [n, 4]
    ]
    inits += [onnx.numpy_helper.from_array(np.array([v], np.int64), n)
              for n, v in (("zero", 0), ("four", 4), ("six", 6), ("one", 1))]
    inits.append(onnx.numpy_helper.from_array(np.array(1, np.int64), "two"))
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 4, 4]), h.make_tensor_value_info("score_min", T.FLOAT, [1])]
    if max_per_class is None:
        inputs.append(h.make_tensor_value_info("max_out", T.INT64, [1]))
    return _model(nodes, inputs, [_out("selected", T.INT64, 2), _out("selected_boxes", T.FLOAT, 2)], inits)


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    model = _detector(3)
    out = tmp_path_factory.mktemp("det") / "b"
    mlcc.compile(model, out, targets=[])
    return model, mlcc.load(out)


def test_a_detector_with_nms_matches_onnxruntime(detector):
    model, exe = detector
    assert exe.manifest["schema_version"] == 6 and exe.manifest["symbols"]["nms_0"] == [0, 6]  # 3 x 2 classes x 1
    x = np.random.default_rng(1).standard_normal((1, 3, 4, 4)).astype(np.float32) * 3
    counts = {_check(exe, model, {"x": x, "score_min": np.array([t], np.float32)})["selected"].shape[0]
              for t in (0.2, 0.9, 0.99, 0.999)}
    assert len(counts) > 1 and all(0 <= n <= 6 for n in counts)  # the count follows the data


def test_a_detector_selecting_nothing_and_selecting_up_to_the_bound(detector):
    model, exe = detector
    zeros = np.zeros((1, 3, 4, 4), np.float32)  # every score sigmoid(0) = 0.5, every box empty (never suppressed)
    assert _check(exe, model, {"x": zeros, "score_min": np.array([0.6], np.float32)})["selected"].shape == (0, 3)
    got = _check(exe, model, {"x": zeros, "score_min": np.array([0.0], np.float32)})
    assert got["selected"].shape == (6, 3) and got["selected_boxes"].shape == (6, 4)


def test_a_count_of_zero_and_a_count_at_the_bound(tmp_path):
    """max_output_boxes_per_class as a run-time input bounded by --shape: 0 selects nothing, a large one fills
    the bound exactly with well separated boxes, one more is an error naming the tensor."""
    boxes = np.array([[[0, 0, 1, 1], [0, 2, 1, 3], [0, 4, 1, 5], [0, 6, 1, 7]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6]]], np.float32)
    nms = h.make_node("NonMaxSuppression", ["boxes", "scores", "max_out"], ["selected"])
    model = _model([nms], [h.make_tensor_value_info("boxes", T.FLOAT, [1, 4, 4]),
                           h.make_tensor_value_info("scores", T.FLOAT, [1, 1, 4]),
                           h.make_tensor_value_info("max_out", T.INT64, [1])], [_out("selected", T.INT64, 2)])
    with pytest.raises(MlccError, match=r"NonMaxSuppression.*--shape nms_0=\.\.N"):
        mlcc.compile(model, tmp_path / "none", targets=[])
    mlcc.compile(model, tmp_path / "b", targets=[], shapes={"nms_0": "..3"})
    exe = mlcc.load(tmp_path / "b")
    assert _check(exe, model, {"boxes": boxes, "scores": scores, "max_out": np.array([0])})["selected"].shape == (0, 3)
    assert _check(exe, model, {"boxes": boxes, "scores": scores, "max_out": np.array([3])})["selected"].shape == (3, 3)
    with pytest.raises(BundleError, match="tensor 'selected'.*'nms_0' is 4 at run time, above the bound 3"):
        exe.run({"boxes": boxes, "scores": scores, "max_out": np.array([4])})


def test_nonzero_unique_and_top_k_with_a_run_time_k(tmp_path):
    nodes = [h.make_node("NonZero", ["x"], ["nz"]),
             h.make_node("Unique", ["v"], ["u", "ui", "uinv", "uc"], sorted=0),
             h.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=1, largest=0)]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3, 5]), h.make_tensor_value_info("v", T.FLOAT, [9]),
                           h.make_tensor_value_info("k", T.INT64, [1])],
                   [_out("nz", T.INT64, 2), _out("u", T.FLOAT, 1), _out("ui", T.INT64, 1), _out("uinv", T.INT64, 1),
                    _out("uc", T.INT64, 1), _out("tv", T.FLOAT, 2), _out("ti", T.INT64, 2)])
    mlcc.compile(model, tmp_path / "b", targets=[])
    exe = mlcc.load(tmp_path / "b")
    rng = np.random.default_rng(3)
    for x, v, k in [(np.zeros((3, 5), np.float32), np.zeros(9, np.float32), 0),
                    (rng.integers(-1, 2, (3, 5)).astype(np.float32), rng.integers(0, 4, 9).astype(np.float32), 2),
                    (np.ones((3, 5), np.float32), np.arange(9, dtype=np.float32)[::-1].copy(), 5)]:
        _check(exe, model, {"x": x, "v": v, "k": np.array([k])})
    with pytest.raises(BundleError, match="tensor 'tv'.*'topk_0' is 6"):
        exe.run({"x": np.ones((3, 5), np.float32), "v": np.zeros(9, np.float32), "k": np.array([6])})


def test_the_count_record_round_trips_and_the_schema_refuses_a_bad_one(detector):
    _, exe = detector
    doc = exe.manifest
    assert Manifest.from_json(doc).to_json() == doc
    (counting,) = [launch for launch in doc["schedule"] if "counts" in launch]
    assert counting["counts"] == [{"symbol": "nms_0", "buffer": counting["args"][-1], "tensor": "selected"}]
    bad = json.loads(json.dumps(doc))
    next(launch for launch in bad["schedule"] if "counts" in launch)["counts"][0].pop("tensor")
    with pytest.raises(InternalError, match="schedule/.*/counts/0"):
        validate("manifest", bad)


def test_the_cli_names_the_shape_to_give_and_the_tensor_over_its_bound(tmp_path):
    """exit 69, one line, naming the node and the --shape to give; at run time, exit 65 naming the tensor."""
    nms = h.make_node("NonMaxSuppression", ["boxes", "scores", "max_out"], ["selected"], name="nms_node")
    model = _model([nms], [h.make_tensor_value_info("boxes", T.FLOAT, [1, 2, 4]),
                           h.make_tensor_value_info("scores", T.FLOAT, [1, 1, 2]),
                           h.make_tensor_value_info("max_out", T.INT64, [1])], [_out("selected", T.INT64, 2)])
    path = tmp_path / "nms.onnx"
    onnx.save(model, path)
    r = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "none"), "--target", "none"])
    assert r.exit_code == 69 and len(r.output.strip().splitlines()) == 1, r.output
    assert "nms_node" in r.output and "--shape nms_0=..N" in r.output
    r = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "b"), "--target", "none",
                                  "--shape", "nms_0=..1"])
    assert r.exit_code == 0, r.output
    np.savez(tmp_path / "in.npz", boxes=np.array([[[0, 0, 1, 1], [0, 2, 1, 3]]], np.float32),
             scores=np.array([[[0.9, 0.8]]], np.float32), max_out=np.array([2]))
    r = CliRunner().invoke(main, ["run", str(tmp_path / "b"), "--inputs", str(tmp_path / "in.npz"),
                                  "--output", str(tmp_path / "out.npz")])
    assert r.exit_code == 65 and len(r.output.strip().splitlines()) == 1, r.output
    assert "tensor 'selected'" in r.output and "'nms_0' is 2 at run time, above the bound 1" in r.output


NONZERO_IR = """HloModule g, output_names={y}, symbols={nonzero_0={0,6}}

ENTRY %main {
  %x = f32[2,3]{1,0} parameter(0), name=x
  %nonzero = s64[13]{0} nonzero(%x), bound=6, symbol=nonzero_0, tensor=y
  %data = s64[12]{0} slice(%nonzero), limit_indices={13}, start_indices={1}, strides={1}
  %full = s64[2,6]{1,0} reshape(%data)
  %y = s64[2,nonzero_0]{1,0} slice(%full), limit_indices={2,nonzero_0}, start_indices={0,0}, strides={1,1}
  ROOT %tuple = (s64[2,nonzero_0]{1,0}) tuple(%y)
}
"""


def test_the_counting_ops_print_parse_and_evaluate_as_numpy_says():
    module = parse_module(NONZERO_IR)
    verify_module(module)
    assert format_module(module) == NONZERO_IR
    x = np.array([[0, 2, 0], [1, 0, 3]], np.float32)
    np.testing.assert_array_equal(evaluate(module, {"x": x})["y"], np.array(np.nonzero(x)))
    bad = parse_module(NONZERO_IR.replace(", symbol=nonzero_0", ""))
    with pytest.raises((VerifierError, ParseError), match="symbol"):
        verify_module(bad)


def test_a_size_read_without_its_data_is_refused_by_name(tmp_path):
    """Shape(NonZero(x)) alone: the count is never computed, so nothing could bind the size (exit 69, named)."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"]), h.make_node("Shape", ["nz"], ["s"]),
             h.make_node("ConstantOfShape", ["s"], ["ones"], value=h.make_tensor("v", T.FLOAT, [1], [1.0]))]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3, 5])], [_out("ones", T.FLOAT, 2)])
    with pytest.raises(UnsupportedError, match="data-dependent dim 'nonzero_0' and nothing that counts it"):
        mlcc.compile(model, tmp_path / "b", targets=[])


def test_the_gpu_launch_configs_compile_for_sm_80_and_sm_90_and_loop_over_chunks(tmp_path):
    """The binaries' configs (tiles of 64 rows for Unique and TopK, 1024 elements for NonZero) loop over several
    chunks: run on sim:sm_90 (the CUDA path's configs under the interpreter) against onnxruntime."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"]),
             h.make_node("Unique", ["v"], ["u", "ui", "uinv", "uc"]),
             h.make_node("TopK", ["w", "k"], ["tv", "ti"], axis=1),
             h.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou"], ["selected"], center_point_box=1)]
    inits = [onnx.numpy_helper.from_array(np.array([5], np.int64), "max_out"),
             onnx.numpy_helper.from_array(np.array([0.4], np.float32), "iou")]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [40, 60]), h.make_tensor_value_info("v", T.FLOAT, [150]),
                           h.make_tensor_value_info("w", T.FLOAT, [2, 130]), h.make_tensor_value_info("k", T.INT64, [1]),
                           h.make_tensor_value_info("boxes", T.FLOAT, [1, 24, 4]),
                           h.make_tensor_value_info("scores", T.FLOAT, [1, 2, 24])],
                   [_out("nz", T.INT64, 2), _out("u", T.FLOAT, 1), _out("ui", T.INT64, 1), _out("uinv", T.INT64, 1),
                    _out("uc", T.INT64, 1), _out("tv", T.FLOAT, 2), _out("ti", T.INT64, 2), _out("selected", T.INT64, 2)],
                   inits)
    mlcc.compile(model, tmp_path / "b", targets=["sm_80", "sm_90"])
    exe = mlcc.load(tmp_path / "b", device="sim:sm_90")
    rng = np.random.default_rng(5)
    centers = rng.uniform(0, 4, (1, 24, 2)).astype(np.float32)
    boxes = np.concatenate([centers, rng.uniform(0.5, 2, (1, 24, 2)).astype(np.float32)], axis=2)
    _check(exe, model, {"x": (rng.random((40, 60)) < 0.3).astype(np.float32), "v": rng.integers(0, 90, 150).astype(np.float32),
                        "w": rng.integers(0, 40, (2, 130)).astype(np.float32), "k": np.array([100]),
                        "boxes": boxes, "scores": rng.random((1, 2, 24)).astype(np.float32)})
