"""Held-out text for biLM perplexity in stateless evaluation batches, read as sentences or as documents (the
documents of ``documents.read_documents``).

Sentence context runs every sentence alone from zero state (``sentence_batches``). Document context reads a
document's sentences as one stream, exactly as document-context ELMo does (docs/document_context.md), and
scores the same predictions: every sentence's words and its ``</S>`` forward, its ``<S>`` and words backward,
so the two perplexities count the same tokens and compare directly (``document_batches``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from ner_app.bilm.char_mapper import BOS_TOKEN, EOS_TOKEN, batch_to_ids
from ner_app.bilm.document import MAX_POSITIONS, Context, Stream, document_contexts, stream_batches
from ner_app.pretrain.batches import IGNORE, EvaluationBatch
from ner_app.pretrain.documents import Document
from ner_app.pretrain.vocab import SoftmaxVocab
from ner_app.text.batching import budget_batches


def _targets(sentences: Sequence[Sequence[str]], vocab: SoftmaxVocab) -> torch.Tensor:
    """(B, T + 2) softmax ids of every ``<S> w1 .. wn </S>``, ``IGNORE``-padded."""
    targets = torch.full((len(sentences), max(len(s) for s in sentences) + 2), IGNORE, dtype=torch.long)
    for row, words in enumerate(sentences):
        targets[row, : len(words) + 2] = torch.tensor(vocab.encode([BOS_TOKEN, *words, EOS_TOKEN]))
    return targets


def sentence_batches(
    sentences: Sequence[Sequence[str]], vocab: SoftmaxVocab, batch_size: int
) -> list[EvaluationBatch]:
    """Stateless evaluation batches, sentences sorted by length: ``char_ids`` (B, T, 50) without boundaries
    (the biLM adds them) and ``targets`` (B, T + 2) softmax ids of ``<S> w1 .. wn </S>``, ``IGNORE``-padded.
    """
    batches: list[EvaluationBatch] = []
    for group in budget_batches([len(s) for s in sentences], batch_size, None):  # by length, no token budget
        chunk = [list(sentences[j]) for j in group]
        batches.append({"char_ids": batch_to_ids(chunk), "targets": _targets(chunk, vocab)})
    return batches


def document_batches(
    documents: Sequence[Document], vocab: SoftmaxVocab, max_positions: int = MAX_POSITIONS
) -> list[EvaluationBatch]:
    """Document-context evaluation batches: ``contexts`` (every sentence in its stream, whole streams per
    batch, so each stream runs once) and ``targets`` (B, T + 2) as in ``sentence_batches``. A document longer
    than ``max_positions`` is read in chunks of whole sentences, as document-context ELMo reads it."""
    contexts: list[Context] = [c for d in documents for c in document_contexts(d, max_positions)]
    streams = list(dict.fromkeys(stream for stream, _ in contexts))
    members: dict[Stream, list[Context]] = {stream: [] for stream in streams}
    for context in contexts:
        members[context[0]].append(context)
    batches: list[EvaluationBatch] = []
    for group in stream_batches([sum(len(s) + 2 for s in stream) for stream in streams]):
        chosen = [c for i in group for c in members[streams[i]]]
        batches.append({"contexts": chosen, "targets": _targets([s[k] for s, k in chosen], vocab)})
    return batches


def context_batches(
    documents: Sequence[Document], vocab: SoftmaxVocab, context: str, batch_size: int = 64
) -> list[EvaluationBatch]:
    """Evaluation batches of one held-out context: ``sentence`` (each alone) or ``document`` (streams)."""
    if context == "document":
        return document_batches(documents, vocab)
    return sentence_batches([s for d in documents for s in d], vocab, batch_size)


def shard_batches(batches: Sequence[EvaluationBatch], rank: int, world_size: int) -> list[EvaluationBatch]:
    """Process ``rank``'s share of evaluation batches: batches rank, rank + W, ..., each with its ``index`` in
    ``batches``, then ``{"index": -1}`` fillers up to ceil(n / W), so that every process runs as many steps
    (a DDP step is a collective call on every process). The shares are disjoint and cover ``batches``.
    """
    rounds = -(-len(batches) // world_size)
    share: list[EvaluationBatch] = [{**batches[k], "index": k} for k in range(rank, len(batches), world_size)]
    filler: EvaluationBatch = {"index": -1}
    return share + [filler] * (rounds - len(share))


class BatchIterable:
    """A fixed list of batches as one loader (Lightning would take a plain list for several loaders)."""

    def __init__(self, batches: list[EvaluationBatch]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[EvaluationBatch]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)
