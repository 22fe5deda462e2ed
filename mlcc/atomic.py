"""Build outputs the way build tools need them: in a temporary directory beside the target,
swapped in only when complete (RELIABILITY.md items 27-28), and depfiles as GCC writes them."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from mlcc.errors import OutputError

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2_exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(str(a)), _AT_FDCWD, os.fsencode(str(b)), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP if hasattr(errno, "ENOTSUP") else errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), str(a))


def is_bundle_dir(path: Path) -> bool:
    return (path / "manifest.json").is_file()


@contextlib.contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside target; on success it replaces target atomically.

    On any failure (or KeyboardInterrupt) the temporary directory is removed and target is untouched.
    A target that exists but is not an mlcc bundle is never replaced.
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if target.exists() and not target.is_dir():
        raise OutputError(f"output path {target} exists and is not a directory", file=str(target))
    if target.is_dir() and any(target.iterdir()) and not is_bundle_dir(target):
        raise OutputError(f"output directory {target} is not empty and holds no mlcc bundle; refusing to replace it",
                          file=str(target))
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _sweep_stale(parent, target.name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=parent))
    except OSError as e:
        raise OutputError(f"cannot create output directory beside {target}: {e.strerror}", file=str(target)) from None
    try:
        yield tmp
        _swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _sweep_stale(parent: Path, name: str) -> None:
    """Remove staging directories left by compiles that were killed (their process is gone)."""
    for p in parent.glob(f".{name}.tmp-*-*"):
        pid = p.name[len(f".{name}.tmp-"):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True)
    for p in parent.glob(f".{name}.old-*"):
        shutil.rmtree(p, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _swap_in(tmp: Path, target: Path) -> None:
    try:
        os.rename(tmp, target)  # target absent, or an empty directory
        return
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise OutputError(f"cannot move the new bundle into {target}: {e.strerror}", file=str(target)) from None
    if _renameat2_exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous bundle
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, old / "b")
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def write_file_atomic(path: Path, data: str | bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def make_escape(path: str) -> str:
    """Escape a path for a Make rule as GCC's -MD does: spaces and '#' with '\\', '$' as '$$'."""
    out = []
    for i, c in enumerate(path):
        if c in " \t":
            j = i - 1
            while j >= 0 and path[j] == "\\":  # backslashes before a space are doubled
                out.append("\\")
                j -= 1
            out.append("\\" + c)
        elif c == "#":
            out.append("\\#")
        elif c == "$":
            out.append("$$")
        elif c == "\n":
            raise OutputError(f"cannot write a dependency on a path with a newline: {path!r}")
        else:
            out.append(c)
    return "".join(out)


def depfile_text(target: str, deps: Sequence[str]) -> str:
    lines = [make_escape(target) + ":" + "".join(f" \\\n  {make_escape(d)}" for d in deps), ""]
    for d in deps:  # a phony target per dependency: deleting an input does not break make
        lines.append(f"{make_escape(d)}:")
        lines.append("")
    return "\n".join(lines)
