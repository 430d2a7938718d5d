"""Teachers' marginals on unlabelled text, as files: the soft labels a student is distilled from
(docs/distillation.md).

A marginals folder holds ``teachers.json`` (what made it: the teachers, the text, the tags) and numbered chunks,
each two files written by atomic renames: ``chunk-NNNNN.npy``, the averaged per-token tag marginals (tokens, K)
float16 in the order of ``tags``, then ``chunk-NNNNN.jsonl``, the chunk's sentences (a JSON list of tokens a
line). A chunk counts once its ``.jsonl`` is there (written last), so a run stopped anywhere resumes at the first
chunk without one, and ``complete`` in ``teachers.json`` says the whole text is in. Nothing here needs torch:
the writer takes arrays, the reader gives them (``read_soft_labels``, bounded and checked chunk by chunk).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ner_app.errors import NerAppError
from ner_app.files import write_bytes, write_text
from ner_app.limits import MAX_ENTITY_TYPES, MAX_TRAIN_SENTENCE_TOKENS
from ner_app.records import Reader, read_json, read_record

FORMAT = "ner_app.teacher_marginals/1"
MANIFEST = "teachers.json"
MAX_MANIFEST_BYTES = 1 << 20
MAX_CHUNK_SENTENCES = 1 << 20
MAX_CHUNK_BYTES = 1 << 30  # one chunk's marginals or sentences: 2,000 sentences are about 1 MB of each
SUM_TOLERANCE = 0.02  # a token's float16 marginals sum to 1 within their rounding (17 tags: below 0.005)


class SoftLabelError(NerAppError):
    """A marginals folder that is not one, was made by other teachers or text, or is damaged."""


@dataclass(frozen=True)
class TeacherRecord:
    """One teacher: its export folder as given and its ``model_version`` (name and weights' digest)."""

    path: str
    model_version: str


@dataclass(frozen=True)
class MarginalsManifest:
    """``teachers.json``: the teachers averaged, the text (its path and sha256), the tags (training scheme, in
    the marginals' column order), the chunk size; and, once written, the totals and ``complete``."""

    format: str
    teachers: list[TeacherRecord]
    text: str
    text_sha256: str
    scheme: str
    tags: list[str]
    chunk_sentences: int
    max_sentences: int | None = None  # the first N sentences of the text only; None: all of it
    complete: bool = False
    chunks: int = 0
    sentences: int = 0
    tokens: int = 0
    seconds: float = 0.0  # the teachers' time, over every run that wrote a chunk

    def identity(self) -> tuple[Any, ...]:
        """What must match for a run to resume this folder: everything but its progress."""
        return (
            self.format,
            self.teachers,
            self.text_sha256,
            self.scheme,
            self.tags,
            self.chunk_sentences,
            self.max_sentences,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"


def chunk_names(index: int) -> tuple[str, str]:
    """(marginals file, sentences file) of chunk ``index``."""
    return f"chunk-{index:05d}.npy", f"chunk-{index:05d}.jsonl"


def read_manifest(folder: Path) -> MarginalsManifest:
    """The folder's ``teachers.json``, checked: one ``SoftLabelError`` line naming the file and key otherwise."""
    path = folder / MANIFEST
    if not path.is_file():
        raise SoftLabelError(
            f"{folder}: not a marginals folder (no {MANIFEST}); make one with ner-app distill"
        )
    data = read_json(path, MAX_MANIFEST_BYTES, SoftLabelError, "a marginals manifest")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise SoftLabelError(f"{path}: format {found!r} is not {FORMAT!r}")
    manifest = read_record(MarginalsManifest, data, Reader(SoftLabelError, str(path)))
    if not manifest.teachers:
        raise SoftLabelError(f"{path}: 'teachers' is empty; a marginals folder has at least one teacher")
    if not 2 <= len(manifest.tags) <= 4 * MAX_ENTITY_TYPES + 1 or len(set(manifest.tags)) != len(
        manifest.tags
    ):
        raise SoftLabelError(f"{path}: 'tags' must be 2 or more distinct tags, found {len(manifest.tags)}")
    if not 1 <= manifest.chunk_sentences <= MAX_CHUNK_SENTENCES:
        raise SoftLabelError(f"{path}: 'chunk_sentences' must be in [1, {MAX_CHUNK_SENTENCES}]")
    return manifest


def done_chunks(folder: Path) -> int:
    """How many leading chunks are written (each complete: its sentences file is written after its marginals)."""
    count = 0
    while (folder / chunk_names(count)[1]).is_file():
        count += 1
    return count


def write_chunk(folder: Path, index: int, sentences: Sequence[Sequence[str]], marginals: np.ndarray) -> None:
    """Chunk ``index``: its marginals (tokens, K), rounded to float16, then its sentences; each file by an
    atomic rename."""
    tokens = sum(len(s) for s in sentences)
    if marginals.ndim != 2 or marginals.shape[0] != tokens:
        raise ValueError(f"chunk {index}: {tokens} tokens, but marginals of shape {marginals.shape}")
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(marginals, dtype=np.float16), allow_pickle=False)
    npy, jsonl = chunk_names(index)
    write_bytes(folder / npy, buffer.getbuffer())
    write_text(folder / jsonl, "".join(json.dumps(list(s), ensure_ascii=False) + "\n" for s in sentences))


def write_manifest(folder: Path, manifest: MarginalsManifest) -> None:
    write_text(folder / MANIFEST, manifest.to_json())


@dataclass(frozen=True)
class SoftLabels:
    """Sentences with their teachers' per-token marginals: ``targets`` (all tokens, K) float16 in the order of
    ``tags``; sentence i's rows are ``targets[offsets[i]:offsets[i + 1]]``."""

    tags: list[str]
    scheme: str
    sentences: list[list[str]]
    targets: np.ndarray
    offsets: np.ndarray

    def rows(self, i: int) -> np.ndarray:
        """Sentence i's marginals (its tokens, K)."""
        return self.targets[self.offsets[i] : self.offsets[i + 1]]

    def in_order(self, tags: Sequence[str], where: str) -> SoftLabels:
        """The same labels with their columns in the order of ``tags`` (a student's tag vocabulary). The two
        tag sets must be equal: a student cannot learn a type its teachers never predicted, nor the reverse."""
        if list(tags) == self.tags:
            return self
        if set(tags) != set(self.tags):
            only_student = sorted(set(tags) - set(self.tags))
            only_teachers = sorted(set(self.tags) - set(tags))
            raise SoftLabelError(
                f"{where}: the teachers' tags differ from the training data's (only in the data: "
                f"{only_student or 'none'}; only the teachers': {only_teachers or 'none'}); distil teachers "
                "trained on the same entity types"
            )
        order = [self.tags.index(t) for t in tags]
        return SoftLabels(list(tags), self.scheme, self.sentences, self.targets[:, order], self.offsets)


def read_soft_labels(folder: str | Path, max_sentences: int | None = None) -> SoftLabels:
    """Every chunk of a complete marginals folder, or its first ``max_sentences`` sentences (which an
    unfinished folder serves once its written chunks hold them), each chunk checked: sentences of 1 to ``MAX_TRAIN_SENTENCE_TOKENS`` tokens, a row of K finite marginals per token,
    each row summing to 1."""
    root = Path(folder)
    manifest = read_manifest(root)
    chunks = manifest.chunks
    if not manifest.complete:  # a folder still being written serves a prefix its written chunks hold
        chunks = done_chunks(root)
        if max_sentences is None or chunks * manifest.chunk_sentences < max_sentences:
            raise SoftLabelError(
                f"{root}: incomplete ({chunks} chunks written); run ner-app distill again to finish it"
            )
    width = len(manifest.tags)
    sentences: list[list[str]] = []
    parts: list[np.ndarray] = []
    for index in range(chunks):
        if max_sentences is not None and len(sentences) >= max_sentences:
            break
        npy, jsonl = (root / name for name in chunk_names(index))
        chunk = _read_sentences(jsonl)
        marginals = _read_marginals(npy, width)
        tokens = sum(map(len, chunk))
        if marginals.shape[0] != tokens:
            raise SoftLabelError(f"{npy}: {marginals.shape[0]} rows, but {jsonl.name} holds {tokens} tokens")
        if max_sentences is not None and len(sentences) + len(chunk) > max_sentences:
            chunk = chunk[: max_sentences - len(sentences)]
            marginals = marginals[: sum(map(len, chunk))]
        sentences.extend(chunk)
        parts.append(marginals)
    if not sentences:
        raise SoftLabelError(f"{root}: holds no sentences")
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sentences], out=offsets[1:])
    return SoftLabels(list(manifest.tags), manifest.scheme, sentences, np.concatenate(parts), offsets)


def _read_sentences(path: Path) -> list[list[str]]:
    if not path.is_file() or path.stat().st_size > MAX_CHUNK_BYTES:
        raise SoftLabelError(f"{path}: missing or larger than {MAX_CHUNK_BYTES:,} bytes")
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            try:
                tokens = json.loads(line)
            except json.JSONDecodeError:
                tokens = None
            if (
                not isinstance(tokens, list)
                or not 1 <= len(tokens) <= MAX_TRAIN_SENTENCE_TOKENS
                or not all(isinstance(t, str) and t for t in tokens)
            ):
                raise SoftLabelError(f"{path}:{number}: expected a JSON list of 1 or more non-empty tokens")
            out.append(tokens)
    return out


def _read_marginals(path: Path, width: int) -> np.ndarray:
    if not path.is_file() or path.stat().st_size > MAX_CHUNK_BYTES:
        raise SoftLabelError(f"{path}: missing or larger than {MAX_CHUNK_BYTES:,} bytes")
    try:
        array = np.load(path, allow_pickle=False)  # a plain array: never a pickled object
    except (ValueError, OSError) as err:
        raise SoftLabelError(f"{path}: not a NumPy array file ({err})") from None
    if array.dtype != np.float16 or array.ndim != 2 or array.shape[1] != width:
        raise SoftLabelError(
            f"{path}: expected float16 marginals of shape (tokens, {width}), found "
            f"{array.dtype} {array.shape}"
        )
    values = array.astype(np.float32)
    if not np.isfinite(values).all() or (values < 0).any():
        raise SoftLabelError(f"{path}: marginals must be finite and non-negative")
    sums = values.sum(axis=1)
    if sums.size and float(np.abs(sums - 1.0).max()) > SUM_TOLERANCE:
        row = int(np.abs(sums - 1.0).argmax())
        raise SoftLabelError(f"{path}: row {row} sums to {sums[row]:.4f}, not 1")
    return array
