"""The character feature: the tagger's own char CNN over each word (Ma & Hovy 2016)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ner_app.tagger.char_features import WordCharCNN
from ner_app.tagger.features.base import (
    FeatureInputs,
    FeatureOutput,
    FeatureSpec,
    InputFeature,
    SpecView,
    register_feature,
)


class CharFeature(InputFeature):
    """char ids (B, T, W) -> (B, T, char_filters), by ``WordCharCNN``."""

    def __init__(self, num_chars: int, char_dim: int, filters: int, width: int) -> None:
        super().__init__()
        self.char_cnn = WordCharCNN(num_chars, char_dim, filters, width)
        self.output_dim = filters

    def forward(self, inputs: FeatureInputs) -> FeatureOutput:
        return FeatureOutput(self.char_cnn(inputs["ids"]))


def char_ids(sentences: Sequence[Sequence[str]], spec: SpecView) -> torch.Tensor:
    """Char ids (B, T, W), W the longest token capped at ``spec.max_word_chars``; 0 at padding."""
    vocab = spec.char_vocab
    width = max(1, min(max(len(t) for s in sentences for t in s), spec.max_word_chars))
    ids = np.zeros((len(sentences), max(map(len, sentences)), width), dtype=np.int64)  # (B, T, W)
    for b, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            row = vocab.encode(token[:width])
            ids[b, j, : len(row)] = row
    return torch.from_numpy(ids)


@register_feature
@dataclass(frozen=True)
class CharsRef(FeatureSpec):
    """The char CNN: its sizes (``model.char_*``) and vocabulary (``vocab.chars``) are the spec's."""

    name = "chars"
    vocab_axes = {"char_cnn.embed.weight": ("chars", None)}  # (C, char_dim)

    def build(self, spec: SpecView, resource: Any) -> CharFeature:
        s = spec.sizes
        return CharFeature(len(spec.char_vocab), s.char_dim, s.char_filters, s.char_width)

    def encode(self, sentences: Sequence[Sequence[str]], spec: SpecView) -> FeatureInputs:
        return {"ids": char_ids(sentences, spec)}
