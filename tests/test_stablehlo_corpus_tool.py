"""tools/run_stablehlo_corpus.py (the StableHLO corpus proxy's runner): its comparison rules against values
built here with numpy and ml_dtypes, and a tiny corpus written here (no JAX) classified end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import run_stablehlo_corpus as corpus  # noqa: E402

BF16 = ml_dtypes.bfloat16


def bf16_next(x: np.ndarray, steps: int) -> np.ndarray:
    return (x.view(np.uint16) + np.uint16(steps)).view(BF16)


def test_half_precision_is_one_ulp_and_integers_exact():
    want = np.array([1.0, 3.140625, 9.875, -2.5], BF16)
    assert corpus.compare(bf16_next(want, 1), want, "mul") is None
    assert "differ" in corpus.compare(bf16_next(want, 2), want, "mul")
    assert "differ" in corpus.compare(np.array([1, 2, 4], np.int32), np.array([1, 2, 3], np.int32), "add")
    assert "dtype" in corpus.compare(want.astype(np.float32), want, "mul")
    assert "shape" in corpus.compare(want[:2], want, "mul")


def test_nan_zero_and_infinity_rules():
    want = np.array([np.nan, 0.0, np.inf, -np.inf, 1.0], np.float32)
    assert corpus.compare(np.array([np.nan, -0.0, np.inf, -np.inf, 1.0], np.float32), want, "sin") is None
    assert corpus.compare(np.array([np.nan, 0.0, np.inf, np.inf, 1.0], np.float32), want, "sin") is not None
    assert corpus.compare(np.array([1.0, 0.0, np.inf, -np.inf, 1.0], np.float32), want, "sin") is not None


def test_relative_tolerance_only_in_approximate_groups():
    want = np.array([0.5, 2.0], np.float32)
    got = want * np.float32(1 + 2e-6)  # ~17 ulps, within f32's rtol 1e-5
    assert corpus.compare(got, want, "exp") is None
    assert corpus.compare(got, want, "add") is not None


def test_load_ref_recovers_bfloat16_from_raw_bits(tmp_path):
    x = np.array([1.5, -3.0, 9.875], BF16)
    np.savez(tmp_path / "c.ref.npz", dtypes=np.array(json.dumps({"arg0": "bfloat16", "out0": "bfloat16"})),
             arg0=x.view(np.uint16), out0=x.view(np.uint16))
    args, outs = corpus.load_ref(tmp_path / "c.ref.npz")
    assert args[0].dtype == BF16 and outs[0].dtype == BF16
    np.testing.assert_array_equal(args[0].astype(np.float32), x.astype(np.float32))


def _case(d: Path, name: str, text: str, args: list[np.ndarray], outs: list[np.ndarray]) -> None:
    (d / f"{name}.mlir").write_text(text)
    arrays = {f"arg{i}": a for i, a in enumerate(args)} | {f"out{i}": o for i, o in enumerate(outs)}
    dtypes = {k: str(v.dtype) for k, v in arrays.items()}
    np.savez(d / f"{name}.ref.npz", dtypes=np.array(json.dumps(dtypes)),
             **{k: v.view(np.uint16) if v.dtype == BF16 else v for k, v in arrays.items()})


def test_a_tiny_corpus_is_classified_and_weighted(tmp_path, capsys):
    t = "tensor<4xbf16>"
    mul = (f"func.func public @main(%arg0: {t}, %arg1: {t}) -> {t} {{\n"
           f"  %0 = stablehlo.multiply %arg0, %arg1 : {t}\n  return %0 : {t}\n}}\n")
    x = np.array([3.140625, 1.5, -2.0, 0.1], BF16)
    right = (x.astype(np.float32) * x.astype(np.float32)).astype(BF16)  # rounded once to nearest even
    _case(tmp_path, "mul_ok", mul, [x, x], [right])
    _case(tmp_path, "mul_wrong", mul, [x, x], [bf16_next(right, 3)])
    u = "tensor<2xf32>"
    custom = (f"func.func public @main(%arg0: {u}) -> {u} {{\n"
              f"  %0 = stablehlo.custom_call @no_such_target_anywhere(%arg0) : ({u}) -> {u}\n  return %0 : {u}\n}}\n")
    v = np.array([1, 2], np.float32)
    _case(tmp_path, "rng", custom, [v], [v])
    (tmp_path / "cases.json").write_text(json.dumps({"mul_ok": "mul", "mul_wrong": "mul", "rng": "rng"}))
    (tmp_path / "groups.json").write_text(json.dumps({"mul": 10, "rng": 30, "jaxonly": 5}))
    (tmp_path / "jax_failed.json").write_text(json.dumps({"jaxonly_x": ["jaxonly", "jax_unimplemented on cpu"]}))
    assert corpus.main([str(tmp_path), "--json", str(tmp_path / "r.json"), "--timeout", "300"]) == 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert {k: v["class"] for k, v in r.items()} == {"mul_ok": "pass", "mul_wrong": "mismatch", "rng": "unsupported"}
    assert "no_such_target_anywhere" in r["rng"]["reason"]
    # mul: 1 of 2 pass, weight 10; rng: 0 of 1, weight 30; jaxonly: no case JAX can run, weight 0
    assert "full-corpus pass rate (cases JAX can run): 12.5%" in capsys.readouterr().out


SORT = ('%0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 0 : i64, is_stable = false}> ({\n'
        '^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>, %d: tensor<i32>):\n  ...\n})')


def test_an_unstable_sort_may_order_tied_keys_differently_and_nothing_else():
    keys = np.array([0, 0, 1, 1], np.int32)
    want = [keys, np.array([5, -5, 7, 2], np.int32)]
    tied_swap = [keys, np.array([-5, 5, 2, 7], np.int32)]  # rows swapped only within equal keys
    across = [keys, np.array([7, -5, 5, 2], np.int32)]  # 7 belongs to key 1
    assert corpus.unstable_sort_ties(tied_swap, want, SORT, "sort_multiple_arrays_num_keys_1")
    assert not corpus.unstable_sort_ties(across, want, SORT, "sort_multiple_arrays_num_keys_1")
    assert not corpus.unstable_sort_ties([np.array([0, 1, 0, 1], np.int32), want[1]], want, SORT, "s_num_keys_1")
    assert not corpus.unstable_sort_ties(tied_swap, want, SORT.replace("false", "true"), "s_num_keys_1")
    # with two keys the second output is a key too: its order is not free
    assert not corpus.unstable_sort_ties(tied_swap, want, SORT, "sort_multiple_arrays_num_keys_2")


def test_approx_top_k_may_return_any_index_of_equal_values():
    text = "mhlo.backend_config = {aggregate_to_topk = true, reduction_dim = 0 : i64, top_k = 2 : i64}"
    x = np.array([1.0, 3.0, 3.0, 2.0], np.float32)
    want = [np.array([3.0, 3.0], np.float32), np.array([1, 2], np.int32)]
    assert corpus.approx_top_k_ties([want[0], np.array([2, 1], np.int32)], want, [x], text)
    assert not corpus.approx_top_k_ties([want[0], np.array([1, 1], np.int32)], want, [x], text)
    assert not corpus.approx_top_k_ties([want[0], np.array([1, 3], np.int32)], want, [x], text)
    assert not corpus.approx_top_k_ties([np.array([3.0, 2.0], np.float32), np.array([1, 3], np.int32)], want, [x],
                                        text)
