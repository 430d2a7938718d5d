"""The word feature: a trainable embedding of the training words and frozen pretrained rows (GloVe) of the
words only the pretrained vectors know."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ner_app.tagger.features.base import (
    FeatureInputs,
    FeatureOutput,
    FeatureSpec,
    InputFeature,
    SpecView,
    register_feature,
)


class WordEmbedding(InputFeature):
    """ids (B, T) -> (B, T, word_dim): trainable rows for the train words (ids below ``num_words``), frozen rows
    (looked up, never trained) for the pretrained words after them."""

    frozen_word_vectors: torch.Tensor  # buffer (V - num_words, word_dim)

    def __init__(self, num_words: int, word_dim: int, frozen_words: int = 0) -> None:
        super().__init__()
        self.word_embed = nn.Embedding(num_words, word_dim, padding_idx=0)
        self.register_buffer("frozen_word_vectors", torch.zeros(frozen_words, word_dim))
        self.output_dim = word_dim

    def init_word_embeddings(self, vectors: torch.Tensor) -> None:
        """Copy pretrained vectors (V, word_dim), e.g. GloVe: train words first, then the frozen words."""
        n = self.word_embed.num_embeddings
        with torch.no_grad():
            self.word_embed.weight.copy_(vectors[:n])
            self.frozen_word_vectors.copy_(vectors[n:])

    def embed_words(self, words: torch.Tensor) -> torch.Tensor:
        """words (B, T) -> (B, T, word_dim)."""
        n = self.word_embed.num_embeddings
        trainable = self.word_embed(words.clamp(max=n - 1))
        if self.frozen_word_vectors.shape[0] == 0:
            return trainable
        frozen = nn.functional.embedding((words - n).clamp(min=0), self.frozen_word_vectors)
        return torch.where((words >= n)[..., None], frozen, trainable)

    def forward(self, inputs: FeatureInputs) -> FeatureOutput:
        return FeatureOutput(self.embed_words(inputs["ids"]))


def word_ids(sentences: Sequence[Sequence[str]], spec: SpecView) -> torch.Tensor:
    """Word ids (B, T), 0 at padding."""
    vocab = spec.word_vocab
    # built in numpy: multi-threaded torch fills of small tensors were ~100x slower on a busy 2-core machine
    ids = np.zeros((len(sentences), max(map(len, sentences))), dtype=np.int64)  # (B, T)
    for b, sentence in enumerate(sentences):
        ids[b, : len(sentence)] = vocab.encode(sentence)
    return torch.from_numpy(ids)


@register_feature
@dataclass(frozen=True)
class WordsRef(FeatureSpec):
    """The word feature: its sizes (``model.word_dim``) and vocabulary (``vocab.words``) are the spec's."""

    name = "words"
    joined_rows = {("word_embed.weight", "frozen_word_vectors"): "words"}

    def build(self, spec: SpecView, resource: Any) -> WordEmbedding:
        trainable = spec.num_trainable_words
        return WordEmbedding(trainable, spec.sizes.word_dim, len(spec.word_vocab) - trainable)

    def encode(self, sentences: Sequence[Sequence[str]], spec: SpecView) -> FeatureInputs:
        return {"ids": word_ids(sentences, spec)}
