"""Long graphs (tools/synthetic_graphs.py): compile time grows about linearly with their length, so a
20,000-node elementwise chain compiles (benchmarks/pass_scaling.py measures the time per instruction per pass;
these tests only check that the compiles finish and compute what onnxruntime does)."""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
import pytest

import mlcc
from mlcc_test_paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from synthetic_graphs import build  # noqa: E402


def _check_against_onnxruntime(spec: str, tmp_path, input_shape) -> dict:
    model = build(spec)
    result = mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="")
    x = np.random.default_rng(1).standard_normal(input_shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return result.manifest


@pytest.mark.parametrize("spec, shape", [("chain:300", (16, 16)), ("fanout:64", (16, 16)), ("layers:3", (1, 8, 32))])
def test_synthetic_graphs_match_onnxruntime(spec, shape, tmp_path):
    _check_against_onnxruntime(spec, tmp_path, shape)


@pytest.mark.slow
def test_a_20000_node_chain_compiles(tmp_path):
    """Before fusion stopped copying its groups this took minutes (27.7 s in fusion alone at 2,000 nodes)."""
    m = mlcc.compile(build("chain:20000"), tmp_path / "b", targets=[], cache_dir="").manifest
    assert len(m["schedule"]) <= 20000 // 64  # fused: at most a few hundred launches, not one per node


@pytest.mark.slow
def test_a_1000_layer_stack_compiles(tmp_path):
    m = mlcc.compile(build("layers:1000"), tmp_path / "b", targets=[], cache_dir="").manifest
    assert len(m["schedule"]) < 20 * 1000
