"""b2b kernels' launch configs per target (the Tiling in mlcc/emit/codegen/b2b.py): each target's binary fits
its shared memory without spilling, the tuning candidates stay within the target's limits, and an entry past
them is a one-line error. References: Triton's own metadata of each binary and the binaries' spill counts
(`mlcc inspect --binaries`), the vendors' shared-memory sizes, shared memory computed here from the tiles."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

import mlcc
from mlcc.compiler import lower_model
from mlcc.emit.target.targets import parse_target
from mlcc.emit.tiling import TILINGS, tuning_candidates
from mlcc.inspect import binaries_summary
from mlcc_test_paths import ROOT

TARGETS = ["sm_80", "sm_90", "gfx942"]
SHARED_LIMIT = {"sm_80": 164 * 1024, "sm_90": 228 * 1024, "gfx942": 64 * 1024}


def shared_bytes(c: dict, stages: int, size: int = 4) -> int:
    """A program's tiles: per stage an A tile and a weight tile of dot1, then dot2's weight tile and the chunk."""
    bm, bh, bn, bk = c["BLOCK_M"], c["BLOCK_H"], c["BLOCK_N"], c["BLOCK_K"]
    return (stages * (bm * bk + bk * bh) + bh * bn + bm * bh) * size


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, shared_models):
    """The shared mlp (its first two GEMMs one b2b kernel) built for three targets."""
    return mlcc.compile(shared_models / "mlp.onnx", tmp_path_factory.mktemp("b2b_tiles") / "b", targets=TARGETS,
                        quiet=True, cache_dir="").out_dir


def test_each_targets_b2b_binary_fits_and_does_not_spill(bundle):
    rows = [r for r in binaries_summary(bundle)["binaries"] if r["template"] == "b2b.py.jinja"]
    assert sorted(r["target"] for r in rows) == sorted(TARGETS)
    m = mlcc.load(bundle, device="cpu").manifest
    (kernel,) = [k for k in m["kernels"] if k["template"] == "b2b.py.jinja"]
    for r in rows:
        b = kernel["binaries"][r["target"]]
        assert r["spilled_bytes"] == 0 and r["spill_stores"] in (0, None), r
        assert r["shared"] <= SHARED_LIMIT[r["target"]]
        # the estimate the tiling holds under the target's limit bounds what Triton allocates
        assert r["shared"] <= shared_bytes(b["config"]["constexprs"], b["config"]["num_stages"])


def test_tuning_candidates_stay_within_each_targets_shared_memory(shared_models):
    for name in TARGETS:
        target = parse_target(name)
        _, kernels, _ = lower_model(shared_models / "mlp.onnx", mlcc.CompileOptions(), [target])
        (kernel,) = [k for k in kernels.values() if k.template == "b2b.py.jinja"]
        problem = kernel.extra["problem"]
        proposed = TILINGS["b2b.py.jinja"].candidates(problem, target)
        kept = tuning_candidates(kernel, target)
        assert len(kept) > 1 and kept[0].constexprs == kernel.config_for(target).constexprs   # the heuristic first
        for c in kept:
            assert shared_bytes(c.constexprs, c.num_stages) <= SHARED_LIMIT[name]
        dropped = [c for c in proposed if c not in kept]
        if name == "gfx942":   # 64 KiB of LDS: the widest chunk at 3 stages does not fit
            assert dropped and all(shared_bytes(c.constexprs, c.num_stages) > 64 * 1024 for c in dropped)


def test_a_b2b_entry_past_gfx942s_shared_memory_exits_65(shared_models, tmp_path):
    _, kernels, _ = lower_model(shared_models / "mlp.onnx", mlcc.CompileOptions(), [parse_target("gfx942")])
    (kernel,) = [k for k in kernels.values() if k.template == "b2b.py.jinja"]
    huge = {"constexprs": {"BLOCK_M": 128, "BLOCK_H": 128, "BLOCK_N": 128, "BLOCK_K": 64}, "num_warps": 4,
            "num_stages": 3}   # 3 x (128 x 64 + 64 x 128) + 2 x 128 x 128 floats: 320 KiB
    db = tmp_path / "tuning.yaml"
    db.write_text(yaml.safe_dump({"version": 1, "kernels": {kernel.signature: {
        "template": "b2b.py.jinja", "ops": [], "targets": {"gfx942": huge}}}}))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(shared_models / "mlp.onnx"), "-o",
                        str(tmp_path / "b"), "--target", "gfx942", "--tuning-db", str(db)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 65, r.stderr
    assert r.stderr.count("\n") == 1
    assert f"kernels.{kernel.signature}.targets.gfx942" in r.stderr and "shared memory" in r.stderr
