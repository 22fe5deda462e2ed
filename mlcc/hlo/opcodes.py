"""The one opcode table: spelling, arity, category and attributes of every op.

Printer, parser, verifier, shape inference and the evaluator all read this table,
as XLA's HLO_OPCODE_LIST feeds its tools.
"""

from __future__ import annotations

from dataclasses import dataclass

VARIADIC = -1


@dataclass(frozen=True)
class OpInfo:
    name: str                      # text spelling
    arity: int                     # operand count, or VARIADIC
    category: str                  # see CATEGORIES
    attrs: tuple[str, ...] = ()    # required attributes
    optional: tuple[str, ...] = () # optional attributes
    min_arity: int = 0             # for VARIADIC ops


CATEGORIES = ("structural", "unary", "binary", "ternary", "data", "reduction",
              "contraction", "composite")

_UNARY = ("abs", "negate", "exp", "expm1", "log", "log-plus-one", "sqrt", "rsqrt", "cbrt",
          "tanh", "erf", "logistic", "sin", "cos", "tan", "asin", "acos", "atan",
          "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round-nearest-even",
          "round-nearest-afz", "sign", "not", "is-finite", "is-nan", "is-inf", "reciprocal",
          "relu", "softplus", "popcnt")
_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "fmod", "power", "maximum",
           "minimum", "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
           "shift-right-logical")

_TABLE: list[OpInfo] = [
    # structural
    OpInfo("parameter", 0, "structural", ("index",), ("name",)),
    OpInfo("constant", 0, "structural", (), ("value", "splat", "ref")),
    OpInfo("tuple", VARIADIC, "structural"),
    OpInfo("get-tuple-element", 1, "structural", ("index",)),
    OpInfo("fusion", VARIADIC, "structural", ("kind", "calls")),
    OpInfo("iota", 0, "data", ("iota_dimension",)),
    OpInfo("size", 0, "data", ("expr",)),  # a scalar: the value of a size expression over symbolic dims
    # elementwise
    *[OpInfo(n, 1, "unary") for n in _UNARY],
    *[OpInfo(n, 2, "binary") for n in _BINARY],
    OpInfo("compare", 2, "binary", ("direction",)),
    OpInfo("select", 3, "ternary"),
    OpInfo("clamp", 3, "ternary"),
    OpInfo("convert", 1, "unary"),
    OpInfo("bitcast-convert", 1, "unary"),
    OpInfo("gelu", 1, "unary", ("approximate",)),
    # data movement
    OpInfo("broadcast", 1, "data", ("dimensions",)),
    OpInfo("reshape", 1, "data"),
    OpInfo("bitcast", 1, "data"),
    OpInfo("copy", 1, "data"),
    OpInfo("transpose", 1, "data", ("dimensions",)),
    OpInfo("slice", 1, "data", ("start_indices", "limit_indices", "strides")),
    OpInfo("dynamic-slice", VARIADIC, "data", ("slice_sizes",), min_arity=1),
    OpInfo("dynamic-update-slice", VARIADIC, "data", (), min_arity=2),
    OpInfo("concatenate", VARIADIC, "data", ("dimension",), min_arity=1),
    OpInfo("pad", 2, "data", ("edge_padding_low", "edge_padding_high", "interior_padding")),
    OpInfo("reverse", 1, "data", ("dimensions",)),
    OpInfo("gather", 2, "data", ("axis",)),
    OpInfo("gather-elements", 2, "data", ("axis",)),
    OpInfo("gather-nd", 2, "data", ("batch_dims",)),
    OpInfo("scatter-nd", 3, "data", ("reduction",)),
    # reductions
    OpInfo("reduce", 1, "reduction", ("dimensions", "kind")),
    OpInfo("argmax", 1, "reduction", ("dimension",), ("select_last_index",)),
    OpInfo("argmin", 1, "reduction", ("dimension",), ("select_last_index",)),
    OpInfo("reduce-window", 1, "reduction",
           ("kind", "window_dimensions", "window_strides", "padding_low", "padding_high"),
           ("window_dilations", "count_include_pad")),
    OpInfo("cumsum", 1, "reduction", ("dimension",), ("exclusive", "reverse")),
    # contractions
    OpInfo("dot", 2, "contraction",
           ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")),
    OpInfo("convolution", 2, "contraction",
           ("window_strides", "padding_low", "padding_high", "rhs_dilation",
            "feature_group_count", "dim_labels")),
    # composites: ops the author wrote, recognised or imported whole
    OpInfo("softmax", 1, "composite", ("dimension",), ("log",)),
    OpInfo("layer-norm", 3, "composite", ("dimensions", "epsilon")),
    OpInfo("rms-norm", 2, "composite", ("dimensions", "epsilon")),
    OpInfo("batch-norm-inference", 5, "composite", ("epsilon", "feature_index")),
    OpInfo("attention", VARIADIC, "composite", ("scale", "causal"), ("masked_value",), min_arity=3),
]

OPCODES: dict[str, OpInfo] = {info.name: info for info in _TABLE}
UNARY_OPS = frozenset(_UNARY) | {"convert", "bitcast-convert", "gelu"}
BINARY_OPS = frozenset(_BINARY) | {"compare"}
ELEMENTWISE_OPS = UNARY_OPS | BINARY_OPS | {"select", "clamp"}
COMPARE_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
REDUCE_KINDS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
FUSION_KINDS = ("loop", "input", "output", "multi_output", "attention")


def op_info(opcode: str) -> OpInfo:
    try:
        return OPCODES[opcode]
    except KeyError:
        raise KeyError(f"unknown opcode '{opcode}'") from None
