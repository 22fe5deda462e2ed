"""The ONNX importer as a whole: the shared model zoo, folding, symbolic dims, errors, external data."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mlcc.frontend.onnx import (InvalidModelError, ModelNotFoundError, UnsupportedFeatureError, UnsupportedOpError,
                                import_onnx)
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module

from mlcc_test_paths import SHARED_MODELS as MODELS  # noqa: E402  (tests/data/models, the shared zoo's copy)
ZOO = sorted(MODELS.glob("*.onnx"))


def model_of(nodes, inputs, outputs, inits=(), opset: int = 18, name: str = "test") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def vi(name: str, dims, dtype=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, dims)


def const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def run_ort(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    src = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def opcodes(module) -> Counter:
    return Counter(i.opcode for i in module.entry.instructions)


# ---- the shared model zoo


# a symbolic export that slices a position table by its length needs the length's range to import
DIM_RANGES = {"bert_dyn_tiny": {"batch": (1, 8), "seq": (2, 64)}}


@pytest.mark.skipif(not ZOO, reason="no shared models")
@pytest.mark.parametrize("path", ZOO, ids=[p.stem for p in ZOO])
def test_zoo_model_matches_reference(path: Path) -> None:
    module = import_onnx(path, dim_ranges=DIM_RANGES.get(path.stem))
    verify_module(module)
    ref = np.load(path.with_suffix(".ref.npz"))
    inputs = {k: ref[k] for k in ref.files if not k.startswith("out:")}
    got = evaluate(module, inputs)
    print(f"{path.name}: {len(module.entry.instructions)} instructions {dict(opcodes(module).most_common())}")
    assert module.name == path.stem
    assert [p.attrs["name"] for p in module.entry.parameters()] == list(inputs)
    for key in ref.files:
        if key.startswith("out:"):
            np.testing.assert_allclose(got[key[4:]], ref[key], rtol=1e-4, atol=1e-5, err_msg=key)
    for inst in module.entry.instructions:  # every instruction a node made says which node
        if inst.opcode not in ("parameter", "constant", "tuple"):
            assert inst.origin, inst


@pytest.mark.skipif(not (MODELS / "gpt2_tiny_legacy.onnx").exists(), reason="no shared models")
def test_exporter_shape_chains_fold_away() -> None:
    module = import_onnx(MODELS / "gpt2_tiny_legacy.onnx")
    counts = opcodes(module)
    assert counts["iota"] == 0 and counts["concatenate"] == 0
    assert all(i.shape.dtype != "s64" or i.opcode in ("parameter", "constant")
               for i in module.entry.instructions if i.opcode != "tuple")


def test_shape_gather_unsqueeze_concat_reshape_leaves_one_reshape() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [const("zero", np.int64(0)), const("axis0", [0]), const("minus1", [-1])]
    model = model_of(nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 12])], inits)
    module = import_onnx(model)
    verify_module(module)
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "reshape", "tuple"]


# ---- structure: order, constants, origins, names


def test_unsorted_graph_is_sorted() -> None:
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Neg", ["x"], ["a"], name="first")]
    module = import_onnx(model_of(nodes, [vi("x", [3])], [vi("y", [3])]))
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(evaluate(module, {"x": x})["y"], np.maximum(-x, 0))


def test_cycle_names_its_nodes() -> None:
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="A"), helper.make_node("Relu", ["a"], ["b"], name="B"),
             helper.make_node("Neg", ["b"], ["c"], name="C"), helper.make_node("Relu", ["x"], ["y"], name="D")]
    with pytest.raises(InvalidModelError) as err:
        import_onnx(model_of(nodes, [vi("x", [3])], [vi("y", [3])]))
    message = str(err.value)
    assert "cycle" in message and all(f"'{n}'" in message for n in "ABC") and "'D'" not in message


def test_initializer_that_is_also_an_input_is_a_constant() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    model = model_of(nodes, [vi("x", [2]), vi("w", [2])], [vi("y", [2])], [const("w", np.float32([1, 2]))])
    module = import_onnx(model)
    assert [p.attrs["name"] for p in module.entry.parameters()] == ["x"]
    np.testing.assert_array_equal(evaluate(module, {"x": np.float32([3, 4])})["y"], [4, 6])


def test_unnamed_nodes_get_stable_origins() -> None:
    nodes = [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"], name="act")]
    module = import_onnx(model_of(nodes, [vi("x", [3])], [vi("y", [3])]))
    origins = {i.opcode: i.origin for i in module.entry.instructions}
    assert origins["negate"] == ("Neg_0",) and origins["relu"] == ("act",)


def test_large_initializers_stay_refs_named_after_the_initializer() -> None:
    w = np.arange(64, dtype=np.float32).reshape(8, 8)
    model = model_of([helper.make_node("MatMul", ["x", "weight"], ["y"])], [vi("x", [2, 8])], [vi("y", [2, 8])],
                     [const("weight", w)])
    module = import_onnx(model)
    (c,) = [i for i in module.entry.instructions if i.opcode == "constant"]
    assert c.attrs["ref"] == "weight" and module.constants["weight"] is not None


def test_module_name_is_sanitized(tmp_path: Path) -> None:
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], name="my graph/v1")
    assert import_onnx(model).name == "my_graph_v1"
    path = tmp_path / "3-layer.net.onnx"
    onnx.save(model, path)
    assert import_onnx(path).name == "v_3_layer_net"
    assert import_onnx(path, name="custom").name == "custom"


# ---- symbolic dims


def _reshape_by_own_shape_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n1"]),
        helper.make_node("Concat", ["n1", "two2"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
        helper.make_node("Neg", ["x2"], ["z"]),
    ]
    inits = [const("zero", np.int64(0)), const("axis0", [0]), const("two2", [2, 2])]
    return model_of(nodes, [vi("x", ["N", 4]), vi("x2", ["N", None])],
                    [vi("y", ["N", 2, 2]), vi("z", ["N", None])], inits)


def test_symbolic_dims_stay_symbolic() -> None:
    module = import_onnx(_reshape_by_own_shape_model())
    verify_module(module)
    x_param, x2_param = module.entry.parameters()
    assert x_param.shape.dims == ("N", 4)
    assert x2_param.shape.dims[0] == "N" and isinstance(x2_param.shape.dims[1], str)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    got = evaluate(module, {"x": x, "x2": x})
    np.testing.assert_array_equal(got["y"], np.maximum(x.reshape(3, 2, 2), 0))


def test_shapes_override_binds_symbols_everywhere() -> None:
    module = import_onnx(_reshape_by_own_shape_model(), shapes={"x": [3, 4]})
    dims = [p.shape.dims for p in module.entry.parameters()]
    assert dims[0] == (3, 4) and dims[1][0] == 3
    assert module.entry.root.shape.elements[0].dims == (3, 2, 2)


def test_constant_of_shape_of_symbolic_dims_is_a_symbolic_splat() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.float32([2.0]))),
             helper.make_node("Mul", ["x", "c"], ["y"])]
    module = import_onnx(model_of(nodes, [vi("x", ["N", 4])], [vi("y", ["N", 4])]))
    verify_module(module)
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "constant", "multiply", "tuple"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(evaluate(module, {"x": x})["y"], 2 * x)


@pytest.mark.skipif(not (MODELS / "mlp.onnx").exists(), reason="no shared models")
def test_symbolic_batch_through_shapes_override() -> None:
    ref = np.load(MODELS / "mlp.ref.npz")
    module = import_onnx(MODELS / "mlp.onnx", shapes={"x": ["batch", 64]})
    verify_module(module)
    assert module.entry.root.shape.elements[0].dims == ("batch", 10)
    np.testing.assert_allclose(evaluate(module, {"x": ref["x"]})["y"], ref["out:y"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(evaluate(module, {"x": ref["x"][:3]})["y"], ref["out:y"][:3], rtol=1e-4, atol=1e-5)


def test_shapes_by_dim_name_specialize_every_input_that_has_it() -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    model = model_of(nodes, [vi("a", ["batch", 4]), vi("b", ["batch", 4])], [vi("y", ["batch", 4])])
    module = import_onnx(model, shapes={"batch": [3]})
    verify_module(module)
    params = [i for i in module.entry.instructions if i.opcode == "parameter"]
    assert [p.shape.dims for p in params] == [(3, 4), (3, 4)]
    a, b = np.ones((3, 4), np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(evaluate(module, {"a": a, "b": b})["y"], a + b)
    with pytest.raises(InvalidModelError, match="a dim takes one size"):
        import_onnx(model, shapes={"batch": [3, 4]})


def test_compile_of_symbolic_dims_without_a_range_runs_at_any_size_and_a_fixed_size_still_compiles(tmp_path: Path) -> None:
    # a symbol given no range compiles (planned at the default size) and runs at sizes below and above it
    import mlcc
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 8])], [vi("y", ["batch", 8])])
    mlcc.compile(model, tmp_path / "any", targets=[])
    exe = mlcc.load(tmp_path / "any")
    assert exe.manifest["symbols"] == {"batch": [0, None]}
    for n in (1, 2, 70):
        x = np.linspace(-1, 1, 8 * n, dtype=np.float32).reshape(n, 8)
        np.testing.assert_array_equal(exe.run({"x": x})["y"], np.maximum(x, 0))
    mlcc.compile(model, tmp_path / "b", targets=[], shapes={"batch": [2]})
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_array_equal(mlcc.load(tmp_path / "b").run({"x": x})["y"], np.maximum(x, 0))


def test_shapes_override_must_name_an_input() -> None:
    with pytest.raises(InvalidModelError, match="'nope'"):
        import_onnx(_reshape_by_own_shape_model(), shapes={"nope": [1]})


def test_shape_of_symbolic_dims_used_as_data_is_a_size_op() -> None:
    # the shape [N, 4] cast to float: N is a size op the evaluator (and kernels) compute once N is bound
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    model = model_of(nodes, [vi("x", ["N", 4])], [vi("y", [2])])
    module = import_onnx(model)
    assert [i.attrs["expr"] for i in module.entry.instructions if i.opcode == "size"] == ["N"]
    x = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(evaluate(module, {"x": x})["y"], run_ort(model, {"x": x})["y"])


# ---- control flow known at import time


def _if_model(cond: np.ndarray | None) -> onnx.ModelProto:
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [3])])
    node = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other)
    inputs = [vi("x", [3])] + ([vi("cond", [], TensorProto.BOOL)] if cond is None else [])
    inits = [] if cond is None else [const("cond", cond)]
    return model_of([node], inputs, [vi("y", [3])], inits)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_known_condition_is_its_branch(cond: bool) -> None:
    model = _if_model(np.array(cond))
    module = import_onnx(model)
    verify_module(module)
    x = np.float32([1, -2, 3])
    np.testing.assert_array_equal(evaluate(module, {"x": x})["y"], run_ort(model, {"x": x})["y"])
    assert [i.origin for i in module.entry.instructions if i.opcode in ("relu", "negate")] == [
        ("branch/Relu_0",) if cond else ("branch/Neg_0",)]


def test_if_with_runtime_condition_is_unsupported() -> None:
    with pytest.raises(UnsupportedFeatureError, match="node 'branch' \\(If\\): the condition"):
        import_onnx(_if_model(None))


def _loop_model(counted: bool) -> onnx.ModelProto:
    """x <- 2x + i for i = 0..3, also collecting sum(x) per iteration; counted by M, or by a condition on i."""
    stop = (helper.make_node("Identity", ["c_in"], ["c_out"]) if counted else
            helper.make_node("Less", ["i", "three"], ["c_out"]))
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT), helper.make_node("Mul", ["x_in", "two"], ["x2"]),
         helper.make_node("Add", ["x2", "fi"], ["x_out"]), stop,
         helper.make_node("ReduceSum", ["x_out"], ["s_out"], keepdims=0)],
        "body", [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("x_in", [3])],
        [vi("c_out", [], TensorProto.BOOL), vi("x_out", [3]), vi("s_out", [])],
        [const("two", np.float32(2)), const("three", np.int64(3))])
    inputs = ["M", "", "x"] if counted else ["", "go", "x"]
    node = helper.make_node("Loop", inputs, ["x_final", "sums"], name="loop", body=body)
    inits = [const("M", np.int64(4))] if counted else [const("go", np.array(True))]
    return model_of([node], [vi("x", [3])], [vi("x_final", [3]), vi("sums", [4])], inits)


@pytest.mark.parametrize("counted", [True, False], ids=["trip-count", "condition"])
def test_loop_with_known_iterations_is_unrolled(counted: bool) -> None:
    model = _loop_model(counted)
    module = import_onnx(model)
    verify_module(module)
    x = np.float32([1, -2, 3])
    got, want = evaluate(module, {"x": x}), run_ort(model, {"x": x})
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6)
    assert opcodes(module)["reduce"] == 4


# ---- errors


def test_every_unsupported_node_is_listed_at_once() -> None:
    nodes = [helper.make_node("FancyOp", ["x"], ["a"], name="first_fancy", domain="com.example"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("OtherOp", ["b"], ["y"], name="second_other", domain="com.example")]
    model = model_of(nodes, [vi("x", [2])], [vi("y", [2])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError) as err:
        import_onnx(model)
    message = str(err.value)
    assert "'first_fancy' (FancyOp, com.example opset 1)" in message
    assert "'second_other' (OtherOp, com.example opset 1)" in message
    assert [n.name for n in err.value.nodes] == ["first_fancy", "second_other"]
    assert err.value.exit_code == 69


def test_op_below_its_first_supported_opset_is_unsupported() -> None:
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="old_gemm", broadcast=1)
    model = model_of([node], [vi("a", [2, 3]), vi("b", [3, 4]), vi("c", [4])], [vi("y", [2, 4])], opset=6)
    with pytest.raises(UnsupportedOpError, match="'old_gemm' \\(Gemm, ai.onnx opset 6\\)"):
        import_onnx(model)


def test_initializer_of_an_unsupported_type_matters_only_when_used() -> None:
    words = numpy_helper.from_array(np.array(["a", "b"], dtype=object), "words")
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], [words])
    verify_module(import_onnx(model))
    used = model_of([helper.make_node("Identity", ["words"], ["y"], name="use")], [], [vi("y", [2], TensorProto.STRING)],
                    [words])
    with pytest.raises(UnsupportedFeatureError, match="STRING"):
        import_onnx(used)


def test_incompatible_shapes_name_the_node(tmp_path: Path) -> None:
    model = model_of([helper.make_node("Add", ["a", "b"], ["c"], name="Add_3")],
                     [vi("a", [2, 3]), vi("b", [4])], [vi("c", [2, 3])])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    with pytest.raises(InvalidModelError) as err:
        import_onnx(path)
    assert str(err.value) == "model.onnx: node 'Add_3' (Add): inputs have incompatible shapes [2,3] and [4]"
    assert err.value.exit_code == 65


def test_layer_norm_statistics_outputs_match_onnxruntime() -> None:
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv_std"], name="ln", axis=1)
    outputs = [vi("y", [2, 3, 4]), vi("mean", [2, 1, 1]), vi("inv_std", [2, 1, 1])]
    model = model_of([node], [vi("x", [2, 3, 4])], outputs,
                     [const("s", np.linspace(0.5, 2, 12, dtype=np.float32).reshape(3, 4))], opset=17)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    got, want = evaluate(import_onnx(model), {"x": x}), run_ort(model, {"x": x})
    for name in ("y", "mean", "inv_std"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_shape_input_not_known_at_import_falls_back_to_inferred_shape() -> None:
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")]
    model = model_of(nodes, [vi("x", [2, 6]), vi("shape", [2], TensorProto.INT64)], [vi("y", [None, None])])
    with pytest.raises(UnsupportedFeatureError, match="node 'r' \\(Reshape\\): the target shape"):
        import_onnx(model)


def test_missing_file() -> None:
    with pytest.raises(ModelNotFoundError):
        import_onnx("/nonexistent/model.onnx")


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x00\xffnot a model at all")
    with pytest.raises(InvalidModelError, match="bad.onnx"):
        import_onnx(path)


# ---- external data


def _weights_model() -> tuple[onnx.ModelProto, np.ndarray]:
    w = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
    model = model_of([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 4])], [vi("y", [2, 8])],
                     [const("w", w)])
    return model, w


def test_external_data_inside_the_model_folder(tmp_path: Path) -> None:
    model, w = _weights_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    module = import_onnx(path)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(evaluate(module, {"x": x})["y"], run_ort(str(path), {"x": x})["y"], rtol=1e-6)


def _large_weights_model(tmp_path: Path, rows: int = 512, cols: int = 640) -> tuple[Path, np.ndarray]:
    """y = x @ w + b with w above LAZY_MIN_BYTES in an external data file; b small (read, not mapped)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    model = model_of([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
                     [vi("x", [3, rows])], [vi("y", [3, cols])],
                     [const("w", w), const("b", rng.standard_normal(cols).astype(np.float32))])
    path = tmp_path / "big" / "m.onnx"
    path.parent.mkdir()
    onnx.save_model(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path, w


def test_large_external_weights_are_memory_mapped_not_read(tmp_path: Path) -> None:
    import mmap

    from mlcc.frontend.onnx.loading import LAZY_MIN_BYTES
    path, w = _large_weights_model(tmp_path)
    assert w.nbytes >= LAZY_MIN_BYTES
    module = import_onnx(path)
    (ref,) = [k for k, v in module.constants.items() if v.shape == w.shape]
    base = module.constants[ref]
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)  # a view of the file
    np.testing.assert_array_equal(module.constants[ref], w)
    assert [p.name for p in module.source_files] == ["weights.bin"]
    x = np.random.default_rng(4).standard_normal((3, 512)).astype(np.float32)
    np.testing.assert_allclose(evaluate(module, {"x": x})["y"], run_ort(str(path), {"x": x})["y"],
                               rtol=1e-4, atol=1e-4)


def test_bundle_of_mapped_weights_written_in_slabs_matches_onnxruntime(tmp_path: Path, monkeypatch) -> None:
    import mlcc
    import mlcc.emit.writer.bundle
    monkeypatch.setattr(mlcc.emit.writer.bundle, "CHUNK_BYTES", 64 << 10)  # many slabs, each of a few rows
    path, _ = _large_weights_model(tmp_path)
    mlcc.compile(path, tmp_path / "b", targets=[], cache_dir="")
    x = np.random.default_rng(5).standard_normal((3, 512)).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(str(path), {"x": x})["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=["row-major", "column-major"])
def test_weights_written_in_slabs_are_the_layouts_bytes(tmp_path: Path, monkeypatch, layout) -> None:
    import mlcc.emit.writer.bundle
    from mlcc.bundle.layout import to_physical
    monkeypatch.setattr(mlcc.emit.writer.bundle, "CHUNK_BYTES", 1000)
    arr = np.random.default_rng(6).standard_normal((37, 29)).astype(np.float32)
    with open(tmp_path / "w.bin", "wb") as f:
        assert mlcc.emit.writer.bundle._write_physical(f, arr, layout) == arr.nbytes
    assert (tmp_path / "w.bin").read_bytes() == to_physical(arr, layout).tobytes()


def _save_with_location(tmp_path: Path, location: str) -> Path:
    model, w = _weights_model()
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(w.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    path = tmp_path / "model" / "m.onnx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(model.SerializeToString())
    (tmp_path / "secret.bin").write_bytes(w.tobytes())
    return path


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin"])
def test_external_data_may_not_leave_the_folder(tmp_path: Path, location: str) -> None:
    with pytest.raises(InvalidModelError, match="leaves the model's folder"):
        import_onnx(_save_with_location(tmp_path, location))


def test_external_data_may_not_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(InvalidModelError, match="absolute"):
        import_onnx(_save_with_location(tmp_path, str(tmp_path / "secret.bin")))


def test_external_data_may_not_go_through_symlinks(tmp_path: Path) -> None:
    path = _save_with_location(tmp_path, "link.bin")
    os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    with pytest.raises(InvalidModelError, match="symbolic link"):
        import_onnx(path)


def test_external_data_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        import_onnx(_save_with_location(tmp_path, "absent.bin"))


def test_in_memory_model_with_external_data_is_refused(tmp_path: Path) -> None:
    path = _save_with_location(tmp_path, "absent.bin")
    with pytest.raises(InvalidModelError, match="by path"):
        import_onnx(onnx.load(str(path), load_external_data=False))


def test_printed_module_is_deterministic() -> None:
    model = _reshape_by_own_shape_model()
    assert format_module(import_onnx(model)) == format_module(import_onnx(model))
