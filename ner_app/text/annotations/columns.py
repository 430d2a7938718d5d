"""CoNLL (any column count, 2-column TSV or space-separated IOB): its reader, what ``predict --format conll``
writes, and its format record.

Tags are read with the one tag grammar (``ner_app.text.tags``): the scheme of each file (IOB1, IOB2, BIOES;
IO, tags without B-, reads as IOB1) is detected on the whole file and its entities decoded with it. The tag is
the last column, or ``tag_column`` (0-based; negative from the end). ``predict --format conll`` reads token
lines and appends the predicted tag, so the last column of its output reads back as the predictions.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ner_app.files import is_special
from ner_app.text.annotations.format import Format, Options, Probe
from ner_app.text.annotations.model import Audit, TokenDocument, TokenSpan
from ner_app.text.annotations.read import read_text
from ner_app.text.conll import DOCSTART, parse_conll
from ner_app.text.outputs import OutputFormat, Target
from ner_app.text.predictions import ConllItem
from ner_app.text.tags import detect_scheme, known_entities


def read_conll_file(path: str | os.PathLike[str], tag_column: int = -1) -> list[TokenDocument]:
    name = os.fspath(path)
    sentences = parse_conll(read_text(path), name, tag_column)
    scheme = detect_scheme(s.tags for s in sentences)
    docs: dict[int, TokenDocument] = {}
    for sentence in sentences:
        doc = docs.setdefault(
            sentence.doc, TokenDocument(f"{name}:{sentence.line}", [], [], [], tags=[], scheme=scheme)
        )
        base = len(doc.tokens)
        doc.tokens.extend(sentence.tokens)
        assert doc.tags is not None
        doc.tags.extend(sentence.tags)
        doc.sentences.append((base, len(doc.tokens)))
        for kind, start, end in known_entities(sentence.tags, scheme):  # a "-" tag is in no entity
            doc.spans.append(TokenSpan(base + start, base + end, kind, f"{name}:{sentence.line + start}"))
    return list(docs.values())


def looks_like_conll(path: Path) -> bool:
    """Whether the first non-blank line of a file is a CoNLL row (>= 2 columns) or ``-DOCSTART-``."""
    if is_special(path):
        return True  # not opened (a FIFO blocks): the CoNLL reader names it in one line
    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", errors="replace").removeprefix("\ufeff")  # a BOM is no token
    for line in head.split("\n"):
        if line.strip():
            return line.split()[0] == DOCSTART or len(line.split()) >= 2
    return False


def write_conll(items: Iterable[ConllItem], target: Target) -> Iterator[str]:
    """The token lines with the predicted tag as the last column; the lines between sentences as they were."""
    for item in items:
        if isinstance(item, str):
            yield item + "\n"
        else:
            yield from (line + "\n" for line in item.conll_lines())


def _read(path: Path, options: Options, audit: Audit) -> list[TokenDocument]:
    return read_conll_file(path, options.tag_column)


def _detect(probe: Probe) -> bool:
    # a JSON file is never CoNLL, whatever its first line splits into
    return (
        probe.path.suffix not in (".json", ".jsonl") and probe.path.is_file() and looks_like_conll(probe.path)
    )


FORMAT = Format(
    "conll",
    suffixes=(".txt", ".conll"),
    detect=_detect,
    precedence=90,  # any line of two words looks like CoNLL: asked last
    clue="a first line of two or more columns",
    read=_read,
    spans=False,
    writer=OutputFormat(
        "conll",
        "conll",
        write_conll,
        "CoNLL token lines in (token first), each with the predicted tag appended",
    ),
    options=("tag_column",),
)
