"""mlcc inspect: its numbers are recomputed here from the manifest and the vendors' datasheet figures."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import mlcc
from mlcc.cli import main
from mlcc.hlo.parser import parse_module
from mlcc.inspect import Bundle, layout_conversions, load_bundle, render_text, summarize

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "models"

# Datasheet figures (dense): HBM bytes/s and FP32 FLOP/s.
H100_BW, H100_FP32 = 3.35e12, 66.9e12
A100_BW, A100_FP32 = 2.039e12, 19.5e12


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("inspect") / "mlp"
    mlcc.compile(EXAMPLES / "mlp.onnx", out, targets=[])
    return out


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def _inspect(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["inspect", *args])
    return r.exit_code, r.output


def _expected_kernels(m: dict, bw: float, peak: float) -> dict[str, dict]:
    """Per kernel, from the manifest alone: launches, bytes per launch (its argument buffers), time, bound."""
    sizes = {name: b["bytes"] for name, b in m["buffers"].items()}
    out = {}
    for k in m["kernels"]:
        steps = [s for s in m["schedule"] if s["kernel"] == k["name"]]
        per_launch = {sum(sizes[a] for a in s["args"]) for s in steps}
        assert len(per_launch) == 1, "one kernel, one shape: every launch moves the same bytes"
        nbytes = per_launch.pop()
        compute, memory = k["flops"] / peak, nbytes / bw
        out[k["name"]] = {"launches": len(steps), "bytes": nbytes, "flops": k["flops"],
                          "ai": k["flops"] / nbytes, "seconds": max(compute, memory),
                          "bound": "compute" if compute > memory else "memory"}
    return out


def test_json_numbers_match_the_manifest(bundle):
    code, out = _inspect(str(bundle), "--json", "--device-model", "H100")
    assert code == 0, out
    s = json.loads(out)
    m = _manifest(bundle)
    expected = _expected_kernels(m, H100_BW, H100_FP32)
    assert {k["name"] for k in s["kernels"]} == set(expected)
    for k in s["kernels"]:
        e = expected[k["name"]]
        assert k["launches"] == e["launches"]
        assert k["flops"] == e["flops"]
        assert k["bytes"] == e["bytes"]
        assert k["arithmetic_intensity"] == pytest.approx(e["ai"])
        assert k["seconds"] == pytest.approx(e["seconds"], rel=1e-9)
        assert k["total_seconds"] == pytest.approx(e["seconds"] * e["launches"], rel=1e-9)
        assert k["bound"] == e["bound"]
        manifest_kernel = next(x for x in m["kernels"] if x["name"] == k["name"])
        assert set(manifest_kernel["ops"]) <= set(k["ops"])
        assert k["fusion_kind"] == manifest_kernel.get("fusion_kind") or manifest_kernel["template"].startswith(
            k["fusion_kind"] + ".")
    t = s["totals"]
    assert t["launches"] == len(m["schedule"])
    assert t["distinct_kernels"] == len(m["kernels"])
    assert t["flops"] == sum(e["flops"] * e["launches"] for e in expected.values())
    assert t["bytes"] == sum(e["bytes"] * e["launches"] for e in expected.values())
    assert t["seconds"] == pytest.approx(sum(e["seconds"] * e["launches"] for e in expected.values()), rel=1e-9)
    # intent.json's modeled step times assume the same roofline on the device the bundle was built for
    intent = json.loads((bundle / "intent.json").read_text())
    assert t["seconds"] == pytest.approx(sum(intent["step_seconds"]), rel=1e-6)


def test_device_model_changes_the_roofline(bundle):
    code, out = _inspect(str(bundle), "--json", "--device-model", "A100")
    assert code == 0, out
    s = json.loads(out)
    assert s["device_model"]["name"] == "A100"
    expected = _expected_kernels(_manifest(bundle), A100_BW, A100_FP32)
    for k in s["kernels"]:
        assert k["seconds"] == pytest.approx(expected[k["name"]]["seconds"], rel=1e-9)
        assert k["bound"] == expected[k["name"]]["bound"]


def test_memory_and_intent_summaries(bundle):
    s = summarize(bundle)
    m = _manifest(bundle)
    mp = m["memory_plan"]
    mem = s["memory"]
    assert mem["arena_bytes"] == mp["arena_bytes"]
    assert mem["lower_bound_bytes"] == mp["lower_bound_bytes"]
    assert mem["arena_buffers"] == len(mp["buffers"])
    live = Counter()
    for b in mp["buffers"]:
        for step in range(b["first_step"], b["last_step"] + 1):
            live[step] += b["bytes"]
    assert mem["peak_live_bytes"] == max(live.values(), default=0)
    assert mem["peak_live_bytes"] <= mp["arena_bytes"]
    assert mem["weights_bytes"] == sum(t["bytes"] for t in m["weights"]["tensors"])

    intent = json.loads((bundle / "intent.json").read_text())
    classes = Counter(b["tensor_class"] for b in intent["buffers"])
    assert {c: v["count"] for c, v in s["intent"].items()} == dict(classes)
    for c, v in s["intent"].items():
        mine = [b for b in intent["buffers"] if b["tensor_class"] == c]
        assert v["bytes"] == sum(b["bytes"] for b in mine)
        assert v["tier_preference"] == dict(Counter(b["tier_preference"] for b in mine))
        assert v["fallback_policy"] == dict(Counter(b["fallback_policy"] for b in mine))


def test_plain_text_is_aligned_columns(bundle):
    code, out = _inspect(str(bundle), "--device-model", "H100")
    assert code == 0, out
    assert "\x1b[" not in out  # not a terminal: no colours
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    cols = lines[header].split()
    assert cols[:4] == ["kernel", "kind", "launches", "flops/launch"]
    m = _manifest(bundle)
    expected = _expected_kernels(m, H100_BW, H100_FP32)
    rows = {line.split()[0]: line for line in lines[header + 1: header + 1 + len(m["kernels"])]}
    assert set(rows) == set(expected)
    start = lines[header].index("flops/launch")
    for name, line in rows.items():
        fields = line.split()
        assert fields[2] == str(expected[name]["launches"])
        assert fields[3] == f"{expected[name]['flops']:,}"
        assert fields[4] == f"{expected[name]['bytes']:,}"
        assert line[start:].startswith(f"{expected[name]['flops']:,}")  # columns line up under the header
    assert f"{len(m['schedule'])} launches per inference" in out
    assert f"arena      {m['memory_plan']['arena_bytes']:,} bytes" in out


def test_rich_tables_on_a_terminal(bundle, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    out = Terminal()
    render_text(summarize(bundle), out)
    text = out.getvalue()
    assert "\u2503" in text or "\u2502" in text  # a rich table's box drawing
    for k in _manifest(bundle)["kernels"]:
        assert k["name"] in text


LAYOUT_IR = """HloModule t, output_names={y}

ENTRY %main {
  %x = f32[4,8]{1,0} parameter(0), name=x
  %t = f32[4,8]{0,1} copy(%x), origin={to_col_major}
  %same = f32[4,8]{0,1} copy(%t), origin={noop}
  %back = f32[4,8]{1,0} copy(%same)
  ROOT %r = (f32[4,8]{1,0}) tuple(%back)
}
"""


def test_layout_conversions_count_copies_that_change_layout(tmp_path):
    manifest = {"schedule": [{"step": 0, "kernel": "copy_k", "instruction": "t", "args": ["x", "t"]}],
                "stats": {"layout_conversions": 2}}
    found = layout_conversions(Bundle(tmp_path, manifest, None, parse_module(LAYOUT_IR)))
    assert found["count"] == 2
    assert found["bytes"] == 2 * 4 * 8 * 4
    assert [c["instruction"] for c in found["copies"]] == ["t", "back"]
    assert found["copies"][0]["from_layout"] == [1, 0] and found["copies"][0]["to_layout"] == [0, 1]
    assert found["copies"][0]["kernel"] == "copy_k"
    assert found["copies"][0]["ops"] == ["to_col_major"]
    assert found["manifest_stat"] == 2


def test_load_bundle_reads_the_ir(bundle):
    b = load_bundle(bundle)
    assert b.module is not None and b.intent is not None
    launched = {s["instruction"] for s in b.manifest["schedule"]}
    assert launched <= {i.name for i in b.module.entry.instructions}


def test_errors_have_exit_codes(tmp_path, bundle):
    code, _ = _inspect(str(tmp_path / "nothing"))
    assert code == 66
    code, _ = _inspect(str(bundle), "--device-model", "B200")
    assert code == 69
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    code, _ = _inspect(str(bad))
    assert code == 65
