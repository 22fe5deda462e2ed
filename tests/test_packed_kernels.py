"""4- and 2-bit values that reduction, softmax/norm and matmul kernels write or read are stored packed
(mlcc/hlo/passes/packed_arena.py, README "The bundle"): the writing kernel stores ceil(n * bits / 8) bytes in
ONNX's order (its template computes whole bytes: reduce.py.jinja, row_norm.py.jinja, matmul.py.jinja) and
each reader unpacks them as it loads. Checked against onnx.reference, with the arena buffer's size, on the
CPU (interpreter configs) and on sim:sm_90 (the sm_90 binaries' configs under the interpreter)."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import mlcc
from mlcc.bundle.memory import tensor_bytes
from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module
from mlcc.pipeline import compile_pipeline

QTYPES = {"s4": (T.INT4, 4), "u4": (T.UINT4, 4), "s2": (T.INT2, 2), "u2": (T.UINT2, 2)}


def _quantized_after(kind: str, dtype: str, m: int, k: int, n: int = 4) -> tuple[onnx.ModelProto, tuple]:
    """q = QuantizeLinear(kind(x)) to dtype, which the kind's kernel computes in its epilogue and stores; read
    by a DequantizeLinear (d) and a Cast to int32 (c), loop kernels."""
    qtype, _ = QTYPES[dtype]
    zero = 1 if dtype[0] == "u" else 0
    inits = [nh.from_array(np.array(0.0625 if kind == "softmax" else 0.5, np.float32), "s"),
             h.make_tensor("z", qtype, [], [zero])]
    if kind == "softmax":
        nodes, dims = [h.make_node("Softmax", ["x"], ["a"], axis=-1)], [m, k]
    elif kind == "layernorm":
        inits += [nh.from_array(np.linspace(0.5, 1.5, k).astype(np.float32), "g"),
                  nh.from_array(np.linspace(-1, 1, k).astype(np.float32), "bb")]
        nodes, dims = [h.make_node("LayerNormalization", ["x", "g", "bb"], ["a"], axis=-1)], [m, k]
    elif kind == "reducemax":
        inits.append(nh.from_array(np.array([1], np.int64), "ax"))
        nodes, dims = [h.make_node("ReduceMax", ["x", "ax"], ["a"], keepdims=0)], [m]
    else:  # matmul
        w = ((np.arange(k * n).reshape(k, n) % 7) - 3).astype(np.float32) * 0.25
        inits.append(nh.from_array(w, "w"))
        nodes, dims = [h.make_node("MatMul", ["x", "w"], ["a"])], [m, n]
    nodes += [h.make_node("QuantizeLinear", ["a", "s", "z"], ["q"]),
              h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
              h.make_node("Cast", ["q"], ["c"], to=T.INT32)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [m, k])],
                         [h.make_tensor_value_info("d", T.FLOAT, dims), h.make_tensor_value_info("c", T.INT32, dims)],
                         inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)]), tuple(dims)


def _dequantized_into(kind: str, dtype: str, m: int, k: int) -> tuple[onnx.ModelProto, tuple]:
    """q = QuantizeLinear(x) to dtype (a loop kernel), read by the kind's kernel through a DequantizeLinear
    (its prologue unpacks the bytes as it loads them) and by a Cast to int32."""
    qtype, _ = QTYPES[dtype]
    zero = 1 if dtype[0] == "u" else 0
    inits = [nh.from_array(np.array(0.5, np.float32), "s"), h.make_tensor("z", qtype, [], [zero])]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), h.make_node("Cast", ["q"], ["c"], to=T.INT32),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"])]
    if kind == "softmax":
        nodes.append(h.make_node("Softmax", ["d"], ["y"], axis=-1))
        dims = [m, k]
    elif kind == "reducesum":
        inits.append(nh.from_array(np.array([1], np.int64), "ax"))
        nodes.append(h.make_node("ReduceSum", ["d", "ax"], ["y"], keepdims=0))
        dims = [m]
    elif kind == "matmul_a":
        inits.append(nh.from_array(((np.arange(k * 3).reshape(k, 3) % 5) - 2).astype(np.float32), "w"))
        nodes.append(h.make_node("MatMul", ["d", "w"], ["y"]))
        dims = [m, 3]
    else:  # gather: rows of the 4/2-bit value picked by run-time-free constant indices, then dequantized
        inits.append(nh.from_array(np.array([m - 1, 0, m // 2, m - 1], np.int64), "i"))
        nodes = [nodes[0], nodes[1], h.make_node("Gather", ["q", "i"], ["g"], axis=0),
                 h.make_node("DequantizeLinear", ["g", "s", "z"], ["y"])]
        dims = [4, k]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [m, k])],
                         [h.make_tensor_value_info("y", T.FLOAT, dims), h.make_tensor_value_info("c", T.INT32, [m, k])],
                         inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)]), (m, k)


def _x(m: int, k: int, spread: float) -> np.ndarray:
    return (np.random.default_rng(m * 131 + k).standard_normal((m, k)) * spread).astype(np.float32)


def _run(tmp_path, model: onnx.ModelProto, x: np.ndarray, device: str = "cpu") -> tuple[dict, list, dict]:
    onnx.save(model, tmp_path / "m.onnx")
    targets = ["sm_90"] if device.startswith("sim") else []
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=targets)
    got = mlcc.load(tmp_path / "b", device=device).run({"x": x})
    want = dict(zip([o.name for o in model.graph.output], ReferenceEvaluator(model).run(None, {"x": x})))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    return got, manifest["memory_plan"]["buffers"], want


def _check(got: dict, want: dict) -> None:
    for name, w in want.items():
        if np.asarray(w).dtype.kind in "iu":
            np.testing.assert_array_equal(got[name], w, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], w, rtol=1e-6, atol=1e-6, err_msg=name)


def _assert_packed(buffers: list, dtype: str, count: int) -> None:
    """No buffer holds the value a byte a value; one u8 buffer holds its ceil(count * bits / 8) bytes."""
    assert not [b for b in buffers if b["dtype"] == dtype], "stored a byte a value"
    nbytes = -(-count * QTYPES[dtype][1] // 8)
    assert [b["bytes"] for b in buffers if b["dtype"] == "u8"] == [nbytes]


WRITERS = [("softmax", "s4", 5, 7), ("softmax", "u4", 3, 8), ("softmax", "s2", 3, 5), ("softmax", "u2", 2, 12),
           ("softmax", "s4", 9, 33), ("layernorm", "s4", 3, 7), ("layernorm", "u2", 4, 6),
           ("reducemax", "s4", 5, 7), ("reducemax", "u4", 1, 9), ("reducemax", "s2", 7, 3), ("reducemax", "u2", 33, 4),
           ("matmul", "s4", 5, 7), ("matmul", "u4", 3, 4), ("matmul", "s2", 5, 3), ("matmul", "u2", 17, 9)]


@pytest.mark.parametrize("kind,dtype,m,k", WRITERS)
def test_a_reduction_softmax_norm_or_matmul_kernel_stores_its_4_or_2_bit_result_packed(tmp_path, kind, dtype, m, k):
    n = 8 if dtype[1] == "2" else 4
    model, dims = _quantized_after(kind, dtype, m, k, n)
    x = _x(m, k, 3.0)
    got, buffers, want = _run(tmp_path, model, x)
    _check(got, want)
    _assert_packed(buffers, dtype, int(np.prod(dims)))


READERS = [("softmax", "s4", 5, 7), ("softmax", "u2", 3, 5), ("reducesum", "s4", 5, 7), ("reducesum", "u4", 4, 9),
           ("reducesum", "s2", 3, 3), ("matmul_a", "s4", 5, 7), ("matmul_a", "u2", 6, 5), ("gather", "s4", 5, 7),
           ("gather", "u2", 6, 3)]


@pytest.mark.parametrize("kind,dtype,m,k", READERS)
def test_a_reduction_softmax_matmul_or_gather_reads_a_packed_4_or_2_bit_value(tmp_path, kind, dtype, m, k):
    model, dims = _dequantized_into(kind, dtype, m, k)
    x = _x(m, k, 4.0)
    got, buffers, want = _run(tmp_path, model, x)
    _check(got, want)
    _assert_packed(buffers, dtype, int(np.prod(dims)))


@pytest.mark.parametrize("kind,dtype,m,k", [("softmax", "s4", 5, 7), ("softmax", "u2", 9, 6), ("reducemax", "s4", 5, 7),
                                            ("matmul", "u4", 33, 7), ("layernorm", "s2", 3, 7)])
def test_packed_stores_with_the_sm_90_configs(tmp_path, kind, dtype, m, k):
    """The sm_90 binaries' tiles (BLOCK_ROWS and BLOCK_O of the GPU heuristics, the matmul's GPU tiles) under
    the interpreter: each program still stores whole bytes."""
    n = 8 if dtype[1] == "2" else 4
    model, dims = _quantized_after(kind, dtype, m, k, n)
    x = _x(m, k, 3.0)
    got, buffers, want = _run(tmp_path, model, x, device="sim:sm_90")
    _check(got, want)
    _assert_packed(buffers, dtype, int(np.prod(dims)))


@pytest.mark.parametrize("dtype,m,k,n,device", [("s4", 5, 7, 3, "cpu"), ("u4", 33, 6, 5, "cpu"), ("s2", 4, 5, 7, "cpu"),
                                                 ("u2", 19, 3, 6, "cpu"), ("s4", 40, 7, 3, "sim:sm_90"),
                                                 ("u2", 5, 4, 7, "sim:sm_90")])
def test_a_dot_with_rows_of_an_odd_count_stores_whole_rows_packed(tmp_path, dtype, m, k, n, device):
    """Rows of a count that is not a multiple of the values a byte: the dot's tiles span whole rows and
    BLOCK_M rows, a multiple of the values a byte, so a byte that straddles two rows is one program's."""
    model, dims = _quantized_after("matmul", dtype, m, k, n)
    x = _x(m, k, 3.0)
    got, buffers, want = _run(tmp_path, model, x, device=device)
    _check(got, want)
    _assert_packed(buffers, dtype, m * n)


def test_a_batched_dot_whose_batch_elements_split_a_byte_keeps_a_byte_a_value(tmp_path):
    """README "The bundle": batch elements are programs of their own (grid axis 1), so when a batch
    element's 3 x 3 int4 values end mid-byte that result keeps a byte a value; it still matches."""
    inits = [nh.from_array(np.array(0.5, np.float32), "s"), h.make_tensor("z", T.INT4, [], [0]),
             nh.from_array(((np.arange(2 * 4 * 3).reshape(2, 4, 3) % 5) - 2).astype(np.float32), "w")]
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("QuantizeLinear", ["a", "s", "z"], ["q"]),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]), h.make_node("Cast", ["q"], ["c"], to=T.INT32)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
                         [h.make_tensor_value_info("d", T.FLOAT, [2, 3, 3]),
                          h.make_tensor_value_info("c", T.INT32, [2, 3, 3])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    x = (np.random.default_rng(3).standard_normal((2, 3, 4)) * 3).astype(np.float32)
    got, buffers, want = _run(tmp_path, model, x)
    _check(got, want)
    assert [b["bytes"] for b in buffers if b["dtype"] == "s4"] == [18]


def _symbolic_io(qtype: int, dims: list) -> onnx.ModelProto:
    """A 4/2-bit input q of symbolic dims, dequantized, doubled (e) and quantized again to an output o."""
    zero = 1 if qtype in (T.UINT4, T.UINT2) else 0
    inits = [nh.from_array(np.array(0.5, np.float32), "s"), h.make_tensor("z", qtype, [], [zero])]
    nodes = [h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]), h.make_node("Add", ["d", "d"], ["e"]),
             h.make_node("QuantizeLinear", ["e", "s", "z"], ["o"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("q", qtype, dims)],
                         [h.make_tensor_value_info("o", qtype, dims), h.make_tensor_value_info("e", T.FLOAT, dims)],
                         inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])


NUMPY = {T.INT4: ml_dtypes.int4, T.UINT4: ml_dtypes.uint4, T.INT2: ml_dtypes.int2, T.UINT2: ml_dtypes.uint2}


@pytest.mark.parametrize("qtype,dims,bits,sizes", [(T.INT4, ["n", 4], 4, (3, 6)), (T.UINT4, ["b", "n", 2], 4, (1, 5)),
                                                   (T.UINT2, ["n", 8], 2, (3, 10)), (T.INT2, [4, "n"], 2, (7, 2))])
def test_symbolic_dim_inputs_and_outputs_whose_values_are_whole_bytes_are_packed(tmp_path, qtype, dims, bits, sizes):
    """Values a multiple of the values a byte at every size (n * bits / 8 a polynomial): the input is a
    u8[that] parameter and the output that many bytes, "packed": true in the manifest; run at two sizes (odd
    row counts) against onnx.reference, the runtime's buffer ceil(n * bits / 8) bytes."""
    model = _symbolic_io(qtype, dims)
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    (q,), (o, e) = manifest["inputs"], manifest["outputs"]
    assert q["packed"] and o["packed"] and "packed" not in e and q["shape"] == dims and o["shape"] == dims
    assert manifest["schema_version"] == 5
    assert " parameter(0), name=q, packed=" in (tmp_path / "b" / "model.hlo").read_text()
    exe = mlcc.load(tmp_path / "b", device="cpu")
    lo = -(2 ** (bits - 1)) if qtype in (T.INT4, T.INT2) else 0
    for size in sizes:
        env = {d: size for d in dims if isinstance(d, str)}
        shape = [env.get(d, d) for d in dims]
        count = int(np.prod(shape))
        assert tensor_bytes(q, env) == tensor_bytes(o, env) == count * bits // 8
        x = np.random.default_rng(size).integers(lo, lo + 2 ** bits, shape).astype(NUMPY[qtype])
        got = exe.run({"q": x})
        want = ReferenceEvaluator(model).run(None, {"q": x})
        np.testing.assert_array_equal(got["o"].astype(np.int32), want[0].astype(np.int32))
        np.testing.assert_array_equal(got["e"], want[1])


def test_symbolic_dim_inputs_and_outputs_of_an_odd_count_keep_a_byte_a_value(tmp_path):
    """README "The bundle": an int4 [n, 3] has ceil(3n / 2) bytes, not a polynomial in n (the IR's symbolic
    dims are polynomials), so it keeps a byte a value and no "packed" key; it still runs at odd counts."""
    model = _symbolic_io(T.INT4, ["n", 3])
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert "packed" not in manifest["inputs"][0] and "packed" not in manifest["outputs"][0]
    exe = mlcc.load(tmp_path / "b", device="cpu")
    for n in (3, 4):
        x = np.random.default_rng(n).integers(-8, 8, (n, 3)).astype(ml_dtypes.int4)
        got = exe.run({"q": x})
        want = ReferenceEvaluator(model).run(None, {"q": x})
        np.testing.assert_array_equal(got["o"].astype(np.int32), want[0].astype(np.int32))


def test_symbolic_packed_inputs_and_outputs_on_sim_sm_90(tmp_path):
    model = _symbolic_io(T.INT4, ["n", 4])
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=["sm_90"])
    exe = mlcc.load(tmp_path / "b", device="sim:sm_90")
    for n in (5, 40):
        x = np.random.default_rng(n).integers(-8, 8, (n, 4)).astype(ml_dtypes.int4)
        got = exe.run({"q": x})
        want = ReferenceEvaluator(model).run(None, {"q": x})
        np.testing.assert_array_equal(got["o"].astype(np.int32), want[0].astype(np.int32))
        np.testing.assert_array_equal(got["e"], want[1])


@pytest.mark.parametrize("kind,dtype,m,k", [("softmax", "s4", 5, 7), ("reducemax", "u2", 7, 3), ("matmul", "s4", 5, 7)])
def test_the_packed_writers_ir_prints_parses_evaluates_and_compiles_back(tmp_path, kind, dtype, m, k):
    """IR text out, IR text in: the fused module with a packed reduction/softmax/matmul root parses back to
    the same text and evaluates to onnx.reference's values; a bundle's model.hlo compiles back to the same
    memory plan and still matches."""
    model, dims = _quantized_after(kind, dtype, m, k, 3 if kind == "matmul" else 4)
    module = import_onnx(model)
    compile_pipeline().run(module)
    text = format_module(module)
    again = parse_module(text)
    again.constants = module.constants  # the text holds a weight by its ref
    verify_module(again)
    assert format_module(again) == text
    x = _x(m, k, 3.0)
    want = dict(zip(("d", "c"), ReferenceEvaluator(model).run(None, {"x": x})))
    got = evaluate(again, {"x": x})
    np.testing.assert_array_equal(np.asarray(got["c"]), want["c"])
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    mlcc.compile(tmp_path / "b" / "model.hlo", tmp_path / "again", cache_dir="", targets=[])
    first, second = (json.loads((tmp_path / d / "manifest.json").read_text())["memory_plan"] for d in ("b", "again"))
    assert second == first
    _assert_packed(first["buffers"], dtype, int(np.prod(dims)))
    _check(mlcc.load(tmp_path / "again", device="cpu").run({"x": x}), want)


def test_a_symbolic_packed_input_and_output_compile_back_from_model_hlo(tmp_path):
    model = _symbolic_io(T.INT4, ["n", 4])
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    assert "packed=s4, packed_dims={n,4}" in (tmp_path / "b" / "model.hlo").read_text()
    mlcc.compile(tmp_path / "b" / "model.hlo", tmp_path / "again", cache_dir="", targets=[])
    manifest = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert manifest["inputs"][0]["packed"] and manifest["outputs"][0]["packed"]
    x = np.random.default_rng(1).integers(-8, 8, (7, 4)).astype(ml_dtypes.int4)
    got = mlcc.load(tmp_path / "again", device="cpu").run({"q": x})
    want = ReferenceEvaluator(model).run(None, {"q": x})
    np.testing.assert_array_equal(got["o"].astype(np.int32), want[0].astype(np.int32))


@pytest.mark.parametrize("kind,dtype,m,k,device", [("softmax", "s4", 3, 16385, "cpu"), ("softmax", "u2", 5, 16387, "cpu"),
                                                   ("layernorm", "s2", 5, 16386, "cpu"),
                                                   ("softmax", "u2", 5, 16387, "sim:sm_90")])
def test_odd_rows_longer_than_a_chunk_are_stored_packed(tmp_path, kind, dtype, m, k, device):
    """Rows past 16,384 values of a length that is not a multiple of the values a byte (16385, 16387 and 16386
    values: every offset of a row's start in its byte): the row kernel reads them in chunks (16,384 on the
    CPU, 4,096 with the sm_90 tiles), stores each byte inside a row in the chunk of its last value, and the
    bytes that straddle two rows after its loop (row_norm.py.jinja)."""
    model, dims = _quantized_after(kind, dtype, m, k)
    x = _x(m, k, 3.0)
    got, buffers, want = _run(tmp_path, model, x, device=device)
    _check(got, want)
    _assert_packed(buffers, dtype, m * k)


@pytest.mark.parametrize("kind,m,k,n,count", [("matmul", 2, 3, 257, 2 * 257)])
def test_odd_rows_past_one_tile_keep_a_byte_a_value(tmp_path, kind, m, k, n, count):
    """README "The bundle": a dot's odd rows are packed from tiles that hold whole rows, up to rows of 256; a
    longer odd row keeps a byte a value (its columns are several programs' tiles), and still matches."""
    model, dims = _quantized_after(kind, "s4", m, k, n)
    x = _x(m, k, 3.0)
    got, buffers, want = _run(tmp_path, model, x)
    _check(got, want)
    assert [b["bytes"] for b in buffers if b["dtype"] == "s4"] == [count]
