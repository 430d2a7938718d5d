"""``Batch``: the one type of a tagger batch, from the collate function to the model, the loops and predict;
``encode_batch`` makes one from tokenised sentences with the spec's vocabularies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
import torch

from ner_app.bilm.document import Context
from ner_app.text.tags import UNKNOWN

if TYPE_CHECKING:
    from ner_app.tagger.spec import TaggerSpec

__all__ = ["MAX_WORD_CHARS", "Batch", "Context", "batch_to", "encode_batch", "full_steps", "row_lengths"]


class Batch(TypedDict, total=False):
    """Tensors of a batch of B sentences of at most T tokens (a plain dict at run time, so that Lightning
    moves every tensor in it, nested dicts and lists included, to the device).

    Always present: ``mask`` (B, T) bool, ``tokens`` (the raw tokens), ``index`` (B,) (each sentence's position
    in its split) and ``features``: each input feature's tensors under its name (``tagger/features/``: what its
    ``encode`` gives, or what replaces it: the layer cache's layers, document contexts). With gold tags:
    ``tags`` (B, T), ``known`` (B, T) bool (False where the tag is ``-``, not annotated, and at padding) and
    ``partial`` (whether any tag is ``-``: a host value, so that the loss need not ask the device). A
    distillation batch has no tags but ``soft`` (B, T, K) float32: its teachers' tag marginals, 0 at padding.
    """

    mask: torch.Tensor
    tokens: list[list[str]]
    index: torch.Tensor
    tags: torch.Tensor
    known: torch.Tensor
    partial: bool
    soft: torch.Tensor
    features: dict[str, dict[str, Any]]


MAX_WORD_CHARS = 30  # the tagger's char CNN sees at most this many characters of a token


def encode_batch(
    sentences: Sequence[Sequence[str]],
    spec: TaggerSpec,
    tags: Sequence[Sequence[str]] | None = None,
    index: Sequence[int] | None = None,
    inputs: Mapping[str, dict[str, Any]] | None = None,
) -> Batch:
    """Tensors for a batch of non-empty tokenised sentences (and their tags in the training scheme).

    Keys: ``mask`` (B, T) bool, ``tokens`` (the raw tokens), ``index`` (B,) (default 0..B-1), ``features``:
    every feature of the spec's by name, ``inputs[name]`` where given, else the feature's ``encode``; and, when
    ``tags`` are given, ``tags`` (B, T) (0 at padding, which the mask hides) and ``known`` (B, T) bool: True
    where a tag is annotated (a ``-`` tag is not: its id is 0, which ``known`` hides), and ``partial``: whether
    any tag is ``-``.
    """
    lengths = [len(s) for s in sentences]
    if not sentences or min(lengths) == 0:
        raise ValueError("encode_batch needs at least one sentence and no empty sentences")
    batch, longest = len(sentences), max(lengths)
    mask = np.zeros((batch, longest), dtype=bool)  # (B, T)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    given = inputs or {}
    out: Batch = {
        "mask": torch.from_numpy(mask),
        "tokens": [list(s) for s in sentences],
        "index": torch.tensor(list(index) if index is not None else range(batch), dtype=torch.long),  # (B,)
        "features": {
            f.name: given[f.name] if f.name in given else f.encode(sentences, spec) for f in spec.features
        },
    }
    if tags is not None:
        tag_vocab = spec.tag_vocab
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
    """The batch with its tensors (those of its features' dicts and lists included) on ``device``; the others
    are shared as they are."""
    if device.type == "cpu" and batch["mask"].device.type == "cpu":
        return batch
    return cast(Batch, _moved(batch, device))


def _moved(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: _moved(v, device) for key, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
        return [v.to(device) for v in value]
    return value
