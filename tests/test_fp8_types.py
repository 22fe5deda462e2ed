"""fp8 contractions of e5m2 and the fnuz forms, and of mixed pairs (mlcc/hlo/passes/quantized_fp8.py): ONNX QDQ
graphs (QuantizeLinear/DequantizeLinear with FLOAT8E5M2, FLOAT8E4M3FNUZ, FLOAT8E5M2FNUZ zero points, and
FLOAT8E4M3FN in a mixed pair) into a MatMul and a Conv, compiled to fp8 x fp8 -> f32 contractions and compared
with onnxruntime on CPU (the exact f16 decode); built for sm_90 and gfx942, run on the simulated devices with
those targets' configs (tl.dot on Triton's fp8 types where the target's tensor cores take the pair), whose
SASS has QGMMA with the pair's operand types and whose amdgcn has the fp8/bf8 MFMA. fnuz: 0x80 is the one NaN
and there is no -0 (a negative value that rounds to zero quantizes to 0x00, not to the NaN)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.compiler import CompileOptions, _fp8_upcasts, lower_model
from mlcc.emit.codegen.triton_types import fp8_operand_types
from mlcc.emit.target.aot import triton_compile
from mlcc.emit.target.binaries import nvidia_tool
from mlcc.emit.target.targets import parse_target
from mlcc.errors import UnsupportedError
from mlcc.hlo.shape_inference import FP8_DOT
from mlcc.inspect import binaries_summary

ROOT = Path(__file__).resolve().parent.parent
TYPES = {"e4m3fn": TensorProto.FLOAT8E4M3FN, "e5m2": TensorProto.FLOAT8E5M2,
         "e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ, "e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ}
# (activation type, weight type): e5m2 alone, both mixed OCP orders, the fnuz forms alone and mixed, OCP with fnuz
PAIRS = [("e5m2", "e5m2"), ("e4m3fn", "e5m2"), ("e5m2", "e4m3fn"), ("e4m3fnuz", "e4m3fnuz"),
         ("e5m2fnuz", "e5m2fnuz"), ("e4m3fnuz", "e5m2fnuz"), ("e5m2fnuz", "e4m3fnuz"), ("e4m3fn", "e4m3fnuz")]


def qdq_model(ta: str, tw: str):
    """y = DQ(Q(a)) @ DQ(w) (per-tensor scales), c = Conv(DQ(Q(x)), DQ(k)) (per-output-channel weight scales):
    activations of type ta, weights of type tw."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TYPES[tw], [128, 64], (rng.standard_normal(128 * 64) * 16).tolist())
    k = helper.make_tensor("k", TYPES[tw], [64, 32, 3, 3], (rng.standard_normal(64 * 32 * 9) * 16).tolist())
    scales = [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in
              (("sa", 0.02), ("sw", 0.01), ("sx", 0.03), ("sk", rng.uniform(0.002, 0.01, 64)))]
    zeros = [helper.make_tensor("za", TYPES[ta], [], [0.0]), helper.make_tensor("zw", TYPES[tw], [], [0.0]),
             helper.make_tensor("zk", TYPES[tw], [64], [0.0] * 64)]
    nodes = [helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"], name="qa"),
             helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"], name="dqa"),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], name="dqw"),
             helper.make_node("MatMul", ["ad", "wd"], ["y"], name="mm"),
             helper.make_node("QuantizeLinear", ["x", "sx", "za"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "za"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["k", "sk", "zk"], ["kd"], name="dqk", axis=0),
             helper.make_node("Conv", ["xd", "kd"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, f"{ta}_{tw}",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [64, 128]),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64]),
                               helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 64, 16, 16])],
                              [w, k, *zeros, *scales])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def feed(nan: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    x = rng.standard_normal((1, 32, 16, 16)).astype(np.float32)
    if nan:  # a NaN in row 3 of a and at one pixel of x; negative values that quantize to zero in row 5
        a[3, 7] = np.nan
        x[0, 4, 2, 9] = np.nan
        a[5, :] = -1e-9
    return {"a": a, "x": x}


def reference(model, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)


def check(bundle, model, device: str, inputs: dict[str, np.ndarray]) -> None:
    got = mlcc.load(bundle, device=device).run(inputs)
    for name, ref in zip(("y", "c"), reference(model, inputs)):
        np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-5, err_msg=f"{name} on {device}")


def fp8_contractions(bundle) -> list[str]:
    """The bundle's contractions, each an fp8 one (else an AssertionError)."""
    hlo = (bundle / "model.hlo").read_text().splitlines()
    contractions = [line for line in hlo if " dot(" in line or " convolution(" in line]
    assert all(re.match(r"\s*(ROOT )?%fp8-", line) for line in contractions)
    return contractions


@pytest.mark.parametrize("ta, tw", PAIRS)
def test_fp8_pair_is_an_fp8_contraction_and_matches_onnxruntime_on_cpu(tmp_path, ta, tw):
    model = qdq_model(ta, tw)
    r = mlcc.compile(model, tmp_path / "b", targets=[])
    assert len(fp8_contractions(r.out_dir)) == 2
    sources = [k["source"] for k in r.manifest["kernels"] if k["template"] in ("matmul.py.jinja", "conv.py.jinja")]
    # the tiles reinterpreted as the pair's Triton types (used where a target's tensor cores take them)
    assert [fp8_operand_types((r.out_dir / s).read_text()) for s in sources] == \
        [tuple(t for t in FP8_DOT if t in (f"f8{ta}", f"f8{tw}"))] * 2
    check(r.out_dir, model, "cpu", feed())


@pytest.mark.parametrize("ta, tw", [("e4m3fnuz", "e4m3fnuz"), ("e5m2fnuz", "e4m3fnuz"), ("e5m2", "e5m2")])
def test_nan_and_negative_zero(tmp_path, ta, tw):
    # a NaN activation makes its output row (pixel neighbourhood) NaN, as in onnxruntime; fnuz has no -0, so a tiny
    # negative value quantizes to 0x00 (zero), not to 0x80 (its NaN): that row stays 0
    model = qdq_model(ta, tw)
    r = mlcc.compile(model, tmp_path / "b", targets=[])
    inputs = feed(nan=True)
    ref = reference(model, inputs)
    assert np.isnan(ref[0][3]).all() and (ref[0][5] == 0).all() and np.isnan(ref[1]).any()
    check(r.out_dir, model, "cpu", inputs)


@pytest.mark.parametrize("ta, tw, on", [("e4m3fnuz", "e5m2fnuz", [0, 0, 1]), ("e5m2", "e4m3fn", [0, 1, 0]),
                                        ("e4m3fn", "e4m3fnuz", [0, 0, 0])])
def test_fp8_dot_per_target_follows_what_its_tensor_cores_take(ta, tw, on):
    # FP8_DOT on sm_80, sm_90, gfx942: sm_90's tensor cores take e4m3fn/e5m2, gfx942's the fnuz forms, sm_80's
    # none; an OCP type with an fnuz one, no target
    options = CompileOptions(targets=["sm_80", "sm_90", "gfx942"])
    targets = [parse_target(t) for t in options.targets]
    _, kernels, _ = lower_model(qdq_model(ta, tw), options, targets)
    fp8 = [k for k in kernels.values() if "FP8_DOT" in k.config_for(targets[0]).constexprs]
    assert len(fp8) == 2
    assert [[k.config_for(t).constexprs["FP8_DOT"] for t in targets] for k in fp8] == [on] * 2


@pytest.mark.slow  # AOT compiles of 3 models for sm_90 and gfx942, runs under the interpreter: about a minute
@pytest.mark.skipif(nvidia_tool("nvdisasm") is None, reason="needs nvdisasm (Triton's NVIDIA backend ships it)")
@pytest.mark.parametrize("ta, tw, sass, mfma", [
    ("e5m2", "e5m2", "E5M2.E5M2", {"v_mfma_f32_32x32x8_f16"}),
    ("e4m3fn", "e5m2", "E4M3.E5M2", {"v_mfma_f32_32x32x8_f16"}),
    ("e5m2", "e4m3fn", "E5M2.E4M3", {"v_mfma_f32_32x32x8_f16"}),
    ("e4m3fnuz", "e4m3fnuz", None, {"v_mfma_f32_32x32x16_fp8_fp8"}),
    ("e5m2fnuz", "e5m2fnuz", None, {"v_mfma_f32_32x32x16_bf8_bf8"}),
    # Triton lowers this dot with its MFMA layout transposed (operands passed as B, A): the instruction names the
    # weight's type (bf8) first
    ("e4m3fnuz", "e5m2fnuz", None, {"v_mfma_f32_32x32x16_bf8_fp8"}),
])
def test_fp8_tensor_cores_on_sm_90_and_gfx942(tmp_path, ta, tw, sass, mfma):
    model = qdq_model(ta, tw)
    r = mlcc.compile(model, tmp_path / "b", targets=["sm_90", "gfx942"])
    lacking = "gfx942" if sass else "sm_90"
    assert len(r.warnings) == 1 and r.warnings[0].startswith(f"warning: {lacking} has no ")
    forms = [set(row["extra"]["matrix_forms"]) for row in binaries_summary(r.out_dir)["binaries"]
             if row["target"] == "sm_90" and row["template"] in ("matmul.py.jinja", "conv.py.jinja")]
    assert len(forms) == 2
    for found in forms:  # fp8 wgmma with the pair's operand types; else f16 wgmma on the decoded values
        assert all(f.startswith("QGMMA.") and f.endswith(f".F32.{sass}") for f in found) if sass else \
            all(f.startswith("HGMMA.") for f in found)
    gfx942 = parse_target("gfx942")
    _, kernels, _ = lower_model(model, CompileOptions(targets=["gfx942"]), [gfx942])
    contractions = [k for k in kernels.values() if k.template in ("matmul.py.jinja", "conv.py.jinja")]
    assert len(contractions) == 2
    for k in contractions:
        assert set(re.findall(r"v_mfma\w+", triton_compile(k, gfx942).asm["amdgcn"])) == mfma
    for device in ("cpu", "sim:sm_90", "sim:gfx942"):
        check(r.out_dir, model, device, feed())


def test_fp8_strict_names_the_fnuz_types_sm_90_lacks_in_one_line(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(qdq_model("e4m3fnuz", "e5m2fnuz").SerializeToString())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(path), "-o", str(tmp_path / "b"),
                        "--target", "sm_90,gfx942", "--fp8", "strict", "--no-cache"], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 69
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("mlcc: error: --fp8 strict: sm_90 has no e4m3fnuz or e5m2fnuz tensor cores for the "
                               "2 fp8 contraction kernels (")
    assert p.stderr.endswith("build for a target whose tensor cores take them (sm_90: e4m3fn, e5m2; gfx942: "
                             "e4m3fnuz, e5m2fnuz), or let them multiply in f16 (--fp8 upcast)\n")
    assert not (tmp_path / "b").exists()


def test_fp8_upcast_warning_names_what_each_target_lacks():
    # kernels (name, target, their fp8 types) that a target decodes: one line, targets lacking the same types in
    # one clause; a mixed e4m3fn x e4m3fnuz kernel on sm_90 lacks only e4m3fnuz
    upcast = [("k0", "sm_80", ("f8e4m3fn", "f8e5m2")), ("k0", "gfx942", ("f8e4m3fn", "f8e5m2")),
              ("k1", "sm_90", ("f8e4m3fn", "f8e4m3fnuz")), ("k1", "sm_80", ("f8e4m3fn", "f8e4m3fnuz"))]
    assert _fp8_upcasts(upcast, CompileOptions()) == [
        "warning: gfx942 has no e4m3fn or e5m2 tensor cores and sm_80 has no e4m3fn or e5m2 or e4m3fnuz tensor "
        "cores and sm_90 has no e4m3fnuz tensor cores: 2 fp8 contraction kernels multiply in f16 there (exact: "
        "every e4m3/e5m2/e4m3fnuz value is an f16 value; f32 sums)"]
    with pytest.raises(UnsupportedError, match=r"^--fp8 strict: gfx942 has no e4m3fn or e5m2 tensor cores and "):
        _fp8_upcasts(upcast, CompileOptions(fp8="strict"))


def _two_convolutions(tk: str, tj: str):
    """z = Conv(xd, DQ(k)) + Conv(xd, DQ(j)): e4m3fn activations, weights of types tk and tj (a residual block's
    main path and shortcut at the same output coordinates)."""
    rng = np.random.default_rng(2)
    k = helper.make_tensor("k", TYPES[tk], [16, 8, 3, 3], (rng.standard_normal(16 * 8 * 9) * 16).tolist())
    j = helper.make_tensor("j", TYPES[tj], [16, 8, 1, 1], (rng.standard_normal(16 * 8) * 16).tolist())
    scales = [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in (("sx", 0.03), ("s", 0.01))]
    zeros = [helper.make_tensor(f"z{n}", TYPES[t], [], [0.0]) for n, t in (("x", "e4m3fn"), ("k", tk), ("j", tj))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["k", "s", "zk"], ["kd"]),
             helper.make_node("DequantizeLinear", ["j", "s", "zj"], ["jd"]),
             helper.make_node("Conv", ["xd", "kd"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["xd", "jd"], ["c2"]),
             helper.make_node("Add", ["c1", "c2"], ["z"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [k, j, *zeros, *scales])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("tk, tj, launches", [("e4m3fn", "e4m3fn", 2), ("e4m3fn", "e5m2", 3)])
def test_two_fp8_convolutions_share_a_tile_only_with_one_weight_type(tmp_path, tk, tj, launches):
    # one kernel reads both convolutions' weights as one fp8 type: weights of two types stay two kernels
    model = _two_convolutions(tk, tj)
    r = mlcc.compile(model, tmp_path / "b", targets=[])
    assert len(fp8_contractions(r.out_dir)) == 2 and r.manifest["stats"]["launches"] == launches
    x = np.random.default_rng(3).standard_normal((1, 8, 8, 8)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(mlcc.load(r.out_dir, device="cpu").run({"x": x})["z"], ref, rtol=1e-5, atol=1e-5)
