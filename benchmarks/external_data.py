"""Peak memory of compiling a model whose weights live in an external data file larger than RAM should matter.

    python benchmarks/external_data.py [--gib 1.1] [--dir DIR]

Writes DIR/model.onnx (MatMul + Add) with its weight matrix in DIR/weights.bin, a file of ``--gib`` GiB made
slab by slab (the script never holds it either), then compiles it with ``mlcc.compile(..., targets=[])`` in a
fresh process and prints: the file size, the compile's peak traced allocations (tracemalloc: every Python
and numpy allocation), its peak RSS (which also counts pages of the memory-mapped file that the kernel may
drop at will), and the wall time. A compile that read the weights into memory would show a traced peak of
at least the file's size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]

MEASURE = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[3])
import mlcc
tracemalloc.start()
t = time.perf_counter()
mlcc.compile(sys.argv[1], sys.argv[2], targets=[], cache_dir="")
seconds = time.perf_counter() - t
print(json.dumps({"peak_traced": tracemalloc.get_traced_memory()[1], "seconds": seconds,
                  "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def write_model(folder: Path, gib: float, k: int = 8192) -> Path:
    """model.onnx: y = x @ w + b, x [1, k], w [k, n] in weights.bin with n chosen to make ``gib`` GiB."""
    n = max(1, int(gib * 2**30) // (4 * k))
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    w_bytes = k * n * 4
    with open(folder / "weights.bin", "wb") as f:
        rows = max(1, (64 << 20) // (4 * n))
        for start in range(0, k, rows):
            f.write(rng.standard_normal((min(rows, k - start), n), dtype=np.float32).tobytes())
        f.write(rng.standard_normal(n, dtype=np.float32).tobytes())

    def external(name: str, dims: list[int], offset: int, length: int) -> TensorProto:
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims, data_location=TensorProto.EXTERNAL)
        for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        return t

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"), helper.make_node("Add", ["h", "b"], ["y"],
                                                                                        name="add")],
        "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [external("w", [k, n], 0, w_bytes), external("b", [n], w_bytes, n * 4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, folder / "model.onnx")
    return folder / "model.onnx"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.1, help="size of the weights file in GiB (default 1.1)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the model (default: a temporary folder)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp) / "model"
        model = write_model(folder, args.gib)
        size = (folder / "weights.bin").stat().st_size
        r = subprocess.run([sys.executable, "-c", MEASURE, str(model), str(Path(tmp) / "bundle"), str(ROOT)],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        m = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"weights file           {size / 2**30:.2f} GiB ({size:,} bytes)")
    print(f"peak traced allocation {m['peak_traced'] / 2**20:.1f} MiB ({m['peak_traced'] / size:.1%} of the file)")
    print(f"peak RSS               {m['max_rss'] / 2**20:.1f} MiB (includes mapped file pages)")
    print(f"compile time           {m['seconds']:.1f} s (--target none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
