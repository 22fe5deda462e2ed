"""Exit codes are a contract: 65 only for a program the StableHLO specification rejects, 69 for a valid program
that uses a type or op mlcc does not compile, with the construct named.

Each corpus file's first line is ``// expect: TEXT``, a part of the one-line message it must give."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlcc.errors import MlccError
from mlcc.frontend.stablehlo import import_stablehlo

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "stablehlo_exit_codes"
UNSUPPORTED = sorted((CORPUS / "unsupported").glob("*.mlir"))
INVALID = sorted((CORPUS / "invalid").glob("*.mlir"))


def expectation(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("// expect: "), f"{path.name} does not start with '// expect: '"
    return first[len("// expect: "):]


def import_error(path: Path) -> MlccError:
    with pytest.raises(MlccError) as info:
        import_stablehlo(path)
    return info.value


@pytest.mark.parametrize("path", UNSUPPORTED, ids=[p.stem for p in UNSUPPORTED])
def test_valid_but_unsupported_is_69_naming_the_construct(path):
    err = import_error(path)
    assert err.exit_code == 69, str(err)
    assert expectation(path) in str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_is_65_naming_the_problem(path):
    err = import_error(path)
    assert err.exit_code == 65, str(err)
    assert expectation(path) in str(err)
    assert "\n" not in str(err)


def test_corpus_covers_every_family():
    names = {p.stem for p in UNSUPPORTED}
    for family in ("complex_", "int_i2", "int_i4", "int_ui4", "float_f8E4M3FN", "float_f8E5M2", "float_f4E2M1FN",
                   "float_f6E2M3FN", "chlo_mulhi", "chlo_scan", "dynamic_pad_two_lines", "quantized"):
        assert any(n.startswith(family) for n in names), family


@pytest.mark.parametrize("path,code", [(CORPUS / "unsupported" / "complex_maximum.mlir", 69),
                                       (CORPUS / "invalid" / "result_type_mismatch.mlir", 65)],
                         ids=["unsupported", "invalid"])
def test_cli_says_one_line_and_exits_with_the_code(path, code, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(path), "-o", str(tmp_path / "b"),
                           "--target", "none", "-q"], capture_output=True, text=True, env=env)
    assert proc.returncode == code
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert expectation(path) in proc.stderr
    assert not (tmp_path / "b").exists()


def test_return_type_must_match_the_signature():
    """A return whose type differs from the function's result type was compiled (exit 0) before."""
    text = ("func.func @main(%a: tensor<2xf32>) -> tensor<3xf32> {\n"
            "  return %a : tensor<2xf32>\n}\n")
    with pytest.raises(MlccError, match="type of return operand 0") as info:
        import_stablehlo(text)
    assert info.value.exit_code == 65


def test_an_op_continues_over_lines_until_the_next_op():
    """An op mlcc has no reader for is skipped to its end even when written over several lines; the next op on
    the following line (a result list `%a, %b = ...`) is read as an op, not as a continuation."""
    text = ("func.func @main(%a: tensor<4xf32>, %p: tensor<f32>, %l: tensor<1xi64>) -> tensor<4xf32> {\n"
            "  %0 = stablehlo.dynamic_pad %a, %p, %l,\n"
            "         %l, %l\n"
            "         : (tensor<4xf32>, tensor<f32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?xf32>\n"
            "  %1, %2 = \"stablehlo.all_gather\"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)\n"
            "  return %a : tensor<4xf32>\n}\n")
    with pytest.raises(MlccError) as info:
        import_stablehlo(text)
    assert info.value.exit_code == 69
    assert "stablehlo.dynamic_pad (line 2)" in str(info.value) and "stablehlo.all_gather (line 5)" in str(info.value)
