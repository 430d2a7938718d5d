"""The ``Elmo`` module: task-specific mixes of a frozen biLM's layers (Peters et al. 2018, section 3.2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from ner_app.bilm.bilm import BidirectionalLM, BiLMOutput, remove_sentence_boundaries
from ner_app.bilm.scalar_mix import ScalarMix
from ner_app.bilm.token_cache import TokenCache


class ElmoOutput(NamedTuple):
    """One or more mixed representations (B, T, 2P) and their mask (B, T) bool."""

    representations: list[torch.Tensor]
    mask: torch.Tensor


class Elmo(nn.Module):
    """``num_output_representations`` ScalarMixes over the L+1 layers of a biLM, with dropout after mixing.

    The biLM is frozen by default (no gradient, kept in eval mode even when a parent calls ``.train()``).
    Sentence boundaries are removed unless ``keep_sentence_boundaries``. With ``vocab_to_cache`` the token
    representations of those words are computed once and ``forward(word_ids=...)`` uses them.
    """

    def __init__(
        self,
        bilm: BidirectionalLM,
        num_output_representations: int = 1,
        dropout: float = 0.5,
        do_layer_norm: bool = False,
        requires_grad: bool = False,
        keep_sentence_boundaries: bool = False,
        vocab_to_cache: Sequence[str] | None = None,
        scalar_mix_parameters: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        self.bilm = bilm
        self.requires_grad = requires_grad
        if not requires_grad:
            bilm.requires_grad_(False)
            bilm.eval()
        self.scalar_mixes = nn.ModuleList(
            ScalarMix(
                bilm.num_layers, do_layer_norm, scalar_mix_parameters, trainable=scalar_mix_parameters is None
            )
            for _ in range(num_output_representations)
        )
        self.dropout = nn.Dropout(dropout)
        self.keep_sentence_boundaries = keep_sentence_boundaries
        self.token_cache = (
            TokenCache(bilm.token_encoder, vocab_to_cache) if vocab_to_cache is not None else None
        )

    @property
    def output_dim(self) -> int:
        return self.bilm.output_dim

    def train(self, mode: bool = True) -> Elmo:
        """Switch the mixes' dropout; a frozen biLM stays in eval mode."""
        super().train(mode)
        if not self.requires_grad:
            self.bilm.eval()
        return self

    def layers(
        self, char_ids: torch.Tensor | None = None, word_ids: torch.Tensor | None = None
    ) -> BiLMOutput:
        """The raw biLM layers (B, T+2, 2P) with boundaries, from char ids (B, T, 50) or cached word ids (B, T)."""
        if (char_ids is None) == (word_ids is None):
            raise ValueError("give exactly one of char_ids and word_ids")
        if word_ids is not None:
            if self.token_cache is None:
                raise ValueError("word_ids need an Elmo built with vocab_to_cache")
            embeddings, mask = self.token_cache(word_ids)
            return self.bilm.forward_embeddings(embeddings, mask)
        return self.bilm(char_ids)

    def forward(
        self, char_ids: torch.Tensor | None = None, word_ids: torch.Tensor | None = None
    ) -> ElmoOutput:
        """char ids (B, T, 50) or word ids (B, T) -> ElmoOutput with representations (B, T, 2P)."""
        if self.requires_grad:
            out = self.layers(char_ids, word_ids)
        else:
            with torch.no_grad():
                out = self.layers(char_ids, word_ids)
        return self.mix(out.layers, out.mask)

    def mix(self, layers: Sequence[torch.Tensor], mask: torch.Tensor) -> ElmoOutput:
        """Mix precomputed layers (B, T+2, 2P) with boundaries (e.g. read from a cache) -> ElmoOutput."""
        representations = []
        for scalar_mix in self.scalar_mixes:
            mixed = scalar_mix(layers, mask)  # (B, T+2, 2P)
            if self.keep_sentence_boundaries:
                out, out_mask = mixed * mask[:, :, None].to(mixed.dtype), mask
            else:
                out, out_mask = remove_sentence_boundaries(mixed, mask)
            representations.append(self.dropout(out))
        if not representations:
            out_mask = (
                mask if self.keep_sentence_boundaries else remove_sentence_boundaries(layers[0], mask)[1]
            )
        return ElmoOutput(representations, out_mask)

    def l2_penalty(self) -> torch.Tensor:
        """Sum of ||w||^2 over the pre-softmax weights of every mix (the paper's lambda term, without lambda)."""
        return sum((mix.l2_penalty() for mix in self.scalar_mixes), torch.zeros(()))

    def learned_mixes(self) -> list[dict[str, list[float] | float]]:
        """softmax(w) and gamma of every mix, as plain numbers (metrics.json "elmo_mix")."""
        mixes: list[ScalarMix] = list(self.scalar_mixes)
        return [mix.learned() for mix in mixes]
