"""Regenerate the models in examples/models/ that are not copies of ../shared/models.

    python examples/make_models.py

gpt2_kv_tiny.onnx: a 2-layer GPT-2-style decoder with a KV cache (past_key_<i>/past_value_<i> in,
present_key_<i>/present_value_<i> out), exported by tools/gpt2_export.py with random weights; its
inputs and onnxruntime's outputs go to gpt2_kv_tiny.inputs.npz (keys: input names, out:<output name>).

Also tests/data/models/gpt2_dyn_tiny.onnx (make_gpt2_dyn_tiny): the same 2-layer decoder (d=64, 4 heads,
vocab 1000, 64 positions, seed 0) without a cache, its sequence dim exported as the symbolic dim ``seq``
(issue #3), i.e. ``python tools/gpt2_export.py tests/data/models/gpt2_dyn_tiny.onnx --layers 2 --embd 64
--heads 4 --vocab 1000 --positions 64 --seq 16 --dynamic``; gpt2_dyn_tiny.ref.npz holds random ids at
seq = 7 and onnxruntime's logits (the zoo test's reference).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
TEST_MODELS = HERE.parent / "tests" / "data" / "models"
sys.path.insert(0, str(HERE.parent / "tools"))

from gpt2_export import export  # noqa: E402


def main() -> None:
    make_gpt2_kv_tiny()
    make_gpt2_dyn_tiny()


def make_gpt2_dyn_tiny() -> None:
    path = TEST_MODELS / "gpt2_dyn_tiny.onnx"
    export(str(path), layers=2, d=64, heads=4, vocab=1000, seq=16, positions=64, dynamic=True, seed=0)
    ids = np.random.default_rng(0).integers(0, 1000, (1, 7)).astype(np.int64)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (logits,) = sess.run(["logits"], {"input_ids": ids})
    np.savez(path.with_suffix(".ref.npz"), input_ids=ids, **{"out:logits": logits})


def make_gpt2_kv_tiny() -> None:
    path = HERE / "models" / "gpt2_kv_tiny.onnx"
    export(str(path), layers=2, d=64, heads=4, vocab=1000, seq=4, kv_cache=True, past=12, seed=0)
    rng = np.random.default_rng(0)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        shape = i.shape
        if i.type == "tensor(int64)":
            feeds[i.name] = rng.integers(0, 1000, shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    outs = sess.run(None, feeds)
    np.savez(HERE / "models" / "gpt2_kv_tiny.inputs.npz", **feeds,
             **{f"out:{o.name}": v for o, v in zip(sess.get_outputs(), outs)})


if __name__ == "__main__":
    main()
