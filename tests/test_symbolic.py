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
from mlcc.runtime.bundle import BundleError
from mlcc_test_paths import ROOT, SHARED_MODELS


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


# ---- real exports ------------------------------------------------------------------------------------

def _ort(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(scope="module")
def gpt2_dyn(tmp_path_factory):
    """gpt2_dyn_tiny.onnx (TorchScript export with a symbolic seq) compiled once for seq in 1..64."""
    path = SHARED_MODELS / "gpt2_dyn_tiny.onnx"
    return path, mlcc.compile(path, tmp_path_factory.mktemp("gpt2_dyn") / "b", targets=[], shapes={"seq": "1..64"})


@pytest.mark.parametrize("seq", [1, 7, 16])
def test_gpt2_with_a_symbolic_seq_compiles_once_and_runs_at_every_length(gpt2_dyn, seq):
    path, result = gpt2_dyn
    ids = np.random.default_rng(seq).integers(0, 1000, (1, seq)).astype(np.int64)
    (want,) = _ort(path, {"input_ids": ids})
    got = mlcc.load(result.out_dir).run({"input_ids": ids})["logits"]
    assert got.shape == (1, seq, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_symbolic_gpt2_launches_as_many_kernels_as_a_static_one(gpt2_dyn, tmp_path):
    _, result = gpt2_dyn
    # (both builds take back-to-back GEMM fusion: b2b kernels take symbolic rows)
    static = mlcc.compile(SHARED_MODELS / "gpt2_dyn_tiny.onnx", tmp_path / "s", targets=[], shapes={"seq": [16]})
    symbolic = json.loads((result.out_dir / "manifest.json").read_text())
    assert len(symbolic["schedule"]) == len(json.loads((static.out_dir / "manifest.json").read_text())["schedule"])
    assert all(launch["scalars"] == ["seq"] for launch in symbolic["schedule"])
    # the arena holds the largest size: [64, 64]-sized activations and the [4, 64, 64] scores fit
    assert symbolic["memory_plan"]["arena_bytes"] >= 4 * 64 * 64 * 4


@pytest.fixture(scope="module")
def gpt2_tiny_dynseq(tmp_path_factory):
    """The shared gpt2_tiny (transformers, dynamo exporter) re-exported from its own weights with input_ids and
    attention_mask of shape [1, seq] (tools/reexport_gpt2_tiny.py), compiled once for seq in 1..64."""
    path = SHARED_MODELS / "gpt2_tiny_dynseq.onnx"
    return path, mlcc.compile(path, tmp_path_factory.mktemp("gpt2_tiny_dynseq") / "b", targets=[],
                              shapes={"seq": "1..64"})


def test_reexported_gpt2_tiny_reproduces_the_shared_reference(gpt2_tiny_dynseq):
    # gpt2_tiny.ref.npz: onnxruntime on the original static export, seq 16 with 3 padded positions
    _, result = gpt2_tiny_dynseq
    ref = np.load(SHARED_MODELS / "gpt2_tiny.ref.npz")
    got = mlcc.load(result.out_dir).run({"input_ids": ref["input_ids"], "attention_mask": ref["attention_mask"]})
    np.testing.assert_allclose(got["logits"], ref["out:logits"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("seq", [1, 7, 16])
def test_reexported_gpt2_tiny_runs_every_length_from_one_bundle(gpt2_tiny_dynseq, seq):
    path, result = gpt2_tiny_dynseq
    rng = np.random.default_rng(seq)
    feeds = {"input_ids": rng.integers(0, 1000, (1, seq)).astype(np.int64),
             "attention_mask": np.ones((1, seq), np.int64)}
    feeds["attention_mask"][0, max(1, seq - 3):] = 0  # right padding, as in the shared reference
    (want,) = _ort(path, feeds)
    got = mlcc.load(result.out_dir).run(feeds)["logits"]
    assert got.shape == (1, seq, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_reexported_gpt2_tiny_fuses_like_the_static_export(gpt2_tiny_dynseq):
    # the attention (with its padding and causal masks), GELU and residual epilogues are recognized and fused
    # with symbolic sizes as they are for the static gpt2_tiny
    _, result = gpt2_tiny_dynseq
    m = json.loads((result.out_dir / "manifest.json").read_text())
    static = mlcc.compile(SHARED_MODELS / "gpt2_tiny.onnx", result.out_dir.parent / "static", targets=[])
    assert len(m["schedule"]) == len(static.manifest["schedule"])
    assert sum(k["template"] == "attention.py.jinja" for k in m["kernels"]) == 1


@pytest.fixture(scope="module")
def bert_dyn(tmp_path_factory):
    """transformers' BertModel exported with [batch, seq] inputs (tools/export_bert_dyn.py), compiled once."""
    path = SHARED_MODELS / "bert_dyn_tiny.onnx"
    return path, mlcc.compile(path, tmp_path_factory.mktemp("bert_dyn") / "b", targets=[],
                              shapes={"batch": "1..8", "seq": "2..64"})


@pytest.mark.parametrize("batch,seq", [(1, 2), (3, 17), (8, 64)])
def test_bert_with_symbolic_batch_and_seq_runs_every_shape_from_one_bundle(bert_dyn, batch, seq):
    path, result = bert_dyn
    rng = np.random.default_rng(batch * 100 + seq)
    feeds = {"input_ids": rng.integers(0, 1000, (batch, seq)).astype(np.int64),
             "attention_mask": rng.integers(0, 2, (batch, seq)).astype(np.int64),  # rows fully masked too
             "token_type_ids": rng.integers(0, 2, (batch, seq)).astype(np.int64)}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = mlcc.load(result.out_dir).run(feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4, err_msg=name)
    # attention recognized (the all-keep arange(seq) >= 0 factor folded at any seq) and fused as statically
    m = json.loads((result.out_dir / "manifest.json").read_text())
    assert sum(s["kernel"].startswith("fused_attention") for s in m["schedule"]) == 2


@pytest.fixture(scope="module")
def kv_decoder(tmp_path_factory):
    """A GPT-2-style decoder with a KV cache exported with symbolic seq and past (presents: past + seq)."""
    pytest.importorskip("torch")
    import sys
    sys.path.insert(0, str(ROOT / "tools"))
    from gpt2_export import export
    root = tmp_path_factory.mktemp("kv")
    path = root / "kv.onnx"
    export(str(path), layers=2, d=64, heads=4, vocab=1000, seq=4, kv_cache=True, past=12, seed=0, positions=64,
           dynamic=True)
    return path, mlcc.compile(path, root / "b", targets=[], shapes={"seq": "1..16", "past": "0..48"})


@pytest.mark.parametrize("seq,past", [(1, 0), (1, 12), (7, 30), (16, 48)])
def test_kv_cache_decoder_runs_every_seq_and_past_from_one_bundle(kv_decoder, seq, past):
    path, result = kv_decoder
    rng = np.random.default_rng(seq * 100 + past)
    feeds = {"input_ids": rng.integers(0, 1000, (1, seq)).astype(np.int64)}
    for i in range(2):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = rng.standard_normal((1, 4, past, 16)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = mlcc.load(result.out_dir).run(feeds)
    assert got["present_key_1"].shape == (1, 4, past + seq, 16)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4, err_msg=name)


def test_mlp_with_a_symbolic_batch(tmp_path):
    model = onnx.load(SHARED_MODELS / "mlp.onnx")
    for v in list(model.graph.input) + list(model.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    ex = mlcc.load(mlcc.compile(path, tmp_path / "b", targets=[], shapes={"batch": "1..8"}).out_dir)
    name = model.graph.input[0].name
    for batch in (1, 3, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)
        np.testing.assert_allclose(ex.run({name: x})[model.graph.output[0].name], _ort(path, {name: x})[0],
                                   rtol=1e-4, atol=1e-5)


def test_convolution_with_a_symbolic_batch(tmp_path):
    rng = np.random.default_rng(0)
    w = h.make_tensor("w", T.FLOAT, [4, 3, 3, 3], rng.standard_normal(108).astype(np.float32))
    graph = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
                          h.make_node("Relu", ["c"], ["r"]),
                          h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                          h.make_node("GlobalAveragePool", ["p"], ["y"])], "conv",
                         [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 16, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4, 1, 1])], [w])
    path = tmp_path / "conv.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    ex = mlcc.load(mlcc.compile(path, tmp_path / "b", targets=["sm_80"], shapes={"batch": "1..8"}).out_dir)
    for batch in (1, 3, 8):
        x = rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(ex.run({"x": x})["y"], _ort(path, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_symbolic_sizes_used_as_data_are_computed_in_the_kernel(tmp_path):
    # y = x / sqrt(float(len)) and z = x * float(shape(x)): the lengths as values, a size op in the IR that the
    # kernel computes from its sym_ arguments (a vector of them mixed with a static dim, too)
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Cast", ["s"], ["f"], to=T.FLOAT),
             h.make_node("Mul", ["x", "f"], ["z"]),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0), h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT),
             h.make_node("Sqrt", ["nf"], ["r"]), h.make_node("Div", ["x", "r"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["n", 2])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["n", 2]), h.make_tensor_value_info("z", T.FLOAT, ["n", 2])],
                         [h.make_tensor("zero", T.INT64, [], [0])])
    path = tmp_path / "data.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    result = mlcc.compile(path, tmp_path / "b", targets=["sm_80"], shapes={"n": "1..8"})
    assert "size(), expr=n" in (result.out_dir / "model.hlo").read_text()
    ex = mlcc.load(result.out_dir)
    for n in (1, 5, 8):
        x = np.random.default_rng(n).standard_normal((n, 2)).astype(np.float32)
        want = _ort(path, {"x": x})
        got = ex.run({"x": x})
        np.testing.assert_allclose(got["y"], want[0], rtol=1e-6)
        np.testing.assert_allclose(got["z"], want[1], rtol=1e-6)


def test_verify_checks_the_smallest_middle_and_largest_size(gpt2_dyn):
    from click.testing import CliRunner

    from mlcc.cli import main
    path, _ = gpt2_dyn
    out = CliRunner().invoke(main, ["verify", str(path), "--shape", "seq=1..64", "--target", "none", "--json"])
    assert out.exit_code == 0, out.output
    checks = json.loads(out.output)["outputs"]
    assert [c["shape"] for c in checks] == [[1, 1, 1000], [1, 32, 1000], [1, 64, 1000]]
    assert all(c["ok"] for c in checks)


def test_inspect_and_report_read_a_symbolic_bundle(gpt2_tiny_dynseq, tmp_path):
    import io

    from mlcc.inspect import render_text, summarize
    from mlcc.report.html import write_report
    _, result = gpt2_tiny_dynseq
    summary = summarize(result.out_dir)
    assert summary["symbols"] == {"seq": [1, 64]}
    text = io.StringIO()
    render_text(summary, text)
    assert "seq in 1..64" in text.getvalue()
    page = tmp_path / "report.html"
    write_report(result.out_dir, page)
    assert "fused_attention" in page.read_text()
