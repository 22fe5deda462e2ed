"""The unfused baseline the fused/unfused ratios divide by: one kernel per source op, views free."""

from __future__ import annotations

from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.unfused import unfused_stats


def test_a_view_launches_nothing_and_moves_no_bytes():
    # Unsqueeze (a reshape) between two ops: the baseline is the two ops, each reading its input once and
    # writing its output once (64 B each way), as if the reshape were not there
    module = parse_module("""
      ENTRY %main {
        %x = f32[16]{0} parameter(0), name=x
        %n = f32[16]{0} negate(%x), origin={Neg}
        %r = f32[1,16]{1,0} reshape(%n), origin={Unsqueeze}
        %e = f32[1,16]{1,0} exp(%r), origin={Exp}
        ROOT %t = (f32[1,16]{1,0}) tuple(%e)
      }""")
    stats = unfused_stats(module)
    assert (stats.launches, stats.bytes) == (2, 4 * 64)


def test_a_transpose_is_a_copy_and_counts():
    module = parse_module("""
      ENTRY %main {
        %x = f32[4,4]{1,0} parameter(0), name=x
        %t = f32[4,4]{1,0} transpose(%x), dimensions={1,0}, origin={Transpose}
        %e = f32[4,4]{1,0} exp(%t), origin={Exp}
        ROOT %r = (f32[4,4]{1,0}) tuple(%e)
      }""")
    stats = unfused_stats(module)
    assert (stats.launches, stats.bytes) == (2, 4 * 64)
