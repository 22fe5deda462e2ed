"""Sessions: bundles sharing one device under one budget, replaying a trace, requests' KV caches kept between
calls. The outputs are checked against onnxruntime (each request's caches carried by hand), and the bytes the
runtime copies (counted in the runtime, from its copies) against the simulator's count for the same policy.

tests/data/kv/gpt2_kv_dyn_tiny.onnx (a 2-layer decoder, past length symbolic; not in tests/data/models, whose
every model the zoo tests compile without sizes for its symbols) is made with

    python tools/gpt2_export.py tests/data/kv/gpt2_kv_dyn_tiny.onnx --kv-cache --dynamic --layers 2 \\
        --embd 32 --heads 2 --vocab 256 --positions 64 --seq 1 --past 4
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import yaml
from click.testing import CliRunner

import mlcc
from mlcc.cli import main
from mlcc.runtime.session import Session
from mlcc.runtime.simulate import simulate_bundles
from mlcc.runtime.traces import TraceError, load_trace, parse_trace

KV = Path(__file__).parent.parent / "data" / "kv" / "gpt2_kv_dyn_tiny.onnx"
CACHES = ["past_key_0", "past_value_0", "past_key_1", "past_value_1"]

TRACE = {"version": 1, "models": ["lm", "dec"], "budget": "60%", "events": [
    {"call": "dec", "request": "a", "repeat": 2},
    {"call": "lm"},
    {"call": "dec", "request": "b"},
    {"call": "dec", "request": "a"},
    {"budget": "45%"},
    {"call": "dec", "request": "b", "last": True},
    {"call": "lm"},
    {"call": "dec", "request": "a", "last": True}]}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, shared_models):
    root = tmp_path_factory.mktemp("session")
    dec = mlcc.compile(KV, root / "dec", targets=[], shapes={"seq": [1], "past": "0..63"}).out_dir
    lm = mlcc.compile(shared_models / "gpt2_tiny.onnx", root / "lm", targets=[]).out_dir
    z = np.load(shared_models / "gpt2_tiny.ref.npz")
    lm_inputs = {k: z[k] for k in z.files if not k.startswith("out:")}
    return {"lm": lm, "dec": dec}, lm_inputs, shared_models / "gpt2_tiny.onnx"


def test_the_sidecar_pairs_each_past_cache_with_the_present_that_extends_it(bundles):
    dec = bundles[0]["dec"]
    manifest = json.loads((dec / "manifest.json").read_text())
    intent = json.loads((dec / "intent.json").read_text())
    inputs = {i["buffer"]: i["name"] for i in manifest["inputs"]}
    outputs = {o["buffer"]: o["name"] for o in manifest["outputs"]}
    pairs = sorted((inputs[k["past"]], outputs[k["present"]], k["bytes_per_token"], k["past_tokens"], k["present_tokens"],
                    k["layer"]) for k in intent["kv_caches"])
    # [1, heads=2, tokens, head_dim=16] float32: 128 bytes a token
    assert pairs == sorted((f"past_{kv}_{i}", f"present_{kv}_{i}", 128, "past", "past+1", i)
                           for kv in ("key", "value") for i in range(2))


@pytest.mark.parametrize("policy", ["intent", "lru"])
def test_replay_matches_onnxruntime_and_copies_what_the_simulator_counts(bundles, policy):
    paths, lm_inputs, lm_onnx = bundles
    trace = parse_trace(TRACE)
    session = Session({"lm": paths["lm"], "dec": paths["dec"]}, hbm_budget=trace.budget, policy=policy, trace=trace)
    dec_ref, lm_ref = ort.InferenceSession(str(KV)), ort.InferenceSession(str(lm_onnx))
    rng = np.random.default_rng(0)
    caches: dict[str, list[np.ndarray]] = {}
    for e in trace.events:
        if isinstance(e, tuple):
            continue
        if e.model == "lm":
            got = session.call("lm", lm_inputs)
            want = lm_ref.run(None, lm_inputs)[0]
            np.testing.assert_allclose(got[session.executables["lm"].output_names[0]], want, rtol=1e-3, atol=1e-4)
            continue
        ids = rng.integers(0, 256, (1, 1))
        got = session.call("dec", {"input_ids": ids}, e.request)
        assert set(got) == {"logits"}  # the present caches stay with the session
        feeds = {"input_ids": ids.astype(np.int64)}
        feeds.update(zip(CACHES, caches.get(e.request) or [np.zeros((1, 2, 0, 16), np.float32)] * 4))
        want = dec_ref.run(None, feeds)
        caches[e.request] = want[1:]
        np.testing.assert_allclose(got["logits"], want[0], rtol=1e-4, atol=1e-5)
    sim = simulate_bundles([paths["lm"], paths["dec"]], trace, trace.budget, [policy])
    assert session.copied_bytes == sim["policies"][policy]["bytes_moved"] > 0
    assert session.store.preload_bytes == sim["policies"][policy]["preload_bytes"]
    assert sim["lower_bound_bytes"] <= session.copied_bytes


def test_cli_simulate_and_run_a_trace(bundles, tmp_path):
    paths = bundles[0]
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(TRACE))
    r = CliRunner().invoke(main, ["simulate", "--trace", str(path), str(paths["lm"]), str(paths["dec"]), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert set(out["policies"]) == {"intent", "lru", "static", "fnu", "oracle"}
    assert all(out["lower_bound_bytes"] <= p["bytes_moved"] for p in out["policies"].values())
    r = CliRunner().invoke(main, ["run", "--trace", str(path), str(paths["lm"]), str(paths["dec"]), "--policy", "fnu",
                                  "--json"])
    assert r.exit_code == 0, r.output
    run = json.loads(r.output)
    assert run["copied_bytes"] == run["simulated_bytes"] == out["policies"]["fnu"]["bytes_moved"]


def test_a_bad_trace_is_one_line_naming_the_file_and_the_event(bundles, tmp_path):
    paths = bundles[0]
    bad = dict(TRACE, events=[{"call": "dec", "request": "a"}, {"call": "encoder"}])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(TraceError, match=r"bad.yaml: event 1: model 'encoder' is not in 'models'"):
        load_trace(path)
    r = CliRunner().invoke(main, ["simulate", "--trace", str(path), str(paths["lm"]), str(paths["dec"])])
    assert r.exit_code == 65 and "event 1" in r.output and "Traceback" not in r.output


def test_shipped_traces_parse():
    for path in sorted((Path(__file__).parent.parent.parent / "examples" / "traces").glob("*.yaml")):
        trace = load_trace(path)
        assert trace.calls() > 100, path


def test_shipped_traces_follow_the_schema():
    import jsonschema

    from mlcc.bundle.schemas import load_schema
    for path in sorted((Path(__file__).parent.parent.parent / "examples" / "traces").glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), load_schema("trace"))
    jsonschema.validate(TRACE, load_schema("trace"))
