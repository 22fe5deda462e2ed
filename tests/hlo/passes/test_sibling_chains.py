"""Sibling dots whose weights are computed from packed constants (MatMulNBits, int4 blocked DequantizeLinear)
merged into one dot over the concatenated packed bytes, scales and zero points (mlcc/hlo/passes/
sibling_chains.py, run by merge-sibling-dots): IR text in, IR text out, the same values before and after."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.pass_manager import Pipeline
from mlcc.hlo.passes.sibling_dots import MergeSiblingDots
from tests.hlo.passes.pass_numerics import assert_same_values, check_rewrite, load, run

RNG = np.random.default_rng(5)


def _nbits_weight(name: str, n: int) -> str:
    """MatMulNBits' weight [n, 16] from packed bytes [n, 8], its zero points [n, 2] and scales [n, 2] (two
    blocks of 8 along K), reading the shared nibble shifts and mask."""
    return f"""    %{name}.packed = u8[{n},8]{{1,0}} constant(), ref={name}.packed
    %{name}.bytes = u8[{n},8,2]{{2,1,0}} broadcast(%{name}.packed), dimensions={{0,1}}
    %{name}.shifts = u8[{n},8,2]{{2,1,0}} broadcast(%shifts), dimensions={{2}}
    %{name}.fifteen = u8[{n},8,2]{{2,1,0}} broadcast(%fifteen), dimensions={{}}
    %{name}.shifted = u8[{n},8,2]{{2,1,0}} shift-right-logical(%{name}.bytes, %{name}.shifts)
    %{name}.nibbles = u8[{n},8,2]{{2,1,0}} and(%{name}.shifted, %{name}.fifteen)
    %{name}.q = u8[{n},16]{{1,0}} bitcast(%{name}.nibbles)
    %{name}.qf = f32[{n},16]{{1,0}} convert(%{name}.q)
    %{name}.zero = f32[{n},2]{{1,0}} constant(), ref={name}.zero
    %{name}.zb = f32[{n},2,8]{{2,1,0}} broadcast(%{name}.zero), dimensions={{0,1}}
    %{name}.z = f32[{n},16]{{1,0}} bitcast(%{name}.zb)
    %{name}.scale = f32[{n},2]{{1,0}} constant(), ref={name}.scale
    %{name}.sb = f32[{n},2,8]{{2,1,0}} broadcast(%{name}.scale), dimensions={{0,1}}
    %{name}.s = f32[{n},16]{{1,0}} bitcast(%{name}.sb)
    %{name}.centered = f32[{n},16]{{1,0}} subtract(%{name}.qf, %{name}.z)
    %{name}.w = f32[{n},16]{{1,0}} multiply(%{name}.centered, %{name}.s)
"""


def _constants(sizes: dict[str, int]) -> dict[str, np.ndarray]:
    out = {}
    for name, n in sizes.items():
        out[f"{name}.packed"] = RNG.integers(0, 256, (n, 8)).astype(np.uint8)
        out[f"{name}.zero"] = RNG.integers(0, 16, (n, 2)).astype(np.float32)
        out[f"{name}.scale"] = RNG.uniform(0.01, 0.1, (n, 2)).astype(np.float32)
    return out


def _dot(name: str, n: int, w: str) -> str:
    return (f"    %{name} = f32[2,{n}]{{1,0}} dot(%x, %{w}), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, "
            "rhs_batch_dims={}, rhs_contracting_dims={1}\n")


HEAD = """    %x = f32[2,16]{1,0} parameter(0), name=x
    %shifts = u8[2]{0} constant(), value={0,4}
    %fifteen = u8[] constant(), value={15}
"""
QKV = f"""
  ENTRY %main {{
{HEAD}{_nbits_weight("q", 4)}{_dot("y.q", 4, "q.w")}{_nbits_weight("k", 2)}{_dot("y.k", 2, "k.w")}    ROOT %t = (f32[2,4]{{1,0}}, f32[2,2]{{1,0}}) tuple(%y.q, %y.k)
  }}"""


def _merge() -> Pipeline:
    return Pipeline("merge", [MergeSiblingDots(), DeadCodeElimination()])


def test_nbits_siblings_merge_into_one_dot_over_concatenated_packed_bytes_scales_and_zero_points():
    constants = _constants({"q": 4, "k": 2})
    module = check_rewrite(_merge(), QKV, constants=constants, rtol=1e-5, expected=f"""
      ENTRY %main {{
{HEAD}        %q.packed.1 = u8[6,8]{{1,0}} constant(), ref=merged_weights
        %q.bytes.1 = u8[6,8,2]{{2,1,0}} broadcast(%q.packed.1), dimensions={{0,1}}
        %q.shifts.1 = u8[6,8,2]{{2,1,0}} broadcast(%shifts), dimensions={{2}}
        %q.shifted.1 = u8[6,8,2]{{2,1,0}} shift-right-logical(%q.bytes.1, %q.shifts.1)
        %q.fifteen.1 = u8[6,8,2]{{2,1,0}} broadcast(%fifteen), dimensions={{}}
        %q.nibbles.1 = u8[6,8,2]{{2,1,0}} and(%q.shifted.1, %q.fifteen.1)
        %q.q.1 = u8[6,16]{{1,0}} bitcast(%q.nibbles.1)
        %q.qf.1 = f32[6,16]{{1,0}} convert(%q.q.1)
        %q.zero.1 = f32[6,2]{{1,0}} constant(), ref=merged_weights.1
        %q.zb.1 = f32[6,2,8]{{2,1,0}} broadcast(%q.zero.1), dimensions={{0,1}}
        %q.z.1 = f32[6,16]{{1,0}} bitcast(%q.zb.1)
        %q.centered.1 = f32[6,16]{{1,0}} subtract(%q.qf.1, %q.z.1)
        %q.scale.1 = f32[6,2]{{1,0}} constant(), ref=merged_weights.2
        %q.sb.1 = f32[6,2,8]{{2,1,0}} broadcast(%q.scale.1), dimensions={{0,1}}
        %q.s.1 = f32[6,16]{{1,0}} bitcast(%q.sb.1)
        %q.w.1 = f32[6,16]{{1,0}} multiply(%q.centered.1, %q.s.1)
        %y.q.1 = f32[2,6]{{1,0}} dot(%x, %q.w.1), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{1}}
        %y.q.slice = f32[2,4]{{1,0}} slice(%y.q.1), start_indices={{0,0}}, limit_indices={{2,4}}, strides={{1,1}}
        %y.k.slice = f32[2,2]{{1,0}} slice(%y.q.1), start_indices={{0,4}}, limit_indices={{2,6}}, strides={{1,1}}
        ROOT %t = (f32[2,4]{{1,0}}, f32[2,2]{{1,0}}) tuple(%y.q.slice, %y.k.slice)
      }}""")
    # the packed bytes stay u8, two values a byte: the siblings' rows one after the other
    merged = np.asarray(module.constants["merged_weights"])
    assert merged.dtype == np.uint8
    np.testing.assert_array_equal(merged, np.concatenate([constants["q.packed"], constants["k.packed"]]))


def test_int4_dq_weights_concatenate_along_their_output_axis():
    # a blocked DequantizeLinear weight [K=16, N]: its nibbles packed along N, its scales [2 blocks, N]
    def weight(name: str, n: int) -> str:
        return f"""    %{name}.packed = u8[16,{n // 2}]{{1,0}} constant(), ref={name}.packed
    %{name}.bytes = u8[16,{n // 2},2]{{2,1,0}} broadcast(%{name}.packed), dimensions={{0,1}}
    %{name}.shifts = u8[16,{n // 2},2]{{2,1,0}} broadcast(%shifts), dimensions={{2}}
    %{name}.fifteen = u8[16,{n // 2},2]{{2,1,0}} broadcast(%fifteen), dimensions={{}}
    %{name}.shifted = u8[16,{n // 2},2]{{2,1,0}} shift-right-logical(%{name}.bytes, %{name}.shifts)
    %{name}.nibbles = u8[16,{n // 2},2]{{2,1,0}} and(%{name}.shifted, %{name}.fifteen)
    %{name}.q = u8[16,{n}]{{1,0}} bitcast(%{name}.nibbles)
    %{name}.qf = f32[16,{n}]{{1,0}} convert(%{name}.q)
    %{name}.scale = f32[2,{n}]{{1,0}} constant(), ref={name}.scale
    %{name}.sb = f32[2,8,{n}]{{2,1,0}} broadcast(%{name}.scale), dimensions={{0,2}}
    %{name}.s = f32[16,{n}]{{1,0}} bitcast(%{name}.sb)
    %{name}.w = f32[16,{n}]{{1,0}} multiply(%{name}.qf, %{name}.s)
"""

    def dot(name: str, n: int, w: str) -> str:
        return (f"    %{name} = f32[2,{n}]{{1,0}} dot(%x, %{w}), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, "
                "rhs_batch_dims={}, rhs_contracting_dims={0}\n")
    text = f"""
  ENTRY %main {{
{HEAD}{weight("q", 4)}{dot("y.q", 4, "q.w")}{weight("v", 6)}{dot("y.v", 6, "v.w")}    ROOT %t = (f32[2,4]{{1,0}}, f32[2,6]{{1,0}}) tuple(%y.q, %y.v)
  }}"""
    constants = {"q.packed": RNG.integers(0, 256, (16, 2)).astype(np.uint8),
                 "v.packed": RNG.integers(0, 256, (16, 3)).astype(np.uint8),
                 "q.scale": RNG.uniform(0.01, 0.1, (2, 4)).astype(np.float32),
                 "v.scale": RNG.uniform(0.01, 0.1, (2, 6)).astype(np.float32)}
    changed, module = run(_merge(), text, constants)
    assert changed
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    packed = np.asarray(module.constants["merged_weights"])
    assert packed.shape == (16, 5)  # [16, 2 + 3] bytes: each K row of both weights' bytes
    np.testing.assert_array_equal(packed, np.concatenate([constants["q.packed"], constants["v.packed"]], axis=1))
    assert_same_values(load(text, constants), module)


def test_siblings_whose_chains_differ_stay_apart():
    # the k projection symmetric (no zero point): its chain is not the q projection's
    k_sym = _nbits_weight("k", 2).replace("%k.centered = f32[2,16]{1,0} subtract(%k.qf, %k.z)",
                                          "%k.centered = f32[2,16]{1,0} add(%k.qf, %k.z)")
    text = QKV.replace(_nbits_weight("k", 2), k_sym)
    assert text != QKV
    check_rewrite(MergeSiblingDots(), text, constants=_constants({"q": 4, "k": 2}), expected=None)


def test_a_gated_pair_of_nbits_projections_stays_apart():
    # silu(x @ Wg) * (x @ Wu): the fusion pass accumulates both in one output tile, each weight dequantized in
    # its own B-tile loads
    text = f"""
  ENTRY %main {{
{HEAD}{_nbits_weight("q", 4)}{_dot("y.q", 4, "q.w")}{_nbits_weight("k", 4)}{_dot("y.k", 4, "k.w")}    %g = f32[2,4]{{1,0}} logistic(%y.q)
    %prod = f32[2,4]{{1,0}} multiply(%g, %y.k)
    ROOT %t = (f32[2,4]{{1,0}}) tuple(%prod)
  }}"""
    check_rewrite(MergeSiblingDots(), text, constants=_constants({"q": 4, "k": 4}), expected=None)
