"""Per-target launch configs in the bundle, the tuning database, and `mlcc tune`.

One small model (mlp.onnx: a b2b kernel for its first two GEMMs and a matmul kernel for the third; three
matmul kernels with back-to-back fusion off) compiled for sm_80, sm_90 and gfx942: Triton compiles all three
without a GPU. References are independent of mlcc's own choices: Triton's metadata of each
binary, grids computed here from the output shapes, onnxruntime's outputs, the vendors' shared-memory
sizes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

import mlcc
from mlcc.errors import InputMissingError, InvalidInputError, UnsupportedError
from mlcc.verify import onnxruntime_outputs, random_inputs
from mlcc_test_paths import ROOT

TARGETS = ["sm_80", "sm_90", "gfx942"]
SHARED_LIMIT = {"sm_80": 164 * 1024, "sm_90": 228 * 1024, "gfx942": 64 * 1024}


# The database tests write matmul entries (BLOCK_M/N/K, GROUP_M) for the mlp's GEMMs, so they compile it with
# back-to-back fusion (b2b-fusion) off: its three GEMMs stay three matmul kernels. `mlcc tune`'s tests take the
# default pipeline (the first two GEMMs one b2b kernel, whose tiles tune searches too: tests/test_b2b_symbolic.py).
NO_B2B = ["b2b-fusion"]


def compile_(*args, b2b: bool = False, **options):
    return mlcc.compile(*args, disable_passes=[] if b2b else NO_B2B, **options)


def run_cli(*args: str, cwd=None, b2b: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if args and args[0] == "compile" and not b2b:
        args = (*args, "--disable-pass", NO_B2B[0])
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, cwd=cwd, env=env)


def tree_hashes(d) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def model(tmp_path_factory, shared_models):
    path = tmp_path_factory.mktemp("model") / "mlp.onnx"
    shutil.copy(shared_models / "mlp.onnx", path)
    return path


@pytest.fixture(scope="module")
def first_bundle(tmp_path_factory, model):
    """The model compiled without a tuning database."""
    out = tmp_path_factory.mktemp("first") / "b"
    compile_(model, out, targets=TARGETS, quiet=True)
    return out


@pytest.fixture(scope="module")
def first(first_bundle):
    """The first compile's manifest, whose kernels name their signatures."""
    return json.loads((first_bundle / "manifest.json").read_text())


def by_signature(manifest: dict) -> dict[str, dict]:
    return {k["signature"]: k for k in manifest["kernels"]}


def output_dims(manifest: dict, kernel: dict) -> tuple[int, int]:
    """The kernel's [m, n] product from its output buffer's shape (rows, then columns)."""
    step = next(s for s in manifest["schedule"] if s["kernel"] == kernel["name"])
    shape = manifest["buffers"][step["args"][-1]]["shape"]
    return math.prod(shape[:-1]), shape[-1]


def write_db(path, entries: dict[str, dict[str, dict]], template: str = "matmul.py.jinja"):
    data = {"version": 1, "kernels": {sig: {"template": template, "ops": [], "targets": targets}
                                      for sig, targets in entries.items()}}
    path.write_text(yaml.safe_dump(data))
    return path


def different_tiles(config: dict) -> dict:
    """A config unlike `config` in every field (tiles the mlp's problems can take)."""
    c = config["constexprs"]
    return {"constexprs": {"BLOCK_M": 32 if c["BLOCK_M"] != 32 else 16, "BLOCK_N": 16 if c["BLOCK_N"] != 16 else 32,
                           "BLOCK_K": 16 if c["BLOCK_K"] != 16 else 32, "GROUP_M": 4 if c["GROUP_M"] != 4 else 2},
            "num_warps": 2 if config["num_warps"] != 2 else 4, "num_stages": 2 if config["num_stages"] != 2 else 3}


def assert_matches_onnxruntime(bundle, model):
    exe = mlcc.load(bundle, device="cpu")
    feeds = random_inputs(exe.manifest["inputs"], seed=3)
    got, want = exe.run(feeds), onnxruntime_outputs(model, feeds)
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-3, atol=1e-5)


def test_each_binary_is_compiled_with_its_targets_own_config(first_bundle, first):
    bundle, m = first_bundle, first
    for k in m["kernels"]:
        assert k["template"] == "matmul.py.jinja" and sorted(k["binaries"]) == sorted(TARGETS)
        for target, b in k["binaries"].items():
            meta = json.loads((bundle / b["metadata"]).read_text())   # Triton's own record of the binary
            assert (meta["num_warps"], meta["num_stages"]) == (b["config"]["num_warps"], b["config"]["num_stages"])
            assert meta["shared"] <= SHARED_LIMIT[target]
            c = b["config"]["constexprs"]
            estimate = b["config"]["num_stages"] * (c["BLOCK_M"] * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"]) * 4
            assert meta["shared"] <= estimate   # the estimate the tiling keeps under the limit bounds Triton's
            mm, nn = output_dims(m, k)
            assert b["config"]["grid"] == [math.ceil(mm / c["BLOCK_M"]) * math.ceil(nn / c["BLOCK_N"]), 1, 1]
        stages = {t: b["config"]["num_stages"] for t, b in k["binaries"].items()}
        assert stages["sm_90"] > stages["sm_80"] > stages["gfx942"]   # deeper on H100, shallower on MI300
    assert m["schema_version"] == 1   # only stages differ: every binary launches with the schedule's grid


def test_a_tuning_entry_changes_exactly_that_kernel_on_that_target(first, model, tmp_path):
    tuned = first["kernels"][0]
    entry = different_tiles(tuned["binaries"]["sm_90"]["config"])
    db = write_db(tmp_path / "tuning.yaml", {tuned["signature"]: {"sm_90": entry}})
    bundle = tmp_path / "b"
    compile_(model, bundle, targets=TARGETS, tuning_db=str(db), quiet=True)
    m = json.loads((bundle / "manifest.json").read_text())
    before, after = by_signature(first), by_signature(m)
    assert sorted(before) == sorted(after)
    for sig, k in after.items():
        for target, b in k["binaries"].items():
            if (sig, target) == (tuned["signature"], "sm_90"):
                continue
            assert b["config"] == before[sig]["binaries"][target]["config"] and b["config_from"] == "heuristic"
    b = after[tuned["signature"]]["binaries"]["sm_90"]
    c = entry["constexprs"]
    mm, nn = output_dims(m, after[tuned["signature"]])
    assert b["config_from"] == "tuning-db"
    assert b["config"]["constexprs"] == c
    assert (b["config"]["num_warps"], b["config"]["num_stages"]) == (entry["num_warps"], entry["num_stages"])
    assert b["config"]["grid"] == [math.ceil(mm / c["BLOCK_M"]) * math.ceil(nn / c["BLOCK_N"]), 1, 1]
    meta = json.loads((bundle / b["metadata"]).read_text())
    assert (meta["num_warps"], meta["num_stages"]) == (entry["num_warps"], entry["num_stages"])
    assert m["build"]["inputs"][-1]["file"] == "tuning.yaml"
    if b["config"]["grid"] != after[tuned["signature"]]["gpu"]["grid"]:
        assert m["schema_version"] == 2   # a version-1 reader would launch it with the schedule's grid
    assert_matches_onnxruntime(bundle, model)   # the interpreter's config is its own: results unchanged


def test_an_entry_for_another_kernel_is_a_miss_and_falls_back(first, model, tmp_path):
    db = write_db(tmp_path / "tuning.yaml", {"0" * 64: {"sm_90": different_tiles(
        first["kernels"][0]["binaries"]["sm_90"]["config"])}})
    bundle = tmp_path / "b"
    compile_(model, bundle, targets=TARGETS, tuning_db=str(db), quiet=True)
    m = json.loads((bundle / "manifest.json").read_text())
    assert [k["binaries"] for k in m["kernels"]] == [k["binaries"] for k in first["kernels"]]


def test_require_tuned_lists_every_untuned_kernel_and_target(first, model, tmp_path):
    tuned = first["kernels"][0]
    db = write_db(tmp_path / "tuning.yaml", {tuned["signature"]: {
        "sm_90": different_tiles(tuned["binaries"]["sm_90"]["config"])}})
    r = run_cli("compile", str(model), "-o", str(tmp_path / "b"), "--target", ",".join(TARGETS),
                "--tuning-db", str(db), "--require-tuned")
    assert r.returncode == 69, r.stderr
    assert r.stderr.count("\n") == 1 and "--require-tuned" in r.stderr
    misses = {(k["signature"], t) for k in first["kernels"] for t in TARGETS} - {(tuned["signature"], "sm_90")}
    for sig, target in misses:
        assert f"on {target}, signature {sig}" in r.stderr
    assert f"on sm_90, signature {tuned['signature']}" not in r.stderr
    assert f"{len(misses)} kernel launch config(s)" in r.stderr
    assert not (tmp_path / "b").exists()


def test_a_full_database_satisfies_require_tuned(first, model, tmp_path):
    entries = {k["signature"]: {t: different_tiles(b["config"]) for t, b in k["binaries"].items()}
               for k in first["kernels"]}
    db = write_db(tmp_path / "tuning.yaml", entries)
    bundle = tmp_path / "b"
    compile_(model, bundle, targets=TARGETS, tuning_db=str(db), require_tuned=True, quiet=True)
    m = json.loads((bundle / "manifest.json").read_text())
    assert all(b["config_from"] == "tuning-db" for k in m["kernels"] for b in k["binaries"].values())
    assert m["build"]["options"]["require_tuned"] is True


BAD_ENTRIES = {
    "not a power of two": ({"BLOCK_M": 48}, "power of two"),
    "unknown constexpr": ({"BLOCK_Q": 32}, "unknown constexpr 'BLOCK_Q'"),
    "a string": ({"BLOCK_K": "32"}, "must be an integer"),
    "a float": ({"BLOCK_K": 32.0}, "must be an integer"),
    "a boolean": ({"GROUP_M": True}, "must be an integer"),
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_a_malformed_entry_names_the_file_and_the_entry(first, model, tmp_path, case):
    change, message = BAD_ENTRIES[case]
    sig = first["kernels"][0]["signature"]
    entry = {"constexprs": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8, **change},
             "num_warps": 4, "num_stages": 2}
    db = write_db(tmp_path / "tuning.yaml", {sig: {"sm_90": entry}})
    with pytest.raises(InvalidInputError, match=message) as e:
        compile_(model, tmp_path / "b", targets=["none"], tuning_db=str(db), quiet=True)
    assert e.value.exit_code == 65 and e.value.file == str(db)
    assert f"kernels.{sig}.targets.sm_90" in str(e.value)


@pytest.mark.parametrize("text, message", [
    ("kernels: [1, 2\n", "not valid YAML"),
    ("- 1\n", "a mapping with keys"),
    ("version: 2\nkernels: {}\n", "expected 1"),
    ("version: 1\nkernels: {abc: {}}\n", "64 lowercase hex digits"),
])
def test_a_malformed_database_is_invalid_input(model, tmp_path, text, message):
    db = tmp_path / "tuning.yaml"
    db.write_text(text)
    with pytest.raises(InvalidInputError, match=message) as e:
        compile_(model, tmp_path / "b", targets=["none"], tuning_db=str(db), quiet=True)
    assert e.value.file == str(db)


def test_a_missing_database_is_a_missing_input(model, tmp_path):
    with pytest.raises(InputMissingError) as e:
        compile_(model, tmp_path / "b", targets=["none"], tuning_db=str(tmp_path / "nope.yaml"), quiet=True)
    assert e.value.exit_code == 66 and e.value.file == str(tmp_path / "nope.yaml")


def test_an_entry_the_kernel_cannot_take_exits_65_on_the_command_line(first, model, tmp_path):
    sig = first["kernels"][0]["signature"]
    huge = {"constexprs": {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 256, "GROUP_M": 8}, "num_warps": 8,
            "num_stages": 8}   # 8 x 2 x 256 x 256 x 4 bytes: 4 MiB of shared memory
    db = write_db(tmp_path / "tuning.yaml", {sig: {"gfx942": huge}})
    r = run_cli("compile", str(model), "-o", str(tmp_path / "b"), "--target", "gfx942", "--tuning-db", str(db))
    assert r.returncode == 65, r.stderr
    assert r.stderr.count("\n") == 1
    assert str(db) in r.stderr and f"kernels.{sig}.targets.gfx942" in r.stderr and "shared memory" in r.stderr


def test_compiles_with_a_database_are_byte_identical_and_track_it(first, model, tmp_path):
    tuned = first["kernels"][1]
    db = write_db(tmp_path / "tuning.yaml", {tuned["signature"]: {
        "sm_80": different_tiles(tuned["binaries"]["sm_80"]["config"])}})
    (tmp_path / "mlcc.yaml").write_text(f"tuning-db: {db}\ntargets: {','.join(TARGETS)}\n")
    outs = []
    for name in ("one", "two"):
        r = run_cli("compile", str(model), "-o", name, "--depfile", f"{name}.d", "-q", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        outs.append(tree_hashes(tmp_path / name))
    assert outs[0] == outs[1]
    depfile = (tmp_path / "one.d").read_text()
    assert str(db) in depfile and "mlcc.yaml" in depfile
    m = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert {"file": "tuning.yaml", "sha256": hashlib.sha256(db.read_bytes()).hexdigest()} in m["build"]["inputs"]
    assert by_signature(m)[tuned["signature"]]["binaries"]["sm_80"]["config_from"] == "tuning-db"
    r = run_cli("compile", str(model), "-o", "one", cwd=tmp_path)
    assert "up to date" in r.stdout
    db.write_text(db.read_text() + "# retuned\n")
    r = run_cli("compile", str(model), "-o", "one", cwd=tmp_path)
    assert r.returncode == 0 and "up to date" not in r.stdout


def test_tune_without_a_gpu_exits_69(model, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    r = run_cli("tune", str(model), "--db", str(tmp_path / "tuning.yaml"))
    assert r.returncode == 69
    assert r.stderr.count("\n") == 1 and "CUDA device" in r.stderr
    assert not (tmp_path / "tuning.yaml").exists()


def test_tune_merges_its_winners_into_the_database_and_compile_takes_them(model, tmp_path, monkeypatch):
    """Timing needs a GPU; the rest of `mlcc tune` does not: here every kernel's last candidate "wins"."""
    import mlcc.emit.target.tune as tune
    from mlcc.emit.tiling import tuning_candidates
    monkeypatch.setattr(tune, "device_target", lambda: "sm_90")
    winners = {}

    def fake_timings(kernel, inst, target, repeat, **_):
        candidates = tuning_candidates(kernel, target)
        winners[kernel.signature] = candidates[-1]
        return [(10.0, candidates[0]), (5.0, candidates[-1])]
    monkeypatch.setattr(tune, "time_candidates", fake_timings)
    other = {"0" * 64: {"sm_80": {"constexprs": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8},
                                  "num_warps": 4, "num_stages": 2}}}
    db = write_db(tmp_path / "tuning.yaml", other)
    results = tune.tune_model(model, db, mlcc.CompileOptions(), repeat=3)
    # the b2b kernel (the first two GEMMs) and the matmul kernel of the third
    assert sorted(r["template"] for r in results) == ["b2b.py.jinja", "matmul.py.jinja"]
    assert len(results) == len(winners) == 2 and all(r["best_us"] == 5.0 for r in results)
    data = yaml.safe_load(db.read_text())
    assert data["kernels"]["0" * 64]["targets"] == other["0" * 64]
    bundle = tmp_path / "b"
    compile_(model, bundle, b2b=True, targets=["sm_90"], tuning_db=str(db), require_tuned=True, quiet=True)
    m = json.loads((bundle / "manifest.json").read_text())
    for k in m["kernels"]:
        assert k["binaries"]["sm_90"]["config"] == winners[k["signature"]].to_json()
        assert data["kernels"][k["signature"]]["template"] == k["template"]
        assert sorted(data["kernels"][k["signature"]]["ops"]) == k["ops"]
    text = db.read_text()
    tune.tune_model(model, db, mlcc.CompileOptions(), repeat=3)
    assert db.read_text() == text   # the same winners write the same bytes
    with pytest.raises(UnsupportedError, match="cannot tune for sm_80 on this sm_90"):
        tune.tune_model(model, db, mlcc.CompileOptions(), target="sm_80")


# ---- tune's candidate evaluation, on CPU: Triton's interpreter runs the candidates, a fake timer times them


def lowered(model, target: str = "sm_90", **options):
    """{kernel name: (kernel, its first launch)} of model's tunable kernels, and the module's symbols."""
    from mlcc.compiler import lower_model
    from mlcc.emit.target.targets import parse_target
    from mlcc.emit.tiling import tunable
    module, kernels, launches = lower_model(model, mlcc.CompileOptions(**options), [parse_target(target)])
    first = {}
    for inst, name in launches:
        if tunable(kernels[name]):
            first.setdefault(name, (kernels[name], inst))
    return first, module.symbols


def fastest_last(launch, repeat):
    """A fake timer under which every later candidate is faster than the one before."""
    fastest_last.calls += 1
    return 100.0 - fastest_last.calls


def test_a_candidate_that_writes_only_part_of_the_output_is_dropped(model, monkeypatch):
    """The partial candidate launches one program where the output needs two: before outputs were cleared
    it "agreed" with what the heuristic left in them, and won on time."""
    import dataclasses

    import mlcc.emit.target.tune as tune
    from mlcc.emit.target.targets import parse_target
    kernels, _ = lowered(model, disable_passes=NO_B2B)   # a matmul kernel of more than one program
    kernel, inst = next(ki for ki in kernels.values() if ki[0].config_for(parse_target("sm_90")).grid[0] > 1)
    heuristic = tune.tuning_candidates(kernel, parse_target("sm_90"))[0]
    partial = dataclasses.replace(heuristic, grid=(1, 1, 1))
    writes_nothing = dataclasses.replace(heuristic, grid=(0, 1, 1))
    monkeypatch.setattr(tune, "tuning_candidates", lambda k, t: [heuristic, partial, writes_nothing])
    fastest_last.calls = 0
    bench = tune.Bench("cpu", interpret=True, timer=fastest_last)
    timings = tune.time_candidates(kernel, inst, parse_target("sm_90"), 1, bench=bench)
    assert [c for _, c in timings] == [heuristic]


def test_outputs_are_cleared_before_every_run():
    import mlcc.emit.target.tune as tune
    torch = pytest.importorskip("torch")
    out = [torch.zeros(4), torch.zeros(3, dtype=torch.int32), torch.zeros(2, dtype=torch.bool)]
    bench = tune.Bench("cpu", interpret=True)
    assert tune.run_checked(lambda: None, out, bench) is None   # writes nothing: its outputs keep the fills

    def writes_all():
        out[0].copy_(torch.arange(4.0))
        out[1].fill_(7)
        out[2].fill_(False)
    got = tune.run_checked(writes_all, out, bench)
    assert got is not None and got[0].tolist() == [0.0, 1.0, 2.0, 3.0] and got[1].tolist() == [7] * 3

    assert tune.run_checked(lambda: (out[0][:2].fill_(1.0), out[1].fill_(7), out[2].fill_(False)), out, bench) \
        is None
    assert tune.run_checked(lambda: out[1].fill_(7), out, bench) is None   # floats and bools unwritten

    def raises():
        raise RuntimeError("out of resources")
    assert tune.run_checked(raises, out, bench) is None


def test_a_symbolic_kernel_is_tuned_at_the_top_of_its_range_with_its_scalars(monkeypatch):
    """Before, no sym_ scalars were passed: every candidate failed to launch and the kernel kept its
    heuristic config without a word. Now each candidate runs with seq at its largest and agrees with torch."""
    import mlcc.emit.target.tune as tune
    from mlcc.emit.target.targets import parse_target
    torch = pytest.importorskip("torch")
    kernels, symbols = lowered(ROOT / "tests/data/models/gpt2_dyn_tiny.onnx", shapes={"seq": "1..16"},
                               disable_passes=NO_B2B)
    assert symbols == {"seq": (1, 16)}
    # the last MLP's down projection, a plain dot (the logits' GEMM now normalizes its A rows in its loads; with
    # back-to-back fusion on, the MLP's two GEMMs are one b2b kernel)
    kernel, inst = next(ki for ki in kernels.values() if ki[0].scalars and ki[1].opcode == "dot"
                        and ki[1].operands[1].shape.dims == (256, 64))
    assert kernel.scalars == ["seq"] and tune.kernel_scalars(kernel, {"seq": 16}) == [16]
    with pytest.raises(UnsupportedError, match="seq"):
        tune.kernel_scalars(kernel, {})
    target = parse_target("sm_90")
    candidates = tune.tuning_candidates(kernel, target)[:3]
    monkeypatch.setattr(tune, "tuning_candidates", lambda k, t: candidates)
    seen = []
    real = tune.run_checked

    def checked(launch, outputs, bench):
        got = real(launch, outputs, bench)
        seen.append(got)
        return got
    monkeypatch.setattr(tune, "run_checked", checked)
    fastest_last.calls = 0
    bench = tune.Bench("cpu", interpret=True, timer=fastest_last)
    timings = tune.time_candidates(kernel, inst, target, 1, bench=bench, symbols={"seq": 16})
    assert [c for _, c in timings] == candidates
    torch.manual_seed(0)   # the inputs time_candidates drew, at seq = 16
    a, b = (tune.random_tensor(op.shape, "cpu", {"seq": 16}) for op in inst.operands)
    want = a.reshape(16, 256) @ b.view(256, 64)
    for got in seen:
        assert got[0].numel() == 16 * 64
        torch.testing.assert_close(got[0].view(16, 64), want, rtol=1e-4, atol=1e-4)


def test_heuristic_us_is_the_heuristic_configs_time_or_none(model, tmp_path, monkeypatch):
    """Before, heuristic_us was the first timed candidate's time, whichever config that was."""
    import mlcc.emit.target.tune as tune
    monkeypatch.setattr(tune, "device_target", lambda: "sm_90")

    def heuristic_failed(kernel, inst, target, repeat, **_):
        candidates = tune.tuning_candidates(kernel, target)
        return [(8.0, candidates[1]), (5.0, candidates[-1])]
    monkeypatch.setattr(tune, "time_candidates", heuristic_failed)
    results = tune.tune_model(model, tmp_path / "tuning.yaml", mlcc.CompileOptions(), repeat=1)
    assert results and all(r["heuristic_us"] is None and r["best_us"] == 5.0 for r in results)

    def heuristic_ran(kernel, inst, target, repeat, **_):
        candidates = tune.tuning_candidates(kernel, target)
        return [(8.0, candidates[1]), (9.0, candidates[0]), (5.0, candidates[-1])]
    monkeypatch.setattr(tune, "time_candidates", heuristic_ran)
    results = tune.tune_model(model, tmp_path / "tuning.yaml", mlcc.CompileOptions(), repeat=1)
    assert all(r["heuristic_us"] == 9.0 for r in results)


def test_tune_on_the_simulated_device_tunes_a_symbolic_model(tmp_path, monkeypatch):
    """`sim:sm_90`: the whole of tune_model on CPU, with sm_90's candidates (the first two of each kernel)."""
    import mlcc.emit.target.tune as tune
    real = tune.tuning_candidates
    monkeypatch.setattr(tune, "tuning_candidates", lambda k, t: real(k, t)[:2])
    db = tmp_path / "tuning.yaml"
    results = tune.tune_model(ROOT / "tests/data/models/gpt2_dyn_tiny.onnx", db,
                              mlcc.CompileOptions(shapes={"seq": "1..16"}), repeat=1, device="sim:sm_90")
    kernels, _ = lowered(ROOT / "tests/data/models/gpt2_dyn_tiny.onnx", shapes={"seq": "1..16"})
    assert sorted(r["kernel"] for r in results) == sorted(kernels)
    assert all(r["target"] == "sm_90" and r["heuristic_us"] is not None for r in results)
    data = yaml.safe_load(db.read_text())
    assert {r["signature"] for r in results} <= set(data["kernels"])
    with pytest.raises(UnsupportedError, match="cuda, cuda:N or sim:TARGET"):
        tune.tune_model(ROOT / "tests/data/models/gpt2_dyn_tiny.onnx", db, mlcc.CompileOptions(), device="tpu")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():   # cuda:N's device guard waits for CUDA: without it, 69 as for cuda
        with pytest.raises(UnsupportedError, match="needs a CUDA device"):
            tune.tune_model(ROOT / "tests/data/models/gpt2_dyn_tiny.onnx", db, mlcc.CompileOptions(), device="cuda:1")


# ---- on a GPU


def device_arch() -> str:
    import torch
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


@pytest.mark.gpu
def test_tune_merges_winners_that_compile_then_requires(model, tmp_path):
    db = tmp_path / "tuning.yaml"
    keep = {"0" * 64: {"sm_80": {"constexprs": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8},
                                 "num_warps": 4, "num_stages": 2}}}
    write_db(db, keep)
    r = run_cli("tune", str(model), "--db", str(db), "--repeat", "5")
    assert r.returncode == 0, r.stderr
    data = yaml.safe_load(db.read_text())
    assert "0" * 64 in data["kernels"]   # another kernel's entry stays
    arch = device_arch()
    bundle = tmp_path / "b"
    compile_(model, bundle, b2b=True, targets=[arch], tuning_db=str(db), require_tuned=True, quiet=True)
    m = json.loads((bundle / "manifest.json").read_text())
    for k in m["kernels"]:
        assert data["kernels"][k["signature"]]["targets"][arch]["num_warps"] == k["binaries"][arch]["num_warps"]
    exe = mlcc.load(bundle, device="cuda")
    feeds = random_inputs(exe.manifest["inputs"], seed=1)
    got, want = exe.run(feeds), onnxruntime_outputs(model, feeds)
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-3, atol=1e-5)


@pytest.mark.gpu
def test_the_cuda_runtime_launches_a_tuned_binary_with_its_own_grid(first, model, tmp_path):
    arch = device_arch()
    entries = {}
    for k in first["kernels"]:
        entry = different_tiles(k["gpu"])
        entry["constexprs"].update({"BLOCK_M": 16, "BLOCK_N": 16})   # more programs than the default grid has
        entries[k["signature"]] = {arch: entry}
    db = write_db(tmp_path / "tuning.yaml", entries)
    bundle = tmp_path / "b"
    compile_(model, bundle, targets=[arch], tuning_db=str(db), quiet=True)
    m = json.loads((bundle / "manifest.json").read_text())
    assert any(k["binaries"][arch]["config"]["grid"] != k["gpu"]["grid"] for k in m["kernels"])
    exe = mlcc.load(bundle, device="cuda")
    feeds = random_inputs(exe.manifest["inputs"], seed=2)
    got, want = exe.run(feeds), onnxruntime_outputs(model, feeds)
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-3, atol=1e-5)


def test_tune_cli_on_the_simulated_device_writes_a_database_the_compile_uses(tmp_path, shared_models):
    """`mlcc tune --device sim:sm_90` runs every candidate under the interpreter with sm_90's configs (times mean
    nothing there) and writes entries that `compile --tuning-db --require-tuned` takes; the bundle built with
    them still matches onnxruntime on sim:sm_90. Without a CUDA device, the default --device cuda is exit 69."""
    model, db = shared_models / "mlp.onnx", tmp_path / "tuning.yaml"
    proc = run_cli("tune", str(model), "--db", str(db), "--device", "sim:sm_90", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    entries = yaml.safe_load(db.read_text())["kernels"]
    assert entries and all(set(e["targets"]) == {"sm_90"} for e in entries.values())
    compile_(model, tmp_path / "b", b2b=True, targets=["sm_90"], tuning_db=str(db), require_tuned=True, cache_dir="")
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert {k["template"] for k in manifest["kernels"]} == {"b2b.py.jinja", "matmul.py.jinja"}
    assert {b["config_from"] for k in manifest["kernels"] for b in k["binaries"].values()} == {"tuning-db"}
    exe = mlcc.load(tmp_path / "b", device="sim:sm_90")
    feeds = random_inputs(manifest["inputs"], seed=3)
    got, want = exe.run(feeds), onnxruntime_outputs(model, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=1e-5)
    import torch
    if not torch.cuda.is_available():
        assert run_cli("tune", str(model), "--db", str(tmp_path / "t2.yaml")).returncode == 69
