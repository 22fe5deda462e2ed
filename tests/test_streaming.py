"""Running a bundle under a device-memory budget: the residency engine (the simulator's) moves the weights.

The budgeted run must give bit-identical outputs to the unbudgeted one (the same kernels read the same
bytes, only from allocations the engine manages), never hold more item bytes than the budget leaves after
the fixed ones, and copy exactly the bytes the simulator counts for the same policy.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlcc
from mlcc.bundle.memory import footprint, parse_budget
from mlcc.runtime import BundleError
from mlcc.runtime.device import StreamHazardError
from mlcc.runtime.policies import BASELINES
from mlcc.runtime.sim import SimDevice
from mlcc.runtime.simulate import load_models, simulate
from mlcc.runtime.streaming import ItemStore
from mlcc.runtime.workload import Workload


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
    engine = exe.streamer.store.engine
    manifest, _ = _manifest_and_intent(bundle)
    assert engine.work.footprint() == footprint(manifest)  # one footprint: what mlcc.load allocates
    got = exe.run(inputs)
    for name in full:
        np.testing.assert_array_equal(got[name], full[name])
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-3, atol=1e-4)
    again = exe.run(inputs)  # the items are moved run after run
    for name in full:
        np.testing.assert_array_equal(again[name], full[name])
    assert exe.streamer.store.copied_bytes > 0
    assert engine.work.fixed + engine.stats.peak_resident <= parse_budget(budget, footprint(manifest))


@pytest.mark.parametrize("policy", ["intent", *BASELINES])
def test_runtime_copies_the_bytes_the_simulator_counts(gpt2, policy):
    """Counted in the runtime, from the copies it makes; simulated by a separate engine over a workload built
    from the bundle's files."""
    bundle, inputs, expected = gpt2
    exe = mlcc.load(bundle, hbm_budget="60%", policy=policy)
    for _ in range(3):
        got = exe.run(inputs)
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-3, atol=1e-4)
    work = Workload(load_models([bundle], [bundle.name]))
    for _ in range(3):
        work.add_call(bundle.name)
    sim = simulate(work, "60%", policy)
    assert exe.streamer.store.copied_bytes == sim.bytes_moved > 0
    assert exe.streamer.store.preload_bytes == sim.preload_bytes


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
    assert exe.streamer.store.copy_stream.name == "copy"
    for _ in range(2):  # the pool (and the copy stream's events) are reused run after run
        got = exe.run(inputs)
        for name in full:
            np.testing.assert_array_equal(got[name], full[name])


def test_a_dropped_event_wait_is_a_hazard_naming_the_step_the_buffer_and_the_copy(gpt2_sm90, monkeypatch):
    """The compute stream skips its waits for the weights' copies: a kernel would read bytes a copy may not
    have written yet (a wait for a later copy on the same stream would cover an earlier one, so all are
    skipped)."""
    bundle, inputs = gpt2_sm90
    exe = mlcc.load(bundle, device="sim:sm_90", hbm_budget="50%")
    real_wait = ItemStore.wait_for_copy
    monkeypatch.setattr(ItemStore, "wait_for_copy", lambda self, key, ev: None)
    with pytest.raises(StreamHazardError, match=r"reads buffer '(.*)' before the compute stream waited for the "
                                                r"event of the copy of '.*:w:\1' on stream 'copy'"):
        exe.run(inputs)
    monkeypatch.setattr(ItemStore, "wait_for_copy", real_wait)
    assert exe.streamer.store.pending  # the copies whose waits were skipped


def test_streaming_from_pageable_host_memory_is_a_hazard(gpt2_sm90, monkeypatch):
    bundle, inputs = gpt2_sm90
    monkeypatch.setattr(SimDevice, "pin", lambda self, host: host)  # the weights are never pinned
    with pytest.raises(StreamHazardError, match="reads pageable host memory"):  # at load: the first placement
        mlcc.load(bundle, device="sim:sm_90", hbm_budget="50%").run(inputs)


def test_a_trace_with_a_budget_drop_on_sim_copies_what_the_simulator_counts(gpt2_sm90):
    """The CUDA path's streams and events (simulated), several calls, the budget cut mid-trace."""
    from mlcc.runtime.session import Session
    from mlcc.runtime.simulate import simulate_bundles
    from mlcc.runtime.traces import parse_trace
    bundle, inputs = gpt2_sm90
    full = mlcc.load(bundle, device="sim:sm_90").run(inputs)
    trace = parse_trace({"version": 1, "models": ["lm"], "events": [
        {"call": "lm", "repeat": 2}, {"budget": "55%"}, {"call": "lm", "repeat": 2}]})
    session = Session({"lm": bundle}, device="sim:sm_90", hbm_budget="80%", policy="intent", trace=trace)
    for _ in range(4):
        got = session.call("lm", inputs)
        for name in full:
            np.testing.assert_array_equal(got[name], full[name])
    sim = simulate_bundles([bundle], trace, "80%", ["intent"], bound=False)
    assert session.copied_bytes == sim["policies"]["intent"]["bytes_moved"] > 0
