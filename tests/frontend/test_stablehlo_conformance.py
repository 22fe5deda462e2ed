"""StableHLO programs written by JAX, imported and evaluated against JAX's own outputs.

tests/data/stablehlo/ comes from tools/gen_stablehlo_conformance.py (run it with
jax installed to regenerate): NAME.mlir (pretty form), some NAME.generic.mlir and
NAME.debug.mlir, and NAME.ref.npz with the inputs arg0.. and JAX's outputs out0..
(spec_ops*: spec ops this JAX no longer writes, by hand, with numpy's float64 outputs)
The shared models are checked against the references beside them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from half_ulp import assert_half_exact
from mlcc_test_paths import SHARED_MODELS

from mlcc.frontend.stablehlo import RULES, StableHLOUnsupportedError, import_stablehlo
from mlcc.frontend.stablehlo.bytecode import INSTALL_HINT
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Module
from mlcc.hlo.verifier import verify_module

DATA = Path(__file__).resolve().parent.parent / "data" / "stablehlo"
PROGRAMS = sorted(p.name for p in DATA.glob("*.mlir"))
SHARED = ["mlp", "cnn", "attention"]

# (rtol, atol) by output dtype; f16 and bf16 results are checked to the ulp (assert_half_exact)
TOLERANCE = {"f64": (1e-4, 1e-5), "f32": (1e-4, 1e-5)}



def reference_for(name: str) -> Path:
    base = name.split(".")[0]
    if base.startswith("model_"):
        return SHARED_MODELS / f"{base[len('model_'):]}.stablehlo.ref.npz"
    return DATA / f"{base}.ref.npz"


def has_evaluator() -> bool:
    return importlib.util.find_spec("mlcc.hlo.evaluator") is not None


def check_outputs(module: Module, reference: Path) -> None:
    """Evaluate with the reference's inputs; every output matches the reference's."""
    if not has_evaluator():
        pytest.skip("mlcc.hlo.evaluator does not exist yet")
    from mlcc.hlo.evaluator import evaluate
    ref = np.load(reference)
    params = module.entry.parameters()
    # npz holds bfloat16 as float32: give each input the dtype the program declares
    inputs = {p.attrs["name"]: ref[p.attrs["name"]].astype(numpy_dtype(p.shape.dtype)) for p in params}
    outputs = evaluate(module, inputs)
    expected = sorted(k for k in ref.files if k.startswith("out"))
    assert sorted(outputs) == expected
    root = module.entry.root
    for k, shape in zip(module.output_names, root.shape.elements):
        got, want = outputs[k], ref[k]
        assert got.shape == want.shape, k
        if shape.dtype == "bf16":
            assert want.dtype == np.float32, k
        else:
            assert want.dtype == numpy_dtype(shape.dtype), k
        if shape.dtype in ("f16", "bf16"):
            assert_half_exact(got, want, shape.dtype, reference.name.split(".")[0], f"{reference.name} {k}")
        elif shape.dtype in TOLERANCE:
            rtol, atol = TOLERANCE[shape.dtype]
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{reference.name} {k}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{reference.name} {k}")


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_matches_jax(name):
    reference = reference_for(name)
    if not reference.exists():
        pytest.skip(f"no reference {reference}")
    module = import_stablehlo(DATA / name)
    verify_module(module)
    check_outputs(module, reference)


@pytest.mark.parametrize("model", SHARED)
def test_shared_model_matches_reference(shared_models, model):
    module = import_stablehlo(shared_models / f"{model}.stablehlo.mlir")
    verify_module(module)
    assert [p.attrs["name"] for p in module.entry.parameters()][:2] == ["arg0", "arg1"]
    assert module.output_names == ["out0"]
    check_outputs(module, shared_models / f"{model}.stablehlo.ref.npz")


def test_conformance_set_covers_the_ops():
    ops = set()
    for name in PROGRAMS:
        text = (DATA / name).read_text()
        words = (w.strip('"') for w in text.replace("(", " ").split())
        ops.update(w for w in words if w.startswith(("stablehlo.", "chlo.")))
    for op in ("constant", "iota", "convert", "bitcast_convert", "select", "clamp", "broadcast_in_dim", "reshape",
               "transpose", "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "reverse",
               "dot_general", "convolution", "reduce", "reduce_window", "gather", "scatter", "while", "compare",
               "sort", "select_and_scatter", "case", "reduce_precision"):
        assert f"stablehlo.{op}" in ops, op
    for op in ("top_k", "lgamma", "digamma", "erf_inv", "next_after", "bessel_i1e", "erfc"):
        assert f"chlo.{op}" in ops, op
    # every op of the StableHLO spec that mlcc imports has a program here (chlo is not the spec: its ops are
    # checked against JAX in tests/frontend/stablehlo/)
    imported = {str(name) for name in RULES.keys() if str(name).startswith("stablehlo.")}
    assert sorted(imported - ops) == []


def test_portable_artifact():
    artifact = DATA / "portable.mlirbc"
    if importlib.util.find_spec("jax") is None:
        with pytest.raises(StableHLOUnsupportedError) as info:
            import_stablehlo(artifact)
        assert INSTALL_HINT in str(info.value)
        return
    module = import_stablehlo(artifact)
    verify_module(module)
    check_outputs(module, DATA / "portable.ref.npz")


@pytest.mark.parametrize("name, message", [
    ("custom_call.mlir", r"stablehlo.custom_call @lapack_dsyevd_ffi \(a symmetric eigendecomposition .*\) \(line \d+\)"),
    ("while_dynamic.mlir", r"while_dynamic.mlir:\d+:\d+: stablehlo.while: the loop condition is not known"),
])
def test_unsupported_programs_are_refused(name, message):
    with pytest.raises(StableHLOUnsupportedError, match=message):
        import_stablehlo(DATA / "unsupported" / name)
