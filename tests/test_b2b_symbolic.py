"""Back-to-back GEMM kernels over symbolic rows (issue 24), and `mlcc tune` of b2b kernels.

A model compiled with a symbolic batch or sequence (no --shape: planned at DEFAULT_SIZE, any size at run time;
or a range) keeps its FFN's two GEMMs in one b2b kernel, whose grid and row masks come from the run-time row
count. References: onnxruntime on the same model and inputs, the static build's launch count, the tuning
database's entries as written by `mlcc tune`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml

import mlcc
from mlcc.hlo.symbolic import DEFAULT_SIZE
from mlcc_test_paths import ROOT, SHARED_MODELS

GPT2_DYN = SHARED_MODELS / "gpt2_dyn_tiny.onnx"   # input_ids [1, seq]; 64 positions


def _ort(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _b2b_launches(manifest: dict) -> list[dict]:
    templates = {k["name"]: k["template"] for k in manifest["kernels"]}
    return [s for s in manifest["schedule"] if templates[s["kernel"]] == "b2b.py.jinja"]


@pytest.fixture(scope="module")
def unranged(tmp_path_factory):
    """gpt2_dyn_tiny compiled with seq left open (planned at DEFAULT_SIZE, any length at run time)."""
    return mlcc.compile(GPT2_DYN, tmp_path_factory.mktemp("unranged") / "b", targets=[], quiet=True)


def test_a_symbolic_gpt2_takes_b2b_and_launches_as_many_kernels_as_the_static_build(unranged, tmp_path):
    static = mlcc.compile(GPT2_DYN, tmp_path / "s", targets=[], shapes={"seq": [16]}, quiet=True)
    ranged = mlcc.compile(GPT2_DYN, tmp_path / "r", targets=[], shapes={"seq": "1..64"}, quiet=True)
    want = len(static.manifest["schedule"])
    assert len(_b2b_launches(static.manifest)) == 2   # one MLP per layer, both builds
    for m in (unranged.manifest, ranged.manifest):
        assert len(m["schedule"]) == want
        b2b = _b2b_launches(m)
        assert len(b2b) == 2 and all(s["scalars"] == ["seq"] for s in b2b)
        # the grid is the runtime's expression of the row count, not a number fixed at the planned size
        assert all(isinstance(s["grid"][0], str) and "seq" in s["grid"][0] for s in b2b)


@pytest.mark.parametrize("seq", [1, 7, 64])
def test_symbolic_b2b_matches_onnxruntime_below_at_and_above_the_planned_size(unranged, seq):
    # 64 > DEFAULT_SIZE: more row tiles than the tiles were chosen for
    assert DEFAULT_SIZE < 64
    ids = np.random.default_rng(seq).integers(0, 1000, (1, seq)).astype(np.int64)
    (want,) = _ort(GPT2_DYN, {"input_ids": ids})
    got = mlcc.load(unranged.out_dir).run({"input_ids": ids})["logits"]
    assert got.shape == (1, seq, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


@pytest.fixture(scope="module")
def batch_mlp(tmp_path_factory):
    """The shared mlp with its batch dim symbolic: its first two GEMMs a b2b kernel, its third a matmul one."""
    model = onnx.load(SHARED_MODELS / "mlp.onnx")
    for v in list(model.graph.input) + list(model.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    path = tmp_path_factory.mktemp("mlp") / "mlp_batch.onnx"
    onnx.save(model, path)
    return path, model.graph.input[0].name, model.graph.output[0].name


def _feeds(name: str, batch: int) -> dict:
    return {name: np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, env=env)


def _by_signature(manifest: dict) -> dict[str, dict]:
    return {k["signature"]: k for k in manifest["kernels"]}


def test_tune_on_sim_sm90_writes_a_b2b_entry_that_the_compile_then_uses(batch_mlp, tmp_path):
    """`mlcc tune --device sim:sm_90` times the b2b kernel's candidates too and writes its entry; the compile
    with that database passes --require-tuned (which counts the b2b kernel: without the database it fails on
    it), its bundle differs from the heuristic's only in the tuned configs, and it still matches onnxruntime on
    sim:sm_90, at the planned size and above it."""
    path, x, y = batch_mlp
    db = tmp_path / "tuning.yaml"
    r = run_cli("tune", str(path), "--db", str(db), "--device", "sim:sm_90", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    entries = yaml.safe_load(db.read_text())["kernels"]
    assert sorted(e["template"] for e in entries.values()) == ["b2b.py.jinja", "matmul.py.jinja"]
    b2b_sig = next(s for s, e in entries.items() if e["template"] == "b2b.py.jinja")
    entry = entries[b2b_sig]["targets"]["sm_90"]
    assert set(entry["constexprs"]) == {"BLOCK_M", "BLOCK_H", "BLOCK_N", "BLOCK_K"}

    r = run_cli("compile", str(path), "-o", str(tmp_path / "untuned"), "--target", "sm_90", "--require-tuned")
    assert r.returncode == 69 and f"(b2b.py.jinja) on sm_90, signature {b2b_sig}" in r.stderr, r.stderr

    plain = mlcc.compile(path, tmp_path / "plain", targets=["sm_90"], quiet=True, cache_dir="")
    tuned = mlcc.compile(path, tmp_path / "tuned", targets=["sm_90"], tuning_db=str(db), require_tuned=True,
                         quiet=True, cache_dir="")
    before, after = _by_signature(plain.manifest), _by_signature(tuned.manifest)
    assert sorted(before) == sorted(after) and b2b_sig in after
    for sig, k in after.items():
        b = k["binaries"]["sm_90"]
        assert b["config_from"] == "tuning-db"
        config = b["config"]
        assert config["constexprs"] == entries[sig]["targets"]["sm_90"]["constexprs"]
        assert (config["num_warps"], config["num_stages"]) == (entries[sig]["targets"]["sm_90"]["num_warps"],
                                                               entries[sig]["targets"]["sm_90"]["num_stages"])
        old = before[sig]
        # the same code (named by its content, configs included), the same portable and interpreter configs
        assert (tuned.out_dir / k["source"]).read_text().replace(k["name"], "K") == \
            (plain.out_dir / old["source"]).read_text().replace(old["name"], "K")
        assert (k["template"], k["gpu"], k["interpreter"]) == (old["template"], old["gpu"], old["interpreter"])
    b2b = after[b2b_sig]["binaries"]["sm_90"]["config"]
    assert "batch" in b2b["grid"][0]   # a tuned config of symbolic rows keeps the run-time grid
    exe = mlcc.load(tuned.out_dir, device="sim:sm_90")
    for batch in (3, DEFAULT_SIZE + 8):
        feeds = _feeds(x, batch)
        np.testing.assert_allclose(exe.run(feeds)[y], _ort(path, feeds)[0], rtol=1e-4, atol=1e-5)
