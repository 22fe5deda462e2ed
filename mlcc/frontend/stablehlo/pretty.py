"""Readers of the pretty (custom assembly) forms StableHLO, CHLO and func print.

Each reader turns ``%0 = stablehlo.broadcast_in_dim %x, dims = [1] : (t) -> t2``
into the parts of the generic op, with the generic attribute names
(``broadcast_dimensions``), so the importer reads one form only.
"""

from __future__ import annotations

from typing import Any, Callable

from mlcc.frontend.stablehlo.lexer import describe
from mlcc.frontend.stablehlo.parser import OpParts, Parser, pretty
from mlcc.frontend.stablehlo.syntax import Block, FunctionType, Op, SymbolRef, TensorType, TupleType, Value

_ELEMENTWISE = """
abs add and atan2 cbrt ceil clamp convert bitcast_convert cosine count_leading_zeros divide
dynamic_update_slice exponential exponential_minus_one floor imag is_finite log log_plus_one logistic
maximum minimum multiply negate not optimization_barrier or popcnt power real remainder reshape
round_nearest_afz round_nearest_even rsqrt shift_left shift_right_arithmetic shift_right_logical sign
sine sqrt subtract tan tanh xor complex uniform_quantize uniform_dequantize
"""
_CHLO_UNARY = """
acos acosh asin asinh atan atanh bessel_i1e conj cosh digamma erf erf_inv erfc is_inf is_neg_inf
is_pos_inf lgamma sinh square tan next_after
"""

KeywordReader = Callable[[Parser], Any]


# ---------------------------------------------------------------- shared pieces
def signature(p: Parser) -> tuple[list[Any], list[Any] | None]:
    """After ``:``: ``(a, b) -> c``, ``a -> b``, ``a`` or ``a, b`` (results None when there is no arrow)."""
    p.lx.expect(":", "before the op's type")
    if p.lx.at("("):
        ftype = p.type()
        if isinstance(ftype, FunctionType):
            return list(ftype.inputs), list(ftype.results)
        raise p.lx.error("expected a function type")
    inputs = p.type_list()
    if p.lx.accept("->"):
        return inputs, p.result_types()
    return inputs, None


def complex_part(t: Any) -> Any:
    """tensor<2xcomplex<f32>> -> tensor<2xf32>: the type of a complex tensor's real (or imaginary) part."""
    if isinstance(t, TensorType) and t.element.startswith("complex<") and t.element.endswith(">"):
        return TensorType(t.element[len("complex<"):-1], t.dims)
    return t


def same_type_signature(p: Parser, operands: list[Value], positions: list[int], name: str = "") -> list[Any]:
    """Resolve a signature where a lone type stands for every operand and the result (for stablehlo.complex, the
    result: its operands are the real parts; for real and imag, the operand: their result is the real part)."""
    pos = p.lx.peek().pos
    inputs, results = signature(p)
    if results is None:
        if len(inputs) == 1 and name == "stablehlo.complex":
            inputs, results = [complex_part(inputs[0])] * len(operands), [inputs[0]]
        elif len(inputs) == 1 and name in ("stablehlo.real", "stablehlo.imag"):
            inputs, results = [inputs[0]] * len(operands), [complex_part(inputs[0])]
        elif len(inputs) == 1:
            inputs, results = [inputs[0]] * len(operands), [inputs[0]]
        elif len(inputs) == len(operands):
            results = inputs
        else:
            raise p.lx.error(f"{len(inputs)} types for {len(operands)} operands", pos)
    p.check_types(operands, positions, inputs)
    return results


def items(p: Parser, keywords: dict[str, KeywordReader]) -> tuple[list[Value], list[int], dict[str, Any], list[str]]:
    """Comma-separated operands, ``key = value`` items and bare words, then an optional attribute dict."""
    operands: list[Value] = []
    positions: list[int] = []
    attrs: dict[str, Any] = {}
    words: list[str] = []
    if not p.lx.at(":") and not p.lx.at("{"):
        while True:
            tok = p.lx.peek()
            if tok.kind == "value":
                v, pos = p.operand()
                operands.append(v)
                positions.append(pos)
            elif tok.kind == "ident" and tok.text in keywords:
                p.lx.next()
                p.lx.expect("=", f"after '{tok.text}'")
                attrs[tok.text] = keywords[tok.text](p)
            elif tok.kind == "ident":
                words.append(p.lx.next().text)
            else:
                raise p.lx.error(f"expected an operand, found {describe(tok)}")
            if not p.lx.accept(","):
                break
    if p.lx.at("{"):
        attrs.update(p.attr_dict())
    return operands, positions, attrs, words


def rename(attrs: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names.get(k, k): v for k, v in attrs.items()}


def _dims_pair(p: Parser) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lhs = p.int_list()
    p.lx.expect("x", "between the lhs and rhs dimensions")
    return lhs, p.int_list()


def _attribute(p: Parser) -> Any:
    return p.attr_value()


# ---------------------------------------------------------------- elementwise and friends
@pretty(*[f"stablehlo.{n}" for n in _ELEMENTWISE.split()], *[f"chlo.{n}" for n in _CHLO_UNARY.split()])
def read_plain(p: Parser, name: str) -> OpParts:
    operands, positions, attrs, words = items(p, {})
    if words:
        raise p.lx.error(f"unexpected '{words[0]}' in {name}")
    return OpParts(operands, attrs, [], same_type_signature(p, operands, positions, name))


@pretty("stablehlo.select")
def read_select(p: Parser, name: str) -> OpParts:
    operands, positions, attrs, _ = items(p, {})
    pos = p.lx.peek().pos
    inputs, results = signature(p)
    if results is None:
        if len(inputs) != 2 or len(operands) != 3:
            raise p.lx.error("select expects 'pred_type, result_type'", pos)
        inputs, results = [inputs[0], inputs[1], inputs[1]], [inputs[1]]
    p.check_types(operands, positions, inputs)
    return OpParts(operands, attrs, [], results)


@pretty("stablehlo.compare")
def read_compare(p: Parser, name: str) -> OpParts:
    operands, positions, attrs, words = items(p, {})
    if not words or len(words) > 2:
        raise p.lx.error("compare needs a direction (EQ, NE, LT, LE, GT, GE)")
    attrs["comparison_direction"] = words[0]
    if len(words) == 2:
        attrs["compare_type"] = words[1]
    return OpParts(operands, attrs, [], same_type_signature(p, operands, positions))


@pretty("stablehlo.constant")
def read_constant(p: Parser, name: str) -> OpParts:
    attrs = p.attr_dict() if p.lx.at("{") else {}
    tok = p.lx.peek()
    value = p.attr_value()
    if getattr(value, "type", None) is None:
        raise p.lx.error("expected a dense<...> constant value", tok.pos)
    attrs["value"] = value
    result_type = value.type
    if p.lx.accept("->"):  # ": (attr type) -> result type" when the two differ
        result_type = p.type()
    return OpParts([], attrs, [], [result_type])


# ---------------------------------------------------------------- data movement
_KEYWORD_OPS: dict[str, tuple[dict[str, KeywordReader], dict[str, str]]] = {
    "stablehlo.iota": ({"dim": Parser.int_value}, {"dim": "iota_dimension"}),
    "stablehlo.broadcast_in_dim": ({"dims": Parser.int_list}, {"dims": "broadcast_dimensions"}),
    "stablehlo.transpose": ({"dims": Parser.int_list}, {"dims": "permutation"}),
    "stablehlo.reverse": ({"dims": Parser.int_list}, {"dims": "dimensions"}),
    "stablehlo.concatenate": ({"dim": Parser.int_value}, {"dim": "dimension"}),
    "stablehlo.dynamic_slice": ({"sizes": Parser.int_list}, {"sizes": "slice_sizes"}),
    "stablehlo.pad": ({"low": Parser.int_list, "high": Parser.int_list, "interior": Parser.int_list},
                      {"low": "edge_padding_low", "high": "edge_padding_high", "interior": "interior_padding"}),
    "stablehlo.dot": ({"precision": _attribute, "algorithm": _attribute}, {"precision": "precision_config"}),
    "stablehlo.fft": ({"type": lambda p: p.lx.expect_kind("ident", "an FFT type").text, "length": Parser.int_list},
                      {"type": "fft_type", "length": "fft_length"}),
}


@pretty(*_KEYWORD_OPS)
def read_keyword_op(p: Parser, name: str) -> OpParts:
    keywords, names = _KEYWORD_OPS[name]
    operands, positions, attrs, words = items(p, keywords)
    if words:
        raise p.lx.error(f"unexpected '{words[0]}' in {name}")
    return OpParts(operands, rename(attrs, names), [], same_type_signature(p, operands, positions))


@pretty("stablehlo.dot_general")
def read_dot_general(p: Parser, name: str) -> OpParts:
    keywords = {"batching_dims": _dims_pair, "contracting_dims": _dims_pair,
                "precision": _attribute, "algorithm": _attribute}
    operands, positions, attrs, words = items(p, keywords)
    if words:
        raise p.lx.error(f"unexpected '{words[0]}' in {name}")
    lb, rb = attrs.pop("batching_dims", ((), ()))
    lc, rc = attrs.pop("contracting_dims", ((), ()))
    attrs["dot_dimension_numbers"] = {
        "lhs_batching_dimensions": list(lb), "rhs_batching_dimensions": list(rb),
        "lhs_contracting_dimensions": list(lc), "rhs_contracting_dimensions": list(rc)}
    attrs = rename(attrs, {"precision": "precision_config"})
    return OpParts(operands, attrs, [], same_type_signature(p, operands, positions))


@pretty("stablehlo.slice")
def read_slice(p: Parser, name: str) -> OpParts:
    operand, pos = p.operand()
    p.lx.expect("[", "to open the slice ranges")
    starts, limits, strides = [], [], []
    while not p.lx.at("]"):
        starts.append(p.int_value())
        p.lx.expect(":")
        limits.append(p.int_value())
        strides.append(p.int_value() if p.lx.accept(":") else 1)
        if not p.lx.accept(","):
            break
    p.lx.expect("]", "to close the slice ranges")
    attrs = p.attr_dict() if p.lx.at("{") else {}
    attrs.update(start_indices=tuple(starts), limit_indices=tuple(limits), strides=tuple(strides))
    return OpParts([operand], attrs, [], same_type_signature(p, [operand], [pos]))


@pretty("stablehlo.convolution")
def read_convolution(p: Parser, name: str) -> OpParts:
    p.lx.expect("(")
    operands, positions = p.operand_list(")")
    p.lx.expect(")")
    attrs: dict[str, Any] = {}
    while p.lx.peek().kind == "ident":
        key = p.lx.next().text
        p.lx.expect("=")
        if key == "dim_numbers":
            attrs["dimension_numbers"] = p.conv_dimension_numbers()
        elif key == "window":
            window = p.attr_dict()
            attrs.update(rename(window, {"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation",
                                         "rhs_dilate": "rhs_dilation", "reverse": "window_reversal"}))
        else:
            raise p.lx.error(f"unexpected '{key}' in {name}")
        p.lx.accept(",")
    if p.lx.at("{"):
        attrs.update(p.attr_dict())
    return OpParts(operands, attrs, [], same_type_signature(p, operands, positions))


# ---------------------------------------------------------------- ops with regions
@pretty("stablehlo.reduce")
def read_reduce(p: Parser, name: str) -> OpParts:
    inputs, inits, positions = [], [], []
    start = p.lx.peek()
    while True:
        p.lx.expect("(")
        v, pos = p.operand()
        p.lx.expect("init")
        p.lx.expect(":")
        init, ipos = p.operand()
        p.lx.expect(")")
        inputs.append(v)
        inits.append(init)
        positions.append((pos, ipos))
        if not p.lx.accept(","):
            break
    applies = None
    if p.lx.accept("applies"):
        applies = p.lx.expect_kind("ident", "the reducing op").text
    p.lx.expect("across")
    p.lx.expect("dimensions")
    p.lx.expect("=")
    attrs = {"dimensions": p.int_list()}
    if p.lx.at("{"):
        attrs.update(p.attr_dict())
    operands = inputs + inits
    results = same_type_signature(p, operands, [q[0] for q in positions] + [q[1] for q in positions])
    if applies is not None:
        element = inits[0].type.element if isinstance(inits[0].type, TensorType) else "f32"
        line, col = p.lx.location(start.pos)
        quant = inits[0].type.quant if isinstance(inits[0].type, TensorType) else None
        return OpParts(operands, attrs, [_binary_body(applies, TensorType(element, (), quant), line, col)], results)
    p.lx.expect("reducer", "before the reduction body")
    pairs = []
    for _ in inputs:
        p.lx.expect("(")
        acc = p.typed_argument(define=False)
        p.lx.expect(",")
        x = p.typed_argument(define=False)
        p.lx.expect(")")
        pairs.append((acc, x))
    args = [a for a, _ in pairs] + [x for _, x in pairs]
    return OpParts(operands, attrs, [p.region(args)], results)


def _binary_body(opname: str, scalar: TensorType, line: int, col: int) -> list[Block]:
    a, b = Value("%lhs", scalar), Value("%rhs", scalar)
    r = Value("%0", scalar)
    return [Block([a, b], [Op(opname, [a, b], [r], {}, [], line, col),
                           Op("stablehlo.return", [r], [], {}, [], line, col)])]


@pretty("stablehlo.while")
def read_while(p: Parser, name: str) -> OpParts:
    p.lx.expect("(")
    names, operands, positions = [], [], []
    while not p.lx.at(")"):
        names.append(p.lx.expect_kind("value", "a loop variable").text)
        p.lx.expect("=")
        v, pos = p.operand()
        operands.append(v)
        positions.append(pos)
        if not p.lx.accept(","):
            break
    p.lx.expect(")")
    attrs = p.attr_dict() if p.lx.accept("attributes") else {}
    types = p.type_list() if p.lx.accept(":") else []
    p.check_types(operands, positions, types)
    p.lx.expect("cond", "before the loop condition")
    cond = p.region([Value(n, t) for n, t in zip(names, types)])
    p.lx.expect("do", "before the loop body")
    body = p.region([Value(n, t) for n, t in zip(names, types)])
    return OpParts(operands, attrs, [cond, body], list(types))


# ---------------------------------------------------------------- calls
@pretty("stablehlo.custom_call")
def read_custom_call(p: Parser, name: str) -> OpParts:
    target = p.lx.expect_kind("symbol", "the call target")
    p.lx.expect("(")
    operands, positions = p.operand_list(")")
    p.lx.expect(")")
    attrs = p.attr_dict() if p.lx.at("{") else {}
    attrs["call_target_name"] = target.text[1:].strip('"')
    inputs, results = signature(p)
    if results is None:
        raise p.lx.error("custom_call needs a function type")
    p.check_types(operands, positions, inputs)
    return OpParts(operands, attrs, [], results)


@pretty("stablehlo.rng_bit_generator")
def read_rng_bit_generator(p: Parser, name: str) -> OpParts:
    """``%state, %bits = stablehlo.rng_bit_generator %s, algorithm = PHILOX : (tensor<2xui64>) -> (...)``; the
    algorithm is kept as the generic form's ``rng_algorithm``."""
    operands, positions, attrs, words = items(p, {"algorithm": lambda q: q.lx.expect_kind("ident", "an algorithm").text})
    if words or "algorithm" not in attrs:
        raise p.lx.error("rng_bit_generator needs algorithm = DEFAULT, THREE_FRY or PHILOX")
    attrs["rng_algorithm"] = attrs.pop("algorithm")
    inputs, results = signature(p)
    if results is None:
        raise p.lx.error("rng_bit_generator needs a function type")
    p.check_types(operands, positions, inputs)
    return OpParts(operands, attrs, [], results)


@pretty("stablehlo.composite")
def read_composite(p: Parser, name: str) -> OpParts:
    target = p.lx.expect_kind("string", "the composite's name")
    operands, positions, attrs, words = items(p, {})
    attrs["name"] = target.text.strip('"')
    inputs, results = signature(p)
    if results is None:
        raise p.lx.error("composite needs a function type")
    p.check_types(operands, positions, inputs)
    return OpParts(operands, attrs, [], results)


def _float_format(p: Parser) -> tuple[int, int]:
    """``e4m3``: (exponent bits, mantissa bits)."""
    tok = p.lx.next()
    text = tok.text
    if tok.kind != "ident" or not text.startswith("e") or "m" not in text:
        raise p.lx.error(f"expected a format such as e5m2, found {describe(tok)}", tok.pos)
    e, m = text[1:].split("m", 1)
    if not (e.isdigit() and m.isdigit()):
        raise p.lx.error(f"expected a format such as e5m2, found {describe(tok)}", tok.pos)
    return int(e), int(m)


@pretty("stablehlo.reduce_precision")
def read_reduce_precision(p: Parser, name: str) -> OpParts:
    operands, positions, attrs, words = items(p, {"format": _float_format})
    if words or "format" not in attrs:
        raise p.lx.error("reduce_precision needs format = eXmY")
    attrs["exponent_bits"], attrs["mantissa_bits"] = attrs.pop("format")
    return OpParts(operands, attrs, [], same_type_signature(p, operands, positions))


@pretty("chlo.top_k")
def read_top_k(p: Parser, name: str) -> OpParts:
    """``chlo.top_k(%x, k = 3) : tensor<4x8xf32> -> (tensor<4x3xf32>, tensor<4x3xi32>)``"""
    p.lx.expect("(")
    operand, pos = p.operand()
    p.lx.expect(",")
    word = p.lx.expect_kind("ident", "k")
    if word.text != "k":
        raise p.lx.error(f"expected 'k', found {describe(word)}", word.pos)
    p.lx.expect("=", "after 'k'")
    k = p.int_value()
    p.lx.expect(")")
    attrs = p.attr_dict() if p.lx.at("{") else {}
    attrs["k"] = k
    inputs, results = signature(p)
    if results is None:
        raise p.lx.error("top_k needs its result types")
    p.check_types([operand], [pos], inputs)
    return OpParts([operand], attrs, [], results)


@pretty("func.call")
def read_call(p: Parser, name: str) -> OpParts:
    callee = p.lx.expect_kind("symbol", "the callee")
    p.lx.expect("(")
    operands, positions = p.operand_list(")")
    p.lx.expect(")")
    attrs = p.attr_dict() if p.lx.at("{") else {}
    attrs["callee"] = SymbolRef(callee.text[1:].strip('"'))
    inputs, results = signature(p)
    if results is None:
        raise p.lx.error("call needs a function type")
    p.check_types(operands, positions, inputs)
    return OpParts(operands, attrs, [], results)


# ---------------------------------------------------------------- tuples (flattened at import)
@pretty("stablehlo.tuple")
def read_tuple(p: Parser, name: str) -> OpParts:
    operands, positions, attrs, words = items(p, {})
    if words:
        raise p.lx.error(f"unexpected '{words[0]}' in {name}")
    p.lx.expect(":", "before the tuple's type")
    pos = p.lx.peek().pos
    result = p.type()
    if not isinstance(result, TupleType):
        raise p.lx.error(f"expected a tuple type, found {result}", pos)
    p.check_types(operands, positions, list(result.elements))
    return OpParts(operands, attrs, [], [result])


@pretty("stablehlo.get_tuple_element")
def read_get_tuple_element(p: Parser, name: str) -> OpParts:
    operand, pos = p.operand()
    p.lx.expect("[", "before the element index")
    index = int(p.lx.expect_kind("int", "the element index").text)
    p.lx.expect("]")
    attrs = p.attr_dict() if p.lx.at("{") else {}
    attrs["index"] = index
    inputs, results = signature(p)
    if results is None:
        raise p.lx.error("get_tuple_element needs a function type")
    p.check_types([operand], [pos], inputs)
    return OpParts([operand], attrs, [], results)


@pretty("func.return", "stablehlo.return")
def read_return(p: Parser, name: str) -> OpParts:
    if p.lx.peek().kind != "value":
        return OpParts([], {}, [], [])
    operands, positions = p.operand_list(":")
    attrs = p.attr_dict() if p.lx.at("{") else {}
    p.lx.expect(":", "before the returned types")
    p.check_types(operands, positions, p.type_list())
    return OpParts(operands, attrs, [], [])


# ---------------------------------------------------------------- module structure
@pretty("func.func")
def read_func(p: Parser, name: str) -> OpParts:
    visibility = "public"
    if p.lx.peek().text in ("public", "private", "nested"):
        visibility = p.lx.next().text
    sym = p.lx.expect_kind("symbol", "the function name")
    p.lx.expect("(")
    args = []
    while not p.lx.at(")"):
        args.append(p.typed_argument(define=False))
        if not p.lx.accept(","):
            break
    p.lx.expect(")")
    results = p.result_types() if p.lx.accept("->") else []
    attrs: dict[str, Any] = p.attr_dict() if p.lx.accept("attributes") else {}
    attrs.update(sym_name=sym.text[1:].strip('"'), sym_visibility=visibility,
                 function_type=FunctionType(tuple(a.type for a in args), tuple(results)))
    regions = [p.region(args, isolated=True)] if p.lx.at("{") else []
    return OpParts([], attrs, regions, [])


@pretty("builtin.module")
def read_module(p: Parser, name: str) -> OpParts:
    attrs: dict[str, Any] = {}
    if p.lx.peek().kind == "symbol":
        attrs["sym_name"] = p.lx.next().text[1:].strip('"')
    if p.lx.accept("attributes"):
        attrs.update(p.attr_dict())
    return OpParts([], attrs, [p.region(isolated=True)], [])
