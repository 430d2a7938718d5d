"""The outputs of the TF-Hub ELMo module (tfhub.dev/google/elmo/3), by name, from our biLM's layers.

Names and meaning (docs/serving.md): ``word_emb`` the token representation (B, T, P), stored once (our
layer 0 is it duplicated, [e; e]); ``lstm_outputs{j}`` LSTM layer j as [forward; backward] (B, T, 2P);
``elmo`` the scalar mix of all L+1 layers (B, T, 2P); ``default`` the mean of ``elmo`` over each sentence's
tokens (B, 2P). Sentence boundaries are removed and padded positions are exactly 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ner_app.bilm.bilm import BidirectionalLM, remove_sentence_boundaries
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.scalar_mix import ScalarMix


def output_names(n_lstm_layers: int = 2) -> tuple[str, ...]:
    """The output names in TF-Hub's order; a biLM with L LSTM layers has lstm_outputs1 .. lstm_outputsL."""
    return ("word_emb", *(f"lstm_outputs{j}" for j in range(1, n_lstm_layers + 1)), "elmo", "default")


def hub_tokens(
    inputs: Sequence[str] | Sequence[Sequence[str]], sequence_len: Sequence[int] | None = None
) -> list[list[str]]:
    """The token lists of either TF-Hub signature.

    "default": untokenised strings, split on spaces with empty pieces dropped (as ``tf.string_split`` does).
    "tokens": token lists, each cut to its ``sequence_len`` when given (the rest is padding, often "").
    """
    if isinstance(inputs, str):
        raise ValueError("inputs must be a list of sentences, not one string")
    if all(isinstance(item, str) for item in inputs):
        if sequence_len is not None:
            raise ValueError("sequence_len goes with token lists (the 'tokens' signature), not strings")
        return [[t for t in str(item).split(" ") if t] for item in inputs]
    if any(isinstance(item, str) for item in inputs):
        raise ValueError("inputs mix strings and token lists: give one or the other")
    tokens = [list(item) for item in inputs]
    if sequence_len is None:
        return tokens
    if len(sequence_len) != len(tokens):
        raise ValueError(f"{len(sequence_len)} sequence lengths for {len(tokens)} sentences")
    for i, (row, n) in enumerate(zip(tokens, sequence_len, strict=True)):
        if not 0 <= n <= len(row):
            raise ValueError(f"sequence_len[{i}] = {n} is outside 0..{len(row)} (the row's width)")
    return [row[:n] for row, n in zip(tokens, sequence_len, strict=True)]


@dataclass(frozen=True)
class HubOutputs:
    """TF-Hub ELMo's outputs; ``outputs["lstm_outputs1"]`` etc. work as with ``as_dict=True``."""

    word_emb: torch.Tensor  # (B, T, P)
    lstm_outputs: tuple[torch.Tensor, ...]  # L x (B, T, 2P)
    elmo: torch.Tensor  # (B, T, 2P)
    default: torch.Tensor  # (B, 2P)
    mask: torch.Tensor  # (B, T) bool, True at real tokens
    sequence_len: torch.Tensor  # (B,) long

    @property
    def names(self) -> tuple[str, ...]:
        return output_names(len(self.lstm_outputs))

    def as_dict(self) -> dict[str, torch.Tensor]:
        """Every output by name (TF-Hub's order), then ``sequence_len`` and ``mask``."""
        named = [self.word_emb, *self.lstm_outputs, self.elmo, self.default]
        return {
            **dict(zip(self.names, named, strict=True)),
            "sequence_len": self.sequence_len,
            "mask": self.mask,
        }

    def __getitem__(self, name: str) -> torch.Tensor:
        outputs = self.as_dict()
        if name not in outputs:
            raise KeyError(f"no output {name!r}; expected one of {', '.join(outputs)}")
        return outputs[name]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x (B, T, D), mask (B, T) bool -> the mean over each row's unmasked positions (B, D); 0 for an empty row."""
    weights = mask.to(x.dtype)[:, :, None]  # (B, T, 1)
    counts = weights.sum(dim=1).clamp(min=1.0)  # (B, 1): an empty sentence gives 0 / 1, not 0 / 0
    return (x * weights).sum(dim=1) / counts


def hub_outputs_from_layers(layers: Sequence[torch.Tensor], mask: torch.Tensor, mix: ScalarMix) -> HubOutputs:
    """The biLM's L+1 layers (B, T+2, 2P) with <S>/</S> and their mask (B, T+2) -> HubOutputs (boundaries gone).

    The mix sees the boundaries, as ``Elmo`` and the reference do (they count in its layer-norm statistics).
    """
    half = layers[0].shape[-1] // 2
    elmo, token_mask = remove_sentence_boundaries(mix(layers, mask), mask)  # (B, T, 2P), (B, T)
    word_emb, _ = remove_sentence_boundaries(layers[0][..., :half], mask)  # layer 0 is [e; e]: keep one e
    lstm_outputs = tuple(remove_sentence_boundaries(layer, mask)[0] for layer in layers[1:])
    return HubOutputs(
        word_emb=word_emb,
        lstm_outputs=lstm_outputs,
        elmo=elmo,
        default=masked_mean(elmo, token_mask),
        mask=token_mask,
        sequence_len=token_mask.sum(dim=1),
    )


class HubElmo(nn.Module):
    """A biLM with one scalar mix that answers like the TF-Hub ELMo module (both of its signatures).

    ``mix``: a ``ScalarMix`` over the L+1 layers (e.g. one a tagger learned), the L+1 pre-softmax weights
    of a new trainable one (gamma 1), or None for uniform weights. The biLM is used as given: wrap calls in
    ``torch.inference_mode()`` when no gradient is wanted.
    """

    def __init__(self, bilm: BidirectionalLM, mix: ScalarMix | Sequence[float] | None = None) -> None:
        super().__init__()
        self.bilm = bilm
        if not isinstance(mix, ScalarMix):
            mix = ScalarMix(bilm.num_layers, initial_scalar_parameters=mix)
        if mix.mixture_size != bilm.num_layers:
            raise ValueError(f"a ScalarMix of {mix.mixture_size} layers for a biLM of {bilm.num_layers}")
        self.mix = mix

    @property
    def output_names(self) -> tuple[str, ...]:
        return output_names(self.bilm.num_layers - 1)

    def forward(
        self, inputs: Sequence[str] | Sequence[Sequence[str]], sequence_len: Sequence[int] | None = None
    ) -> HubOutputs:
        """Untokenised strings, or token lists with optional ``sequence_len`` -> HubOutputs."""
        tokens = hub_tokens(inputs, sequence_len)
        if not tokens:
            raise ValueError("no sentences given")
        device = next(self.bilm.parameters()).device
        out = self.bilm(batch_to_ids(tokens).to(device))
        return hub_outputs_from_layers(out.layers, out.mask, self.mix)
