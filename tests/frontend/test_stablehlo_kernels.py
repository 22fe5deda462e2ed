"""The StableHLO conformance set and the shared JAX models through the whole compiler: each program
compiled to a bundle and run on CPU by its generated Triton kernels, against JAX's outputs."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from half_ulp import assert_half_exact
from mlcc_test_paths import SHARED_MODELS

import mlcc
from mlcc.frontend.stablehlo import import_stablehlo

DATA = Path(__file__).resolve().parent.parent / "data" / "stablehlo"
CASES = sorted(p.name for p in DATA.glob("*.mlir") if p.name.count(".") == 1 and not p.name.startswith("model_"))
TOLERANCE = {"float64": (1e-4, 1e-5), "float32": (1e-3, 1e-4)}
HALF = {"float16": "f16", "bfloat16": "bf16"}


def _run(mlir: Path, ref: Path, out: Path) -> None:
    r = mlcc.compile(mlir, out, targets=[])
    z = np.load(ref)
    exe = mlcc.load(out)
    inputs: dict[str, np.ndarray] = {}
    for spec in r.manifest["inputs"]:
        arr = z[spec["name"]]
        # npz files hold bfloat16 inputs as float32
        inputs[spec["name"]] = arr.astype(ml_dtypes.bfloat16 if spec["numpy_dtype"] == "bfloat16" else spec["numpy_dtype"])
    got = exe.run(inputs)
    for name in sorted(k for k in z.files if k.startswith("out")):
        want = z[name]
        have = got[name]
        assert have.shape == want.shape, name
        if str(have.dtype) in HALF:
            # computed in f32 and rounded once, as XLA does: 0 ulp from JAX's result
            assert_half_exact(have, want, HALF[str(have.dtype)], mlir.name.split(".")[0], name)
        elif have.dtype.kind in "fV":
            rtol, atol = TOLERANCE.get(str(have.dtype), (1e-3, 1e-4))
            np.testing.assert_allclose(have.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(have, want.astype(have.dtype), err_msg=name)


@pytest.mark.parametrize("model", ["mlp", "cnn", "attention"])
def test_shared_jax_model_bundle_matches_jax(tmp_path, model):
    _run(SHARED_MODELS / f"{model}.stablehlo.mlir", SHARED_MODELS / f"{model}.stablehlo.ref.npz", tmp_path / "b")


@pytest.mark.parametrize("case", CASES)
def test_conformance_case_through_generated_kernels(tmp_path, case):
    mlir = DATA / case
    import_stablehlo(mlir)  # a parse problem reports as such, before the compile
    _run(mlir, DATA / f"{case.split('.')[0]}.ref.npz", tmp_path / "b")
