"""Shared fixtures: where the shared models live, and a per-session kernel cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlcc_test_paths import EXAMPLES, ROOT, SHARED_MODELS  # noqa: F401  (re-exported for fixtures)


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if not SHARED_MODELS.is_dir():
        pytest.skip(f"shared models not found at {SHARED_MODELS}")
    return SHARED_MODELS


@pytest.fixture(autouse=True, scope="session")
def _kernel_cache(tmp_path_factory):
    """Tests never touch the user's ~/.cache; one cache per test session (per xdist worker)."""
    cache = tmp_path_factory.mktemp("mlcc-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
