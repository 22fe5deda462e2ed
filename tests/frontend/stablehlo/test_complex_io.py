"""Complex inputs and outputs of a StableHLO @main: a bundle takes and returns numpy complex64/complex128
arrays (its buffers hold the real pairs, the manifest says "complex": true, schema 7), on CPU under the
interpreter and on sim:sm_90, against numpy; mlcc verify and inspect on such a program; complex values
carried through while, if and case, and sorted, against numpy.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner

import mlcc
from mlcc.bundle.errors import BundleError
from mlcc.bundle.manifest import Manifest
from mlcc.bundle.schemas import COMPLEX_IO_SCHEMA_VERSION, load_schema
from mlcc.cli import main
from mlcc.frontend.stablehlo import StableHLOUnsupportedError, import_stablehlo
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module

rng = np.random.default_rng(7)
ELEMENT = {np.complex64: "complex<f32>", np.complex128: "complex<f64>", np.float32: "f32", np.float64: "f64",
           np.int32: "i32"}


def t(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + ELEMENT[dtype] + ">"


def cplx(*shape, dtype=np.complex64):
    return (rng.uniform(-1.5, 1.5, shape) + 1j * rng.uniform(-1.5, 1.5, shape)).astype(dtype)


def io_program(dtype) -> str:
    """(z, x) -> (z * z + x, |z| summed over rows, exp(z)^T): complex and real arguments and results."""
    part = np.float32 if dtype == np.complex64 else np.float64
    c, r, ct, rs = t((3, 4), dtype), t((4,), part), t((4, 3), dtype), t((3,), part)
    f = t((3, 4), part)
    return f"""func.func @main(%arg0: {c}, %arg1: {r}) -> ({c}, {rs}, {ct}) {{
  %0 = stablehlo.multiply %arg0, %arg0 : {c}
  %b = stablehlo.broadcast_in_dim %arg1, dims = [1] : ({r}) -> {f}
  %zero = stablehlo.constant dense<0.0> : {t((3, 4), part)}
  %bc = stablehlo.complex %b, %zero : {c}
  %1 = stablehlo.add %0, %bc : {c}
  %a = stablehlo.abs %arg0 : ({c}) -> {f}
  %z = stablehlo.constant dense<0.0> : {t((), part)}
  %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : ({f}, {t((), part)}) -> {rs}
  %e = stablehlo.exponential %arg0 : {c}
  %tr = stablehlo.transpose %e, dims = [1, 0] : ({c}) -> {ct}
  return %1, %s, %tr : {c}, {rs}, {ct}
}}
"""


def io_reference(z, x):
    z = z.astype(np.complex128)
    return [z * z + x, np.abs(z).sum(1), np.exp(z).T]


def check_outputs(got, want, dtype):
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.complex64 else {"rtol": 1e-12, "atol": 1e-12}
    for k, w in enumerate(want):
        g = got[f"out{k}"]
        assert g.shape == w.shape and g.dtype.kind == np.asarray(w).dtype.kind, k
        np.testing.assert_allclose(g, w, **tol, err_msg=f"out{k}")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_bundle_takes_and_returns_complex_arrays_on_cpu(tmp_path, dtype):
    (tmp_path / "p.mlir").write_text(io_program(dtype))
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
    exe = mlcc.load(tmp_path / "b")
    part = np.float32 if dtype == np.complex64 else np.float64
    z, x = cplx(3, 4, dtype=dtype), rng.uniform(-1, 1, 4).astype(part)
    got = exe.run({"arg0": z, "arg1": x})
    assert got["out0"].dtype == dtype and got["out2"].dtype == dtype and got["out1"].dtype == part
    check_outputs(got, io_reference(z, x), dtype)
    # a non-contiguous complex input (a transposed view) is taken as its values
    zt = cplx(4, 3, dtype=dtype)
    check_outputs(exe.run({"arg0": zt.T, "arg1": x}), io_reference(zt.T, x), dtype)


def test_a_complex_input_of_another_shape_or_a_string_is_refused_naming_it(tmp_path):
    (tmp_path / "p.mlir").write_text(io_program(np.complex64))
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
    exe = mlcc.load(tmp_path / "b")
    x = np.zeros(4, np.float32)
    with pytest.raises(BundleError, match=r"input 'arg0': shape \[3, 4, 2\], the bundle expects \[3, 4\]"):
        exe.run({"arg0": np.zeros((3, 4, 2), np.float32), "arg1": x})  # the pairs themselves: not the user's shape
    with pytest.raises(BundleError, match="input 'arg0': dtype <U1"):
        exe.run({"arg0": np.full((3, 4), "a"), "arg1": x})


def test_a_complex_program_on_sim_sm_90(tmp_path):
    (tmp_path / "p.mlir").write_text(io_program(np.complex64))
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=["sm_90"])
    z, x = cplx(3, 4), rng.uniform(-1, 1, 4).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="sim:sm_90").run({"arg0": z, "arg1": x})
    check_outputs(got, io_reference(z, x), np.complex64)


def test_the_manifest_marks_complex_io_and_follows_its_schema(tmp_path):
    (tmp_path / "p.mlir").write_text(io_program(np.complex128))
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["schema_version"] == COMPLEX_IO_SCHEMA_VERSION == 7
    schema = load_schema("manifest")
    jsonschema.validate(m, schema)
    z_in, x_in = m["inputs"]
    assert (z_in["complex"], z_in["dtype"], z_in["numpy_dtype"], z_in["shape"]) == (True, "f64", "float64", [3, 4, 2])
    assert "complex" not in x_in and x_in["shape"] == [4]
    assert [o.get("complex", False) for o in m["outputs"]] == [True, False, True]
    assert m["outputs"][2]["shape"] == [4, 3, 2]
    assert Manifest.from_json(m).to_json() == m  # the key round-trips through the records
    bad = json.loads(json.dumps(m))
    bad["inputs"][0]["dtype"] = "s32"  # complex pairs of integers: no such type
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = json.loads(json.dumps(m))
    bad["inputs"][1]["complex"] = False  # the key is written only when true
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    # the bundle's model.hlo keeps the marks: it prints and parses back to the same text
    hlo = (tmp_path / "b" / "model.hlo").read_text()
    assert "complex_outputs={0,2}" in hlo and "complex=true" in hlo
    assert format_module(parse_module(hlo)) == hlo


def test_a_bundle_without_complex_io_has_no_complex_key(tmp_path):
    f = t((3,), np.float32)
    (tmp_path / "p.mlir").write_text(f"func.func @main(%arg0: {f}) -> {f} {{\n  %0 = stablehlo.add %arg0, %arg0 : {f}\n"
                                     f"  return %0 : {f}\n}}\n")
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
    text = (tmp_path / "b" / "manifest.json").read_text()
    assert json.loads(text)["schema_version"] < COMPLEX_IO_SCHEMA_VERSION and '"complex"' not in text


def test_verify_and_inspect_a_complex_program(tmp_path):
    (tmp_path / "p.mlir").write_text(io_program(np.complex64))
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "p.mlir"), "--bundle", str(tmp_path / "b"),
                                  "--target", "sm_90", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.output[r.output.index("{"):])
    assert result["ok"] and result["reference"] == "evaluator"
    assert [o["dtype"] for o in result["outputs"]] == ["complex64", "float32", "complex64"]
    # a wrong expected output fails: the comparison reads both parts
    z, x = cplx(3, 4), rng.uniform(-1, 1, 4).astype(np.float32)
    want = io_reference(z, x)
    wrong = want[0].astype(np.complex64) + 0.5j
    np.savez(tmp_path / "in.npz", arg0=z, arg1=x, out0=wrong, out1=want[1].astype(np.float32),
             out2=want[2].astype(np.complex64))
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "p.mlir"), "--bundle", str(tmp_path / "b"),
                                  "--target", "sm_90", "--inputs", str(tmp_path / "in.npz")])
    assert r.exit_code == 1, r.output
    assert "FAIL out0" in r.output and "ok   out1" in r.output and "ok   out2" in r.output
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "inputs     arg0 c64[3,4], arg1 f32[4]" in r.output
    assert "outputs    out0 c64[3,4], out1 f32[3], out2 c64[4,3]" in r.output


def test_run_cli_reads_and_writes_complex_npz(tmp_path):
    (tmp_path / "p.mlir").write_text(io_program(np.complex64))
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
    z, x = cplx(3, 4), rng.uniform(-1, 1, 4).astype(np.float32)
    np.savez(tmp_path / "in.npz", arg0=z, arg1=x)
    r = CliRunner().invoke(main, ["run", str(tmp_path / "b"), "--inputs", str(tmp_path / "in.npz"),
                                  "--output", str(tmp_path / "out.npz")])
    assert r.exit_code == 0, r.output
    out = np.load(tmp_path / "out.npz")
    check_outputs({k: out[k] for k in out.files}, io_reference(z, x), np.complex64)


# ---------------------------------------------------------------- control flow and sort with complex values
def loop_program() -> str:
    """z <- z * w + 1 for 5 trips (a complex carry beside a counter), then case on an argument: branch 0 the
    conjugate-free product z * w, branch 1 z - w, branch 2 (and out of range) the carry itself; if on a
    predicate picks z or w."""
    c, i, p = t((4,), np.complex64), t((), np.int32), "tensor<i1>"
    return f"""func.func @main(%arg0: {c}, %arg1: {c}, %arg2: {i}, %arg3: {p}) -> ({c}, {c}, {c}) {{
  %c0 = stablehlo.constant dense<0> : {i}
  %c1 = stablehlo.constant dense<1> : {i}
  %c5 = stablehlo.constant dense<5> : {i}
  %one = stablehlo.constant dense<(1.0, 0.0)> : {c}
  %r:2 = stablehlo.while(%k = %c0, %z = %arg0) : {i}, {c}
   cond {{
    %lt = stablehlo.compare LT, %k, %c5, SIGNED : ({i}, {i}) -> {p}
    stablehlo.return %lt : {p}
  }} do {{
    %m = stablehlo.multiply %z, %arg1 : {c}
    %n = stablehlo.add %m, %one : {c}
    %k1 = stablehlo.add %k, %c1 : {i}
    stablehlo.return %k1, %n : {i}, {c}
  }}
  %s = "stablehlo.case"(%arg2) ({{
    %a = stablehlo.multiply %r#1, %arg1 : {c}
    stablehlo.return %a : {c}
  }}, {{
    %b = stablehlo.subtract %r#1, %arg1 : {c}
    stablehlo.return %b : {c}
  }}, {{
    stablehlo.return %r#1 : {c}
  }}) : ({i}) -> {c}
  %f = "stablehlo.if"(%arg3) ({{
    stablehlo.return %arg0 : {c}
  }}, {{
    stablehlo.return %arg1 : {c}
  }}) : ({p}) -> {c}
  return %r#1, %s, %f : {c}, {c}, {c}
}}
"""


def loop_reference(z, w, index, pred):
    z, w = z.astype(np.complex128), w.astype(np.complex128)
    carry = z
    for _ in range(5):
        carry = carry * w + 1
    case = [carry * w, carry - w, carry][index if 0 <= index < 3 else 2]
    return [carry, case, z if pred else w]


@pytest.mark.parametrize("index, pred", [(0, True), (1, False), (2, True), (7, False)])
def test_while_case_and_if_with_complex_values_through_the_evaluator(index, pred):
    z, w = cplx(4), cplx(4) * 0.5
    module = import_stablehlo(loop_program())
    out = evaluate(module, {"arg0": z, "arg1": w, "arg2": np.int32(index), "arg3": np.bool_(pred)})
    for k, want in enumerate(loop_reference(z, w, index, pred)):
        np.testing.assert_allclose(out[f"out{k}"], want, rtol=1e-5, atol=1e-5, err_msg=f"out{k}")


def test_while_case_and_if_with_complex_values_through_the_kernels(tmp_path):
    (tmp_path / "p.mlir").write_text(loop_program())
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
    exe = mlcc.load(tmp_path / "b")
    z, w = cplx(4), cplx(4) * 0.5
    for index, pred in [(1, True), (5, False)]:
        got = exe.run({"arg0": z, "arg1": w, "arg2": np.int32(index), "arg3": np.bool_(pred)})
        for k, want in enumerate(loop_reference(z, w, index, pred)):
            np.testing.assert_allclose(got[f"out{k}"], want, rtol=1e-5, atol=1e-5, err_msg=f"out{k}")


def sort_program(direction: str, compare_type: str) -> str:
    c, i, p = t((2, 6), np.complex64), t((2, 6), np.int32), "tensor<i1>"
    s = t((), np.complex64)
    return f"""func.func @main(%arg0: {c}, %arg1: {i}) -> ({c}, {i}) {{
  %r:2 = "stablehlo.sort"(%arg0, %arg1) <{{dimension = 1 : i64, is_stable = true}}> ({{
  ^bb0(%a: {s}, %b: {s}, %x: tensor<i32>, %y: tensor<i32>):
    %lt = stablehlo.compare {direction}, %a, %b, {compare_type} : ({s}, {s}) -> {p}
    stablehlo.return %lt : {p}
  }}) : ({c}, {i}) -> ({c}, {i})
  return %r#0, %r#1 : {c}, {i}
}}
"""


@pytest.mark.parametrize("direction, compare_type", [("LT", "FLOAT"), ("GT", "FLOAT"), ("LT", "TOTALORDER")])
def test_sort_of_complex_values_is_lexicographic(tmp_path, direction, compare_type):
    """numpy sorts complex values lexicographically on (real, imaginary), the spec's order for compare."""
    z = cplx(2, 6)
    z.real[:, 3] = z.real[:, 1]  # ties in the real part: the imaginary part decides
    z[1, 4] = z[1, 2]  # a full tie: the stable sort keeps their order
    ids = np.tile(np.arange(6, dtype=np.int32), (2, 1))
    order = np.stack([sorted(range(6), key=lambda j: ((z[r, j].real, z[r, j].imag), j)) for r in range(2)])
    if direction == "GT":
        order = np.stack([sorted(range(6), key=lambda j: ((-z[r, j].real, -z[r, j].imag), j)) for r in range(2)])
    want = np.take_along_axis(z, order, 1), order.astype(np.int32)
    module = import_stablehlo(sort_program(direction, compare_type))
    out = evaluate(module, {"arg0": z, "arg1": ids})
    np.testing.assert_array_equal(out["out0"], want[0])
    np.testing.assert_array_equal(out["out1"], want[1])
    if direction == "LT" and compare_type == "FLOAT":
        np.testing.assert_array_equal(out["out0"], np.sort(z, axis=1))
        (tmp_path / "p.mlir").write_text(sort_program(direction, compare_type))
        mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=[])
        got = mlcc.load(tmp_path / "b").run({"arg0": z, "arg1": ids})
        np.testing.assert_array_equal(got["out0"], want[0])
        np.testing.assert_array_equal(got["out1"], want[1])


def test_a_while_whose_condition_reads_a_complex_carry_is_refused():
    c, p = t((), np.complex64), "tensor<i1>"
    text = f"""func.func @main(%arg0: {c}) -> {c} {{
  %r = stablehlo.while(%z = %arg0) : {c}
   cond {{
    %e = stablehlo.compare EQ, %z, %z, FLOAT : ({c}, {c}) -> {p}
    stablehlo.return %e : {p}
  }} do {{
    stablehlo.return %z : {c}
  }}
  return %r : {c}
}}
"""
    with pytest.raises(StableHLOUnsupportedError, match="loop condition is not known at compile time") as info:
        import_stablehlo(text)
    assert info.value.exit_code == 69
