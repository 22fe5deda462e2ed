"""The arena of a bundle whose sizes grow with a symbol that has no upper end (schema 4).

A ranged bundle's arena is one allocation, made at load time for the top of every range. Where a symbol has
no top, the arena's size and its buffers' offsets are expressions (mlcc/hlo/symbolic_arena.py): each run
evaluates them for its symbols' values, checks the run against the bundle's limits, and allocates only when
the arena it holds is smaller than the run needs (so a run no longer than the longest so far allocates
nothing). The checks come first, from the inputs' shapes alone, so a run that cannot be done is one error
naming the symbols before any device memory is touched.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from mlcc.bundle.errors import BundleError
from mlcc.bundle.manifest import Manifest, MemoryPlan
from mlcc.bundle.sizes import SizeError, eval_size, size_symbols

# More than any device addresses (the compiler refuses a value this large at its planned size, too).
MAX_ARENA_BYTES = 2**48


def is_growing(plan: MemoryPlan) -> bool:
    """Whether the arena's size depends on the run (some size in it is an expression)."""
    return isinstance(plan.arena_bytes, str) or any(isinstance(b.offset, str) or isinstance(b.bytes, str)
                                                    for b in plan.buffers)


def _show(env: Mapping[str, int], names: list[str]) -> str:
    return ", ".join(f"{n}={env[n]}" for n in names if n in env)


class GrowingArena:
    """One allocation, reused while it is big enough, replaced by a bigger one when a run needs more."""

    def __init__(self, manifest: Manifest, max_bytes: int | None = None) -> None:
        self.plan = manifest.memory_plan
        self.limits = manifest.index_limits
        self.max_bytes = MAX_ARENA_BYTES if max_bytes is None else max_bytes
        self.storage: Any = None
        self.capacity = 0

    def _size(self, expr: Any, env: Mapping[str, int], what: str) -> int:
        try:
            return eval_size(expr, env)
        except SizeError as e:
            raise BundleError(f"{what}: {e}") from None

    def check(self, env: Mapping[str, int]) -> int:
        """The bytes the run at ``env`` needs; BundleError naming the symbols when an element count passes what
        the kernels index or the arena passes ``max_bytes``."""
        most = self.limits.get("max")
        for count in self.limits.get("counts", []) if most is not None else []:
            n = self._size(count, env, "index limit")
            if n > most:
                names = size_symbols(count)
                raise BundleError(f"{_show(env, names)}: a value of {count} = {n} elements is more than the {most} "
                                  f"this bundle's kernels index (32-bit index arithmetic); run it at smaller "
                                  f"{', '.join(names)}, or compile with --shape for these sizes")
        need = self._size(self.plan.arena_bytes, env, "arena size")
        if need > self.max_bytes:
            names = size_symbols(self.plan.arena_bytes)
            raise BundleError(f"{_show(env, names)}: the arena would need {need} bytes, more than the limit of "
                              f"{self.max_bytes}; run it at smaller {', '.join(names)}")
        return need

    def views(self, env: Mapping[str, int], alloc: Callable[[int], Any],
              view: Callable[[Any, int, int, str], Any]) -> dict[str, Any]:
        """Each arena buffer's view for the run at ``env`` (check(env) first): allocates only when the arena
        held is smaller than the run needs."""
        need = self.check(env)
        if self.storage is None or need > self.capacity:
            self.storage = None  # the old one goes before the new one is made
            try:
                self.storage = alloc(need)
            except (RuntimeError, MemoryError) as e:
                names = size_symbols(self.plan.arena_bytes)
                raise BundleError(f"{_show(env, names)}: cannot allocate the arena's {need} bytes "
                                  f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'out of memory'})") from None
            self.capacity = need
        out = {}
        for b in self.plan.buffers:
            offset = self._size(b.offset, env, f"buffer '{b.name}' offset")
            nbytes = self._size(b.bytes, env, f"buffer '{b.name}' bytes")
            out[b.name] = view(self.storage, offset, nbytes, b.spec.numpy_dtype)
        return out
