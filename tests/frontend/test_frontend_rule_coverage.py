"""Every op a frontend knows is imported or listed here as not supported, with the reason.

A StableHLO or CHLO op that KNOWN_OPS names and no rule imports is reported as unsupported (every
such op of a program at once, exit code 69); this test makes that set explicit, so an op that
silently loses its rule, or a newly known op with none, fails here by name. The same holds for the
ONNX ops of the installed onnx package's default domain, and for the tables keyed by these names
(pretty-form readers, import-time folds, symbolic folds).
"""

from __future__ import annotations

import onnx.defs
import pytest
from onnxruntime.capi._pybind_state import get_all_operator_schema

from mlcc.errors import MlccError
from mlcc.frontend.onnx.registry import registered_ops
from mlcc.frontend.onnx.symbolic_values import FOLDS
from mlcc.frontend.stablehlo import RULES, fold, import_stablehlo
from mlcc.frontend.stablehlo.importer import TERMINATORS
from mlcc.frontend.stablehlo.known_ops import KNOWN_OPS
from mlcc.frontend.stablehlo.parser import MODULE_LEVEL_IGNORED, PRETTY


def _all(reason: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, reason)


_NOT_YET = "no import rule yet"

STABLEHLO_NOT_IMPORTED = {
    **_all("a collective across devices: mlcc compiles for one device", "all_gather", "all_reduce", "all_to_all",
           "collective_broadcast", "collective_permute", "cross-replica-sum", "partition_id", "replica_id",
           "reduce_scatter"),
    **_all("I/O ordered by tokens: a compiled model has no side effects", "after_all", "create_token", "infeed",
           "outfeed", "recv", "send"),
    **_all("a training op: mlcc compiles inference", "batch_norm_grad", "batch_norm_training"),
    **_all("random numbers: no HLO op", "rng", "rng_bit_generator"),
    **_all("linear algebra: no HLO op", "cholesky"),
    **_all("deprecated in StableHLO (dot_general, gather and broadcast_in_dim replace them)", "einsum",
           "unary_einsum", "torch_index_select", "broadcast"),
    **_all("shapes given as tensor operands: " + _NOT_YET + " (symbolic dims come from the argument types)",
           "dynamic_broadcast_in_dim", "dynamic_conv", "dynamic_gather", "dynamic_iota", "dynamic_pad",
           "dynamic_reshape", "real_dynamic_slice", "get_dimension_size", "set_dimension_size"),
    **_all("a region's terminator: read with the region it ends", "return"),
    **_all(_NOT_YET, "batch_norm_inference", "count_leading_zeros", "get_tuple_element", "tuple"),
}

CHLO_NOT_IMPORTED = {
    **_all("implicitly broadcasting binary op: " + _NOT_YET + " (exporters legalize it to broadcast_in_dim "
           "and the StableHLO op)", "broadcast_add", "broadcast_and", "broadcast_atan2", "broadcast_compare",
           "broadcast_divide", "broadcast_maximum", "broadcast_minimum", "broadcast_multiply",
           "broadcast_next_after", "broadcast_or", "broadcast_power", "broadcast_remainder", "broadcast_select",
           "broadcast_shift_left", "broadcast_shift_right_arithmetic", "broadcast_shift_right_logical",
           "broadcast_subtract", "broadcast_xor"),
    **_all("a special function: no HLO op", "polygamma", "zeta",
           "broadcast_polygamma", "broadcast_zeta"),
    **_all("implicitly broadcasting complex: " + _NOT_YET + " (exporters legalize it to broadcast_in_dim and "
           "stablehlo.complex)", "broadcast_complex"),
    **_all("shapes given as tensor operands: " + _NOT_YET, "minimum_broadcast_shapes"),
    **_all("an internal op of CHLO's own decompositions, not emitted by exporters", "_asin_acos_kernel"),
    **_all(_NOT_YET, "constant", "constant_like", "mulhi", "ragged_dot", "scan"),
}

OTHER_NOT_IMPORTED = {
    "builtin.module": "module structure: the parser reads it",
    "func.func": "module structure: the importer inlines functions from the entry",
    "func.return": "a function's terminator: read with the function it ends",
    "func.call_indirect": "an indirect call: " + _NOT_YET,
    "func.constant": "a function as a value: " + _NOT_YET,
    "builtin.unrealized_conversion_cast": "an artifact of a partial lowering, not a program's op",
    "sdy.mesh": "a device mesh: sharding plays no part in a single-device compile",
    "sdy.sharding_constraint": "a sharding annotation: " + _NOT_YET,
}

# Ops MLIR prints in the generic form only ("stablehlo.gather"(...)): the parser reads them without a
# pretty-form reader.
GENERIC_FORM_ONLY = {"stablehlo.gather", "stablehlo.reduce_window", "stablehlo.scatter", "stablehlo.sort",
                     "stablehlo.select_and_scatter", "stablehlo.if", "stablehlo.case",
                     "stablehlo.triangular_solve", "stablehlo.map"}


def _not_imported() -> dict[str, str]:
    return {**{f"stablehlo.{n}": r for n, r in STABLEHLO_NOT_IMPORTED.items()},
            **{f"chlo.{n}": r for n, r in CHLO_NOT_IMPORTED.items()}, **OTHER_NOT_IMPORTED}


@pytest.mark.parametrize("dialect", ["stablehlo", "chlo", "other"])
def test_every_known_op_is_imported_or_listed_as_not_supported(dialect):
    def mine(name: str) -> bool:
        prefix = name.split(".")[0]
        return prefix == dialect or (dialect == "other" and prefix not in ("stablehlo", "chlo"))

    known = {n for n in KNOWN_OPS if mine(n)}
    listed = {n for n in _not_imported() if mine(n)}
    imported = {n for n in RULES if mine(n)}
    assert sorted(known - imported - listed) == [], "known ops neither imported nor listed as not supported"
    assert sorted(imported & listed) == [], "imported ops listed as not supported"
    assert sorted(listed - known) == [], "listed ops KNOWN_OPS does not name"
    assert all(_not_imported()[n] for n in listed)


def test_the_importer_keys_and_terminators_are_known_ops():
    assert set(RULES) <= KNOWN_OPS
    assert set(TERMINATORS) <= KNOWN_OPS - set(RULES)
    assert set(MODULE_LEVEL_IGNORED) <= KNOWN_OPS - set(RULES)


def test_every_imported_op_has_a_pretty_form_reader_unless_mlir_prints_it_generically():
    assert sorted(set(RULES) - set(PRETTY)) == sorted(GENERIC_FORM_ONLY)
    assert set(PRETTY) <= KNOWN_OPS


def test_every_import_time_fold_is_of_an_imported_op():
    folded = {n for n in RULES if fold.can_fold(n)}
    assert folded and all(fold.can_fold(n) <= (n in RULES) for n in KNOWN_OPS)


# ---------------------------------------------------------------- ONNX

ONNX_NOT_IMPORTED = {
    **_all("strings: the IR has no string element type", "RegexFullMatch", "StringConcat", "StringNormalizer",
           "StringSplit"),
    **_all("random numbers: no HLO op", "Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
           "RandomUniform", "RandomUniformLike"),
    **_all("image decoding: not a tensor computation", "ImageDecoder"),
    **_all(_NOT_YET, "GlobalLpPool", "MaxRoiPool"),
}


def _onnx_default_domain_ops() -> set[str]:
    return {s.name for s in onnx.defs.get_all_schemas() if (s.domain or "") == "" and not s.deprecated}


def test_every_onnx_op_is_imported_or_listed_as_not_supported():
    imported = {op for domain, op, _ in registered_ops() if domain == ""}
    schemas = _onnx_default_domain_ops()
    assert sorted(schemas - imported - set(ONNX_NOT_IMPORTED)) == [], \
        "ONNX ops neither imported nor listed as not supported"
    assert sorted(imported & set(ONNX_NOT_IMPORTED)) == [], "imported ONNX ops listed as not supported"
    assert sorted(set(ONNX_NOT_IMPORTED) - schemas) == [], "listed ops the onnx package does not define"


def test_every_registered_onnx_op_is_an_onnx_op():
    # an op of another domain (com.microsoft: the QOperator ops onnxruntime's quantizer writes) is one
    # onnxruntime defines
    schemas = {((s.domain or ""), s.name) for s in onnx.defs.get_all_schemas_with_history()}
    schemas |= {(s.domain, s.name) for s in get_all_operator_schema() if s.domain not in ("", "ai.onnx")}
    assert sorted((d, op) for d, op, _ in registered_ops() if (d, op) not in schemas) == []


def test_every_symbolic_fold_is_of_an_imported_onnx_op():
    imported = {op for domain, op, _ in registered_ops() if domain == ""}
    assert FOLDS and sorted(set(FOLDS) - imported) == []


def test_the_frontend_tables_refuse_a_second_rule_and_a_misspelt_op():
    with pytest.raises(ValueError, match="two StableHLO import rules for 'stablehlo.add'"):
        RULES.register("stablehlo.add")(abs)
    with pytest.raises(ValueError, match="StableHLO import rule for unknown op 'stablehlo.ad'"):
        RULES.register("stablehlo.ad")(abs)
    with pytest.raises(ValueError, match="two pretty-form readers for 'stablehlo.add'"):
        PRETTY.register("stablehlo.add")(abs)
    with pytest.raises(ValueError, match="two symbolic folds for 'Add'"):
        FOLDS.register("Add")(abs)
    assert "stablehlo.ad" not in RULES and RULES["stablehlo.add"] is not abs


def test_a_program_using_every_op_not_imported_is_one_69_listing_them_all():
    """Each listed StableHLO and CHLO op, written in MLIR's generic form, is reported at once by name and line."""
    names = sorted(n for n in _not_imported() if n.split(".")[0] in ("stablehlo", "chlo") and n not in TERMINATORS)
    body = "".join(f'  %{i} = "{n}"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n' for i, n in enumerate(names))
    text = f"func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{\n{body}  return %a : tensor<4xf32>\n}}\n"
    with pytest.raises(MlccError) as info:
        import_stablehlo(text)
    assert info.value.exit_code == 69
    for line, name in enumerate(names, start=2):
        assert f"{name} (line {line})" in str(info.value)
