"""Export tiny random-weight transformers decoders to ONNX, with onnxruntime reference outputs.

    pip install transformers onnxscript        # CPU torch stays as it is
    python tools/export_hf_tiny.py [--out tests/data/models/hf] [NAME ...]

Each model is built from its Config class (no hub download), 2 layers, hidden 32, 4 heads of 8, vocab 256, seeded
random weights, and exported by the default torch exporter (`torch.onnx.export(dynamo=True)`, which
uses onnxscript) with static shapes: input_ids [1, 16] and logits out. The configs pick the forms the
recognizers must see: grouped-query attention (LLaMA, Qwen2, Mistral, Gemma), a sliding window shorter
than the sequence (Mistral), partial rotary (Phi), logit soft-capping and alternating windows (Gemma 2).
`gpt2_decode` is one GPT-2 decode step: input_ids [1, 1] after a KV cache of 15 positions per layer,
with the present keys and values as outputs.

Beside each NAME.onnx, NAME.ref.npz holds the inputs (by graph input name) and onnxruntime's outputs
(`out:<name>`); the export is checked against torch eager first. Tests read only these files.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "models" / "hf"
SEQ = 16
PAST = 15
COMMON = dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=64, attn_implementation="sdpa")


def configs() -> dict:
    import transformers as t

    return {
        "llama_tiny": (t.LlamaConfig, t.LlamaForCausalLM, dict(COMMON, num_key_value_heads=2)),
        "qwen2_tiny": (t.Qwen2Config, t.Qwen2ForCausalLM, dict(COMMON, num_key_value_heads=2)),
        "mistral_tiny": (t.MistralConfig, t.MistralForCausalLM,
                         dict(COMMON, num_key_value_heads=2, sliding_window=6)),
        "gemma_tiny": (t.GemmaConfig, t.GemmaForCausalLM, dict(COMMON, num_key_value_heads=2, head_dim=8)),
        "gemma2_tiny": (t.Gemma2Config, t.Gemma2ForCausalLM,
                        dict(COMMON, num_key_value_heads=2, head_dim=8, sliding_window=6,
                             attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                             attn_implementation="eager")),
        "phi_tiny": (t.PhiConfig, t.PhiForCausalLM, dict(COMMON, partial_rotary_factor=0.5)),
    }


class Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


class DecodeStep(torch.nn.Module):
    """One GPT-2 step: the new token's logits and the cache with its keys and values appended."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, *past):
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for i in range(0, len(past), 2):
            cache.update(past[i], past[i + 1], i // 2)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                         use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def seeded(cls, model_cls, kw: dict) -> torch.nn.Module:
    torch.manual_seed(0)
    model = model_cls(cls(**kw)).eval()
    with torch.no_grad():  # tiny random init keeps activations in range; norms get non-trivial weights
        for name, p in model.named_parameters():
            if "norm" in name or "ln" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("weight") else 0.1 * torch.randn_like(p))
    return model


def export(module: torch.nn.Module, args: tuple, names: list[str], outputs: list[str], path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, input_names=names, output_names=outputs,
                                    optimize=True)
    program.save(str(path))
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    got = sess.run(outputs, feeds)
    with torch.no_grad():
        want = module(*args)
    want = want if isinstance(want, tuple) else (want,)
    err = max(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want))
    if err > 1e-4:
        raise SystemExit(f"{path.name}: onnxruntime differs from torch eager by {err:.3g}")
    np.savez(path.with_suffix(".ref.npz"), **feeds, **{f"out:{n}": g for n, g in zip(outputs, got)})
    print(f"{path}: {len(onnx.load(str(path)).graph.node)} nodes, ort vs torch {err:.2g}, "
          f"{path.stat().st_size:,} B")


def build(name: str) -> tuple[torch.nn.Module, tuple, list[str], list[str]]:
    """The module to export, its example inputs, and the input and output names."""
    import transformers as t

    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (1, SEQ))).to(torch.int64)
    if name == "gpt2_decode":
        cfg = t.GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                           activation_function="gelu_new", attn_implementation="sdpa")
        model = seeded(lambda **kw: cfg, t.GPT2LMHeadModel, {})
        past = []
        g = torch.Generator().manual_seed(1)
        for _ in range(2 * cfg.n_layer):
            past.append(torch.randn(1, cfg.n_head, PAST, cfg.n_embd // cfg.n_head, generator=g))
        names = ["input_ids", "attention_mask"] + [f"past_{k}_{i}" for i in range(cfg.n_layer) for k in "kv"]
        outputs = ["logits"] + [f"present_{k}_{i}" for i in range(cfg.n_layer) for k in "kv"]
        mask = torch.ones(1, PAST + 1, dtype=torch.int64)
        return DecodeStep(model), (ids[:, :1], mask, *past), names, outputs
    cls, model_cls, kw = configs()[name]
    return Logits(seeded(cls, model_cls, kw)), (ids,), ["input_ids"], ["logits"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for name in a.names or [*configs(), "gpt2_decode"]:
        module, args, names, outputs = build(name)
        export(module, args, names, outputs, a.out / f"{name}.onnx")


if __name__ == "__main__":
    main()
