"""The pipeline as phases: what each requires and guarantees, the verifier's level, --disable-pass."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from mlcc.errors import InternalError, UnsupportedError
from mlcc.hlo.ir import Property
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.pass_manager import Phase, Pipeline
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import VerifierError, verify_module
from mlcc.pipeline import STEPS, check_disabled, compile_pipeline, pass_names, phases

FUSED = '''HloModule m, output_names={y}

%fused_loop.n {
  %param_0 = f32[4,8]{0,1} parameter(0)
  ROOT %n = f32[4,8]{1,0} negate(%param_0)
}

ENTRY %main {
  %x = f32[4,8]{1,0} parameter(0), name=x
  %fusion.n = f32[4,8]{1,0} fusion(%x), calls=%fused_loop.n, kind=loop
  ROOT %t = (f32[4,8]{1,0}) tuple(%fusion.n)
}
'''


def test_the_phases_in_order_each_guarantee_recorded_once():
    names = [p.name for p in phases()]
    assert names == ["simplify", "recognize", "precision", "layouts", "fusion", "schedule", "buffers"]
    established = [q for p in phases() for q in p.guarantees]
    assert established == list(Property)  # in the order the enum lists them, each by one phase
    assert [s.name for s in STEPS] == ["lowering", "binaries", "bundle"]


def test_every_requirement_is_established_by_an_earlier_phase():
    have: set[Property] = set()
    for p in phases():
        assert p.requires <= have, p.name
        have |= p.guarantees
    for step in STEPS:
        assert step.requires <= have, step.name


def test_the_pipeline_records_guarantees_and_skips_what_the_module_already_has():
    m = parse_module(FUSED.replace("{0,1} parameter(0)\n  ROOT", "{1,0} parameter(0)\n  ROOT"))
    m.properties |= {Property.LAYOUTS_ASSIGNED, Property.FUSED}
    pipeline = compile_pipeline()
    pipeline.run(m)
    assert pipeline.skipped == ["simplify", "recognize", "precision", "layouts", "fusion"]
    assert m.properties == set(Property) and m.buffer_plan is not None
    assert {r.name for r in pipeline.records} == {"schedule", "buffer-assignment"}
    assert format_module(m).startswith("HloModule m, is_scheduled=true,")


def test_a_phase_refuses_a_module_without_what_it_requires():
    m = parse_module(FUSED)
    p = Pipeline("p", [Phase("late", [DeadCodeElimination()], requires=frozenset({Property.SCHEDULED}))])
    with pytest.raises(InternalError, match="phase late requires scheduled"):
        p.run(m)


def test_the_verifier_checks_fusion_layouts_once_layouts_are_assigned():
    m = parse_module(FUSED)
    verify_module(m)  # layouts not final yet: a fused parameter may still differ from its operand
    m.properties.add(Property.LAYOUTS_ASSIGNED)
    with pytest.raises(VerifierError, match="fused parameter %param_0 layout f32\\[4,8\\]\\{0,1\\} differs"):
        verify_module(m)


def test_the_verifier_checks_fusion_bodies_once_fused():
    text = FUSED.replace("{0,1} parameter(0)\n  ROOT", "{1,0} parameter(0)\n  ROOT")
    m = parse_module(text.replace("  ROOT %t = (f32[4,8]{1,0}) tuple(%fusion.n)",
                                  "  %again = f32[4,8]{1,0} fusion(%fusion.n), calls=%fused_loop.n, kind=loop\n"
                                  "  ROOT %t = (f32[4,8]{1,0}) tuple(%again)"))
    verify_module(m)
    m.properties.add(Property.FUSED)
    with pytest.raises(VerifierError, match="fusion body called 2 times, not once"):
        verify_module(m)


def test_the_verifier_checks_the_plan_once_buffers_are_assigned():
    m = parse_module(FUSED)
    m.properties.add(Property.BUFFERS_ASSIGNED)
    with pytest.raises(VerifierError, match="no buffer plan"):
        verify_module(m)


def test_disable_pass_refuses_what_a_later_phase_requires_and_allows_optimizations():
    pipeline = compile_pipeline()
    names = pass_names(pipeline)
    assert {"layout-assignment", "fusion", "schedule", "buffer-assignment", "cse"} <= set(names)
    for name, later in [("layout-assignment", "fusion phase requires layouts_assigned"),
                        ("schedule", "buffers phase requires scheduled"),
                        ("buffer-assignment", "lowering step requires buffers_assigned")]:
        with pytest.raises(UnsupportedError, match=f"cannot disable pass {name}: the {later}"):
            check_disabled(pipeline, [name])
    check_disabled(pipeline, ["fusion", "cse", "algsimp", "recognize-attention", "sink-bitcasts"])
    with pytest.raises(UnsupportedError, match="unknown pass nope"):
        check_disabled(pipeline, ["nope"])


def _mlcc(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_cli_refuses_to_disable_layout_assignment_in_one_line(tmp_path, shared_models):
    shutil.copy(shared_models / "mlp.onnx", tmp_path / "m.onnx")
    r = _mlcc("compile", "m.onnx", "-o", "b", "--target", "none", "--disable-pass", "layout-assignment", cwd=tmp_path)
    assert r.returncode == 69, r.stderr
    assert r.stderr.strip().splitlines() == [
        "mlcc: error: cannot disable pass layout-assignment: the fusion phase requires layouts_assigned, "
        "which it establishes"]
    assert not (tmp_path / "b").exists()
    r = _mlcc("compile", "m.onnx", "-o", "b", "--target", "none", "--disable-pass", "fusion", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "fusion(" not in (tmp_path / "b" / "model.hlo").read_text()


def test_a_phase_whose_guarantee_does_not_hold_fails_verification_naming_it():
    m = parse_module(FUSED)  # a fused parameter's layout differs from its operand's
    p = Pipeline("p", [Phase("layouts", [DeadCodeElimination()], guarantees=frozenset({Property.LAYOUTS_ASSIGNED}))])
    with pytest.raises(InternalError, match="invalid IR after phase layouts \\(passes run before: dce\\): "
                                            "%fusion.n: fused parameter %param_0 layout"):
        p.run(m)
