"""IR text as an input: `mlcc compile model.hlo` reproduces a bundle from its own model.hlo, `mlcc opt`
runs named passes over IR text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlcc
from mlcc.errors import InvalidInputError
from mlcc_test_paths import SHARED_MODELS

MODELS = sorted(p.name for p in [*SHARED_MODELS.glob("*.onnx"), *SHARED_MODELS.glob("*.mlir")]
                if not p.name.startswith(("bert_dyn", "gpt2_dyn", "gpt2_tiny_dynseq")))  # these need --shape


def _files(bundle: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((bundle / "kernels").iterdir())}


@pytest.mark.parametrize("model, options", [(m, {}) for m in MODELS] + [
    ("gpt2_dyn_tiny.onnx", {"shapes": {"seq": "1..64"}}),
    ("gpt2_tiny.onnx", {"precision": "fp16"}),
])
def test_compiling_a_bundles_model_hlo_reproduces_its_kernels(tmp_path, shared_models, model, options):
    first = mlcc.compile(shared_models / model, tmp_path / "a", targets=["sm_80"], **options)
    again = mlcc.compile(tmp_path / "a" / "model.hlo", tmp_path / "b", targets=["sm_80"])
    assert _files(tmp_path / "b") == _files(tmp_path / "a")  # kernels/*.py, binaries and their metadata
    assert (tmp_path / "b" / "model.hlo").read_text() == (tmp_path / "a" / "model.hlo").read_text()
    assert again.manifest["schedule"] == first.manifest["schedule"]
    assert again.manifest["memory_plan"] == first.manifest["memory_plan"]
    assert again.manifest.get("symbols") == first.manifest.get("symbols")
    assert [r.name for r in again.pass_records] == ["buffer-assignment"]  # the header says the rest was done


TEXT = '''HloModule t, output_names={y}

ENTRY %main {
  %x = f32[4]{0} parameter(0), name=x
  %n = f32[4]{0} negate(%x)
  %m = f32[4]{0} negate(%n)
  %unused = f32[4]{0} exp(%x)
  ROOT %t = (f32[4]{0}) tuple(%m)
}
'''


def test_compiling_ir_text_without_weights_runs_every_phase(tmp_path):
    (tmp_path / "t.hlo").write_text(TEXT)
    result = mlcc.compile(tmp_path / "t.hlo", tmp_path / "b", targets=[])
    assert result.manifest["model"]["format"] == "hlo"
    names = [r.name for r in result.pass_records]
    # the simplify phase opens with the quantized-contraction passes (before cleanup folds dequantized weights)
    assert names[:4] == ["quantized-contraction", "fp8-contraction", "fold-fake-quant", "dce"]
    assert names[-2:] == ["schedule", "buffer-assignment"]
    assert "exp(" not in (tmp_path / "b" / "model.hlo").read_text()


def test_ir_text_whose_weights_are_missing_is_refused(tmp_path):
    (tmp_path / "t.hlo").write_text(TEXT.replace("%unused = f32[4]{0} exp(%x)", '%w = f32[4]{0} constant(), ref="w"'))
    with pytest.raises(InvalidInputError, match="constants refer to weights \\(w\\), but there is no bundle manifest"):
        mlcc.compile(tmp_path / "t.hlo", tmp_path / "b", targets=[])


def _mlcc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_opt_runs_the_named_passes_and_prints_the_ir(tmp_path):
    (tmp_path / "t.hlo").write_text(TEXT)
    r = _mlcc("opt", "t.hlo", "--passes", "dce,algsimp", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ('HloModule t, output_names={y}\n\nENTRY %main {\n  %x = f32[4]{0} parameter(0), name=x\n'
                        '  ROOT %t = (f32[4]{0}) tuple(%x)\n}\n')
    r = _mlcc("opt", "t.hlo", "--passes", "layouts,fusion,schedule", "-o", "out.hlo", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    out = (tmp_path / "out.hlo").read_text()
    assert out.startswith("HloModule t, is_scheduled=true,") and "kind=loop" in out


def test_opt_refuses_unknown_passes_and_phases_without_their_requirements(tmp_path):
    (tmp_path / "t.hlo").write_text(TEXT)
    r = _mlcc("opt", "t.hlo", "--passes", "dce,nope", cwd=tmp_path)
    assert r.returncode == 69 and r.stderr.startswith("mlcc: error: unknown pass nope (passes: ")
    r = _mlcc("opt", "t.hlo", "--passes", "fusion", cwd=tmp_path)
    assert r.returncode == 69
    assert r.stderr.strip().splitlines() == ["mlcc: error: phase fusion requires layouts_assigned: run the phases "
                                             "that establish it first (mlcc/pipeline.py), or start from IR text "
                                             "whose header has it"]


def test_opt_verifies_its_input(tmp_path):
    (tmp_path / "bad.hlo").write_text(TEXT.replace("negate(%n)", "add(%n)"))
    r = _mlcc("opt", "bad.hlo", "--passes", "dce", cwd=tmp_path)
    assert r.returncode == 65, r.stderr
    assert "bad.hlo: invalid IR: %m (add): needs 2 operands, has 1" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_opt_over_a_bundles_model_hlo_reads_its_weights(tmp_path, shared_models):
    mlcc.compile(shared_models / "mlp.onnx", tmp_path / "b", targets=[])
    text = (tmp_path / "b" / "model.hlo").read_text()
    r = _mlcc("opt", "b/model.hlo", "--passes", "dce,cse", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == text  # nothing left to remove: the same text back


BARE_ROOT = '''HloModule t

ENTRY %main {
  %x = f32[5]{0} parameter(0)
  %e = f32[5]{0} exp(%x)
  ROOT %s = f32[5]{0} add(%e, %x)
}
'''


@pytest.mark.parametrize("root", ["bare", "unnamed tuple"])
def test_hand_written_ir_text_without_output_names_returns_its_root(tmp_path, root):
    # A module written by hand names no outputs: its ROOT's value (or a tuple's elements) are its outputs, as
    # XLA reads them (they were dropped: the bundle returned nothing)
    text = BARE_ROOT if root == "bare" else BARE_ROOT.replace(
        "ROOT %s = f32[5]{0} add(%e, %x)", "%s = f32[5]{0} add(%e, %x)\n  ROOT %t = (f32[5]{0}, f32[5]{0}) tuple(%s, %e)")
    (tmp_path / "t.hlo").write_text(text)
    result = mlcc.compile(tmp_path / "t.hlo", tmp_path / "b", targets=[])
    names = ["s"] if root == "bare" else ["s", "e"]
    assert [o["name"] for o in result.manifest["outputs"]] == names
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    got = mlcc.load(result.out_dir).run({"x": x})
    np.testing.assert_allclose(got["s"], np.exp(x) + x, rtol=1e-6)
    if root != "bare":
        np.testing.assert_allclose(got["e"], np.exp(x), rtol=1e-6)


def test_ir_text_past_the_phases_with_a_bare_root_is_refused(tmp_path):
    (tmp_path / "t.hlo").write_text(BARE_ROOT.replace("HloModule t", "HloModule t, is_scheduled=true"))
    with pytest.raises(InvalidInputError, match="ROOT %s is not a tuple"):
        mlcc.compile(tmp_path / "t.hlo", tmp_path / "b", targets=[])
