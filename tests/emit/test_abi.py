"""The launch ABI checked against the binaries (mlcc/emit/target/abi.py): every shared model's bundle for
sm_80, sm_90 and gfx942 passes, and a manifest that disagrees with its binaries is reported naming the
kernel, the target and the parameter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import mlcc
from mlcc.bundle.manifest import Manifest
from mlcc.cli import main
from mlcc.emit.target.abi import check_bundle, check_grid
from mlcc.emit.target.binaries import bundle_facts
from mlcc.emit.target.targets import parse_target
from mlcc_test_paths import SHARED_MODELS

TARGETS = ["sm_80", "sm_90", "gfx942"]
# The symbolic models' ranges; they are the test copies' extras (../shared/models has none), slow to build
# for three targets (bert_dyn_tiny: 40 s), so they run with -m slow; gpt2_tiny_dynseq's bundle is checked below.
SYMBOLIC = {"bert_dyn_tiny.onnx": {"batch": "1..4", "seq": "1..64"}, "gpt2_dyn_tiny.onnx": {"seq": "1..64"},
            "gpt2_tiny_dynseq.onnx": {"seq": "1..64"}}
MODELS = [pytest.param(m, marks=pytest.mark.slow) if m in SYMBOLIC else m for m in
          sorted(p.name for p in SHARED_MODELS.glob("*.onnx")) + sorted(p.name for p in SHARED_MODELS.glob("*.mlir"))]


def _compile(model: str, out: Path) -> Path:
    shapes = SYMBOLIC.get(model)
    mlcc.compile(SHARED_MODELS / model, out, targets=TARGETS, shapes=shapes, jobs=1)
    return out


@pytest.fixture(scope="module")
def dynseq(tmp_path_factory) -> Path:
    """A bundle whose kernels take a symbol's value as an i32 scalar."""
    return _compile("gpt2_tiny_dynseq.onnx", tmp_path_factory.mktemp("abi") / "dynseq")


def _edited(bundle: Path, tmp_path: Path, edit) -> Path:
    """A copy of bundle with edit applied to its manifest's JSON."""
    copy = tmp_path / "edited"
    shutil.copytree(bundle, copy)
    m = json.loads((copy / "manifest.json").read_text())
    edit(m)
    (copy / "manifest.json").write_text(json.dumps(m))
    return copy


def _scalar_kernel(bundle: Path) -> dict:
    m = json.loads((bundle / "manifest.json").read_text())
    return next(k for k in m["kernels"] if k["arg_types"][-1] == "i32" and k["arg_types"][-2].startswith("*"))


@pytest.mark.parametrize("model", MODELS)
def test_shared_model_launch_abi_matches_binaries(model, tmp_path):
    bundle = _compile(model, tmp_path / "b")
    manifest = Manifest.from_json(json.loads((bundle / "manifest.json").read_text()))
    assert check_bundle(bundle) == []
    for k in manifest.kernels:   # the check did read every binary: runtime args + Triton's two scratch pointers
        assert sorted(k.binaries) == sorted(TARGETS)
        for t in TARGETS:
            params = bundle_facts(bundle, k, t, disassemble=False).params
            assert len(params) == len(k.arg_types) + 2, (k.name, t)
            assert [p.pointer for p in params[:len(k.arg_types)]] == [a.startswith("*") for a in k.arg_types]


def test_dropped_scalar_is_reported_per_target(dynseq, tmp_path):
    kernel = _scalar_kernel(dynseq)

    def drop(m):
        for k in m["kernels"]:
            if k["name"] == kernel["name"]:
                k["arg_types"] = k["arg_types"][:-1]
    problems = check_bundle(_edited(dynseq, tmp_path, drop))
    n = len(kernel["arg_types"]) - 1
    for target in TARGETS:
        mine = [p for p in problems if p.kernel == kernel["name"] and p.where == target]
        assert any(p.param == f"{n} (global_scratch)" and "passes a pointer of 8 bytes, the binary takes a scalar "
                   "of 4 bytes" in p.message for p in mine), mine
        assert any(p.param.startswith(f"{n + 2}") and "does not pass" in p.message for p in mine), mine
    # and each launch of it now passes a scalar the kernel has no parameter for
    assert any(p.kernel == kernel["name"] and p.where.startswith("step ") and p.param == f"{n} (seq)"
               for p in problems)


def test_swapped_pointer_and_scalar_are_reported(dynseq, tmp_path):
    kernel = _scalar_kernel(dynseq)
    i = len(kernel["arg_types"]) - 2

    def swap(m):
        for k in m["kernels"]:
            if k["name"] == kernel["name"]:
                k["arg_types"][i], k["arg_types"][i + 1] = k["arg_types"][i + 1], k["arg_types"][i]
    problems = check_bundle(_edited(dynseq, tmp_path, swap))
    for target in TARGETS:
        assert any(p.kernel == kernel["name"] and p.where == target and p.param == f"{i} (#{i} (i32))"
                   and "passes a scalar of 4 bytes, the binary takes a pointer of 8 bytes" in p.message
                   for p in problems), problems
    assert all(p.kernel == kernel["name"] for p in problems)


def test_inspect_abi_cli(dynseq, tmp_path):
    r = CliRunner().invoke(main, ["inspect", "--abi", str(dynseq)])
    assert r.exit_code == 0 and "launch ABI ok" in r.output
    kernel = _scalar_kernel(dynseq)

    def drop_step_scalar(m):
        for s in m["schedule"]:
            if s["kernel"] == kernel["name"]:
                s["scalars"] = []
    bad = _edited(dynseq, tmp_path, drop_step_scalar)
    r = CliRunner().invoke(main, ["inspect", "--abi", str(bad)])
    assert r.exit_code == 65
    assert f"kernel {kernel['name']} [step " in r.output and "the kernel takes it, the launch does not pass it" in r.output


def test_grid_past_the_target_limits_is_reported():
    sm90, gfx = parse_target("sm_90"), parse_target("gfx942")
    problems = check_grid("k", sm90, ["cdiv(n, 1)", 65536, 1], {"n": [1, 2**31]})
    assert [str(p) for p in problems if p.param == "grid[0]"] == [
        "kernel k [sm_90]: parameter grid[0]: 'cdiv(n, 1)' is 2147483648 at {'n': 2147483648}, past the target's "
        "limit 2147483647"]
    assert sum(p.param == "grid[1]" for p in problems) == 2   # at both ends of n's range
    assert [p.param for p in check_grid("k", gfx, ["cdiv(n, 1)", 65536, 1], {"n": [1, 2**31]})] == ["grid[0]"]
    assert check_grid("k", sm90, ["max(1, cdiv(seq, 64)) * 16", 1, 1], {"seq": [1, 64]}) == []
    assert [p.param for p in check_grid("k", sm90, ["n - 1", 1, 1], {"n": [1, 8]})] == ["grid[0]"]   # 0 at n=1
