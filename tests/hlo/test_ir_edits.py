"""The IR's edit primitives (mlcc/hlo/ir.py) record inserts and removals and apply them in one pass, index
names for unique_name, and keep users as an ordered set: each is checked here against the plain list and set
operations they replace, over random sequences of edits."""

from __future__ import annotations

import random

import pytest

from mlcc.bundle.layout import align
from mlcc.hlo.buffer_assignment import Buffer, _peak_live, _place
from mlcc.hlo.ir import Computation, Instruction, Shape

S = Shape("f32", (4,))


def _inst(name: str, operands=()) -> Instruction:
    return Instruction(name, "negate" if operands else "parameter", S, operands,
                       {} if operands else {"index": 0})


@pytest.mark.parametrize("seed", range(20))
def test_edits_land_where_list_edits_would(seed):
    rng = random.Random(seed)
    comp = Computation("c")
    reference: list[Instruction] = []
    for k in range(8):
        reference.append(comp.add(_inst(f"i{k}")))
    for step in range(60):
        op = rng.choice(["before", "after", "remove", "add", "read"])
        live = list(reference)
        if op == "before" and live:
            anchor = rng.choice(live)
            new = comp.insert_before(anchor, _inst(f"b{step}"))
            reference.insert(reference.index(anchor), new)
        elif op == "after" and live:
            anchor = rng.choice(live)
            new = comp.insert_after(anchor, _inst(f"a{step}"))
            reference.insert(reference.index(anchor) + 1, new)
        elif op == "remove" and live:
            victim = rng.choice(live)
            comp.remove(victim)
            reference.remove(victim)
            assert victim.parent is None
        elif op == "add":
            reference.append(comp.add(_inst(f"n{step}")))
        else:
            assert comp.instructions == reference
    assert comp.instructions == reference
    assert all(i.parent is comp for i in comp.instructions)


def test_edits_refuse_what_a_list_would():
    comp = Computation("c")
    a = comp.add(_inst("a"))
    stranger = _inst("s")
    with pytest.raises(ValueError):
        comp.insert_before(stranger, _inst("x"))
    with pytest.raises(ValueError):
        comp.insert_after(stranger, _inst("x"))
    b = comp.add(_inst("b", [a]))
    with pytest.raises(ValueError, match="still used by %b"):
        comp.remove(a)
    comp.remove(b)
    with pytest.raises(ValueError):
        comp.remove(b)


def _smallest_free(names: set[str], hint: str) -> str:
    if hint not in names:
        return hint
    n = 1
    while f"{hint}.{n}" in names:
        n += 1
    return f"{hint}.{n}"


@pytest.mark.parametrize("seed", range(10))
def test_unique_name_is_the_smallest_free_suffix(seed):
    rng = random.Random(seed)
    comp = Computation("c")
    anchor = comp.add(_inst("p"))
    for step in range(200):
        hint = rng.choice(["x", "y", "x.1"])
        names = {i.name for i in comp.instructions}
        expected = _smallest_free(names, hint)
        assert comp.unique_name(hint) == expected
        if rng.random() < 0.7:
            comp.insert_before(anchor, _inst(expected))
        victims = [i for i in comp.instructions if i is not anchor]
        if victims and rng.random() < 0.3:
            comp.remove(rng.choice(victims))
    # a list edited directly (as a pass may do) is noticed
    comp.instructions.insert(0, _inst("x.999"))
    comp.instructions[0].parent = comp
    assert comp.unique_name("x.999") == "x.999.1"


def test_users_keep_order_and_identity():
    a = _inst("a")
    users = [_inst(f"u{k}", [a]) for k in range(5)]
    assert list(a.users) == users and len(a.users) == 5 and a.users[0] is users[0] and a.users[-1] is users[-1]
    b = _inst("b")
    users[1].set_operand(0, b)
    assert list(a.users) == [users[0], users[2], users[3], users[4]] and list(b.users) == [users[1]]
    users[1].set_operand(0, a)  # back at the end, as a list append puts it
    assert list(a.users) == [users[0], users[2], users[3], users[4], users[1]]
    twice = _inst("t", [a, a])
    assert sum(1 for u in a.users if u is twice) == 1
    twice.set_operand(0, b)
    assert twice in a.users and twice in b.users  # still reads a through its second operand
    a.replace_all_uses_with(b)
    assert not a.users and list(b.users) == [twice, users[0], users[2], users[3], users[4], users[1]]


@pytest.mark.parametrize("seed", range(10))
def test_arena_peak_and_placement_match_the_scans_they_replace(seed):
    rng = random.Random(seed)
    nsteps = 300
    buffers = []
    for k in range(150):
        first = rng.randrange(nsteps)
        last = min(nsteps - 1, first + rng.choice([0, 1, 2, 5, 40, 200]))
        buffers.append(Buffer(f"b{k}", "ACTIVATION", S, rng.choice([64, 256, 1000, 4096, 70000]), first,
                              [first, last]))
    scanned = max(sum(align(b.bytes) for b in buffers if b.first_step <= s <= b.last_step) for s in range(nsteps))
    assert _peak_live(buffers, nsteps) == scanned
    peak = _place(buffers)
    assert peak == _place_by_scanning(buffers)
    assert all(b.offset == b.expected for b in buffers)


def _place_by_scanning(buffers: list[Buffer]) -> int:
    """Greedy by size, each buffer at the lowest offset free over its live range, every placed buffer scanned
    (buffer assignment's placement before it indexed placed blocks by step; no in-place chains here)."""
    placed, peak = [], 0
    for b in sorted(buffers, key=lambda b: (-b.bytes, b.first_step, b.name)):
        size = align(max(b.bytes, 1))
        offset = 0
        for lo, hi in sorted((lo, hi) for lo, hi, f, l in placed if f <= b.last_step and b.first_step <= l):
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        b.expected = offset
        placed.append((offset, offset + size, b.first_step, b.last_step))
        peak = max(peak, offset + size)
    return peak
