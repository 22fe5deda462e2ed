import numpy as np

from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.parser import parse_module
from mlcc.hlo.views import affine_view

QKV = """
ENTRY %main {
  %p = f32[16,192]{1,0} parameter(0)
  %r = f32[1,16,192]{2,1,0} bitcast(%p)
  %s = f32[1,16,64]{2,1,0} slice(%r), start_indices={0,0,64}, limit_indices={1,16,128}, strides={1,1,1}
  %h = f32[1,16,4,16]{3,2,1,0} bitcast(%s)
  %t = f32[1,4,16,16]{3,1,2,0} bitcast(%h)
  %u = f32[1,1,4,16]{3,2,1,0} slice(%t), start_indices={0,1,3,0}, limit_indices={1,2,15,16}, strides={1,1,3,1}
  ROOT %w = f32[16,4,1,1]{3,2,1,0} transpose(%u), dimensions={3,2,1,0}
}"""


def _values(module, x):
    vals = {}
    for i in module.entry.instructions:
        vals[i.name] = x if i.opcode == "parameter" else evaluate_instruction(i, [vals[o.name] for o in i.operands])
    return vals


def test_slices_reshapes_and_transposes_are_offsets_and_strides_into_the_source():
    module = parse_module(QKV)
    x = np.random.default_rng(0).standard_normal((16, 192)).astype(np.float32)
    vals = _values(module, x)
    flat = x.reshape(-1)
    for inst in module.entry.instructions[1:]:
        view = affine_view(inst)
        assert view is not None and view.source.name == "p", inst.name
        want = vals[inst.name]
        idx = np.indices(want.shape).reshape(want.ndim, -1)
        got = flat[view.offset + (np.array(view.strides)[:, None] * idx).sum(0)].reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=inst.name)


def test_a_reshape_across_a_gap_is_not_a_view():
    module = parse_module("""
      ENTRY %main {
        %p = f32[4,8]{1,0} parameter(0)
        %s = f32[4,4]{1,0} slice(%p), start_indices={0,0}, limit_indices={4,4}, strides={1,1}
        ROOT %r = f32[16]{0} bitcast(%s)
      }""")
    assert affine_view(module.entry.root) is None
