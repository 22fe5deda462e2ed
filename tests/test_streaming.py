"""Running a bundle under a device-memory budget: weights stream from host memory as intent.json plans.

The streamed run must give bit-identical outputs to the unbudgeted one (the same kernels read the same
bytes, only from a staging pool), hold no more device memory than the budget, and never let two copies
whose step intervals overlap share staging bytes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlcc
from mlcc.runtime import BundleError
from mlcc.bundle.memory import footprint, parse_budget
from mlcc.runtime.streaming import plan_streaming


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
