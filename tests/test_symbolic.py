"""Symbolic dims end to end: one bundle, kernels taking sizes as run-time arguments, run for many sizes
and checked against onnxruntime; the runtime checks inputs against the manifest's symbolic shapes."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import mlcc
from mlcc.errors import UnsupportedError
from mlcc.runtime.bundle import BundleError


def _loop_model() -> onnx.ModelProto:
    """Embedding rows gathered by n ids, added to an [n, 64] input, sliced, scaled, transposed: loop kernels."""
    rng = np.random.default_rng(0)
    table = h.make_tensor("table", T.FLOAT, [50, 64], rng.standard_normal((50, 64)).astype(np.float32).ravel())
    scale = h.make_tensor("scale", T.FLOAT, [1, 32], rng.standard_normal(32).astype(np.float32))
    starts = h.make_tensor("starts", T.INT64, [1], [8])
    ends = h.make_tensor("ends", T.INT64, [1], [40])
    axes = h.make_tensor("axes", T.INT64, [1], [1])
    nodes = [
        h.make_node("Gather", ["table", "ids"], ["e"], axis=0),
        h.make_node("Add", ["e", "x"], ["a"]),
        h.make_node("Tanh", ["a"], ["t"]),
        h.make_node("Slice", ["t", "starts", "ends", "axes"], ["s"]),
        h.make_node("Mul", ["s", "scale"], ["m"]),
        h.make_node("Transpose", ["m"], ["y"], perm=[1, 0]),
    ]
    graph = h.make_graph(nodes, "symbolic_loop",
                         [h.make_tensor_value_info("ids", T.INT64, ["n"]),
                          h.make_tensor_value_info("x", T.FLOAT, ["n", 64])],
                         [h.make_tensor_value_info("y", T.FLOAT, [32, "n"])],
                         [table, scale, starts, ends, axes])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def loop_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("symbolic")
    path = root / "loop.onnx"
    onnx.save(_loop_model(), path)
    result = mlcc.compile(path, root / "bundle", targets=["sm_80"], shapes={"n": "1..100"})
    return path, result


def _inputs(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, 50, n).astype(np.int64), "x": rng.standard_normal((n, 64)).astype(np.float32)}


@pytest.mark.parametrize("n", [1, 7, 100])
def test_one_bundle_runs_every_size_in_range(loop_bundle, n):
    path, result = loop_bundle
    feeds = _inputs(n, n)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = mlcc.load(result.out_dir).run(feeds)["y"]
    assert got.shape == (32, n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_kernels_take_the_size_as_an_argument(loop_bundle):
    _, result = loop_bundle
    m = json.loads((result.out_dir / "manifest.json").read_text())
    assert m["schema_version"] == 3 and m["symbols"] == {"n": [1, 100]}
    assert m["inputs"][1]["shape"] == ["n", 64] and m["outputs"][0]["shape"] == [32, "n"]
    (launch,) = m["schedule"]  # one loop fusion
    assert launch["scalars"] == ["n"] and launch["grid"][0] == "max(1, cdiv(32*n, 1024))"
    source = (result.out_dir / m["kernels"][0]["source"]).read_text()
    assert "sym_n, BLOCK: tl.constexpr):" in source  # the @triton.jit signature
    assert m["kernels"][0]["arg_types"][-1] == "i32"
    assert (result.out_dir / m["kernels"][0]["binaries"]["sm_80"]["path"]).read_bytes()[:4] == b"\x7fELF"
    # buffers are planned for the largest size: the [32, n] output at n = 100
    assert m["buffers"][m["outputs"][0]["buffer"]]["bytes"] == 32 * 100 * 4


def test_sizes_outside_the_range_or_disagreeing_are_one_line_errors(loop_bundle):
    _, result = loop_bundle
    ex = mlcc.load(result.out_dir)
    with pytest.raises(BundleError, match=r"input 'ids': dim 0 \('n'\) is 101, the bundle was built for n in 1..100"):
        ex.run(_inputs(101, 0))
    feeds = _inputs(3, 0)
    feeds["x"] = feeds["x"][:2]
    with pytest.raises(BundleError, match=r"input 'x': shape \[2, 64\], the bundle expects \['n', 64\] = \[3, 64\]"):
        ex.run(feeds)


def test_a_symbolic_input_needs_a_range_or_a_size(tmp_path):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), path)
    with pytest.raises(UnsupportedError, match=r"--shape n=1..MAX\) or a size \(--shape n=N\)"):
        mlcc.compile(path, tmp_path / "b", targets=[])
    assert not (tmp_path / "b").exists()
