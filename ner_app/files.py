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

import dataclasses
import errno
import glob
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
        stale = (
            path.name.endswith(".tmp") or ".old-" in path.name
        ) and path.name != f".{target.name}{MARKER}"
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
def atomic_path(path: str | Path, claim: Claim | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block succeeds it is fsynced and renamed to ``path``.

    With ``claim`` (a command's output: callers check with ``claim_file`` before the work) a file that is there
    is checked again before the rename, and the marker beside it records what was written.

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
        if claim is not None:
            _refuse_foreign_file(path, path, claim)
            digest = sha256_file(Path(tmp))
        os.replace(tmp, path)
        if claim is not None:
            _write_marker(path, False, claim.command, {path.name: digest})
    except OSError as err:
        if err.filename is None:  # a failed write() names no file: name the one the user asked for
            err.filename = str(path)
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | Path, text: str, claim: Claim | None = None) -> Path:
    """``path`` holds ``text`` (UTF-8) or, after an error, what it held before."""
    with atomic_path(path, claim) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | Path, payload: bytes | memoryview, claim: Claim | None = None) -> Path:
    """``path`` holds ``payload`` or, after an error, what it held before."""
    with atomic_path(path, claim) as tmp:
        tmp.write_bytes(payload)
    return Path(path)


class FolderWriteError(NerAppError):
    """A folder that could not be written: it would replace something else, or the disk is full or failing."""


# The output policy (docs/reliability.md#the-output-policy). A command replaces an existing output only when it is
# its own earlier output, unchanged since, or the user said --overwrite. What it wrote is known by a marker: a
# file's is the hidden ``.NAME.ner-app`` beside it, a folder's ``.ner-app`` inside it, each the command's name and
# the sha256 of every file it wrote. A marker works for every format (a CoNLL file has no place for one), and an
# edit by hand, a copy from elsewhere or another command's output never matches it: nothing is guessed from a
# file's first bytes.
MARKER = ".ner-app"
_MARKER_MAX = 16 << 20  # bytes: a brat folder of 100,000 files records each in about 100 bytes


class ForeignOutputError(NerAppError):
    """An output path that holds something the command did not write (or that changed since it wrote it)."""


@dataclass(frozen=True)
class Claim:
    """Who writes an output: ``command`` (its marker names it), whether the user said ``--overwrite``, the
    option that named the path, and ``also``: other commands whose unchanged output this one may replace
    (``report`` redraws the page ``train`` drew)."""

    command: str
    overwrite: bool = False
    option: str = "--output"
    also: tuple[str, ...] = ()

    def label(self, path: str | Path) -> str:
        return f"{self.option} {path}".strip()


def marker_path(target: Path, folder: bool) -> Path:
    """Where the marker of ``target`` is: inside a folder output, beside a file output."""
    return target / MARKER if folder else target.with_name(f".{target.name}{MARKER}")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _names(folder: Path, limit: int | None = None) -> list[str]:
    """Every entry under ``folder`` but its marker and the folders themselves (a symlink is an entry, never
    followed), as sorted relative paths; with ``limit``, the first ``limit`` found (a folder named by mistake,
    a home folder, is not walked whole to be refused)."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        for name in [*files, *(d for d in dirs if (here / d).is_symlink())]:
            relative = (here / name).relative_to(folder).as_posix()
            if relative != MARKER:
                found.append(relative)
            if limit is not None and len(found) >= limit:
                return sorted(found)
    return sorted(found)


def _listing(folder: Path) -> dict[str, str]:
    """``_names`` with each file's sha256 (a symlink or a special file: a value no digest equals, so it is
    never taken for something the command wrote)."""
    regular = {n: folder / n for n in _names(folder)}
    return {
        n: sha256_file(p) if p.is_file() and not p.is_symlink() else "(not a file)"
        for n, p in regular.items()
    }


def _recorded(target: Path, folder: bool, claim: Claim) -> dict[str, str]:
    """The files (relative path -> sha256) that the marker of ``target`` says ``claim``'s command (or one of
    ``also``) wrote; empty without a readable marker of one of them."""
    path = marker_path(target, folder)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MARKER_MAX:
            return {}
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("command") not in (claim.command, *claim.also):
        return {}
    files = data.get("files")
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _write_marker(target: Path, folder: bool, command: str, files: dict[str, str]) -> None:
    record = {"written_by": f"ner_app {command}", "command": command, "files": files}
    with atomic_path(marker_path(target, folder)) as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _own_file(where: Path, claim: Claim) -> bool:
    """Whether the regular file ``where`` may be replaced: empty, --overwrite, or written by the command and
    unchanged since."""
    if claim.overwrite or where.stat().st_size == 0:
        return True
    recorded = _recorded(where, False, claim).get(where.name)
    return recorded is not None and recorded == sha256_file(where)


def _refuse_foreign_file(where: Path, path: str | Path, claim: Claim) -> None:
    if where.exists() and not _own_file(where, claim):
        raise ForeignOutputError(
            f"{claim.label(path)}: exists and is not an earlier output of {claim.command} (or was changed since); "
            "nothing was changed: choose another name, or add --overwrite to replace it"
        )


def claim_file(path: str | Path, claim: Claim) -> None:
    """Before any work: ``path`` is a file output ``claim`` may write (``check_output``) and, when a regular
    file is there, one it may replace (empty, its own unchanged earlier output, or --overwrite)."""
    check_output(path, claim.option)
    kind, where = output_target(path)
    if kind == "file":
        _refuse_foreign_file(where, path, claim)


def claim_folder(target: Path, claim: Claim) -> None:
    """Before any work: ``target`` is a folder output ``claim`` may write: absent, empty, its own unchanged
    earlier output, or (--overwrite) a folder whose files the new output replaces, checked when it is
    written (``atomic_folder``)."""
    if os.fspath(target) == STDOUT:
        raise ForeignOutputError(
            f"{claim.label(STDOUT)}: this output is a folder, and standard output is not one; name a folder"
        )
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ForeignOutputError(
            f"{claim.label(target)}: exists and is not a folder; nothing was changed: choose another output folder"
        )
    if target.is_dir() and not claim.overwrite:
        recorded = _recorded(target, True, claim)
        names = _names(target, None if recorded else 4)
        # names first: a folder without a marker is refused without reading its files
        if names and (names != sorted(recorded) or _listing(target) != recorded):
            found = ", ".join(names[:4])
            raise ForeignOutputError(
                f"{claim.label(target)}: exists and is not an earlier output of {claim.command}, or was changed "
                f"since (it holds {found}); nothing was changed: choose another output folder, or add "
                "--overwrite to replace the files it writes"
            )


def _check_replace(target: Path, tmp: Path, claim: Claim) -> None:
    """At the rename: ``target`` is still the command's to replace, and --overwrite never removes a file the
    new output does not replace."""
    claim_folder(target, claim)
    if claim.overwrite and target.is_dir():
        lost = sorted(set(_names(target)) - set(_names(tmp)) - set(_recorded(target, True, claim)))
        if lost:
            raise ForeignOutputError(
                f"{claim.label(target)}: holds {', '.join(lost[:4])}, which this output would remove; nothing was "
                "changed: choose another output folder, or move those files away"
            )


def write_into_folder(folder: Path, files: list[tuple[str, str]], claim: Claim) -> Path:
    """``files`` (name, text) written into ``folder``. A new folder appears whole (``atomic_folder``). Into an
    existing one only these files are written, each by an atomic rename; a file already there is replaced only
    when it holds the same text, or the command wrote it and it is unchanged since, or with --overwrite.
    Otherwise nothing is written and the first such file is named. Of the other files only the command's own
    earlier ones, unchanged, are removed (``_drop_stale``); nothing else there is touched."""
    claim_folder(folder, dataclasses.replace(claim, overwrite=True))  # a symlink or a file: refused
    if not folder.exists():
        with atomic_folder(folder, claim) as tmp:
            for name, text in files:
                (tmp / name).write_text(text, encoding="utf-8")
        return folder
    recorded = _recorded(folder, True, claim)
    changed = []
    for name, text in files:
        path = folder / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            changed.append(name)
        elif path.exists() and not claim.overwrite and not _holds(path, text.encode("utf-8")):
            if recorded.get(name) != sha256_file(path):
                changed.append(name)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise ForeignOutputError(
            f"{claim.label(folder)}: {changed[0]}{more} differs from what {claim.command} wrote there (changed "
            "since, or not written by it); nothing was changed: choose another output folder, or add "
            "--overwrite to replace those files"
        )
    for name, text in files:
        write_text(folder / name, text)
    written = {n: sha256_file(folder / n) for n, _ in files}
    _write_marker(folder, True, claim.command, _drop_stale(folder, recorded, written) | written)
    return folder


def _holds(path: Path, data: bytes) -> bool:
    """Whether the regular file ``path`` holds exactly ``data`` (read only when the sizes agree)."""
    return path.stat().st_size == len(data) and path.read_bytes() == data


def _drop_stale(folder: Path, recorded: dict[str, str], written: dict[str, str]) -> dict[str, str]:
    """Remove what the command wrote into ``folder`` before and not now, where unchanged since (an earlier
    run's ``doc000002.txt`` and ``.ann``), so the folder holds this run's output. A file changed since stays,
    and so do the files of its name with other suffixes (an annotator's corrected ``.ann`` keeps its text).
    Returns the stale files kept that are still as recorded."""
    stale = {k: v for k, v in recorded.items() if k not in written and (folder / k).is_file()}
    unchanged = {
        k for k, v in stale.items() if not (folder / k).is_symlink() and sha256_file(folder / k) == v
    }
    changed_stems = {Path(k).with_suffix("").as_posix() for k in stale if k not in unchanged}
    for name in sorted(unchanged):
        if Path(name).with_suffix("").as_posix() not in changed_stems:
            (folder / name).unlink()
    return {k: stale[k] for k in unchanged if (folder / k).is_file()}


@contextmanager
def atomic_folder(target: Path, claim: Claim | None = None) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``target``; on success it replaces ``target``, on any error it is
    removed and ``target`` is left as it was. A full disk is one clear error. With ``claim`` (a command's output:
    callers check with ``claim_folder`` before the work) ``target`` is checked again before the rename and the
    folder carries its marker; without one (a run's own folder, a cache) the caller owns ``target``."""
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
            if claim is not None:
                _check_replace(target, tmp, claim)
                _write_marker(tmp, True, claim.command, _listing(tmp))
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
