"""Document-context ELMo (docs/document_context.md): a document's sentences read by the biLM as one stream.

Every sentence is wrapped in its own <S> ... </S> and the sentences are concatenated in order. The forward
LSTMs run left to right over the whole stream from zero state, the backward LSTMs right to left from zero
state, with no reset inside; layer 0 is the token encoder's output. A sentence's L+1 layers are the stream
positions of its own <S>, words and </S>: the layout of sentence mode, so they mix and cache the same way.
A one-sentence document is sentence mode exactly (its stream is the sentence with its boundaries).

A stream holds at most ``max_positions`` positions (tokens + 2 per sentence): a longer document is read as
consecutive chunks of whole sentences, each chunk its own stream (a single longer sentence is a chunk alone).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import torch

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.char_mapper import BOS_IDS, EOS_IDS, MAX_CHARS, token_to_ids
from ner_app.text.batching import MAX_POSITIONS, budget_batches

ContextMode = Literal["sentence", "document"]
BATCH_POSITIONS = 4096  # streams per biLM call: at most this many (padded) positions, which bounds memory
Stream = tuple[tuple[str, ...], ...]  # the sentences of one stream, in order
Context = tuple[Stream, int]  # a sentence in its stream: (the stream, the sentence's position in it)
# per stream, per sentence, its layers (L+1, n+2, D): what a frozen encoder reading streams gives
StreamReader = Callable[[Sequence[Stream]], list[list[torch.Tensor]]]
_KEY_DOMAIN = b"ner_app.document-context/1\x00"  # sentence-mode keys are JSON lists: never this prefix


def chunk_document(lengths: Sequence[int], max_positions: int = MAX_POSITIONS) -> list[range]:
    """Consecutive runs of a document's sentences (by their token counts) whose streams fit ``max_positions``."""
    if max_positions < 2:
        raise ValueError(f"max_positions must be at least 2 (<S> and </S>), got {max_positions}")
    chunks, start, used = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and used + n + 2 > max_positions:
            chunks.append(range(start, i))
            start, used = i, 0
        used += n + 2
    if len(lengths):
        chunks.append(range(start, len(lengths)))
    return chunks


def document_contexts(document: Sequence[Sequence[str]], max_positions: int = MAX_POSITIONS) -> list[Context]:
    """Every sentence of a document with the stream it is read in and its position there."""
    contexts: list[Context] = []
    for chunk in chunk_document([len(s) for s in document], max_positions):
        stream = tuple(tuple(document[i]) for i in chunk)
        contexts.extend((stream, k) for k in range(len(stream)))
    return contexts


def document_keys(document: Sequence[Sequence[str]], max_positions: int = MAX_POSITIONS) -> list[bytes]:
    """32-byte layer-cache keys of a document's sentences: the whole document, the cap and the position.

    Two sentences share a key only when their documents (every token, every sentence break) and positions are
    the same, so rows computed in one document context are never served in another; nor in sentence mode.
    """
    digest = hashlib.sha256(
        json.dumps([list(s) for s in document], ensure_ascii=True).encode("ascii")
    ).digest()
    head = _KEY_DOMAIN + f"{max_positions}\x00".encode()
    return [hashlib.sha256(head + digest + f"\x00{i}".encode()).digest() for i in range(len(document))]


def stream_char_ids(streams: Sequence[Sequence[Sequence[str]]]) -> torch.Tensor:
    """Char ids (B, S, 50) of streams without their outer <S> and </S>, which the biLM adds itself.

    Inside a stream, every sentence break is </S> <S>; padded positions are 0.
    """
    rows = []
    for sentences in streams:
        ids: list[tuple[int, ...]] = []
        for k, sentence in enumerate(sentences):
            if k:
                ids += [EOS_IDS, BOS_IDS]
            ids += [token_to_ids(t) for t in sentence]
        rows.append(ids)
    out = torch.zeros(len(rows), max((len(r) for r in rows), default=0), MAX_CHARS, dtype=torch.long)
    for b, ids in enumerate(rows):
        if ids:
            out[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def stream_layers(
    bilm: BidirectionalLM, streams: Sequence[Sequence[Sequence[str]]]
) -> list[list[torch.Tensor]]:
    """Per stream, per sentence: its L+1 layers (L+1, n+2, 2P), <S> and </S> included (call without grad)."""
    device = next(bilm.parameters()).device
    out = bilm(stream_char_ids(streams).to(device))  # the stateless biLM: zero state, one pass per direction
    stacked = torch.stack(out.layers, dim=0)  # (L+1, B, S+2, 2P)
    result = []
    for b, sentences in enumerate(streams):
        offset, rows = 0, []
        for sentence in sentences:
            rows.append(stacked[:, b, offset : offset + len(sentence) + 2])  # (L+1, n+2, 2P)
            offset += len(sentence) + 2
        result.append(rows)
    return result


def stream_batches(lengths: Sequence[int], budget: int | None = BATCH_POSITIONS) -> Iterator[list[int]]:
    """Indices of streams (by position counts) grouped by length so that rows x longest <= budget (or 1 row):
    ``budget_batches`` with no cap on the rows (None: no budget either, one batch)."""
    yield from budget_batches(lengths, None, budget)


def stream_positions(stream: Sequence[Sequence[str]]) -> int:
    return sum(len(s) + 2 for s in stream)


def context_layers(
    bilm: BidirectionalLM | StreamReader, contexts: Sequence[Context]
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Layers of a batch of sentences read in their streams, in ``BiLMOutput``'s layout: L+1 tensors
    (B, T+2, 2P), zero at padding, and the mask (B, T+2). Every distinct stream runs once (call without grad).
    ``bilm``: the biLM, or any frozen encoder's reader of streams (``stream_layers``' contract)."""
    read = (lambda chosen: stream_layers(bilm, chosen)) if isinstance(bilm, BidirectionalLM) else bilm
    streams = list(dict.fromkeys(stream for stream, _ in contexts))
    where = {stream: i for i, stream in enumerate(streams)}
    computed: list[list[torch.Tensor]] = [[] for _ in streams]
    for group in stream_batches([stream_positions(s) for s in streams]):
        for i, rows in zip(group, read([streams[i] for i in group]), strict=True):
            computed[i] = rows
    sentences = [computed[where[stream]][k] for stream, k in contexts]  # (L+1, n+2, 2P) each
    width = max(s.shape[1] for s in sentences)
    first = sentences[0]
    out = first.new_zeros(first.shape[0], len(sentences), width, first.shape[2])  # (L+1, B, T+2, 2P)
    for b, layers in enumerate(sentences):
        out[:, b, : layers.shape[1]] = layers
    lengths = torch.tensor([s.shape[1] for s in sentences], device=first.device)  # (B,)
    mask = torch.arange(width, device=first.device)[None, :] < lengths[:, None]  # (B, T+2)
    return list(out.unbind(0)), mask
