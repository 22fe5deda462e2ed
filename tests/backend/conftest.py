"""Whether this session builds ONNX's full node suite (slow to even collect: it generates ~1,900 cases).

The full suite (test_backend_suite.py's OnnxBackendNodeModelTest) exists only when slow tests are
selected (``-m slow``, ``-m ''`` or any marker expression that admits them), or when
MLCC_NODE_SUITE=full is set; the default ``-m 'not slow ...'`` never pays for generating it.
"""

from __future__ import annotations

import os
import re


def _admits_slow(markexpr: str) -> bool:
    """Whether a -m expression selects tests marked slow (and nothing else)."""
    if not markexpr.strip():
        return True
    python = re.sub(r"\b(?!and\b|or\b|not\b)([A-Za-z_][A-Za-z0-9_]*)\b",
                    lambda m: "True" if m.group(1) == "slow" else "False", markexpr)
    try:
        return bool(eval(python, {"__builtins__": {}}))  # noqa: S307 - only and/or/not/True/False/parentheses
    except SyntaxError:
        return False


def pytest_configure(config) -> None:
    if "MLCC_NODE_SUITE" not in os.environ:
        os.environ["MLCC_NODE_SUITE"] = "full" if _admits_slow(config.getoption("markexpr") or "") else "subset"
