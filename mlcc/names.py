"""The one place model-controlled strings become identifiers (RELIABILITY.md item 24)."""

from __future__ import annotations

import builtins
import keyword
import re

_BAD = re.compile(r"[^0-9A-Za-z_]+")
_RESERVED = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins)) | {"tl", "triton"}


def sanitize_identifier(name: str, taken: set[str] | None = None, max_len: int = 64) -> str:
    """A safe Python identifier for name: [^0-9A-Za-z_]+ -> _, no leading digit, never a keyword or
    builtin, at most max_len characters, and a counter suffix on collision with ``taken`` (updated)."""
    s = _BAD.sub("_", name or "").strip("_") or "v"
    if s[0].isdigit():
        s = "v_" + s
    s = s[:max_len]
    if s in _RESERVED:
        s = s + "_"
    if taken is not None:
        base, n = s, 1
        while s in taken:
            s = f"{base}_{n}"
            n += 1
        taken.add(s)
    return s
