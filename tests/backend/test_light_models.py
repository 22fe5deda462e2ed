"""The nine light_*.onnx CNNs of the onnx wheel through mlcc.backend, against onnxruntime on CPU.

Each model runs twice: as shipped (every big weight is ConstantOfShape(0.02),
fed BackendTest's dummy input), and with those weights replaced by seeded random
initializers (tools/light_models.py) and a random input. Logits (the input of
the final Softmax, added as an output) and every model output must match
onnxruntime within rtol 1e-3 (atol 1e-3 of the largest reference magnitude).

With the shipped weights every logit is the same number, and for six of the
models it is huge (1e9 to 1e31): a one-ulp difference between two classes, which
a different summation order can make, then moves the softmax far from 1/1000.
There the softmax output is checked for being a distribution of the right
shape, and the logits carry the comparison. The random-weight runs compare the
softmax too.

Interpreter time (compile + run, TIMINGS) decides what is slow: every model over
30 s (ResNet-50 at 224x224 takes about a minute, VGG-19 almost three) is marked
slow, and so is shufflenet as shipped (20 s), to keep the default suite short.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from light_models import (LIGHT_MODELS, dummy_input, expected_outputs, load_light_model,  # noqa: E402
                          random_input, randomize_light_weights, with_logits_output)

import mlcc.backend  # noqa: E402

ort = pytest.importorskip("onnxruntime")

# seconds for prepare + run under the interpreter, (as shipped, random weights), measured on the 2-core dev machine
TIMINGS = {
    "squeezenet": (13, 9), "shufflenet": (20, 14), "bvlc_alexnet": (33, 34), "inception_v1": (30, 44),
    "zfnet512": (45, 51), "inception_v2": (46, 51), "resnet50": (48, 57), "densenet121": (74, 60),
    "vgg19": (170, 160),
}
SLOW_SECONDS = 15  # the default suite keeps the runs under this: squeezenet both ways, shufflenet with random weights
RTOL = 1e-3
SEED = 0


def _params(variant: int):
    return [pytest.param(name, marks=() if TIMINGS[name][variant] < SLOW_SECONDS else pytest.mark.slow)
            for name in LIGHT_MODELS]


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.shape} {got.dtype} vs {want.shape}"
    assert np.isfinite(want).all(), f"{what}: onnxruntime's reference is not finite"
    atol = RTOL * float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol, err_msg=what)


def _softmax_is_well_conditioned(logits: np.ndarray) -> bool:
    """Whether a one-ulp change of the largest logit moves the softmax by less than the tolerance."""
    return float(np.spacing(np.float32(np.abs(logits).max()))) < RTOL / 10


@pytest.mark.parametrize("name", _params(0))
def test_light_model_as_shipped_matches_onnxruntime(name: str) -> None:
    model = with_logits_output(load_light_model(name))
    feeds = dummy_input(model)
    want = _onnxruntime(model, feeds)
    got = mlcc.backend.prepare(model).run(feeds)
    assert len(got) == len(want)
    logits = want[-1]
    _assert_close(got[-1], logits, f"{name} logits")
    shipped = expected_outputs(name)[0]
    if _softmax_is_well_conditioned(logits):
        _assert_close(got[0], want[0], f"{name} output")
        _assert_close(got[0], shipped, f"{name} output vs {name}_output_0.pb")
    else:
        assert got[0].shape == shipped.shape and got[0].dtype == shipped.dtype
        assert np.all(got[0] >= 0) and abs(float(got[0].sum()) - 1.0) < 1e-3


@pytest.mark.parametrize("name", _params(1))
def test_light_model_with_random_weights_matches_onnxruntime(name: str) -> None:
    model = with_logits_output(randomize_light_weights(load_light_model(name), SEED))
    feeds = random_input(model, SEED)
    want = _onnxruntime(model, feeds)
    assert float(np.std(want[-1])) > 1e-3, "the random weights should make the logits differ"
    got = mlcc.backend.prepare(model).run(feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        _assert_close(g, w, f"{name} output {i}")


def test_randomize_light_weights_replaces_every_constant_of_shape() -> None:
    model = load_light_model("squeezenet")
    random = randomize_light_weights(model, SEED)
    assert not [n for n in random.graph.node if n.op_type == "ConstantOfShape"]
    again = randomize_light_weights(model, SEED)
    assert [t.raw_data for t in random.graph.initializer] == [t.raw_data for t in again.graph.initializer]
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in random.graph.initializer}
    conv1 = weights["conv1_w_0"]
    assert conv1.shape == (64, 3, 3, 3)
    assert abs(float(conv1.std()) - np.sqrt(2 / 27)) < 0.05  # He normal over the fan-in 3*3*3
