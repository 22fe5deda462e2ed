"""Fusion's groups index their members (mlcc/hlo/passes/fusion.py): membership and the values read from outside,
kept up to date as members are appended, and trials that refer to a group instead of copying it. Each answer is
checked against the scans over the member list that the indexes replace, on random graphs."""

from __future__ import annotations

import random

import pytest

from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.passes.fusion import Group, _operands_outside

S = Shape("f32", (4,))


def _scanned_outside(members: list[Instruction]) -> list[Instruction]:
    seen: list[Instruction] = []
    for m in members:
        for o in m.operands:
            if not any(o is x for x in members) and not any(o is x for x in seen):
                seen.append(o)
    return seen


def _graph(rng: random.Random, n: int) -> list[Instruction]:
    values = [Instruction(f"p{k}", "parameter", S, (), {"index": k}) for k in range(3)]
    for k in range(n):
        operands = [rng.choice(values) for _ in range(rng.choice([1, 2, 2, 3]))]
        values.append(Instruction(f"v{k}", "add", S, operands))
    return values


@pytest.mark.parametrize("seed", range(20))
def test_indexes_answer_as_the_scans_do(seed):
    rng = random.Random(seed)
    values = _graph(rng, 40)
    order = values[3:]
    rng.shuffle(order)
    group = Group(order[0], "loop", [order[0]])
    for p in order[1:25]:
        trial = group.grown(p, "loop", None, None, None)
        assert _operands_outside(trial) == _scanned_outside(group.members + [p])
        assert list(trial.members) == group.members + [p] and len(trial.members) == len(group.members) + 1
        assert all(trial.contains(v) == any(v is m for m in group.members + [p]) for v in values)
        if rng.random() < 0.6:
            group.members.append(p)
        assert _operands_outside(group) == _scanned_outside(group.members)
        assert all(group.contains(v) == any(v is m for m in group.members) for v in values)
    group.members = group.members[:3]  # a new, shorter list is indexed afresh
    assert _operands_outside(group) == _scanned_outside(group.members)
    assert all(group.contains(v) == any(v is m for m in group.members) for v in values)
