"""Write a StableHLO test corpus from JAX's primitive test harnesses, with inputs and JAX's CPU outputs.

    /tmp/jaxvenv/bin/python tools/gen_jax_corpus.py /tmp/jaxcorpus [--groups add,sin] [--max-per-group 25]
                                                     [--seed 0] [--x64]

The harnesses are ``jax._src.internal_test_util.test_harnesses.all_harnesses`` (5,594 harnesses in 132 groups
in jax 0.10.2, in JAX's default 32-bit mode; ``--x64`` gives 7,526), the source of the held-out StableHLO
corpus that issue 22 measures. For each chosen harness NAME (its ``fullname``) the tool writes, under OUT:
  NAME.mlir     jax.jit(h.dyn_fun).lower(*args).as_text(), args from h.dyn_args_maker(rng) (static arguments
                are baked into dyn_fun as the harness gives them)
  NAME.ref.npz  arg0.., out0.. (JAX's outputs on CPU, flattened), and ``dtypes``: a JSON object naming each
                array's dtype. Dtypes numpy cannot store (bfloat16, the float8/float4 and int4 kinds) are stored
                as their raw bits (an unsigned integer array of the same width) and recovered by the name.
and three JSON files:
  groups.json   {group: number of harnesses in the whole corpus}, to weigh a stratified sample back
  cases.json    {NAME: group} for every case written
  jax_failed.json  {NAME: [group, reason]} for chosen harnesses JAX itself cannot lower or run on CPU
                (its own jax_unimplemented list, or an exception): they are not cases and not counted.

``--max-per-group N`` takes at most N harnesses of each group, drawn with a fixed seed (stratified). jax is
needed by this tool only; mlcc and its tests never import it. Never write the corpus into the repository.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import traceback
from collections import Counter
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_platforms", "cpu")
if "--x64" in sys.argv:  # before the harnesses are built: their dtypes depend on it (7,526 harnesses with it)
    jax.config.update("jax_enable_x64", True)

from jax._src.internal_test_util import test_harnesses  # noqa: E402

NATIVE_KINDS = "biufcM"


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", name)[:200]


def storable(x: object) -> tuple[np.ndarray, str]:
    """(array numpy can save exactly, dtype name to recover it)."""
    a = np.asarray(x)
    name = str(a.dtype)
    if a.dtype.kind in NATIVE_KINDS and a.dtype.type.__module__ == "numpy":
        return a, name
    if a.dtype == np.bool_:
        return a, name
    return a.view(np.dtype(f"uint{8 * a.dtype.itemsize}")), name


def choose(harnesses: list, groups: set[str] | None, max_per_group: int | None, seed: int) -> list:
    by_group: dict[str, list] = {}
    for h in harnesses:
        if groups is None or h.group_name in groups:
            by_group.setdefault(h.group_name, []).append(h)
    chosen = []
    for g in sorted(by_group):
        hs = by_group[g]
        if max_per_group is not None and len(hs) > max_per_group:
            idx = sorted(random.Random(f"{seed}:{g}").sample(range(len(hs)), max_per_group))
            hs = [hs[i] for i in idx]
        chosen.extend(hs)
    return chosen


def write_case(h, out: Path, name: str) -> None:
    rng = np.random.RandomState(0)
    args = h.dyn_args_maker(rng)
    fn = jax.jit(h.dyn_fun)
    text = fn.lower(*args).as_text()
    outs = jax.tree_util.tree_leaves(fn(*args))
    arrays: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for prefix, values in (("arg", args), ("out", outs)):
        for i, v in enumerate(values):
            arrays[f"{prefix}{i}"], dtypes[f"{prefix}{i}"] = storable(v)
    (out / f"{name}.mlir").write_text(text)
    np.savez(out / f"{name}.ref.npz", dtypes=np.array(json.dumps(dtypes)), **arrays)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--groups", help="comma-separated harness groups (default: all)")
    p.add_argument("--max-per-group", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-v", dest="verbose", action="store_true", help="print the traceback of each JAX failure")
    p.add_argument("--x64", action="store_true", help="enable jax_enable_x64 (not the default: the 5,594-harness "
                   "corpus is JAX's default 32-bit mode, where f64/i64 requests become f32/i32)")
    a = p.parse_args(argv)
    harnesses = list(test_harnesses.all_harnesses)
    totals = Counter(h.group_name for h in harnesses)
    groups = set(a.groups.split(",")) if a.groups else None
    if groups and groups - set(totals):
        print(f"unknown groups: {', '.join(sorted(groups - set(totals)))}", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    chosen = choose(harnesses, groups, a.max_per_group, a.seed)
    cases: dict[str, str] = {}
    failed: dict[str, list[str]] = {}
    for n, h in enumerate(chosen):
        name = safe_name(h.fullname)
        if name in cases or name in failed:
            name = f"{name}__{n}"
        if not h.filter("cpu"):
            failed[name] = [h.group_name, "jax_unimplemented on cpu"]
            continue
        try:
            write_case(h, a.out, name)
        except Exception as e:  # noqa: BLE001 - any JAX failure means the harness is not a case
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            failed[name] = [h.group_name, msg]
            if a.verbose:
                traceback.print_exc()
            continue
        cases[name] = h.group_name
        if n % 100 == 0:
            print(f"{n}/{len(chosen)} {name}", flush=True)
    (a.out / "groups.json").write_text(json.dumps(dict(sorted(totals.items())), indent=1))
    (a.out / "cases.json").write_text(json.dumps(cases, indent=1))
    (a.out / "jax_failed.json").write_text(json.dumps(failed, indent=1))
    print(f"wrote {len(cases)} cases to {a.out}; {len(failed)} harnesses JAX cannot run on CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
