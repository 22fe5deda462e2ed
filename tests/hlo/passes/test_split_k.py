"""Split-K of decode-sized dots whose weight is computed from constants (mlcc/hlo/passes/split_k.py): IR text
in, IR text out, the same values before and after; and the tile heuristic that chooses the slices."""

from __future__ import annotations

import numpy as np

from mlcc.emit.matmul_tiles import dense_split_k_slices, split_k_slices
from mlcc.hlo.passes.split_k import SplitK
from tests.hlo.passes.pass_numerics import check_rewrite

RNG = np.random.default_rng(3)
CONSTANTS = {"packed": RNG.integers(0, 256, (4, 8)).astype(np.uint8)}

# x [2,16] @ dequant(packed)^T, 4 output features, the weight (q - 8) from two nibbles a byte
WEIGHT = """    %x = f32[2,16]{1,0} parameter(0), name=x
    %packed = u8[4,8]{1,0} constant(), ref=packed
    %bytes = u8[4,8,2]{2,1,0} broadcast(%packed), dimensions={0,1}
    %shifts.v = u8[2]{0} constant(), value={0,4}
    %shifts = u8[4,8,2]{2,1,0} broadcast(%shifts.v), dimensions={2}
    %fifteen = u8[4,8,2]{2,1,0} constant(), splat=15
    %shifted = u8[4,8,2]{2,1,0} shift-right-logical(%bytes, %shifts)
    %nibbles = u8[4,8,2]{2,1,0} and(%shifted, %fifteen)
    %q = u8[4,16]{1,0} reshape(%nibbles)
    %qf = f32[4,16]{1,0} convert(%q)
    %eight = f32[4,16]{1,0} constant(), splat=8
    %w = f32[4,16]{1,0} subtract(%qf, %eight)
"""
DECODE_DOT = f"""
  ENTRY %main {{
{WEIGHT}    %y = f32[2,4]{{1,0}} dot(%x, %w), lhs_batch_dims={{}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{}}, rhs_contracting_dims={{1}}
    ROOT %t = (f32[2,4]{{1,0}}) tuple(%y)
  }}"""


def test_a_decode_dot_computing_its_weight_is_split_over_k_and_its_partials_reduced():
    check_rewrite(SplitK(lambda m, n, k, dtype: 4), DECODE_DOT, constants=CONSTANTS, rtol=1e-5, expected=f"""
      ENTRY %main {{
{WEIGHT}        %y.lhs_slices = f32[2,4,4]{{2,1,0}} reshape(%x)
        %y.rhs_slices = f32[4,4,4]{{2,1,0}} reshape(%w)
        %y.partials = f32[4,2,4]{{2,1,0}} dot(%y.lhs_slices, %y.rhs_slices), lhs_batch_dims={{1}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{1}}, rhs_contracting_dims={{2}}
        %y.sum = f32[2,4]{{1,0}} reduce(%y.partials), dimensions={{0}}, kind=add
        ROOT %t = (f32[2,4]{{1,0}}) tuple(%y.sum)
      }}""")


def test_a_dot_of_more_rows_than_decode_or_a_weight_read_as_it_is_is_not_split():
    prefill = DECODE_DOT.replace("f32[2,16]", "f32[32,16]").replace("f32[2,4]", "f32[32,4]")
    check_rewrite(SplitK(lambda m, n, k, dtype: 4), prefill, constants=CONSTANTS, expected=None)
    weight_argument = """
      ENTRY %main {
        %x = f32[2,16]{1,0} parameter(0), name=x
        %w = f32[4,16]{1,0} parameter(1), name=w
        %y = f32[2,4]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
        ROOT %t = (f32[2,4]{1,0}) tuple(%y)
      }"""
    check_rewrite(SplitK(lambda m, n, k, dtype: 4), weight_argument, expected=None)


def test_the_tiles_split_k_until_the_programs_fill_the_sms():
    assert split_k_slices(1, 64, 4096, "f16") == 16      # 1 tile of 64 columns: 16 slices of 256
    assert split_k_slices(1, 1024, 4096, "f16") == 4     # 16 tiles: 4 slices fill 64 of 108 SMs
    assert split_k_slices(1, 8192, 4096, "f16") == 1     # 128 tiles fill the GPU already
    assert split_k_slices(1, 64, 256, "f16") == 1        # a slice keeps at least 256 of K
    assert split_k_slices(32, 64, 4096, "f16") == 1      # not decode-sized


# a classifier at batch 1: x [1,16] @ w [16,4] read as stored (a constant), its bias added after
DENSE_DOT = """
  ENTRY %main {
    %x = f32[1,16]{1,0} parameter(0), name=x
    %w = f32[16,4]{1,0} constant(), ref=dense
    %y = f32[1,4]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %b = f32[1,4]{1,0} constant(), splat=0.5
    %z = f32[1,4]{1,0} add(%y, %b)
    ROOT %t = (f32[1,4]{1,0}) tuple(%z)
  }"""
DENSE = {"dense": RNG.standard_normal((16, 4)).astype(np.float32)}


def test_a_dense_decode_dot_is_split_where_the_dense_heuristic_says_so():
    never = lambda m, n, k, dtype: 1  # noqa: E731  (the weight-prologue heuristic is not asked)
    check_rewrite(SplitK(never, dense=lambda m, n, k, dtype: 2), DENSE_DOT, constants=DENSE, rtol=1e-5, expected="""
      ENTRY %main {
        %x = f32[1,16]{1,0} parameter(0), name=x
        %w = f32[16,4]{1,0} constant(), ref=dense
        %y.lhs_slices = f32[1,2,8]{2,1,0} reshape(%x)
        %y.rhs_slices = f32[2,8,4]{2,1,0} reshape(%w)
        %y.partials = f32[2,1,4]{2,1,0} dot(%y.lhs_slices, %y.rhs_slices), lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
        %y.sum = f32[1,4]{1,0} reduce(%y.partials), dimensions={0}, kind=add
        %b = f32[1,4]{1,0} constant(), splat=0.5
        %z = f32[1,4]{1,0} add(%y.sum, %b)
        ROOT %t = (f32[1,4]{1,0}) tuple(%z)
      }""")
    # without a dense heuristic (or where it says 1) a dense dot stays whole
    check_rewrite(SplitK(lambda m, n, k, dtype: 4), DENSE_DOT, constants=DENSE, expected=None)
    check_rewrite(SplitK(lambda m, n, k, dtype: 4, dense=never), DENSE_DOT, constants=DENSE, expected=None)


def test_the_dense_tiles_split_only_a_long_k_of_a_decode_sized_float_dot():
    # a light CNN's classifier, N = 1000 in 16 tiles of 64 columns: 4 slices fill 64 of the 108 SMs
    assert dense_split_k_slices(1, 1000, 4096, "f32") == 4
    assert dense_split_k_slices(1, 1000, 1024, "f32") == 4     # 4 slices of 256
    assert dense_split_k_slices(1, 1000, 512, "f32") == 1      # K below DENSE_SPLIT_K_MIN_K: a few K steps
    assert dense_split_k_slices(1, 4096, 4096, "f32") == 1     # 64 tiles: 2 slices would pass the 108 SMs
    assert dense_split_k_slices(32, 1000, 4096, "f32") == 1    # not decode-sized
    assert dense_split_k_slices(1, 1000, 4096, "s8") == 1      # integer dots are not split
