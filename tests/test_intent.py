"""intent.json and the memory plan, checked against the schedule they describe; simulate's policies."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import mlcc
from mlcc.bundle.schemas import load_schema
from mlcc.runtime.policies import BASELINES
from mlcc.runtime.simulate import BudgetError, repeat_trace, simulate_bundles

ROOT_MODELS = ["bert_tiny", "gpt2_tiny", "convnet_noopt"]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, shared_models):
    root = tmp_path_factory.mktemp("intent")
    out = {n: mlcc.compile(shared_models / f"{n}.onnx", root / n, targets=[]).out_dir for n in ROOT_MODELS}
    out["gpt2_kv_tiny"] = mlcc.compile(Path(__file__).parent.parent / "examples" / "models" / "gpt2_kv_tiny.onnx", root / "kv", targets=[]).out_dir
    return out


def _load(d):
    return json.loads((d / "manifest.json").read_text()), json.loads((d / "intent.json").read_text())


@pytest.mark.parametrize("name", ROOT_MODELS + ["gpt2_kv_tiny"])
def test_intent_validates_and_agrees_with_the_schedule(bundles, name):
    manifest, intent = _load(bundles[name])
    jsonschema.validate(intent, load_schema("intent"))
    entries = {b["name"]: b for b in intent["buffers"]}
    assert set(entries) == set(manifest["buffers"])
    uses: dict[str, list[int]] = {}
    for s in manifest["schedule"]:
        for a in s["args"]:
            uses.setdefault(a, [])
            if not uses[a] or uses[a][-1] != s["step"]:
                uses[a].append(s["step"])
    n = len(manifest["schedule"])
    for bname, e in entries.items():
        assert e["uses"] == uses.get(bname, []), bname
        gaps = [q - p for p, q in zip(e["uses"], e["uses"][1:])]
        if e["tensor_class"] in ("WEIGHT", "CONSTANT", "KV_CACHE") and e["uses"]:
            gaps.append(n - e["uses"][-1] + e["uses"][0])
        assert e["reuse_horizon"] == (min(gaps) if gaps else None), bname
        assert e["first_step"] == (min(e["uses"]) if e["uses"] else 0)
        if e["tensor_class"] == "OUTPUT":
            assert e["fallback_policy"] == "NONE"


@pytest.mark.parametrize("name", ROOT_MODELS + ["gpt2_kv_tiny"])
def test_arena_near_lower_bound_and_only_in_place_pairs_share_bytes(bundles, name):
    manifest, _ = _load(bundles[name])
    mp = manifest["memory_plan"]
    bufs = mp["buffers"]
    for i, a in enumerate(bufs):
        for b in bufs[i + 1:]:
            if a["first_step"] <= b["last_step"] and b["first_step"] <= a["last_step"]:
                apart = a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"]
                in_place = (b.get("in_place_of") == a["name"] and a["last_step"] == b["first_step"]) or (
                    a.get("in_place_of") == b["name"] and b["last_step"] == a["first_step"])
                assert apart or in_place, (a["name"], b["name"])
                if in_place:
                    assert a["offset"] == b["offset"]
    assert mp["arena_bytes"] <= 1.05 * mp["lower_bound_bytes"] + mp["alignment"]


def test_kv_cache_is_recognized_with_token_ranges(bundles):
    manifest, intent = _load(bundles["gpt2_kv_tiny"])
    kv = [b for b in intent["buffers"] if b["tensor_class"] == "KV_CACHE"]
    inputs = {i["buffer"]: i["name"] for i in manifest["inputs"]}
    outputs = {o["buffer"]: o["name"] for o in manifest["outputs"]}
    past = sorted(inputs[b["name"]] for b in kv if b["name"] in inputs)
    present = sorted(outputs[b["name"]] for b in kv if b["name"] in outputs)
    assert past == sorted(f"past_{kv}_{i}" for kv in ("key", "value") for i in range(2))
    assert present == sorted(f"present_{kv}_{i}" for kv in ("key", "value") for i in range(2))
    for b in kv:
        assert b["token_range"] == ([0, 12] if b["name"] in inputs else [0, 16])
        layer = int((inputs.get(b["name"]) or outputs[b["name"]])[-1])
        assert b["layer_range"][0] <= layer <= b["layer_range"][1]


def test_prefetches_start_early_enough_under_the_device_model(bundles):
    _, intent = _load(bundles["gpt2_tiny"])
    sec = intent["step_seconds"]
    n = intent["steps"]
    link = intent["device_model"]["host_link_bandwidth"]
    entries = {b["name"]: b for b in intent["buffers"]}
    assert intent["prefetch"]
    for p in intent["prefetch"]:
        for name in p["buffers"]:
            b = entries[name]
            assert b["tensor_class"] in ("WEIGHT", "CONSTANT", "KV_CACHE") and b["producer"] is None
            use = min((u for u in b["uses"] if u >= p["step"]), default=b["uses"][0] + n)
            window = sum(sec[s % n] for s in range(p["step"], use))
            # enough compute to hide the transfer, or all the compute there is since its previous use
            assert window >= b["bytes"] / link or (len(b["uses"]) == 1 and use - p["step"] == n - 1)


@pytest.mark.parametrize("name", ["bert_tiny", "gpt2_tiny"])
@pytest.mark.parametrize("budget", ["50%", "70%", "90%"])
def test_intent_is_never_worse_than_the_best_baseline_by_more_than_5_percent(bundles, name, budget):
    """Every model and budget that can run (a budget below one step's needs is an error for every policy), and
    the lower bound under every policy."""
    try:
        r = simulate_bundles([bundles[name]], repeat_trace(bundles[name].name, 4), budget)
    except BudgetError as e:
        assert "one step needs" in str(e)
        return
    p = r["policies"]
    assert r["lower_bound_bytes"] <= min(x["bytes_moved"] for x in p.values())
    assert p["intent"]["bytes_moved"] <= 1.05 * min(p[b]["bytes_moved"] for b in BASELINES)
    assert p["intent"]["stall_seconds"] <= 1.05 * min(p[b]["stall_seconds"] for b in BASELINES)
