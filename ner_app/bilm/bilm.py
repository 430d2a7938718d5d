"""The bidirectional language model of ELMo: token encoder + two LSTM stacks, L+1 layer outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from ner_app.bilm.char_cnn import CharCNN, TokenEncoder, masked_positions
from ner_app.bilm.char_mapper import BOS_IDS, EOS_IDS
from ner_app.bilm.lstm import ElmoLstm, LstmCellWithProjection, TorchLstmUse


class BiLMOutput(NamedTuple):
    """L+1 layers (B, T+2, 2P) with <S>/</S> included, and the mask (B, T+2) bool."""

    layers: list[torch.Tensor]
    mask: torch.Tensor


def add_sentence_boundaries(char_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, 50) -> ids (B, T+2, 50) with <S> at 0 and </S> at len+1 of every row, and mask (B, T+2)."""
    batch, steps, width = char_ids.shape
    lengths = masked_positions(char_ids).sum(dim=1)  # (B,)
    ids = char_ids.new_zeros(batch, steps + 2, width)
    ids[:, 1 : steps + 1] = char_ids
    ids[:, 0] = torch.tensor(BOS_IDS, device=char_ids.device)
    ids[torch.arange(batch, device=char_ids.device), lengths + 1] = torch.tensor(
        EOS_IDS, device=char_ids.device
    )
    return ids, masked_positions(ids)


def remove_sentence_boundaries(tensor: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T+2, D), mask (B, T+2) -> (B, T, D) without <S>/</S>, zero at padded positions, and mask (B, T)."""
    lengths = mask.sum(dim=1) - 2  # (B,)
    steps = tensor.shape[1] - 2
    new_mask = torch.arange(steps, device=mask.device)[None, :] < lengths[:, None]  # (B, T)
    return tensor[:, 1:-1] * new_mask[:, :, None].to(tensor.dtype), new_mask


class BidirectionalLM(nn.Module):
    """ELMo's biLM (Peters et al. 2018, section 3.1): a character-CNN token encoder under two LSTM stacks.

    ``forward`` adds the sentence boundaries itself and returns all L+1 layers: layer 0 is the token
    representation duplicated [e; e], layer j is [forward_j; backward_j]. Padded positions are exactly 0.
    ``torch_lstm`` and ``trim_tail`` pick the faster code paths (``LstmCellWithProjection``, ``CharCNN``).
    """

    def __init__(
        self,
        char_dim: int,
        filters: Sequence[Sequence[int]],
        n_highway: int,
        lstm_dim: int,
        projection_dim: int,
        n_layers: int,
        cell_clip: float | None,
        proj_clip: float | None,
        use_skip_connections: bool,
        activation: str = "relu",
        stateful: bool = False,
        dropout: float = 0.0,
        torch_lstm: TorchLstmUse = "auto",
        trim_tail: bool = True,
    ) -> None:
        super().__init__()
        self.token_encoder = TokenEncoder(char_dim, filters, n_highway, projection_dim, activation, trim_tail)
        self.lstm = ElmoLstm(
            projection_dim,
            lstm_dim,
            projection_dim,
            n_layers,
            cell_clip,
            proj_clip,
            use_skip_connections,
            stateful=stateful,
            dropout=dropout,
            torch_lstm=torch_lstm,
        )
        self.projection_dim = projection_dim

    @property
    def num_layers(self) -> int:
        """Number of output layers, L+1."""
        return self.lstm.n_layers + 1

    @property
    def output_dim(self) -> int:
        """Size of every output layer, 2P."""
        return 2 * self.projection_dim

    @property
    def stateful(self) -> bool:
        return self.lstm.stateful

    @stateful.setter
    def stateful(self, value: bool) -> None:
        self.lstm.stateful = value
        self.lstm.reset_states()

    def reset_states(self) -> None:
        """Forget the state carried between calls (stateful mode)."""
        self.lstm.reset_states()

    def forward(self, char_ids: torch.Tensor) -> BiLMOutput:
        """char_ids (B, T, 50) without boundaries -> BiLMOutput with layers (B, T+2, 2P)."""
        ids, mask = add_sentence_boundaries(char_ids)  # (B, T+2, 50), (B, T+2)
        distinct, inverse = self.token_encoder.encode_distinct(ids[mask])  # (U, P), (N,)
        rows = torch.zeros(mask.shape, dtype=torch.long, device=mask.device).masked_scatter(
            mask, inverse
        )  # (B, T+2)
        embeddings = distinct[rows] * mask[:, :, None].to(distinct.dtype)  # (B, T+2, P)
        return self.forward_embeddings(embeddings, mask, (distinct, rows))

    def forward_embeddings(
        self,
        embeddings: torch.Tensor,
        mask: torch.Tensor,
        distinct: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> BiLMOutput:
        """Token representations (B, T+2, P) with boundaries, mask (B, T+2) -> BiLMOutput.

        ``distinct`` (optional): the distinct representations (U, P) and each position's row (B, T+2).
        """
        layers = self.lstm(embeddings, mask, distinct)
        layer0 = torch.cat([embeddings, embeddings], dim=-1) * mask[:, :, None].to(embeddings.dtype)
        return BiLMOutput([layer0, *layers], mask)


def set_code_paths(
    module: nn.Module,
    torch_lstm: TorchLstmUse | None = None,
    trim_tail: bool | None = None,
    argmax_grad: bool | None = None,
) -> None:
    """Set the code path of every biLM cell and char CNN inside ``module`` (a biLM, or a model holding one, as
    built by the library); None keeps a setting. Every path computes the same function, and ``argmax_grad`` the
    same gradient up to rounding in fp32 (docs/performance.md)."""
    for part in module.modules():
        if torch_lstm is not None and isinstance(part, LstmCellWithProjection):
            part.torch_lstm = torch_lstm
        if trim_tail is not None and isinstance(part, CharCNN):
            part.trim_tail = trim_tail
        if argmax_grad is not None and isinstance(part, CharCNN):
            part.argmax_grad = argmax_grad
