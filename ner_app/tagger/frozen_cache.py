"""The frozen GloVe rows of an export, kept in the user's cache folder between loads.

An export refers to its frozen rows (GloVe's vectors of the words outside the training vocabulary) instead of
storing them, and rebuilding them from the GloVe package (a 400k-word index, 381k rows gathered) was most of a
load. Rows rebuilt once are kept in ``$XDG_CACHE_HOME/ner_app/frozen_rows/`` (``~/.cache`` without it) as a
plain ``.npy`` file: float32, little-endian, no pickle. A file's name is the sha256 the export records for its
rows and the installed package's stamp (version, file sizes and times), so another package version or a
reinstall never meets an old file. A file is used only when its rows hash to the sha256 the export records; a
missing, truncated, stale or forged one is rebuilt and replaced, and a cache folder that cannot be written is
no error (the rows are then rebuilt at every load).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from stat import S_ISREG

import numpy as np

from ner_app.errors import NerAppError
from ner_app.files import atomic_path
from ner_app.tagger.glove import rows_sha256

FOLDER = "frozen_rows"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_HEADER = 4096  # an .npy header of a 2-D float32 array is 128 bytes; anything longer is not ours
_ROWS_DTYPE = np.dtype("<f4")


def cache_root() -> Path | None:
    """``$XDG_CACHE_HOME/ner_app`` (``~/.cache/ner_app`` when unset or relative); None without a home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home folder to be found
            return None
    return Path(base) / "ner_app"


def cache_folder() -> Path | None:
    """``$XDG_CACHE_HOME/ner_app/frozen_rows`` (``~/.cache/...`` when unset or relative); None without a home."""
    root = cache_root()
    return None if root is None else root / FOLDER


def cache_path(sha256: object, stamp: str) -> Path | None:
    """Where rows of ``sha256`` from the package of ``stamp`` are kept; None when ``sha256`` is not a sha256
    (a forged ``tagger.json`` must not choose a file name) or there is no cache folder."""
    folder = cache_folder()
    if folder is None or not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        return None
    return folder / f"{sha256}-{stamp[:16]}.npy"


def read_rows(path: Path, shape: tuple[int, int], sha256: str) -> np.ndarray | None:
    """The cached rows (N, D) at ``path`` when the file is a C-ordered little-endian float32 ``.npy`` of
    ``shape`` whose rows hash to ``sha256``; None otherwise (absent, unreadable, truncated, another array).
    Reads at most the header bound and the rows' own bytes."""
    want = shape[0] * shape[1] * _ROWS_DTYPE.itemsize
    try:
        # non-blocking: a FIFO put in the cache's place must not hang the load; then only a regular file
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            stat = os.fstat(f.fileno())
            if not S_ISREG(stat.st_mode) or stat.st_size > want + _MAX_HEADER:
                return None
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                header = np.lib.format.read_array_header_1_0(f, max_header_size=_MAX_HEADER)
            elif version == (2, 0):
                header = np.lib.format.read_array_header_2_0(f, max_header_size=_MAX_HEADER)
            else:
                return None
            found_shape, fortran, dtype = header
            if tuple(found_shape) != shape or fortran or dtype != _ROWS_DTYPE:
                return None
            if os.fstat(f.fileno()).st_size != f.tell() + want:  # truncated, or bytes after the rows
                return None
            rows = np.empty(shape, dtype=_ROWS_DTYPE)
            if f.readinto(rows.data.cast("B")) != want:
                return None
    except (OSError, ValueError, SyntaxError, EOFError):  # a header numpy cannot parse is a miss
        return None
    return rows if rows_sha256(rows) == sha256 else None


def write_rows(path: Path, rows: np.ndarray) -> bool:
    """Keep ``rows`` (N, D) at ``path`` (by atomic rename) and remove the same rows of other package stamps;
    False, and nothing else, when the cache folder cannot be written (read-only, full, not a folder)."""
    array = np.ascontiguousarray(rows, dtype=_ROWS_DTYPE)
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
        return False  # a link or a special file in our place is left alone: never written through
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.lib.format.write_array(f, array, version=(1, 0), allow_pickle=False)
    except (OSError, NerAppError):
        return False
    sha256 = path.name.split("-")[0]
    for stale in path.parent.glob(f"{sha256}-*.npy"):  # files this module wrote for older package stamps
        if stale != path:
            try:
                stale.unlink()
            except OSError:
                pass
    return True


__all__ = ["cache_folder", "cache_root", "cache_path", "read_rows", "write_rows"]
