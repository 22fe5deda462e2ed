"""The numpy reference evaluator: the normative meaning of every opcode.

Values are logical numpy arrays of the instruction's dtype (layouts only matter to
``bitcast``); ``tuple`` values are Python tuples. Each opcode has one rule in
``EVAL_RULES``, ``rule(inst, operand_values) -> value``, and
``evaluate_computation`` casts every result to the instruction's dtype and checks
its dims. A ``parameter``'s rule receives the bound argument as its one operand.

Choices where numpy, XLA and ONNX differ, fixed here for every backend:

- f16/bf16 compute in f32 and round once at the end; reductions, dot,
  convolution, norms, softmax and attention accumulate in f32 (f64 stays f64).
- Integer ``divide`` truncates toward zero; ``x / 0`` is -1 (all bits set, the
  maximum for unsigned types) and ``INT_MIN / -1`` is ``INT_MIN``, as in XLA.
  ``remainder`` (sign of the divisor) and ``fmod`` (sign of the dividend) give
  ``x`` for ``x % 0`` and 0 for ``INT_MIN % -1``. Integer ``power`` with a negative
  exponent is 0 unless the base is 1 or -1. Integer overflow wraps.
- Shift amounts are read as unsigned: an amount >= the bit width shifts every bit
  out (0 for ``shift-left`` and ``shift-right-logical``, the sign for
  ``shift-right-arithmetic``, which works on the bit pattern as signed).
- ``convert`` from float to int truncates toward zero, saturates at the type's
  range and maps NaN to 0; ``convert`` to pred is ``x != 0``.
- Arithmetic on pred: ``add``/``or`` is logical or, ``multiply``/``and`` logical and.
- ``argmax``/``argmin`` treat NaN as the extreme value (numpy's rule).
- ``scatter-nd`` with ``reduction=none`` and duplicate indices: the last update wins.
- ``softmax`` of a row that is all -inf is NaN; ``attention`` gives 0 for a
  fully masked row, unless it has ``masked_value=V`` (the model masks by adding a finite V): then the
  softmax of every score of that row plus V, as the model computes it.

Symbolic dims are bound from the arguments' dims when parameters are evaluated
(or given up front, ``symbols=``); a symbol first produced by an op (a reshape's
``-1``) is bound from its result. A dim that is an expression (``64*seq``,
``past+seq``), or a symbolic slice bound, is evaluated once its symbols are bound.
"""

from mlcc.hlo.evaluator.core import (EVAL_RULES, EvaluationError, Rule, Value, evaluate, evaluate_computation,
                                     evaluate_instruction, rule)
# Importing the rule modules fills EVAL_RULES.
from mlcc.hlo.evaluator import contractions, data, dynamic, elementwise, reductions  # noqa: F401

__all__ = ["EVAL_RULES", "EvaluationError", "Rule", "Value", "evaluate", "evaluate_computation",
           "evaluate_instruction", "rule"]
