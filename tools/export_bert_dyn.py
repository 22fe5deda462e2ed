"""Export a tiny transformers BertModel with a symbolic batch and sequence: tests/data/models/bert_dyn_tiny.onnx.

    pip install --target /tmp/hf "transformers==5.23.0" "onnxscript==0.7.2" regex onnx_ir huggingface_hub \
        tokenizers safetensors tqdm
    PYTHONPATH=/tmp/hf python tools/export_bert_dyn.py tests/data/models/bert_dyn_tiny.onnx

The shared bert_tiny's config (vocab 1000, hidden 64, 2 layers, 4 heads, intermediate 128, 64 positions),
random weights (seed 0), exported by torch.onnx's dynamo exporter with input_ids, attention_mask and
token_type_ids of shape [batch, seq] (batch 1..8, seq 2..64). Beside it, NAME.ref.npz: inputs at batch 2,
seq 16 (a padded mask) and onnxruntime's outputs.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch


class Outputs(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


def main() -> None:
    import transformers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    a = ap.parse_args()
    config = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = Outputs(transformers.BertModel(config).eval())
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, (2, 16)).astype(np.int64)
    mask = np.ones((2, 16), np.int64)
    mask[1, 12:] = 0
    types = np.zeros((2, 16), np.int64)
    types[:, 8:] = 1
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, tuple(torch.from_numpy(x) for x in (ids, mask, types)), dynamo=True,
                                    input_names=["input_ids", "attention_mask", "token_type_ids"],
                                    output_names=["last_hidden_state", "pooler_output"],
                                    dynamic_shapes=({0: batch, 1: seq},) * 3, optimize=True)
    program.save(a.out)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    sess = ort.InferenceSession(a.out, providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    np.savez(Path(a.out).with_suffix(".ref.npz"), **feeds, **{f"out:{k}": v for k, v in outs.items()})
    print(f"{a.out}: BertModel with [batch, seq] inputs")


if __name__ == "__main__":
    main()
