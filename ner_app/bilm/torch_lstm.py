"""The biLM's LSTM cell on torch's own LSTM kernel (cuDNN on a GPU), where the cell allows it.

``torch.nn.LSTM(proj_size=P)`` computes the same cell (Sak et al. 2014) but knows no cell or projection clip and
no state reset inside a sequence, so this path is taken only when both clips are null and no resets are asked
for. Its weights are the cell's own parameters, mapped on every call (differentiable): gate blocks TF
(i, j, f, o) -> torch (i, f, g = j, o); the file's ``B`` plus the constant forget bias goes to ``b_ih``,
``b_hh`` is zero; ``w_hr`` is the projection weight.
"""

from __future__ import annotations

import torch

from ner_app.bilm.recurrence import State
from ner_app.bilm.torch_compat import packed_lstm


def can_use_torch_lstm(
    clips: tuple[float | None, float | None], device: torch.device, resets: torch.Tensor | None, use: str
) -> bool:
    """Whether a cell with these (cell, projection) clips may run on torch's LSTM kernel: no clips, no resets,
    and CUDA (``use`` "auto") or ``use`` "on"."""
    if use == "off" or clips != (None, None):
        return False
    if resets is not None and bool(resets.any()):
        return False
    return use == "on" or device.type == "cuda"


def _to_torch_gate_order(tensor: torch.Tensor) -> torch.Tensor:
    """(4C, ...) with gate blocks (i, j, f, o) -> (4C, ...) with blocks (i, f, j, o)."""
    i, j, f, o = tensor.chunk(4, dim=0)
    return torch.cat([i, f, j, o])


def torch_lstm_weights(
    input_linearity: torch.nn.Linear,
    state_linearity: torch.nn.Linear,
    projection: torch.nn.Linear,
    forget_bias: float,
) -> list[torch.Tensor]:
    """A cell's layers (x W_x + B, h W_h, the projection) and TF's constant forget bias as torch's flat LSTM
    weights [w_ih, w_hh, b_ih, b_hh, w_hr] (one layer)."""
    bias = input_linearity.bias
    size_c = bias.shape[0] // 4
    forget = torch.zeros_like(bias)
    forget[2 * size_c : 3 * size_c] = forget_bias  # TF adds it at run time to the f block
    return [
        _to_torch_gate_order(input_linearity.weight),  # (4C, I)
        _to_torch_gate_order(state_linearity.weight),  # (4C, P)
        _to_torch_gate_order(bias + forget),  # (4C,)
        bias.new_zeros(bias.shape),  # (4C,)
        projection.weight,  # (P, C)
    ]


def torch_lstm_recurrence(
    weights: list[torch.Tensor], inputs: torch.Tensor, batch_sizes: list[int], state: State
) -> tuple[torch.Tensor, State]:
    """A cell over a packed sequence on torch's LSTM kernel, from its ``torch_lstm_weights``; the contract of
    ``LstmCellWithProjection.forward``: inputs (N, I) packed time-major rows sorted by length, state h (B, P),
    c (B, C) in the same row order; returns outputs (N, P) and every row's final state."""
    out, h, c = packed_lstm(inputs, batch_sizes, *state, weights)
    return out, (h, c)
