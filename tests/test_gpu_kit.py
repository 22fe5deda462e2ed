"""The GPU kit (benchmarks/gpu_check.py, `make gpu-check`) runs end to end without a GPU: simulated, with tiny
sizes, so that the rare run on a lent GPU finds a kit that works. And the export it benchmarks builds every
tensor on the model's device (the meta device stands in for CUDA)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mlcc_test_paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import gpu_check  # noqa: E402

SIM_DEVICE = ["--device", "sim:sm_90"]  # the CUDA path's launch configs and streaming, run under the interpreter


def test_gpt2_builds_its_tensors_on_the_inputs_device():
    """benchmarks/gpu.py's first eager timing crashed: pos and causal were made on the CPU inside forward."""
    torch = pytest.importorskip("torch")
    from gpt2_export import GPT2
    model = GPT2(64, 16, 32, 1, 2).eval().to("meta")
    ids = torch.zeros(2, 8, dtype=torch.long, device="meta")
    assert model(ids).shape == (2, 8, 64) and model(ids).device.type == "meta"
    past = [torch.zeros(2, 2, 3, 16, device="meta")] * 2
    logits, k, v = model(ids, *past)
    assert k.shape == (2, 2, 11, 16) and logits.device.type == "meta"


@pytest.fixture(scope="module")
def sim_kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check")
    code = gpu_check.main(["--sim", *SIM_DEVICE, "--out", str(out)])
    return code, json.loads((out / "gpu_check.json").read_text()), (out / "gpu_check.md").read_text(), out


def test_the_simulated_kit_runs_every_stage(sim_kit):
    code, report, _, out = sim_kit
    failed = {n: st.get("error") or st.get("failures") for n, st in report["stages"].items() if st["status"] != "passed"}
    assert code == 0 and not failed, failed
    assert list(report["stages"]) == list(gpu_check.STAGES)
    assert report["simulated"] is True and "means nothing" in report["note"]
    env = report["stages"]["env"]
    assert env["target"] == "sm_90" and {"torch", "triton", "mlcc", "onnx"} <= set(env["versions"])
    assert all(isinstance(st["elapsed_s"], float) and st["budget_s"] > 0 for st in report["stages"].values())
    assert sum(gpu_check.BUDGETS.values()) <= 20 * 60   # the kit's stages fit in 20 minutes on an H100
    assert report["stages"]["pytest"]["returncode"] in (0, 5) and "-m gpu" in report["stages"]["pytest"]["command"]


def test_the_simulated_kit_measures_what_the_gpu_kit_measures(sim_kit):
    _, report, _, out = sim_kit
    rows = report["stages"]["benchmark"]["rows"]
    assert {(r["precision"], r["batch"]) for r in rows} == {(p, b) for p in gpu_check.SIM_SIZES.precisions
                                                            for b in gpu_check.SIM_SIZES.batches}
    for r in rows:
        assert r["mlcc_ms"] > 0 and r["eager_ms"] > 0 and r["torch_compile_ms"] > 0
        assert r["max_abs_err_vs_eager"] < (5e-2 if r["precision"] == "fp16" else 1e-3)   # mlcc computes GPT-2
    kernels = report["stages"]["tune"]["kernels"]
    assert kernels and {k["template"] for k in kernels} >= {"matmul.py.jinja"}
    assert all(k["heuristic_us"] is not None and k["best_us"] <= k["heuristic_us"] for k in kernels)
    assert (out / "tuning.yaml").exists()
    tuned = report["stages"]["tuned"]["rows"]
    assert tuned and all(r["tuned"] and r["untuned_mlcc_ms"] > 0 for r in tuned)
    assert report["stages"]["streaming"]["bit_identical"] is True
    micro = report["stages"]["microbench"]
    assert micro["gemm"]["mlcc_tflops"] > 0 and micro["gemm"]["measured_peak_tflops"] > 0
    assert micro["copy"]["kernel_gb_s"] > 0 and micro["copy"]["measured_gb_s"] > 0


def test_the_simulated_report_says_its_timings_mean_nothing(sim_kit):
    _, report, md, _ = sim_kit
    assert md.startswith("# mlcc GPU kit: simulated sm_90")
    assert gpu_check.SIM_NOTE in md
    for stage in gpu_check.STAGES:
        assert f"| {stage} | passed" in md
    assert "GPT-2 benchmark" in md and "mlcc tune" in md and "hbm_budget" in md and "GEMM" in md


def test_a_failing_stage_is_reported_and_the_kit_goes_on(tmp_path):
    """streaming without the benchmark's bundle fails; env after it still runs; the kit exits 1."""
    code = gpu_check.main(["--sim", *SIM_DEVICE, "--out", str(tmp_path), "--stages", "streaming,env"])
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert code == 1
    assert report["stages"]["streaming"]["status"] == "failed"
    assert "benchmark stage did not build one" in report["stages"]["streaming"]["error"]
    assert report["stages"]["env"]["status"] == "passed"
    assert "| streaming | failed: RuntimeError" in (tmp_path / "gpu_check.md").read_text()


def test_a_stage_after_the_time_limit_is_skipped(tmp_path):
    assert gpu_check.main(["--sim", *SIM_DEVICE, "--out", str(tmp_path), "--stages", "env",
                           "--time-limit", "0"]) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["stages"]["env"] == {"budget_s": gpu_check.BUDGETS["env"], "status": "skipped",
                                       "reason": "the kit's time limit was reached"}


def test_without_a_gpu_the_real_kit_exits_69(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert gpu_check.main(["--out", str(tmp_path)]) == 69
    assert not (tmp_path / "gpu_check.json").exists()


def test_make_gpu_check_runs_the_kit_simulated_with_sim_1():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sim = subprocess.run(["make", "-n", "-C", str(ROOT), "-o", ".venv/.installed-stamp", "gpu-check", "SIM=1"],
                         capture_output=True, text=True, env=env)
    real = subprocess.run(["make", "-n", "-C", str(ROOT), "-o", ".venv/.installed-stamp", "gpu-check"],
                          capture_output=True, text=True, env=env)
    assert sim.returncode == 0 and real.returncode == 0, sim.stderr + real.stderr
    assert "benchmarks/gpu_check.py" in sim.stdout and "--sim --device sim:sm_90" in sim.stdout
    assert "benchmarks/gpu_check.py" in real.stdout and "--sim" not in real.stdout
