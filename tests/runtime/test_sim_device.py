"""The simulated CUDA device (mlcc/runtime/sim.py): the device guard, reduced-precision builds on sim:sm_90
(the binaries' own constexprs, so the bf16 matmul branch runs), and how a sim device spec is read."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

import mlcc
from mlcc.bundle.errors import UnsupportedError
from mlcc.cli import main
from mlcc.runtime.cuda import CudaDevice
from mlcc.runtime.device import DeviceGuardError
from mlcc.runtime.sim import SimDevice, current_device
from mlcc_test_paths import SHARED_MODELS

GPT2 = SHARED_MODELS / "gpt2_tiny.onnx"


def _feeds():
    z = np.load(SHARED_MODELS / "gpt2_tiny.ref.npz")
    return {k: z[k] for k in z.files if not k.startswith("out:")}, z["out:logits"]


@pytest.fixture(scope="module")
def gpt2_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim-device") / "gpt2_tiny"
    mlcc.compile(GPT2, out, targets=["sm_80", "sm_90"])
    return out


def test_sim_device_index_launches_under_its_guard(gpt2_bundle):
    inputs, want = _feeds()
    exe = mlcc.load(gpt2_bundle, device="sim:sm_90:1")
    got = exe.run(inputs)["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    assert exe.backend.index == 1 and exe.backend.guard_log and set(exe.backend.guard_log) == {1}
    assert current_device() == 0   # the guard restores the current device


def test_a_dropped_device_guard_is_caught(gpt2_bundle, monkeypatch):
    inputs, _ = _feeds()
    monkeypatch.setattr(SimDevice, "guard", lambda self: contextlib.nullcontext())
    exe = mlcc.load(gpt2_bundle, device="sim:sm_90:1")
    with pytest.raises(DeviceGuardError, match=r"sim:sm_90:1: loading kernel \w+ ran with device 0 current, not 1"):
        exe.run(inputs)


@pytest.mark.parametrize("spec,message", [
    ("sim:sm_75", r"device 'sim:sm_75': the bundle has no binaries for 'sm_75' \(its targets: sm_80, sm_90\)"),
    ("sim:", r"the bundle has no binaries for ''"),
    ("sim:sm_90:x", r"expected sim:TARGET or sim:TARGET:N"),
])
def test_a_sim_device_the_bundle_cannot_run_is_unsupported(gpt2_bundle, spec, message):
    with pytest.raises(UnsupportedError, match=message):
        mlcc.load(gpt2_bundle, device=spec)


def test_the_sim_device_launches_each_binarys_own_constexprs(gpt2_bundle):
    """sm_90's binaries use other tiles than the interpreter config for some kernels: those are what run."""
    exe = mlcc.load(gpt2_bundle, device="sim:sm_90")
    differ = 0
    for launch in exe.records.schedule:
        k = exe._kernels[launch.kernel]
        grid, constexprs = exe.backend.launch_config(k, launch, {})
        assert constexprs == k.binaries["sm_90"].config.constexprs
        assert grid == tuple(k.binaries["sm_90"].config.grid)
        differ += constexprs != k.interpreter.constexprs
    assert differ > 0


@pytest.fixture(scope="module")
def precision_bundles(tmp_path_factory):
    return tmp_path_factory.mktemp("sim-precision")


def _verify(bundle, precision):
    return CliRunner().invoke(main, ["verify", str(GPT2), "--bundle", str(bundle), "--target", "sm_90",
                                     "--precision", precision, "--device", "sim:sm_90"])


def test_fp16_gpt2_tiny_passes_on_sim_sm_90(precision_bundles):
    r = _verify(precision_bundles / "fp16", "fp16")
    assert r.exit_code == 0, r.output


def test_bf16_build_launches_the_bf16_matmul_branch_on_sm_90(precision_bundles):
    """Every matmul and attention kernel of the bf16 build is compiled for sm_90 with DOT_F32=0 (tl.dot on
    bf16 operands), where the interpreter config keeps DOT_F32=1: the simulated device launches the former."""
    bundle = precision_bundles / "bf16"
    _verify(bundle, "bf16")  # compiles it (its outcome: the next test)
    kernels = json.loads((bundle / "manifest.json").read_text())["kernels"]
    dots = [k for k in kernels if "DOT_F32" in k["binaries"]["sm_90"]["config"]["constexprs"]]
    assert len(dots) >= 4
    for k in dots:
        assert k["binaries"]["sm_90"]["config"]["constexprs"]["DOT_F32"] == 0, k["name"]
        assert k["interpreter"]["constexprs"]["DOT_F32"] == 1, k["name"]
    exe = mlcc.load(bundle, device="sim:sm_90")
    launched = {exe.backend.launch_config(exe._kernels[s.kernel], s, {})[1].get("DOT_F32")
                for s in exe.records.schedule}
    assert 0 in launched


def test_bf16_gpt2_tiny_passes_on_sim_sm_90(precision_bundles):
    """The bf16 build's sm_90 binaries take the DOT_F32=0 branch (tl.dot on bf16 tiles), which runs right on CPU
    once the interpreter multiplies bf16 values rather than their bit patterns (mlcc/bundle/interpreter_numerics)."""
    r = _verify(precision_bundles / "bf16", "bf16")
    assert r.exit_code == 0, r.output


@pytest.mark.gpu
def test_cuda_n_launches_on_device_n(gpt2_bundle):
    import torch
    n = torch.cuda.device_count() - 1
    device = CudaDevice(f"cuda:{n}")
    with device.guard():
        assert torch.cuda.current_device() == n
        assert device.compute_stream().handle.device == torch.device(f"cuda:{n}")
    inputs, want = _feeds()
    got = mlcc.load(gpt2_bundle, device=f"cuda:{n}").run(inputs)["logits"]  # with device 0 current
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
