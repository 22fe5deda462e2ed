"""Symbolic dims through the ONNX importer (issue #3): shape chains fold at import into symbolic values,
the IR keeps ``seq`` in its shapes, and the evaluator, given the symbol's value, matches onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mlcc.frontend.onnx import InvalidModelError, UnsupportedFeatureError, import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

from mlcc_test_paths import SHARED_MODELS as MODELS  # noqa: E402

GPT2_DYN = MODELS / "gpt2_dyn_tiny.onnx"
SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Concat", "Cast", "Div", "Sub", "Squeeze", "Range", "ConstantOfShape"}


def model_of(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def vi(name: str, dims, dtype=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, dims)


def ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def run_ort(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    src = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def check_against_ort(model: onnx.ModelProto, module, feeds_of, values) -> None:
    """The evaluator, given each symbol value, against onnxruntime on inputs of that size."""
    verify_module(module)
    for env in values:
        feeds = feeds_of(env)
        want = run_ort(model, feeds)
        got = evaluate(module, feeds, symbols=env)
        for name, ref in want.items():
            assert got[name].shape == ref.shape, (name, env)
            np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-6, err_msg=f"{name} at {env}")


def shape_constants(module) -> list:
    """s64 constants of more than one element: what a shape chain left unfolded would leave."""
    return [i for i in module.entry.instructions
            if i.opcode == "constant" and i.shape.dtype == "s64" and len(i.attrs.get("value", ())) > 1]


# ---- the exported decoder


@pytest.fixture(scope="module")
def gpt2_dyn():
    if not GPT2_DYN.exists():
        pytest.skip("no gpt2_dyn_tiny.onnx")
    return import_onnx(GPT2_DYN, dim_ranges={"seq": (1, 64)})


def test_gpt2_dyn_keeps_seq_symbolic(gpt2_dyn) -> None:
    (param,) = gpt2_dyn.entry.parameters()
    assert param.attrs["name"] == "input_ids"
    assert param.shape.dims == (1, "seq")
    assert gpt2_dyn.entry.root.shape.elements[0].dims == (1, "seq", 1000)
    assert gpt2_dyn.symbols == {"seq": (1, 64)}
    verify_module(gpt2_dyn)


def test_gpt2_dyn_leaves_no_shape_chain(gpt2_dyn) -> None:
    proto = onnx.load(str(GPT2_DYN), load_external_data=False)
    chain = {n.name for n in proto.graph.node if n.op_type in SHAPE_OPS and n.op_type != "Gather"}
    chain |= {n.name for n in proto.graph.node if n.op_type == "Gather" and "Shape" in n.input[0]}
    chain -= {"/Range", "/Unsqueeze", "/h.0/ConstantOfShape", "/h.1/ConstantOfShape"}  # positions, causal mask
    for inst in gpt2_dyn.entry.instructions:
        assert not set(inst.origin) & chain, inst
        if inst.opcode in ("iota", "reshape", "broadcast") or "ConstantOfShape" in "".join(inst.origin):
            assert "seq" in inst.shape.dims, inst  # no size fixed at the export's 16
    assert not shape_constants(gpt2_dyn)


@pytest.mark.parametrize("seq", [1, 7, 16])
def test_gpt2_dyn_matches_onnxruntime(gpt2_dyn, seq: int) -> None:
    ids = np.random.default_rng(seq).integers(0, 1000, (1, seq)).astype(np.int64)
    want = run_ort(str(GPT2_DYN), {"input_ids": ids})["logits"]
    got = evaluate(gpt2_dyn, {"input_ids": ids}, symbols={"seq": seq})["logits"]
    assert got.shape == (1, seq, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- symbolic known values, one exporter pattern at a time


def _dim0(x: str, out: str) -> list[onnx.NodeProto]:
    """out = [x.shape[0]] (a 1-element int64 vector), the way exporters compute it."""
    return [helper.make_node("Shape", [x], [out + "_shape"]),
            helper.make_node("Gather", [out + "_shape", "zero"], [out + "_dim"], axis=0),
            helper.make_node("Unsqueeze", [out + "_dim", "axes0"], [out])]


def test_shape_gather_unsqueeze_concat_reshape_folds() -> None:
    nodes = _dim0("x", "n") + [
        helper.make_node("Concat", ["n", "two_three"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
        helper.make_node("Relu", ["y"], ["out"])]
    model = model_of(nodes, [vi("x", ["n", 6])], [vi("out", ["n", 2, 3])],
                     [ints("zero", 0), ints("axes0", [0]), ints("two_three", [2, 3])])
    module = import_onnx(model)
    assert module.entry.root.shape.elements[0].dims == ("n", 2, 3)
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "reshape", "relu", "tuple"]
    check_against_ort(model, module, lambda env: {"x": np.random.default_rng(1).standard_normal(
        (env["n"], 6)).astype(np.float32)}, [{"n": 2}, {"n": 5}])


def test_flatten_target_from_symbolic_arithmetic() -> None:
    """[n, 4, 8] -> [n * 4, 8] through Mul of symbolic values and a -1."""
    nodes = _dim0("x", "n") + [
        helper.make_node("Mul", ["n", "four"], ["n4"]),
        helper.make_node("Concat", ["n4", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["out"])]
    model = model_of(nodes, [vi("x", ["n", 4, 8])], [vi("out", [None, 8])],
                     [ints("zero", 0), ints("axes0", [0]), ints("four", [4]), ints("minus_one", [-1])])
    module = import_onnx(model)
    assert module.entry.root.shape.elements[0].dims == ("4*n", 8)
    check_against_ort(model, module, lambda env: {"x": np.arange(env["n"] * 32, dtype=np.float32).reshape(
        env["n"], 4, 8)}, [{"n": 1}, {"n": 3}])


def test_range_of_symbolic_limit_is_an_iota() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["len"], axis=0),
             helper.make_node("Range", ["zero", "len", "step"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "rf"], ["out"])]
    model = model_of(nodes, [vi("x", [2, "seq"])], [vi("out", [2, "seq"])],
                     [ints("zero", 0), ints("one", 1), ints("step", 1)])
    module = import_onnx(model)
    (iota,) = [i for i in module.entry.instructions if i.opcode == "iota"]
    assert iota.shape.dims == ("seq",)
    check_against_ort(model, module, lambda env: {"x": np.ones((2, env["seq"]), np.float32)},
                      [{"seq": 3}, {"seq": 9}])


def test_causal_mask_from_constant_of_shape_and_trilu() -> None:
    nodes = _dim0("x", "n") + [
        helper.make_node("Concat", ["n", "n"], ["nn"], axis=0),
        helper.make_node("ConstantOfShape", ["nn"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Trilu", ["ones"], ["mask"], upper=0),
        helper.make_node("MatMul", ["mask", "x"], ["out"])]
    model = model_of(nodes, [vi("x", ["n", 8])], [vi("out", ["n", 8])], [ints("zero", 0), ints("axes0", [0])])
    module = import_onnx(model)
    assert module.entry.root.shape.elements[0].dims == ("n", 8)
    assert not shape_constants(module)
    check_against_ort(model, module, lambda env: {"x": np.random.default_rng(2).standard_normal(
        (env["n"], 8)).astype(np.float32)}, [{"n": 1}, {"n": 6}])


def _positions_model() -> onnx.ModelProto:
    """Slice a static [64, 8] table to the first n rows (n from Shape), as position embeddings are cut."""
    table = numpy_helper.from_array(np.random.default_rng(3).standard_normal((64, 8)).astype(np.float32), "table")
    nodes = _dim0("x", "n") + [
        helper.make_node("Slice", ["table", "start", "n", "axes0"], ["rows"]),
        helper.make_node("Add", ["x", "rows"], ["out"])]
    return model_of(nodes, [vi("x", ["n", 8])], [vi("out", ["n", 8])],
                    [ints("zero", 0), ints("axes0", [0]), ints("start", [0]), table])


def test_slice_of_static_table_with_symbolic_end() -> None:
    model = _positions_model()
    module = import_onnx(model, dim_ranges={"n": (1, 64)})
    (cut,) = [i for i in module.entry.instructions if i.opcode == "slice"]
    assert cut.shape.dims == ("n", 8)
    check_against_ort(model, module, lambda env: {"x": np.zeros((env["n"], 8), np.float32)},
                      [{"n": 4}, {"n": 64}])


def test_slice_end_beyond_the_table_needs_a_range_or_is_bounded_by_it() -> None:
    # n given no range: past 64 the slice would clamp to 64 rows and the Add of [n, 8] and [64, 8] fail, so the
    # table bounds n (0..64), and the model as imported matches onnxruntime at the table's length
    module = import_onnx(_positions_model())
    assert module.symbols == {"n": (0, 64)}
    check_against_ort(_positions_model(), module, lambda env: {"x": np.zeros((env["n"], 8), np.float32)},
                      [{"n": 3}, {"n": 64}])
    # a range that reaches past the table leaves the clamp undecidable
    with pytest.raises(UnsupportedFeatureError, match="dim_ranges"):
        import_onnx(_positions_model(), dim_ranges={"n": (1, 100)})


def test_expand_to_symbolic_shape_and_max_decided_by_range() -> None:
    """Expand a [1, 4] row to [max(n, 1), 4]: Max folds because n >= 1 in its range."""
    nodes = _dim0("x", "n") + [
        helper.make_node("Max", ["n", "one"], ["m"]),
        helper.make_node("Concat", ["m", "four"], ["target"], axis=0),
        helper.make_node("Expand", ["row", "target"], ["wide"]),
        helper.make_node("Add", ["x", "wide"], ["out"])]
    row = numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(1, 4), "row")
    model = model_of(nodes, [vi("x", ["n", 4])], [vi("out", ["n", 4])],
                     [ints("zero", 0), ints("axes0", [0]), ints("one", [1]), ints("four", [4]), row])
    module = import_onnx(model, dim_ranges={"n": (1, 32)})
    assert not shape_constants(module)
    check_against_ort(model, module, lambda env: {"x": np.ones((env["n"], 4), np.float32)},
                      [{"n": 1}, {"n": 5}])


def test_concat_of_symbolic_dims_adds_them() -> None:
    nodes = [helper.make_node("Concat", ["past", "new"], ["all"], axis=1),
             helper.make_node("Softmax", ["all"], ["out"], axis=1)]
    model = model_of(nodes, [vi("past", [2, "past"]), vi("new", [2, "seq"])], [vi("out", [2, None])])
    module = import_onnx(model)
    assert module.entry.root.shape.elements[0].dims == (2, "past+seq")
    rng = np.random.default_rng(4)
    check_against_ort(model, module, lambda env: {
        "past": rng.standard_normal((2, env["past"])).astype(np.float32),
        "new": rng.standard_normal((2, env["seq"])).astype(np.float32)}, [{"past": 3, "seq": 1}, {"past": 0, "seq": 4}])


def test_dim_names_become_identifiers_and_ranges_follow() -> None:
    model = model_of([helper.make_node("Relu", ["x"], ["out"])], [vi("x", ["batch size", 3])],
                     [vi("out", ["batch size", 3])])
    module = import_onnx(model, dim_ranges={"batch size": (1, 8)})
    (param,) = module.entry.parameters()
    assert param.shape.dims == ("batch_size", 3)
    assert module.symbols == {"batch_size": (1, 8)}
    with pytest.raises(InvalidModelError, match="not a symbolic dim"):
        import_onnx(model, dim_ranges={"seq": (1, 8)})


def _past_and_seq_nodes() -> list[onnx.NodeProto]:
    """past = k.shape[0], seq = q.shape[0] (scalars), total = past + seq."""
    return [helper.make_node("Shape", ["k"], ["ks"]), helper.make_node("Gather", ["ks", "zero"], ["past"], axis=0),
            helper.make_node("Shape", ["q"], ["qs"]), helper.make_node("Gather", ["qs", "zero"], ["seq"], axis=0),
            helper.make_node("Add", ["past", "seq"], ["total"])]


def _kv_feeds(env: dict[str, int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(env["past"] * 10 + env["seq"])
    return {"k": rng.standard_normal((env["past"], 4)).astype(np.float32),
            "q": rng.standard_normal((env["seq"], 4)).astype(np.float32)}


def test_range_from_symbolic_start_counts_positions_after_the_cache() -> None:
    nodes = _past_and_seq_nodes() + [
        helper.make_node("Range", ["past", "total", "one"], ["pos"]),
        helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["posf", "axes1"], ["col"]),
        helper.make_node("Add", ["q", "col"], ["out"])]
    model = model_of(nodes, [vi("k", ["past", 4]), vi("q", ["seq", 4])], [vi("out", ["seq", 4])],
                     [ints("zero", 0), ints("one", 1), ints("axes1", [1])])
    module = import_onnx(model, dim_ranges={"past": (0, 16), "seq": (1, 16)})
    assert module.entry.root.shape.elements[0].dims == ("seq", 4)
    check_against_ort(model, module, _kv_feeds, [{"past": 0, "seq": 3}, {"past": 5, "seq": 1}])


def test_causal_mask_with_symbolic_diagonal() -> None:
    """torch's ones(seq, past + seq).tril(diagonal=past), the mask of a decoder with a KV cache."""
    nodes = _past_and_seq_nodes() + [
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["seq1"]),
        helper.make_node("Unsqueeze", ["total", "axes0"], ["total1"]),
        helper.make_node("Concat", ["seq1", "total1"], ["mask_shape"], axis=0),
        helper.make_node("ConstantOfShape", ["mask_shape"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Trilu", ["ones", "past"], ["mask"], upper=0),
        helper.make_node("Concat", ["k", "q"], ["kv"], axis=0),
        helper.make_node("MatMul", ["mask", "kv"], ["out"])]
    model = model_of(nodes, [vi("k", ["past", 4]), vi("q", ["seq", 4])], [vi("out", ["seq", 4])],
                     [ints("zero", 0), ints("axes0", [0])])
    module = import_onnx(model, dim_ranges={"past": (0, 16), "seq": (1, 16)})
    assert module.entry.root.shape.elements[0].dims == ("seq", 4)
    assert not shape_constants(module)
    check_against_ort(model, module, _kv_feeds, [{"past": 0, "seq": 3}, {"past": 4, "seq": 2}])


def test_slice_of_static_mask_buffer_from_past_to_total() -> None:
    """HF-style bias[past:past + seq, :past + seq] of a static [32, 32] buffer (both bounds symbolic)."""
    buf = numpy_helper.from_array(np.tril(np.ones((32, 32), np.float32)) * np.arange(1, 33, dtype=np.float32), "buf")
    nodes = _past_and_seq_nodes() + [
        helper.make_node("Unsqueeze", ["past", "axes0"], ["past1"]),
        helper.make_node("Unsqueeze", ["total", "axes0"], ["total1"]),
        helper.make_node("Concat", ["past1", "zero1"], ["starts"], axis=0),
        helper.make_node("Concat", ["total1", "total1"], ["ends"], axis=0),
        helper.make_node("Slice", ["buf", "starts", "ends", "axes01"], ["mask"]),
        helper.make_node("Concat", ["k", "q"], ["kv"], axis=0),
        helper.make_node("MatMul", ["mask", "kv"], ["out"])]
    model = model_of(nodes, [vi("k", ["past", 4]), vi("q", ["seq", 4])], [vi("out", ["seq", 4])],
                     [ints("zero", 0), ints("axes0", [0]), ints("zero1", [0]), ints("axes01", [0, 1]), buf])
    module = import_onnx(model, dim_ranges={"past": (0, 16), "seq": (1, 16)})
    (cut,) = [i for i in module.entry.instructions if i.opcode == "slice"]
    assert cut.shape.dims == ("seq", "past+seq")
    check_against_ort(model, module, _kv_feeds, [{"past": 0, "seq": 3}, {"past": 7, "seq": 2}])


def test_equal_and_where_on_a_shape_fold() -> None:
    """Where(Equal(shape, -1), 1, shape), the guard exporters put before an Expand, is decided at import."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Equal", ["s", "minus_ones"], ["is_neg"]),
             helper.make_node("Where", ["is_neg", "ones", "s"], ["target"]),
             helper.make_node("Expand", ["row", "target"], ["wide"]),
             helper.make_node("Mul", ["x", "wide"], ["out"])]
    row = numpy_helper.from_array(np.arange(1, 5, dtype=np.float32).reshape(1, 1, 4), "row")
    model = model_of(nodes, [vi("x", [1, "seq", 4])], [vi("out", [1, "seq", 4])],
                     [ints("minus_ones", [-1, -1, -1]), ints("ones", [1, 1, 1]), row])
    module = import_onnx(model)
    assert not shape_constants(module)
    assert module.entry.root.shape.elements[0].dims == (1, "seq", 4)
    check_against_ort(model, module, lambda env: {"x": np.ones((1, env["seq"], 4), np.float32)},
                      [{"seq": 1}, {"seq": 6}])


def test_slice_reduceprod_size_div_neg_squeeze_of_shapes_fold() -> None:
    """[b, seq, 8] -> [b*seq, 8] two ways: ReduceProd of Shape[0:2], and -(-Size // 8) squeezed to a scalar."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero1", "two1"], ["bs"]),
             helper.make_node("ReduceProd", ["bs"], ["rows"], keepdims=1),
             helper.make_node("Concat", ["rows", "eight1"], ["t1"], axis=0),
             helper.make_node("Reshape", ["x", "t1"], ["y1"]),
             helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Neg", ["n"], ["neg"]),
             helper.make_node("Div", ["neg", "eight"], ["q"]),
             helper.make_node("Neg", ["q"], ["rows2"]),
             helper.make_node("Unsqueeze", ["rows2", "zero1"], ["rows2v"]),
             helper.make_node("Squeeze", ["rows2v", "zero1"], ["rows2s"]),
             helper.make_node("Unsqueeze", ["rows2s", "zero1"], ["rows2w"]),
             helper.make_node("Concat", ["rows2w", "minus1"], ["t2"], axis=0),
             helper.make_node("Reshape", ["x", "t2"], ["y2"]),
             helper.make_node("Add", ["y1", "y2"], ["out"])]
    model = model_of(nodes, [vi("x", ["b", "seq", 8])], [vi("out", [None, 8])],
                     [ints("zero1", [0]), ints("two1", [2]), ints("eight1", [8]), ints("eight", 8),
                      ints("minus1", [-1])])
    module = import_onnx(model)
    assert module.entry.root.shape.elements[0].dims == ("b*seq", 8)
    assert not shape_constants(module)
    check_against_ort(model, module, lambda env: {"x": np.arange(env["b"] * env["seq"] * 8, dtype=np.float32).reshape(
        env["b"], env["seq"], 8)}, [{"b": 1, "seq": 3}, {"b": 2, "seq": 5}])
