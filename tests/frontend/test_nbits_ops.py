"""com.microsoft MatMulNBits and GatherBlockQuantized (mlcc/frontend/onnx/ops/nbits.py) against onnxruntime:
single-node models with random packed weights, imported and run by the numpy evaluator, and compiled and
run through the generated kernels (the dequantization computed in the dot's weight loads) under Triton's
interpreter; and their bad inputs, each a one-line error naming the tensor."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.errors import InvalidInputError, UnsupportedError
from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.evaluator import evaluate

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
OPSETS = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]


def matmul_nbits(k: int, n: int, bits: int = 4, block: int = 32, zero: str | None = "packed", bias: bool = False,
                 dtype: int = F32, a_dims: tuple = (3, None), seed: int = 0, **override) -> onnx.ModelProto:
    """Y = A @ dequant(B)^T with random packed weights; ``override`` replaces an initializer's array."""
    rng = np.random.default_rng(seed)
    blocks = -(-k // block)
    npf = np.float16 if dtype == F16 else np.float32
    inits = {"B": rng.integers(0, 256, (n, blocks, block * bits // 8)).astype(np.uint8),
             "scales": rng.uniform(0.01, 0.1, n * blocks).astype(npf)}
    if zero == "packed":
        inits["zero_points"] = rng.integers(0, 256, n * -(-blocks * bits // 8)).astype(np.uint8)
    elif zero == "float":
        inits["zero_points"] = rng.uniform(0, 2 ** bits - 1, n * blocks).astype(npf)
    if bias:
        inits["bias"] = rng.standard_normal(n).astype(npf)
    inits.update(override)
    names = ["A", "B", "scales", "zero_points" if zero else "", "", "bias" if bias else ""]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MatMulNBits", names, ["Y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block, name="mm")
    a_shape = [d if d is not None else k for d in a_dims]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", dtype, a_shape)],
                              [helper.make_tensor_value_info("Y", dtype, a_shape[:-1] + [n])],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=10)


def gather_block_quantized(rows: int, cols: int, bits: int = 4, block: int = 16, zero: bool = True,
                           seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    per_byte = 8 // bits
    blocks = -(-cols // block)
    inits = {"data": rng.integers(0, 256, (rows, cols // per_byte)).astype(np.uint8),
             "scales": rng.uniform(0.01, 0.1, (rows, blocks)).astype(np.float32)}
    if zero:
        inits["zero_points"] = rng.integers(0, 256, (rows, -(-blocks // per_byte))).astype(np.uint8)
    names = ["data", "ids", "scales"] + (["zero_points"] if zero else [])
    node = helper.make_node("GatherBlockQuantized", names, ["Y"], domain="com.microsoft", bits=bits, block_size=block,
                            gather_axis=0, quantize_axis=1, name="gbq")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
                              [helper.make_tensor_value_info("Y", F32, [2, 3, cols])],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=10)


def _inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            out[vi.name] = rng.integers(0, 8, dims).astype(np.int64)
        else:
            dtype = np.float16 if vi.type.tensor_type.elem_type == F16 else np.float32
            out[vi.name] = rng.standard_normal(dims).astype(dtype)
    return out


def _onnxruntime(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


MATMUL_CASES = {
    "b32_zp": dict(k=64, n=32),
    "k_not_a_multiple_of_the_block": dict(k=40, n=16, block=16, zero=None),
    "bits8": dict(k=64, n=24, bits=8),
    "bits2": dict(k=64, n=16, bits=2, block=16),
    "b128_float_zero_points_bias": dict(k=256, n=16, block=128, zero="float", bias=True),
    "rank3": dict(k=32, n=16, block=16, a_dims=(2, 3, None)),
    "f16": dict(k=64, n=32, dtype=F16),
}


@pytest.mark.parametrize("case", sorted(MATMUL_CASES))
def test_matmul_nbits_imports_as_onnxruntime_computes_it(case):
    model = matmul_nbits(**MATMUL_CASES[case])
    inputs = _inputs(model)
    want = _onnxruntime(model, inputs)
    got = evaluate(import_onnx(model), inputs)["Y"]
    tol = 2e-2 if want.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["b32_zp", "k_not_a_multiple_of_the_block", "bits8", "bits2", "f16"])
def test_matmul_nbits_kernel_matches_onnxruntime(tmp_path, case):
    model = matmul_nbits(**MATMUL_CASES[case])
    inputs = _inputs(model)
    want = _onnxruntime(model, inputs)
    result = mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="")
    fused = [k for k in result.manifest["kernels"] if k["name"].startswith("fused_output")]
    assert len(result.manifest["schedule"]) == 1 and len(fused) == 1, "one kernel: the dot computing its weight"
    got = mlcc.load(tmp_path / "b", device="cpu").run(inputs)["Y"]
    tol = 2e-2 if want.dtype == np.float16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


GATHER_CASES = {"bits4_zp": dict(rows=8, cols=64), "bits4_no_zp": dict(rows=8, cols=32, zero=False),
                "bits8": dict(rows=8, cols=32, bits=8), "cols_not_a_multiple_of_the_block": dict(rows=8, cols=40)}


@pytest.mark.parametrize("case", sorted(GATHER_CASES))
def test_gather_block_quantized_imports_as_onnxruntime_computes_it(case):
    model = gather_block_quantized(**GATHER_CASES[case])
    inputs = _inputs(model)
    want = _onnxruntime(model, inputs)
    got = evaluate(import_onnx(model), inputs)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_gather_block_quantized_kernel_matches_onnxruntime(tmp_path):
    model = gather_block_quantized(rows=8, cols=64)
    inputs = _inputs(model)
    mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="")
    got = mlcc.load(tmp_path / "b", device="cpu").run(inputs)["Y"]
    np.testing.assert_allclose(got, _onnxruntime(model, inputs), rtol=1e-6, atol=1e-6)


BAD = {
    "packed weight 'B' has 1020 bytes, not N * ceil(K / block_size) * block_size * bits / 8 = 1024":
        dict(k=64, n=32, B=np.zeros((32, 2, 16), np.uint8).reshape(-1)[:1020]),
    "scales 'scales' has 60 float32 elements, not N * ceil(K / block_size) = 64":
        dict(k=64, n=32, scales=np.ones(60, np.float32)),
    "zero points 'zero_points' has 16 elements, not 32": dict(k=64, n=32, zero_points=np.zeros(16, np.uint8)),
    "block_size 24 is not a power of two >= 16": dict(k=48, n=16, block=24),
}


@pytest.mark.parametrize("message", sorted(BAD))
def test_bad_matmul_nbits_is_invalid_input_naming_the_tensor(tmp_path, message):
    args = dict(BAD[message])
    k, n, block = args.pop("k"), args.pop("n"), args.pop("block", 32)
    if block == 24:  # the packed sizes follow the bad block size; only the block size is wrong
        model = matmul_nbits(k, n, block=16, zero=None)
        next(a for a in model.graph.node[0].attribute if a.name == "block_size").i = 24
    else:
        model = matmul_nbits(k, n, **args)
    with pytest.raises(InvalidInputError) as e:
        mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="")
    assert message.replace("float32", "f32") in str(e.value) and "'mm'" in str(e.value), str(e.value)
    assert not (tmp_path / "b").exists()


def test_g_idx_is_unsupported_naming_the_node(tmp_path):
    model = matmul_nbits(32, 16, block=16)
    model.graph.initializer.append(numpy_helper.from_array(np.arange(32, dtype=np.int32) // 16, "g_idx"))
    model.graph.node[0].input.append("g_idx")
    with pytest.raises(UnsupportedError, match="node 'mm' .*g_idx 'g_idx'"):
        mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="")


def test_cli_reports_a_bad_packed_length_on_one_line_with_exit_65(tmp_path):
    model = matmul_nbits(64, 32, B=np.zeros(1000, np.uint8))
    onnx.save(model, tmp_path / "bad.onnx")
    r = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(tmp_path / "bad.onnx"), "-o",
                        str(tmp_path / "out"), "--target", "none", "--no-cache"], capture_output=True, text=True)
    assert r.returncode == 65, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.onnx" in lines[0] and "packed weight 'B' has 1000 bytes" in lines[0], r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", [F32, F16])
def test_decode_matmul_nbits_splits_k_and_matches_onnxruntime(tmp_path, dtype):
    # one row, K=4096, N=64: one tile of output columns, so K is split over 16 programs (batch axis of the
    # grid), and a reduce adds the partial sums in order with the bias in its epilogue
    model = matmul_nbits(4096, 64, a_dims=(1, None), dtype=dtype, bias=True)
    inputs = _inputs(model)
    want = _onnxruntime(model, inputs).astype(np.float32)
    m = mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="").manifest
    partials = [s for s in m["schedule"] if s["instruction"].endswith(".partials")]
    assert len(partials) == 1 and partials[0]["grid"][1] == 16, m["schedule"]
    got = mlcc.load(tmp_path / "b", device="cpu").run(inputs)["Y"].astype(np.float32)
    # f16: the output's rounding (values up to ~80: an ulp of 0.0625)
    tol = dict(rtol=2e-3, atol=0.07) if dtype == F16 else dict(rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got, want, **tol)
