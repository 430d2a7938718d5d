"""Held-out text for biLM perplexity: read as sentences or as documents, in stateless evaluation batches.

Sentence context runs every sentence alone from zero state (``sentence_batches``). Document context reads a
document's sentences as one stream, exactly as document-context ELMo does (docs/document_context.md), and
scores the same predictions: every sentence's words and its ``</S>`` forward, its ``<S>`` and words backward,
so the two perplexities count the same tokens and compare directly (``document_batches``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ner_app.bilm.char_mapper import BOS_TOKEN, EOS_TOKEN, batch_to_ids
from ner_app.bilm.document import MAX_POSITIONS, Context, document_contexts, stream_batches
from ner_app.errors import MissingFileError
from ner_app.pretrain.vocab import SoftmaxVocab
from ner_app.text.batching import budget_batches
from ner_app.text.conll import DOCSTART, conll_documents, parse_conll
from ner_app.text.tags import is_tag

IGNORE = -1  # target of a position with nothing to predict
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


def read_documents(path: str | Path, max_sentences: int | None = None) -> list[Document]:
    """``split_documents`` of a file, cut after its first ``max_sentences`` sentences (null: all)."""
    return first_sentences(split_documents(read_lines(path, "held-out text"), str(path)), max_sentences)


def read_lines(path: str | Path, what: str) -> list[str]:
    """A UTF-8 text file's lines; an unreadable file is one MissingFileError naming the path and ``what``."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.reason if isinstance(err, UnicodeDecodeError) else err.strerror
        raise MissingFileError(f"{path}: cannot read {what}: {reason}") from None


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


def read_sentences(path: str | Path) -> list[list[str]]:
    """Held-out sentences of a text file (one sentence per line) or a CoNLL file (detected), in order."""
    return [sentence for document in read_documents(path) for sentence in document]


def _targets(sentences: Sequence[Sequence[str]], vocab: SoftmaxVocab) -> torch.Tensor:
    """(B, T + 2) softmax ids of every ``<S> w1 .. wn </S>``, ``IGNORE``-padded."""
    targets = torch.full((len(sentences), max(len(s) for s in sentences) + 2), IGNORE, dtype=torch.long)
    for row, words in enumerate(sentences):
        targets[row, : len(words) + 2] = torch.tensor(vocab.encode([BOS_TOKEN, *words, EOS_TOKEN]))
    return targets


def sentence_batches(
    sentences: Sequence[Sequence[str]], vocab: SoftmaxVocab, batch_size: int
) -> list[dict[str, torch.Tensor]]:
    """Stateless evaluation batches, sentences sorted by length: ``char_ids`` (B, T, 50) without boundaries
    (the biLM adds them) and ``targets`` (B, T + 2) softmax ids of ``<S> w1 .. wn </S>``, ``IGNORE``-padded.
    """
    batches = []
    for group in budget_batches([len(s) for s in sentences], batch_size, None):  # by length, no token budget
        chunk = [list(sentences[j]) for j in group]
        batches.append({"char_ids": batch_to_ids(chunk), "targets": _targets(chunk, vocab)})
    return batches


def document_batches(
    documents: Sequence[Document], vocab: SoftmaxVocab, max_positions: int = MAX_POSITIONS
) -> list[dict[str, Any]]:
    """Document-context evaluation batches: ``contexts`` (every sentence in its stream, whole streams per
    batch, so each stream runs once) and ``targets`` (B, T + 2) as in ``sentence_batches``. A document longer
    than ``max_positions`` is read in chunks of whole sentences, as document-context ELMo reads it."""
    contexts: list[Context] = [c for d in documents for c in document_contexts(d, max_positions)]
    streams = list(dict.fromkeys(stream for stream, _ in contexts))
    members: dict[Any, list[Context]] = {stream: [] for stream in streams}
    for context in contexts:
        members[context[0]].append(context)
    batches = []
    for group in stream_batches([sum(len(s) + 2 for s in stream) for stream in streams]):
        chosen = [c for i in group for c in members[streams[i]]]
        batches.append({"contexts": chosen, "targets": _targets([s[k] for s, k in chosen], vocab)})
    return batches


def context_batches(
    documents: Sequence[Document], vocab: SoftmaxVocab, context: str, batch_size: int = 64
) -> list[dict[str, Any]]:
    """Evaluation batches of one held-out context: ``sentence`` (each alone) or ``document`` (streams)."""
    if context == "document":
        return document_batches(documents, vocab)
    return sentence_batches([s for d in documents for s in d], vocab, batch_size)


def shard_batches(batches: Sequence[dict[str, Any]], rank: int, world_size: int) -> list[dict[str, Any]]:
    """Process ``rank``'s share of evaluation batches: batches rank, rank + W, ..., each with its ``index`` in
    ``batches``, then ``{"index": -1}`` fillers up to ceil(n / W), so that every process runs as many steps
    (a DDP step is a collective call on every process). The shares are disjoint and cover ``batches``.
    """
    rounds = -(-len(batches) // world_size)
    share: list[dict[str, Any]] = [{**batches[k], "index": k} for k in range(rank, len(batches), world_size)]
    return share + [{"index": -1}] * (rounds - len(share))


class BatchIterable:
    """A fixed list of batches as one loader (Lightning would take a plain list for several loaders)."""

    def __init__(self, batches: list[dict[str, Any]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)
