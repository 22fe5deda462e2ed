"""The attention kernel of a multi-output fusion (mlcc/hlo/passes/multi_output.py): it computes k and v as
concat(past, new) tile by tile and stores them into the present caches, its second and third results; every
result against the reference evaluator, with the interpreter's tiles (one query block) and with small tiles
where the causal limit and the sliding window skip key blocks the writing program must still store."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mlcc.emit.codegen.attention  # noqa: F401  (registers fusion:attention)
from mlcc.emit.codegen.kernel import cdiv, lower
from mlcc.errors import UnsupportedError
from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def cache_append(sq: int, past: int, causal: bool, window: int | None = None, heads: int = 4,
                 kv_heads: int = 2, results: str = "%a, %k, %v") -> str:
    """q [1, heads, sq, 8]; k and v the concatenation of a past cache [1, kv_heads, past, 8] and the step's
    rows; the fusion returns the attention and (by default) both present caches."""
    sk = past + sq
    q, c, n = f"f32[1,{heads},{sq},8]{{3,2,1,0}}", f"f32[1,{kv_heads},{sk},8]{{3,2,1,0}}", \
        f"f32[1,{kv_heads},{sq},8]{{3,2,1,0}}"
    p = f"f32[1,{kv_heads},{past},8]{{3,2,1,0}}"
    types = {"%a": q, "%k": c, "%v": c}
    names = [r.strip() for r in results.split(",")]
    shape = "(" + ", ".join(types[r] for r in names) + ")"
    attrs = f"scale=0.35, causal={'true' if causal else 'false'}" + (f", window={window}" if window else "")
    return f"""
%fused {{
  %q = {q} parameter(0)
  %pk = {p} parameter(1)
  %nk = {n} parameter(2)
  %pv = {p} parameter(3)
  %nv = {n} parameter(4)
  %k = {c} concatenate(%pk, %nk), dimension=2
  %v = {c} concatenate(%pv, %nv), dimension=2
  %a = {q} attention(%q, %k, %v), {attrs}
  ROOT %t = {shape} tuple({results})
}}
ENTRY %main {{
  %q = {q} parameter(0)
  %pk = {p} parameter(1)
  %nk = {n} parameter(2)
  %pv = {p} parameter(3)
  %nv = {n} parameter(4)
  ROOT %f = {shape} fusion(%q, %pk, %nk, %pv, %nv), kind=attention, calls=%fused
}}
"""


def check(text: str, **tiles: int) -> None:
    module = parse_module(text)
    verify_module(module)
    inst = module.entry.root
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([int(d) for d in op.shape.dims]).astype(np.float32) for op in inst.operands]
    kernel = lower(inst, "fused_kernel_under_test")
    config = kernel.interpreter
    if tiles:
        sq = int(inst.operands[0].shape.dims[2])
        config = dataclasses.replace(config, constexprs={**config.constexprs, **tiles},
                                     grid=(cdiv(sq, tiles["BLOCK_M"]),) + tuple(config.grid[1:]))
    got = run_kernel(kernel, inst, inputs, config)
    want = evaluate_instruction(inst, inputs, {})
    assert len(got) == len(want) == len(inst.shape.elements)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


def test_a_decode_step_stores_both_present_caches():
    check(cache_append(sq=1, past=15, causal=False, heads=4, kv_heads=4))


@pytest.mark.parametrize("tiles", [{}, {"BLOCK_M": 16, "BLOCK_N": 16}])
def test_causal_grouped_query_caches_are_whole_though_early_query_blocks_skip_late_keys(tiles):
    # with 16-query blocks the first block sees keys up to 40 of 64: the keys after are stored by its tail loop
    check(cache_append(sq=40, past=24, causal=True), **tiles)


def test_a_sliding_window_skips_early_key_blocks_that_the_writer_still_stores():
    check(cache_append(sq=20, past=44, causal=True, window=8), BLOCK_M=16, BLOCK_N=16)


def test_one_cache_only():
    check(cache_append(sq=1, past=15, causal=False, results="%a, %v"))


def test_a_result_that_is_not_k_or_v_is_refused():
    module = parse_module(cache_append(sq=1, past=15, causal=False, results="%a, %k, %k"))
    verify_module(module)
    with pytest.raises(UnsupportedError, match="not the attention's computed k or v"):
        lower(module.entry.root, "fused_kernel_under_test")
