"""mlcc/bundle/manifest.py and intent.py: the typed records read a real bundle's manifest.json and intent.json
and write back the very same bytes; the records the writer builds are the ones the files hold."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import mlcc
from mlcc.errors import BundleError
from mlcc.bundle import (INTENT_SCHEMA_VERSION, SUPPORTED_SCHEMAS, Binary, Intent, KernelEntry, Launch, LaunchConfig,
                         Manifest, TensorSpec, bundle_digest, dumps, eval_size, load_schema, validate)
from mlcc_test_paths import EXAMPLES


def _symbolic_model() -> onnx.ModelProto:
    """[n, 64] -> tanh -> transpose: a symbolic dim, so sizes are expressions and launches pass scalars."""
    nodes = [h.make_node("Tanh", ["x"], ["t"]), h.make_node("Transpose", ["t"], ["y"], perm=[1, 0])]
    graph = h.make_graph(nodes, "sym", [h.make_tensor_value_info("x", T.FLOAT, ["n", 64])],
                         [h.make_tensor_value_info("y", T.FLOAT, [64, "n"])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    onnx.save(_symbolic_model(), root / "sym.onnx")
    rows = h.make_graph([h.make_node("Softmax", ["x"], ["s"], axis=0), h.make_node("Softmax", ["s"], ["y"], axis=1)],
                        "rows", [h.make_tensor_value_info("x", T.FLOAT, ["n", 64])],
                        [h.make_tensor_value_info("y", T.FLOAT, ["n", 64])])
    onnx.save(h.make_model(rows, opset_imports=[h.make_opsetid("", 17)]), root / "rows.onnx")  # n given no range
    return {"static": mlcc.compile(EXAMPLES / "mlp.onnx", root / "mlp", targets=["sm_80"]).out_dir,
            "symbolic": mlcc.compile(root / "sym.onnx", root / "sym", targets=["sm_80"],
                                     shapes={"n": "1..256"}).out_dir,
            "unbounded": mlcc.compile(root / "rows.onnx", root / "unbounded", targets=["sm_80"]).out_dir}


@pytest.mark.parametrize("kind", ["static", "symbolic", "unbounded"])
def test_manifest_records_round_trip_the_written_bytes(bundles, kind):
    text = (bundles[kind] / "manifest.json").read_text()
    manifest = Manifest.from_json(json.loads(text))
    assert dumps(manifest.to_json()) == text
    assert manifest.schema_version in SUPPORTED_SCHEMAS
    assert manifest.bundle_sha256 == bundle_digest(bundles[kind])
    for k in manifest.kernels:
        assert isinstance(k, KernelEntry) and isinstance(k.binaries["sm_80"], Binary)
        assert (bundles[kind] / k.source).is_file() and (bundles[kind] / k.binaries["sm_80"].path).is_file()


@pytest.mark.parametrize("kind", ["static", "symbolic", "unbounded"])
def test_intent_records_round_trip_the_written_bytes(bundles, kind):
    text = (bundles[kind] / "intent.json").read_text()
    intent = Intent.from_json(json.loads(text))
    assert dumps(intent.to_json()) == text
    assert intent.steps == len(json.loads((bundles[kind] / "manifest.json").read_text())["schedule"])


def test_symbolic_bundle_records_hold_expressions_and_scalars(bundles):
    m = Manifest.from_json(json.loads((bundles["symbolic"] / "manifest.json").read_text()))
    assert m.schema_version == 3 and m.symbols == {"n": [1, 256]}
    assert m.inputs[0].spec == TensorSpec("f32", "float32", ["n", 64], [1, 0])
    assert all(launch.scalars == ["n"] for launch in m.schedule)
    assert any(isinstance(g, str) and "n" in g for launch in m.schedule for g in launch.grid)


def test_a_symbol_without_a_range_makes_a_schema_4_bundle_with_arena_expressions(bundles):
    m = Manifest.from_json(json.loads((bundles["unbounded"] / "manifest.json").read_text()))
    assert m.schema_version == 4 and m.symbols == {"n": [0, None]} and m.planned_sizes == {"n": 32}
    assert m.index_limits == {"max": 2**31 - 1 - 2**16, "counts": ["64*n"]}
    assert m.memory_plan.arena_bytes == "256*n"  # the first softmax's [n, 64] f32 result
    assert [(b.bytes, b.offset) for b in m.memory_plan.buffers] == [("256*n", 0)]
    assert m.buffers[m.memory_plan.buffers[0].name].bytes == "256*n"
    doc = m.to_json()
    doc["memory_plan"]["arena_bytes"] = ["256*n"]
    with pytest.raises(mlcc.MlccError, match="manifest.json does not follow its schema at 'memory_plan/arena_bytes'"):
        validate("manifest", doc)


def test_optional_keys_are_left_out_when_absent():
    config = LaunchConfig({"BLOCK": 64}, [4, 1, 1])
    launch = Launch(0, "k", ["a", "b"], [1, 1, 1], [1, 1, 1], instruction="add.1", ops=[], flops=0, bytes_read=8,
                    bytes_written=4)
    assert "scalars" not in launch.to_json() and launch.to_json()["ops"] == []
    assert Launch.from_json(launch.to_json()) == launch
    bare = {"step": 0, "kernel": "k", "args": ["a"], "grid": ["max(1, cdiv(n, 64))", 1, 1],
            "interpreter_grid": [1, 1, 1], "scalars": ["n"]}  # what the schema requires, and scalars
    assert Launch.from_json(bare).to_json() == bare
    old = Binary("kernels/k.sm_80.cubin", "kernels/k.sm_80.json", 0, 4, 2, "k")  # an older bundle: no config
    assert set(old.to_json()) == {"path", "metadata", "shared", "num_warps", "num_stages", "function"}
    assert Binary.from_json(old.to_json()) == old
    entry = KernelEntry("k", "kernels/k.py", "elementwise.py.jinja", ["*fp32"], {"sm_80": old}, config, config, 0, [])
    assert "signature" not in entry.to_json() and KernelEntry.from_json(entry.to_json()) == entry


def test_the_schema_allows_exactly_the_versions_the_runtime_reads():
    assert load_schema("manifest")["properties"]["schema_version"]["enum"] == list(SUPPORTED_SCHEMAS)
    assert load_schema("intent")["properties"]["schema_version"]["const"] == INTENT_SCHEMA_VERSION


def test_a_manifest_that_breaks_its_schema_is_refused(bundles):
    doc = json.loads((bundles["static"] / "manifest.json").read_text())
    doc["schema_version"] = 9
    with pytest.raises(mlcc.MlccError, match="manifest.json does not follow its schema at 'schema_version'"):
        validate("manifest", doc)


def test_a_manifest_missing_what_the_format_requires_is_a_bundle_error(bundles, tmp_path):
    doc = json.loads((bundles["static"] / "manifest.json").read_text())
    del doc["schedule"][0]["args"]
    (tmp_path / "manifest.json").write_text(dumps(doc))
    with pytest.raises(BundleError, match="manifest.json: not a bundle manifest .KeyError: 'args'"):
        mlcc.load(tmp_path)
    doc["schema_version"] = 8  # newer than any this runtime reads
    (tmp_path / "manifest.json").write_text(dumps(doc))
    with pytest.raises(BundleError, match="bundle schema 8 is not supported"):
        mlcc.load(tmp_path)


def test_a_gpu_launch_uses_its_binarys_own_grid(bundles):
    """What the CUDA path launches with, read from the records (checked without a GPU: the grid only)."""
    exe = mlcc.load(bundles["symbolic"])
    launch = exe.records.schedule[0]
    kernel = exe._kernels[launch.kernel]
    env = {"n": 200}
    exe._arch = "sm_80"
    assert exe._grid(kernel, launch, env) == tuple(eval_size(g, env) for g in kernel.binaries["sm_80"].config.grid)
    exe._arch = "gfx942"  # no binary for it: the schedule's grid
    assert exe._grid(kernel, launch, env) == tuple(eval_size(g, env) for g in launch.grid)
