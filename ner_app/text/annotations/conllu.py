"""CoNLL-U with NER in MISC: its reader and its format record (no tool takes predictions in it).

CoNLL-U (https://universaldependencies.org/format.html): ten tab-separated columns, ``#`` comments, a blank
line after each sentence, ``# newdoc`` before a document. The NER tag is the ``NE=`` or ``name=`` item of
MISC (a bare type ``NE=PER`` is read as IO). A multiword token (``1-2  du``) is one token of the output, as
the tokenizer of raw text would see it; it is inside an entity when its range line's MISC says so, else when
one of its words is. Empty nodes (``8.1``) are skipped. The scheme of the tags is detected on the whole file,
as for CoNLL.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import AnnotationFormatError, Audit, TokenDocument, TokenSpan
from ner_app.text.annotations.read import read_text
from ner_app.text.tags import detect_scheme, entities, is_tag

NE_KEYS = ("NE", "name")
ID = re.compile(r"[0-9]{1,9}")  # a word ID: ASCII digits (``³`` is a digit to str.isdigit, not to int)


def _misc_tag(misc: str, where: str) -> str | None:
    """The NER tag of a MISC column, or None when it has none."""
    for item in misc.split("|"):
        key, sep, value = item.partition("=")
        if sep and key in NE_KEYS:
            if value in ("", "_", "O"):
                return "O"
            if is_tag(value):
                return value
            if value.split() == [value] and "-" not in value[:2]:
                return f"I-{value}"  # a bare type: IO
            raise AnnotationFormatError(
                f"{where}: expected {key}=O, {key}=B-X, I-X, E-X, S-X or a type, found {item!r}"
            )
    return None


def read_conllu(path: str | os.PathLike[str]) -> list[TokenDocument]:
    name = os.fspath(path)
    # per document, per sentence: surface tokens, their tags and lines
    documents: list[list[tuple[list[str], list[str], list[int]]]] = [[]]
    tokens: list[str] = []
    tags: list[str] = []
    lines: list[int] = []
    range_end = 0  # the last word of the multiword token being read (0: none)
    range_next = 0  # the word of it expected next

    def flush() -> None:
        nonlocal tokens, tags, lines
        if range_end:  # a sentence ended inside a multiword token: its words never came
            raise AnnotationFormatError(
                f"{name}:{lines[-1]}: the multiword token {tokens[-1]!r} ends the sentence before its words "
                f"{range_next}-{range_end}; expected each word of a range on the lines after it"
            )
        if tokens:
            documents[-1].append((tokens, tags, lines))
        tokens, tags, lines = [], [], []

    for number, raw in enumerate(read_text(path).removeprefix("\ufeff").split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            flush()
            continue
        if line.startswith("#"):
            if line[1:].strip().startswith("newdoc") and (tokens or documents[-1]):
                flush()
                documents.append([])
            continue
        where = f"{name}:{number}"
        columns = line.split("\t")
        if len(columns) != 10:
            raise AnnotationFormatError(
                f"{where}: expected 10 tab-separated CoNLL-U columns (ID FORM ... MISC), found {len(columns)}: {line[:60]!r}"
            )
        word_id, form, misc = columns[0], columns[1], columns[9]
        tag = _misc_tag(misc, where)
        if "." in word_id:  # an empty node: no surface token
            continue
        if "-" in word_id:
            first, _, last = word_id.partition("-")
            if not (ID.fullmatch(first) and ID.fullmatch(last) and int(first) < int(last)) or range_end:
                raise AnnotationFormatError(
                    f"{where}: expected a multiword range ID such as 1-2 (after the words of the last one), "
                    f"found {word_id!r}"
                )
            range_next, range_end = int(first), int(last)
            tokens.append("_".join(form.split()) or "_")
            tags.append(tag or "")  # "" : decided by its words
            lines.append(number)
            continue
        if not ID.fullmatch(word_id):
            raise AnnotationFormatError(f"{where}: expected an integer word ID, found {word_id!r}")
        if range_end and int(word_id) != range_next:
            raise AnnotationFormatError(
                f"{where}: expected word {range_next} of the multiword token {tokens[-1]!r} (line {lines[-1]}), "
                f"found word {word_id!r}; a range's words follow it in order"
            )
        if range_end:  # a word of the multiword token: only its tag counts
            range_next += 1
            if not tags[-1] and tag and tag != "O":
                tags[-1] = tag
            if int(word_id) == range_end:
                tags[-1] = tags[-1] or "O"
                range_end = 0
            continue
        tokens.append(
            "_".join(form.split()) or "_"
        )  # a FORM with spaces (allowed in some languages): one token
        tags.append(tag or "O")
        lines.append(number)
    flush()
    sentences = [s for doc in documents for s in doc]
    if not sentences:
        raise AnnotationFormatError(
            f"{name}: no sentences found (expected CoNLL-U: 10 tab-separated columns a word)"
        )
    scheme = detect_scheme(t for _, t, _ in sentences)
    found: list[TokenDocument] = []
    for doc in documents:
        if not doc:
            continue
        out = TokenDocument(f"{name}:{doc[0][2][0]}", [], [], [])
        for words, word_tags, word_lines in doc:
            base = len(out.tokens)
            out.tokens.extend(words)
            out.sentences.append((base, len(out.tokens)))
            for kind, start, end in entities([t or "O" for t in word_tags], scheme):
                out.spans.append(TokenSpan(base + start, base + end, kind, f"{name}:{word_lines[start]}"))
        found.append(out)
    return found


def _read(path: Path, options: Options, audit: Audit) -> list[TokenDocument]:
    return read_conllu(path)


def _detect(probe: Probe) -> bool:
    return probe.path.suffix == ".conllu"  # the name alone: its reader names what is wrong inside


FORMAT = Format(
    "conllu",
    suffixes=(".conllu",),
    detect=_detect,
    precedence=20,
    clue="the name NAME.conllu",
    read=_read,
    spans=False,
)
