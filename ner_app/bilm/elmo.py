"""The ``Elmo`` module: task-specific mixes of a frozen biLM's layers (Peters et al. 2018, section 3.2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from ner_app.bilm.bilm import BidirectionalLM, BiLMOutput, remove_sentence_boundaries
from ner_app.bilm.module_list import Layers
from ner_app.bilm.scalar_mix import ScalarMix


class ElmoOutput(NamedTuple):
    """One or more mixed representations (B, T, 2P) without the sentence boundaries, and their mask (B, T)."""

    representations: list[torch.Tensor]
    mask: torch.Tensor


class Elmo(nn.Module):
    """``num_output_representations`` ScalarMixes over the L+1 layers of a frozen biLM, with dropout after
    mixing: one biLM pass feeds every mix (the paper's ELMo at the input and, optionally, at the output).

    The biLM gets no gradient and stays in eval mode even when a parent calls ``.train()``.
    ``scalar_mix_parameters`` fixes the pre-softmax weights of every mix (not trained): a reference mix.
    """

    def __init__(
        self,
        bilm: BidirectionalLM,
        num_output_representations: int = 1,
        dropout: float = 0.5,
        do_layer_norm: bool = False,
        scalar_mix_parameters: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        self.bilm = bilm
        bilm.requires_grad_(False)
        bilm.eval()
        self.scalar_mixes = Layers(
            ScalarMix(
                bilm.num_layers, do_layer_norm, scalar_mix_parameters, trainable=scalar_mix_parameters is None
            )
            for _ in range(num_output_representations)
        )
        self.dropout = nn.Dropout(dropout)

    @property
    def output_dim(self) -> int:
        return self.bilm.output_dim

    def train(self, mode: bool = True) -> Elmo:
        """Switch the mixes' dropout; the frozen biLM stays in eval mode."""
        super().train(mode)
        self.bilm.eval()
        return self

    def layers(self, char_ids: torch.Tensor) -> BiLMOutput:
        """The raw biLM layers (B, T+2, 2P) with boundaries, from char ids (B, T, 50)."""
        with torch.no_grad():
            return self.bilm(char_ids)

    def forward(self, char_ids: torch.Tensor) -> ElmoOutput:
        """char ids (B, T, 50) -> ElmoOutput with representations (B, T, 2P)."""
        out = self.layers(char_ids)
        return self.mix(out.layers, out.mask)

    def mix(self, layers: Sequence[torch.Tensor], mask: torch.Tensor) -> ElmoOutput:
        """Mix precomputed layers (B, T+2, 2P) with boundaries (e.g. read from a cache) -> ElmoOutput."""
        representations = []
        out_mask = remove_sentence_boundaries(layers[0], mask)[1]  # (B, T)
        for scalar_mix in self.scalar_mixes:
            mixed = scalar_mix(layers, mask)  # (B, T+2, 2P)
            out, out_mask = remove_sentence_boundaries(mixed, mask)
            representations.append(self.dropout(out))
        return ElmoOutput(representations, out_mask)

    def l2_penalty(self) -> torch.Tensor:
        """Sum of ||w||^2 over the pre-softmax weights of every mix (the paper's lambda term, without lambda)."""
        return sum((mix.l2_penalty() for mix in self.scalar_mixes), torch.zeros(()))

    def learned_mixes(self) -> list[dict[str, list[float] | float]]:
        """softmax(w) and gamma of every mix, as plain numbers (metrics.json "elmo_mix")."""
        return [mix.learned() for mix in self.scalar_mixes]
