"""Typed results of the analyses the pipeline runs, kept on the module (``Module.analyses``) for the manifest,
the memory intent and the CLI. They are facts about one compile, not part of the IR's text form."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class UnfusedBaseline:
    """The graph as its source ran it, one kernel per source op (mlcc.hlo.passes.unfused.unfused_stats)."""

    launches: int
    bytes: int

    def to_json(self) -> dict[str, int]:
        return {"launches": self.launches, "bytes": self.bytes}


@dataclass
class KvCache:
    """A decoder cache the KV-cache analysis found: an entry parameter a step extends and returns."""

    input: str                    # the input's name
    output_index: int             # the entry output that returns the extended cache
    token_range: list[int | str]  # [start, stop) of the step's tokens along axis (sizes: ints or expressions)
    axis: int
    present_tokens: list[int | str]  # [0, tokens) of the returned cache


@dataclass
class Analyses:
    """Facts analyses and passes record about a module for the manifest and the CLI; not in the text form."""

    unfused: UnfusedBaseline | None = None       # recorded right after import, before any pass
    fusion_explanations: list[str] = field(default_factory=list)  # why each candidate group did not fuse
    unrecognized: list[str] = field(default_factory=list)  # composite forms a recognizer left alone, and why
    kv_cache: dict[str, KvCache] = field(default_factory=dict)      # by the cache's entry parameter name
