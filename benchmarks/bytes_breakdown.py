"""Where a model's modeled bytes per inference go: each launch's reads and writes (the traffic model of the
manifest's stats, mlcc/hlo/traffic.py) split into weights, model inputs, model outputs and activations.

    python benchmarks/bytes_breakdown.py MODEL.onnx [--bar 0.40]

Weights (constants read from weights.bin, an embedding table counted by the rows its gathers read), the
inputs read and the outputs written are the floor no fusion goes below: a program that ran the whole model
in one kernel would still move them. The rest is activation traffic: values one kernel writes and others
read. The summary prints the floor's ratio to the unfused baseline and how many activation bytes a bar
leaves room for.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mlcc  # noqa: E402
from mlcc.hlo.ir import Instruction  # noqa: E402
from mlcc.hlo.traffic import operand_read_bytes, value_bytes  # noqa: E402

CLASSES = ("weights", "inputs", "activations read", "activations written", "outputs")


def _class_of(value: Instruction) -> str:
    if value.opcode == "constant":
        return "weights"
    if value.opcode == "parameter":
        return "inputs"
    return "activations read"


def _stored(value: Instruction) -> Instruction:
    """The launch that wrote value: the value itself, or what a view (bitcast) of it shows, or the multi-output
    fusion one of whose results it is (get-tuple-element)."""
    while value.opcode in ("bitcast", "get-tuple-element"):
        value = value.operands[0]
    return value


def _results(inst: Instruction, symbols: dict) -> list[tuple[Instruction, int]]:
    """(the value holding it, bytes) of each result inst's kernel writes: itself, or each get-tuple-element of
    a multi-output fusion."""
    if not inst.shape.is_tuple:
        return [(inst, value_bytes(inst, symbols))]
    return [(u, value_bytes(u, symbols)) for u in inst.users if u.opcode == "get-tuple-element"]


def breakdown(path: Path) -> dict:
    """Per launch: (instruction, kernel, {class: bytes}); totals per class; per stored activation (a value one
    launch writes and others read): [bytes written, {reader: bytes read}]; the unfused baseline's bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        r = mlcc.compile(path, Path(tmp) / "b", targets=[], cache_dir="")
    module = r.module
    by_name = {inst.name: inst for inst in module.entry.instructions}
    root = module.entry.root
    outputs = {id(o) for o in root.operands} if root.opcode == "tuple" else {id(root)}
    rows, totals = [], dict.fromkeys(CLASSES, 0)
    edges: dict[str, list] = {}
    for launch in r.manifest["schedule"]:
        inst = by_name[launch["instruction"]]
        counts = dict.fromkeys(CLASSES, 0)
        seen: set[int] = set()
        for i, o in enumerate(inst.operands):  # as kernel_bytes: an operand passed twice is read once
            if id(o) not in seen:
                seen.add(id(o))
                n = operand_read_bytes(inst, i, module.symbols)
                counts[_class_of(o)] += n
                if _class_of(o) == "activations read":
                    edges[_stored(o).name][1][inst.name] = n
        results = _results(inst, module.symbols)
        for value, n in results:
            counts["outputs" if id(value) in outputs else "activations written"] += n
        edges[inst.name] = [sum(n for value, n in results if id(value) not in outputs), {}]
        assert sum(counts.values()) == launch["bytes_read"] + launch["bytes_written"], launch["instruction"]
        rows.append((inst.name, launch["kernel"], counts))
        for k, v in counts.items():
            totals[k] += v
    stats = r.manifest["stats"]
    assert sum(totals.values()) == stats["bytes"]
    return {"rows": rows, "totals": totals, "edges": edges, "bytes": stats["bytes"], "unfused": stats["unfused"]["bytes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--bar", type=float, default=0.40, help="a bytes ratio to the unfused baseline (default 0.40)")
    a = ap.parse_args()
    b = breakdown(a.model)
    short = ("weights", "inputs", "act read", "act written", "outputs")
    print(f"{'launch':<24}{'kernel':<28}" + "".join(f"{s:>12}" for s in short))
    for name, kernel, counts in b["rows"]:
        print(f"{name:<24}{kernel:<28}" + "".join(f"{counts[k]:>12,}" for k in CLASSES))
    t = b["totals"]
    print(f"{'total':<52}" + "".join(f"{t[k]:>12,}" for k in CLASSES))
    print(f"\n{'stored value':<24}{'written':>10}{'read':>10}{'cost':>10}  readers")
    for name, (written, readers) in b["edges"].items():
        if readers:
            read = sum(readers.values())
            print(f"{name:<24}{written:>10,}{read:>10,}{written + read:>10,}  {', '.join(readers)}")
    floor = t["weights"] + t["inputs"] + t["outputs"]
    activations = t["activations read"] + t["activations written"]
    unfused, bar = b["unfused"], a.bar * b["unfused"]
    print(f"\nbytes {b['bytes']:,} = {b['bytes'] / unfused:.3f} of the unfused baseline ({unfused:,})")
    print(f"floor (weights + inputs + outputs, the whole model in one kernel): {floor:,} = {floor / unfused:.3f}")
    room = int(bar) - floor
    if room < 0:
        print(f"activations: {activations:,} bytes; a bar of {a.bar} ({int(bar):,} bytes) is below the floor")
    else:
        print(f"activations: {activations:,} bytes; a bar of {a.bar} ({int(bar):,} bytes) leaves {room:,} for them: "
              + (f"today's are {activations - room:,} over" if activations > room else "met"))

if __name__ == "__main__":
    main()
