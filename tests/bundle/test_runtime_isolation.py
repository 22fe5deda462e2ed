"""The runtime knows only the bundle format: loading and running a bundle imports no compiler module, and
mlcc/runtime and mlcc/bundle import nothing from mlcc beyond themselves (mlcc/bundle: beyond itself)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlcc
from mlcc_test_paths import EXAMPLES, ROOT

COMPILER = ("mlcc.hlo", "mlcc.emit", "mlcc.frontend", "mlcc.compiler")

RUN = """
import json, sys
import numpy as np
{imports}
exe = {load}(sys.argv[1], device="cpu")
feeds = dict(np.load(sys.argv[2]))
out = exe.run(feeds)
np.savez(sys.argv[3], **out)
print(json.dumps(sorted(m for m in sys.modules if m == "mlcc" or m.startswith("mlcc."))))
"""


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    root = tmp_path_factory.mktemp("isolation")
    out = mlcc.compile(EXAMPLES / "mlp.onnx", root / "mlp", targets=[]).out_dir
    exe = mlcc.load(out)
    spec = exe.manifest["inputs"]
    rng = np.random.default_rng(0)
    feeds = {s["name"]: rng.standard_normal(s["shape"]).astype(s["numpy_dtype"]) for s in spec}
    np.savez(root / "in.npz", **feeds)
    return out, root, exe.run(feeds)


@pytest.mark.parametrize("imports, load", [("import mlcc.runtime", "mlcc.runtime.load"),
                                           ("import mlcc", "mlcc.load")])
def test_running_a_bundle_imports_no_compiler_module(mlp, imports, load):
    out, root, expected = mlp
    script = RUN.format(imports=imports, load=load)
    r = subprocess.run([sys.executable, "-c", script, str(out), str(root / "in.npz"), str(root / "out.npz")],
                       capture_output=True, text=True, cwd=ROOT, check=True)
    modules = json.loads(r.stdout.strip().splitlines()[-1])
    assert "mlcc.runtime.bundle" in modules and "mlcc.bundle.manifest" in modules
    assert [m for m in modules if m.startswith(COMPILER)] == []
    got = np.load(root / "out.npz")
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value)


def _mlcc_imports(path: Path) -> list[str]:
    """Every mlcc module a file imports, at any depth of the file (function bodies included)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [n for n in names if n == "mlcc" or n.startswith("mlcc.")]


@pytest.mark.parametrize("package, allowed", [("runtime", ("mlcc.runtime", "mlcc.bundle")),
                                              ("bundle", ("mlcc.bundle",))])
def test_runtime_and_bundle_import_only_themselves(package, allowed):
    files = sorted((ROOT / "mlcc" / package).rglob("*.py"))
    assert files
    outside = {f"{f.relative_to(ROOT)}: {m}" for f in files for m in _mlcc_imports(f)
               if not any(m == a or m.startswith(a + ".") for a in allowed)}
    assert outside == set()
