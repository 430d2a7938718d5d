"""One conversion path from any supported format to tagged sentences, and the two outputs (CoNLL, JSONL)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ner_app.files import is_special, write_text
from ner_app.text.annotations.align import align
from ner_app.text.annotations.brat import read_brat
from ner_app.text.annotations.columns import looks_like_conll, read_conll_file, read_conllu
from ner_app.text.annotations.jsonl import read_doccano, read_jsonl, read_prodigy
from ner_app.text.annotations.labelstudio import read_labelstudio
from ner_app.text.annotations.model import AnnotationFormatError, Audit, Document, TextDocument, TokenDocument
from ner_app.text.annotations.resolve import Policy, keep_spans, tag_sentences
from ner_app.text.conll import DOCSTART, write_conll
from ner_app.text.tags import UNKNOWN, known_entities

FORMATS = ("conll", "conllu", "doccano", "labelstudio", "prodigy", "brat", "jsonl")
SPAN_FORMATS = ("doccano", "labelstudio", "prodigy", "brat", "jsonl")  # raw text and character spans
OUTSIDE = ("O", "unknown")  # what text outside every annotated span of a span format is


@dataclass(frozen=True)
class Options:
    """Everything a conversion may be told: reading (``tag_column``, ``annotation``), alignment, the policy."""

    policy: Policy
    align: str = "expand"
    scheme: str = "IOB2"
    tag_column: int = -1
    annotation: str = "first"
    # "unknown": tokens of span formats outside every span are tagged UNKNOWN (not annotated), not O
    outside: str = "O"


@dataclass
class Converted:
    """One document, converted: its sentences as ``(tokens, tags)``, and its text and entities when it has
    raw text (span formats) or a text made of its tokens (token formats)."""

    where: str
    sentences: list[tuple[list[str], list[str]]]
    text: str
    entities: list[tuple[int, int, str]]  # (start, end, type), character offsets in ``text``


def read_documents(fmt: str, path: Path, options: Options, audit: Audit) -> Iterator[Document]:
    """The documents of one input file (a folder, for brat) in format ``fmt``."""
    if options.outside != "O" and fmt not in SPAN_FORMATS:
        raise AnnotationFormatError(
            f"{path}: outside unknown is for span formats ({', '.join(SPAN_FORMATS)}); a {fmt} file marks "
            "each token that was not annotated with the tag -"
        )
    if fmt == "conll":
        yield from read_conll_file(path, options.tag_column)
    elif fmt == "conllu":
        yield from read_conllu(path)
    elif fmt == "doccano":
        yield from read_doccano(path, audit)
    elif fmt == "prodigy":
        yield from read_prodigy(path, audit)
    elif fmt == "jsonl":
        yield from read_jsonl(path, audit)
    elif fmt == "labelstudio":
        yield from read_labelstudio(path, audit, options.annotation)
    elif fmt == "brat":
        yield from read_brat(path, audit)
    else:
        raise AnnotationFormatError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")


def detect_format(path: Path) -> str:
    """The format of a file, from its name and first record: what ``convert`` and training use when none is
    given. Raises AnnotationFormatError when nothing fits."""
    if (
        path.is_dir()
        or path.suffix == ".ann"
        or (path.suffix == ".txt" and path.with_suffix(".ann").is_file())
    ):
        return "brat"
    if path.suffix == ".conllu":
        return "conllu"
    if path.suffix == ".json":
        return "labelstudio"
    if path.suffix == ".jsonl" and not is_special(path):  # a FIFO is not opened: its reader names it
        with open(path, "rb") as f:
            head = f.readline(1 << 20)
        try:
            record = json.loads(head)
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None
        if isinstance(record, dict):
            if "entities" in record and "start_offset" not in json.dumps(record["entities"])[:2000]:
                return "jsonl"
            if "spans" in record or "answer" in record:
                return "prodigy"
            if {"label", "labels", "entities"} & record.keys():
                return "doccano"
        raise AnnotationFormatError(
            f"{path}:1: cannot tell which JSONL format this is (expected 'entities', 'spans' or 'label'); "
            "name it with --from"
        )
    if path.is_file() and looks_like_conll(path):
        return "conll"
    raise AnnotationFormatError(
        f"{path}: cannot tell its format from its name or first line; name it with --from ({', '.join(FORMATS)})"
    )


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
        found[old.strip()] = new.strip()
    return found


def type_list(text: str | None) -> frozenset[str] | None:
    """``T1,T2,...`` (``--types``, ``data.types``) as a set; None (every type) when empty."""
    return frozenset(t.strip() for t in text.split(",") if t.strip()) if text else None


def convert_document(doc: Document, options: Options, audit: Audit) -> Converted:
    spans_format = isinstance(doc, TextDocument)
    tokens = align(doc, options.align, audit) if isinstance(doc, TextDocument) else doc
    spans = keep_spans(tokens, options.policy, audit)
    sentences = tag_sentences(tokens, spans, options.scheme, spans_format and options.outside == "unknown")
    text, offsets = _text(tokens, sentences)
    found = [(offsets[s.start][0], offsets[s.end - 1][1], s.type) for s in spans]
    return Converted(tokens.where, sentences, text, found)


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


def write_converted(path: Path, converted: Sequence[Converted]) -> None:
    """``.conll``/``.txt``: CoNLL (``-DOCSTART-`` before each document); ``.jsonl``: one document a line,
    ``{"text", "entities": [{"start", "end", "type", "text"}]}`` as ``predict`` writes it."""
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
        write_text(path, "".join(f"{line}\n" for line in lines))
    else:
        for doc in converted:
            if any(DOCSTART in tokens for tokens, _ in doc.sentences):
                raise AnnotationFormatError(
                    f"{doc.where}: the text holds the token {DOCSTART}, which CoNLL reads as a document "
                    "boundary; write .jsonl instead, or change that word"
                )
        write_conll(path, [doc.sentences for doc in converted])


def count_entities(converted: Sequence[Converted], scheme: str) -> int:
    return sum(len(known_entities(tags, scheme)) for doc in converted for _, tags in doc.sentences)
