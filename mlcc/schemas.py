"""The JSON Schemas of the bundle's public files (schemas/ in a checkout, mlcc/_schemas when installed)."""

from __future__ import annotations

import functools
import importlib.resources
import json
from pathlib import Path
from typing import Any

from mlcc.errors import InternalError


def schema_dir() -> Path:
    checkout = Path(__file__).resolve().parent.parent / "schemas"
    if checkout.is_dir():
        return checkout
    return Path(str(importlib.resources.files("mlcc") / "_schemas"))


@functools.lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    return json.loads((schema_dir() / f"{name}.schema.json").read_text())


def validate(name: str, document: dict[str, Any]) -> None:
    """Raise InternalError if document does not follow schemas/<name>.schema.json: we never write an invalid one."""
    import jsonschema
    try:
        jsonschema.validate(document, load_schema(name))
    except jsonschema.ValidationError as e:
        path = "/".join(str(p) for p in e.absolute_path)
        raise InternalError(f"{name}.json does not follow its schema at '{path}': {e.message}") from None
