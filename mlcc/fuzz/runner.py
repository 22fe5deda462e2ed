"""Compile a model with mlcc, run the bundle on CPU (Triton's interpreter) and compare with onnxruntime.

Verdicts: ``pass``; ``skip`` only when the reference fails: onnxruntime rejects the model, or returns an
output whose dims contradict the model's declared (and ONNX-inferred) dims while mlcc's agree (onnxruntime
1.2x does this for some reductions over zero-size inputs); else a failure of one kind:

- ``mismatch``: an output differs (shape, dtype, or values beyond RELIABILITY.md's tolerances);
- ``crash``: an exception that is not an mlcc diagnostic, or an internal error (exit 70), at compile or run;
- ``reject``: mlcc calls a model that onnxruntime runs invalid (exit 65);
- ``unsupported``: mlcc says it does not support the model (exit 69), though it uses only supported ops;
- ``timeout``: the case ran past its time limit (the forked child is killed).

Floats are compared as RELIABILITY.md says: within (rtol, atol) of onnxruntime per dtype, or else, as
PyTorch's accuracy check does for fused kernels, with an RMSE against a float64 reference (the same model
run by onnxruntime in float64) at most 2x (f32) or 3x (f16) onnxruntime's own. Ints and bools: exact.

onnxruntime's CPU kernels run float16 chains in float32 (it casts around them and drops the casts in
between), while ONNX rounds every node's float16 result. So a float16 output also passes when it is within
tolerance of a second reference that rounds like ONNX: the model widened to float32 with a round trip
through float16 after every node that yields float16.

Every case runs in a forked child, so a crash, a hang or a memory blow-up of one case ends only that case.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import onnx

import mlcc
import mlcc.compiler  # noqa: F401 - imported here so forked children start warm
from mlcc.errors import MlccError
from mlcc.fuzz.generator import generate, random_inputs

TOLERANCES = {"float32": (1e-3, 1e-5), "float16": (1e-3, 1e-5), "float64": (1e-3, 1e-7)}
RMSE_FACTOR = {"float32": 2.0, "float16": 3.0, "float64": 2.0}
CASE_TIMEOUT = 300.0


@dataclass
class Outcome:
    status: str                 # pass, fail, skip
    kind: str | None = None     # mismatch, crash, reject, unsupported, timeout (fail); ort-rejects (skip)
    detail: str = ""
    signature: str = ""         # what makes two failures "the same" (kind, exception, message shape)

    @property
    def failed(self) -> bool:
        return self.status == "fail"


@dataclass
class CaseResult:
    seed: int
    outcome: Outcome
    ops: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"seed": self.seed, "ops": self.ops, "seconds": round(self.seconds, 3), **asdict(self.outcome)}


# ---- the reference --------------------------------------------------------------------------------------

def ort_session(model: onnx.ModelProto):
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the reference, not its optimizer
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    sess = ort_session(model)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {i.name: feeds[i.name] for i in sess.get_inputs()})))


def as_wider_model(model: onnx.ModelProto, wide_type: int) -> onnx.ModelProto:
    """The same computation in a wider float type (DOUBLE: f32 and f16 widened; FLOAT: f16 widened):
    inputs, outputs, initializers and Cast targets."""
    from onnx import TensorProto, helper, numpy_helper
    narrow = (TensorProto.FLOAT, TensorProto.FLOAT16) if wide_type == TensorProto.DOUBLE else (TensorProto.FLOAT16,)
    np_wide = helper.tensor_dtype_to_np_dtype(wide_type)
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    g = wide.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type in narrow:
            vi.type.tensor_type.elem_type = wide_type
    for i, t in enumerate(g.initializer):
        if t.data_type in narrow:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np_wide), t.name))
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i in narrow:
                a.i = wide_type
    return wide


# ---- comparing ------------------------------------------------------------------------------------------

def as_stepwise_float16_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model in float32, each node's float16 result rounded to float16 and back (ONNX's semantics,
    computed by onnxruntime's float32 kernels)."""
    from onnx import TensorProto, helper
    inferred = onnx.shape_inference.infer_shapes(model)
    g0 = inferred.graph
    half = {vi.name for vi in list(g0.value_info) + list(g0.output) + list(g0.input)
            if vi.type.tensor_type.elem_type == TensorProto.FLOAT16}
    wide = as_wider_model(model, TensorProto.FLOAT)
    del wide.graph.value_info[:]
    nodes = []
    for n in wide.graph.node:
        rounded = [o for o in n.output if o in half]
        for o in rounded:
            n.output[list(n.output).index(o)] = f"{o}__unrounded"
        nodes.append(n)
        for o in rounded:
            nodes.append(helper.make_node("Cast", [f"{o}__unrounded"], [f"{o}__half"], to=TensorProto.FLOAT16))
            nodes.append(helper.make_node("Cast", [f"{o}__half"], [o], to=TensorProto.FLOAT))
    del wide.graph.node[:]
    wide.graph.node.extend(nodes)
    return wide


def _stepwise_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    try:
        wide = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()}
        out = ort_outputs(as_stepwise_float16_model(model), wide)
    except Exception:  # noqa: BLE001 - no float32 kernel either: no second reference
        return None
    return {k: v.astype(np.float16) for k, v in out.items()}


def _allclose(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    special = (np.isnan(a) & np.isnan(b)) | ((a == b) & np.isinf(b))
    return bool((special | (np.abs(a - b) <= atol + rtol * np.abs(b))).all())


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    finite = np.isfinite(a) & np.isfinite(b)
    if not finite.any():
        return 0.0
    return float(np.sqrt(np.mean((a[finite] - b[finite]) ** 2)))


def compare_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray], got: dict[str, np.ndarray],
                    expected: dict[str, np.ndarray]) -> Outcome:
    if sorted(got) != sorted(expected):
        return _mismatch(f"outputs {sorted(got)} != onnxruntime's {sorted(expected)}", "names")
    reference64: dict[str, np.ndarray] | None = None
    stepwise: dict[str, np.ndarray] | None = None
    for name, exp in expected.items():
        g = np.asarray(got[name])
        if g.shape != exp.shape or g.dtype != exp.dtype:
            return _mismatch(f"output '{name}': {g.dtype}{list(g.shape)}, onnxruntime gives "
                             f"{exp.dtype}{list(exp.shape)}", "shape-or-dtype")
        if exp.dtype.kind not in "fc":
            if not np.array_equal(g, exp):
                bad = np.argwhere(g != exp)
                i = tuple(bad[0])
                return _mismatch(f"output '{name}' ({exp.dtype}{list(exp.shape)}): {len(bad)} of {exp.size} elements "
                                 f"differ, first at {list(i)}: mlcc {g[i]!r}, onnxruntime {exp[i]!r}", "int-values")
            continue
        rtol, atol = TOLERANCES[exp.dtype.name]
        g64, e64 = g.astype(np.float64), exp.astype(np.float64)
        same_special = (np.isnan(g64) & np.isnan(e64)) | ((g64 == e64) & np.isinf(e64))
        close = same_special | (np.abs(g64 - e64) <= atol + rtol * np.abs(e64))
        if close.all():
            continue
        if exp.dtype == np.float16:
            if stepwise is None:
                stepwise = _stepwise_reference(model, feeds) or {}
            if name in stepwise and _allclose(g64, stepwise[name].astype(np.float64), rtol, atol):
                continue
        nan_or_inf = ~np.isfinite(g64) | ~np.isfinite(e64)
        if not (nan_or_inf & ~same_special).any():
            if reference64 is None:
                reference64 = _wide_reference(model, feeds)
            if reference64 is not None and name in reference64:
                r = np.asarray(reference64[name], np.float64)
                theirs = _rmse(e64, r)
                if stepwise and name in stepwise:  # the unfused computation, rounded as ONNX rounds
                    theirs = max(theirs, _rmse(stepwise[name].astype(np.float64), r))
                if _rmse(g64, r) <= RMSE_FACTOR[exp.dtype.name] * theirs:
                    continue
        bad = np.argwhere(~close)
        i = tuple(bad[0])
        err = np.abs(g64 - e64)
        return _mismatch(f"output '{name}' ({exp.dtype}{list(exp.shape)}): {len(bad)} of {exp.size} elements beyond "
                         f"rtol={rtol} atol={atol}, max abs err {np.nanmax(np.where(close, 0, err)):.3g}, first at "
                         f"{list(i)}: mlcc {g[i]!r}, onnxruntime {exp[i]!r}", "float-values")
    return Outcome("pass")


def _wide_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The outputs computed in float64 by onnxruntime; where it lacks a float64 kernel, the float16 outputs
    computed in float32 (precise enough to arbitrate those; float32 outputs then have no wide reference)."""
    from onnx import TensorProto
    for wide_type, np_wide in ((TensorProto.DOUBLE, np.float64), (TensorProto.FLOAT, np.float32)):
        try:
            wide = {k: v.astype(np_wide) if v.dtype.kind == "f" and v.dtype.itemsize < np.dtype(np_wide).itemsize
                    else v for k, v in feeds.items()}
            out = ort_outputs(as_wider_model(model, wide_type), wide)
        except Exception:  # noqa: BLE001 - onnxruntime lacks a kernel at this width: try the next
            continue
        if wide_type == TensorProto.FLOAT:  # only float16 outputs are arbitrated by a float32 run
            narrow = {o.name for o in model.graph.output if o.type.tensor_type.elem_type == TensorProto.FLOAT16}
            out = {k: v for k, v in out.items() if k in narrow}
        return out
    return None


def _mismatch(detail: str, what: str) -> Outcome:
    return Outcome("fail", "mismatch", detail, f"mismatch:{what}")


# ---- one model ------------------------------------------------------------------------------------------

def _signature(kind: str, e: BaseException) -> str:
    message = re.sub(r"\d+", "N", str(e).splitlines()[0] if str(e) else "")
    message = re.sub(r"'[^']*'", "'X'", message)
    return f"{kind}:{type(e).__name__}:{message[:80]}"


def check_model(model: onnx.ModelProto, seed: int, workdir: Path) -> Outcome:
    """Compile ``model`` with mlcc, run it on inputs drawn from ``seed``, compare with onnxruntime."""
    feeds = random_inputs(model, seed)
    try:
        expected = ort_outputs(model, feeds)
    except Exception as e:  # noqa: BLE001 - the reference rejects the model: nothing to compare with
        return Outcome("skip", "ort-rejects", f"{type(e).__name__}: {str(e)[:300]}")
    path = workdir / "model.onnx"
    path.write_bytes(model.SerializeToString())
    stage = "compile"
    try:
        mlcc.compile(path, workdir / "bundle", targets=[])
        stage = "run"
        got = mlcc.load(workdir / "bundle", device="cpu").run(feeds)
    except MlccError as e:
        kind = {65: "reject", 69: "unsupported"}.get(e.exit_code, "crash")
        return Outcome("fail", kind, f"{stage}: {type(e).__name__} (exit {e.exit_code}): {e}", _signature(kind, e))
    except Exception as e:  # noqa: BLE001 - any other exception is a crash, and a finding
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb) if "mlcc" in f.filename), "")
        return Outcome("fail", "crash", f"{stage}: {type(e).__name__}: {str(e)[:400]} [at {where}]",
                       _signature("crash", e) + f"@{where}")
    declared = _declared_shapes(model)
    for name, exp in expected.items():
        want = declared.get(name)
        if want is not None and list(exp.shape) != want and name in got and list(np.shape(got[name])) == want:
            return Outcome("skip", "ort-wrong-shape", f"onnxruntime's output '{name}' has dims {list(exp.shape)}, "
                           f"the model (and ONNX shape inference) says {want}, and so does mlcc")
    return compare_outputs(model, feeds, got, expected)


def _declared_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    out = {}
    for o in model.graph.output:
        dims = o.type.tensor_type.shape.dim
        if o.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            out[o.name] = [d.dim_value for d in dims]
    return out


def check_generated_seed(seed: int, workdir: Path, avoid: frozenset[str] = frozenset(),
                         max_nodes: int = 10) -> CaseResult:
    start = time.monotonic()
    gm = generate(seed, max_nodes, avoid)
    outcome = check_model(gm.model, seed, workdir)
    return CaseResult(seed, outcome, gm.ops, time.monotonic() - start)


# ---- many models, each in its own forked child ----------------------------------------------------------

def _child(task: Callable[[Path], dict], result_file: str) -> None:
    import warnings
    warnings.simplefilter("ignore")  # the interpreter computes masked-off lanes too (x / 0 there is harmless)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    workdir = Path(tempfile.mkdtemp(prefix="mlcc-fuzz-"))
    try:
        payload = task(workdir)
    except BaseException as e:  # noqa: BLE001 - even the harness failing is reported, not lost
        payload = {"status": "fail", "kind": "crash", "detail": f"harness: {type(e).__name__}: {e}",
                   "signature": _signature("crash", e)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    Path(result_file).write_text(json.dumps(payload))


def preload() -> None:
    """Import what every case needs once, in the parent, so forked children start warm."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import onnxruntime  # noqa: F401
    import torch  # noqa: F401
    import triton  # noqa: F401
    # mlcc's own modules (compiler and runtime) are imported with this module.


def run_isolated(tasks: Iterable[tuple[object, Callable[[Path], dict]]], jobs: int = 1,
                 timeout: float = CASE_TIMEOUT) -> Iterator[tuple[object, dict, float]]:
    """Run each (key, task) in a forked child, ``jobs`` at a time; yields (key, the task's dict, seconds) as
    they finish. A child that dies or outlives ``timeout`` yields a crash or timeout verdict."""
    ctx = multiprocessing.get_context("fork")
    scratch = Path(tempfile.mkdtemp(prefix="mlcc-fuzz-results-"))
    pending = iter(tasks)
    running: list[tuple[object, multiprocessing.Process, str, float]] = []
    count = 0
    try:
        while True:
            while len(running) < max(1, jobs):
                nxt = next(pending, None)
                if nxt is None:
                    break
                key, task = nxt
                count += 1
                result_file = str(scratch / f"{count}.json")
                p = ctx.Process(target=_child, args=(task, result_file))
                p.start()
                running.append((key, p, result_file, time.monotonic()))
            if not running:
                return
            time.sleep(0.02)
            for item in list(running):
                key, p, result_file, started = item
                elapsed = time.monotonic() - started
                if p.is_alive() and elapsed < timeout:
                    continue
                if p.is_alive():
                    p.kill()
                    p.join()
                    payload = {"status": "fail", "kind": "timeout", "detail": f"no verdict after {timeout:.0f} s",
                               "signature": "timeout"}
                else:
                    p.join()
                    try:
                        payload = json.loads(Path(result_file).read_text())
                    except (OSError, ValueError):
                        payload = {"status": "fail", "kind": "crash",
                                   "detail": f"the process died (exit code {p.exitcode})",
                                   "signature": f"crash:died:{p.exitcode}"}
                running.remove(item)
                yield key, payload, elapsed
    finally:
        for _, p, _, _ in running:
            p.kill()
        shutil.rmtree(scratch, ignore_errors=True)


def _seed_task(seed: int, avoid: frozenset[str], max_nodes: int) -> Callable[[Path], dict]:
    def task(workdir: Path) -> dict:
        return check_generated_seed(seed, workdir, avoid, max_nodes).to_json()
    return task


def run_seeds(seeds: Iterable[int], jobs: int = 1, timeout: float = CASE_TIMEOUT,
              avoid: frozenset[str] = frozenset(), max_nodes: int = 10) -> Iterator[CaseResult]:
    """Generate, compile, run and compare each seed's model in its own child process."""
    tasks = ((s, _seed_task(s, avoid, max_nodes)) for s in seeds)
    for seed, payload, elapsed in run_isolated(tasks, jobs, timeout):
        outcome = Outcome(payload["status"], payload.get("kind"), payload.get("detail", ""),
                          payload.get("signature", ""))
        ops = payload.get("ops") or generate(seed, max_nodes, avoid).ops  # type: ignore[arg-type]
        yield CaseResult(seed, outcome, ops, elapsed)  # type: ignore[arg-type]


def check_model_isolated(model: onnx.ModelProto, seed: int, timeout: float = CASE_TIMEOUT) -> Outcome:
    """check_model in a forked child (for the shrinker and regression replay)."""
    data = model.SerializeToString()

    def task(workdir: Path) -> dict:
        return asdict(check_model(onnx.load_from_string(data), seed, workdir))
    for _, payload, _ in run_isolated([(0, task)], 1, timeout):
        return Outcome(payload["status"], payload.get("kind"), payload.get("detail", ""), payload.get("signature", ""))
    raise AssertionError("no verdict")
