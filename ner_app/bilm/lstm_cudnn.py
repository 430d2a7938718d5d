"""``LstmCellWithProjection`` on torch's own LSTM kernel (cuDNN on a GPU), for biLMs without clipping.

``torch.nn.LSTM(proj_size=P)`` computes the same cell (Sak et al. 2014) as ``LstmCellWithProjection``, but it
has no cell or projection clipping, and no state reset inside a sequence. So this path is taken only when
both clips are null (a biLM we pretrain ourselves may set them so in options.json) and no resets are asked
for (docs/pretraining_speed.md, "Fused path for GPUs"). The weights are the cell's own parameters, mapped on
every call (differentiable), so training through this path trains the cell:

- gate blocks: TF order (i, j, f, o) -> torch order (i, f, g = j, o);
- bias: the file's ``B`` plus the constant forget bias on the f block goes to ``b_ih``; ``b_hh`` is zero;
- ``w_hr`` is the projection weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch

if TYPE_CHECKING:  # lstm.py imports this module
    from ner_app.bilm.lstm import LstmCellWithProjection

State = tuple[torch.Tensor, torch.Tensor]  # h (B, P), c (B, C)
TorchLstmUse = Literal["auto", "on", "off"]


def to_torch_gate_order(tensor: torch.Tensor) -> torch.Tensor:
    """(4C, ...) with gate blocks (i, j, f, o) -> (4C, ...) with blocks (i, f, j, o)."""
    i, j, f, o = tensor.chunk(4, dim=0)
    return torch.cat([i, f, j, o])


def torch_lstm_weights(cell: LstmCellWithProjection) -> list[torch.Tensor]:
    """The cell's parameters as torch's flat LSTM weights [w_ih, w_hh, b_ih, b_hh, w_hr] (one layer)."""
    size_c = cell.cell_size
    bias = cell.input_linearity.bias
    forget = torch.zeros_like(bias)
    forget[2 * size_c : 3 * size_c] = cell.forget_bias  # TF adds it at run time to the f block
    return [
        to_torch_gate_order(cell.input_linearity.weight),  # (4C, I)
        to_torch_gate_order(cell.state_linearity.weight),  # (4C, P)
        to_torch_gate_order(bias + forget),  # (4C,)
        bias.new_zeros(bias.shape),  # (4C,)
        cell.projection.weight,  # (P, C)
    ]


def can_use_torch_lstm(
    cell: LstmCellWithProjection, device: torch.device, resets: torch.Tensor | None, use: str
) -> bool:
    """Whether ``cell`` may run on torch's LSTM kernel: no clips, no resets, and CUDA (``auto``) or ``on``."""
    if use == "off" or cell.cell_clip is not None or cell.proj_clip is not None:
        return False
    if resets is not None and bool(resets.any()):
        return False
    return use == "on" or device.type == "cuda"


def torch_lstm_recurrence(
    cell: LstmCellWithProjection, inputs: torch.Tensor, batch_sizes: list[int], state: State
) -> tuple[torch.Tensor, State]:
    """The cell over a packed sequence on torch's LSTM kernel; the contract of ``LstmCellWithProjection.forward``.

    inputs (N, I) packed time-major rows sorted by length; state h (B, P), c (B, C) in the same row order.
    Returns outputs (N, P) and every row's final state.
    """
    h0, c0 = state
    sizes = torch.tensor(batch_sizes, dtype=torch.int64)  # the kernel wants them on the CPU
    weights = torch_lstm_weights(cell)
    # _VF.lstm over PackedSequence data: (data, batch_sizes, hx, weights, has_biases, num_layers, dropout,
    # train, bidirectional); hx is (layers * directions, B, P) and (layers * directions, B, C).
    out, h, c = torch._VF.lstm(
        inputs, sizes, (h0[None].contiguous(), c0[None].contiguous()), weights, True, 1, 0.0, False, False
    )
    return out, (h[0], c[0])
