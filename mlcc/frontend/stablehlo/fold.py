"""Scalar ops evaluated at import time, with StableHLO's meaning.

Used for values known while importing: loop counters (so a ``while`` with a
constant trip count unrolls) and reduction init values. Only scalars are folded;
anything else is left to the IR. ``evaluate`` returns None when it cannot fold
(an op it does not know, or a case such as integer division by zero whose
meaning it leaves to the IR's evaluator).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from mlcc.frontend.stablehlo.known_ops import KNOWN_OPS
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.rules import RuleTable

FoldRule = Callable[[Op, list[np.ndarray]], Any]

_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}


def _int_divide(op: Op, xs: list[np.ndarray]) -> Any:
    a, b = xs
    if a.dtype.kind in "iu":
        if b == 0:
            return None
        q = abs(int(a)) // abs(int(b))
        return q if (int(a) < 0) == (int(b) < 0) else -q
    return a / b


def _remainder(op: Op, xs: list[np.ndarray]) -> Any:
    a, b = xs
    if a.dtype.kind in "iu":
        return None if b == 0 else int(np.fmod(int(a), int(b)))
    return np.fmod(a, b)


def _select(op: Op, xs: list[np.ndarray]) -> Any:
    p, a, b = xs
    return a if bool(p) else b


_RULES: RuleTable[FoldRule] = RuleTable("import-time fold rule", keys=KNOWN_OPS)
for _name, _rule in (
    ("stablehlo.constant", lambda op, xs: op.attrs["value"].array),
    ("stablehlo.add", lambda op, xs: xs[0] + xs[1] if xs[0].dtype.kind != "b" else xs[0] | xs[1]),
    ("stablehlo.subtract", lambda op, xs: xs[0] - xs[1]),
    ("stablehlo.multiply", lambda op, xs: xs[0] * xs[1] if xs[0].dtype.kind != "b" else xs[0] & xs[1]),
    ("stablehlo.divide", _int_divide),
    ("stablehlo.remainder", _remainder),
    ("stablehlo.maximum", lambda op, xs: np.maximum(xs[0], xs[1])),
    ("stablehlo.minimum", lambda op, xs: np.minimum(xs[0], xs[1])),
    ("stablehlo.negate", lambda op, xs: -xs[0]),
    ("stablehlo.abs", lambda op, xs: np.abs(xs[0])),
    ("stablehlo.and", lambda op, xs: xs[0] & xs[1]),
    ("stablehlo.or", lambda op, xs: xs[0] | xs[1]),
    ("stablehlo.xor", lambda op, xs: xs[0] ^ xs[1]),
    ("stablehlo.not", lambda op, xs: ~xs[0]),
    ("stablehlo.compare", lambda op, xs: _COMPARE[op.attrs["comparison_direction"]](xs[0], xs[1])),
    ("stablehlo.select", _select),
    ("stablehlo.clamp", lambda op, xs: np.minimum(np.maximum(xs[1], xs[0]), xs[2])),
    ("stablehlo.convert", lambda op, xs: xs[0]),
    ("stablehlo.broadcast_in_dim", lambda op, xs: xs[0].reshape(())),
    ("stablehlo.reshape", lambda op, xs: xs[0].reshape(())),
    ("stablehlo.optimization_barrier", lambda op, xs: xs[0]),
):
    _RULES.add(_name, _rule)


def can_fold(name: str) -> bool:
    return name in _RULES


def evaluate(op: Op, values: list[np.ndarray], dtype: str) -> np.ndarray | None:
    """The scalar result of op on known scalar (or one-element) operands, or None."""
    rule = _RULES.get(op.name)
    if rule is None or any(v.size != 1 for v in values):
        return None
    target = numpy_dtype(dtype)
    if op.name == "stablehlo.convert" and target.kind in "iub" and values[0].dtype.kind == "f":
        x = float(values[0].reshape(()))
        if not np.isfinite(x):
            return None
        values = [np.array(np.trunc(x))]
    try:
        with np.errstate(all="ignore"):
            out = rule(op, [v.reshape(()) for v in values])
    except (KeyError, TypeError, ValueError, AttributeError):  # malformed attributes: the rule reports them
        return None
    if out is None:
        return None
    out = np.asarray(out)
    if target.kind in "iu" and out.dtype.kind in "iu":
        bits = 8 * target.itemsize
        v = int(out) % (1 << bits)
        if target.kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return np.array(v, dtype=target)
    return out.astype(target)
