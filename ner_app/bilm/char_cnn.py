"""The biLM's context-independent token encoder (docs/bilm_reference.md section 2).

char ids (N, 50) -> CharCNN -> Highway -> linear projection -> token representation (N, P).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ner_app.bilm.char_mapper import MAX_CHARS, N_CHARACTERS
from ner_app.bilm.module_list import Layers

_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}


class CharCNN(nn.Module):
    """Character embeddings, one 1-D convolution per filter width, max over positions, then activation.

    ``trim_tail`` (default True): skip the padding positions that cannot change the result
    (``trim_constant_tail``); False convolves all 50 positions, the original code path.

    ``argmax_grad`` (default True): with autograd, each feature's max over positions passes its gradient to one
    window, the first maximum (``max(dim).values``), instead of splitting it among tied windows (``amax``, TF's
    ``reduce_max`` gradient, the original code path). In fp32 the ties are windows over the same characters (the
    padding tail), so the weights get the same gradient up to rounding; the backward pass skips ``amax``'s
    tie mask over every (token, filter, position). The forward values are the same either way.
    """

    def __init__(
        self,
        char_dim: int,
        filters: Sequence[Sequence[int]],
        activation: str = "relu",
        trim_tail: bool = True,
        argmax_grad: bool = True,
    ) -> None:
        super().__init__()
        self.trim_tail, self.argmax_grad = trim_tail, argmax_grad
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, found {activation!r}")
        # Row 0 is the "no character" padding id and stays zero: it is not stored in the weight file.
        self.char_embed = nn.Embedding(N_CHARACTERS, char_dim, padding_idx=0)
        self.convs = Layers(nn.Conv1d(char_dim, count, width) for width, count in filters)
        self.activation = activation
        self.output_dim = sum(count for _, count in filters)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (N, 50) long -> features (N, F)."""
        if self.trim_tail:
            char_ids = trim_constant_tail(char_ids, max(conv.kernel_size[0] for conv in self.convs))
        x = self.char_embed(char_ids).transpose(1, 2)  # (N, d, L), L <= 50
        act = _ACTIVATIONS[self.activation]
        one_window = self.argmax_grad and torch.is_grad_enabled()
        # Max over positions first, then the activation, as the reference does.
        return torch.cat(
            [act(_max_over_positions(conv(x), one_window)) for conv in self.convs], dim=-1
        )  # (N, F)


def _max_over_positions(features: torch.Tensor, one_window: bool) -> torch.Tensor:
    """(N, K, L) -> (N, K); ``one_window``: the gradient goes to the first maximum only (``CharCNN``)."""
    return features.max(dim=-1).values if one_window else features.amax(dim=-1)


def trim_constant_tail(char_ids: torch.Tensor, width: int) -> torch.Tensor:
    """Drop the char positions that cannot change any max-pooled feature: (N, 50) -> (N, L), L <= 50.

    Past a word's end every position of a row repeats the row's last id (the padding character), so every
    window that starts there sees the same characters and gives the same value. Keeping ``width`` positions
    past the longest word of the batch keeps one such window per row, so the max over windows is unchanged;
    the other constant windows are only repeats. Words are ~7 of the 50 ids, so this halves the CNN's work
    (docs/performance.md, "char CNN").
    """
    if char_ids.shape[0] == 0:
        return char_ids
    varying = char_ids != char_ids[:, -1:]  # (N, 50): differs from the row's constant tail
    positions = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)  # (50,)
    content = int((varying * positions).amax())  # last varying position + 1 over the batch, 0 if none
    keep = min(char_ids.shape[1], content + width)
    return char_ids[:, :keep]


class Highway(nn.Module):
    """Highway layers (Srivastava et al. 2015): y = g * relu(x W_t + b_t) + (1 - g) * x, g = sigmoid(x W_c + b_c)."""

    def __init__(self, dim: int, n_layers: int) -> None:
        super().__init__()
        # One matmul per layer: output rows [transform; carry].
        self.layers = Layers(nn.Linear(dim, 2 * dim) for _ in range(n_layers))
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, F) -> (N, F)."""
        for layer in self.layers:
            transform, carry = layer(x).split(self.dim, dim=-1)
            gate = torch.sigmoid(carry)
            x = gate * torch.relu(transform) + (1 - gate) * x
        return x


class TokenEncoder(nn.Module):
    """CharCNN + Highway + projection to the LSTM's projection size P.

    Every token is encoded on its own, so without autograd (inference, a frozen biLM) the distinct tokens of a
    call go through in chunks of ``chunk_tokens`` (None: all at once): the (tokens, filters, 50) activations
    of the widest convolution then stay bounded however many tokens a call has. With autograd (pretraining)
    all go at once, so that the gradients are those of one pass. ``trim_tail``: the char CNN's (``CharCNN``).
    """

    chunk_tokens: int | None = 1024

    def __init__(
        self,
        char_dim: int,
        filters: Sequence[Sequence[int]],
        n_highway: int,
        projection_dim: int,
        activation: str = "relu",
        trim_tail: bool = True,
    ) -> None:
        super().__init__()
        self.char_cnn = CharCNN(char_dim, filters, activation, trim_tail)
        self.highway = Highway(self.char_cnn.output_dim, n_highway)
        self.projection = nn.Linear(self.char_cnn.output_dim, projection_dim)
        self.output_dim = projection_dim

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (N, 50) -> token representations (N, P); computed once per distinct token."""
        if char_ids.shape[-1] != MAX_CHARS:
            raise ValueError(f"expected {MAX_CHARS} character ids per token, found {char_ids.shape[-1]}")
        encoded, inverse = self.encode_distinct(char_ids)
        return encoded[inverse]

    def encode_distinct(self, char_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """char_ids (N, 50) -> representations of the distinct tokens (U, P) and each token's row (N,)."""
        if char_ids.shape[-1] != MAX_CHARS:
            raise ValueError(f"expected {MAX_CHARS} character ids per token, found {char_ids.shape[-1]}")
        # Sentences repeat words ("the", ",", "."): encode each distinct id row once.
        unique, inverse = torch.unique(char_ids, dim=0, return_inverse=True)  # (U, 50), (N,)
        chunk = self.chunk_tokens
        if chunk is None or torch.is_grad_enabled() or len(unique) <= chunk:
            return self._encode(unique), inverse
        return self.embed_all(unique, chunk), inverse

    def _encode(self, char_ids: torch.Tensor) -> torch.Tensor:
        return self.projection(self.highway(self.char_cnn(char_ids)))

    def embed_all(self, char_ids: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
        """Encode many tokens (N, 50) in chunks, e.g. a whole vocabulary; returns (N, P)."""
        chunks = [self._encode(char_ids[i : i + batch_size]) for i in range(0, len(char_ids), batch_size)]
        return torch.cat(chunks) if chunks else char_ids.new_zeros(0, self.output_dim, dtype=torch.float)


def masked_positions(char_ids: torch.Tensor) -> torch.Tensor:
    """(B, T, 50) char ids -> (B, T) bool: a position is a token when any of its ids is > 0."""
    return (char_ids > 0).any(dim=-1)


__all__ = ["CharCNN", "Highway", "TokenEncoder", "masked_positions"]
