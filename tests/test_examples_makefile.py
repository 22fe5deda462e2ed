"""examples/Makefile is the file that shows Makefile integration: it must build every example from a fresh
clone (a model's extra flags live beside it in models/NAME.flags), be up to date right after, and rebuild only
the bundle whose model was touched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(["make", "-C", str(cwd), f"MLCC={sys.executable} -m mlcc.cli", *args],
                          capture_output=True, text=True, env=env)


def manifest_times(examples: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (examples / "build").glob("*/manifest.json")}


def test_examples_makefile_builds_is_up_to_date_and_rebuilds_only_what_changed(tmp_path):
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("build"))
    models = sorted(p.stem for p in (examples / "models").glob("*.onnx"))
    assert any((examples / "models" / f"{m}.flags").exists() for m in models)  # a model that needs its flags

    built = make(examples)
    assert built.returncode == 0, built.stderr
    assert sorted(manifest_times(examples)) == models
    assert make(examples, "-q").returncode == 0

    before = manifest_times(examples)
    # The model edited a millisecond after the newest manifest (well before the rebuild writes its own): no sleep,
    # no dependence on how fast the clock moves past the last build.
    newer = max(before.values()) + 1_000_000
    os.utime(examples / "models" / "mlp.onnx", ns=(newer, newer))
    assert make(examples, "-q").returncode == 1
    rebuilt = make(examples)
    assert rebuilt.returncode == 0, rebuilt.stderr
    after = manifest_times(examples)
    assert [m for m in models if after[m] != before[m]] == ["mlp"]
    assert make(examples, "-q").returncode == 0
