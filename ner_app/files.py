"""The one way a file appears: written beside its target, fsynced, renamed into place.

Every command writes through ``atomic_path`` or ``atomic_folder``: a reader, a crash or a full disk never leaves
a half-written file under its final name, and on any error the temporary file or folder is removed. An output
that is not a regular file (standard output, a device, a FIFO) is written through, never renamed over
(``output_target`` says which).

What kind of path a command was given: where an output goes, and whether an input is a special file.

An output that is not a regular file is written through, as every Unix tool does, and never renamed over:
``-`` (and ``/dev/stdout``, ``/dev/fd/1``) is standard output, a character device (``/dev/null``, a terminal)
or a FIFO with a reader gets the finished bytes; a FIFO without a reader, a block device, a socket and any
other path under ``/dev`` or ``/proc`` are refused in one line. A symlink to a regular file is written where it
points, and the link is kept (``files.atomic_path`` does the writing).
"""

from __future__ import annotations

import errno
import glob
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

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


CHUNK = 1 << 20  # bytes copied at a time
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _fsync(path: Path) -> None:
    """Flush a finished file to the disk before it is renamed: a crash then never publishes an empty file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


STALE_AFTER_S = 60.0  # a temporary file untouched this long belongs to a writer that is gone


def _sweep_stale(target: Path) -> None:
    """Remove what a killed writer of ``target`` left beside it (``.NAME.*.tmp`` files and folders, an
    export's ``.NAME.old-PID``) once untouched for ``STALE_AFTER_S``: a live writer keeps its file fresh."""
    now = time.time()
    for path in target.parent.glob(f".{glob.escape(target.name)}.*"):
        stale = path.name.endswith(".tmp") or ".old-" in path.name
        try:
            if stale and not path.is_symlink() and now - path.lstat().st_mtime > STALE_AFTER_S:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        except FileNotFoundError:  # another process swept it first
            pass


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def staging_folder(path: str | Path) -> Path:
    """Where ``atomic_path`` builds ``path``: beside it for a file, the temporary folder for anything written
    through (never inside /dev)."""
    kind, where = output_target(path)
    return where.parent if kind == "file" else Path(tempfile.gettempdir())


def _open_through(path: Path) -> BinaryIO:
    """``path`` (a character device or a FIFO) open for writing, without creating or truncating anything;
    a FIFO that no process reads is refused at once (a blocking open would wait forever)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise OutputPathError(
                f"{path}: a FIFO that no process is reading; start its reader first, or name a file"
            ) from None
        raise
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb")


def _copy_into(tmp: Path, target: BinaryIO) -> None:
    with open(tmp, "rb") as source:
        while block := source.read(CHUNK):
            target.write(block)
    target.flush()


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block succeeds it is fsynced and renamed to ``path``.

    On any error (or SIGTERM, raised as an exception) the temporary file goes and ``path`` is untouched.
    ``-``, a character device and a FIFO with a reader are written through once the block succeeds (the
    temporary file is then in the system's temporary folder); see ``output_target``.
    """
    kind, where = output_target(path)
    if kind != "file":
        fd, tmp = tempfile.mkstemp(prefix=".ner_app-output.", suffix=".tmp")
        os.close(fd)
        try:
            yield Path(tmp)
            if kind == "through":
                with _open_through(where) as target:
                    _copy_into(Path(tmp), target)
            else:
                stream = sys.stdout if kind == "stdout" else sys.stderr
                stream.flush()  # what was printed before comes first
                binary = getattr(stream, "buffer", None)  # a text stream without one: the descriptor itself
                if binary is not None:
                    _copy_into(Path(tmp), binary)
                else:
                    with open(os.dup(1 if kind == "stdout" else 2), "wb") as raw:
                        _copy_into(Path(tmp), raw)
        except OSError as err:
            if err.filename is None or err.filename == tmp:
                err.filename = os.fspath(path)
            raise
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return
    path = where
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes the file private; give it a normal file's permissions
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(Path(tmp))
        if output_target(path)[0] != "file":  # became a FIFO or device meanwhile: never rename over it
            raise OutputPathError(
                f"{path}: turned into a special file while it was being written; not replaced"
            )
        os.replace(tmp, path)
    except OSError as err:
        if err.filename is None:  # a failed write() names no file: name the one the user asked for
            err.filename = str(path)
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | Path, text: str) -> Path:
    """``path`` holds ``text`` (UTF-8) or, after an error, what it held before."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | Path, payload: bytes | memoryview) -> Path:
    """``path`` holds ``payload`` or, after an error, what it held before."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(payload)
    return Path(path)


class FolderWriteError(NerAppError):
    """A folder that could not be written: it would replace something else, or the disk is full or failing."""


def refuse_foreign(target: Path, ours: Callable[[Path], bool], what: str) -> None:
    """A command never replaces what it did not write: ``target`` may be absent, an empty folder, or a
    folder that ``ours`` recognises as ``what`` (an earlier output of the same command)."""
    if os.fspath(target) == STDOUT:
        raise FolderWriteError(
            f"{STDOUT}: this output is a folder, and standard output is not one; name a folder"
        )
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise FolderWriteError(f"{target}: exists and is not a folder; choose another output folder")
    if target.is_dir() and any(target.iterdir()) and not ours(target):
        found = ", ".join(sorted(p.name for p in target.iterdir())[:4])
        raise FolderWriteError(
            f"{target}: exists and is not {what} (it holds {found}); nothing was changed: choose another output "
            "folder, or remove that one yourself"
        )


def refuse_foreign_file(target: Path, ours: Callable[[bytes], bool], what: str) -> None:
    """A command never overwrites a file it did not write: ``target`` may be absent or a file whose first
    bytes ``ours`` recognises as ``what``."""
    kind, where = output_target(target)  # a folder, a block device, ... is refused here
    if kind == "file" and where.exists():
        target = where
        with open(target, "rb") as f:  # a regular file: a FIFO or a device is written through, never read
            start = f.read(64)
        if not ours(start):
            raise FolderWriteError(
                f"{target}: exists and is not {what}; nothing was changed: choose another name"
            )


@contextmanager
def atomic_folder(target: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``target``; on success it replaces ``target``, on any error it is
    removed and ``target`` is left as it was. A full disk is one clear error. Callers check with
    ``refuse_foreign`` first that ``target`` is theirs to replace."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(target)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        try:
            yield tmp
            umask = _umask()
            for file in tmp.rglob("*"):
                if file.is_file() and not file.is_symlink():
                    # some writers (safetensors, mkstemp) make files private; give them a normal file's mode
                    os.chmod(file, 0o666 & ~umask)
                    _fsync(file)
                elif file.is_dir() and not file.is_symlink():
                    os.chmod(file, 0o777 & ~umask)
            os.chmod(tmp, 0o777 & ~umask)
            old = None
            if target.exists():
                old = target.with_name(f".{target.name}.old-{os.getpid()}")
                os.replace(target, old)
            os.replace(tmp, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except OSError as err:
            if err.errno in _DISK_ERRORS:
                raise FolderWriteError(
                    f"{target}: cannot write ({err.strerror}); nothing was written, the previous content is kept"
                ) from None
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_free_space(path: str | Path, needed: int) -> None:
    """Refuse before writing ``path`` when its disk has less than ``needed`` bytes free: a write that fails
    inside HDF5 floods stderr and can crash the process on the way out, so hdf5 writers ask first."""
    folder = staging_folder(path)
    folder.mkdir(parents=True, exist_ok=True)
    stat = os.statvfs(folder)
    free = stat.f_bavail * stat.f_frsize
    if free < needed:
        raise OSError(
            errno.ENOSPC,
            f"needs about {needed / 1e6:,.1f} MB, {free / 1e6:,.1f} MB free on its disk",
            str(path),
        )
