"""The bundle's public files and their versions: the JSON Schemas (schemas/ in a checkout, mlcc/_schemas
when installed), the schema versions this code writes and reads, and the one JSON encoding."""

from __future__ import annotations

import functools
import importlib.resources
import json
from pathlib import Path
from typing import Any

from mlcc.bundle.errors import InternalError

# manifest.json:
# 1: every binary launches with the schedule's grid (a binary's own "config" is informational);
# 2: some binary was compiled with tiles that need its own grid (kernels[i].binaries[target].config.grid):
#    a reader of version 1 would launch it with the schedule's grid and compute wrong results, so it must refuse.
# 3: the bundle has symbolic sizes ("symbols"): shapes and grids may be expressions and launches pass
#    "scalars"; an older reader would launch with sizes it cannot evaluate, so it must refuse.
# 4: some symbol has no upper end (symbols[name] is [min, null]): the arena's size, buffers' bytes and offsets
#    may be expressions, evaluated per run, and "index_limits" bounds the sizes a run may take; an older reader
#    would allocate a number it cannot read, so it must refuse.
# 5: some input or output is "packed" (4- and 2-bit values, several a byte): an older reader would give
#    its buffer one byte a value and read or write the wrong bytes, so it must refuse.
# A bundle carries the highest version any of its features needs; a reader of N reads every version up to N.
SCHEMA_VERSION = 1
OWN_GRID_SCHEMA_VERSION = 2
# 4: some symbol is a run-time count (launches' "counts": NonZero, Unique, NMS, TopK with a run-time k) that the
#    runtime reads back from a buffer after the launch that writes it; an older reader would never bind it.
SYMBOLIC_SCHEMA_VERSION = 3
UNBOUNDED_SCHEMA_VERSION = 4
PACKED_IO_SCHEMA_VERSION = 5
# 6: some symbol is a run-time count (launches' "counts": NonZero, Unique, NMS, TopK with a run-time k) that the
#    runtime reads back from a buffer after the launch that writes it; an older reader would never bind it.
COUNT_SCHEMA_VERSION = 6
# 7: some input or output is "complex" (its buffer holds real pairs, last dim 2): an older reader would take
#    and give the pairs as a real array of another shape than the user's.
COMPLEX_IO_SCHEMA_VERSION = 7
SUPPORTED_SCHEMAS = (SCHEMA_VERSION, OWN_GRID_SCHEMA_VERSION, SYMBOLIC_SCHEMA_VERSION,
                     UNBOUNDED_SCHEMA_VERSION, PACKED_IO_SCHEMA_VERSION, COUNT_SCHEMA_VERSION,
                     COMPLEX_IO_SCHEMA_VERSION)  # what the runtime reads
INTENT_SCHEMA_VERSION = 1


def dumps(obj: Any) -> str:
    """The bundle's JSON text: sorted keys, one-space indent, ASCII, no NaN, a final newline (deterministic)."""
    return json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def schema_dir() -> Path:
    checkout = Path(__file__).resolve().parent.parent.parent / "schemas"
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
