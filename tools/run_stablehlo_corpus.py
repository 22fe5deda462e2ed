"""Run mlcc over a StableHLO corpus written by tools/gen_jax_corpus.py and estimate the full-corpus pass rate.

    PYTHONPATH=. .venv/bin/python tools/run_stablehlo_corpus.py /tmp/jaxcorpus [--groups add,sin] [-k SUBSTR]
                                                                [--json results.json] [--timeout 120] [-j 1]

Each case NAME.mlir is compiled with the public API (``mlcc.compile(..., targets=[])``, as ``mlcc compile
--target none``), run on the CPU runtime (the generated Triton kernels under Triton's interpreter, as
``mlcc verify`` runs them) with NAME.ref.npz's arg0.., and its outputs compared with JAX's out0..:

  pass         every output has JAX's shape and dtype and its values agree (rules below)
  mismatch     compiled and ran, but a shape, dtype or value differs: a bug
  unsupported  mlcc refused it (UnsupportedError, exit 69), with its one-line reason
  error        anything else: another exit code (65 invalid input, 70 internal), a crash, a timeout

Value rules (in the spirit of XLA's ErrorSpec and StableHLO's check.expect_close; JAX's own harness tests use
rtol = atol = 1e-2 bf16, 1e-3 f16, 1e-6 f32, 1e-15 f64):
  - integers and booleans: exactly equal.
  - floats: NaN matches NaN (any payload), -0 matches +0, an infinity only the same infinity. Otherwise the
    distance in units in the last place of the output dtype is at most 1 for bf16/f16/f8 (XLA computes a
    half-precision op in f32 and rounds once: the result is the correctly rounded value or its neighbour)
    and at most 4 for f32/f64 (exactly rounded ops give 0; a few for the libm-style approximations).
  - in the groups whose results are approximations by nature (transcendental and special functions,
    reductions, contractions, convolutions, cumulative ops, linear algebra, fft: APPROX_GROUPS), a value
    may instead satisfy |got - want| <= atol + rtol * |want| with rtol = atol = 1e-2 bf16, 1e-3 f16, 1e-5 f32,
    1e-12 f64 (atol scaled by max |want| over the output for the reductions and contractions, whose error is
    relative to the magnitude of what they sum).
  - complex values: real and imaginary parts each by the rule of their component type, or within 4 eps of
    the component type times max |want| over the output (a complex product or quotient is a sum of real
    products: its parts cancel, and XLA may fuse them with an FMA where mlcc rounds each product).

Ties: a `sort` with is_stable = false passes when it differs from JAX only in the order of elements whose keys
tie (its key outputs exact, each slice the same multiset of tuples: the spec leaves that order open and XLA's
CPU sort is std::sort), and an ApproxTopK when only the indices of equal values differ (values exact, each index
pointing at its value, none twice).

The table gives per group the sampled cases and their classes, the largest ulp distance from JAX among its
passing float outputs (maxulp: where the relative tolerance carried a pass, a precision to look at), and the weighted estimate of the pass rate
over the whole corpus: each group's sample pass rate (among cases JAX can run) times the group's size (its
harness count from groups.json, less the share of its sample JAX could not run), summed over groups and
divided by the total of those sizes. Every case runs in a worker process with a timeout, so no case hangs
the run; a worker that times out or dies is replaced.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

CLASSES = ("pass", "mismatch", "unsupported", "error")

APPROX_GROUPS = {
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "bessel_i0e", "bessel_i1e", "cbrt", "cos", "cosh",
    "digamma", "erf", "erf_inv", "erfc", "exp", "expm1", "igamma", "igammac", "lgamma", "log", "log1p", "logistic",
    "pow", "integer_pow", "regularized_incomplete_beta", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh", "div",
    "random_gamma", "random_categorical",
}
SUMMING_GROUPS = {
    "reduce", "reduce_sum", "reduce_prod", "reduce_window_add", "reduce_window_mul", "cumsum", "cumprod",
    "cumlogsumexp", "dot_general", "conv_general_dilated", "fft", "cholesky", "eig", "eigh", "lu", "qr", "svd",
    "triangular_solve", "tridiagonal_solve", "custom_linear_solve", "select_and_gather_add", "scatter_add",
    "scatter_mul", "select_and_scatter_add",
}
ULPS = {2: 1, 4: 4, 8: 4, 1: 1}
RTOL = {"bfloat16": 1e-2, "float16": 1e-3, "float32": 1e-5, "float64": 1e-12}


# ---------------------------------------------------------------- loading a case
def load_ref(path: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(args, outs) with their exact dtypes (bf16 and the other ml_dtypes stored as raw bits)."""
    with np.load(path) as z:
        dtypes = json.loads(str(z["dtypes"]))
        arrays = {}
        for key, name in dtypes.items():
            a = z[key]
            if str(a.dtype) != name:
                a = a.view(np.dtype(getattr(ml_dtypes, name, name)))
            arrays[key] = a
    args = [arrays[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in arrays))]
    outs = [arrays[f"out{i}"] for i in range(sum(k.startswith("out") for k in arrays))]
    return args, outs


# ---------------------------------------------------------------- comparing
def _ordered(x: np.ndarray) -> np.ndarray:
    """The float bits as integers whose order is the float order (-0 and +0 both 0)."""
    bits = x.view(np.dtype(f"int{8 * x.dtype.itemsize}")).astype(np.int64)
    sign_bit = np.int64(1) << (8 * x.dtype.itemsize - 1)
    return np.where(bits < 0, -(bits & (sign_bit - 1)), bits)


def float_diff(got: np.ndarray, want: np.ndarray, group: str, scale: float | None = None) -> str | None:
    """None when got agrees with want under the rules of the module docstring, else what differs. ``scale``
    (complex parts): also accept an error of 4 eps times it."""
    name = str(want.dtype)
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(g64) & np.isnan(w64)
    with np.errstate(invalid="ignore", over="ignore"):
        ulp = np.abs(_ordered(got) - _ordered(want)).astype(np.float64)
        ok = nan | (g64 == w64) | (ulp <= ULPS.get(want.dtype.itemsize, 1))
        ok &= ~(np.isinf(g64) | np.isinf(w64)) | (g64 == w64) | nan
        if group in APPROX_GROUPS or group in SUMMING_GROUPS:
            rtol = RTOL.get(name, 1e-2)
            finite = np.isfinite(w64)
            atol = rtol * (max(1.0, float(np.max(np.abs(w64[finite]), initial=0.0)))
                           if group in SUMMING_GROUPS else 1.0)
            close = np.isfinite(g64) & finite & (np.abs(g64 - w64) <= atol + rtol * np.abs(w64))
            ok |= close
        if scale is not None:
            ok |= np.isfinite(g64) & (np.abs(g64 - w64) <= 4 * float(np.finfo(want.dtype).eps) * scale)
    if ok.all():
        return None
    bad = np.argwhere(~ok.reshape(want.shape) if want.ndim else ~ok.reshape(()))
    first = tuple(int(i) for i in bad[0]) if want.ndim else ()
    worst = float(np.max(np.where(ok, 0, ulp)))
    return (f"{int((~ok).sum())} of {want.size} values differ, first at {list(first)}: got "
            f"{g64[first] if want.ndim else g64} want {w64[first] if want.ndim else w64} (max {worst:.0f} ulp)")


def max_ulp(got: np.ndarray, want: np.ndarray) -> float:
    """The largest ulp distance between finite values of a float output (0 for other types): how much of a
    pass the relative tolerance carried (--json records it)."""
    if want.dtype.kind == "c":
        return max(max_ulp(got.real.copy(), want.real.copy()), max_ulp(got.imag.copy(), want.imag.copy()))
    if want.dtype.kind != "f" and "float" not in want.dtype.name or got.shape != want.shape:
        return 0.0
    both = np.isfinite(got.astype(np.float64)) & np.isfinite(want.astype(np.float64))
    return float(np.abs(_ordered(got) - _ordered(want))[both].max(initial=0))


def compare(got: np.ndarray, want: np.ndarray, group: str) -> str | None:
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "c":
        mag = np.abs(want[np.isfinite(want)])
        scale = float(mag.max()) if mag.size else 0.0
        return (float_diff(got.real.copy(), want.real.copy(), group, scale)
                or float_diff(got.imag.copy(), want.imag.copy(), group, scale))
    if want.dtype.kind == "f" or "float" in want.dtype.name:  # ml_dtypes' floats are kind "V", as int4 is
        return float_diff(got, want, group)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want) if want.ndim else [()]
        first = tuple(int(i) for i in bad[0])
        return (f"{int((got != want).sum())} of {want.size} values differ, first at {list(first)}: "
                f"got {got[first]} want {want[first]}")
    return None


def unstable_sort_ties(got: list[np.ndarray], want: list[np.ndarray], mlir_text: str, name: str) -> bool:
    """Whether a `sort` with is_stable = false differs from JAX only in the order of elements whose keys tie,
    an order the spec leaves to the implementation (XLA's CPU sort there is std::sort): its K key outputs (K
    from the harness name, num_keys_K, else 1) equal JAX's exactly and, along the sort dimension, each slice
    holds the same multiset of (out0, out1, ...) tuples."""
    if "is_stable = false" not in mlir_text:
        return False
    dim = re.search(r"stablehlo\.sort.*?dimension = (\d+)", mlir_text, re.S)
    keys = re.search(r"num_keys_(\d+)", name)
    d, k = int(dim.group(1)) if dim else 0, int(keys.group(1)) if keys else 1
    if len(got) != len(want) or any(g.shape != w.shape or g.dtype != w.dtype for g, w in zip(got, want)):
        return False
    if any(compare(g, w, "sort") for g, w in zip(got[:k], want[:k])):
        return False

    def slices(outs: list[np.ndarray]) -> list[list[tuple]]:
        moved = [np.moveaxis(o, d, -1) if o.ndim else o.reshape(1) for o in outs]
        lead = moved[0].shape[:-1]
        return [sorted(zip(*(m[i].tolist() for m in moved)), key=repr) for i in np.ndindex(*lead)]
    return slices(got) == slices(want)


def approx_top_k_ties(got: list[np.ndarray], want: list[np.ndarray], args: list[np.ndarray], mlir_text: str) -> bool:
    """Whether an ApproxTopK (values, indices) differs from JAX only in which of several equal values' indices
    it returns (XLA's fallback sorts unstably): the values equal JAX's, and each index points, along
    reduction_dim, at the operand element equal to the value beside it, no index twice in a row."""
    dim = re.search(r"reduction_dim = (\d+)", mlir_text)
    if dim is None or len(got) != 2 or len(want) != 2 or not args or compare(got[0], want[0], "approx_top_k"):
        return False
    d, (values, idx), operand = int(dim.group(1)), got, args[0]
    if idx.shape != want[1].shape or idx.dtype != want[1].dtype:
        return False
    v, i, x = np.moveaxis(values, d, -1), np.moveaxis(idx, d, -1), np.moveaxis(operand, d, -1)
    for lead in np.ndindex(*v.shape[:-1]):
        row = i[lead].astype(np.int64)
        if len(set(row.tolist())) != row.size or row.min(initial=0) < 0 or row.max(initial=0) >= x.shape[-1]:
            return False
        if compare(x[lead][row], v[lead], "approx_top_k"):
            return False
    return True


# ---------------------------------------------------------------- one case, in a worker
def run_case(mlir: Path, ref: Path, group: str) -> dict[str, Any]:
    import mlcc
    from mlcc.errors import MlccError, UnsupportedError

    work = Path(tempfile.mkdtemp(prefix="mlcc_corpus_"))
    try:
        args, outs = load_ref(ref)
        try:
            mlcc.compile(mlir, work / "bundle", targets=[], cache_dir="", quiet=True)
        except UnsupportedError as e:
            return {"class": "unsupported", "reason": str(e).splitlines()[0][:300]}
        except MlccError as e:
            return {"class": "error", "reason": f"compile exit {e.exit_code}: {str(e).splitlines()[0][:300]}"}
        exe = mlcc.load(work / "bundle")
        try:
            got = exe.run(dict(zip(exe.input_names, args)))
        except MlccError as e:
            return {"class": "error", "reason": f"run exit {e.exit_code}: {str(e).splitlines()[0][:300]}"}
        names = exe.output_names
        if len(names) != len(outs):
            return {"class": "mismatch", "reason": f"{len(names)} outputs, JAX gives {len(outs)}"}
        results = [np.asarray(got[n]) for n in names]
        diffs = [(i, d) for i, d in enumerate(compare(g, w, group) for g, w in zip(results, outs)) if d]
        if diffs and (group == "sort" and unstable_sort_ties(results, outs, mlir.read_text(), mlir.stem)
                      or group == "approx_top_k" and approx_top_k_ties(results, outs, args, mlir.read_text())):
            return {"class": "pass", "reason": "equal up to the order of tied keys", "max_ulp": 0.0}
        if diffs:
            return {"class": "mismatch", "reason": f"out{diffs[0][0]}: {diffs[0][1]}"}
        ulps = [max_ulp(np.asarray(got[n]), w) for n, w in zip(names, outs)]
        return {"class": "pass", "reason": "", "max_ulp": max(ulps, default=0.0)}
    except Exception as e:  # noqa: BLE001 - a crash is a result to report, not the end of the run
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        first = str(e).splitlines()[0][:250] if str(e) else ""
        return {"class": "error", "reason": f"crash {type(e).__name__}: {first}{where}"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _worker(conn: Any) -> None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    warnings.simplefilter("ignore")  # numpy's overflow/NaN warnings from the interpreter: results, not news
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(run_case(Path(task[0]), Path(task[1]), task[2]))


class Worker:
    def __init__(self) -> None:
        self.proc: Any = None
        self.conn: Any = None

    def start(self) -> None:
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, mlir: Path, ref: Path, group: str, timeout: float) -> dict[str, Any]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send((str(mlir), str(ref), group))
        if self.conn.poll(timeout):
            try:
                return self.conn.recv()
            except EOFError:
                pass
            self.kill()
            return {"class": "error", "reason": "worker died (crash, out of memory?)"}
        self.kill()
        return {"class": "error", "reason": f"timeout after {timeout:.0f} s"}

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)
        self.kill()


# ---------------------------------------------------------------- the table
def table(results: dict[str, dict], cases: dict[str, str], totals: dict[str, int],
          jax_failed: dict[str, list], groups: list[str]) -> tuple[str, float]:
    lines = [f"{'group':32} {'total':>5} {'sampled':>7} {'jaxfail':>7} {'pass':>5} {'mism':>5} {'unsup':>5} "
             f"{'error':>5} {'maxulp':>6}  top refusal / error"]
    num = den = 0.0
    sums = dict.fromkeys(("sampled", "jaxfail") + CLASSES, 0)
    for g in groups:
        names = [n for n, cg in cases.items() if cg == g and n in results]
        jf = sum(1 for v in jax_failed.values() if v[0] == g)
        counts = {c: sum(1 for n in names if results[n]["class"] == c) for c in CLASSES}
        sampled = len(names) + jf
        if sampled == 0:
            continue
        reasons: dict[str, int] = {}
        for n in names:
            if results[n]["class"] in ("unsupported", "error", "mismatch"):
                r = results[n]["reason"][:70]
                reasons[r] = reasons.get(r, 0) + 1
        top = max(reasons, key=lambda r: reasons[r]) if reasons else ""
        worst = max((results[n].get("max_ulp", 0.0) for n in names if results[n]["class"] == "pass"), default=0.0)
        worst_text = f"{worst:6.0f}" if worst < 1e6 else f"{worst:6.0e}"
        size = totals.get(g, sampled) * len(names) / sampled
        if names:
            num += counts["pass"] / len(names) * size
        den += size
        for k, v in (("sampled", sampled), ("jaxfail", jf), *counts.items()):
            sums[k] += v
        lines.append(f"{g:32} {totals.get(g, sampled):5} {sampled:7} {jf:7} {counts['pass']:5} "
                     f"{counts['mismatch']:5} {counts['unsupported']:5} {counts['error']:5} {worst_text}  {top}")
    lines.append(f"{'TOTAL':32} {sum(totals.get(g, 0) for g in groups):5} {sums['sampled']:7} {sums['jaxfail']:7} "
                 f"{sums['pass']:5} {sums['mismatch']:5} {sums['unsupported']:5} {sums['error']:5}")
    est = num / den if den else 0.0
    lines.append(f"weighted estimate of the full-corpus pass rate (cases JAX can run): {100 * est:.1f}%")
    return "\n".join(lines), est


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--groups", help="comma-separated groups (default: all in the corpus)")
    p.add_argument("-k", dest="substr", help="only cases whose name contains SUBSTR")
    p.add_argument("--json", type=Path, help="write {case: {group, class, reason}} here")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    p.add_argument("-j", dest="jobs", type=int, default=1)
    p.add_argument("-v", dest="verbose", action="store_true", help="print every case's result")
    a = p.parse_args(argv)
    cases: dict[str, str] = json.loads((a.dir / "cases.json").read_text())
    totals: dict[str, int] = json.loads((a.dir / "groups.json").read_text())
    jax_failed: dict[str, list] = json.loads((a.dir / "jax_failed.json").read_text())
    wanted = set(a.groups.split(",")) if a.groups else None
    todo = [n for n, g in cases.items() if (wanted is None or g in wanted) and (a.substr is None or a.substr in n)]
    if a.substr:
        jax_failed = {n: v for n, v in jax_failed.items() if a.substr in n}
    if wanted:
        jax_failed = {n: v for n, v in jax_failed.items() if v[0] in wanted}
    results: dict[str, dict] = {}
    lock = threading.Lock()
    queue = list(todo)
    start = time.monotonic()

    def drain() -> None:
        w = Worker()
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    name = queue.pop(0)
                r = w.run(a.dir / f"{name}.mlir", a.dir / f"{name}.ref.npz", cases[name], a.timeout)
                with lock:
                    results[name] = {"group": cases[name], **r}
                    if a.verbose or r["class"] == "mismatch":
                        print(f"{r['class']:11} {name}: {r['reason']}", flush=True)
                    elif len(results) % 50 == 0:
                        print(f"[{len(results)}/{len(todo)} {time.monotonic() - start:.0f} s]", flush=True)
        finally:
            w.stop()

    threads = [threading.Thread(target=drain) for _ in range(max(1, a.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    groups = sorted({g for n, g in cases.items() if n in results} | {v[0] for v in jax_failed.values()})
    text, _ = table(results, cases, totals, jax_failed, groups)
    cmd = " ".join(["tools/run_stablehlo_corpus.py", *(argv if argv is not None else sys.argv[1:])])
    print(text)
    print(f"({len(results)} cases in {time.monotonic() - start:.0f} s; reproduce: PYTHONPATH=. python {cmd})")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
