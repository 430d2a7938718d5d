"""Teachers label unlabelled text with their exact CRF marginals, averaged, into a marginals folder
(``text/soft_labels.py``): the first half of ``distill`` (docs/distillation.md).

The text streams in, a chunk of sentences at a time; every teacher computes each token's tag marginals by the
CRF's forward-backward (``CRF.marginals``, with the export's calibration temperature: the probabilities the
teacher reports), the chunk's average over the teachers is written, and memory holds one chunk. A run stopped
anywhere resumes at its first unwritten chunk; the same teachers on the same text reuse the folder for every
student seed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from ner_app.errors import NerAppError
from ner_app.onnx.crf import marginals as onnx_marginals
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.loading import AnyPredictor, load_predictor
from ner_app.predict.predictor import Predictor, is_token_lines
from ner_app.records import sha256_file
from ner_app.tagger.version import model_version
from ner_app.text.conll import DOCSTART, conll_blocks
from ner_app.text.lines import decoded_lines
from ner_app.text.pieces import MAX_TOKENS
from ner_app.text.soft_labels import (
    FORMAT,
    MANIFEST,
    MarginalsManifest,
    SoftLabelError,
    TeacherRecord,
    done_chunks,
    read_manifest,
    write_chunk,
    write_manifest,
)
from ner_app.text.tokenizer import sentences as split_sentences

log = logging.getLogger("ner_app")
SNIFF_LINES = 2000  # lines read to tell CoNLL token lines from raw text, as predict tells them


def text_sentences(path: Path) -> Iterator[list[str]]:
    """The tokenised sentences of a text file as ``predict`` reads it: CoNLL token lines (first column,
    ``-DOCSTART-`` and blank lines between sentences) or raw text (each line's sentences by the tokenizer);
    a sentence longer than ``MAX_TOKENS`` comes in pieces of at most that many tokens."""
    with open(path, "rb") as f:
        head = list(islice(decoded_lines(f, str(path)), SNIFF_LINES))
    tokens = is_token_lines(list(conll_blocks(head)))
    with open(path, "rb") as f:
        lines = decoded_lines(f, str(path))
        if tokens:
            for block in conll_blocks(lines):
                if block[0].strip() and not block[0].startswith(DOCSTART):
                    yield from _pieces([line.split()[0] for line in block])
        else:
            for line in lines:
                for sentence in split_sentences(line, max_tokens=MAX_TOKENS):
                    yield [t.text for t in sentence]


def _pieces(tokens: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(tokens), MAX_TOKENS):
        yield tokens[start : start + MAX_TOKENS]


def load_teachers(paths: Sequence[str | Path], batch_size: int, max_tokens: int | None) -> list[AnyPredictor]:
    """Every teacher (a torch export or an ONNX folder), which must all tag the same tags in the same scheme."""
    if not paths:
        raise NerAppError("distill needs at least one --teacher export")
    teachers = [load_predictor(p, batch_size=batch_size, max_tokens=max_tokens) for p in paths]
    first = teachers[0]
    for path, teacher in zip(paths[1:], teachers[1:], strict=True):
        if teacher.scheme != first.scheme or set(teacher.tags.itos) != set(first.tags.itos):
            raise NerAppError(
                f"--teacher {path}: tags {teacher.scheme} {sorted(teacher.tags.itos)} differ from --teacher "
                f"{paths[0]}'s {first.scheme} {sorted(first.tags.itos)}; an ensemble's teachers share their tags"
            )
    return teachers


def teacher_marginals(
    teacher: AnyPredictor, sentences: Sequence[Sequence[str]]
) -> Iterator[tuple[list[int], np.ndarray]]:
    """(sentence indices, their tag marginals (B, T, K) float64) of every batch of the teacher's: its CRF's
    forward-backward at its calibration temperature, in torch or, for an ONNX folder, in numpy."""
    if isinstance(teacher, Predictor):
        crf = teacher.tagger.crf
        for group, emissions, mask in teacher.emission_batches(sentences):
            with torch.inference_mode():
                yield group, crf.marginals(emissions, mask, checked=True).double().cpu().numpy()
        return
    assert isinstance(teacher, OnnxPredictor)
    start, trans, end = teacher.crf
    for rows, scores, lengths in teacher.emission_batches(sentences):
        yield rows, onnx_marginals(scores, lengths, start, trans, end, teacher.temperature).astype(np.float64)


def ensemble_marginals(teachers: Sequence[AnyPredictor], sentences: Sequence[Sequence[str]]) -> np.ndarray:
    """The teachers' mean tag marginals (all tokens of ``sentences`` in order, K) float64, columns in the
    first teacher's tag order: each teacher's exact forward-backward over its own emissions."""
    order = teachers[0].tags.itos
    total = sum(len(s) for s in sentences)
    starts = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sentences], out=starts[1:])
    mean = np.zeros((total, len(order)), dtype=np.float64)
    for teacher in teachers:
        columns = [teacher.tags.itos.index(t) for t in order]
        for group, probs in teacher_marginals(teacher, sentences):  # (B, T, K)
            for row, i in enumerate(group):
                n = len(sentences[i])
                mean[starts[i] : starts[i + 1]] += probs[row, :n][:, columns]
    return mean / len(teachers)


def label_text(
    teacher_paths: Sequence[str | Path],
    text: str | Path,
    folder: str | Path,
    chunk_sentences: int = 2000,
    batch_size: int = 64,
    max_tokens: int | None = None,
    max_sentences: int | None = None,
) -> MarginalsManifest:
    """Write (or finish) the marginals folder of ``teacher_paths`` on ``text``: ``max_sentences`` (None: all)
    of its sentences in chunks of ``chunk_sentences``. A folder made by other teachers, text or chunk size is
    refused in one line; one made by these is resumed, or left as it is when complete."""
    root, source = Path(folder), Path(text)
    if not source.is_file():
        raise NerAppError(f"--unlabelled {text}: not a readable file")
    if next(text_sentences(source), None) is None:  # before anything is written
        raise NerAppError(f"--unlabelled {text}: holds no sentence; expected text, or CoNLL token lines")
    teachers_found = [Path(p) for p in teacher_paths]
    teachers = load_teachers(teachers_found, batch_size, max_tokens)
    first = teachers[0]
    wanted = MarginalsManifest(
        FORMAT,
        [TeacherRecord(str(p), model_version(p)) for p in teachers_found],
        str(source),
        sha256_file(source),
        first.scheme,
        list(first.tags.itos),
        chunk_sentences,
        max_sentences,
    )
    manifest = _claim(root, wanted)
    if manifest.complete:
        log.info(f"{root}: complete ({manifest.sentences:,} sentences, {manifest.tokens:,} tokens); reused")
        return manifest
    index = done_chunks(root)
    skip = index * chunk_sentences
    sentences_iter = text_sentences(source)
    if max_sentences is not None:
        sentences_iter = islice(sentences_iter, max_sentences)
    sentences_done, tokens_done = 0, 0
    for sentence in islice(sentences_iter, skip):  # the written chunks: counted, not tagged again
        sentences_done, tokens_done = sentences_done + 1, tokens_done + len(sentence)
    start, seconds, tokens_before = time.perf_counter(), manifest.seconds, tokens_done
    if index:
        log.info(f"{root}: resuming at chunk {index} ({sentences_done:,} sentences written)")
    while chunk := list(islice(sentences_iter, chunk_sentences)):
        write_chunk(root, index, chunk, ensemble_marginals(teachers, chunk))
        index += 1
        sentences_done += len(chunk)
        tokens_done += sum(map(len, chunk))
        now = time.perf_counter() - start
        # the teachers' time so far, kept in the manifest so that a resumed run adds to it
        write_manifest(root, dataclasses.replace(manifest, seconds=round(seconds + now, 3)))
        log.info(
            f"teachers: {sentences_done:,} sentences, {tokens_done:,} tokens labelled "
            f"({(tokens_done - tokens_before) / max(now, 1e-9):,.0f} tokens/s in this run)"
        )
    done = dataclasses.replace(
        manifest,
        complete=True,
        chunks=index,
        sentences=sentences_done,
        tokens=tokens_done,
        seconds=round(seconds + time.perf_counter() - start, 3),
    )
    write_manifest(root, done)
    return done


def _claim(root: Path, wanted: MarginalsManifest) -> MarginalsManifest:
    """The folder's manifest: new (the folder absent or empty), or the one there when it was made by the same
    teachers, text and chunk size. Anything else is refused: nothing of it is replaced."""
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise SoftLabelError(
            f"--marginals {root}: exists and is not a folder; nothing was changed: name a folder"
        )
    if root.is_dir() and any(root.iterdir()):
        if not (root / MANIFEST).is_file():
            raise SoftLabelError(
                f"--marginals {root}: holds other files and no {MANIFEST}; nothing was changed: name a new or "
                "empty folder"
            )
        found = read_manifest(root)
        if found.identity() != wanted.identity():
            raise SoftLabelError(
                f"--marginals {root}: holds the marginals of other teachers, text or chunk size "
                f"({', '.join(t.model_version for t in found.teachers)} on {found.text}); nothing was changed: "
                "name another folder"
            )
        return found
    root.mkdir(parents=True, exist_ok=True)
    write_manifest(root, wanted)
    return wanted
