import subprocess

import pytest

from mlcc.atomic import depfile_text, make_escape, staged_directory
from mlcc.errors import OutputError


def _bundle(path, text):
    path.mkdir(parents=True, exist_ok=True)
    (path / "manifest.json").write_text(text)


def test_successful_stage_replaces_the_previous_bundle(tmp_path):
    target = tmp_path / "build"
    _bundle(target, "old")
    with staged_directory(target) as tmp:
        (tmp / "manifest.json").write_text("new")
    assert (target / "manifest.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build"]  # no temporary debris


def test_failed_stage_leaves_the_previous_bundle_and_no_debris(tmp_path):
    target = tmp_path / "build"
    _bundle(target, "old")
    with pytest.raises(RuntimeError):
        with staged_directory(target) as tmp:
            (tmp / "manifest.json").write_text("half")
            raise RuntimeError("compile failed")
    assert (target / "manifest.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build"]


def test_a_directory_that_is_not_a_bundle_is_never_replaced(tmp_path):
    target = tmp_path / "src"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(OutputError, match="holds no mlcc bundle"):
        with staged_directory(target):
            pass
    assert (target / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("path, escaped", [
    ("plain.onnx", "plain.onnx"),
    ("my model.onnx", r"my\ model.onnx"),
    ("a#b", r"a\#b"),
    ("cost$1", "cost$$1"),
    ("x\\ y", "x\\\\\\ y"),
])
def test_make_escaping_follows_gcc(path, escaped):
    assert make_escape(path) == escaped


def test_depfile_is_read_by_make_with_phony_targets(tmp_path):
    dep = tmp_path / "we ird#$.onnx"
    dep.write_text("x")
    out = tmp_path / "out"
    text = depfile_text(str(out), [str(dep)])
    (tmp_path / "rules.d").write_text(text)
    (tmp_path / "Makefile").write_text(f"include rules.d\n{out}:\n\ttouch $@\n")
    assert subprocess.run(["make", "-s", "-C", str(tmp_path), str(out)], capture_output=True).returncode == 0
    assert out.exists()
    # make -q: up to date now; out of date after the dependency changes; a deleted dependency breaks nothing.
    assert subprocess.run(["make", "-q", "-C", str(tmp_path), str(out)]).returncode == 0
    import os
    import time
    later = time.time() + 10
    os.utime(dep, (later, later))
    assert subprocess.run(["make", "-q", "-C", str(tmp_path), str(out)]).returncode == 1
    dep.unlink()
    assert subprocess.run(["make", "-s", "-C", str(tmp_path), str(out)], capture_output=True).returncode == 0
