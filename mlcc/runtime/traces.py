"""Trace files: what calls a serving process makes, in order, to one or more bundles sharing a device.

A trace is YAML or JSON (schemas/trace.schema.json describes it)::

    version: 1
    models: [encoder, decoder]     # names for the BUNDLE arguments, in order
    budget: 50%                    # optional: the device budget (bytes, or % of the footprint); --hbm-budget wins
    events:
      - call: encoder              # one call of a bundle
      - call: decoder
        request: r1                # a bundle with a KV cache: the request whose cache the call extends
        tokens: 1                  # tokens the call adds to the request's cache (default 1)
        repeat: 8                  # the same call 8 times in a row (default 1)
      - call: decoder
        request: r1
        last: true                 # the request's last call: its cache is freed after
      - budget: 30%                # from the next call on, the budget is 30% (another tenant took memory)

A request starts with an empty cache; each call reads the cache it has and leaves it ``tokens`` longer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mlcc.runtime.workload import Workload


class TraceError(ValueError):
    """A trace file that does not follow the format (the message names the file and the event)."""


@dataclass
class TraceCall:
    model: str
    request: Optional[str] = None
    tokens: int = 1
    last: bool = False


@dataclass
class Trace:
    models: list[str]
    budget: Any = None
    events: list[Any] = field(default_factory=list)   # TraceCall, or ("budget", spec)

    def calls(self) -> int:
        return sum(1 for e in self.events if isinstance(e, TraceCall))

    def fill(self, work: Workload) -> Workload:
        """Append every call to ``work`` (budget changes at their calls)."""
        for e in self.events:
            if isinstance(e, TraceCall):
                work.add_call(e.model, e.request, e.tokens, e.last)
            else:
                work.set_budget(e[1])
        return work

    def to_json(self) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        for e in self.events:
            if isinstance(e, TraceCall):
                d: dict[str, Any] = {"call": e.model}
                if e.request is not None:
                    d["request"] = e.request
                if e.tokens != 1:
                    d["tokens"] = e.tokens
                if e.last:
                    d["last"] = True
                if events and {k: v for k, v in events[-1].items() if k != "repeat"} == d:
                    events[-1]["repeat"] = events[-1].get("repeat", 1) + 1
                    continue
                events.append(d)
            else:
                events.append({"budget": e[1]})
        out: dict[str, Any] = {"version": 1, "models": list(self.models)}
        if self.budget is not None:
            out["budget"] = self.budget
        out["events"] = events
        return out


def parse_trace(doc: Any, where: str = "trace") -> Trace:
    def bad(msg: str) -> TraceError:
        return TraceError(f"{where}: {msg}")

    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise bad("not a trace (a mapping with version: 1, models and events)")
    unknown = set(doc) - {"version", "models", "budget", "events"}
    if unknown:
        raise bad(f"unknown key(s) {sorted(unknown)}")
    models = doc.get("models")
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models) \
            or len(set(models)) != len(models):
        raise bad("'models' must list distinct model names")
    events = doc.get("events")
    if not isinstance(events, list) or not events:
        raise bad("'events' must be a non-empty list")
    trace = Trace(list(models), _budget(doc.get("budget"), bad, "budget") if "budget" in doc else None)
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise bad(f"event {i}: not a mapping")
        if "budget" in e:
            if set(e) != {"budget"}:
                raise bad(f"event {i}: a budget event has only 'budget'")
            trace.events.append(("budget", _budget(e["budget"], bad, f"event {i}: budget")))
            continue
        extra = set(e) - {"call", "request", "tokens", "repeat", "last"}
        if extra or "call" not in e:
            raise bad(f"event {i}: expected 'call' (with request, tokens, repeat, last) or 'budget'; got {sorted(e)}")
        if e["call"] not in models:
            raise bad(f"event {i}: model '{e['call']}' is not in 'models' {models}")
        request = e.get("request")
        if request is not None and (not isinstance(request, str) or ":" in request or not request):
            raise bad(f"event {i}: 'request' must be a name without ':'")
        tokens, repeat = e.get("tokens", 1), e.get("repeat", 1)
        for name, v in (("tokens", tokens), ("repeat", repeat)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(f"event {i}: '{name}' must be a positive integer")
        last = e.get("last", False)
        if not isinstance(last, bool):
            raise bad(f"event {i}: 'last' must be true or false")
        for r in range(repeat):
            trace.events.append(TraceCall(e["call"], request, tokens, last and r == repeat - 1))
    return trace


def _budget(v: Any, bad, what: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise bad(f"{what}: bytes, or a percentage such as 50%")
    return v


def load_trace(path: str | Path) -> Trace:
    """Read a YAML or JSON trace; TraceError naming the file if it is not one."""
    import yaml
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as e:
        raise TraceError(f"{p}: cannot read ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise TraceError(f"{p}: not YAML or JSON ({str(e).splitlines()[0]})") from None
    return parse_trace(doc, str(p))
