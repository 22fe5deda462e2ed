"""SHA-256 of files, read a megabyte at a time (weights files may be larger than memory), and the
bundle's own digest (manifest.json's ``bundle_sha256``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

MANIFEST_FILE = "manifest.json"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bundle_digest(out: Path) -> str:
    """sha256 over every file but manifest.json: relative path and content, in sorted order."""
    h = hashlib.sha256()
    for p in sorted(Path(out).rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_file() and rel != MANIFEST_FILE:
            h.update(rel.encode() + b"\0" + bytes.fromhex(file_sha256(p)))
    return h.hexdigest()
