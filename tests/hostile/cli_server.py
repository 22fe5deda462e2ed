"""Run ``mlcc`` command lines in fresh child processes, fast: a fork server.

Starting ``python -m mlcc.cli`` costs about a second of imports; the hostile corpus has dozens of cases. This
server imports mlcc (and onnx, numpy, triton) once, then for every request forks a child that runs the CLI
module exactly as ``python -m mlcc.cli ARGS`` would (``runpy.run_module("mlcc.cli", run_name="__main__")``),
inside the limits the request gives:

- its own working directory, stdout and stderr (files);
- ``RLIMIT_AS`` (address space) and a wall-clock limit (``SIGALRM``, whose default action kills it);
- an audit hook that logs every path the process opens (``open`` audit events: ``open()``, ``os.open``,
  ``io.open``...) to a file, so a test can prove that nothing outside the model's folder was opened.

Protocol: one JSON request per line on stdin, ``{"argv", "cwd", "stdout", "stderr", "audit_log",
"timeout", "rlimit_as"}``; one JSON answer per line on stdout, ``{"rc", "signal", "seconds"}``. ``rc`` is
the exit status, or -N when signal N ended the child.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time


def _preload() -> None:
    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import triton  # noqa: F401

    import mlcc  # noqa: F401
    import mlcc.cli  # noqa: F401
    import mlcc.compiler  # noqa: F401
    import mlcc.emit.codegen.lower_module  # noqa: F401
    import mlcc.emit.target.build  # noqa: F401
    import mlcc.frontend.onnx  # noqa: F401
    import mlcc.hlo.passes.pipelines  # noqa: F401


def _child(req: dict) -> None:
    """In the forked child: set up the limits and the streams, run the CLI, exit with its status."""
    code = 70
    try:
        os.chdir(req["cwd"])
        limit = int(req["rlimit_as"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, int(req["timeout"])))
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        log = open(req["audit_log"], "w", buffering=1, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115

        def hook(event: str, args: tuple) -> None:
            if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
                log.write(json.dumps({"path": os.fsdecode(args[0]), "cwd": os.getcwd()}) + "\n")

        sys.addaudithook(hook)
        sys.argv = ["mlcc", *req["argv"]]
        import runpy
        sys.modules.pop("mlcc.cli", None)  # preloaded for its imports; runpy runs it afresh as __main__
        try:
            runpy.run_module("mlcc.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - what the interpreter would do: print the traceback, exit 1
            import traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(req)
        _, status = os.waitpid(pid, 0)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        rc = -sig if sig else os.WEXITSTATUS(status)
        print(json.dumps({"rc": rc, "signal": sig, "seconds": time.monotonic() - start}), flush=True)


if __name__ == "__main__":
    serve()
