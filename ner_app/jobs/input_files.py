"""The files ``predict`` tags when ``--input`` is a folder or a glob pattern, and ``--shard I/N``'s share of them.

A folder is walked recursively in sorted order; hidden files and folders (a name starting with ``.``) are
skipped, and so are symlinked folders (never followed: no loop) and anything that is not a regular file (a FIFO
would block the read). A glob pattern (``*``, ``?``, ``[``, and ``**`` for any depth) is expanded here, not by the
shell, so it is quoted on the command line; its matches are sorted. Each file has a relative path: under the
folder, or under the pattern's fixed leading folders (``data/**/*.txt``: under ``data``). That path names its
output and decides its shard, so it is the same on every machine whatever the folder is called there.

A shard is chosen by a stable hash of the relative path (the first 8 bytes of its UTF-8 sha256, modulo N): a
file's shard never depends on the other files, so adding a file moves no other file to another shard.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ner_app.errors import MissingFileError, NerAppError
from ner_app.limits import MAX_PREDICT_FILES

_SHARD = re.compile(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*")


@dataclass(frozen=True)
class Shard:
    """The ``index``-th (from 1) of ``count`` shares of the files."""

    index: int
    count: int

    def holds(self, relative: str) -> bool:
        """Whether the file of this relative path (posix) is in this share."""
        digest = hashlib.sha256(relative.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``I/N`` with 1 <= I <= N (argparse type: a ValueError's message is its one line)."""
    found = _SHARD.fullmatch(text)
    index, count = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
    if not found or not 1 <= index <= count:
        raise ValueError(f"expected I/N with 1 <= I <= N (the I-th of N shares of the files), found {text!r}")
    return Shard(index, count)


@dataclass(frozen=True)
class InputFile:
    """A file to tag: where it is read, and its path relative to the folder or pattern (posix, ``/``)."""

    path: Path
    relative: str


def is_many(source: str) -> bool:
    """Whether ``--input`` names many files: an existing folder, or a glob pattern that is no existing path."""
    if source == "-":
        return False
    path = Path(source)
    return path.is_dir() or (not path.exists() and glob.has_magic(source))


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)  # a symlink to a regular file is read where it points
    except OSError:
        return False  # a dangling symlink: nothing to read


def _checked(found: list[InputFile], source: str) -> list[InputFile]:
    for item in found:
        try:
            item.relative.encode("utf-8")
        except UnicodeEncodeError:
            raise NerAppError(
                f"--input {source}: {item.path!r}: the file name is not UTF-8; rename it (the name is "
                "written into the output)"
            ) from None
    return sorted(found, key=lambda f: f.relative)


def _too_many(source: str) -> NerAppError:
    return NerAppError(
        f"--input {source}: more than {MAX_PREDICT_FILES:,} files; tag it in parts (a narrower pattern, "
        "or one subfolder at a time)"
    )


def _walk(folder: Path, source: str) -> list[InputFile]:
    found: list[InputFile] = []
    for root, dirs, files in os.walk(folder, onerror=None):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # os.walk never follows symlinked ones
        here = Path(root)
        for name in sorted(files):
            path = here / name
            if name.startswith(".") or not _regular(path):
                continue
            found.append(InputFile(path, path.relative_to(folder).as_posix()))
            if len(found) > MAX_PREDICT_FILES:
                raise _too_many(source)
    return found


def _base(pattern: str) -> Path:
    """The pattern's leading folders without a wildcard: what the relative paths are relative to."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _expand(pattern: str, leave_out: Path | None) -> list[InputFile]:
    base = _base(pattern)
    found: list[InputFile] = []
    for name in glob.iglob(pattern, recursive=True):
        path = Path(name)
        relative = Path(os.path.relpath(path, base)).as_posix()
        if _hidden(relative) or not _regular(path):
            continue
        if leave_out is not None and (path.resolve() == leave_out or leave_out in path.resolve().parents):
            continue  # predict's own output: a pattern never picks it up on a second run
        found.append(InputFile(path, relative))
        if len(found) > MAX_PREDICT_FILES:
            raise _too_many(source=pattern)
    return found


def list_inputs(source: str, leave_out: Path | None = None) -> list[InputFile]:
    """The files of the folder or glob ``source``, sorted by relative path; at least one (else one line).
    ``leave_out`` (a resolved output path): a pattern's matches there, or under it, are not inputs."""
    path = Path(source)
    if path.is_dir():
        found = _checked(_walk(path, source), source)
        if not found:
            raise NerAppError(f"--input {source}: holds no files to tag (hidden ones are skipped)")
        return found
    found = _checked(_expand(source, leave_out), source)
    if not found:
        raise MissingFileError(f"--input {source}: no file matches this pattern (hidden files are skipped)")
    return found
