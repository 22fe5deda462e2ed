"""The LLaMA-style decoder of tools/gen_llama.py at a small size (2 layers, hidden 256), external data, compiled
with symbolic past and seq and run on CPU through its KV cache against onnxruntime."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import mlcc
from mlcc_test_paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from gen_llama import Config, generate, weights  # noqa: E402

SMALL = dict(layers=2, hidden=256, heads=4, ffn=688, vocab=1000, positions=64)
NP = {"float16": np.float16, "float32": np.float32}


def _feeds(c: Config, batch: int, past: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": rng.integers(0, c.vocab, (batch, seq)).astype(np.int64)}
    for i in range(c.layers):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = rng.standard_normal((batch, c.heads, past, c.head_dim)).astype(NP[c.dtype])
    return feeds


@pytest.fixture(scope="module", params=[("float32", 1), ("float16", 1), ("float32", "batch")],
                ids=["f32", "f16", "f32-symbolic-batch"])
def small_llama(request, tmp_path_factory):
    dtype, batch = request.param
    c = Config(**SMALL, dtype=dtype, batch=batch, seed=3)
    root = tmp_path_factory.mktemp("llama")
    path = root / "llama.onnx"
    generate(path, c)
    shapes = {"past": "0..32", "seq": "1..8"} | ({"batch": "1..2"} if batch == "batch" else {})
    result = mlcc.compile(path, root / "bundle", targets=[], shapes=shapes, cache_dir="")
    return c, path, mlcc.load(result.out_dir)


@pytest.mark.parametrize("past,seq", [(0, 5), (17, 3)])
def test_small_llama_matches_onnxruntime_through_its_kv_cache(small_llama, past, seq):
    c, path, executable = small_llama
    batch = 2 if c.batch == "batch" else 1
    feeds = _feeds(c, batch, past, seq, seed=past)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = executable.run(feeds)
    assert got["present_key_1"].shape == (batch, c.heads, past + seq, c.head_dim)
    tol = dict(rtol=1e-3, atol=1e-5) if c.dtype == "float32" else dict(rtol=1e-2, atol=4e-3)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_allclose(got[name].astype(np.float32), value.astype(np.float32), err_msg=name, **tol)
    # the new tokens' keys and values are appended after the past ones, which pass through unchanged
    np.testing.assert_array_equal(got["present_value_0"][:, :, :past], feeds["past_value_0"])


def test_generator_writes_seeded_weights_reproducibly(tmp_path):
    """Same seed, same bytes; the weights are the seeded f16 draws, stored aligned in the data file."""
    c = Config(layers=1, hidden=64, heads=2, ffn=96, vocab=50, positions=16, seed=7)
    a = generate(tmp_path / "a" / "m.onnx", c).read_bytes()
    b = generate(tmp_path / "b" / "m.onnx", c).read_bytes()
    assert a == b
    model = onnx.load(tmp_path / "a" / "m.onnx")  # onnx resolves the external data itself
    tensors = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    index = [w.name for w in weights(c)].index("layers.0.mlp.up")
    draw = np.random.default_rng([7, index]).standard_normal(64 * 96, dtype=np.float32) * np.float32(0.02)
    np.testing.assert_array_equal(tensors["layers.0.mlp.up"], draw.astype(np.float16).reshape(64, 96))
    positions = np.arange(16)[:, None] * (1.0 / 10000 ** (np.arange(0, 32, 2) / 32))[None, :]
    np.testing.assert_allclose(tensors["rope_cos"][:, :16].astype(np.float64), np.cos(positions), atol=1e-3)
    np.testing.assert_array_equal(tensors["rope_cos"][:, 16:], tensors["rope_cos"][:, :16])
