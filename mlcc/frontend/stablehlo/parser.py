"""MLIR text (pretty or generic form) -> a ParsedModule of functions made of Ops.

The generic form ``%0 = "stablehlo.add"(%a, %b) : (t, t) -> t`` is read here;
each op's pretty form (``%0 = stablehlo.add %a, %b : t``) is read by its rule in
``pretty.py``. Both give the same Op. Values are resolved as they are read, so a
use of an undefined value, or of a value at a type other than its own, is an
error at the use: ``model.mlir:7:31: use of undefined value '%9'``.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from mlcc.frontend.stablehlo import dense
from mlcc.frontend.stablehlo.errors import StableHLOParseError, StableHLOUnsupportedError
from mlcc.frontend.stablehlo.known_ops import KNOWN_OPS
from mlcc.frontend.stablehlo.lexer import Lexer, Token, describe, unquote
from mlcc.frontend.stablehlo.quant_type import QuantTypeError, check_tensor_dims, parse_quant_body
from mlcc.frontend.stablehlo.syntax import (Block, DenseAttr, Function, FunctionType, Op, OpaqueAttr, OtherType,
                                            ParsedModule, SymbolRef, TensorType, TupleType, Value)
from mlcc.hlo.rules import RuleTable

_TENSOR = re.compile(r"tensor<((?:(?:\d+|\?)x)*)([A-Za-z_][A-Za-z0-9_]*)")
_QUANT_TENSOR = re.compile(r"tensor<((?:(?:\d+|\?)x)*)!quant\.uniform(?=<)")
_STRUCT_ATTRS = ("#stablehlo.dot", "#stablehlo.gather", "#stablehlo.scatter", "#stablehlo.dot_algorithm",
                 "#stablehlo.result_accuracy", "#stablehlo.output_operand_alias")
_ENUM_DIALECTS = ("#stablehlo", "#chlo", "#mhlo")

MODULE_LEVEL_IGNORED = ("sdy.mesh",)  # device meshes: sharding plays no part in a single-device compile

PrettyRule = Callable[["Parser", str], "OpParts"]
PRETTY: RuleTable[PrettyRule] = RuleTable("pretty-form reader", keys=KNOWN_OPS)


def pretty(*names: str) -> Callable[[PrettyRule], PrettyRule]:
    """Register the reader of an op's pretty (custom assembly) form."""
    return PRETTY.register(*names)


class OpParts:
    """What a pretty-form reader returns; result_types None = unknown (a skipped op)."""

    def __init__(self, operands: list[Value], attrs: dict[str, Any] | None = None,
                 regions: list[list[Block]] | None = None, result_types: list[Any] | None = None) -> None:
        self.operands = operands
        self.attrs = attrs or {}
        self.regions = regions or []
        self.result_types = result_types


class Parser:
    def __init__(self, text: str, filename: str) -> None:
        self.lx = Lexer(text, filename)
        self.filename = filename
        self.scopes: list[dict[str, Value]] = [{}]
        self.loc_aliases: dict[str, Any] = {}
        self.located: list[tuple[Op, Any]] = []

    # ------------------------------------------------------------------ module
    def parse_module(self) -> ParsedModule:
        tops: list[Op] = []
        while self.lx.peek().kind != "eof":
            tok = self.lx.peek()
            if tok.kind == "hash":
                self.alias_definition()
            elif tok.text == "{-#":
                self.lx.skip_balanced()  # dialect resources (dense_resource blobs)
            else:
                tops.append(self.operation())
        self.resolve_locations()
        name: str | None = None
        ops: list[Op] = []
        for op in tops:
            if op.name == "builtin.module":
                name = op.attrs.get("sym_name", name)
                ops.extend(op.regions[0][0].ops if op.regions and op.regions[0] else [])
            else:
                ops.append(op)
        functions: dict[str, Function] = {}
        for op in ops:
            if op.name in MODULE_LEVEL_IGNORED:
                continue
            if op.name != "func.func":
                raise self.error_at(op, f"expected a function at module level, found '{op.name}'")
            if not op.regions:
                continue  # a declaration: calling it is an error at the call
            fn = self.function_from_op(op)
            if fn.name in functions:
                raise self.error_at(op, f"redefinition of function @{fn.name}")
            functions[fn.name] = fn
        return ParsedModule(name, functions, self.filename)

    def function_from_op(self, op: Op) -> Function:
        ftype = op.attrs.get("function_type")
        body = op.regions[0][0] if op.regions and op.regions[0] else None
        if not isinstance(ftype, FunctionType) or body is None:
            raise self.error_at(op, "func.func needs a function_type and a body")
        if len(body.args) != len(ftype.inputs):
            raise self.error_at(op, f"function has {len(ftype.inputs)} inputs but its body takes {len(body.args)}")
        ret = body.ops[-1] if body.ops else None
        if ret is not None and ret.name == "func.return":
            if len(ret.operands) != len(ftype.results):
                raise self.error_at(ret, f"'func.return' has {len(ret.operands)} operands, but enclosing function "
                                         f"@{op.attrs.get('sym_name', '')} returns {len(ftype.results)}")
            for i, (value, want) in enumerate(zip(ret.operands, ftype.results)):
                if value.type is not None and str(value.type) != str(want):
                    raise self.error_at(ret, f"type of return operand {i} ('{value.type}') doesn't match function "
                                             f"result type ('{want}') in function @{op.attrs.get('sym_name', '')}")
        return Function(str(op.attrs.get("sym_name", "")), body.args, list(ftype.results), body,
                        str(op.attrs.get("sym_visibility", "public")), op.line, op.col)

    def alias_definition(self) -> None:
        name = self.lx.next().text
        self.lx.expect("=", f"after the alias {name}")
        if self.lx.at("loc"):
            self.loc_aliases[name] = self.location()
        else:
            self.attr_value()

    # ------------------------------------------------------------------ errors
    def error_at(self, op: Op, message: str) -> StableHLOParseError:
        return StableHLOParseError(message, file=self.filename, line=op.line, col=op.col)

    # ------------------------------------------------------------------ scopes
    def define(self, name: str, value: Value, pos: int) -> None:
        if name in self.scopes[-1]:
            raise self.lx.error(f"redefinition of SSA value '{name}'", pos)
        self.scopes[-1][name] = value

    def lookup(self, tok: Token) -> Value:
        for scope in reversed(self.scopes):
            if tok.text in scope:
                return scope[tok.text]
        raise self.lx.error(f"use of undefined value '{tok.text}'", tok.pos)

    def operand(self) -> tuple[Value, int]:
        tok = self.lx.expect_kind("value", "an SSA value such as %0")
        return self.lookup(tok), tok.pos

    def operand_list(self, close: str) -> tuple[list[Value], list[int]]:
        """``%a, %b`` up to (not including) close; empty when close comes first."""
        values, positions = [], []
        if self.lx.at(close):
            return values, positions
        while True:
            v, pos = self.operand()
            values.append(v)
            positions.append(pos)
            if not self.lx.accept(","):
                return values, positions

    def check_types(self, values: list[Value], positions: list[int], types: list[Any]) -> None:
        if len(types) != len(values):
            raise self.lx.error(f"{len(values)} operands but {len(types)} operand types",
                                positions[0] if positions else None)
        for v, pos, t in zip(values, positions, types):
            if v.type is not None and t is not None and v.type != t:
                raise self.lx.error(f"use of value '{v.name}' expects different type than prior uses: "
                                    f"'{t}' vs '{v.type}'", pos)

    # ------------------------------------------------------------------ operations
    def operation(self) -> Op:
        start = self.lx.peek()
        results: list[tuple[str, int, int]] = []
        if start.kind == "value":
            while True:
                tok = self.lx.expect_kind("value", "a result name")
                count = 1
                if self.lx.at(":") and self.lx.text[self.lx.pos:self.lx.pos + 1] == ":":
                    self.lx.next()
                    count = int(self.lx.expect_kind("int", "a result count").text)
                results.append((tok.text, count, tok.pos))
                if not self.lx.accept(","):
                    break
            self.lx.expect("=", "after the result names")
        tok = self.lx.peek()
        line, col = self.lx.location(tok.pos)
        if tok.kind == "string":
            name = unquote(self.lx.next().text)
            self.check_known(name, tok)
            parts = self.generic_body()
        elif tok.kind == "ident":
            name = self.lx.next().text
            name = {"module": "builtin.module", "call": "func.call", "return": "func.return"}.get(name, name)
            rule = PRETTY.get(name)
            if rule is None:
                self.check_known(name, tok)
                parts = self.skip_unknown_syntax(tok)
            else:
                parts = rule(self, name)
        else:
            raise self.lx.error(f"expected an operation, found {describe(tok)}")
        n_results = sum(c for _, c, _ in results)
        if parts.result_types is not None and len(parts.result_types) != n_results:
            raise self.lx.error(f"'{name}' has {len(parts.result_types)} results but {n_results} result names",
                                tok.pos)
        op = Op(name, parts.operands, [], parts.attrs, parts.regions, line, col)
        i = 0
        for rname, count, pos in results:
            for k in range(count):
                rtype = parts.result_types[i] if parts.result_types is not None else None
                value = Value(rname if count == 1 else f"{rname}#{k}", rtype)
                op.results.append(value)
                self.define(value.name, value, pos)
                i += 1
        self.maybe_location(op)
        return op

    def check_known(self, name: str, tok: Token) -> None:
        if name not in KNOWN_OPS and name not in PRETTY:
            raise self.lx.error(f"unknown operation '{name}'", tok.pos)

    def generic_body(self) -> OpParts:
        self.lx.expect("(", "to open the operand list")
        operands, positions = self.operand_list(")")
        self.lx.expect(")")
        if self.lx.at("["):
            raise self.lx.error("ops with successor blocks (unstructured control flow) are not supported")
        attrs: dict[str, Any] = {}
        if self.lx.at("<"):
            self.lx.next()
            attrs.update(self.attr_dict())
            self.lx.expect(">", "to close the properties")
        regions: list[list[Block]] = []
        if self.lx.accept("("):
            while True:
                regions.append(self.region())
                if not self.lx.accept(","):
                    break
            self.lx.expect(")", "after the regions")
        if self.lx.at("{"):
            attrs.update(self.attr_dict())
        self.lx.expect(":", "before the op's type")
        ftype = self.type()
        if not isinstance(ftype, FunctionType):
            raise self.lx.error(f"expected a function type for a generic op, found '{ftype}'")
        self.check_types(operands, positions, list(ftype.inputs))
        return OpParts(operands, attrs, regions, list(ftype.results))

    def skip_unknown_syntax(self, start: Token) -> OpParts:
        """Skip the pretty form of a known op this frontend has no reader for (its import is refused later)."""
        line = self.lx.token_line(start)
        openers = {"(", "[", "{", "<"}
        while True:
            tok = self.lx.peek()
            if tok.kind == "eof" or tok.text == "}":
                break
            if self.lx.token_line(tok) != line:
                if self.starts_operation(tok):
                    break
                line = self.lx.token_line(tok)  # the op goes on over another line (`: (types) -> type`)
            if tok.kind == "punct" and tok.text in openers:
                before = self.lx.pos
                self.lx.skip_balanced()
                line = self.lx.location(max(self.lx.pos - 1, before))[0]
            else:
                self.lx.next()
        return OpParts([], {"_skipped": True}, [], None)

    def starts_operation(self, tok: Token) -> bool:
        """Whether tok begins an operation (or a block), rather than continuing the one before it."""
        if tok.kind in ("string", "caret"):
            return True
        if tok.kind == "ident":
            return tok.text in KNOWN_OPS or tok.text in PRETTY or tok.text in ("return", "call", "module")
        if tok.kind != "value":
            return False
        saved = self.lx.mark()
        try:  # `%a, %b:2 = ...` names results; `%a, %b` on a line of its own continues an operand list
            while self.lx.peek().kind == "value":
                self.lx.next()
                if self.lx.accept(":"):
                    self.lx.next()
                if not self.lx.accept(","):
                    break
            return self.lx.at("=")
        finally:
            self.lx.reset(saved)

    # ------------------------------------------------------------------ regions
    def region(self, args: list[Value] | None = None, isolated: bool = False) -> list[Block]:
        """``{ ops }`` or ``{ ^bb0(%a: t): ops }``; args are block arguments already read by a pretty form."""
        self.lx.expect("{", "to open a region")
        saved = self.scopes
        self.scopes = [{}] if isolated else saved + [{}]
        try:
            block = Block(list(args or []))
            for v in block.args:
                self.define(v.name, v, self.lx.pos)
            if self.lx.peek().kind == "caret":
                if args:
                    raise self.lx.error("this region's arguments were already given")
                self.block_label(block)
            while not self.lx.at("}"):
                tok = self.lx.peek()
                if tok.kind == "eof":
                    raise self.lx.error("expected '}' to close the region before the end of the file")
                if tok.kind == "caret":
                    raise self.lx.error("regions with more than one block are not supported")
                block.ops.append(self.operation())
            self.lx.expect("}")
        finally:
            self.scopes = saved
        return [block]

    def block_label(self, block: Block) -> None:
        self.lx.next()
        if self.lx.accept("("):
            while not self.lx.at(")"):
                block.args.append(self.typed_argument())
                if not self.lx.accept(","):
                    break
            self.lx.expect(")")
        self.lx.expect(":", "after the block label")

    def typed_argument(self, define: bool = True) -> Value:
        tok = self.lx.expect_kind("value", "an argument name")
        self.lx.expect(":", "after the argument name")
        value = Value(tok.text, self.type())
        if self.lx.at("{"):
            self.attr_dict()
        self.maybe_location()
        if define:
            self.define(tok.text, value, tok.pos)
        return value

    # ------------------------------------------------------------------ locations
    def maybe_location(self, op: Op | None = None) -> None:
        if self.lx.at("loc"):
            loc = self.location()
            if op is not None:
                self.located.append((op, loc))

    def location(self) -> Any:
        self.lx.expect("loc")
        self.lx.expect("(")
        loc = self.location_body()
        self.lx.expect(")", "to close the location")
        return loc

    def location_body(self) -> Any:
        """The name a location carries (a str), an alias to look up later, or None."""
        tok = self.lx.peek()
        if tok.kind == "hash":
            return ("alias", self.lx.next().text)
        if tok.kind == "string":
            self.lx.next()
            text = unquote(tok.text)
            if self.lx.accept(":"):  # "file":line:col [to [line]:col]
                self.lx.expect_kind("int", "a line number")
                self.lx.expect(":")
                self.lx.expect_kind("int", "a column number")
                if self.lx.accept("to"):
                    if self.lx.peek().kind == "int":
                        self.lx.next()
                    self.lx.expect(":")
                    self.lx.expect_kind("int", "a column number")
                return None
            if self.lx.accept("("):
                self.location_body()
                self.lx.expect(")")
            return text
        if tok.text == "callsite":
            self.lx.next()
            self.lx.expect("(")
            callee = self.location_body()
            self.lx.expect("at")
            self.location_body()
            self.lx.expect(")")
            return callee
        if tok.text == "fused":
            self.lx.next()
            if self.lx.at("<"):
                self.lx.skip_balanced()
            self.lx.expect("[")
            first = None
            while not self.lx.at("]"):
                loc = self.location_body()
                first = first if first is not None else loc
                if not self.lx.accept(","):
                    break
            self.lx.expect("]")
            return first
        if tok.text == "unknown":
            self.lx.next()
            return None
        raise self.lx.error(f"expected a location, found {describe(tok)}")

    def resolve_locations(self) -> None:
        for op, loc in self.located:
            seen = 0
            while isinstance(loc, tuple) and seen < 64:
                loc = self.loc_aliases.get(loc[1])
                seen += 1
            op.location = loc if isinstance(loc, str) else None

    # ------------------------------------------------------------------ types
    def type(self) -> Any:
        m = self.lx.match_raw(_QUANT_TENSOR)
        if m is not None:
            return self.quantized_tensor_type(m)
        m = self.lx.match_raw(_TENSOR)
        if m is not None:
            dims = tuple(None if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
            element = m.group(2)
            if self.lx.text.startswith("<", self.lx.pos):  # complex<f32>
                start = self.lx.pos
                self.lx.skip_balanced()
                element += self.lx.text[start:self.lx.pos]
            if self.lx.accept(","):
                self.attr_value()  # an encoding (bounds, sparsity): not used
            self.lx.expect(">", "to close the tensor type")
            return TensorType(element, dims)
        tok = self.lx.peek()
        if tok.text == "(" and tok.kind == "punct":
            return self.function_type()
        if tok.kind == "ident" and tok.text == "tuple" and self.lx.text.startswith("<", tok.end):
            self.lx.next()
            self.lx.expect("<")
            elements = []
            while not self.lx.at(">"):
                elements.append(self.type())
                if not self.lx.accept(","):
                    break
            self.lx.expect(">", "to close the tuple type")
            return TupleType(tuple(elements))
        if tok.kind in ("ident", "bang"):
            start = tok.pos
            self.lx.next()
            if self.lx.text.startswith("<", self.lx.pos):
                self.lx.skip_balanced()
            return OtherType(self.lx.text[start:self.lx.pos])
        raise self.lx.error(f"expected a type, found {describe(tok)}")

    def quantized_tensor_type(self, m: re.Match[str]) -> TensorType:
        """``tensor<2x!quant.uniform<i8:f32, 0.1:-3>>`` (mlcc/frontend/stablehlo/quant_type.py)."""
        dims = tuple(None if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
        start = self.lx.pos
        self.lx.skip_balanced()
        try:
            quant = parse_quant_body(self.lx.text[start + 1:self.lx.pos - 1])
            check_tensor_dims(quant, dims)
        except QuantTypeError as e:
            line, col = self.lx.location(m.start() + m.group(0).index("!"))  # at the quantized type
            cls = StableHLOUnsupportedError if e.unsupported else StableHLOParseError
            raise cls(str(e), file=self.filename, line=line, col=col) from None
        self.lx.expect(">", "to close the tensor type")
        return TensorType(quant.canonical(), dims, quant)

    def function_type(self) -> FunctionType:
        self.lx.expect("(")
        inputs = []
        while not self.lx.at(")"):
            inputs.append(self.type())
            if not self.lx.accept(","):
                break
        self.lx.expect(")")
        self.lx.expect("->", "in a function type")
        return FunctionType(tuple(inputs), tuple(self.result_types()))

    def result_types(self) -> list[Any]:
        """``t`` or ``(t, t)`` (each possibly with a ``{...}`` attribute dict, as in a function signature)."""
        if not self.lx.at("("):
            return [self.type()]
        self.lx.next()
        types = []
        while not self.lx.at(")"):
            types.append(self.type())
            if self.lx.at("{"):
                self.attr_dict()
            self.maybe_location()
            if not self.lx.accept(","):
                break
        self.lx.expect(")")
        return types

    def type_list(self) -> list[Any]:
        types = [self.type()]
        while self.lx.accept(","):
            types.append(self.type())
        return types

    # ------------------------------------------------------------------ attributes
    def attr_dict(self) -> dict[str, Any]:
        self.lx.expect("{")
        attrs: dict[str, Any] = {}
        while not self.lx.at("}"):
            tok = self.lx.next()
            if tok.kind == "string":
                key = unquote(tok.text)
            elif tok.kind == "ident":
                key = tok.text
            else:
                raise self.lx.error(f"expected an attribute name, found {describe(tok)}", tok.pos)
            attrs[key] = self.attr_value() if self.lx.accept("=") else True
            if not self.lx.accept(","):
                break
        self.lx.expect("}", "to close the attribute dictionary")
        return attrs

    def attr_value(self) -> Any:
        tok = self.lx.peek()
        if tok.kind == "ident":
            if tok.text == "dense":
                return self.dense_attr()
            if tok.text == "dense_resource":
                raise self.lx.error("dense_resource constants are not supported: print the module with "
                                    "its constants inline")
            if tok.text == "array":
                return self.array_attr()
            if tok.text in ("true", "false"):
                self.lx.next()
                return tok.text == "true"
            if tok.text == "unit":
                self.lx.next()
                return True
            if tok.text == "tensor" or re.fullmatch(r"[su]?i\d+|f\d+|bf16|index|none|tf32", tok.text):
                return self.type()
            self.lx.next()
            if self.lx.text.startswith("<", self.lx.pos):
                start = tok.pos
                self.lx.skip_balanced()
                return OpaqueAttr(self.lx.text[start:self.lx.pos])
            return tok.text
        if tok.kind == "string":
            self.lx.next()
            value = unquote(tok.text)
            if self.lx.at(":"):
                self.lx.next()
                self.type()
            return value
        if tok.kind in ("int", "float", "hex"):
            self.lx.next()
            value: Any = int(tok.text, 0) if tok.kind != "float" else float(tok.text)
            if self.lx.accept(":"):
                t = self.type()
                if isinstance(t, OtherType) and t.text.startswith(("f", "bf")) and tok.kind == "hex":
                    value = dense.float_from_bits(int(tok.text, 16), t.text)
                elif isinstance(t, OtherType) and t.text.startswith(("f", "bf")):
                    value = float(value)
                elif isinstance(t, OtherType) and t.text == "i1":
                    value = bool(value)
            return value
        if tok.kind == "symbol":
            self.lx.next()
            name = tok.text[1:]
            name = unquote(name) if name.startswith('"') else name
            while self.lx.accept("::"):
                self.lx.expect_kind("symbol", "a nested symbol")
            return SymbolRef(name)
        if tok.kind == "hash":
            return self.hash_attr()
        if tok.kind == "punct":
            if tok.text == "[":
                self.lx.next()
                items = []
                while not self.lx.at("]"):
                    items.append(self.attr_value())
                    if not self.lx.accept(","):
                        break
                self.lx.expect("]", "to close the list")
                return items
            if tok.text == "{":
                return self.attr_dict()
            if tok.text == "(":
                return self.function_type()
            if tok.text == "<":
                start = tok.pos
                self.lx.skip_balanced()
                return OpaqueAttr(self.lx.text[start:self.lx.pos])
        if tok.kind == "bang":
            return self.type()
        raise self.lx.error(f"expected an attribute value, found {describe(tok)}")

    def hash_attr(self) -> Any:
        tok = self.lx.next()
        if not self.lx.text.startswith("<", self.lx.pos):
            return OpaqueAttr(tok.text)  # an alias such as #loc3 or #map
        if tok.text in _ENUM_DIALECTS:
            self.lx.expect("<")
            self.lx.expect_kind("ident", "an enum kind")
            if self.lx.peek().kind == "ident":
                value = self.lx.next().text
                self.lx.expect(">")
                return value
            self.lx.pos = tok.end
            self.lx._peeked = None
        if tok.text == "#stablehlo.conv":
            self.lx.expect("<")
            labels = self.conv_dimension_numbers()
            self.lx.expect(">")
            return labels
        if tok.text in _STRUCT_ATTRS:
            self.lx.expect("<")
            fields: dict[str, Any] = {}
            while not self.lx.at(">"):
                key = self.lx.expect_kind("ident", "a field name").text
                self.lx.expect("=")
                fields[key] = self.attr_value()
                if not self.lx.accept(","):
                    break
            self.lx.expect(">", f"to close {tok.text}")
            return fields
        self.lx.skip_balanced()
        return OpaqueAttr(self.lx.text[tok.pos:self.lx.pos])

    def conv_dimension_numbers(self) -> dict[str, str]:
        """``[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`` or ``raw input_batch_dimension = 0, ...`` -> labels."""
        if self.lx.accept("raw"):
            fields: dict[str, Any] = {}
            while self.lx.peek().kind == "ident":
                key = self.lx.next().text
                self.lx.expect("=")
                fields[key] = self.attr_value()
                if not self.lx.accept(","):
                    break
            try:
                return {
                    "lhs": _labels(fields["input_batch_dimension"], fields["input_feature_dimension"],
                                   fields["input_spatial_dimensions"], "b", "f"),
                    "rhs": _labels(fields["kernel_output_feature_dimension"],
                                   fields["kernel_input_feature_dimension"],
                                   fields["kernel_spatial_dimensions"], "o", "i"),
                    "out": _labels(fields["output_batch_dimension"], fields["output_feature_dimension"],
                                   fields["output_spatial_dimensions"], "b", "f"),
                }
            except (KeyError, TypeError, IndexError) as e:
                raise self.lx.error(f"malformed convolution dimension numbers ({e})") from None
        lhs = self.conv_label_list()
        self.lx.expect("x", "between the input and kernel dimension labels")
        rhs = self.conv_label_list()
        self.lx.expect("->", "before the output dimension labels")
        out = self.conv_label_list()
        return {"lhs": lhs, "rhs": rhs, "out": out}

    def conv_label_list(self) -> str:
        self.lx.expect("[")
        labels = []
        while not self.lx.at("]"):
            tok = self.lx.next()
            if tok.kind not in ("ident", "int"):
                raise self.lx.error(f"expected a dimension label, found {describe(tok)}", tok.pos)
            labels.append(tok.text)
            if not self.lx.accept(","):
                break
        self.lx.expect("]")
        return "".join(labels)

    def array_attr(self) -> tuple:
        self.lx.expect("array")
        self.lx.expect("<")
        element = self.type()
        items: list[Any] = []
        if self.lx.accept(":"):
            while not self.lx.at(">"):
                tok = self.lx.next()
                if tok.text in ("true", "false"):
                    items.append(tok.text == "true")
                elif tok.kind == "int" or tok.kind == "hex":
                    items.append(int(tok.text, 0))
                elif tok.kind == "float":
                    items.append(float(tok.text))
                else:
                    raise self.lx.error(f"expected an array element, found {describe(tok)}", tok.pos)
                if not self.lx.accept(","):
                    break
        self.lx.expect(">", "to close the array")
        if isinstance(element, OtherType) and element.text == "i1":
            return tuple(bool(i) for i in items)
        return tuple(items)

    def dense_attr(self) -> DenseAttr | OpaqueAttr:
        start = self.lx.expect("dense")
        literal = self.dense_literal()
        self.lx.expect(":", "before the type of the dense literal")
        ttype = self.type()
        if not isinstance(ttype, TensorType):
            raise self.lx.error(f"a dense literal needs a tensor type, not '{ttype}'", start.pos)
        if ttype.dtype is None and ttype.complex_part is None:  # i4, f8..., index: kept as text with its type, refused where imported
            return OpaqueAttr(self.lx.text[start.pos:self.lx.pos], ttype)
        try:
            array = dense.to_array(literal, ttype)
        except dense.DenseError as e:
            raise self.lx.error(str(e), start.pos) from None
        return DenseAttr(ttype, array)

    def dense_literal(self) -> dense.Literal:
        self.lx.expect("<", "after 'dense'")
        if self.lx.accept(">"):
            return dense.Literal("list", [])
        tok = self.lx.peek()
        if tok.kind == "string":
            self.lx.next()
            literal = dense.Literal("hex", unquote(tok.text))
        elif tok.text == "[":
            literal = dense.Literal("list", self.dense_list())
        else:
            literal = dense.Literal("splat", self.dense_element())
        self.lx.expect(">", "to close the dense literal")
        return literal

    def dense_list(self) -> list[Any]:
        self.lx.expect("[")
        items: list[Any] = []
        while not self.lx.at("]"):
            items.append(self.dense_list() if self.lx.at("[") else self.dense_element())
            if not self.lx.accept(","):
                break
        self.lx.expect("]", "to close the list")
        return items

    def dense_element(self) -> dense.Element:
        tok = self.lx.next()
        if tok.kind in ("int", "float", "hex"):
            return dense.Element(tok.kind, tok.text)
        if tok.text in ("true", "false"):
            return dense.Element("bool", tok.text)
        if tok.text == "(":  # a complex element: (real, imaginary)
            real = self.dense_element()
            self.lx.expect(",", "between the real and imaginary parts")
            imag = self.dense_element()
            self.lx.expect(")", "to close the complex element")
            return dense.Element("complex", f"({real.text},{imag.text})")
        raise self.lx.error(f"expected a number in the dense literal, found {describe(tok)}", tok.pos)

    # ------------------------------------------------------------------ small readers for pretty forms
    def int_value(self) -> int:
        tok = self.lx.next()
        if tok.kind not in ("int", "hex"):
            raise self.lx.error(f"expected an integer, found {describe(tok)}", tok.pos)
        return int(tok.text, 0)

    def int_list(self) -> tuple[int, ...]:
        self.lx.expect("[")
        items = []
        while not self.lx.at("]"):
            items.append(self.int_value())
            if not self.lx.accept(","):
                break
        self.lx.expect("]", "to close the list")
        return tuple(items)


def _labels(batch: int, feature: int, spatial: Any, b: str, f: str) -> str:
    labels = [""] * (len(spatial) + 2)
    labels[batch] = b
    labels[feature] = f
    for k, d in enumerate(spatial):
        labels[d] = str(k)
    return "".join(labels)

