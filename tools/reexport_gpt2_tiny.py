"""Re-export the shared gpt2_tiny.onnx with a symbolic sequence dim, from its own weights.

    pip install --target /tmp/hf "transformers==5.23.0" "onnxscript==0.7.2" regex onnx_ir huggingface_hub \
        tokenizers safetensors tqdm
    PYTHONPATH=/tmp/hf python tools/reexport_gpt2_tiny.py tests/data/models/gpt2_tiny_dynseq.onnx

gpt2_tiny.onnx is transformers' GPT2LMHeadModel (tiny config, see ../shared/models/README.md) exported by
torch.onnx's dynamo exporter with every shape static. This builds the same model, loads the weights that
file holds, and exports it the same way with input_ids and attention_mask of shape [1, seq], seq in 1..64.
The static export keeps what it needs and no more, so the mapping back is:
- wte: the tied lm_head weight;
- every LayerNorm: the one shared weight and bias the export kept (all are ones and zeros);
- the Conv1D biases: zero, as transformers initializes them (the export dropped them);
- wpe: rows 0..15 are the folded position constant (embedding_1); rows 16..63, which a length-16 run never
  reads, get seeded N(0, 0.02) draws.
It checks that torch reproduces gpt2_tiny.ref.npz with those weights before exporting.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent.parent / "tests" / "data" / "models"


class Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def gpt2_tiny_weights(model: torch.nn.Module, weights: dict[str, np.ndarray]) -> None:
    sd = model.state_dict()
    for k in sd:
        exported = weights.get("model." + k)
        if exported is not None:
            sd[k] = torch.from_numpy(exported.copy())
        elif ".ln_" in k:
            sd[k] = torch.from_numpy(weights["model.transformer.h.0.ln_1." + k.rsplit(".", 1)[1]].copy())
        elif k.endswith(".bias") and (".attn." in k or ".mlp." in k):
            sd[k] = torch.zeros_like(sd[k])
    sd["transformer.wte.weight"] = sd["lm_head.weight"] = torch.from_numpy(weights["model.lm_head.weight"].copy())
    wpe = np.random.default_rng(0).normal(0, 0.02, tuple(sd["transformer.wpe.weight"].shape)).astype(np.float32)
    wpe[:16] = weights["embedding_1"][0]
    sd["transformer.wpe.weight"] = torch.from_numpy(wpe)
    model.load_state_dict(sd)


def main() -> None:
    import transformers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--source", default=str(HERE / "gpt2_tiny.onnx"))
    a = ap.parse_args()
    source = onnx.load(a.source)
    weights = {t.name: numpy_helper.to_array(t) for t in source.graph.initializer}
    config = transformers.GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                     activation_function="gelu_new", attn_implementation="sdpa")
    model = transformers.GPT2LMHeadModel(config).eval()
    gpt2_tiny_weights(model, weights)
    ref = np.load(Path(a.source).with_suffix(".ref.npz"))
    ids, mask = torch.from_numpy(ref["input_ids"]), torch.from_numpy(ref["attention_mask"])
    with torch.no_grad():
        err = float(np.abs(Logits(model)(ids, mask).numpy() - ref["out:logits"]).max())
    if err > 1e-5:
        raise SystemExit(f"the rebuilt model does not reproduce gpt2_tiny.ref.npz (max abs err {err:.3g})")
    seq = torch.export.Dim("seq", min=1, max=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(Logits(model), (ids, mask), dynamo=True, input_names=["input_ids", "attention_mask"],
                                    output_names=["logits"], dynamic_shapes=({1: seq}, {1: seq}), optimize=True)
    program.save(a.out)
    print(f"{a.out}: gpt2_tiny with input_ids/attention_mask [1, seq] (torch vs reference {err:.2g})")


if __name__ == "__main__":
    main()
