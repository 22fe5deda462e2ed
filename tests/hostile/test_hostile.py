"""mlcc against hostile and broken models (/work/shared/RELIABILITY.md): it never crashes, never leaks, never
reads outside the model's folder, never runs a model's strings as code, and never harms the previous bundle.

Every bad input in ``corpus.CASES`` goes through the real command line in a child process (a fork server,
``cli_server.py``, that runs ``python -m mlcc.cli`` without paying a second of imports per case; a few cases
also run through a plain ``subprocess`` to prove the two agree), with its working directory an empty folder,
a 4 GiB address-space limit and a timeout. For each: the documented exit code, exactly one line on stderr
starting ``mlcc: error:`` and naming the file, no traceback, valid JSON with ``--json``, the previous bundle
byte-identical, nothing written to the working directory or beside the bundle, and the sentinel outside the
model's folder never opened (neither in the audit log of opened paths nor by its access time).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.frontend.onnx import InvalidModelError, import_onnx
from mlcc.frontend.onnx import loading
from mlcc.hlo.parser import parse_module
from tests.hostile import corpus
from tests.hostile.corpus import CASES, NASTY_NAMES, PAYLOAD, Layout, make_layout

ROOT = Path(__file__).resolve().parents[2]
RLIMIT_AS = 4 << 30
OLD_ATIME = 1_000_000_000  # 2001: below the mtime, so relatime updates it on any read


# ---- running the CLI ----------------------------------------------------------------------------------

@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str
    opened: list[Path]  # every path the process opened, resolved
    seconds: float


class CliServer:
    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.count = 0
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("cli_server.py"))], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert json.loads(self.proc.stdout.readline())["ready"]

    def run(self, argv: list[str], cwd: Path, timeout: float = 60) -> CliResult:
        self.count += 1
        files = {k: self.scratch / f"{self.count}.{k}" for k in ("stdout", "stderr", "audit")}
        req = {"argv": argv, "cwd": str(cwd), "stdout": str(files["stdout"]), "stderr": str(files["stderr"]),
               "audit_log": str(files["audit"]), "timeout": timeout, "rlimit_as": RLIMIT_AS}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        opened = []
        for line in files["audit"].read_text().splitlines():
            entry = json.loads(line)
            opened.append(Path(os.path.realpath(os.path.join(entry["cwd"], entry["path"]))))
        return CliResult(answer["rc"], files["stdout"].read_text(), files["stderr"].read_text(), opened,
                         answer["seconds"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    server = CliServer(tmp_path_factory.mktemp("cli-server"))
    yield server
    server.close()


def run_cli_subprocess(argv: list[str], cwd: Path, timeout: float = 60, wrapper: list[str] = ()) -> CliResult:
    """The plain way: ``python -m mlcc.cli`` in a child with a 4 GiB address-space limit."""
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (RLIMIT_AS, RLIMIT_AS))
    start = time.monotonic()
    r = subprocess.run([*wrapper, sys.executable, "-m", "mlcc.cli", *argv], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, preexec_fn=limits if not wrapper else None)
    return CliResult(r.returncode, r.stdout, r.stderr, [], time.monotonic() - start)


# ---- the state a bad compile must leave alone -----------------------------------------------------------

@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory) -> Path:
    """A bundle compiled from a good model, copied as the 'previous bundle' into every case's output dir."""
    d = tmp_path_factory.mktemp("good")
    path = d / "good.onnx"
    path.write_bytes(corpus.good_model().SerializeToString())
    mlcc.compile(path, d / "bundle", targets=[])
    return d / "bundle"


def tree_digest(root: Path) -> dict[str, str]:
    """Every file below root (relative name -> sha256), and every folder."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else "dir"
    return out


@dataclass
class Scene:
    lay: Layout
    model: Path
    cwd: Path
    out: Path
    bundle_before: dict[str, str]
    root_before: list[str]
    sentinels: dict[Path, tuple[float, str]]


def set_scene(tmp_path: Path, good_bundle: Path, build) -> Scene:
    lay = make_layout(tmp_path / "root")
    cwd = lay.root / "cwd"
    cwd.mkdir()
    out = lay.root / "out"
    shutil.copytree(good_bundle, out)
    model = build(lay)
    sentinels = {}
    for p in (lay.secret, lay.outside / "dir" / "w.bin"):
        os.utime(p, (OLD_ATIME, p.stat().st_mtime))
        sentinels[p] = (p.stat().st_atime, hashlib.sha256(p.read_bytes()).hexdigest())
    for p in sentinels:  # hashing read them: put the old access time back
        os.utime(p, (OLD_ATIME, p.stat().st_mtime))
    return Scene(lay, model, cwd, out, tree_digest(out), sorted(os.listdir(lay.root)), sentinels)


def check_scene_untouched(scene: Scene, result: CliResult | None, *, bundle_replaced: bool = False) -> None:
    assert os.listdir(scene.cwd) == [], "the compile wrote into its working directory"
    assert sorted(os.listdir(scene.lay.root)) == scene.root_before, "the compile left files beside the bundle"
    if not bundle_replaced:
        assert tree_digest(scene.out) == scene.bundle_before, "the previous bundle changed"
    for p, (atime, digest) in scene.sentinels.items():
        assert p.stat().st_atime == atime, f"{p} was read (its access time changed)"
        os.utime(p, (OLD_ATIME, p.stat().st_mtime))
        assert hashlib.sha256(p.read_bytes()).hexdigest() == digest
    if result is not None:
        outside = scene.lay.outside.resolve()
        leaks = [p for p in result.opened if p == outside or outside in p.parents or str(p) == "/etc/passwd"]
        assert not leaks, f"opened outside the model's folder: {leaks}"


def check_one_line_error(case: corpus.BadCase, r: CliResult) -> None:
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and r.stderr.endswith("\n"), f"want one line on stderr, got {r.stderr!r}"
    line = lines[0]
    assert line.startswith("mlcc: error: "), line
    assert "model.onnx" in line, f"the error does not name the file: {line}"
    assert re.search(case.message, line), f"{line!r} does not match {case.message!r}"
    assert r.stdout == "", r.stdout


def expected_codes(case: corpus.BadCase) -> tuple[int, ...]:
    return case.exit_code if isinstance(case.exit_code, tuple) else (case.exit_code,)


def _case_params():
    xfail: dict[str, str] = {}  # bugs outside the frontend, owned by others: each flips to a pass when fixed
    for name, c in CASES.items():
        marks = [pytest.mark.slow] if c.slow else []
        if name in xfail:
            marks = [pytest.mark.slow, pytest.mark.xfail(strict=True, reason=xfail[name])]
        yield pytest.param(name, marks=marks, id=name)


# ---- every bad input, through the CLI ------------------------------------------------------------------

@pytest.mark.parametrize("name", list(_case_params()))
def test_bad_input_rejected_cleanly(cli, good_bundle, tmp_path, name):
    case = CASES[name]
    scene = set_scene(tmp_path, good_bundle, case.build)
    timeout = case.timeout if not name.startswith("petabyte_constant_of_shape") else 30
    r = cli.run(["compile", str(scene.model), "-o", str(scene.out), "--target", "none"], scene.cwd, timeout)
    assert r.rc in expected_codes(case), f"exit {r.rc} (want {case.exit_code}) in {r.seconds:.1f}s: {r.stderr}"
    if r.rc == 0:  # a legal model after all (a splat that stays a splat): it must be a complete new bundle
        assert "Traceback" not in r.stderr
        assert json.loads((scene.out / "manifest.json").read_text())["build"]["inputs"][0]["file"] == "model.onnx"
        check_scene_untouched(scene, r, bundle_replaced=True)
        return
    check_one_line_error(case, r)
    check_scene_untouched(scene, r)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.slow and 0 not in expected_codes(c)])
def test_bad_input_json_diagnostic(cli, good_bundle, tmp_path, name):
    """RELIABILITY.md item 31: a fatal error with --json still prints valid JSON (and nothing on stderr)."""
    case = CASES[name]
    scene = set_scene(tmp_path, good_bundle, case.build)
    r = cli.run(["compile", str(scene.model), "-o", str(scene.out), "--target", "none", "--json"], scene.cwd,
                case.timeout)
    assert r.rc in expected_codes(case), r.stdout
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and len(doc["diagnostics"]) == 1
    d = doc["diagnostics"][0]
    assert d["severity"] == "error" and d["exit_code"] == r.rc and d["message"]
    assert Path(d["file"]).name == "model.onnx"
    assert "Traceback" not in r.stderr and "\n" not in d["message"]
    check_scene_untouched(scene, r)


SUBPROCESS_CASES = ["ext_dotdot_to_sentinel", "ext_symlinked_parent", "model_truncated",
                    "unknown_ops_custom_domains", "ext_missing_file"]


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_input_plain_subprocess(good_bundle, tmp_path, name):
    """The same checks through ``python -m mlcc.cli`` started the ordinary way (the fork server is faithful)."""
    case = CASES[name]
    scene = set_scene(tmp_path, good_bundle, case.build)
    r = run_cli_subprocess(["compile", str(scene.model), "-o", str(scene.out), "--target", "none"], scene.cwd)
    assert r.rc in expected_codes(case), r.stderr
    check_one_line_error(case, r)
    check_scene_untouched(scene, None)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("name", ["ext_dotdot_to_sentinel", "ext_symlinked_file", "ext_symlinked_parent"])
def test_no_syscall_opens_outside_the_model_folder(good_bundle, tmp_path, name):
    """strace sees every open(2) of every thread and child, including those of C extensions."""
    case = CASES[name]
    scene = set_scene(tmp_path, good_bundle, case.build)
    trace = tmp_path / "strace.log"
    r = run_cli_subprocess(["compile", str(scene.model), "-o", str(scene.out), "--target", "none"], scene.cwd,
                           wrapper=["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(trace)])
    assert r.rc in expected_codes(case), r.stderr
    opened = re.findall(r'open(?:at2?)?\((?:[^,]*, )?"([^"]*)"', trace.read_text())
    assert opened, "strace logged no opens"
    outside = str(scene.lay.outside) + "/"
    normalized = [os.path.normpath(os.path.join(scene.cwd, p)) + "/" for p in opened]
    assert not [p for p in normalized if p.startswith(outside) or p == "/etc/passwd/"]
    assert any(p.endswith("/model.onnx/") for p in normalized), "strace did not see the model being read"
    check_scene_untouched(scene, None)


# ---- TOCTOU: the file checked is the file read ----------------------------------------------------------

def _swap_after_check(monkeypatch, swap) -> None:
    checked = loading._safe_data_path

    def check_then_swap(base_dir, location, tensor, label):
        path, st = checked(base_dir, location, tensor, label)
        swap(path)
        return path, st
    monkeypatch.setattr(loading, "_safe_data_path", check_then_swap)


def test_toctou_file_swapped_for_symlink(tmp_path, monkeypatch):
    lay = make_layout(tmp_path)
    (lay.model_dir / "w.bin").write_bytes(corpus.weights_bytes())
    model = corpus.external_model(lay, "w.bin")

    def swap(path: Path) -> None:
        path.unlink()
        os.symlink(lay.secret, path)
    _swap_after_check(monkeypatch, swap)
    with pytest.raises(InvalidModelError, match="changed while it was opened"):
        import_onnx(model)


def test_toctou_parent_swapped_for_symlink(tmp_path, monkeypatch):
    lay = make_layout(tmp_path)
    (lay.model_dir / "sub").mkdir()
    (lay.model_dir / "sub" / "w.bin").write_bytes(corpus.weights_bytes())
    model = corpus.external_model(lay, "sub/w.bin")

    def swap(path: Path) -> None:
        shutil.rmtree(path.parent)
        os.symlink(lay.outside / "dir", path.parent)
    _swap_after_check(monkeypatch, swap)
    with pytest.raises(InvalidModelError, match="changed while it was opened"):
        import_onnx(model)


def test_toctou_file_replaced_by_another_file(tmp_path, monkeypatch):
    lay = make_layout(tmp_path)
    (lay.model_dir / "w.bin").write_bytes(corpus.weights_bytes())
    model = corpus.external_model(lay, "w.bin")

    def swap(path: Path) -> None:
        other = path.with_name("other.bin")
        other.write_bytes(b"\0" * 128)
        os.replace(other, path)  # a new inode under the checked name
    _swap_after_check(monkeypatch, swap)
    with pytest.raises(InvalidModelError, match="not the file that was checked"):
        import_onnx(model)


# ---- external data done right ---------------------------------------------------------------------------

def _ort(path: Path, feeds: dict) -> dict:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


@pytest.mark.parametrize("algo", ["sha1", "sha256", None])
def test_external_data_with_checksum_compiles_and_is_hashed(tmp_path, algo):
    """Item 9: the checksum is verified, and the manifest records the SHA-256 of the data file, so a
    replaced weights file makes the bundle out of date even though the model is unchanged."""
    lay = make_layout(tmp_path)
    data = corpus.weights_bytes()
    (lay.model_dir / "w.bin").write_bytes(data)
    extra = (("checksum", hashlib.new(algo, data).hexdigest()),) if algo else ()
    model = corpus.external_model(lay, "w.bin", extra=extra)
    out = tmp_path / "bundle"
    first = mlcc.compile(model, out, targets=[])
    records = {r["file"]: r["sha256"] for r in first.manifest["build"]["inputs"]}
    assert records["w.bin"] == hashlib.sha256(data).hexdigest()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    ref = _ort(model, {"x": x})["y"]
    np.testing.assert_allclose(mlcc.load(out).run({"x": x})["y"], ref, rtol=1e-5, atol=1e-6)
    (lay.model_dir / "w.bin").write_bytes(data[::-1])  # same size, other weights
    if algo:
        with pytest.raises(InvalidModelError, match="checksum mismatch"):
            mlcc.compile(model, out, targets=[])
    else:
        again = mlcc.compile(model, out, targets=[])
        assert not again.up_to_date
        assert {r["file"]: r["sha256"] for r in again.manifest["build"]["inputs"]}["w.bin"] \
            == hashlib.sha256(data[::-1]).hexdigest()


# ---- legal models built to break generated code ---------------------------------------------------------

def _strings_of(model: onnx.ModelProto) -> list[str]:
    g = model.graph
    out = [g.name, g.doc_string, model.doc_string, model.producer_name, model.producer_version]
    out += [v.name for v in list(g.input) + list(g.output)] + [t.name for t in g.initializer]
    for n in g.node:
        out += [n.name, n.doc_string, *n.input, *n.output]
    out += [p.key for p in model.metadata_props] + [p.value for p in model.metadata_props]
    return [s for s in set(out) if s]


def _is_plain_identifier(s: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", s))


@pytest.fixture(scope="module")
def nasty_bundle(cli, tmp_path_factory):
    root = tmp_path_factory.mktemp("nasty")
    (root / "model").mkdir()
    (root / "cwd").mkdir()
    model = corpus.nasty_name_model()
    onnx.checker.check_model(model, full_check=True)  # a legal model
    path = root / "model" / "model.onnx"
    path.write_bytes(model.SerializeToString())
    assert not Path("/tmp/PWNED_path").exists()
    r = cli.run(["compile", str(path), "-o", str(root / "out"), "--target", "none"], root / "cwd", 120)
    return root, model, r


def test_nasty_names_compile_and_run_correctly(nasty_bundle):
    root, model, r = nasty_bundle
    assert r.rc == 0, r.stderr
    assert "Traceback" not in r.stderr
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal((3, 5)).astype(np.float32) for i in model.graph.input}
    expected = _ort(root / "model" / "model.onnx", feeds)
    got = mlcc.load(root / "out").run(feeds)
    assert sorted(got) == sorted(expected)
    for k, v in expected.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-3, atol=1e-6, err_msg=repr(k)[:80])


def test_nasty_names_never_run_as_code(nasty_bundle):
    root, _, r = nasty_bundle
    assert r.rc == 0, r.stderr
    mlcc.load(root / "out").run({n: np.zeros((3, 5), np.float32) for n in NASTY_NAMES[:2]})
    found = [p for p in root.rglob("*PWNED*")] + [p for p in Path.cwd().glob("PWNED*")]
    assert not found and not Path("/tmp/PWNED_path").exists(), found
    assert os.listdir(root / "cwd") == []


def test_nasty_names_kernels_hold_only_mangled_identifiers(nasty_bundle):
    """Items 24-26: every kernel parses; no model string reaches it, not even in a comment or a literal."""
    root, model, r = nasty_bundle
    assert r.rc == 0, r.stderr
    kernels = sorted((root / "out" / "kernels").glob("*.py"))
    assert kernels
    hostile = [s for s in _strings_of(model) if not _is_plain_identifier(s)]
    for k in kernels:
        source = k.read_text()
        tree = ast.parse(source)
        for s in hostile:
            assert s not in source, f"{k.name} contains the model string {s[:60]!r}"
        assert PAYLOAD not in source and "PWNED" not in source
        for node in ast.walk(tree):
            names = {ast.Name: "id", ast.FunctionDef: "name", ast.arg: "arg", ast.Attribute: "attr"}
            name = getattr(node, names.get(type(node), ""), None)
            if isinstance(name, str):
                assert name.isidentifier() and name.isascii() and len(name) <= 80, name[:80]
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert all(s not in node.value for s in hostile)


def test_nasty_names_only_as_escaped_json(nasty_bundle):
    """Items 10 and 25: names appear in manifest/intent only as JSON strings; no file is named after one;
    doc strings and metadata appear nowhere."""
    root, model, r = nasty_bundle
    assert r.rc == 0, r.stderr
    out = root / "out"
    for p in out.rglob("*"):
        rel = str(p.relative_to(out))
        assert re.fullmatch(r"[A-Za-z0-9_./-]+", rel), rel
    docs = [model.doc_string, model.graph.doc_string, model.producer_name, model.producer_version]
    docs += [n.doc_string for n in model.graph.node] + [p.value for p in model.metadata_props]
    for name in ("manifest.json", "intent.json"):
        text = (out / name).read_text()
        doc = json.loads(text)
        strings = set()
        stack = [doc]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                stack += list(x.keys()) + list(x.values())
            elif isinstance(x, list):
                stack += x
            elif isinstance(x, str):
                strings.add(x)
        for s in _strings_of(model):
            if any(c in s for c in "\"\\\n") or any(ord(c) < 32 for c in s):
                assert s not in text, f"{name} holds {s[:40]!r} unescaped"
        assert {i["name"] for i in doc["inputs"]} == {i.name for i in model.graph.input} if name == "manifest.json" \
            else True
        for d in docs:
            assert d not in strings, f"{name} carries a doc string or metadata value {d[:40]!r}"
    for p in out.rglob("*"):
        if p.is_file() and p.suffix not in (".json", ".bin"):
            text = p.read_bytes().decode("utf-8", "replace")
            assert corpus.DOC_PAYLOAD not in text and 'doc:"""' not in text, p.name
    parse_module((out / "model.hlo").read_text())


# ---- other legal corner cases (item 23) -----------------------------------------------------------------

def _compile_run_compare(tmp_path: Path, model: onnx.ModelProto, feeds: dict) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    expected = _ort(path, feeds)
    mlcc.compile(path, tmp_path / "out", targets=[])
    got = mlcc.load(tmp_path / "out").run(feeds)
    assert sorted(got) == sorted(expected)
    for k, v in expected.items():
        assert got[k].shape == v.shape and got[k].dtype == v.dtype, k
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_outputs_that_are_an_input_and_a_constant(tmp_path):
    _compile_run_compare(tmp_path, corpus.passthrough_model(), {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_rank0_output(tmp_path):
    _compile_run_compare(tmp_path, corpus.scalar_output_model(), {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_zero_size_tensors(tmp_path):
    _compile_run_compare(tmp_path, corpus.empty_tensor_model(), {"e": np.zeros((0, 3), np.float32)})


def test_if_nested_30_deep_with_known_condition(tmp_path):
    model = onnx.load_from_string(corpus.nested_if_bytes(30, cond_known=True))
    _compile_run_compare(tmp_path, model, {"x": np.array([2.5], np.float32)})


def test_model_local_function_is_inlined(tmp_path):
    ops = [helper.make_opsetid("", corpus.OPSET), helper.make_opsetid("local", 1)]
    f = helper.make_function("local", "double_relu", ["a"], ["b"],
                             [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Add", ["r", "r"], ["b"])], ops)
    model = corpus.model_of([helper.make_node("double_relu", ["x"], ["y"], domain="local")],
                            [corpus.vi("x", [3])], [corpus.vi("y", [3])], opsets=ops, functions=[f])
    _compile_run_compare(tmp_path, model, {"x": np.array([-1, 0.5, 2], np.float32)})


def test_unsupported_ops_inside_a_function_are_all_listed(tmp_path):
    ops = [helper.make_opsetid("", corpus.OPSET), helper.make_opsetid("local", 1)]
    f = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Mystery", ["a"], ["b"], domain="x.y")],
                             ops + [helper.make_opsetid("x.y", 1)])
    model = corpus.model_of([helper.make_node("f", ["x"], ["t"], domain="local"),
                             helper.make_node("Enigma", ["t"], ["y"], name="outer", domain="x.y")],
                            [corpus.vi("x", [3])], [corpus.vi("y", [3])],
                            opsets=ops + [helper.make_opsetid("x.y", 1)], functions=[f])
    from mlcc.frontend.onnx import UnsupportedOpError
    with pytest.raises(UnsupportedOpError, match=r"2 unsupported nodes: .*Enigma.*Mystery"):
        import_onnx(model)


def test_sparse_and_external_checks_do_not_reject_ordinary_models(tmp_path):
    """onnx's own external-data writer (location, offset, length) is accepted."""
    model = corpus.good_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="weights.data", size_threshold=0,
                    all_tensors_to_one_file=True)
    x = np.ones((2, 4), np.float32)
    mlcc.compile(path, tmp_path / "out", targets=[])
    np.testing.assert_allclose(mlcc.load(tmp_path / "out").run({"x": x})["y"], _ort(path, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


def test_external_data_of_a_typed_payload_must_match_dims(tmp_path):
    """Item 12 for an int64 initializer stored externally with too few bytes and no length key."""
    lay = make_layout(tmp_path)
    idx = numpy_helper.from_array(np.array([0, 1, 1], np.int64), "idx")
    idx.ClearField("raw_data")
    idx.data_location = TensorProto.EXTERNAL
    e = idx.external_data.add()
    e.key, e.value = "location", "idx.bin"
    (lay.model_dir / "idx.bin").write_bytes(b"\1" * 20)  # 3 int64 need 24
    data = numpy_helper.from_array(np.arange(4, dtype=np.float32), "data")
    model = corpus.model_of([helper.make_node("Gather", ["data", "idx"], ["y"])], [], [corpus.vi("y", [3])],
                            [data, idx])
    with pytest.raises(InvalidModelError, match=r"'idx'.*range \[0, \+24\) is outside the file \(20 bytes\)"):
        import_onnx(corpus.save(lay, model))
