"""--precision fp16|bf16: weights stored in the half type, activations computed in it, f32 accumulation."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlcc

# Relative RMSE of the whole model's output against the fp32 reference: the half types' unit
# roundoff (2^-11, 2^-8) times a small factor for the depth of these models.
LIMITS = {"fp16": 3e-3, "bf16": 4e-2}


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("name", ["mlp", "convnet"])
def test_reduced_precision_bundles_match_the_fp32_reference(tmp_path, shared_models, precision, name):
    z = np.load(shared_models / f"{name}.ref.npz")
    inputs = {k: z[k] for k in z.files if not k.startswith("out:")}
    r = mlcc.compile(shared_models / f"{name}.onnx", tmp_path / "b", targets=[], precision=precision,
                     check_numerics=True)
    half = {"fp16": "float16", "bf16": "bfloat16"}[precision]
    weights = r.manifest["weights"]["tensors"]
    assert weights and all(w["numpy_dtype"] == half for w in weights if w["dtype"] in ("f16", "bf16", "f32"))
    assert {i["numpy_dtype"] for i in r.manifest["inputs"]} == {"float32"}  # the interface is unchanged
    got = mlcc.load(tmp_path / "b").run(inputs)
    for k in z.files:
        if k.startswith("out:"):
            want, have = z[k], got[k[4:]]
            assert have.dtype == np.float32
            rel = np.sqrt(np.mean((have - want) ** 2)) / np.sqrt(np.mean(want ** 2))
            assert rel < LIMITS[precision], (k, rel)
            assert rel > 0  # really computed in the half type, not silently in f32
    hlo = (tmp_path / "b" / "model.hlo").read_text()
    assert ("f16[" if precision == "fp16" else "bf16[") in hlo
    json.loads((tmp_path / "b" / "intent.json").read_text())
