import pytest

from mlcc.errors import InternalError
from mlcc.hlo.ir import Module
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.pass_manager import FixedPoint, FunctionPass, Pipeline, PipelineOptions

TEXT = """ENTRY %main {
  %p0 = f32[4]{0} parameter(0)
  %dead = f32[4]{0} exp(%p0)
  ROOT %r = f32[4]{0} negate(%p0)
}"""


def _break_shapes(module: Module) -> bool:
    from mlcc.hlo.ir import Shape
    module.entry.root.shape = Shape("f32", (5,))
    return True


def test_a_broken_pass_is_caught_and_named():
    pipeline = Pipeline("p", [DeadCodeElimination(), FunctionPass("break-shapes", _break_shapes)])
    with pytest.raises(InternalError, match=r"invalid IR after pass break-shapes \(passes run before: dce\)"):
        pipeline.run(parse_module(TEXT))


def test_dump_ir_writes_a_file_per_changing_pass(tmp_path):
    pipeline = Pipeline("p", [DeadCodeElimination(), FunctionPass("nothing", lambda m: False)])
    pipeline.run(parse_module(TEXT), PipelineOptions(dump_dir=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00-input.hlo", "01-dce.hlo"]
    assert "%dead" not in (tmp_path / "01-dce.hlo").read_text()


def test_disabled_pass_does_not_run():
    module = parse_module(TEXT)
    Pipeline("p", [DeadCodeElimination()]).run(module, PipelineOptions(disabled=frozenset({"dce"})))
    assert any(i.name == "dead" for i in module.entry.instructions)


def test_fixed_point_group_repeats_until_no_change():
    calls = []

    def shrink(module: Module) -> bool:
        calls.append(1)
        return len(calls) < 3
    pipeline = Pipeline("p", [FixedPoint("g", [FunctionPass("shrink", shrink)])])
    pipeline.run(parse_module(TEXT))
    assert len(calls) == 3
    assert [r.changed for r in pipeline.records] == [True, True, False]
