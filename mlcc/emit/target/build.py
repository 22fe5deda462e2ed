"""Compile every kernel for every target: in parallel, each distinct kernel once, through a
persistent content-addressed cache (key: source, signature, launch config, target, Triton version).
Each (kernel, target) compiles with that target's own launch config (Kernel.config_for)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.target.aot import Binary, compile_kernel
from mlcc.emit.target.targets import Target

CACHE_FORMAT = 1


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mlcc" / "kernels"


def _triton_version() -> str:
    import triton
    return triton.__version__


def cache_key(kernel: Kernel, target: Target) -> str:
    h = hashlib.sha256()
    payload = {"format": CACHE_FORMAT, "source": kernel.source, "name": kernel.name,
               "arg_types": kernel.arg_types, "config": kernel.config_for(target).to_json(),
               "target": target.name, "triton": _triton_version()}
    h.update(json.dumps(payload, sort_keys=True).encode())
    return h.hexdigest()


def _compile_job(source: str, name: str, arg_types: list[str], config: dict, target: Target) -> Binary:
    kernel = Kernel(name, "", source, arg_types, LaunchConfig(config["constexprs"], tuple(config["grid"]),
                                                              config["num_warps"], config["num_stages"]),
                    LaunchConfig({}, (1, 1, 1)))
    return compile_kernel(kernel, target, kernel.gpu)


def _cache_load(cache_dir: Path | None, key: str) -> Binary | None:
    if cache_dir is None:
        return None
    meta_path = cache_dir / key[:2] / f"{key}.json"
    bin_path = cache_dir / key[:2] / f"{key}.bin"
    try:
        meta = json.loads(meta_path.read_text())
        data = bin_path.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        return None  # a torn or corrupted entry is a miss, never a wrong binary
    fields = meta["binary"]
    return Binary(data=data, **fields)


def _cache_store(cache_dir: Path | None, key: str, binary: Binary) -> None:
    if cache_dir is None:
        return
    d = cache_dir / key[:2]
    try:
        d.mkdir(parents=True, exist_ok=True)
        fields = {k: v for k, v in asdict(binary).items() if k != "data"}
        meta = json.dumps({"sha256": hashlib.sha256(binary.data).hexdigest(), "binary": fields}, sort_keys=True)
        for suffix, payload in ((".bin", binary.data), (".json", meta.encode())):
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, d / f"{key}{suffix}")
    except OSError:
        pass  # the cache is an optimization: a read-only or full cache directory never fails a build


def build_binaries(kernels: Sequence[Kernel], targets: Sequence[Target], *, jobs: int = 0,
                   cache_dir: Path | None = None,
                   progress: Callable[[int, int], None] | None = None) -> tuple[dict[tuple[str, str], Binary], dict]:
    """Binaries by (kernel name, target name), plus statistics (hits, misses)."""
    results: dict[tuple[str, str], Binary] = {}
    todo: list[tuple[Kernel, Target, str]] = []
    for k in kernels:
        for t in targets:
            key = cache_key(k, t)
            hit = _cache_load(cache_dir, key)
            if hit is not None:
                results[(k.name, t.name)] = hit
            else:
                todo.append((k, t, key))
    total, done = len(kernels) * len(targets), len(results)
    if progress:
        progress(done, total)
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(todo) > 2:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as pool:
            futures = {pool.submit(_compile_job, k.source, k.name, k.arg_types, k.config_for(t).to_json(), t):
                       (k, t, key) for k, t, key in todo}
            for fut in concurrent.futures.as_completed(futures):
                k, t, key = futures[fut]
                binary = fut.result()
                results[(k.name, t.name)] = binary
                _cache_store(cache_dir, key, binary)
                done += 1
                if progress:
                    progress(done, total)
    else:
        for k, t, key in todo:
            binary = compile_kernel(k, t)
            results[(k.name, t.name)] = binary
            _cache_store(cache_dir, key, binary)
            done += 1
            if progress:
                progress(done, total)
    return results, {"kernels": len(kernels), "targets": len(targets), "cache_hits": total - len(todo),
                     "compiled": len(todo)}
