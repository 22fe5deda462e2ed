"""A compile's progress on a terminal: one status line on stderr, rewritten in place.

The compiler reports stages through its progress callback, ``(stage, done, total)``: ``import``, ``passes``
(and ``pass:NAME`` as each pass starts), ``lowering``, ``kernels`` (binaries built, k of n), ``weights``
(bytes written of the total). Nothing is shown for a compile that ends within ``delay``
seconds; past it, a background thread redraws the line a few times a second (so a long import or pass shows
its elapsed time too), and the line is erased when the compile ends. The command line decides whether to
show it at all (a terminal, not ``-q``, not ``--json``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TextIO

STAGE_WORDS = {"import": "importing", "passes": "running passes", "lowering": "lowering kernels",
               "kernels": "building kernels", "numerics": "checking numerics", "weights": "writing weights"}


class ProgressLine:
    """The progress callback for one compile; a context manager that starts and stops its redraw thread."""

    def __init__(self, stream: TextIO, delay: float = 5.0, interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self.stage = "import"
        self.done = 0
        self.total = 0
        self.pass_name = ""
        self.passes_run = 0
        self.weights_start: float | None = None
        self.shown = 0  # length of the line on the terminal (0: nothing shown)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        with self._lock:
            if stage.startswith("pass:"):
                self.pass_name = stage[len("pass:"):]
                self.passes_run = done
                stage, done, total = "passes", 0, 0
            if stage == "weights" and self.weights_start is None:
                self.weights_start = self.clock()
            self.stage, self.done, self.total = stage, done, total
            self._draw()  # a new stage shows at once (past the delay), not at the next tick

    def text(self) -> str:
        """The status line for the current state."""
        elapsed = self.clock() - self.start
        word = STAGE_WORDS.get(self.stage, self.stage)
        if self.stage == "passes" and self.pass_name:
            what = f"{word}: {self.pass_name} ({self.passes_run} run)"
        elif self.stage == "weights" and self.total:
            mb, total_mb = self.done / 1e6, self.total / 1e6
            seconds = self.clock() - (self.weights_start or self.start)
            rate = f", {mb / seconds:.1f} MB/s" if seconds > 0 else ""
            what = f"{word}: {mb:.1f} / {total_mb:.1f} MB{rate}"
        elif self.total > 1:
            what = f"{word}: {self.done}/{self.total}"
        else:
            what = word
        return f"mlcc: {what} [{elapsed:.0f} s]"

    def draw(self) -> None:
        """Redraw the line if the compile has run past the delay."""
        with self._lock:
            self._draw()

    def _draw(self) -> None:
        if self.clock() - self.start < self.delay:
            return
        line = self.text()
        pad = " " * max(0, self.shown - len(line))
        self.stream.write("\r" + line + pad)
        self.stream.flush()
        self.shown = len(line)

    def clear(self) -> None:
        with self._lock:
            if self.shown:
                self.stream.write("\r" + " " * self.shown + "\r")
                self.stream.flush()
                self.shown = 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.draw()

    def __enter__(self) -> "ProgressLine":
        self._thread = threading.Thread(target=self._run, name="mlcc-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.clear()
