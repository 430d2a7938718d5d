"""The files of the frozen-layer cache (``LayerCache``): layout, integrity checks, locked appends.

Layout of ``directory/<fingerprint[:32]>/``:

* ``layers.f16``: fp16 rows (rows, L+1, 2P), one row per position of a sentence INCLUDING <S> and </S>,
  sentences one after the other; only ever appended to, memory-mapped for reading.
* ``index-<generation>.bin``: records (sha256 sentence key, first row, number of rows), in row order.
* ``manifest.json``: fingerprint, shapes, row count, data size, crc32 of the data, sha256 of the index.

Rows are staged elsewhere, then appended under an exclusive lock: the data file is fsynced, a new index
generation written, and the manifest published LAST with ``os.replace``. A crash before that leaves the
previous manifest in force: rows beyond it are ignored and overwritten by the next append. Anything that does
not match the manifest is reported with a warning and the folder is rebuilt empty. Every fill ends with a
publish, one that adds nothing included: a new ``generation`` in a manifest says that a fill has finished
(``published_generations``; ``train --seeds --parallel`` waits for it).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from ner_app.errors import NerAppError
from ner_app.files import write_bytes

log = logging.getLogger("ner_app.train.layer_cache")

FORMAT = "ner_app.layer_cache/1"  # bump when the layout or the biLM's numerics change
_INDEX_DTYPE = np.dtype([("key", "u1", (32,)), ("offset", "<i8"), ("length", "<i8")])
_CHUNK = 1 << 24  # bytes per read while checksumming
_INT_FIELDS = ("rows", "sentences", "generation", "data_bytes", "data_crc32")
_DATA, _MANIFEST, _LOCK, _STAGE = "layers.f16", "manifest.json", ".lock", ".stage-"


class LayerCacheError(NerAppError):
    """A layer cache that cannot be used as asked: another biLM's, a stateful biLM, layers float16 cannot hold."""


class MissingLayers(LayerCacheError, KeyError):
    """A sentence whose layers were never filled in (a ``KeyError`` too: a lookup by key that failed)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class CacheInvalid(Exception):
    """The files on disk are not a complete cache of this fingerprint (the message says why)."""


def _crc32_file(path: Path, nbytes: int) -> int:
    """crc32 of the first ``nbytes`` bytes, in chunks (crc32 because it can be continued by the next fill)."""
    crc = 0
    with open(path, "rb") as f:
        while nbytes > 0:
            chunk = f.read(min(_CHUNK, nbytes))
            if not chunk:
                break
            crc, nbytes = zlib.crc32(chunk, crc), nbytes - len(chunk)
    return crc


class LayerStore:
    """The cache folder of one biLM fingerprint: sentence key -> (first row, rows) over an fp16 row file."""

    def __init__(
        self, directory: str | Path, fingerprint: str, num_layers: int, dim: int, verify: bool = True
    ) -> None:
        if num_layers < 1 or dim < 1 or len(fingerprint) < 32:
            raise LayerCacheError(f"bad cache shape ({num_layers}, {dim}) or fingerprint {fingerprint!r}")
        self.fingerprint, self.num_layers, self.dim = fingerprint, num_layers, dim
        self.root = Path(directory) / fingerprint[:32]
        self.root.mkdir(parents=True, exist_ok=True)
        self._row_bytes = num_layers * dim * 2
        self._reset()
        with self._locked():
            self._open(verify)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def nbytes(self) -> int:
        """Size of the cache's files on disk."""
        return sum(p.stat().st_size for p in self.root.iterdir() if p.is_file())

    def __getstate__(self) -> dict[str, Any]:
        # A pickled mapping would carry the whole data; DataLoader workers map the file again instead.
        return {**self.__dict__, "_data": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._map()

    def has_key(self, key: bytes) -> bool:
        """Whether the rows of this key are cached."""
        return key in self._index

    # --- disk state -------------------------------------------------------------------------------------

    def _reset(self) -> None:
        self._index: dict[bytes, tuple[int, int]] = {}
        self._entries = np.zeros(0, dtype=_INDEX_DTYPE)
        self._rows = self._crc = self._generation = 0
        self._data: torch.Tensor | None = None

    def _map(self) -> None:
        """(rows, L+1, 2P) fp16 view of the data file; copy-on-write mode only so torch gets a writable array."""
        self._data = None
        if self._rows:
            shape = (self._rows, self.num_layers, self.dim)
            self._data = torch.from_numpy(np.memmap(self.root / _DATA, np.float16, "c", shape=shape))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive across processes (flock), so concurrent runs sharing a cache never interleave writes."""
        with open(self.root / _LOCK, "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _open(self, verify: bool) -> None:
        try:
            self._load(verify)
        except CacheInvalid as err:
            log.warning("layer cache %s: %s; rebuilding it empty", self.root, err)
            for path in self.root.iterdir():
                if path.name != _LOCK and not path.name.startswith(_STAGE):
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            self._reset()

    def _load(self, verify: bool) -> None:
        """Read the manifest and index, check them against each other and the data file; raise CacheInvalid."""
        manifest_path, data_path = self.root / _MANIFEST, self.root / _DATA
        if not manifest_path.exists():
            if any(p.name != _LOCK and not p.name.startswith(_STAGE) for p in self.root.iterdir()):
                raise CacheInvalid("files but no manifest (a fill was interrupted before its first publish)")
            self._reset()
            return
        try:
            manifest = json.loads(manifest_path.read_text())
            expected = {
                "format": FORMAT,
                "fingerprint": self.fingerprint,
                "dtype": "float16",
                "num_layers": self.num_layers,
                "dim": self.dim,
            }
            for name, value in expected.items():
                if manifest[name] != value:
                    raise CacheInvalid(f"manifest {name} is {manifest[name]!r}, expected {value!r}")
            rows, count, generation, data_bytes, crc = (int(manifest[k]) for k in _INT_FIELDS)
            index_sha = str(manifest["index_sha256"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CacheInvalid(f"unreadable manifest ({type(err).__name__}: {err})") from None
        if data_bytes != rows * self._row_bytes:
            raise CacheInvalid(f"manifest data_bytes {data_bytes} != {rows} rows * {self._row_bytes}")
        size = data_path.stat().st_size if data_path.exists() else 0
        if size < data_bytes:
            raise CacheInvalid(f"data file has {size} bytes, the manifest {data_bytes} (truncated)")
        if size > data_bytes:
            log.warning(
                "layer cache %s: ignoring %d bytes beyond the manifest (an interrupted fill)",
                self.root,
                size - data_bytes,
            )
        try:
            raw = (self.root / f"index-{generation}.bin").read_bytes()
        except OSError as err:
            raise CacheInvalid(f"index unreadable ({err})") from None
        if hashlib.sha256(raw).hexdigest() != index_sha or len(raw) != count * _INDEX_DTYPE.itemsize:
            raise CacheInvalid("index does not match the manifest's checksum or sentence count")
        entries = np.frombuffer(raw, dtype=_INDEX_DTYPE)
        lengths = entries["length"]
        starts = np.cumsum(lengths) - lengths
        if (lengths < 2).any() or not np.array_equal(entries["offset"], starts) or lengths.sum() != rows:
            raise CacheInvalid("index entries do not tile the data rows")
        keys = entries["key"].tobytes()
        spans = zip(entries["offset"].tolist(), lengths.tolist(), strict=True)
        index = {keys[32 * i : 32 * i + 32]: span for i, span in enumerate(spans)}
        if len(index) != count:
            raise CacheInvalid("index has duplicate sentence keys")
        if verify and _crc32_file(data_path, data_bytes) != crc:
            raise CacheInvalid("data file checksum mismatch (corrupted)")
        self._commit(index, entries, rows, crc, generation)

    def publish(self) -> None:
        """Publish the cache as it is under a new generation: a fill that had nothing to add says it is done."""
        with self._locked():
            self._open(verify=False)  # take in what another process published meanwhile
            self._append(None, [])

    def _append(self, stage: BinaryIO | None, staged: list[tuple[bytes, int, int]]) -> None:
        """Append staged rows not cached yet, then publish index and manifest (lock held)."""
        data_path = self.root / _DATA
        committed, crc, rows = self._rows * self._row_bytes, self._crc, self._rows
        records, index = [], dict(self._index)  # in-memory state changes only once published
        with open(data_path, "r+b" if data_path.exists() else "w+b") as f:
            f.truncate(committed)  # drop rows an interrupted fill left beyond the manifest
            f.seek(committed)
            for key, first, n in staged:
                if key in index:
                    continue  # another process cached it meanwhile
                assert stage is not None
                stage.seek(first * self._row_bytes)
                chunk = stage.read(n * self._row_bytes)
                f.write(chunk)
                crc = zlib.crc32(chunk, crc)
                records.append((np.frombuffer(key, np.uint8), rows, n))
                index[key] = (rows, n)
                rows += n
            f.flush()
            os.fsync(f.fileno())  # the data must be durable before a manifest points at it
        entries = np.concatenate([self._entries, np.array(records, dtype=_INDEX_DTYPE)])
        generation = self._generation + 1
        raw = entries.tobytes()
        write_bytes(self.root / f"index-{generation}.bin", raw)
        manifest = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "dtype": "float16",
            "num_layers": self.num_layers,
            "dim": self.dim,
            "rows": rows,
            "sentences": len(entries),
            "generation": generation,
            "data_bytes": rows * self._row_bytes,
            "data_crc32": crc,
            "index_sha256": hashlib.sha256(raw).hexdigest(),
        }
        write_bytes(self.root / _MANIFEST, json.dumps(manifest, indent=1).encode())  # the publish
        dir_fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the renames themselves durable
        finally:
            os.close(dir_fd)
        for old in self.root.iterdir():  # older indexes, temp files of killed publishes (all under the lock)
            if (
                old.name.startswith("index-") and old.name != f"index-{generation}.bin"
            ) or old.suffix == ".tmp":
                old.unlink()
        self._commit(index, entries, rows, crc, generation)

    def _commit(
        self, index: dict[bytes, tuple[int, int]], entries: np.ndarray, rows: int, crc: int, generation: int
    ) -> None:
        self._index, self._entries, self._rows, self._crc = index, entries, rows, crc
        self._generation = generation
        self._map()


def published_generations(directory: str | Path) -> dict[str, int]:
    """{fingerprint folder: generation of its manifest} for every cache under ``directory`` ({} if none yet);
    -1 for a manifest that cannot be read. A changed generation is a finished fill (``LayerStore.publish``)."""
    found = {}
    for manifest in sorted(Path(directory).glob(f"*/{_MANIFEST}")):
        try:
            with open(manifest, "rb") as f:
                found[manifest.parent.name] = int(json.loads(f.read(1 << 16))["generation"])
        except (OSError, ValueError, KeyError, TypeError):
            found[manifest.parent.name] = -1
    return found
