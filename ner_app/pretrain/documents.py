"""Pretraining's text files as documents of sentences: the extra training text and the held-out text alike.

A file is plain text (one tokenised sentence per line, a blank line ends a document) or CoNLL (detected, read by
``text.conll``: ``-DOCSTART-`` starts a document). Lines are read by the one line reader (``text/lines.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ner_app.text.conll import DOCSTART, conll_documents, parse_conll
from ner_app.text.lines import read_lines
from ner_app.text.tags import is_tag

Document = list[list[str]]  # a document's sentences in order


def looks_like_conll(lines: Sequence[str]) -> bool:
    """True when the first 200 non-blank lines are CoNLL rows: >= 2 columns, a NER tag last, or -DOCSTART-."""
    sample = [line.split() for line in lines[:200] if line.strip()]
    return bool(sample) and all(
        len(cols) >= 2 and (is_tag(cols[-1]) or cols[0] == DOCSTART) for cols in sample
    )


def split_documents(lines: Sequence[str], source: str = "<text>") -> list[Document]:
    """Documents of a text (one sentence per line, a blank line ends a document) or of a CoNLL file (read by
    ``text.conll``: ``-DOCSTART-`` starts a document; ``source`` names it in errors). Empty documents are
    dropped."""
    if looks_like_conll(lines):
        return conll_documents(parse_conll("\n".join(lines), source))
    documents: list[Document] = [[]]
    for line in lines:
        cols = line.split()
        if cols:
            documents[-1].append(cols)
        else:
            documents.append([])
    return [d for d in documents if d]


def read_documents(
    path: str | Path, max_sentences: int | None = None, what: str = "held-out text"
) -> list[Document]:
    """``split_documents`` of a file, cut after its first ``max_sentences`` sentences (null: all); ``what``
    names the file in errors."""
    return first_sentences(split_documents(read_lines(path, what), str(path)), max_sentences)


def first_sentences(documents: Sequence[Document], max_sentences: int | None) -> list[Document]:
    """The documents that hold the first ``max_sentences`` sentences, the last one cut there (null: all)."""
    if max_sentences is None:
        return list(documents)
    kept: list[Document] = []
    left = max_sentences
    for document in documents:
        if left <= 0:
            break
        kept.append(document[:left])
        left -= len(kept[-1])
    return kept


def conll_as_text(path: Path) -> list[str] | None:
    """The text of a CoNLL file as lines of the plain format (a sentence's tokens joined by spaces, a blank line
    after each document), or None when ``path`` is no CoNLL file (judged on its first 64 KiB) or unreadable."""
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None  # the caller's read names the file
    if not looks_like_conll(head[:-1] or head):  # the last line may be cut
        return None
    return [line for doc in read_documents(path, what="training text") for line in (*map(" ".join, doc), "")]


def read_sentences(path: str | Path) -> list[list[str]]:
    """The sentences of a text file (one sentence per line) or a CoNLL file (detected), in order."""
    return [sentence for document in read_documents(path) for sentence in document]


__all__ = [
    "Document",
    "conll_as_text",
    "first_sentences",
    "looks_like_conll",
    "read_documents",
    "read_sentences",
    "split_documents",
]
