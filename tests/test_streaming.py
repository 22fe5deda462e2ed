"""Running a bundle under a device-memory budget: weights stream from host memory as intent.json plans.

The streamed run must give bit-identical outputs to the unbudgeted one (the same kernels read the same
bytes, only from a staging pool), hold no more device memory than the budget, and never let two copies
whose step intervals overlap share staging bytes.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import mlcc
from mlcc.runtime import BundleError
from mlcc.bundle.memory import footprint, parse_budget
from mlcc.runtime.device import StreamHazardError
from mlcc.runtime.sim import SimDevice
from mlcc.runtime.streaming import WeightStreamer, plan_streaming


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory, shared_models):
    out = tmp_path_factory.mktemp("stream") / "gpt2_tiny"
    mlcc.compile(shared_models / "gpt2_tiny.onnx", out, targets=[])
    z = np.load(shared_models / "gpt2_tiny.ref.npz")
    inputs = {k: z[k] for k in z.files if not k.startswith("out:")}
    expected = {k[4:]: z[k] for k in z.files if k.startswith("out:")}
    return out, inputs, expected


def _manifest_and_intent(bundle):
    return json.loads((bundle / "manifest.json").read_text()), json.loads((bundle / "intent.json").read_text())


@pytest.mark.parametrize("budget", ["80%", "50%"])
def test_streamed_run_is_bit_identical_and_within_budget(gpt2, budget):
    bundle, inputs, expected = gpt2
    full = mlcc.load(bundle).run(inputs)
    exe = mlcc.load(bundle, hbm_budget=budget)
    plan = exe.streamer.plan
    manifest, _ = _manifest_and_intent(bundle)
    assert plan.streamed and plan.device_bytes <= parse_budget(budget, footprint(manifest)) < footprint(manifest)
    got = exe.run(inputs)
    for name in full:
        np.testing.assert_array_equal(got[name], full[name])
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-3, atol=1e-4)
    again = exe.run(inputs)  # the pool is reused run after run
    for name in full:
        np.testing.assert_array_equal(again[name], full[name])


@pytest.mark.parametrize("budget", ["90%", "70%", "50%"])
def test_staging_slots_never_overlap_while_both_are_live(gpt2, budget):
    manifest, intent = _manifest_and_intent(gpt2[0])
    plan = plan_streaming(manifest, intent, parse_budget(budget, footprint(manifest)))
    schedule = manifest["schedule"]
    for step, launch in enumerate(schedule):  # every streamed weight a step reads is fetched for that step
        for arg in launch["args"]:
            if arg in plan.streamed:
                assert any(f.weight == arg and f.use == step for f in plan.fetches), (arg, step)
    for i, a in enumerate(plan.fetches):
        assert 0 <= a.start <= a.use < len(schedule) and a.offset + a.nbytes <= plan.pool_bytes
        for b in plan.fetches[i + 1:]:
            if a.start <= b.use and b.start <= a.use:
                assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset, (a, b)
    assert set(plan.resident) | set(plan.streamed) == {w["name"] for w in manifest["weights"]["tensors"]}


def test_a_budget_too_small_is_a_clear_error(gpt2):
    with pytest.raises(BundleError, match="too small for this bundle: it needs at least"):
        mlcc.load(gpt2[0], hbm_budget=1000)


def test_cli_run_with_a_budget(gpt2, tmp_path):
    from click.testing import CliRunner

    from mlcc.cli import main
    bundle, inputs, expected = gpt2
    np.savez(tmp_path / "in.npz", **inputs)
    r = CliRunner().invoke(main, ["run", str(bundle), "--inputs", str(tmp_path / "in.npz"), "--output",
                                  str(tmp_path / "out.npz"), "--hbm-budget", "60%"])
    assert r.exit_code == 0, r.output
    out = np.load(tmp_path / "out.npz")
    for name, want in expected.items():
        np.testing.assert_allclose(out[name], want, rtol=1e-3, atol=1e-4)


@pytest.mark.gpu
def test_streamed_run_on_cuda_matches(gpt2):
    bundle, inputs, _ = gpt2
    full = mlcc.load(bundle, device="cuda").run(inputs)
    got = mlcc.load(bundle, device="cuda", hbm_budget="50%").run(inputs)
    for name in full:
        np.testing.assert_array_equal(got[name], full[name])


# ---- the CUDA path's streaming on the simulated device (sim:sm_90): copy stream, events, pinned host memory

@pytest.fixture(scope="module")
def gpt2_sm90(tmp_path_factory, shared_models):
    out = tmp_path_factory.mktemp("stream-sim") / "gpt2_tiny"
    mlcc.compile(shared_models / "gpt2_tiny.onnx", out, targets=["sm_90"])
    z = np.load(shared_models / "gpt2_tiny.ref.npz")
    return out, {k: z[k] for k in z.files if not k.startswith("out:")}


@pytest.mark.parametrize("budget", ["80%", "50%"])
def test_streamed_sim_run_is_bit_identical_to_the_unbudgeted_sim_run(gpt2_sm90, budget):
    bundle, inputs = gpt2_sm90
    full = mlcc.load(bundle, device="sim:sm_90").run(inputs)
    exe = mlcc.load(bundle, device="sim:sm_90", hbm_budget=budget)
    assert exe.streamer.plan.streamed and exe.streamer.copy_stream.name == "copy"
    for _ in range(2):  # the pool (and the copy stream's events) are reused run after run
        got = exe.run(inputs)
        for name in full:
            np.testing.assert_array_equal(got[name], full[name])


def test_a_dropped_event_wait_is_a_hazard_naming_the_step_the_buffer_and_the_copy(gpt2_sm90, monkeypatch):
    """The compute stream skips its waits at the first step that reads a streamed weight: the kernel would
    read a staging slot its copy may not have filled yet."""
    bundle, inputs = gpt2_sm90
    exe = mlcc.load(bundle, device="sim:sm_90", hbm_budget="50%")
    step = min(exe.streamer.plan.uses)
    weight = exe.streamer.plan.uses[step][0].weight
    real_wait = WeightStreamer.wait_for_copy

    def wait_for_copy(self, f):
        if f.use != step:
            real_wait(self, f)
    monkeypatch.setattr(WeightStreamer, "wait_for_copy", wait_for_copy)
    kernel = exe.records.schedule[step].kernel
    with pytest.raises(StreamHazardError, match=re.escape(
            f"sim:sm_90: step {step} ({kernel}) reads buffer '{weight}' before the compute stream waited for "
            f"the event of the copy of '{weight}' for step {step} on stream 'copy'")):
        exe.run(inputs)
    monkeypatch.setattr(WeightStreamer, "wait_for_copy", real_wait)
    exe.run(inputs)  # with the waits, the same executable runs


def test_a_copy_that_does_not_wait_for_the_slots_last_reader_is_a_hazard(gpt2_sm90, monkeypatch):
    """The copy stream skips its waits on the compute stream: a copy into a reused staging slot could
    overwrite a weight an earlier step is still reading."""
    bundle, inputs = gpt2_sm90
    exe = mlcc.load(bundle, device="sim:sm_90", hbm_budget="50%")
    fetches = exe.streamer.plan.fetches
    assert any(a.offset == b.offset and a.use < b.start for a in fetches for b in fetches)  # a slot is reused
    device = exe.backend
    real_wait = device.wait
    monkeypatch.setattr(device, "wait", lambda stream, event: None if stream.name == "copy" else real_wait(stream, event))
    with pytest.raises(StreamHazardError, match=r"copy of '.*' for step \d+ on stream 'copy' overwrites the bytes "
                                                r"of buffer '.*' that step \d+ \(.*\) on stream 'compute' uses"):
        exe.run(inputs)


def test_streaming_from_pageable_host_memory_is_a_hazard(gpt2_sm90, monkeypatch):
    bundle, inputs = gpt2_sm90
    monkeypatch.setattr(SimDevice, "pin", lambda self, host: host)  # the weights are never pinned
    exe = mlcc.load(bundle, device="sim:sm_90", hbm_budget="50%")
    with pytest.raises(StreamHazardError, match="reads pageable host memory"):
        exe.run(inputs)
