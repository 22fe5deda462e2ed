"""The Triton code of every elementwise op: one entry per opcode, the single place an op's emission lives.

``EXPR[key][category]`` is the code of opcode ``key`` (``opcode/variant`` for compare's direction and
gelu's approximation) on operands of a dtype category (float, signed, unsigned or pred; ``any`` for
every category without its own). An entry is either
- a format string, the one-line expression ``out = ...`` over the operands ``{x}``, ``{y}``, ``{z}``
  and the compute dtype's ``{T}`` (its tl type), ``{UT}``/``{ST}`` (the unsigned/signed tl type of its
  width), ``{BITS}`` and ``{SQRT}`` (the correctly rounded square root for f32); or
- ``Lines(macro, *fields)``: several statements, written by a macro of templates/loop_math.py.jinja
  called as ``macro(out, *fields)``, each field a statement attribute (``x``/``y``/``z`` the operands,
  ``signed`` whether the category is signed).

An op statement (mlcc/emit/codegen/body.py ElementOp) receives its operands in its compute dtype (f16
and bf16 widened to f32), so an entry is written for f32, f64 and the integer and pred dtypes only.
Adding an elementwise op's kernel code is adding its entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlcc.emit.codegen.body import ElementOp
from mlcc.emit.codegen.triton_types import tl_type


@dataclass(frozen=True)
class Lines:
    """Several statements: the loop_math.py.jinja macro ``macro``, called as macro(out, *fields)."""
    macro: str
    fields: tuple[str, ...]

    def __init__(self, macro: str, *fields: str) -> None:
        object.__setattr__(self, "macro", macro)
        object.__setattr__(self, "fields", fields)


Entry = str | Lines

EXPR: dict[str, dict[str, Entry]] = {
    "abs": {"float": "tl.abs({x})", "signed": "tl.abs({x})", "unsigned": "{x}", "pred": "{x}"},
    "negate": {"float": "-{x}", "signed": "-{x}", "unsigned": "(0 - {x})"},
    "exp": {"float": "tl.exp({x})"},
    "log": {"float": "tl.log({x})"},
    "sqrt": {"float": "{SQRT}({x})"},
    "rsqrt": {"float": "1.0 / {SQRT}({x})"},
    "erf": {"float": "tl.math.erf({x})"},
    "sin": {"float": "tl.sin({x})"},
    "cos": {"float": "tl.cos({x})"},
    "tan": {"float": "tl.sin({x}) / tl.cos({x})"},
    "floor": {"float": "tl.floor({x})", "signed": "{x}", "unsigned": "{x}", "pred": "{x}"},
    "ceil": {"float": "tl.ceil({x})", "signed": "{x}", "unsigned": "{x}", "pred": "{x}"},
    "round-nearest-even": {"float": Lines("rint", "x"), "signed": "{x}", "unsigned": "{x}", "pred": "{x}"},
    "round-nearest-afz": {"float": Lines("round_afz", "x"), "signed": "{x}", "unsigned": "{x}", "pred": "{x}"},
    "sign": {"float": "tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, {x}))",
             "signed": "tl.where({x} > 0, 1, tl.where({x} < 0, -1, 0)).to({T})",
             "unsigned": "tl.where({x} > 0, 1, 0).to({T})", "pred": "{x}"},
    "not": {"signed": "~{x}", "unsigned": "~{x}", "pred": "{x} == 0"},
    "is-finite": {"float": "tl.abs({x}) < float(\"inf\")", "any": "{x} == {x}"},
    "is-nan": {"float": "{x} != {x}", "any": "{x} != {x}"},
    "is-inf": {"float": "tl.abs({x}) == float(\"inf\")", "any": "{x} != {x}"},
    "reciprocal": {"float": "1.0 / {x}"},
    "softsign": {"float": "{x} / (1.0 + tl.abs({x}))"},
    "relu": {"float": "tl.where({x} < 0, 0.0, {x})", "signed": "tl.where({x} < 0, 0, {x})",
             "unsigned": "{x}", "pred": "{x}"},
    "popcnt": {"signed": Lines("popcnt_int", "x", "utype", "dtype"),
               "unsigned": Lines("popcnt_int", "x", "utype", "dtype"), "pred": "{x}"},
    "gelu/none": {"float": "0.5 * {x} * (1.0 + tl.math.erf({x} * 0.7071067811865476))"},
    "add": {"any": "{x} + {y}", "pred": "{x} | {y}"},
    "subtract": {"any": "{x} - {y}", "pred": "{x} ^ {y}"},
    "multiply": {"any": "{x} * {y}", "pred": "{x} & {y}"},
    "divide": {"float": "{x} / {y}",
               "signed": "tl.where({y} == 0, -1, tl.where({y} == -1, -{x}, "
                         "{x} // tl.where(({y} == 0) | ({y} == -1), 1, {y})))",
               "unsigned": "tl.where({y} == 0, {x} | ~{x}, {x} // tl.where({y} == 0, 1, {y}))"},
    "fmod": {"float": "{x} % {y}",
             "signed": "tl.where({y} == 0, {x}, {x} % tl.where(({y} == 0) | ({y} == -1), 1, {y}))",
             "unsigned": "tl.where({y} == 0, {x}, {x} % tl.where({y} == 0, 1, {y}))"},
    "remainder": {"float": Lines("remainder", "x", "y", "category"), "signed": Lines("remainder", "x", "y", "category"),
                  "unsigned": "tl.where({y} == 0, {x}, {x} % tl.where({y} == 0, 1, {y}))"},
    "maximum": {"float": "tl.maximum({x}, {y}, propagate_nan=tl.PropagateNan.ALL)",
                "signed": "tl.maximum({x}, {y})", "unsigned": "tl.maximum({x}, {y})", "pred": "{x} | {y}"},
    "minimum": {"float": "tl.minimum({x}, {y}, propagate_nan=tl.PropagateNan.ALL)",
                "signed": "tl.minimum({x}, {y})", "unsigned": "tl.minimum({x}, {y})", "pred": "{x} & {y}"},
    "and": {"signed": "{x} & {y}", "unsigned": "{x} & {y}", "pred": "{x} & {y}"},
    "or": {"signed": "{x} | {y}", "unsigned": "{x} | {y}", "pred": "{x} | {y}"},
    "xor": {"signed": "{x} ^ {y}", "unsigned": "{x} ^ {y}", "pred": "{x} ^ {y}"},
    "shift-left": {"signed": "tl.where(({y} >= 0) & ({y} < {BITS}), "
                             "{x} << tl.where(({y} >= 0) & ({y} < {BITS}), {y}, 0), 0)",
                   "unsigned": "tl.where({y} < {BITS}, {x} << tl.where({y} < {BITS}, {y}, 0), 0)"},
    "shift-right-logical": {
        "signed": "tl.where(({y} >= 0) & ({y} < {BITS}), ({x}.to({UT}, bitcast=True) "
                  ">> tl.where(({y} >= 0) & ({y} < {BITS}), {y}, 0).to({UT})).to({T}, bitcast=True), 0)",
        "unsigned": "tl.where({y} < {BITS}, {x} >> tl.where({y} < {BITS}, {y}, 0), 0)"},
    "shift-right-arithmetic": {
        "signed": "{x} >> tl.where(({y} >= 0) & ({y} < {BITS}), {y}, {BITS} - 1)",
        "unsigned": "({x}.to({ST}, bitcast=True) >> tl.where({y} < {BITS}, {y}, {BITS} - 1).to({ST}))"
                    ".to({T}, bitcast=True)"},
    "compare/EQ": {"any": "{x} == {y}"},
    "compare/NE": {"any": "{x} != {y}"},
    "compare/LT": {"any": "{x} < {y}", "pred": "{x}.to(tl.int8) < {y}.to(tl.int8)"},
    "compare/LE": {"any": "{x} <= {y}", "pred": "{x}.to(tl.int8) <= {y}.to(tl.int8)"},
    "compare/GT": {"any": "{x} > {y}", "pred": "{x}.to(tl.int8) > {y}.to(tl.int8)"},
    "compare/GE": {"any": "{x} >= {y}", "pred": "{x}.to(tl.int8) >= {y}.to(tl.int8)"},
    "select": {"any": "tl.where({x}, {y}, {z})"},
    "clamp": {"float": "tl.minimum(tl.maximum({y}, {x}, propagate_nan=tl.PropagateNan.ALL), {z}, "
                       "propagate_nan=tl.PropagateNan.ALL)",
              "signed": "tl.minimum(tl.maximum({y}, {x}), {z})", "unsigned": "tl.minimum(tl.maximum({y}, {x}), {z})",
              "pred": "({y} | {x}) & {z}"},
    "expm1": {"float": Lines("expm1", "x")},
    "log-plus-one": {"float": Lines("log1p", "x")},
    "cbrt": {"float": Lines("cbrt", "x")},
    "tanh": {"float": Lines("tanh", "x")},
    "asin": {"float": Lines("asin", "x", "dtype")},
    "acos": {"float": Lines("acos", "x", "dtype")},
    "atan": {"float": Lines("atan", "x")},
    "sinh": {"float": Lines("sinh", "x")},
    "cosh": {"float": Lines("cosh", "x")},
    "asinh": {"float": Lines("asinh", "x", "dtype")},
    "acosh": {"float": Lines("acosh", "x", "dtype")},
    "atanh": {"float": Lines("atanh", "x")},
    "atan2": {"float": Lines("atan2", "x", "y")},
    "logistic": {"float": Lines("logistic", "x")},
    "softplus": {"float": Lines("softplus", "x")},
    "mish": {"float": Lines("mish", "x")},
    "gelu/tanh": {"float": Lines("gelu_tanh", "x")},
    "power": {"float": Lines("pow", "x", "y", "dtype"), "signed": Lines("ipow", "x", "y", "bits", "signed"),
              "unsigned": Lines("ipow", "x", "y", "bits", "signed")},
}


@dataclass(frozen=True)
class Code:
    """What the template writes for an op statement: ``out = expr``, or the macro's lines."""
    expr: str | None = None
    macro: str | None = None
    args: tuple[Any, ...] = ()


def _key(op: str, variant: str | None) -> str:
    return op + ("/" + variant if variant else "")


def entry(op: str, variant: str | None, category: str) -> Entry | None:
    """The table's code of op (with its variant) on a dtype category, or None where it has none."""
    table = EXPR.get(_key(op, variant), {})
    return table.get(category, table.get("any"))


def has_code(op: str, variant: str | None, category: str) -> bool:
    return entry(op, variant, category) is not None


def _field(s: ElementOp, name: str) -> Any:
    if name in ("x", "y", "z"):
        return s.args["xyz".index(name)]
    if name == "signed":
        return s.category == "signed"
    return getattr(s, name)


def element_code(s: ElementOp) -> Code:
    """The code of an op statement (its entry, filled in with the statement's operands and dtypes)."""
    code = entry(s.op, s.variant, s.category)
    if code is None:
        raise KeyError(f"no kernel code for {_key(s.op, s.variant)} on {s.dtype}")
    if isinstance(code, Lines):
        return Code(macro=code.macro, args=tuple(_field(s, f) for f in code.fields))
    args = list(s.args) + [""] * (3 - len(s.args))
    return Code(expr=code.format(x=args[0], y=args[1], z=args[2], T=tl_type(s.dtype),
                                 SQRT="tl.sqrt_rn" if s.dtype == "f32" else "tl.sqrt", UT=tl_type(s.utype),
                                 ST=tl_type(s.stype), BITS=s.bits))
