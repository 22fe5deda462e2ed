"""The one opcode table: spelling, arity, category, attributes and properties of every op.

Printer, parser, verifier, shape inference, the evaluator and every pass read this table,
as XLA's HLO_OPCODE_LIST feeds its tools. A pass that needs a group of ops (the elementwise
ones, the views it may look through) asks ``ops_with(flag)`` instead of listing names, so a new
op joins every group its flags name. FLAGS says what each flag promises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VARIADIC = -1

FLAGS = {
    # derived from the category
    "elementwise": "each result element is a function of the operands' elements at its coordinates "
                   "(category unary, binary or ternary)",
    "data_movement": "moves, repeats or picks elements without arithmetic on them (category data)",
    "contraction": "sums products of its two operands' elements over contracted dims (category contraction)",
    "structural": "no computation of its own: an argument, a constant, a tuple, a tuple's element, a call "
                  "of a fused computation (category structural)",
    # set per op
    "layout_agnostic": "its kernel reads every operand through its strides and writes any result layout, "
                       "so layout assignment never copies around it (every elementwise op has it from its "
                       "category)",
    "in_place_safe": "elementwise with result and operands of the same dims: its kernel reads each operand "
                     "element once, at the coordinates it writes, before writing, so the result may "
                     "overwrite a dying operand's buffer",
    "loop_fusible": "computes each result element on its own from operand elements: may be a member of a loop "
                    "fusion (elementwise ops and data movement except the scatters, which update a region "
                    "of an operand and run as their own kernels)",
    "no_kernel": "never launches a kernel of its own: arguments, constants, tuples, and bitcasts (a view "
                 "of the operand's buffer)",
    "view": "one operand, whose elements the result re-indexes or repeats without arithmetic and without "
            "dropping any: a uniform operand gives a uniform result",
    "logical_view": "a view whose map from operand dims to result dims follows from logical dims and "
                    "attributes alone (not layouts), keeping the order of elements along every dim",
    "strided_view": "the result is an offset plus non-negative strides into the operand's bytes: a kernel "
                    "may read it from the operand's buffer",
    "one_to_one": "each operand element becomes exactly one result element (value kept, or only converted): "
                  "a tensor flowing through keeps its identity",
    "reindex": "each result element is an element of an operand (of one of them, for concatenate) at "
               "coordinates that the result's coordinates and the attributes alone determine: no indices "
               "read from data, no element added (pad's value), and not copy, whose purpose is to "
               "materialize a layout; a reindex of values computed from indices is computed from indices",
    "splat_preserving": "every result element is an element of its first operand, at coordinates that the "
                        "result's coordinates, the attributes and at most scalar start indices determine: "
                        "a splat first operand gives a splat of its value",
    "binds_count": "a data-dependent result (NonZero, Unique, NMS, TopK with a run-time k): element 0 of its "
                   "1-D s64 result is a run-time count that binds the symbol named by its `symbol` attribute "
                   "(in [0, bound]); the rest is the data, planned at the bound. Its own kernel, never "
                   "folded: the runtime reads the count back after it runs (docs/data-dependent-shapes.md)",
    "commutative": "binary, and its operands may be swapped without changing the result",
    "predicate": "its result is pred, whatever its operands' element type",
    "indexed_read": "reads of its first operand only the elements its indices pick: at most the result's "
                    "bytes of an operand that may be much larger (an embedding table)",
    "input_fusible": "reduces along dims in a loop over each row of its first operand, reading it element "
                     "by element: the producers of that operand may be computed inside the loop (the heavy "
                     "op of an input fusion)",
    "row_normalization": "reduces each row of its first operand and maps every element of the row through "
                         "the row's result: the result has the first operand's dims",
    "row_norm": "a row normalization by the row's statistics, scaled per feature by its other operands "
                "(layer and RMS norm): computable from whole rows held in one tile",
}
_ELEMENTWISE = ("elementwise", "layout_agnostic")
_DERIVED = {"unary": _ELEMENTWISE, "binary": _ELEMENTWISE, "ternary": _ELEMENTWISE,
            "data": ("data_movement",), "contraction": ("contraction",), "structural": ("structural",)}


@dataclass(frozen=True)
class OpInfo:
    name: str                      # text spelling
    arity: int                     # operand count, or VARIADIC
    category: str                  # see CATEGORIES
    attrs: tuple[str, ...] = ()    # required attributes
    optional: tuple[str, ...] = () # optional attributes
    min_arity: int = 0             # for VARIADIC ops
    flags: frozenset[str] = field(default=frozenset())  # see FLAGS; the category's are added

    def __post_init__(self) -> None:
        unknown = set(self.flags) - set(FLAGS)
        if unknown:
            raise ValueError(f"{self.name}: unknown op flags {sorted(unknown)}")
        object.__setattr__(self, "flags", frozenset(self.flags) | frozenset(_DERIVED.get(self.category, ())))

    def has(self, flag: str) -> bool:
        if flag not in FLAGS:
            raise KeyError(f"unknown op flag '{flag}'")
        return flag in self.flags


CATEGORIES = ("structural", "unary", "binary", "ternary", "data", "reduction",
              "contraction", "composite")

_UNARY = ("abs", "negate", "exp", "expm1", "log", "log-plus-one", "sqrt", "rsqrt", "cbrt",
          "tanh", "erf", "logistic", "sin", "cos", "tan", "asin", "acos", "atan",
          "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round-nearest-even",
          "round-nearest-afz", "sign", "not", "is-finite", "is-nan", "is-inf", "reciprocal",
          "relu", "softplus", "softsign", "mish", "popcnt")
_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "fmod", "power", "maximum",
           "minimum", "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
           "shift-right-logical")

_EW = frozenset({"in_place_safe", "loop_fusible"})  # a plain elementwise op's flags
_LOOP = frozenset({"loop_fusible"})
_ROW = frozenset({"input_fusible", "layout_agnostic"})
_NO_KERNEL = frozenset({"no_kernel"})
_MORE = {  # flags of a unary or binary op beyond _EW
    **dict.fromkeys(("is-finite", "is-nan", "is-inf"), frozenset({"predicate"})),
    **dict.fromkeys(("add", "multiply", "maximum", "minimum", "and", "or", "xor"), frozenset({"commutative"})),
}

_TABLE: list[OpInfo] = [
    # structural
    OpInfo("parameter", 0, "structural", ("index",), ("name", "packed", "packed_dims", "complex"), flags=_NO_KERNEL),
    OpInfo("constant", 0, "structural", (), ("value", "splat", "ref"), flags=_NO_KERNEL),
    OpInfo("tuple", VARIADIC, "structural", flags=_NO_KERNEL),
    OpInfo("get-tuple-element", 1, "structural", ("index",), flags=_NO_KERNEL),
    OpInfo("fusion", VARIADIC, "structural", ("kind", "calls")),
    OpInfo("iota", 0, "data", ("iota_dimension",), flags=_LOOP),
    OpInfo("size", 0, "data", ("expr",), flags=_LOOP),  # a scalar: the value of a size expression over symbolic dims
    # elementwise
    *[OpInfo(n, 1, "unary", flags=_EW | _MORE.get(n, frozenset())) for n in _UNARY],
    *[OpInfo(n, 2, "binary", flags=_EW | _MORE.get(n, frozenset())) for n in _BINARY],
    OpInfo("compare", 2, "binary", ("direction",), flags=_EW | {"predicate"}),
    OpInfo("select", 3, "ternary", flags=_EW),
    OpInfo("clamp", 3, "ternary", flags=_EW),
    OpInfo("convert", 1, "unary", flags=_EW | {"one_to_one"}),
    # not in_place_safe: between widths the dims differ (f32[n] <-> u8[n,4]), element i is not element i
    OpInfo("bitcast-convert", 1, "unary", flags=_LOOP),
    OpInfo("gelu", 1, "unary", ("approximate",), flags=_EW),
    # data movement
    OpInfo("broadcast", 1, "data", ("dimensions",),
           flags=_LOOP | {"view", "logical_view", "reindex", "splat_preserving"}),
    OpInfo("reshape", 1, "data", flags=_LOOP | {"view", "logical_view", "one_to_one", "reindex", "splat_preserving"}),
    OpInfo("bitcast", 1, "data",
           flags=_LOOP | {"no_kernel", "view", "strided_view", "one_to_one", "reindex", "splat_preserving"}),
    OpInfo("copy", 1, "data",
           flags=_LOOP | {"view", "logical_view", "one_to_one", "layout_agnostic", "splat_preserving"}),
    OpInfo("transpose", 1, "data", ("dimensions",),
           flags=_LOOP | {"view", "logical_view", "strided_view", "one_to_one", "reindex", "splat_preserving"}),
    OpInfo("slice", 1, "data", ("start_indices", "limit_indices", "strides"),
           flags=_LOOP | {"strided_view", "layout_agnostic", "reindex", "splat_preserving"}),
    OpInfo("dynamic-slice", VARIADIC, "data", ("slice_sizes",), min_arity=1,
           flags=_LOOP | {"layout_agnostic", "splat_preserving"}),
    OpInfo("dynamic-update-slice", VARIADIC, "data", (), min_arity=2, flags={"layout_agnostic"}),
    OpInfo("concatenate", VARIADIC, "data", ("dimension",), min_arity=1, flags=_LOOP | {"layout_agnostic", "reindex"}),
    OpInfo("pad", 2, "data", ("edge_padding_low", "edge_padding_high", "interior_padding"),
           flags=_LOOP | {"layout_agnostic"}),
    OpInfo("reverse", 1, "data", ("dimensions",),
           flags=_LOOP | {"view", "one_to_one", "layout_agnostic", "reindex", "splat_preserving"}),
    OpInfo("gather", 2, "data", ("axis",), flags=_LOOP | {"layout_agnostic", "indexed_read"}),
    OpInfo("gather-elements", 2, "data", ("axis",), flags=_LOOP | {"layout_agnostic", "indexed_read"}),
    OpInfo("gather-nd", 2, "data", ("batch_dims",), flags=_LOOP | {"indexed_read"}),
    OpInfo("scatter-nd", 3, "data", ("reduction",)),
    # reductions
    OpInfo("reduce", 1, "reduction", ("dimensions", "kind"), flags={"input_fusible"}),
    OpInfo("argmax", 1, "reduction", ("dimension",), ("select_last_index",)),
    OpInfo("argmin", 1, "reduction", ("dimension",), ("select_last_index",)),
    OpInfo("reduce-window", 1, "reduction",
           ("kind", "window_dimensions", "window_strides", "padding_low", "padding_high"),
           ("window_dilations", "count_include_pad"), flags={"layout_agnostic"}),
    # data-dependent results (binds_count): element 0 is the count, the data follows (shape_inference.py)
    OpInfo("nonzero", 1, "composite", ("symbol", "tensor", "bound"), flags={"binds_count"}),
    OpInfo("unique", 1, "composite", ("symbol", "tensor", "bound", "sorted"), flags={"binds_count"}),
    OpInfo("nms", 5, "composite", ("symbol", "tensor", "bound", "center_point_box"), flags={"binds_count"}),
    OpInfo("sort-indices", 2, "composite", ("symbol", "tensor", "dimension", "largest"), flags={"binds_count"}),
    OpInfo("cumsum", 1, "reduction", ("dimension",), ("exclusive", "reverse"), flags={"layout_agnostic"}),
    # contractions
    OpInfo("dot", 2, "contraction",
           ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims"),
           flags={"layout_agnostic"}),
    OpInfo("convolution", 2, "contraction",
           ("window_strides", "padding_low", "padding_high", "rhs_dilation",
            "feature_group_count", "dim_labels")),
    # composites: ops the author wrote, recognised or imported whole
    OpInfo("softmax", 1, "composite", ("dimension",), ("log",), flags=_ROW | {"row_normalization"}),
    # a norm may take a last operand more: its rows' statistics as partials a row-stats computed (the kernel
    # that produced its input stored them: mlcc/hlo/passes/norm_statistics.py), which it combines
    OpInfo("layer-norm", VARIADIC, "composite", ("dimensions", "epsilon"), min_arity=3,
           flags=_ROW | {"row_normalization", "row_norm"}),
    OpInfo("rms-norm", VARIADIC, "composite", ("dimensions", "epsilon"), min_arity=2,
           flags=_ROW | {"row_normalization", "row_norm"}),
    # each row's statistics over its last dim in parts of `part` elements, in f32: "squares" (an rms-norm's)
    # gives each part's sum of squares, [rows..., parts]; "mean-m2" (a layer-norm's) each part's mean and M2
    # (its sum of squared deviations from that mean), [rows..., parts, 2], combined by Chan's formula
    OpInfo("row-stats", 1, "composite", ("dimensions", "part", "moments")),
    OpInfo("batch-norm-inference", 5, "composite", ("epsilon", "feature_index"), flags={"layout_agnostic"}),
    OpInfo("attention", VARIADIC, "composite", ("scale", "causal"),
           ("masked_value", "window", "softcap", "score_quant", "prob_quant", "quant_type"),
           min_arity=3,
           flags={"layout_agnostic"}),
]

OPCODES: dict[str, OpInfo] = {info.name: info for info in _TABLE}
UNARY_OPS = frozenset(info.name for info in _TABLE if info.category == "unary")
BINARY_OPS = frozenset(info.name for info in _TABLE if info.category == "binary")
COMPARE_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
REDUCE_KINDS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
FUSION_KINDS = ("loop", "input", "output", "multi_output", "attention", "b2b")


def ops_with(flag: str) -> frozenset[str]:
    """The opcodes whose table entry carries flag (see FLAGS)."""
    if flag not in FLAGS:
        raise KeyError(f"unknown op flag '{flag}'")
    return frozenset(info.name for info in _TABLE if flag in info.flags)


ELEMENTWISE_OPS = ops_with("elementwise")


def op_info(opcode: str) -> OpInfo:
    try:
        return OPCODES[opcode]
    except KeyError:
        raise KeyError(f"unknown opcode '{opcode}'") from None
