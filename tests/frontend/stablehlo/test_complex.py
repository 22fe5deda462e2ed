"""Complex element types (complex<f32>, complex<f64>) and stablehlo.fft against numpy (np.fft, complex128
arithmetic on the same inputs), through the evaluator and through the generated kernels; the spec's examples.

Complex arguments and results of @main are real tensors with a last dim of 2 in the IR (marked complex): the
evaluator and a bundle take and give them as complex arrays (tests/frontend/stablehlo/test_complex_io.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from shlo_programs import MLIR_TYPES, run_kernels

import mlcc
from mlcc.frontend.stablehlo import StableHLOParseError, StableHLOUnsupportedError, import_stablehlo
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

rng = np.random.default_rng(22)
TYPES = {**MLIR_TYPES, np.dtype(np.complex64): "complex<f32>", np.dtype(np.complex128): "complex<f64>"}
COMPLEX = [np.complex64, np.complex128]
PART = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}


def tensor(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + TYPES[np.dtype(dtype)] + ">"


def program(args, results, body: str) -> str:
    params = ", ".join(f"%arg{i}: {tensor(a.shape, a.dtype)}" for i, a in enumerate(args))
    outs = ", ".join(tensor(s, d) for s, d in results)
    return f"module @m {{\n  func.func public @main({params}) -> ({outs}) {{\n{body}\n  }}\n}}\n"


def evaluate_text(text: str, inputs, complex_out) -> list[np.ndarray]:
    """The evaluator takes complex arguments and gives complex results as complex arrays."""
    module = import_stablehlo(text)
    verify_module(module)
    out = evaluate(module, {f"arg{i}": x for i, x in enumerate(inputs)})
    got = [out[n] for n in module.output_names]
    assert [g.dtype.kind == "c" for g in got] == [bool(c) for c in complex_out]
    return got


def tolerance(dtype) -> dict:
    return {"rtol": 2e-5, "atol": 2e-6} if np.dtype(dtype) in (np.complex64, np.float32) else \
        {"rtol": 1e-11, "atol": 1e-12}


def check(got, want, dtype, what=""):
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, err_msg=what, **tolerance(dtype))


def cplx(*shape, dtype=np.complex64, scale=1.0):
    return (scale * (rng.uniform(-1.5, 1.5, shape) + 1j * rng.uniform(-1.5, 1.5, shape))).astype(dtype)


# ---------------------------------------------------------------- elementwise, against complex128 numpy
UNARY = {
    "negate": lambda z: -z, "abs": np.abs, "sign": lambda z: z / np.abs(z), "exponential": np.exp,
    "exponential_minus_one": np.expm1, "log": np.log, "log_plus_one": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda z: 1 / np.sqrt(z), "sine": np.sin, "cosine": np.cos, "tan": np.tan, "tanh": np.tanh,
    "logistic": lambda z: 1 / (1 + np.exp(-z)),
}


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    z = cplx(3, 5, dtype=dtype)
    z[0, 0] = 0.25j if name not in ("log", "rsqrt", "sign") else z[0, 0]  # on the imaginary axis
    z[0, 1] = -0.75  # on the real axis: the branch cut of log and sqrt from above (+0 imaginary part)
    z[0, 2] = 1e-4 + 2e-4j  # near 0 (expm1, log1p without cancellation)
    z[0, 3] = complex(-0.5, -0.0)  # below the branch cut (the imaginary part's sign decides log's and sqrt's)
    want = UNARY[name](z.astype(np.complex128))
    out_t = PART[np.dtype(dtype)] if name == "abs" else dtype
    text = program([z], [(z.shape, out_t)],
                   f"    %0 = stablehlo.{name} %arg0 : ({tensor(z.shape, dtype)}) -> {tensor(z.shape, out_t)}\n"
                   f"    return %0 : {tensor(z.shape, out_t)}")
    (got,) = evaluate_text(text, [z], [name != "abs"])
    rtol = {"tan": 20, "tanh": 20}.get(name, 4)
    np.testing.assert_allclose(got, want, rtol=rtol * tolerance(dtype)["rtol"], atol=tolerance(dtype)["atol"],
                               err_msg=name)


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "power": np.power}


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    x, y = cplx(4, 6, dtype=dtype), cplx(4, 6, dtype=dtype)
    if name == "divide":  # a tiny and a huge divisor: Smith's formula neither overflows nor underflows
        big = 1e30 if dtype == np.complex64 else 1e300
        y[0, 0], y[0, 1], x[0, 1] = complex(big, big / 2), complex(1 / big, -2 / big), complex(1 / big, 1 / big)
    if name == "power":  # 0 to the power 0 is 1; to a power with a positive real part, 0
        x[0, :2], y[0, :2] = 0, [0, 1.5 - 0.5j]
    t = tensor(x.shape, dtype)
    text = program([x, y], [(x.shape, dtype)], f"    %0 = stablehlo.{name} %arg0, %arg1 : {t}\n    return %0 : {t}")
    (got,) = evaluate_text(text, [x, y], [True])
    want = BINARY[name](x.astype(np.complex128), y.astype(np.complex128))
    np.testing.assert_allclose(got, want, rtol=(10 if name == "power" else 2) * tolerance(dtype)["rtol"],
                               atol=tolerance(dtype)["atol"], err_msg=name)


def test_abs_does_not_overflow_and_sign_of_zero_is_zero():
    z = np.array([2e38 + 2e38j, 0j, -4 + 3j, complex(np.inf, 1)], np.complex64)
    t, r = tensor(z.shape, z.dtype), tensor(z.shape, np.float32)
    text = program([z], [(z.shape, np.float32), (z.shape, z.dtype)],
                   f"    %0 = stablehlo.abs %arg0 : ({t}) -> {r}\n    %1 = stablehlo.sign %arg0 : {t}\n"
                   f"    return %0, %1 : {r}, {t}")
    magnitude, sign = evaluate_text(text, [z], [False, True])
    np.testing.assert_allclose(magnitude[:3], [np.float32(2e38) * np.sqrt(2), 0, 5], rtol=1e-6)
    assert magnitude[3] == np.inf
    np.testing.assert_allclose(sign[1:3], [0, -0.8 + 0.6j], rtol=1e-6)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_compare_select_real_imag_complex_conj(dtype):
    x, y = cplx(2, 4, dtype=dtype), cplx(2, 4, dtype=dtype)
    y[0, :2] = x[0, :2]
    y[1, 0] = complex(x[1, 0].real, -x[1, 0].imag)  # equal real parts only
    t, p, r = tensor(x.shape, dtype), tensor(x.shape, np.bool_), tensor(x.shape, PART[np.dtype(dtype)])
    body = (f"    %eq = stablehlo.compare EQ, %arg0, %arg1 : ({t}, {t}) -> {p}\n"
            f"    %ne = stablehlo.compare NE, %arg0, %arg1 : ({t}, {t}) -> {p}\n"
            f"    %s = stablehlo.select %eq, %arg0, %arg1 : {p}, {t}\n"
            f"    %re = stablehlo.real %arg0 : ({t}) -> {r}\n    %im = stablehlo.imag %arg1 : ({t}) -> {r}\n"
            f"    %c = stablehlo.complex %im, %re : {t}\n    %j = chlo.conj %c : {t} -> {t}\n"
            f"    return %eq, %ne, %s, %j : {p}, {p}, {t}, {t}")
    eq, ne, sel, conj = evaluate_text(program([x, y], [(x.shape, np.bool_)] * 2 + [(x.shape, dtype)] * 2, body),
                                      [x, y], [False, False, True, True])
    np.testing.assert_array_equal(eq, x == y)
    np.testing.assert_array_equal(ne, x != y)
    np.testing.assert_array_equal(sel, np.where(x == y, x, y))
    np.testing.assert_array_equal(conj, y.imag - 1j * x.real)


def test_convert_between_complex_and_real():
    z, f = cplx(3, dtype=np.complex64), rng.uniform(-2, 2, 3).astype(np.float32)
    c64, c128, f32 = tensor((3,), np.complex64), tensor((3,), np.complex128), tensor((3,), np.float32)
    body = (f"    %0 = stablehlo.convert %arg0 : ({c64}) -> {c128}\n    %1 = stablehlo.convert %arg1 : ({f32}) -> {c64}\n"
            f"    %2 = stablehlo.convert %arg0 : ({c64}) -> {f32}\n    return %0, %1, %2 : {c128}, {c64}, {f32}")
    wide, made, real = evaluate_text(program([z, f], [((3,), np.complex128), ((3,), np.complex64), ((3,), np.float32)],
                                             body), [z, f], [True, True, False])
    np.testing.assert_array_equal(wide, z.astype(np.complex128))
    np.testing.assert_array_equal(made, f.astype(np.complex64))  # imaginary part 0
    np.testing.assert_array_equal(real, z.real)


@pytest.mark.parametrize("literal, want", [
    ("dense<[[(1.0, 2.0), (3.5, -4.0)], [(0.0, -0.5), (1.000000e+03, 2)]]>", [[1 + 2j, 3.5 - 4j], [-0.5j, 1000 + 2j]]),
    ("dense<(1.5, -2.0)>", [[1.5 - 2j] * 2] * 2),
    ("hex splat", [[1 + 2j] * 2] * 2),  # the bytes of one element: its real part's, then its imaginary part's
    ("hex", [[1 + 2j, 3 + 4j], [1j, -0.0]]),
])
@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_constants(literal, want, dtype):
    values = np.array(want, np.complex128).astype(dtype)
    if literal.startswith("hex"):
        data = values.reshape(-1)[:1] if literal == "hex splat" else values
        literal = f'dense<"0x{data[..., None].view(PART[np.dtype(dtype)]).astype("<f" + str(values.itemsize // 2)).tobytes().hex().upper()}">'
    t = tensor((2, 2), dtype)
    text = program([], [((2, 2), dtype)], f"    %0 = stablehlo.constant {literal} : {t}\n    return %0 : {t}")
    (got,) = evaluate_text(text, [], [True])
    np.testing.assert_array_equal(got, values)


# ---------------------------------------------------------------- data movement and contractions
@pytest.mark.parametrize("dtype", COMPLEX)
def test_data_movement(dtype):
    x = cplx(2, 3, 4, dtype=dtype)
    u = cplx(2, 2, 4, dtype=dtype)
    i32 = tensor((), np.int32)
    t = tensor(x.shape, dtype)
    s = lambda *shape: tensor(shape, dtype)  # noqa: E731
    body = f"""    %i1 = stablehlo.constant dense<1> : {i32}
    %i0 = stablehlo.constant dense<0> : {i32}
    %pv = stablehlo.constant dense<(0.5, -1.0)> : {s()}
    %0 = stablehlo.reshape %arg0 : ({t}) -> {s(6, 4)}
    %1 = stablehlo.transpose %arg0, dims = [2, 0, 1] : ({t}) -> {s(4, 2, 3)}
    %2 = stablehlo.slice %arg0 [0:2, 1:3, 0:4:2] : ({t}) -> {s(2, 2, 2)}
    %3 = stablehlo.concatenate %arg0, %arg1, dim = 1 : ({t}, {s(2, 2, 4)}) -> {s(2, 5, 4)}
    %4 = stablehlo.broadcast_in_dim %arg1, dims = [0, 2, 3] : ({s(2, 2, 4)}) -> {s(2, 3, 2, 4)}
    %5 = stablehlo.pad %arg0, %pv, low = [0, 1, 0], high = [1, 0, 0], interior = [0, 0, 1] : ({t}, {s()}) -> {s(3, 4, 7)}
    %6 = stablehlo.reverse %arg0, dims = [1, 2] : {t}
    %7 = stablehlo.dynamic_slice %arg0, %i0, %i1, %i1, sizes = [2, 2, 3] : ({t}, {i32}, {i32}, {i32}) -> {s(2, 2, 3)}
    %8 = stablehlo.dynamic_update_slice %arg0, %arg1, %i0, %i1, %i0 : ({t}, {s(2, 2, 4)}, {i32}, {i32}, {i32}) -> {t}
    return %0, %1, %2, %3, %4, %5, %6, %7, %8 : {s(6, 4)}, {s(4, 2, 3)}, {s(2, 2, 2)}, {s(2, 5, 4)}, {s(2, 3, 2, 4)}, {s(3, 4, 7)}, {t}, {s(2, 2, 3)}, {t}"""
    padded = np.full((3, 4, 7), 0.5 - 1j, dtype)
    padded[:2, 1:, ::2] = x
    updated = x.copy()
    updated[:, 1:3, :] = u
    wants = [x.reshape(6, 4), x.transpose(2, 0, 1), x[0:2, 1:3, 0:4:2], np.concatenate([x, u], 1),
             np.broadcast_to(u[:, None], (2, 3, 2, 4)), padded, x[:, ::-1, ::-1], x[:, 1:3, 1:4], updated]
    got = evaluate_text(program([x, u], [(w.shape, dtype) for w in wants], body), [x, u], [True] * len(wants))
    for k, (g, w) in enumerate(zip(got, wants)):
        np.testing.assert_array_equal(g, w, err_msg=f"result {k}")


@pytest.mark.parametrize("dtype", COMPLEX)
def test_gather_and_scatter_add(dtype):
    x = cplx(5, 3, dtype=dtype)
    idx = np.array([[4], [0], [2], [4]], np.int32)
    upd = cplx(4, 3, dtype=dtype)
    t, it, ut, st = tensor(x.shape, dtype), tensor(idx.shape, np.int32), tensor(upd.shape, dtype), tensor((), dtype)
    body = f"""    %g = "stablehlo.gather"(%arg0, %arg1) <{{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>}}> : ({t}, {it}) -> {ut}
    %s = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}> ({{
    ^bb0(%a: {st}, %b: {st}):
      %r = stablehlo.add %a, %b : {st}
      stablehlo.return %r : {st}
    }}) : ({t}, {it}, {ut}) -> {t}
    return %g, %s : {ut}, {t}"""
    gathered, scattered = evaluate_text(program([x, idx, upd], [(upd.shape, dtype), (x.shape, dtype)], body),
                                        [x, idx, upd], [True, True])
    np.testing.assert_array_equal(gathered, x[idx[:, 0]])
    want = x.astype(np.complex128)
    np.add.at(want, idx[:, 0], upd)
    check(scattered, want, dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_dot_general_and_reductions(dtype):
    a, b = cplx(2, 3, 4, dtype=dtype), cplx(2, 4, 5, dtype=dtype)
    r = rng.uniform(-1, 1, (2, 4, 5)).astype(PART[np.dtype(dtype)])
    x = cplx(3, 7, dtype=dtype)
    s = lambda *shape: tensor(shape, dtype)  # noqa: E731
    rt = tensor(r.shape, r.dtype)
    body = f"""    %d = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1] : ({s(2, 3, 4)}, {s(2, 4, 5)}) -> {s(2, 3, 5)}
    %rc = stablehlo.convert %arg2 : ({rt}) -> {s(2, 4, 5)}
    %m = stablehlo.dot_general %arg0, %rc, batching_dims = [0] x [0], contracting_dims = [2] x [1] : ({s(2, 3, 4)}, {s(2, 4, 5)}) -> {s(2, 3, 5)}
    %z = stablehlo.constant dense<(0.0, 0.0)> : {s()}
    %one = stablehlo.constant dense<(1.0, 0.0)> : {s()}
    %init = stablehlo.constant dense<(0.5, 2.0)> : {s()}
    %sum = stablehlo.reduce(%arg3 init: %z) applies stablehlo.add across dimensions = [1] : ({s(3, 7)}, {s()}) -> {s(3)}
    %prod = stablehlo.reduce(%arg3 init: %one) applies stablehlo.multiply across dimensions = [1] : ({s(3, 7)}, {s()}) -> {s(3)}
    %prod2 = stablehlo.reduce(%arg3 init: %init) applies stablehlo.multiply across dimensions = [0, 1] : ({s(3, 7)}, {s()}) -> {s()}
    return %d, %m, %sum, %prod, %prod2 : {s(2, 3, 5)}, {s(2, 3, 5)}, {s(3)}, {s(3)}, {s()}"""
    got = evaluate_text(program([a, b, r, x], [((2, 3, 5), dtype)] * 2 + [((3,), dtype)] * 2 + [((), dtype)], body),
                        [a, b, r, x], [True] * 5)
    w = [np.einsum("bij,bjk->bik", a.astype(complex), b.astype(complex)),
         np.einsum("bij,bjk->bik", a.astype(complex), r.astype(float)),
         x.astype(complex).sum(1), x.astype(complex).prod(1), (0.5 + 2j) * x.astype(complex).prod()]
    for k, (g, want) in enumerate(zip(got, w)):
        np.testing.assert_allclose(g, want, rtol=10 * tolerance(dtype)["rtol"], atol=tolerance(dtype)["atol"],
                                   err_msg=f"result {k}")


# ---------------------------------------------------------------- fft
def fft_program(kind: str, x_shape, dtype, lengths) -> tuple[str, tuple, np.dtype]:
    part = PART[np.dtype(dtype)]
    n_last = lengths[-1]
    in_shape = tuple(x_shape)
    if kind == "RFFT":
        out_shape, in_t, out_t = in_shape[:-1] + (n_last // 2 + 1,), part, dtype
    elif kind == "IRFFT":
        out_shape, in_t, out_t = in_shape[:-1] + (n_last,), dtype, part
    else:
        out_shape, in_t, out_t = in_shape, dtype, dtype
    length = ", ".join(map(str, lengths))
    body = (f"    %0 = stablehlo.fft %arg0, type = {kind}, length = [{length}] : "
            f"({tensor(in_shape, in_t)}) -> {tensor(out_shape, out_t)}\n    return %0 : {tensor(out_shape, out_t)}")
    return program([np.zeros(in_shape, in_t)], [(out_shape, out_t)], body), out_shape, np.dtype(in_t)


NUMPY_FFT = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn}


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("kind", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("lengths", [(8,), (7,), (3, 6), (2, 5, 4)])
def test_fft(kind, lengths, dtype):
    k = len(lengths)
    batch = (2,)
    axes = tuple(range(-k, 0))
    if kind == "IRFFT":
        full = cplx(*batch, *lengths, dtype=np.complex128)
        x = np.fft.rfftn(np.fft.ifftn(full, axes=axes).real, axes=axes).astype(dtype)  # a Hermitian spectrum
        want = np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)
    elif kind == "RFFT":
        x = rng.uniform(-1, 1, batch + lengths).astype(PART[np.dtype(dtype)])
        want = np.fft.rfftn(x.astype(np.float64), axes=axes)
    else:
        x = cplx(*batch, *lengths, dtype=dtype)
        want = NUMPY_FFT[kind](x.astype(np.complex128), axes=axes)
    text, out_shape, _ = fft_program(kind, x.shape, dtype, lengths)
    (got,) = evaluate_text(text, [x], [kind != "IRFFT"])
    assert got.shape == out_shape
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=scale * (2e-6 if dtype == np.complex64 else 1e-13) * max(lengths),
                               err_msg=f"{kind} {lengths}")


# ---------------------------------------------------------------- the spec's examples
def test_spec_examples_complex_real_imag_fft():
    f2, c2, c4 = tensor((2,), np.float64), tensor((2,), np.complex128), tensor((4,), np.complex64)
    body = f"""    %lhs = stablehlo.constant dense<[1.0, 3.0]> : {f2}
    %rhs = stablehlo.constant dense<[2.0, 4.0]> : {f2}
    %c = stablehlo.complex %lhs, %rhs : {c2}
    %op = stablehlo.constant dense<[(1.0, 2.0), (3.0, 4.0)]> : {c2}
    %re = stablehlo.real %op : ({c2}) -> {f2}
    %im = stablehlo.imag %op : ({c2}) -> {f2}
    %fo = stablehlo.constant dense<[(1.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]> : {c4}
    %f = stablehlo.fft %fo, type = FFT, length = [4] : ({c4}) -> {c4}
    return %c, %re, %im, %f : {c2}, {f2}, {f2}, {c4}"""
    c, re, im, f = evaluate_text(program([], [((2,), np.complex128), ((2,), np.float64), ((2,), np.float64),
                                              ((4,), np.complex64)], body), [], [True, False, False, True])
    np.testing.assert_array_equal(c, [1 + 2j, 3 + 4j])
    np.testing.assert_array_equal(re, [1.0, 3.0])
    np.testing.assert_array_equal(im, [2.0, 4.0])
    np.testing.assert_array_equal(f, [1, 1, 1, 1])


def test_generic_form_fft_and_complex_in_a_called_function():
    t = tensor((2, 4), np.complex64)
    text = f"""module @m {{
  func.func public @main(%arg0: {t}) -> {t} {{
    %0 = call @twice(%arg0) : ({t}) -> {t}
    %1 = "stablehlo.fft"(%0) <{{fft_length = array<i64: 4>, fft_type = #stablehlo<fft_type IFFT>}}> : ({t}) -> {t}
    return %1 : {t}
  }}
  func.func private @twice(%x: {t}) -> {t} {{
    %0 = stablehlo.add %x, %x : {t}
    return %0 : {t}
  }}
}}
"""
    x = cplx(2, 4)
    (got,) = evaluate_text(text, [x], [True])
    check(got, np.fft.ifft(2 * x.astype(np.complex128), axis=-1), np.complex64)


# ---------------------------------------------------------------- kernels, bundles
def kernel_program(n: int) -> str:
    """Real parts in, real parts out: z = complex(a, b); w = fft(z * z / (z + 2)) . exp(z)^T, summed rows."""
    f, c = tensor((3, n), np.float32), tensor((3, n), np.complex64)
    cc, cr, r3 = tensor((3, 3), np.complex64), tensor((3,), np.complex64), tensor((3,), np.float32)
    s = tensor((), np.complex64)
    body = f"""    %z = stablehlo.complex %arg0, %arg1 : {c}
    %two = stablehlo.constant dense<(2.0, 0.0)> : {c}
    %p = stablehlo.multiply %z, %z : {c}
    %q = stablehlo.add %z, %two : {c}
    %d = stablehlo.divide %p, %q : {c}
    %f = stablehlo.fft %d, type = FFT, length = [{n}] : ({c}) -> {c}
    %e = stablehlo.exponential %z : {c}
    %m = stablehlo.dot_general %f, %e, contracting_dims = [1] x [1] : ({c}, {c}) -> {cc}
    %zero = stablehlo.constant dense<(0.0, 0.0)> : {s}
    %r = stablehlo.reduce(%m init: %zero) applies stablehlo.add across dimensions = [1] : ({cc}, {s}) -> {cr}
    %re = stablehlo.real %r : ({cr}) -> {r3}
    %im = stablehlo.imag %r : ({cr}) -> {r3}
    %a = stablehlo.abs %d : ({c}) -> {f}
    return %re, %im, %a : {r3}, {r3}, {f}"""
    a = np.zeros((3, n), np.float32)
    return program([a, a], [((3,), np.float32), ((3,), np.float32), ((3, n), np.float32)], body)


def kernel_reference(a, b):
    z = a.astype(np.float64) + 1j * b.astype(np.float64)
    d = z * z / (z + 2)
    r = (np.fft.fft(d, axis=1) @ np.exp(z).T).sum(1)
    return [r.real, r.imag, np.abs(d)]


def test_complex_program_through_the_kernels(tmp_path):
    a, b = rng.uniform(-1, 1, (3, 6)).astype(np.float32), rng.uniform(-1, 1, (3, 6)).astype(np.float32)
    got = run_kernels(kernel_program(6), [a, b], tmp_path)
    for g, w in zip(got, kernel_reference(a, b)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_complex_program_on_sim_sm_90(tmp_path):
    a, b = rng.uniform(-1, 1, (3, 8)).astype(np.float32), rng.uniform(-1, 1, (3, 8)).astype(np.float32)
    (tmp_path / "p.mlir").write_text(kernel_program(8))
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=["sm_90"])
    got = mlcc.load(tmp_path / "b", device="sim:sm_90").run({"arg0": a, "arg1": b})
    for k, w in enumerate(kernel_reference(a, b)):
        np.testing.assert_allclose(got[f"out{k}"], w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_a_complex_literal_for_a_real_type_is_a_parse_error():
    text = "func.func @main() -> tensor<f32> {\n  %0 = stablehlo.constant dense<(1.0, 2.0)> : tensor<f32>\n" \
           "  return %0 : tensor<f32>\n}\n"
    with pytest.raises(StableHLOParseError, match="2:27: complex literal for the real type f32"):
        import_stablehlo(text)


def test_ops_without_a_complex_form_are_refused_by_name():
    t = tensor((3,), np.complex64)
    text = f"func.func @main(%arg0: {t}) -> {t} {{\n  %0 = stablehlo.maximum %arg0, %arg0 : {t}\n  return %0 : {t}\n}}\n"
    with pytest.raises(StableHLOUnsupportedError, match="stablehlo.maximum: this op on complex values is not supported"):
        import_stablehlo(text)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_reduce_window_sum_scatter_replace_iota_and_barrier(dtype):
    x = cplx(2, 6, dtype=dtype)
    idx = np.array([[1], [0]], np.int32)
    upd = cplx(2, 6, dtype=dtype)
    t, s, w = tensor(x.shape, dtype), tensor((), dtype), tensor((2, 4), dtype)
    it = tensor(idx.shape, np.int32)
    body = f"""    %z = stablehlo.constant dense<(0.0, 0.0)> : {s}
    %r = "stablehlo.reduce_window"(%arg0, %z) <{{window_dimensions = array<i64: 1, 3>, window_strides = array<i64: 1, 1>}}> ({{
    ^bb0(%a: {s}, %b: {s}):
      %0 = stablehlo.add %a, %b : {s}
      stablehlo.return %0 : {s}
    }}) : ({t}, {s}) -> {w}
    %sc = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}> ({{
    ^bb0(%a: {s}, %b: {s}):
      stablehlo.return %b : {s}
    }}) : ({t}, {it}, {t}) -> {t}
    %io = stablehlo.iota dim = 1 : {t}
    %bar:2 = stablehlo.optimization_barrier %io, %arg0 : {t}, {t}
    return %r, %sc, %bar#0, %bar#1 : {w}, {t}, {t}, {t}"""
    windows, scattered, iota, barrier = evaluate_text(
        program([x, idx, upd], [((2, 4), dtype)] + [(x.shape, dtype)] * 3, body), [x, idx, upd], [True] * 4)
    want = sum(x.astype(np.complex128)[:, k:k + 4] for k in range(3))
    check(windows, want, dtype)
    np.testing.assert_array_equal(scattered, upd[::-1])
    np.testing.assert_array_equal(iota, np.broadcast_to(np.arange(6), (2, 6)))
    np.testing.assert_array_equal(barrier, x)
