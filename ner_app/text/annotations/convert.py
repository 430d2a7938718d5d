"""One conversion path from any supported format (``registry.py``) to tagged sentences, and the two outputs
(CoNLL, JSONL)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ner_app.files import Claim, write_text
from ner_app.text.annotations import registry
from ner_app.text.annotations.align import align
from ner_app.text.annotations.format import Options
from ner_app.text.annotations.model import (
    LEFT_OUT,
    AnnotationFormatError,
    Audit,
    Document,
    TextDocument,
    TokenDocument,
)
from ner_app.text.annotations.registry import detect_format as detect_format  # convert's and training's
from ner_app.text.annotations.registry import read_documents
from ner_app.text.annotations.resolve import entity_type, keep_spans, retag, tag_sentences
from ner_app.text.conll import DOCSTART, write_conll
from ner_app.text.tags import UNKNOWN, convert, known_entities

# The registry's names, for the choices of convert --from and check-data --format (derived: add a format in
# registry.py, never here); the reading options and the dispatch are the registry's too.
FORMATS = registry.format_names()
SPAN_FORMATS = registry.span_formats()  # raw text and character spans
OUTSIDE = ("O", "unknown")  # what text outside every annotated span of a span format is


@dataclass
class Converted:
    """One document, converted: its sentences as ``(tokens, tags)``, and its text and entities when it has
    raw text (span formats) or a text made of its tokens (token formats)."""

    where: str
    sentences: list[tuple[list[str], list[str]]]
    text: str
    entities: list[tuple[int, int, str]]  # (start, end, type), character offsets in ``text``


def label_map(text: str | None, option: str) -> dict[str, str]:
    """``OLD=NEW,...`` (``--labels``, ``data.labels``) as a dict; one error naming ``option`` otherwise."""
    if not text:
        return {}
    found: dict[str, str] = {}
    for item in text.split(","):
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip() or new.strip().split() != [new.strip()]:
            raise AnnotationFormatError(
                f"{option}: expected OLD=NEW pairs separated by commas, found {item!r}"
            )
        found[old.strip()] = entity_type(new.strip(), option)
    return found


def type_list(text: str | None, option: str = "--types") -> frozenset[str] | None:
    """``T1,T2,...`` (``--types``, ``data.types``) as a set; None (every type) when empty."""
    if not text:
        return None
    return frozenset(entity_type(t.strip(), option) for t in text.split(",") if t.strip())


def convert_document(doc: Document, options: Options, audit: Audit) -> Converted:
    if isinstance(doc, TokenDocument) and doc.tags is not None:
        return _convert_tags(doc, options, audit)
    spans_format = isinstance(doc, TextDocument)
    tokens = align(doc, options.align, audit) if isinstance(doc, TextDocument) else doc
    spans = keep_spans(tokens, options.policy, audit)
    sentences = tag_sentences(tokens, spans, options.scheme, spans_format and options.outside == "unknown")
    text, offsets = _text(tokens, sentences)
    found = [(offsets[s.start][0], offsets[s.end - 1][1], s.type) for s in spans]
    return Converted(tokens.where, sentences, text, found)


def _convert_tags(doc: TokenDocument, options: Options, audit: Audit) -> Converted:
    """A document of CoNLL tags: renamed and kept by the policy tag by tag, then converted to the output's
    scheme as training converts them (a ``-`` stays, and a tag its unknown neighbour could change becomes ``-``)."""
    assert doc.tags is not None
    by_start = {s.start: s.where for s in doc.spans}
    sentences = []
    for start, end in doc.sentences:
        where = by_start.get(start, doc.where)
        tags, left_out = retag(doc.tags[start:end], doc.scheme, options.policy, where)
        for kind, a, b in left_out:
            shown = " ".join(doc.tokens[start + a : start + b])
            audit.report(
                by_start.get(start + a, where), LEFT_OUT, shown, kind, "its type is not among --types"
            )
        sentences.append((doc.tokens[start:end], convert(tags, doc.scheme, options.scheme)))
    text, offsets = _text(doc, sentences)
    found, at = [], 0
    for tokens, tags in sentences:
        found += [
            (offsets[at + a][0], offsets[at + b - 1][1], k)
            for k, a, b in known_entities(tags, options.scheme)
        ]
        at += len(tokens)
    return Converted(doc.where, sentences, text, found)


def _text(
    doc: TokenDocument, sentences: Sequence[tuple[list[str], list[str]]]
) -> tuple[str, list[tuple[int, int]]]:
    """The document's text and token offsets; a token format's text is its tokens joined by spaces, one
    sentence a line."""
    if doc.text is not None and doc.offsets is not None:
        return doc.text, doc.offsets
    offsets: list[tuple[int, int]] = []
    parts: list[str] = []
    at = 0
    for tokens, _ in sentences:
        for i, token in enumerate(tokens):
            at += 1 if i else 0
            offsets.append((at, at + len(token)))
            at += len(token)
        parts.append(" ".join(tokens))
        at += 1  # the newline
    return "\n".join(parts), offsets


def convert_files(fmt: str, paths: Sequence[Path], options: Options, audit: Audit) -> list[Converted]:
    return [
        convert_document(d, options, audit)
        for path in paths
        for d in read_documents(fmt, path, options, audit)
    ]


def write_converted(path: Path, converted: Sequence[Converted], claim: Claim | None = None) -> None:
    """``.conll``/``.txt``: CoNLL (``-DOCSTART-`` before each document); ``.jsonl``: one document a line,
    ``{"text", "entities": [{"start", "end", "type", "text"}]}`` as ``predict`` writes it (``claim``: the
    command's, when it writes a user's output: ``files.write_text``)."""
    if path.suffix == ".jsonl":
        if any(UNKNOWN in tags for doc in converted for _, tags in doc.sentences):
            raise AnnotationFormatError(
                f"{path}: JSONL has no way to say 'not annotated'; write CoNLL (.conll or .txt), where it is "
                "the tag -"
            )
        lines = []
        for doc in converted:
            found = [{"start": s, "end": e, "type": t, "text": doc.text[s:e]} for s, e, t in doc.entities]
            lines.append(json.dumps({"text": doc.text, "entities": found}, ensure_ascii=False))
        write_text(path, "".join(f"{line}\n" for line in lines), claim)
    else:
        for doc in converted:
            if any(DOCSTART in tokens for tokens, _ in doc.sentences):
                raise AnnotationFormatError(
                    f"{doc.where}: the text holds the token {DOCSTART}, which CoNLL reads as a document "
                    "boundary; write .jsonl instead, or change that word"
                )
        write_conll(path, [doc.sentences for doc in converted], claim)


def count_entities(converted: Sequence[Converted], scheme: str) -> int:
    return sum(len(known_entities(tags, scheme)) for doc in converted for _, tags in doc.sentences)
