"""Launches and modeled bytes of pre-norm models whose norms have rows longer than a K tile (hidden 512): the
norms applied as their GEMMs load A tiles (statistics from the residual GEMM's partials or a statistics loop),
and every bundle against onnxruntime on CPU.

    python benchmarks/long_row_norms.py [--tree PATH] [--no-hf]

Models: a pre-norm block (h = x @ w1 + b1 + res, then norm(h) @ [wq | wk]; LLaMA's RMSNorm and GPT-2's
LayerNorm) built with onnx.helper, and 2-layer random-weight LLaMA and GPT-2 exports at hidden 512 (vocab 256,
seq 16, 8 heads; tools/export_hf_tiny.py's builders; needs transformers). --tree compiles with another
checkout's mlcc (main's, for the numbers before).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
HIDDEN, SEQ = 512, 16


def pre_norm_block(kind: str, path: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    arrays = {"w1": weight(HIDDEN, HIDDEN), "b1": 0.1 * rng.standard_normal(HIDDEN).astype(np.float32),
              "g": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), "wq": weight(HIDDEN, 64),
              "wk": weight(HIDDEN, 64)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["p"]), helper.make_node("Add", ["p", "b1"], ["pb"]),
             helper.make_node("Add", ["pb", "res"], ["h"])]
    if kind == "rms":
        nodes.append(helper.make_node("RMSNormalization", ["h", "g"], ["n"], axis=-1, epsilon=1e-6))
    else:
        arrays["beta"] = (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
        nodes.append(helper.make_node("LayerNormalization", ["h", "g", "beta"], ["n"], axis=-1, epsilon=1e-5))
    nodes += [helper.make_node("MatMul", ["n", "wq"], ["q"]), helper.make_node("MatMul", ["n", "wk"], ["k"])]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, f"pre_{kind}_norm",
        [value("x", TensorProto.FLOAT, [1, SEQ, HIDDEN]), value("res", TensorProto.FLOAT, [1, SEQ, HIDDEN])],
        [value("h", TensorProto.FLOAT, [1, SEQ, HIDDEN]), value("q", TensorProto.FLOAT, [1, SEQ, 64]),
         value("k", TensorProto.FLOAT, [1, SEQ, 64])], [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.save(model, path)
    inputs = {n: np.random.default_rng(4).standard_normal((1, SEQ, HIDDEN)).astype(np.float32) for n in ("x", "res")}
    return inputs


def hf_models(out: Path) -> list[Path]:
    import torch
    import transformers as t

    sys.path.insert(0, str(ROOT / "tools"))
    import export_hf_tiny as e

    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (1, SEQ))).to(torch.int64)
    gpt2 = t.GPT2Config(vocab_size=256, n_positions=64, n_embd=HIDDEN, n_layer=2, n_head=8, attn_implementation="sdpa")
    llama = dict(vocab_size=256, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2,
                 num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=64, attn_implementation="sdpa")
    paths = [out / "gpt2_h512.onnx", out / "llama_h512.onnx"]
    e.export(e.Logits(e.seeded(lambda **kw: gpt2, t.GPT2LMHeadModel, {})), (ids,), ["input_ids"], ["logits"], paths[0])
    e.export(e.Logits(e.seeded(t.LlamaConfig, t.LlamaForCausalLM, llama)), (ids,), ["input_ids"], ["logits"],
             paths[1])
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="the mlcc checkout to compile with")
    ap.add_argument("--no-hf", action="store_true", help="only the onnx.helper blocks")
    a = ap.parse_args()
    sys.path.insert(0, str(a.tree.resolve()))
    import mlcc

    rows = []
    with tempfile.TemporaryDirectory(prefix="mlcc-long-rows-") as tmp:
        tmp = Path(tmp)
        models = []
        for kind in ("rms", "layer"):
            path = tmp / f"pre_{kind}_norm_h512.onnx"
            models.append((path, pre_norm_block(kind, path)))
        if not a.no_hf:
            for path in hf_models(tmp):
                ref = np.load(path.with_suffix(".ref.npz"))
                models.append((path, {k: ref[k] for k in ref.files if not k.startswith("out:")}))
        for path, inputs in models:
            r = mlcc.compile(path, tmp / path.stem, targets=[], cache_dir="")
            m = json.loads((r.out_dir / "manifest.json").read_text())
            want = ort.InferenceSession(str(path)).run(None, inputs)
            got = mlcc.load(r.out_dir, device="cpu").run(inputs)
            names = [o.name for o in ort.InferenceSession(str(path)).get_outputs()]
            err = max(float(np.abs(got[n] - w).max()) for n, w in zip(names, want))
            rows.append((path.stem, len(m["schedule"]), m["stats"]["bytes"], _statistics_loops(r.out_dir, m), err))
    print("| model | launches | modeled bytes | statistics loops | max abs error vs onnxruntime |")
    print("|---|---|---|---|---|")
    for name, launches, nbytes, loops, err in rows:
        print(f"| {name} | {launches} | {nbytes:,} | {loops} | {err:.1e} |")


def _statistics_loops(out: Path, manifest: dict) -> int:
    """Launches of GEMMs that run a statistics loop over their rows before their K loop (a second pass over
    each program's rows, which the traffic model does not count), not reading partials a producer stored."""
    kernels = {k["name"]: k for k in manifest["kernels"]}
    return sum("# each row's statistics over its" in (out / kernels[s["kernel"]]["source"]).read_text()
               for s in manifest["schedule"])


if __name__ == "__main__":
    main()
