"""Kernel launches and modeled global-memory bytes per inference: mlcc (fused) against the unfused
graph (one kernel per op), the node count onnxruntime leaves after ORT_ENABLE_ALL, and TorchInductor's
launches for the models that come from transformers.

    python benchmarks/fusion.py [MODEL.onnx ...] [--json out.json] [--no-inductor]

Models: examples/models, ../shared/models, tests/data/models/hf and the onnx wheel's light models.
"bytes" is the model of mlcc's manifest: each kernel reads its inputs once and writes its output once;
the unfused baseline counts views (Reshape, Squeeze, Unsqueeze, Flatten) as free.

Inductor: the same PyTorch model (tools/export_hf_tiny.py's builders; gpt2_tiny and bert_tiny from their
configs in ../shared/models/README.md) compiled by ``torch.compile`` (default mode, this CPU build), its
launches counted in the output code's ``call()``: generated kernels (cpp_fused_*/triton_*) plus library
calls (extern_kernels.* matmuls, torch.ops.* such as the attention op). Needs transformers; without it
the columns say n/a.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import mlcc  # noqa: E402


def ort_nodes(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        opt = Path(tmp) / "opt.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(opt)
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return len(onnx.load(str(opt), load_external_data=False).graph.node)


def default_models() -> list[Path]:
    paths = sorted((ROOT / "examples" / "models").glob("*.onnx"))
    shared = ROOT.parent / "shared" / "models"
    paths += sorted(p for p in shared.glob("*.onnx") if not any(p.name == q.name for q in paths))
    paths += sorted((ROOT / "tests" / "data" / "models" / "hf").glob("*.onnx"))
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    paths += sorted(light.glob("light_*.onnx"))
    return paths


def measure(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = mlcc.compile(path, Path(tmp) / "b", targets=[], cache_dir="")
        seconds = time.perf_counter() - t
    s = r.manifest["stats"]
    return {"model": path.name, "launches": s["launches"], "kernels": s["kernels"], "bytes": s["bytes"],
            "unfused_launches": s["unfused"]["launches"], "unfused_bytes": s["unfused"]["bytes"],
            "ort_nodes": ort_nodes(path), "compile_seconds": round(seconds, 2),
            "layout_conversions": s["layout_conversions"]["count"]}


LAUNCH = re.compile(r"^\s*(?:\w+ = )?(cpp_fused_\w+|triton_\w+\.run|extern_kernels\.\w+|torch\.ops\.[\w.]+)\(")


def inductor_launches(code: str) -> dict[str, int]:
    """Generated-kernel launches and library calls in the ``call()`` of Inductor's output code."""
    body = code[code.index("def call("):]
    counts = {"kernels": 0, "library": 0}
    for line in body.splitlines():
        m = LAUNCH.match(line)
        if m:
            counts["kernels" if m.group(1).startswith(("cpp_fused", "triton_")) else "library"] += 1
    return counts


def torch_model(stem: str):
    """(module, example inputs) of the PyTorch model an ONNX file was exported from, or None."""
    sys.path.insert(0, str(ROOT / "tools"))
    import export_hf_tiny
    import torch
    import transformers as t

    if (ROOT / "tests" / "data" / "models" / "hf" / f"{stem}.onnx").exists():
        module, args, _, _ = export_hf_tiny.build(stem)
        return module, args
    class Out(torch.nn.Module):  # the output the ONNX export has: logits, or BERT's last hidden state
        def __init__(self, model, field):
            super().__init__()
            self.model, self.field = model, field

        def forward(self, *args):
            names = ("input_ids", "attention_mask", "token_type_ids")
            return getattr(self.model(**dict(zip(names, args))), self.field)

    ids = torch.zeros(1, 16, dtype=torch.int64)
    if stem == "gpt2_tiny":
        cfg = t.GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                           activation_function="gelu_new", attn_implementation="sdpa")
        model = t.GPT2LMHeadModel(cfg).eval()
        return Out(model, "logits"), (ids, torch.ones_like(ids))
    if stem == "bert_tiny":
        cfg = t.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, hidden_act="gelu", attn_implementation="sdpa")
        return Out(t.BertModel(cfg).eval(), "last_hidden_state"), (ids, torch.ones_like(ids), torch.zeros_like(ids))
    return None


def inductor(path: Path) -> dict[str, int] | None:
    """Inductor's launches for the model path was exported from (None: no PyTorch model known for it)."""
    import torch
    from torch._inductor.utils import run_and_get_code

    found = torch_model(path.stem)
    if found is None:
        return None
    module, args = found
    torch._dynamo.reset()
    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(module), *args)
    counts = {"kernels": 0, "library": 0}
    for code in codes:
        for k, v in inductor_launches(code).items():
            counts[k] += v
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-inductor", action="store_true", help="skip the torch.compile columns")
    a = ap.parse_args()
    with_inductor = not a.no_inductor
    if with_inductor:
        try:
            import transformers  # noqa: F401
        except ImportError:
            print("transformers is not installed: the Inductor columns are skipped (n/a)")
            with_inductor = False
    rows = []
    header = (f"{'model':<28}{'launches':>9}{'unfused':>9}{'ORT nodes':>10}{'kernels':>9}{'bytes':>14}"
              f"{'unfused bytes':>15}{'ratio':>7}{'Inductor':>10}{'mlcc/Ind':>9}")
    print(header)
    for p in a.models or default_models():
        try:
            row = measure(p)
        except mlcc.MlccError as e:
            print(f"{p.name:<28} failed: {e}")
            continue
        ind = inductor(p) if with_inductor else None
        if ind is not None:
            row["inductor_kernels"], row["inductor_library_calls"] = ind["kernels"], ind["library"]
            row["inductor_launches"] = ind["kernels"] + ind["library"]
        rows.append(row)
        launches = row.get("inductor_launches")
        ind_col = f"{launches:>10}{row['launches'] / launches:>9.2f}" if launches else f"{'n/a':>10}{'':>9}"
        print(f"{row['model']:<28}{row['launches']:>9}{row['unfused_launches']:>9}{row['ort_nodes']:>10}"
              f"{row['kernels']:>9}{row['bytes']:>14,}{row['unfused_bytes']:>15,}"
              f"{row['bytes'] / max(row['unfused_bytes'], 1):>7.2f}{ind_col}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
