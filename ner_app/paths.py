"""What kind of path a command was given: where an output goes, and whether an input is a special file.

An output that is not a regular file is written through, as every Unix tool does, and never renamed over:
``-`` (and ``/dev/stdout``, ``/dev/fd/1``) is standard output, a character device (``/dev/null``, a terminal)
or a FIFO with a reader gets the finished bytes; a FIFO without a reader, a block device, a socket and any
other path under ``/dev`` or ``/proc`` are refused in one line. A symlink to a regular file is written where it
points, and the link is kept (``files.atomic_path`` does the writing).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ner_app.errors import NerAppError

STDOUT = "-"  # as an output path: standard output
_STDOUT_NAMES = {STDOUT, "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"}
_STDERR_NAMES = {"/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"}


class OutputPathError(NerAppError):
    """An output path that cannot be written: a folder, a block device, a FIFO nobody reads, ..."""


def _system_path(path: Path) -> bool:
    """Under /dev, /proc or /sys (where a rename could replace a device node), except /dev/shm (a tmpfs)."""
    if path == Path("/dev/shm") or Path("/dev/shm") in path.parents:
        return False
    return any(path == root or root in path.parents for root in (Path("/dev"), Path("/proc"), Path("/sys")))


def output_target(path: str | Path) -> tuple[str, Path]:
    """How ``path`` is written: ("stdout" | "stderr", path), ("through", path) for a character device or a FIFO
    (its bytes are written into it), or ("file", where) for a regular file or a new name (``where``: the file a
    symlink points at). Anything else is one ``OutputPathError`` naming ``path``."""
    name = os.fspath(path)
    if name in _STDOUT_NAMES:
        return "stdout", Path(name)
    if name in _STDERR_NAMES:
        return "stderr", Path(name)
    path = Path(name)
    try:
        found = os.stat(path)  # follows symlinks: what a write would reach
    except FileNotFoundError:
        found = None
    except OSError as err:
        raise OutputPathError(f"{path}: cannot be used as an output ({err.strerror})") from None
    for fd, stream in ((1, "stdout"), (2, "stderr")):  # a name of this process's own output (a link to it)
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if found is not None and (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino):
            return stream, path
    mode = None if found is None else found.st_mode
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputPathError(f"{path}: is a folder, expected a file name")
    if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        return "through", path
    if mode is not None and not stat.S_ISREG(mode):
        kind = {stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}.get(
            stat.S_IFMT(mode), "a special file"
        )
        raise OutputPathError(f"{path}: is {kind}; expected a regular file, a character device, a FIFO or -")
    where = Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.is_symlink() and not where.is_file():
        raise OutputPathError(f"{path}: is a symlink to {where}, which is not a file; name a file")
    if _system_path(where.absolute()) or _system_path(path.absolute()):
        raise OutputPathError(
            f"{path}: is not a device or FIFO, and no file is written under /dev, /proc or /sys; name another file"
        )
    return "file", where


def is_special(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists and is not a regular file (a FIFO, device or socket): opening a FIFO blocks until
    a writer comes and /dev/zero never ends, so a reader asks this before it opens a file it was given."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False  # missing: the open that follows names it


def check_output(path: str | Path, option: str = "") -> None:
    """Refuse, before any work, an output path ``atomic_path`` could not write (``option`` names the argument).
    A FIFO is not opened here (a reader would see its end at once): one without a reader is refused when the
    output is written."""
    try:
        kind, where = output_target(path)
    except OutputPathError as err:
        raise OutputPathError(f"{option} {err}".strip()) from None
    if kind == "file" and where.exists() and not os.access(where, os.W_OK):
        raise OutputPathError(f"{option} {path}: not writable".strip())
