"""Split-K of a dense decode-sized dot (mlcc/hlo/passes/split_k.py with matmul_tiles.dense_split_k_slices): a
classifier at batch 1, [1, K] x [K, N] with its weight read as stored, becomes K slices computed by S times the
programs and a reduce adding them in a fixed order (no atomics) with the epilogue fused into it. It must still
match onnxruntime, on CPU and under the sm_90 binaries' launch configs (sim:sm_90)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.cli import main

K, N = 1024, 256


def classifier(tmp_path) -> str:
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array((rng.standard_normal((K, N)) * 0.05).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, N])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "classifier.onnx"
    onnx.save(model, path)
    return str(path)


def test_a_batch_one_classifier_is_split_over_k_into_more_programs(tmp_path):
    path = classifier(tmp_path)
    split = mlcc.compile(path, tmp_path / "split", targets=["sm_90"], cache_dir="").manifest
    whole = mlcc.compile(path, tmp_path / "whole", targets=["sm_90"], cache_dir="",
                         disable_passes=["split-k"]).manifest

    def dot_programs(manifest) -> int:
        step = next(s for s in manifest["schedule"] if "output" in s["kernel"] or s["kernel"].startswith("dot"))
        kernel = next(e for e in manifest["kernels"] if e["name"] == step["kernel"])
        grid = kernel["binaries"]["sm_90"]["config"]["grid"]
        return grid[0] * grid[1]

    # N = 256 in 4 tiles of 64 columns; 4 slices of 256 of K (dense_split_k_slices)
    assert dot_programs(whole) == 4 and dot_programs(split) == 16
    assert len(whole["schedule"]) == 1 and len(split["schedule"]) == 2  # the partials' dot, the reduce + bias + relu
    # the f32 partials are written once and read once: 2 x 4 slices x 256 x 4 bytes more
    assert split["stats"]["bytes"] - whole["stats"]["bytes"] == 2 * 4 * N * 4


@pytest.mark.parametrize("device, target", [("cpu", "none"), ("sim:sm_90", "sm_90")])
def test_the_split_classifier_matches_onnxruntime(tmp_path, device, target):
    path = classifier(tmp_path)
    r = CliRunner().invoke(main, ["verify", path, "--bundle", str(tmp_path / "b"), "--device", device,
                                  "--target", target])
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.output and r.output.startswith("ok")
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    templates = {k["name"]: k["template"] for k in manifest["kernels"]}
    assert [templates[s["kernel"]] for s in manifest["schedule"]] == ["matmul.py.jinja", "reduce.py.jinja"]
