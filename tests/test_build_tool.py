"""mlcc as a build tool: deterministic bytes, atomic output, incremental builds, depfiles, exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def mlcc(*args: str, cwd: Path | None = None, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=e, **kw)


def tree_hashes(d: Path) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def test_bundles_are_byte_identical_across_hash_seeds_directories_and_caches(tmp_path, shared_models):
    model = shared_models / "gpt2_tiny.onnx"
    outs = []
    for i, seed in enumerate(("1", "12345")):
        work = tmp_path / f"cwd{i}"
        work.mkdir()
        out = tmp_path / f"out{i}" / "deeper" / "bundle"
        r = mlcc("compile", str(model), "-o", str(out), "--target", "sm_90", "--cache-dir", str(tmp_path / f"cache{i}"),
                 "-q", cwd=work, env={"PYTHONHASHSEED": seed, "SOURCE_DATE_EPOCH": str(1000 + i),
                                             "TRITON_CACHE_DIR": str(tmp_path / f"triton{i}")})
        assert r.returncode == 0, r.stderr
        outs.append(tree_hashes(out))
    assert outs[0] == outs[1]
    assert any(k.endswith(".cubin") for k in outs[0])


def test_three_targets_give_three_elf_binaries_per_kernel(tmp_path, shared_models):
    out = tmp_path / "b"
    r = mlcc("compile", str(shared_models / "mlp.onnx"), "-o", str(out), "--target", "sm_80,sm_90,gfx942", "-q")
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    for k in m["kernels"]:
        assert sorted(k["binaries"]) == ["gfx942", "sm_80", "sm_90"]
        for t, b in k["binaries"].items():
            assert (out / b["path"]).read_bytes()[:4] == b"\x7fELF", (k["name"], t)
    assert m["kernels"][0]["binaries"]["gfx942"]["path"].endswith(".hsaco")


def test_up_to_date_then_force_then_input_change(tmp_path, shared_models):
    model = tmp_path / "m.onnx"
    shutil.copy(shared_models / "mlp.onnx", model)
    out = tmp_path / "b"
    assert mlcc("compile", str(model), "-o", str(out), "--target", "none").returncode == 0
    before = tree_hashes(out)
    r = mlcc("compile", str(model), "-o", str(out), "--target", "none")
    assert r.returncode == 0 and "up to date" in r.stdout
    r = mlcc("compile", str(model), "-o", str(out), "--target", "none", "--force")
    assert r.returncode == 0 and "up to date" not in r.stdout
    assert tree_hashes(out) == before
    r = mlcc("compile", str(model), "-o", str(out), "--target", "sm_90")  # an option changed: rebuild
    assert r.returncode == 0 and "up to date" not in r.stdout


def test_killed_compile_leaves_the_previous_bundle_and_the_next_compile_sweeps_debris(tmp_path, shared_models):
    out = tmp_path / "b"
    assert mlcc("compile", str(shared_models / "mlp.onnx"), "-o", str(out), "--target", "none").returncode == 0
    before = tree_hashes(out)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "mlcc.cli", "compile", str(shared_models / "bert_tiny.onnx"), "-o",
                             str(out), "--target", "sm_80,sm_90", "--no-cache", "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob(".b.tmp-*")):
        time.sleep(0.01)  # kill it while it writes its staging directory
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    after = tree_hashes(out)
    if after != before:  # the kill came after the swap: then the new bundle is whole
        from mlcc.bundle.digest import bundle_digest
        assert json.loads((out / "manifest.json").read_text())["bundle_sha256"] == bundle_digest(out)
    assert mlcc("compile", str(shared_models / "mlp.onnx"), "-o", str(out), "--target", "none", "--force").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_compile_killed_while_compiling_kernels_leaves_the_previous_bundle_untouched(tmp_path, shared_models):
    out = tmp_path / "b"
    assert mlcc("compile", str(shared_models / "mlp.onnx"), "-o", str(out), "--target", "none").returncode == 0
    before = tree_hashes(out)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_CACHE_DIR=str(tmp_path / "triton-cache"))
    proc = subprocess.Popen([sys.executable, "-m", "mlcc.cli", "compile", str(shared_models / "bert_tiny.onnx"), "-o",
                             str(out), "--target", "sm_80,sm_90", "--no-cache", "-j", "1", "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Kill it once the first kernel binary lands in Triton's cache: compiling kernels, far from the bundle swap.
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not _has_files(tmp_path / "triton-cache"):
        time.sleep(0.01)
    assert proc.poll() is None, "the compile ended before its first kernel was cached"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert tree_hashes(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "triton-cache"]


def _has_files(folder: Path) -> bool:
    # os.walk, not Path.rglob: Triton renames its tmp.pid_* folders into place while we look, and rglob raises
    # FileNotFoundError on a folder that went away between listing and scanning; os.walk skips it.
    return any(files for _, _, files in os.walk(folder))


def _limit_file_size(limit: int):
    """A preexec_fn: files this process writes may not grow past ``limit`` bytes (EFBIG, as a full disk gives
    ENOSPC: a real write failure in the middle of the bundle, not a mock)."""
    def apply() -> None:
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_write_failure_leaves_the_previous_bundle_and_no_debris(tmp_path, shared_models):
    out = tmp_path / "b"
    assert mlcc("compile", str(shared_models / "mlp.onnx"), "-o", str(out), "--target", "none").returncode == 0
    before = tree_hashes(out)
    # bert_tiny's weights.bin is far above 64 KiB: writing it fails partway through the staging directory
    r = mlcc("compile", str(shared_models / "bert_tiny.onnx"), "-o", str(out), "--target", "none", "--no-cache",
             preexec_fn=_limit_file_size(64 << 10))
    assert r.returncode == 73, r.stderr
    line, = r.stderr.splitlines()
    assert line.startswith("mlcc: error: ") and str(out) in line and "cannot write the bundle" in line
    assert tree_hashes(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_concurrent_compiles_into_one_target_never_mix(tmp_path, shared_models):
    models = {"mlp": shared_models / "mlp.onnx", "convnet": shared_models / "convnet.onnx"}
    alone = {}
    for name, model in models.items():  # each bundle built alone, for comparison (bundles are deterministic)
        assert mlcc("compile", str(model), "-o", str(tmp_path / name), "--target", "none").returncode == 0
        alone[name] = tree_hashes(tmp_path / name)
    race = tmp_path / "race"
    race.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-m", "mlcc.cli", "compile", str(m), "-o", str(race / "b"),
                                   "--target", "none", "--force", "-q"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for m in models.values()]
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        assert tree_hashes(race / "b") in list(alone.values())  # one whole bundle, never a mix of the two
        assert sorted(p.name for p in race.iterdir()) == ["b"]


def test_depfile_and_config(tmp_path, shared_models):
    model = tmp_path / "my model.onnx"
    shutil.copy(shared_models / "mlp.onnx", model)
    (tmp_path / "mlcc.yaml").write_text("targets: none\ndevice_model: H200\n")
    r = mlcc("compile", "my model.onnx", "-o", "build", "--depfile", "build.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dep = (tmp_path / "build.d").read_text()
    assert dep.startswith("build/manifest.json: \\\n  my\\ model.onnx \\\n  mlcc.yaml\n")
    assert "\nmy\\ model.onnx:\n" in dep and "\nmlcc.yaml:\n" in dep
    m = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert m["targets"] == [] and m["build"]["options"]["device_model"] == "H200"
    assert {i["file"] for i in m["build"]["inputs"]} == {"my model.onnx", "mlcc.yaml"}
    r = mlcc("config", cwd=tmp_path)
    assert r.returncode == 0 and "device_model: H200" in r.stdout


@pytest.mark.parametrize("args, code, needle", [
    (["compile", "missing.onnx", "-o", "b"], 66, "missing.onnx: no such file"),
    (["compile", "garbage.onnx", "-o", "b"], 65, "garbage.onnx"),
    (["compile", "good.onnx", "-o", "b", "--target", "sm_1x"], 69, "unknown target 'sm_1x'"),
    (["compile", "good.onnx", "-o", "b", "--disable-pass", "nope"], 69, "unknown pass nope"),
    (["compile", "good.onnx"], 2, "Missing option"),
])
def test_errors_are_one_line_with_documented_exit_codes(tmp_path, shared_models, args, code, needle):
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x07not a protobuf at all\xff\xfe" * 10)
    shutil.copy(shared_models / "mlp.onnx", tmp_path / "good.onnx")
    r = mlcc(*args, cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    if code != 2:
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_json_diagnostics_are_valid_json_on_fatal_errors(tmp_path):
    r = mlcc("compile", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "b"), "--json")
    assert r.returncode == 66
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["diagnostics"][0]["exit_code"] == 66


def test_examples_makefile_is_incremental(tmp_path, shared_models):
    ex = tmp_path / "examples"
    (ex / "models").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "Makefile", ex / "Makefile")
    for name in ("mlp", "convnet"):
        shutil.copy(shared_models / f"{name}.onnx", ex / "models" / f"{name}.onnx")
    make = ["make", "-C", str(ex), f"MLCC={sys.executable} -m mlcc.cli", "TARGETS=none"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    first = subprocess.run(make + ["-j2"], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert (ex / "build" / "mlp" / "manifest.json").exists() and (ex / "build" / "mlp.d").exists()
    second = subprocess.run(make, capture_output=True, text=True, env=env)
    assert second.returncode == 0 and "mlcc.cli compile" not in second.stdout
    assert subprocess.run(make + ["-q"], env=env).returncode == 0
    later = time.time() + 5
    os.utime(ex / "models" / "mlp.onnx", (later, later))
    assert subprocess.run(make + ["-q"], env=env).returncode == 1
    third = subprocess.run(make, capture_output=True, text=True, env=env)
    assert third.stdout.count("mlcc.cli compile") == 1 and "mlp.onnx" in third.stdout


def test_verify_exits_1_on_a_mismatch_and_0_on_a_match(tmp_path, shared_models):
    # the documented exit code for outputs that differ from the reference (errors.EXIT_MISMATCH)
    import numpy as np
    model = str(shared_models / "mlp.stablehlo.mlir")  # StableHLO: the reference is the npz's expected outputs
    hlo = np.load(shared_models / "mlp.stablehlo.ref.npz")
    np.savez(tmp_path / "hlo_bad.npz", **{k: (hlo[k] + 1 if k.startswith("out") else hlo[k]) for k in hlo.files})
    r = mlcc("verify", model, "--inputs", str(tmp_path / "hlo_bad.npz"), "--target", "none")
    assert r.returncode == 1, r.stderr
    assert "FAIL out0" in r.stdout and "bug" not in r.stderr
    r = mlcc("verify", model, "--inputs", str(shared_models / "mlp.stablehlo.ref.npz"), "--target", "none")
    assert r.returncode == 0, r.stdout + r.stderr
