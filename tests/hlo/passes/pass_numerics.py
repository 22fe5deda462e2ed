"""Checks for rewrite passes: IR text in, IR text out, and the same values before and after.

The reference is the numpy evaluator run on the module as written (before the pass),
on random inputs; constants given as arrays stand in for the weights file.
"""

from __future__ import annotations

import textwrap
from typing import Mapping

import numpy as np

from mlcc.hlo import symbolic
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.ir import Module, is_float
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.printer import format_module
from mlcc.hlo.testing import canonical
from mlcc.hlo.verifier import verify_module


def load(text: str, constants: Mapping[str, np.ndarray] | None = None) -> Module:
    module = parse_module(textwrap.dedent(text))
    module.constants.update(constants or {})
    verify_module(module)
    return module


def random_inputs(module: Module, seed: int = 0, symbols: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random arguments; symbolic dims at their values in ``symbols``."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for p in module.entry.parameters():
        dtype, dims = p.shape.dtype, tuple(symbolic.evaluate(d, symbols or {}) for d in p.shape.dims)
        if dtype == "pred":
            value = rng.random(dims) > 0.3
        elif is_float(dtype):
            value = rng.standard_normal(dims).astype(numpy_dtype(dtype))
        else:
            value = rng.integers(0, 4, dims).astype(numpy_dtype(dtype))
        inputs[p.attrs.get("name", f"p{p.attrs['index']}")] = value
    return inputs


def assert_same_values(before: Module, after: Module, rtol: float = 1e-5, atol: float = 1e-6, seed: int = 0,
                       inputs: Mapping[str, np.ndarray] | None = None, symbols: Mapping[str, int] | None = None) -> None:
    inputs = {**random_inputs(before, seed, symbols), **(inputs or {})}
    want = evaluate(before, inputs, symbols)
    got = evaluate(after, inputs, symbols)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_allclose(got[name].astype(np.float64), want[name].astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"output {name}")


def run(p: Pass, text: str, constants: Mapping[str, np.ndarray] | None = None) -> tuple[bool, Module]:
    module = load(text, constants)
    changed = p.run(module)
    verify_module(module)
    return changed, module


def check_rewrite(p: Pass, text: str, expected: str | None, constants: Mapping[str, np.ndarray] | None = None,
                  rtol: float = 1e-5, atol: float = 1e-6, inputs: Mapping[str, np.ndarray] | None = None,
                  symbols: Mapping[str, int] | None = None) -> Module:
    """Run p on text: the result prints as expected (None: unchanged) and computes the same values
    (on random inputs, or those given by parameter name; symbolic dims at their values in ``symbols``)."""
    changed, module = run(p, text, constants)
    out = format_module(module)
    if expected is None:
        assert not changed, f"{p.name} changed the module:\n{out}"
        assert out == canonical(text)
    else:
        assert changed, f"{p.name} reported no change"
        want = canonical(expected)
        assert out == want, f"{p.name} produced:\n{out}\nexpected:\n{want}"
    assert_same_values(load(text, constants), module, rtol=rtol, atol=atol, inputs=inputs, symbols=symbols)
    return module


def opcodes(module: Module) -> list[str]:
    return [i.opcode for i in module.entry.instructions]
