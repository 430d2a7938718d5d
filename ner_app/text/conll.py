"""Reading CoNLL-style files (token first, NER tag last) with errors that name file, line and expectation."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ner_app.errors import NerAppError
from ner_app.files import Claim, is_special, write_text
from ner_app.text.tags import UNKNOWN, is_tag_or_unknown

DOCSTART = "-DOCSTART-"
# O, or a prefix of any supported scheme (IOB1/IOB2/BIOES) and a non-empty entity type.


class ConllFormatError(NerAppError):
    """A CoNLL file that cannot be read; the message names the file, the line and what was expected."""


@dataclass(frozen=True)
class Sentence:
    """One sentence: tokens and their tags, the 1-based line of its first token and its document index; a
    sentence of an annotation export may name its place otherwise (``where``: ``FILE:task 12``, ``doc.ann``)."""

    tokens: list[str]
    tags: list[str]
    line: int
    doc: int
    where: str | None = None


MAX_CONLL_BYTES = 4 << 30  # of one CoNLL file (OntoNotes 5 is about 100 MB): a bound on a read by mistake
QUOTED_CHARS = 80  # of a bad line quoted in an error: a 10 MB line is named, never pasted whole


def excerpt(text: str) -> str:
    """``text`` quoted for an error message, at most ``QUOTED_CHARS`` characters of it and its length."""
    text = text.strip()
    if len(text) <= QUOTED_CHARS:
        return repr(text)
    return f"{text[:QUOTED_CHARS]!r}... ({len(text):,} characters)"


def _columns_expected(n: int) -> str:
    return "token tag" if n == 2 else "token ... tag"


def decode_text(path: str | os.PathLike[str], data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        bad = data[err.start]
        raise ConllFormatError(
            f"{path}:{line}: expected UTF-8 text, found byte 0x{bad:02x} at column {column} "
            "that is not valid UTF-8"
        ) from None


def read_conll(path: str | os.PathLike[str], tag_column: int = -1) -> list[Sentence]:
    """Read a CoNLL file: one ``token ... tag`` line per token, blank lines between sentences.

    ``-DOCSTART-`` lines start a new document (documents are numbered from 0) and are not sentences.
    Every token line must have the same number (>= 2) of whitespace-separated columns as the first one; the
    tag is in column ``tag_column`` (0-based; negative counts from the end, -1: the last). A tag ``-`` means
    "not annotated" (partial annotation, docs/partial_annotation.md). Raises ``ConllFormatError`` on the first
    problem.
    """
    path = os.fspath(path)
    special = ConllFormatError(
        f"{path}: not a regular file (a FIFO, device or socket); expected a CoNLL file"
    )
    # A FIFO never ends and /dev/zero fills the memory; stat first, since opening a FIFO blocks until a writer
    # comes, then fstat the file opened (it may have been replaced in between).
    if is_special(path):
        raise special
    with open(path, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise special
        data = f.read(MAX_CONLL_BYTES + 1)
    if len(data) > MAX_CONLL_BYTES:
        raise ConllFormatError(f"{path}: larger than {MAX_CONLL_BYTES >> 30} GiB; split it")
    return parse_conll(decode_text(path, data), path, tag_column)


def parse_conll(text: str, path: str, tag_column: int = -1) -> list[Sentence]:
    """``read_conll`` of text already read; ``path`` names it in errors."""
    text = text.removeprefix("\ufeff")  # a UTF-8 BOM would glue itself to the first -DOCSTART- token
    if "\r" in text and "\n" not in text:
        raise ConllFormatError(
            f"{path}: lines end with CR alone (old Mac line endings); expected LF or CRLF line endings "
            "(convert it, e.g. tr '\\r' '\\n')"
        )

    sentences: list[Sentence] = []
    n_columns = 0  # set by the first token line
    doc = -1  # becomes 0 at the first -DOCSTART- or at the first sentence when there is none
    tokens: list[str] = []
    tags: list[str] = []
    start = 0

    def flush() -> None:
        nonlocal tokens, tags, doc
        if tokens:
            doc = max(doc, 0)
            sentences.append(Sentence(tokens, tags, start, doc))
            tokens, tags = [], []

    # split("\n"), not splitlines(): that also breaks on \x0b, \x1c, \u2028..., which would shift line numbers
    for number, raw in enumerate(text.split("\n"), start=1):
        fields = raw.split()
        if not fields:
            flush()
            continue
        if fields[0] == DOCSTART:
            # the marker's other columns differ between files (-X- O O vs -X- -X- O): not checked
            flush()
            doc += 1
            continue
        if n_columns == 0:
            if len(fields) < 2:
                raise ConllFormatError(
                    f"{path}:{number}: expected at least 2 columns (token ... tag), found 1: {excerpt(raw)}"
                )
            n_columns = len(fields)
            if not -n_columns <= tag_column < n_columns or tag_column in (0, -n_columns):
                raise ConllFormatError(
                    f"{path}:{number}: the tag column {tag_column} is not a column after the token of this "
                    f"{n_columns}-column file: {raw.strip()!r}"
                )
        elif len(fields) != n_columns:
            raise ConllFormatError(
                f"{path}:{number}: expected {n_columns} columns ({_columns_expected(n_columns)}), "
                f"found {len(fields)}: {excerpt(raw)}"
            )
        tag = fields[tag_column]
        if not is_tag_or_unknown(tag):
            where = "the last column" if tag_column == -1 else f"column {tag_column}"
            raise ConllFormatError(
                f"{path}:{number}: expected a tag O, B-X, I-X, E-X, S-X or - in {where}, "
                f"found {excerpt(tag)}: {excerpt(raw)}"
            )
        if not tokens:
            start = number
        tokens.append(fields[0])
        tags.append(tag)
    flush()

    if not sentences:
        raise ConllFormatError(
            f"{path}: no sentences found "
            "(expected CoNLL format: token ... tag per line, blank line between sentences)"
        )
    return sentences


def require_annotated(sentences: Sequence[Sentence], path: str | os.PathLike[str]) -> None:
    """``ConllFormatError`` at the first ``-`` (not annotated) tag: gold tags that are scored must all be known."""
    for sentence in sentences:
        if UNKNOWN in sentence.tags:
            i = sentence.tags.index(UNKNOWN)  # a sentence's tokens are on consecutive lines
            raise ConllFormatError(
                f"{os.fspath(path)}:{sentence.line + i}: expected an annotated tag, found '-' (not annotated) "
                f"for {sentence.tokens[i]!r}: gold tags that are scored must all be known "
                "(partial annotation is for training files only)"
            )


def conll_documents(sentences: Sequence[Sentence]) -> list[list[list[str]]]:
    """The tokens of ``sentences`` grouped by document, in order (documents without a sentence are absent)."""
    documents: dict[int, list[list[str]]] = {}
    for sentence in sentences:
        documents.setdefault(sentence.doc, []).append(sentence.tokens)
    return list(documents.values())


def conll_blocks(lines: Iterable[str]) -> Iterator[list[str]]:
    """Group the lines of a CoNLL file into sentences (lists of lines) as they stream in: blank lines and
    ``-DOCSTART-`` lines separate them and come back as one-line blocks of their own, so that a writer keeps
    the input's layout (``predict --format conll`` appends a column to token lines only)."""
    block: list[str] = []
    for line in lines:
        stripped = line.rstrip("\r\n")
        if not stripped.strip() or stripped.startswith(DOCSTART):
            if block:
                yield block
                block = []
            yield [stripped]
        else:
            block.append(stripped)
    if block:
        yield block


def write_predictions(
    path: str | Path,
    tokens: Sequence[Sequence[str]],
    gold: Sequence[Sequence[str]],
    predicted: Sequence[Sequence[str]],
) -> None:
    """One ``token gold predicted`` line per token, a blank line between sentences (conlleval's input)."""
    lines: list[str] = []
    for sentence, gold_tags, predicted_tags in zip(tokens, gold, predicted, strict=True):
        lines.extend(f"{t} {g} {p}" for t, g, p in zip(sentence, gold_tags, predicted_tags, strict=True))
        lines.append("")
    write_text(path, "\n".join(lines) + "\n")


def write_conll(
    path: str | Path,
    documents: Sequence[Sequence[tuple[Sequence[str], Sequence[str]]]],
    claim: Claim | None = None,
) -> None:
    """Documents of ``(tokens, tags)`` sentences as ``token tag`` lines: a ``-DOCSTART- O`` line and a blank
    line before each document, a blank line after each sentence (what ``read_conll`` reads back). A tag may
    be ``-`` (not annotated). ``claim``: as ``files.write_text``."""
    lines: list[str] = []
    for sentences in documents:
        lines.extend([f"{DOCSTART} O", ""])
        for tokens, tags in sentences:
            for token, tag in zip(tokens, tags, strict=True):
                if not token or token.split() != [token] or token == DOCSTART or not is_tag_or_unknown(tag):
                    raise ValueError(f"cannot write token {token!r} with tag {tag!r} as one CoNLL line")
                lines.append(f"{token} {tag}")
            lines.append("")
    write_text(path, "\n".join(lines) + "\n", claim)


PredictedSentence = tuple[list[str], list[str], list[str]]  # tokens, gold tags, predicted tags


def read_predictions(path: str | os.PathLike[str]) -> list[PredictedSentence]:
    """A file of ``write_predictions``: ``token gold predicted`` lines, a blank line between sentences."""
    with open(path, "rb") as f:
        text = decode_text(path, f.read())
    sentences: list[PredictedSentence] = []
    current: PredictedSentence = ([], [], [])
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split(" ")
        if line == "":
            if current[0]:
                sentences.append(current)
            current = ([], [], [])
        elif len(fields) != 3 or not all(fields):
            raise ConllFormatError(f"{path}:{number}: expected 'token gold predicted', found {line[:80]!r}")
        else:
            for column, value in zip(current, fields, strict=True):
                column.append(value)
    if current[0]:
        sentences.append(current)
    return sentences
