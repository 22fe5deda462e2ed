"""Symbolic dims given no range: compiled without --shape, planned at DEFAULT_SIZE, run at sizes below, at and
past it against onnxruntime; the arena's offsets are expressions that keep live buffers apart at every size,
and the runtime allocates per run, reusing the arena while it is big enough."""

from __future__ import annotations

import itertools
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import mlcc
from mlcc.bundle.sizes import eval_size
from mlcc.hlo.buffer_assignment import assign_buffers
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.symbolic import DEFAULT_SIZE
from mlcc.runtime import arena as arena_module
from mlcc.runtime.bundle import BundleError
from mlcc_test_paths import ROOT, SHARED_MODELS


def _ort(path, feeds) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


# ---- the plan: offsets as expressions ------------------------------------------------------------------

PLAN = """HloModule m, output_names={y}, symbols={seq={0,32}}, unbounded={seq}

ENTRY %main {
  %x = f32[seq,64]{1,0} parameter(0), name=x
  %m = s64[seq]{0} parameter(1), name=m
  %w = f32[64,64]{1,0} constant(), ref=w
  %s = f32[16,64]{1,0} constant(), ref=s
  %a = f32[seq,64]{1,0} exp(%x)
  %f = f32[16,64]{1,0} exp(%s)
  %b = f32[seq,64]{1,0} dot(%a, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %c = s64[seq]{0} negate(%m)
  %g = f32[16,64]{1,0} negate(%f)
  %d = f32[seq,64]{1,0} tanh(%b)
  %e = f32[seq,64]{1,0} add(%d, %a)
  %n = s64[seq]{0} add(%c, %m)
  %y = f32[seq,64]{1,0} exp(%e)
  ROOT %t = (f32[seq,64]{1,0}, s64[seq]{0}, f32[16,64]{1,0}) tuple(%y, %n, %g)
}
"""


def test_the_ir_text_keeps_which_symbols_have_no_range():
    module = parse_module(PLAN)
    assert module.unbounded == {"seq"} and module.symbols == {"seq": (0, 32)}
    assert format_module(module) == PLAN


@pytest.mark.parametrize("seq", [0, 1, 7, 32, 33, 100, 4099])
def test_live_buffers_never_share_a_byte_at_any_size(seq):
    plan = assign_buffers(parse_module(PLAN))
    env = {"seq": seq}
    arena = plan.arena_buffers()
    assert any(isinstance(b.offset_expr, str) for b in arena) and isinstance(plan.arena_expr, str)
    placed = {b.name: (eval_size(b.offset_expr, env), eval_size(b.bytes_expr, env)) for b in arena}
    total = eval_size(plan.arena_expr, env)
    for name, (offset, nbytes) in placed.items():
        assert offset % 256 == 0 and offset + nbytes <= total, name
    for p, q in itertools.combinations(arena, 2):
        if plan.in_place.get(p.name) == q.name or plan.in_place.get(q.name) == p.name:
            continue
        if p.first_step <= q.last_step and q.first_step <= p.last_step:
            (po, pn), (qo, qn) = placed[p.name], placed[q.name]
            assert po + pn <= qo or qo + qn <= po, (p.name, q.name, seq)


def test_fixed_size_buffers_keep_number_offsets_below_the_growing_ones():
    plan = assign_buffers(parse_module(PLAN))
    fixed = [b for b in plan.arena_buffers() if b.size is None]
    growing = [b for b in plan.arena_buffers() if b.size is not None]
    assert fixed and growing
    assert all(isinstance(b.offset_expr, int) for b in fixed)
    top = max(b.offset + b.bytes for b in fixed)
    assert all(eval_size(b.offset_expr, {"seq": 1}) >= top for b in growing)
    # at the planned size the expressions give the plan's numbers
    assert plan.arena_bytes == eval_size(plan.arena_expr, {"seq": 32})


# ---- end to end ----------------------------------------------------------------------------------------

def _loop_model() -> onnx.ModelProto:
    """Rows of a 50-row table gathered by n ids, plus an [n, 64] input, a reduction over n: no --shape given."""
    rng = np.random.default_rng(0)
    table = h.make_tensor("table", T.FLOAT, [50, 64], rng.standard_normal((50, 64)).astype(np.float32).ravel())
    nodes = [h.make_node("Gather", ["table", "ids"], ["e"], axis=0), h.make_node("Add", ["e", "x"], ["a"]),
             h.make_node("Tanh", ["a"], ["t"]), h.make_node("Softmax", ["t"], ["y"], axis=0),
             h.make_node("ReduceSum", ["t"], ["r"], keepdims=0)]
    graph = h.make_graph(nodes, "unranged_loop",
                         [h.make_tensor_value_info("ids", T.INT64, ["n"]),
                          h.make_tensor_value_info("x", T.FLOAT, ["n", 64])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["n", 64]), h.make_tensor_value_info("r", T.FLOAT, [])],
                         [table])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_a_symbol_without_a_range_compiles_and_runs_past_its_planned_size(tmp_path):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), path)
    result = mlcc.compile(path, tmp_path / "b", targets=[])
    m = result.manifest
    assert m["schema_version"] == 4 and m["symbols"] == {"n": [0, None]} and m["planned_sizes"] == {"n": DEFAULT_SIZE}
    assert isinstance(m["memory_plan"]["arena_bytes"], str)
    ex = mlcc.load(result.out_dir)
    for n in (1, DEFAULT_SIZE, 5 * DEFAULT_SIZE + 3):
        rng = np.random.default_rng(n)
        feeds = {"ids": rng.integers(0, 50, n).astype(np.int64), "x": rng.standard_normal((n, 64)).astype(np.float32)}
        want, got = _ort(path, feeds), ex.run(feeds)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-4, err_msg=f"{name} at n={n}")


@pytest.fixture(scope="module")
def gpt2_unranged(tmp_path_factory):
    """The shared gpt2_tiny re-exported with [1, seq] inputs, compiled with no --shape: seq has no range."""
    path = SHARED_MODELS / "gpt2_tiny_dynseq.onnx"
    return path, mlcc.compile(path, tmp_path_factory.mktemp("gpt2_unranged") / "b", targets=[])


def test_gpt2_without_a_range_matches_onnxruntime_below_at_and_past_the_planned_size(gpt2_unranged):
    path, result = gpt2_unranged
    m = json.loads((result.out_dir / "manifest.json").read_text())
    assert m["symbols"] == {"seq": [0, None]}
    assert all(isinstance(b["offset"], (int, str)) for b in m["memory_plan"]["buffers"])
    ex = mlcc.load(result.out_dir)
    held = []
    for seq in (7, 2 * DEFAULT_SIZE, DEFAULT_SIZE):  # 64: the longest the model's 64 positions allow
        rng = np.random.default_rng(seq)
        feeds = {"input_ids": rng.integers(0, 1000, (1, seq)).astype(np.int64),
                 "attention_mask": np.ones((1, seq), np.int64)}
        feeds["attention_mask"][0, max(1, seq - 3):] = 0
        want, got = _ort(path, feeds), ex.run(feeds)
        assert got["logits"].shape == (1, seq, 1000)
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-3, atol=1e-4, err_msg=f"seq={seq}")
        held.append((ex._growing.capacity, ex._growing.storage))
    # the arena grows for the longer run and is kept for the shorter one after it
    assert held[1][0] == eval_size(m["memory_plan"]["arena_bytes"], {"seq": 2 * DEFAULT_SIZE}) > held[0][0]
    assert held[2][1] is held[1][1]


def test_a_run_past_32_bit_indexing_is_one_error_naming_the_symbol(gpt2_unranged):
    _, result = gpt2_unranged
    ex = mlcc.load(result.out_dir)
    seq = 40_000  # the [4, seq, seq] attention scores: 6.4e9 elements
    feeds = {"input_ids": np.zeros((1, seq), np.int64), "attention_mask": np.ones((1, seq), np.int64)}
    with pytest.raises(BundleError, match=r"seq=40000: .*4\*seq\*seq = 6400000000 elements.*32-bit"):
        ex.run(feeds)
    assert ex._growing.storage is None  # refused before anything was allocated


def test_an_arena_past_the_limit_is_one_error_naming_the_symbol(gpt2_unranged, monkeypatch):
    _, result = gpt2_unranged
    monkeypatch.setattr(arena_module, "MAX_ARENA_BYTES", 1 << 20)
    ex = mlcc.load(result.out_dir)
    feeds = {"input_ids": np.zeros((1, 1000), np.int64), "attention_mask": np.ones((1, 1000), np.int64)}
    with pytest.raises(BundleError, match=r"seq=1000: the arena would need \d+ bytes, more than the limit"):
        ex.run(feeds)


def test_bert_without_ranges_matches_onnxruntime_at_three_shapes(tmp_path):
    """BERT with [batch, seq] inputs, no --shape: batch has no range; seq slices the 64-row position table, so
    the model itself bounds it (1..64) and the runtime refuses a longer one."""
    path = SHARED_MODELS / "bert_dyn_tiny.onnx"
    result = mlcc.compile(path, tmp_path / "b", targets=[])
    assert result.manifest["symbols"] == {"batch": [0, None], "seq": [0, 64]}
    ex = mlcc.load(result.out_dir)
    for batch, seq in ((1, 2), (3, 17), (DEFAULT_SIZE + 5, 6)):
        rng = np.random.default_rng(batch * 100 + seq)
        feeds = {"input_ids": rng.integers(0, 1000, (batch, seq)).astype(np.int64),
                 "attention_mask": rng.integers(0, 2, (batch, seq)).astype(np.int64),
                 "token_type_ids": rng.integers(0, 2, (batch, seq)).astype(np.int64)}
        want, got = _ort(path, feeds), ex.run(feeds)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4, err_msg=f"{name} at {batch}x{seq}")
    too_long = {k: np.zeros((1, 65), np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
    with pytest.raises(BundleError, match=r"dim 1 \('seq'\) is 65, the bundle was built for seq in 0..64"):
        ex.run(too_long)


def test_a_ranged_build_keeps_its_single_allocation(tmp_path):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), path)
    result = mlcc.compile(path, tmp_path / "b", targets=[], shapes={"n": "1..100"})
    m = result.manifest
    assert m["schema_version"] == 3 and m["symbols"] == {"n": [1, 100]}
    assert "planned_sizes" not in m and "index_limits" not in m
    assert isinstance(m["memory_plan"]["arena_bytes"], int)
    assert mlcc.load(result.out_dir)._growing is None


def test_verify_checks_the_smallest_the_planned_and_twice_the_planned_size(gpt2_unranged):
    from click.testing import CliRunner

    from mlcc.cli import main
    path, _ = gpt2_unranged
    out = CliRunner().invoke(main, ["verify", str(path), "--target", "none", "--json"])
    assert out.exit_code == 0, out.output
    checks = json.loads(out.output)["outputs"]
    assert [c["shape"] for c in checks] == [[1, 1, 1000], [1, DEFAULT_SIZE, 1000], [1, 2 * DEFAULT_SIZE, 1000]]
    assert all(c["ok"] for c in checks)


def test_inspect_shows_a_symbol_without_an_upper_end_and_the_planned_arena(gpt2_unranged):
    import io

    from mlcc.inspect import render_text, summarize
    _, result = gpt2_unranged
    summary = summarize(result.out_dir)
    assert summary["symbols"] == {"seq": [0, None]}
    arena = json.loads((result.out_dir / "manifest.json").read_text())["memory_plan"]["arena_bytes"]
    assert summary["memory"]["arena_bytes"] == eval_size(arena, {"seq": DEFAULT_SIZE})
    text = io.StringIO()
    render_text(summary, text)
    assert "seq in 0.." in text.getvalue()


@pytest.fixture(scope="module")
def gpt2_unranged_sm90(tmp_path_factory):
    path = SHARED_MODELS / "gpt2_tiny_dynseq.onnx"
    return path, mlcc.compile(path, tmp_path_factory.mktemp("gpt2_unranged_sm90") / "b", targets=["sm_90"])


def _check_on(device: str, bundle) -> None:
    path, result = bundle
    ex = mlcc.load(result.out_dir, device=device)
    for seq in (3, DEFAULT_SIZE + 16, 9):  # past the planned size, then back under it (the arena kept)
        rng = np.random.default_rng(seq)
        feeds = {"input_ids": rng.integers(0, 1000, (1, seq)).astype(np.int64),
                 "attention_mask": np.ones((1, seq), np.int64)}
        np.testing.assert_allclose(ex.run(feeds)["logits"], _ort(path, feeds)["logits"], rtol=1e-3, atol=1e-4,
                                   err_msg=f"seq={seq} on {device}")


@pytest.mark.slow
def test_gpt2_without_a_range_on_the_simulated_sm_90(gpt2_unranged_sm90):
    _check_on("sim:sm_90", gpt2_unranged_sm90)


@pytest.mark.gpu
def test_gpt2_without_a_range_on_a_gpu(gpt2_unranged_sm90):
    _check_on("cuda", gpt2_unranged_sm90)


def test_a_kv_cache_decoder_without_ranges_runs_from_an_empty_cache_past_the_planned_size(tmp_path):
    """A GPT-2-style decoder whose seq and past (presents: past + seq) both have no range: an empty cache, and
    a prompt and a cache longer than the planned size, from one bundle."""
    pytest.importorskip("torch")
    import sys
    sys.path.insert(0, str(ROOT / "tools"))
    from gpt2_export import export
    path = tmp_path / "kv.onnx"
    export(str(path), layers=2, d=64, heads=4, vocab=1000, seq=4, kv_cache=True, past=12, seed=0, positions=128,
           dynamic=True)
    result = mlcc.compile(path, tmp_path / "b", targets=[])
    assert result.manifest["symbols"] == {"past": [0, None], "seq": [0, None]}
    ex = mlcc.load(result.out_dir)
    for seq, past in ((1, 0), (7, 2 * DEFAULT_SIZE + 1), (DEFAULT_SIZE + 8, 5)):
        rng = np.random.default_rng(seq * 100 + past)
        feeds = {"input_ids": rng.integers(0, 1000, (1, seq)).astype(np.int64)}
        for i in range(2):
            for kind in ("key", "value"):
                feeds[f"past_{kind}_{i}"] = rng.standard_normal((1, 4, past, 16)).astype(np.float32)
        want, got = _ort(path, feeds), ex.run(feeds)
        assert got["present_key_1"].shape == (1, 4, past + seq, 16)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4, err_msg=f"{name} at {seq}, {past}")


def test_a_lowest_size_with_no_upper_end_is_kept_and_checked(tmp_path):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), path)
    result = mlcc.compile(path, tmp_path / "b", targets=[], shapes={"n": "3.."})
    assert result.manifest["symbols"] == {"n": [3, None]} and result.manifest["planned_sizes"] == {"n": DEFAULT_SIZE}
    feeds = {"ids": np.zeros(2, np.int64), "x": np.zeros((2, 64), np.float32)}
    with pytest.raises(BundleError, match=r"input 'ids': dim 0 \('n'\) is 2, the bundle was built for n in 3\.\.$"):
        mlcc.load(result.out_dir).run(feeds)
