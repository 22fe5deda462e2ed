"""The StableHLO frontend: syntax, errors with line and column, and small programs against numpy."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mlcc.errors import EXIT_INVALID_INPUT, EXIT_UNSUPPORTED, InputMissingError
from mlcc.frontend.stablehlo import (
    StableHLOParseError,
    StableHLOUnsupportedError,
    UnsupportedOpsError,
    import_stablehlo,
    parse_stablehlo,
)
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module

DATA = Path(__file__).resolve().parent.parent / "data" / "stablehlo"


def program(body: str, args: str = "%arg0: tensor<4xf32>", results: str = "tensor<4xf32>") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return (f"module @m {{\n  func.func public @main({args}) -> ({results}) {{\n{body}\n  }}\n}}\n")


def run(text: str, *inputs: np.ndarray) -> list[np.ndarray]:
    evaluator = pytest.importorskip("mlcc.hlo.evaluator")
    module = import_stablehlo(text)
    verify_module(module)
    out = evaluator.evaluate(module, {f"arg{i}": x for i, x in enumerate(inputs)})
    return [out[name] for name in module.output_names]


def error_of(tmp_path: Path, text: str, kind: type = StableHLOParseError) -> str:
    path = tmp_path / "model.mlir"
    path.write_text(text)
    with pytest.raises(kind) as info:
        import_stablehlo(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:")
    return message[len(str(path)):]


# ---------------------------------------------------------------- malformed input
def test_truncated_file(tmp_path):
    text = (DATA / "reduce.mlir").read_text()
    message = error_of(tmp_path, text[: len(text) // 2])
    assert re.match(r"^:\d+:\d+: ", message)
    assert StableHLOParseError("x").exit_code == EXIT_INVALID_INPUT


def test_truncated_inside_a_type(tmp_path):
    message = error_of(tmp_path, "module {\n  func.func public @main(%arg0: tensor<4x")
    assert message.startswith(":2:")


def test_unknown_op(tmp_path):
    text = program("%0 = stablehlo.frobnicate %arg0 : tensor<4xf32>\nreturn %0 : tensor<4xf32>")
    assert error_of(tmp_path, text) == ":3:10: unknown operation 'stablehlo.frobnicate'"


def test_unknown_op_in_generic_form(tmp_path):
    text = program('%0 = "mydialect.op"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\nreturn %0 : tensor<4xf32>')
    assert error_of(tmp_path, text) == ":3:10: unknown operation 'mydialect.op'"


def test_operand_type_mismatch(tmp_path):
    text = program("%0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>\nreturn %0 : tensor<4xf32>",
                   args="%arg0: tensor<4xf32>, %arg1: tensor<8xf32>")
    assert error_of(tmp_path, text) == (":3:31: use of value '%arg1' expects different type than prior uses: "
                                        "'tensor<4xf32>' vs 'tensor<8xf32>'")


def test_operand_type_mismatch_in_generic_form(tmp_path):
    text = program('%0 = "stablehlo.negate"(%arg0) : (tensor<4xi32>) -> tensor<4xi32>\n'
                   "return %0 : tensor<4xi32>", results="tensor<4xi32>")
    assert error_of(tmp_path, text).startswith(":3:29: use of value '%arg0' expects different type")


def test_result_type_that_the_operands_do_not_give(tmp_path):
    text = program("%0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
                   "return %0 : tensor<2x3xf32>", args="%arg0: tensor<2x3xf32>", results="tensor<2x3xf32>")
    assert error_of(tmp_path, text) == (":3:10: stablehlo.transpose: result %0 is declared tensor<2x3xf32> "
                                        "but its operands give tensor<3x2xf32>")


def test_shape_error_names_the_op(tmp_path):
    text = program("%0 = stablehlo.reshape %arg0 : (tensor<4xf32>) -> tensor<3xf32>\nreturn %0 : tensor<3xf32>",
                   results="tensor<3xf32>")
    message = error_of(tmp_path, text)
    assert message.startswith(":3:10: stablehlo.reshape: reshape: [4] has 4 elements")


def test_undefined_value(tmp_path):
    text = program("%0 = stablehlo.add %arg0, %7 : tensor<4xf32>\nreturn %0 : tensor<4xf32>")
    assert error_of(tmp_path, text) == ":3:31: use of undefined value '%7'"


def test_bad_dense_literal(tmp_path):
    text = program("%c = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<4xf32>\nreturn %c : tensor<4xf32>")
    assert error_of(tmp_path, text) == ":3:29: dense literal of shape [3] does not match tensor<4xf32>"


def test_missing_file(tmp_path):
    with pytest.raises(InputMissingError):
        import_stablehlo(tmp_path / "absent.mlir")


# ---------------------------------------------------------------- unsupported ops
def test_every_unsupported_op_is_listed(tmp_path):
    text = program("""
        %0 = "stablehlo.rng"(%arg0, %arg0) <{rng_distribution = #stablehlo<rng_distribution UNIFORM>}> : (
          tensor<4xf32>, tensor<4xf32>
        ) -> tensor<4xf32>
        %1 = stablehlo.negate %0 : tensor<4xf32>
        %2 = stablehlo.custom_call @my_kernel(%0) {backend_config = ""} : (tensor<4xf32>) -> tensor<4xf32>
        %3 = "stablehlo.cholesky"(%2) <{lower = true}> : (tensor<4xf32>) -> tensor<4xf32>
        %4 = chlo.zeta %3, %3 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
        return %4 : tensor<4xf32>""")
    message = error_of(tmp_path, text, UnsupportedOpsError)
    assert message == (": 4 unsupported ops: stablehlo.rng (line 3), stablehlo.custom_call @my_kernel (line 7), "
                       "stablehlo.cholesky (line 8), chlo.zeta (line 9)")
    assert UnsupportedOpsError([]).exit_code == EXIT_UNSUPPORTED


def test_unsupported_element_type(tmp_path):
    # complex<f32> and complex<f64> are imported (tests/frontend/stablehlo/test_complex.py); StableHLO has no
    # complex<f16>
    text = program("%0 = stablehlo.negate %arg0 : tensor<4xcomplex<f16>>\nreturn %0 : tensor<4xcomplex<f16>>",
                   args="%arg0: tensor<4xcomplex<f16>>", results="tensor<4xcomplex<f16>>")
    message = error_of(tmp_path, text, StableHLOUnsupportedError)
    assert "stablehlo.negate with element type complex<f16> (line 3)" in message


# ---------------------------------------------------------------- forms of the same program
@pytest.mark.parametrize("name", ["reduce", "argmax", "scatter", "dot_general", "while_fori", "convolution_nhwc",
                                  "gather_index", "constant", "cumulative"])
def test_generic_form_imports_like_the_pretty_form(name):
    def text(path: Path) -> str:
        return re.sub(r", origin=\{[^}]*\}", "", format_module(import_stablehlo(path)))
    assert text(DATA / f"{name}.generic.mlir") == text(DATA / f"{name}.mlir")


def test_debug_locations_become_origins():
    module = import_stablehlo(DATA / "dot_general.debug.mlir")
    dots = [i for i in module.entry.instructions if i.opcode == "dot"]
    assert dots and all(any("dot_general" in o for o in i.origin) for i in dots)
    plain = import_stablehlo(DATA / "dot_general.mlir")
    assert [i.origin for i in plain.entry.instructions if i.opcode == "dot"][0] == ("main/%0",)


def test_names_of_inputs_and_outputs():
    module = import_stablehlo(DATA / "binary_int.mlir")
    assert [p.attrs["name"] for p in module.entry.parameters()] == ["arg0", "arg1"]
    assert module.output_names == [f"out{i}" for i in range(10)]
    assert module.name == "jit__lambda"
    assert import_stablehlo(DATA / "binary_int.mlir", name="ints").name == "ints"


def test_bytes_and_text_input():
    text = (DATA / "slice.mlir").read_text()
    a = format_module(import_stablehlo(text))
    assert a == format_module(import_stablehlo(text.encode()))


def test_functions_without_a_module():
    text = textwrap.dedent("""\
        func.func @main(%arg0: tensor<2xi32>) -> tensor<2xi32> {
          %0 = call @twice(%arg0) : (tensor<2xi32>) -> tensor<2xi32>
          return %0 : tensor<2xi32>
        }
        func.func private @twice(%arg0: tensor<2xi32>) -> tensor<2xi32> {
          %0 = stablehlo.add %arg0, %arg0 : tensor<2xi32>
          return %0 : tensor<2xi32>
        }
        """)
    (out,) = run(text, np.array([3, -4], np.int32))
    np.testing.assert_array_equal(out, [6, -8])


# ---------------------------------------------------------------- dense literals
def test_dense_literals_decode():
    f32 = np.array([1.0, -2.0, np.inf, np.nan], "<f4")
    bf16 = np.array(1.5, ml_dtypes.bfloat16).view(np.uint16)
    text = program(f"""
        %a = stablehlo.constant dense<"0x{f32.tobytes().hex().upper()}"> : tensor<4xf32>
        %b = stablehlo.constant dense<"0x01000100"> : tensor<2x2xi1>
        %c = stablehlo.constant dense<0x{int(bf16):04X}> : tensor<3xbf16>
        %d = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi8>
        %e = stablehlo.constant dense<18446744073709551615> : tensor<ui64>
        %f = stablehlo.constant dense<[0x7F800000, 2.5]> : tensor<2xf32>
        %g = stablehlo.constant dense<> : tensor<0xf32>
        %h = stablehlo.constant dense<"0x0000C03F"> : tensor<2xf32>
        return %arg0 : tensor<4xf32>""")
    ops = parse_stablehlo(text).functions["main"].body.ops
    arrays = [op.attrs["value"].array for op in ops[:-1]]
    np.testing.assert_array_equal(arrays[0], f32)
    np.testing.assert_array_equal(arrays[1], [[True, False], [True, False]])
    assert arrays[2].dtype == ml_dtypes.bfloat16 and np.all(arrays[2].astype(np.float32) == 1.5)
    np.testing.assert_array_equal(arrays[3], np.array([[1, -2], [3, 4]], np.int8))
    assert arrays[4] == np.uint64(2**64 - 1)
    np.testing.assert_array_equal(arrays[5], [np.inf, 2.5])
    assert arrays[6].shape == (0,)
    np.testing.assert_array_equal(arrays[7], [1.5, 1.5])


# ---------------------------------------------------------------- small programs against numpy
def test_legacy_dot():
    text = program("%0 = stablehlo.dot %arg0, %arg1 : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>\n"
                   "return %0 : tensor<2x4xf32>", args="%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xf32>",
                   results="tensor<2x4xf32>")
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    (out,) = run(text, a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-6)


def test_broadcast_in_dim_that_transposes():
    text = program("%0 = stablehlo.broadcast_in_dim %arg0, dims = [2, 0] : (tensor<2x3xf32>) -> tensor<3x4x2xf32>\n"
                   "return %0 : tensor<3x4x2xf32>", args="%arg0: tensor<2x3xf32>", results="tensor<3x4x2xf32>")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = run(text, x)
    np.testing.assert_array_equal(out, np.broadcast_to(x.T[:, None, :], (3, 4, 2)))


def test_select_with_a_scalar_predicate_and_remainder_sign():
    text = program("""
        %0 = "stablehlo.select"(%arg1, %arg0, %arg2) : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
        %1 = stablehlo.remainder %arg0, %arg2 : tensor<4xf32>
        return %0, %1 : tensor<4xf32>, tensor<4xf32>""",
                   args="%arg0: tensor<4xf32>, %arg1: tensor<i1>, %arg2: tensor<4xf32>",
                   results="tensor<4xf32>, tensor<4xf32>")
    x, y = np.array([5.5, -5.5, 7.0, -1.0], np.float32), np.array([2.0, 2.0, -3.0, 4.0], np.float32)
    picked, rem = run(text, x, np.array(False), y)
    np.testing.assert_array_equal(picked, y)
    np.testing.assert_allclose(rem, np.fmod(x, y))


def test_convolution_with_window_reversal_is_a_true_convolution():
    text = program("""
        %0 = "stablehlo.convolution"(%arg0, %arg1) <{
              dimension_numbers = #stablehlo.conv<[b, f, 0]x[o, i, 0]->[b, f, 0]>,
              feature_group_count = 1 : i64, batch_group_count = 1 : i64, window_reversal = array<i1: true>}>
              : (tensor<1x1x6xf32>, tensor<1x1x3xf32>) -> tensor<1x1x4xf32>
        return %0 : tensor<1x1x4xf32>""",
                   args="%arg0: tensor<1x1x6xf32>, %arg1: tensor<1x1x3xf32>", results="tensor<1x1x4xf32>")
    x, w = np.array([1, 2, 0, -1, 3, 5], np.float32), np.array([1, 10, 100], np.float32)
    (out,) = run(text, x.reshape(1, 1, 6), w.reshape(1, 1, 3))
    np.testing.assert_allclose(out.reshape(-1), np.convolve(x, w, mode="valid"))


def test_chlo_signed_infinities():
    text = program("""
        %0 = chlo.is_pos_inf %arg0 : tensor<4xf32> -> tensor<4xi1>
        %1 = chlo.is_neg_inf %arg0 : tensor<4xf32> -> tensor<4xi1>
        return %0, %1 : tensor<4xi1>, tensor<4xi1>""", results="tensor<4xi1>, tensor<4xi1>")
    x = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    pos, neg = run(text, x)
    np.testing.assert_array_equal(pos, np.isposinf(x))
    np.testing.assert_array_equal(neg, np.isneginf(x))


def test_multi_result_call_and_two_operand_reduce():
    text = program("""
        %0:2 = call @stats(%arg0) : (tensor<2x3xf32>) -> (tensor<2xf32>, tensor<2xf32>)
        return %0#1, %0#0 : tensor<2xf32>, tensor<2xf32>""",
                   args="%arg0: tensor<2x3xf32>", results="tensor<2xf32>, tensor<2xf32>") + textwrap.dedent("""\
        func.func private @stats(%arg0: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
          %z = stablehlo.constant dense<0.0> : tensor<f32>
          %m = stablehlo.constant dense<0xFF800000> : tensor<f32>
          %0:2 = stablehlo.reduce(%arg0 init: %z), (%arg0 init: %m) across dimensions = [1]
              : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
           reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<f32>, %d: tensor<f32>) {
            %s = stablehlo.add %a, %b : tensor<f32>
            %x = stablehlo.maximum %d, %c : tensor<f32>
            stablehlo.return %s, %x : tensor<f32>, tensor<f32>
          }
          return %0#0, %0#1 : tensor<2xf32>, tensor<2xf32>
        }
        """)
    x = np.array([[1, 5, -2], [0.5, -1, 3]], np.float32)
    biggest, total = run(text, x)
    np.testing.assert_allclose(total, x.sum(1))
    np.testing.assert_array_equal(biggest, x.max(1))


def test_composite_runs_its_decomposition():
    text = program('%0 = stablehlo.composite "my.gelu" %arg0 {decomposition = @my.gelu.impl} : '
                   "(tensor<4xf32>) -> tensor<4xf32>\nreturn %0 : tensor<4xf32>") + textwrap.dedent("""\
        func.func private @my.gelu.impl(%arg0: tensor<4xf32>) -> tensor<4xf32> {
          %0 = stablehlo.logistic %arg0 : tensor<4xf32>
          %1 = stablehlo.multiply %arg0, %0 : tensor<4xf32>
          return %1 : tensor<4xf32>
        }
        """)
    x = np.array([-2, -0.5, 0.5, 3], np.float32)
    (out,) = run(text, x)
    np.testing.assert_allclose(out, x / (1 + np.exp(-x)), rtol=1e-6)


def test_while_counting_down_in_generic_form():
    text = program("""
        %n = stablehlo.constant dense<4> : tensor<i64>
        %0:2 = "stablehlo.while"(%n, %arg0) ({
        ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
          %zero = stablehlo.constant dense<0> : tensor<i64>
          %go = stablehlo.compare GT, %i, %zero, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
          stablehlo.return %go : tensor<i1>
        }, {
        ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
          %one = stablehlo.constant dense<1> : tensor<i64>
          %next = stablehlo.subtract %i, %one : tensor<i64>
          %y = stablehlo.add %x, %arg0 : tensor<4xf32>
          stablehlo.return %next, %y : tensor<i64>, tensor<4xf32>
        }) : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>)
        return %0#1 : tensor<4xf32>""")
    x = np.array([1, -2, 0.5, 3], np.float32)
    (out,) = run(text, x)
    np.testing.assert_allclose(out, 5 * x)


def test_call_with_the_wrong_argument_type(tmp_path):
    text = program("%0 = call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\nreturn %0 : tensor<4xf32>") + \
        "func.func private @f(%arg0: tensor<4xi32>) -> tensor<4xf32> {\n  %0 = stablehlo.convert %arg0 : " \
        "(tensor<4xi32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    assert error_of(tmp_path, text) == (":3:10: func.call: argument 0 of @f is tensor<4xi32>, the call passes "
                                        "tensor<4xf32>")
