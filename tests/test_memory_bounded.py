"""A compile's memory is bounded by a constant plus the largest tensor it transforms, not by the model:
weights are memory-mapped from the model's files (inline or external), concatenated lazily, and
converted or re-laid-out slab by slab into weights.bin."""

from __future__ import annotations

import json
import mmap
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
import mlcc.emit.writer.bundle as writer
from mlcc.bundle.layout import to_physical
from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.lazy_constants import ConcatenatedWeights
from mlcc_test_paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from gen_llama import Config, generate, weights  # noqa: E402
from gpt2_export import export, gather_external_data  # noqa: E402


def _mapped_file(arr: np.ndarray):
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def _inline_model(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """y = x @ w + b with w (1.5 MiB, above the mapping threshold) inline in the .onnx file."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 768)).astype(np.float32)
    b = rng.standard_normal(768).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
                              "inline", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 768])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / "inline.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, w


def test_large_inline_initializers_are_mapped_from_the_model_file(tmp_path):
    path, w = _inline_model(tmp_path)
    module = import_onnx(path)
    (ref,) = [k for k, v in module.constants.items() if np.shape(v) == w.shape]
    assert isinstance(_mapped_file(module.constants[ref]), mmap.mmap)  # a view of the .onnx file, not a copy
    np.testing.assert_array_equal(module.constants[ref], w)
    assert module.source_files == []  # the model file is hashed once, as the model


def test_bundle_of_an_inline_model_matches_onnxruntime_and_the_in_memory_import(tmp_path):
    """The mapped path and the protobuf path (an in-memory ModelProto, parsed by onnx) give the same bundle
    weights, and the bundle computes what onnxruntime does."""
    path, _ = _inline_model(tmp_path)
    mlcc.compile(path, tmp_path / "mapped", targets=[], cache_dir="")
    mlcc.compile(onnx.load(str(path)), tmp_path / "parsed", targets=[], cache_dir="")
    assert (tmp_path / "mapped" / "weights.bin").read_bytes() == (tmp_path / "parsed" / "weights.bin").read_bytes()
    x = np.random.default_rng(1).standard_normal((2, 512)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(mlcc.load(tmp_path / "mapped").run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=["row-major", "column-major"])
def test_precision_conversion_is_written_in_slabs(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(writer, "CHUNK_BYTES", 1000)
    arr = np.random.default_rng(2).standard_normal((37, 29)).astype(np.float32)
    with open(tmp_path / "w.bin", "wb") as f:
        assert writer._write_physical(f, arr, layout, np.dtype(np.float16)) == arr.size * 2
    assert (tmp_path / "w.bin").read_bytes() == to_physical(arr.astype(np.float16), layout).tobytes()


@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=["row-major", "column-major"])
def test_concatenated_weights_are_written_in_slabs(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(writer, "CHUNK_BYTES", 700)
    rng = np.random.default_rng(3)
    parts = [rng.standard_normal((23, n)).astype(np.float32) for n in (5, 17, 9)]
    lazy = ConcatenatedWeights(parts, axis=1)
    whole = np.concatenate(parts, axis=1)
    assert lazy.shape == whole.shape and lazy.nbytes == whole.nbytes
    np.testing.assert_array_equal(np.asarray(lazy), whole)
    np.testing.assert_array_equal(lazy.block(1, 3, 25), whole[:, 3:25])
    with open(tmp_path / "w.bin", "wb") as f:
        writer._write_physical(f, lazy, layout, np.dtype(np.float16))
    assert (tmp_path / "w.bin").read_bytes() == to_physical(whole.astype(np.float16), layout).tobytes()


def test_exporter_gathers_per_tensor_files_into_one_data_file(tmp_path):
    """A model over 2 GB comes out of torch's exporter as one file per tensor; gather_external_data moves
    them into one .data file the model points at, and the model computes the same."""
    pytest.importorskip("torch")
    export(str(tmp_path / "inline.onnx"), layers=1, d=32, heads=2, vocab=100, seq=4, positions=16)
    model = onnx.load(str(tmp_path / "inline.onnx"))
    split = tmp_path / "split" / "m.onnx"
    split.parent.mkdir()
    onnx.save_model(model, str(split), save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0)
    assert len(list(split.parent.iterdir())) > 5
    gather_external_data(split)
    assert sorted(p.name for p in split.parent.iterdir()) == ["m.data", "m.onnx"]
    ids = np.array([[1, 5, 7, 99]], np.int64)
    run = lambda p: ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids})[0]
    np.testing.assert_array_equal(run(split), run(tmp_path / "inline.onnx"))
    offsets = [int(e.value) for t in onnx.load(str(split), load_external_data=False).graph.initializer
               for e in t.external_data if e.key == "offset"]
    assert offsets and all(o % 4096 == 0 for o in offsets)


MEASURE = r"""
import json, resource, sys
sys.path.insert(0, sys.argv[1])
import mlcc
mlcc.compile(sys.argv[2], sys.argv[3], targets=[], cache_dir="", precision=sys.argv[4],
             shapes={"past": "0..64", "seq": "1..64"})
print(json.dumps({"max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _peak_rss(model: Path, out: Path, precision: str) -> int:
    r = subprocess.run([sys.executable, "-c", MEASURE, str(ROOT), str(model), str(out), precision],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["max_rss"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype,precision", [("float16", "fp32"), ("float32", "fp16")], ids=["f16", "f32-to-fp16"])
def test_peak_rss_is_a_constant_plus_the_largest_tensor(tmp_path, dtype, precision):
    """The compile of a ~200-360 MB decoder (weights external) against the compile of the same graph with
    tiny weights (the constant: interpreter, libraries, IR): the difference stays under the largest
    tensor plus 48 MiB, far below the model's size (measured: about 2 MiB at f16)."""
    shape = dict(layers=2, heads=8, dtype=dtype, positions=256)
    big = Config(hidden=1024, ffn=2816, vocab=32000, **shape)
    tiny = Config(hidden=64, ffn=96, vocab=500, **shape)
    generate(tmp_path / "big" / "m.onnx", big)
    generate(tmp_path / "tiny" / "m.onnx", tiny)
    model_bytes = (tmp_path / "big" / "m.data").stat().st_size
    largest = max(w.numel for w in weights(big)) * np.dtype(dtype).itemsize
    base = _peak_rss(tmp_path / "tiny" / "m.onnx", tmp_path / "tiny_b", precision)
    peak = _peak_rss(tmp_path / "big" / "m.onnx", tmp_path / "big_b", precision)
    assert peak - base < largest + (48 << 20), (peak, base, largest, model_bytes)
    assert largest + (48 << 20) < model_bytes  # the bound says something: a copy of the model would break it
