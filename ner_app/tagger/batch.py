"""``Batch``: the one type of a tagger batch, from the collate function to the model, the loops and predict;
``encode_batch`` makes one from tokenised sentences with the spec's vocabularies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import numpy as np
import torch

from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.document import Context
from ner_app.text.tags import UNKNOWN
from ner_app.text.vocab import Vocab


class Batch(TypedDict, total=False):
    """Tensors of a batch of B sentences of at most T tokens (a plain dict at run time, so that Lightning
    moves every tensor in it, the list ``elmo_layers`` included, to the device).

    Always present: ``words`` (B, T), ``chars`` (B, T, W), ``mask`` (B, T) bool, ``tokens`` (the raw tokens)
    and ``index`` (B,) (each sentence's position in its split); ``elmo_chars`` (B, T, 50) unless the batch was
    built without them (no biLM reads them). With gold tags: ``tags`` (B, T), ``known`` (B, T) bool (False
    where the tag is ``-``, not annotated, and at padding) and ``partial`` (whether any tag is ``-``: a host
    value, so that the loss need not ask the device).
    With the layer cache: ``elmo_layers`` L+1 x (B, T+2, 2P) and ``elmo_mask`` (B, T+2); in document context
    without it: ``elmo_context`` (docs/document_context.md).
    """

    words: torch.Tensor
    chars: torch.Tensor
    elmo_chars: torch.Tensor
    mask: torch.Tensor
    tokens: list[list[str]]
    index: torch.Tensor
    tags: torch.Tensor
    known: torch.Tensor
    partial: bool
    elmo_layers: list[torch.Tensor]
    elmo_mask: torch.Tensor
    elmo_context: list[Context]  # document context without the cache: each sentence's stream and position


MAX_WORD_CHARS = 30  # the tagger's char CNN sees at most this many characters of a token


def encode_batch(
    sentences: Sequence[Sequence[str]],
    word_vocab: Vocab,
    char_vocab: Vocab,
    tags: Sequence[Sequence[str]] | None = None,
    tag_vocab: Vocab | None = None,
    index: Sequence[int] | None = None,
    max_word_chars: int = MAX_WORD_CHARS,
    elmo_chars: bool = True,
) -> Batch:
    """Tensors for a batch of non-empty tokenised sentences (and their tags in the training scheme).

    Keys: ``words`` (B, T), ``chars`` (B, T, W) with W the longest token capped at ``max_word_chars``,
    ``elmo_chars`` (B, T, 50) (unless ``elmo_chars`` is False), ``mask`` (B, T) bool, ``tokens`` (the raw tokens), ``index`` (B,) (default
    0..B-1) and, when ``tags`` are given, ``tags`` (B, T) (0 at padding, which the mask hides) and ``known``
    (B, T) bool: True where a tag is annotated (a ``-`` tag is not: its id is 0, which ``known`` hides), and
    ``partial``: whether any tag is ``-``.
    """
    lengths = [len(s) for s in sentences]
    if not sentences or min(lengths) == 0:
        raise ValueError("encode_batch needs at least one sentence and no empty sentences")
    batch, longest = len(sentences), max(lengths)
    width = max(1, min(max(len(t) for s in sentences for t in s), max_word_chars))
    # built in numpy: multi-threaded torch fills of small tensors were ~100x slower on a busy 2-core machine
    words = np.zeros((batch, longest), dtype=np.int64)  # (B, T)
    chars = np.zeros((batch, longest, width), dtype=np.int64)  # (B, T, W)
    mask = np.zeros((batch, longest), dtype=bool)  # (B, T)
    for b, sentence in enumerate(sentences):
        n = len(sentence)
        words[b, :n] = word_vocab.encode(sentence)
        mask[b, :n] = True
        for j, token in enumerate(sentence):
            ids = char_vocab.encode(token[:width])
            chars[b, j, : len(ids)] = ids

    out: Batch = {
        "words": torch.from_numpy(words),
        "chars": torch.from_numpy(chars),
        "mask": torch.from_numpy(mask),
        "tokens": [list(s) for s in sentences],
        "index": torch.tensor(list(index) if index is not None else range(batch), dtype=torch.long),  # (B,)
    }
    if elmo_chars:
        out["elmo_chars"] = batch_to_ids(sentences)  # (B, T, 50)
    if tags is not None:
        if tag_vocab is None:
            raise ValueError("encode_batch got tags but no tag_vocab")
        if [len(t) for t in tags] != lengths:
            raise ValueError("encode_batch: every tag sequence must be as long as its sentence")
        tag_ids = np.zeros((batch, longest), dtype=np.int64)  # (B, T)
        known = np.zeros((batch, longest), dtype=bool)  # (B, T)
        partial = False
        for b, sentence_tags in enumerate(tags):
            annotated = [t != UNKNOWN for t in sentence_tags]
            partial = partial or not all(annotated)
            known[b, : len(sentence_tags)] = annotated
            tag_ids[b, : len(sentence_tags)] = tag_vocab.encode(
                [t if a else tag_vocab.itos[0] for t, a in zip(sentence_tags, annotated, strict=True)]
            )
        out["tags"] = torch.from_numpy(tag_ids)
        out["known"] = torch.from_numpy(known)
        out["partial"] = partial
    return out


def row_lengths(batch: Batch) -> torch.Tensor:
    """Each row's length (B,) long on the CPU: counted from the raw tokens where the batch has them, so that
    nothing waits for the device; from the mask otherwise (a batch traced for ONNX has no tokens)."""
    if "tokens" in batch:
        return torch.tensor([len(tokens) for tokens in batch["tokens"]], dtype=torch.long)
    return batch["mask"].sum(dim=1).cpu()


def full_steps(batch: Batch) -> int:
    """How many leading steps are real in every row, the shortest row's length, where the batch's tokens say it
    on the host; 0 (unknown) otherwise. The CRF's loops skip their padding selects there."""
    return min(map(len, batch["tokens"])) if "tokens" in batch else 0


def batch_to(batch: Batch, device: torch.device) -> Batch:
    """The batch with its tensors (``elmo_layers``' included) on ``device``; the others are shared as they are."""
    if device.type == "cpu" and batch["words"].device.type == "cpu":
        return batch
    moved: dict[str, object] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            moved[key] = value.to(device)
        elif isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
            moved[key] = [v.to(device) for v in value]
        else:
            moved[key] = value
    return moved  # type: ignore[return-value]
