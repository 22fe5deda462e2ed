"""A compile's progress: a status line on a terminal's stderr once the compile has run a while (5 s; the tests
lower it with the hidden --progress-delay), and nothing when stderr is not a terminal, with -q, or in --json."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys

from mlcc.progress import ProgressLine
from mlcc_test_paths import SHARED_MODELS

MODEL = SHARED_MODELS / "mlp.onnx"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_shows_before_the_delay_then_the_stage_does():
    clock, out = FakeClock(), io.StringIO()
    line = ProgressLine(out, delay=5.0, clock=clock)
    line("import", 0, 1)
    line("pass:dce", 0, 0)
    clock.now += 4.9
    line.draw()
    assert out.getvalue() == ""
    clock.now += 0.2
    line("pass:fusion", 17, 0)
    assert out.getvalue() == "\rmlcc: running passes: fusion (17 run) [5 s]"
    line("kernels", 3, 12)
    longer, shorter = "mlcc: running passes: fusion (17 run) [5 s]", "mlcc: building kernels: 3/12 [5 s]"
    assert out.getvalue() == "\r" + longer + "\r" + shorter + " " * (len(longer) - len(shorter))  # over the last


def test_weights_show_megabytes_and_rate():
    clock, out = FakeClock(), io.StringIO()
    line = ProgressLine(out, delay=0.0, clock=clock)
    line("weights", 0, 300_000_000)
    clock.now += 2.0
    line("weights", 100_000_000, 300_000_000)
    assert out.getvalue().rsplit("\r", 1)[1].startswith("mlcc: writing weights: 100.0 / 300.0 MB, 50.0 MB/s")


def test_the_line_is_erased_at_the_end():
    out = io.StringIO()
    with ProgressLine(out, delay=0.0) as line:
        line("import", 0, 1)
    shown, erased = out.getvalue().rsplit("\r", 2)[:2], out.getvalue().rsplit("\r", 2)[2]
    assert erased == "" and set(shown[1]) == {" "} and len(shown[1]) == len("mlcc: importing [0 s]")


def _env() -> dict[str, str]:
    root = str(MODEL.resolve().parents[3])
    return dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), TERM="dumb")


def _compile_on_a_terminal(tmp_path, *flags: str) -> tuple[int, str]:
    """Run `mlcc compile` with stdout and stderr on a pseudo-terminal; its exit status and everything it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "mlcc.cli", "compile", str(MODEL), "-o", str(tmp_path / "b"),
                             "--target", "none", "--no-cache", *flags], stdin=slave, stdout=slave, stderr=slave,
                            env=_env())
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(), b"".join(chunks).decode()


def test_a_terminal_shows_progress_past_the_delay(tmp_path):
    rc, text = _compile_on_a_terminal(tmp_path, "--progress-delay", "0")
    assert rc == 0, text
    assert "\rmlcc: importing" in text and "\rmlcc: running passes: " in text
    assert "\rmlcc: writing weights: " in text and "MB/s" in text
    assert text.rstrip().endswith("(0 compiled, 0 from cache)")  # the summary, on a line the status left clean


def test_a_terminal_shows_nothing_for_a_short_compile_or_with_q(tmp_path):
    rc, text = _compile_on_a_terminal(tmp_path)  # the default delay: this compile ends long before 5 s
    assert rc == 0 and "\r" not in text.replace("\r\n", "\n")
    rc, text = _compile_on_a_terminal(tmp_path, "--progress-delay", "0", "-q", "--force")
    assert rc == 0 and text == ""


def test_json_on_a_terminal_is_only_the_json(tmp_path):
    rc, text = _compile_on_a_terminal(tmp_path, "--progress-delay", "0", "--json")
    assert rc == 0
    assert json.loads(text)["ok"] is True


def test_no_terminal_no_progress(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(MODEL), "-o", str(tmp_path / "b"),
                        "--target", "none", "--no-cache", "--progress-delay", "0"], capture_output=True, text=True,
                       env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and "\r" not in r.stdout
