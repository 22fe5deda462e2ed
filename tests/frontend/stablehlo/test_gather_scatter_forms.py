"""stablehlo.gather and stablehlo.scatter in every dimension-number form, against the spec's own example and
against a numpy-loop transcription of the spec's index math (shlo_programs.spec_gather / spec_scatter),
through the evaluator and through the generated kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import (assert_same, dims_text, evaluate_text, module_text, run_kernels, spec_gather, spec_scatter,
                           tensor)

rng = np.random.default_rng(7)


def _ints(shape, lo, hi, dtype=np.int32):
    return rng.integers(lo, hi, shape).astype(dtype)


def _floats(shape, dtype=np.float32):
    return rng.uniform(-4, 4, shape).astype(np.float32).astype(dtype)


def gather_text(operand, indices, out_shape, *, offset_dims, collapsed, operand_batching=(), indices_batching=(),
                start_map, ivd, slice_sizes):
    fields = [dims_text("offset_dims", offset_dims), dims_text("collapsed_slice_dims", collapsed),
              dims_text("operand_batching_dims", operand_batching),
              dims_text("start_indices_batching_dims", indices_batching), dims_text("start_index_map", start_map),
              f"index_vector_dim = {ivd}"]
    dn = ", ".join(f for f in fields if not f.endswith("[]"))
    sizes = ", ".join(str(s) for s in slice_sizes)
    body = (f'    %0 = "stablehlo.gather"(%arg0, %arg1) <{{dimension_numbers = #stablehlo.gather<{dn}>, '
            f'indices_are_sorted = true, slice_sizes = array<i64: {sizes}>}}> : '
            f'({tensor(operand.shape, operand.dtype)}, {tensor(indices.shape, indices.dtype)}) -> '
            f'{tensor(out_shape, operand.dtype)}\n    return %0 : {tensor(out_shape, operand.dtype)}')
    return module_text([operand, indices], [(out_shape, operand.dtype)], body)


# (operand, indices, dimension numbers)
GATHERS = {
    "spec_example": (np.arange(1, 25, dtype=np.int64).reshape(3, 4, 2),
                     np.array([[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]], np.int64),
                     dict(offset_dims=[2, 3], collapsed=[0], start_map=[1, 0], ivd=2, slice_sizes=[1, 2, 2])),
    "spec_batching": (np.arange(1, 49, dtype=np.int64).reshape(2, 3, 4, 2),
                      np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                                [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]], np.int64),
                      dict(offset_dims=[3, 4], collapsed=[1], operand_batching=[0], indices_batching=[1],
                           start_map=[2, 1], ivd=3, slice_sizes=[1, 1, 2, 2])),
    "index_vector_first": (_floats((5, 6)), _ints((2, 3), -2, 8),
                           dict(offset_dims=[1], collapsed=[0], start_map=[0, 1], ivd=0, slice_sizes=[1, 3])),
    "offsets_around_batch": (_floats((4, 5, 6)), _ints((3, 1), -1, 6),
                             dict(offset_dims=[0, 2, 3], collapsed=[], start_map=[1], ivd=1, slice_sizes=[2, 3, 6])),
    "vector_in_middle_clamped": (_floats((6, 7)), np.array([[[-5, 0, 3, 99], [2, 6, -1, 4]],
                                                            [[5, 1, 0, 7], [0, 0, 9, -9]]], np.int32),
                                 dict(offset_dims=[2, 3], collapsed=[], start_map=[1, 0], ivd=1, slice_sizes=[2, 3])),
    "scalar_index": (_floats((5, 4)), np.array(3, np.int32),
                     dict(offset_dims=[0], collapsed=[0], start_map=[0], ivd=0, slice_sizes=[1, 4])),
    "batching_before_vector": (_floats((3, 5, 4)), _ints((2, 3), 0, 5),
                               dict(offset_dims=[1], collapsed=[1], operand_batching=[0], indices_batching=[1],
                                    start_map=[1, 2], ivd=0, slice_sizes=[1, 1, 2])),
    "half_operand_u8_indices": (_floats((6, 4), np.float16), _ints((4, 2), 0, 7, np.uint8),
                                dict(offset_dims=[1], collapsed=[0], start_map=[0, 1], ivd=1, slice_sizes=[1, 2])),
    "bf16_permuted_collapsed": (_floats((3, 4, 5), ml_dtypes.bfloat16), _ints((2, 2, 3), 0, 5, np.int64),
                                dict(offset_dims=[], collapsed=[0, 1, 2], start_map=[2, 0, 1], ivd=2,
                                     slice_sizes=[1, 1, 1])),
    "window_and_batch_interleaved": (_ints((4, 6, 3), -50, 50), _ints((2, 3, 2), -1, 5),
                                     dict(offset_dims=[1, 3], collapsed=[2], start_map=[0, 2], ivd=2,
                                          slice_sizes=[2, 4, 1])),
}


def _gather(name):
    operand, indices, dn = GATHERS[name]
    want = spec_gather(operand, indices, **dn)
    return gather_text(operand, indices, want.shape, **dn), [operand, indices], want


def test_the_spec_example_gives_the_spec_result():
    text, inputs, want = _gather("spec_example")
    spec_result = np.array([[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                            [[[9, 10], [11, 12]], [[11, 12], [13, 14]], [[17, 18], [19, 20]]]], np.int64)
    np.testing.assert_array_equal(want, spec_result)  # the loop reads the spec as the spec does
    (got,) = evaluate_text(text, inputs)
    np.testing.assert_array_equal(got, spec_result)


@pytest.mark.parametrize("name", sorted(GATHERS))
def test_gather_form_matches_the_spec(name):
    text, inputs, want = _gather(name)
    (got,) = evaluate_text(text, inputs)
    assert_same(got, want, name)


@pytest.mark.parametrize("name", ["spec_batching", "vector_in_middle_clamped", "bf16_permuted_collapsed",
                                  "window_and_batch_interleaved"])
def test_gather_form_through_kernels(tmp_path, name):
    text, inputs, want = _gather(name)
    (got,) = run_kernels(text, inputs, tmp_path)
    assert_same(got, want, name)


# ---------------------------------------------------------------- scatter
BODIES = {  # name -> (region text for one operand of type T, numpy meaning)
    "add": ("%r = stablehlo.add %a, %b : T", lambda a, b: (a + b,)),
    "max": ("%r = stablehlo.maximum %b, %a : T", lambda a, b: (max(a, b),)),
    "min": ("%r = stablehlo.minimum %a, %b : T", lambda a, b: (min(a, b),)),
    "mul": ("%r = stablehlo.multiply %a, %b : T", lambda a, b: (a * b,)),
    "replace": (None, lambda a, b: (b,)),
    "keep": ("KEEP", lambda a, b: (a,)),
    "subtract": ("%r = stablehlo.subtract %a, %b : T", lambda a, b: (a - b,)),
    "affine": ("%c = stablehlo.constant dense<2.0> : T\n%m = stablehlo.multiply %a, %c : T\n"
               "%r = stablehlo.add %m, %b : T", lambda a, b: (a * np.float32(2) + b,)),
}


def scatter_text(operands, indices, updates, body_lines, *, window_dims, inserted, input_batching=(),
                 indices_batching=(), to_operand, ivd):
    fields = [dims_text("update_window_dims", window_dims), dims_text("inserted_window_dims", inserted),
              dims_text("input_batching_dims", input_batching),
              dims_text("scatter_indices_batching_dims", indices_batching),
              dims_text("scatter_dims_to_operand_dims", to_operand), f"index_vector_dim = {ivd}"]
    dn = ", ".join(f for f in fields if not f.endswith("[]"))
    n = len(operands)
    scalars = [tensor((), o.dtype) for o in operands]
    block_args = ", ".join([f"%old{i}: {t}" for i, t in enumerate(scalars)] +
                           [f"%new{i}: {t}" for i, t in enumerate(scalars)])
    names = [f"%arg{i}" for i in range(2 * n + 1)]
    types = [tensor(o.shape, o.dtype) for o in operands] + [tensor(indices.shape, indices.dtype)] + \
            [tensor(u.shape, u.dtype) for u in updates]
    outs = ", ".join(tensor(o.shape, o.dtype) for o in operands)
    body = (f'    %0:{n} = "stablehlo.scatter"({", ".join(names)}) <{{indices_are_sorted = false, '
            f'scatter_dimension_numbers = #stablehlo.scatter<{dn}>, unique_indices = true}}> ({{\n'
            f'    ^bb0({block_args}):\n{body_lines}\n    }}) : ({", ".join(types)}) -> ({outs})\n'
            f'    return {", ".join(f"%0#{i}" for i in range(n))} : {outs}')
    if n == 1:
        body = body.replace("%0:1 =", "%0 =").replace("%0#0", "%0")
    return module_text(list(operands) + [indices] + list(updates),
                       [(o.shape, o.dtype) for o in operands], body)


def one_body(kind: str, dtype) -> str:
    text = BODIES[kind][0]
    t = tensor((), dtype)
    if text is None:
        return f"      stablehlo.return %new0 : {t}"
    if text == "KEEP":
        return f"      stablehlo.return %old0 : {t}"
    lines = text.replace("%a", "%old0").replace("%b", "%new0").replace("T", t).split("\n")
    return "\n".join("      " + line for line in lines) + f"\n      stablehlo.return %r : {t}"


# (operand, indices, updates, dimension numbers, body)
SCATTERS = {
    "spec_batching_add": (np.arange(1, 49, dtype=np.int64).reshape(2, 3, 4, 2),
                          np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                                    [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]], np.int64),
                          np.ones((2, 2, 3, 2, 2), np.int64),
                          dict(window_dims=[3, 4], inserted=[1], input_batching=[0], indices_batching=[1],
                               to_operand=[2, 1], ivd=3), "add"),
    "windows_out_of_bounds_skipped": (_floats((5, 6)), np.array([[0, 0], [3, 3], [4, 1], [-1, 2]], np.int32),
                                      _floats((4, 2, 3)), dict(window_dims=[1, 2], inserted=[], to_operand=[0, 1],
                                                               ivd=1), "add"),
    "index_vector_first_replace": (_floats((4, 5)), np.array([[0, 4, 2]], np.int32), _floats((4, 3)),
                                   dict(window_dims=[0], inserted=[1], to_operand=[1], ivd=0), "replace"),
    "max_duplicates": (_floats((6, 3)), np.array([1, 4, 1, 1, 5], np.int32), _floats((5, 3)),
                       dict(window_dims=[1], inserted=[0], to_operand=[0], ivd=1), "max"),
    "min_scalar_updates": (_ints((4, 4), -9, 9), _ints((3, 2, 2), 0, 4), _ints((3, 2), -20, 20),
                           dict(window_dims=[], inserted=[0, 1], to_operand=[1, 0], ivd=2), "min"),
    "mul_window_middle": (_floats((3, 4, 5)), np.array([[1], [3]], np.int32), _floats((3, 2, 5)),
                          dict(window_dims=[0, 2], inserted=[1], to_operand=[1], ivd=1), "mul"),
    "keep": (_floats((4, 3)), np.array([[2], [0]], np.int32), _floats((2, 3)),
             dict(window_dims=[1], inserted=[0], to_operand=[0], ivd=1), "keep"),
    "subtract_general_body": (_floats((5, 2)), np.array([3, 0, 3, 9], np.int32), _floats((4, 2)),
                              dict(window_dims=[1], inserted=[0], to_operand=[0], ivd=1), "subtract"),
    "affine_body_batching": (_floats((2, 4)), np.array([[1, 3, 1], [0, 0, 2]], np.int32), _floats((2, 3)),
                             dict(window_dims=[], inserted=[1], input_batching=[0], indices_batching=[0],
                                  to_operand=[1], ivd=2), "affine"),
    "bf16_add_unique": (_floats((6, 4), ml_dtypes.bfloat16), np.array([[5], [0], [2]], np.int32),
                        _floats((3, 4), ml_dtypes.bfloat16),
                        dict(window_dims=[1], inserted=[0], to_operand=[0], ivd=1), "add"),
    "f16_add_window_slices": (_floats((6, 5), np.float16), np.array([[0, 1], [4, 3]], np.int32),
                              _floats((2, 2, 2), np.float16),
                              dict(window_dims=[1, 2], inserted=[], to_operand=[0, 1], ivd=1), "add"),
}


def _scatter(name):
    operand, indices, updates, dn, kind = SCATTERS[name]
    fn = BODIES[kind][1]
    if operand.dtype in (np.float16, ml_dtypes.bfloat16):  # one correctly rounded op per element
        def fn(a, b, _f=BODIES[kind][1], _t=operand.dtype):
            return tuple(np.asarray(v).astype(_t) for v in _f(np.float32(a), np.float32(b)))
    (want,) = spec_scatter([operand], indices, [updates], fn, **dn)
    return scatter_text([operand], indices, [updates], one_body(kind, operand.dtype), **dn), \
        [operand, indices, updates], want


@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_scatter_form_matches_the_spec(name):
    text, inputs, want = _scatter(name)
    (got,) = evaluate_text(text, inputs)
    assert_same(got, want, name)


@pytest.mark.parametrize("name", ["spec_batching_add", "windows_out_of_bounds_skipped", "subtract_general_body",
                                  "bf16_add_unique", "min_scalar_updates"])
def test_scatter_form_through_kernels(tmp_path, name):
    text, inputs, want = _scatter(name)
    (got,) = run_kernels(text, inputs, tmp_path)
    assert_same(got, want, name)


def _two_operand_scatter(general: bool):
    values, keys = _floats((5, 3)), _ints((5, 3), 0, 100)
    indices = np.array([[4], [1], [4], [0]], np.int32)
    new_values, new_keys = _floats((4, 3)), _ints((4, 3), 0, 100)
    tv, tk = tensor((), np.float32), tensor((), np.int32)
    if general:  # keep the pair with the larger key (an argmax-style scatter): not a per-operand reduction
        lines = (f"      %gt = stablehlo.compare GT, %new1, %old1 : ({tk}, {tk}) -> tensor<i1>\n"
                 f"      %v = stablehlo.select %gt, %new0, %old0 : tensor<i1>, {tv}\n"
                 f"      %k = stablehlo.select %gt, %new1, %old1 : tensor<i1>, {tk}\n"
                 f"      stablehlo.return %v, %k : {tv}, {tk}")

        def body(v, k, nv, nk):
            return (nv, nk) if nk > k else (v, k)
    else:
        lines = (f"      %v = stablehlo.add %old0, %new0 : {tv}\n      %k = stablehlo.maximum %old1, %new1 : {tk}\n"
                 f"      stablehlo.return %v, %k : {tv}, {tk}")

        def body(v, k, nv, nk):
            return v + nv, max(k, nk)
    dn = dict(window_dims=[1], inserted=[0], to_operand=[0], ivd=1)
    want = spec_scatter([values, keys], indices, [new_values, new_keys], body, **dn)
    text = scatter_text([values, keys], indices, [new_values, new_keys], lines, **dn)
    return text, [values, keys, indices, new_values, new_keys], want


@pytest.mark.parametrize("general", [False, True], ids=["per_operand", "general_body"])
def test_scatter_of_two_operands(tmp_path, general):
    text, inputs, want = _two_operand_scatter(general)
    for got, w in zip(evaluate_text(text, inputs), want):
        assert_same(got, w)
    for got, w in zip(run_kernels(text, inputs, tmp_path), want):
        assert_same(got, w)
