"""Where the tests' data lives (a module of its own: several conftest.py files exist, so none is imported by name)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The shared zoo's models, copied into the repo so the suite needs nothing beside the clone
# (MLCC_SHARED_MODELS points elsewhere, e.g. at ../shared/models, to test a fresh export).
SHARED_MODELS = Path(os.environ.get("MLCC_SHARED_MODELS", ROOT / "tests" / "data" / "models"))
EXAMPLES = ROOT / "examples" / "models"
