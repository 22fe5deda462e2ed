"""The lowering registry (mlcc/emit/codegen/lower_module.py) fails loudly: a lowering module that is missing
or registers nothing is an ImportError when the registry loads, never a fusion kind silently gone."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from mlcc.emit.codegen import lower_module
from mlcc.emit.codegen.kernel import LOWERINGS

ROOT = Path(__file__).resolve().parents[2]


def test_fusion_kinds_are_the_registered_lowerings():
    assert lower_module.fusion_kinds() == {"loop", "input", "output", "attention", "b2b"}
    assert lower_module.fusion_kinds() == {k.removeprefix("fusion:") for k in LOWERINGS if k.startswith("fusion:")}


def test_every_lowering_module_registers_lowerings():
    registering = {fn.__module__ for fn in LOWERINGS.values()}
    assert {m.__name__ for m in lower_module.LOWERING_MODULES} == registering


def test_a_module_registering_nothing_is_an_import_error():
    idle = types.ModuleType("mlcc.emit.codegen.loops")  # a misnamed module: it registers nothing
    with pytest.raises(ImportError, match=r"lowering modules register no lowering: mlcc\.emit\.codegen\.loops"):
        lower_module.check_lowering_modules([*lower_module.LOWERING_MODULES, idle])


def test_a_missing_lowering_module_fails_the_registry_import():
    """With one lowering module unimportable, importing the registry (as compiler.py does) raises."""
    code = ("import sys\n"
            "sys.modules['mlcc.emit.codegen.pooling'] = None  # import of it raises ImportError\n"
            "import mlcc.emit.codegen.lower_module\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert done.returncode != 0
    assert "Error: import of mlcc.emit.codegen.pooling halted" in done.stderr  # ModuleNotFoundError
