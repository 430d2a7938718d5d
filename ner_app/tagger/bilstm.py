"""The tagger's bidirectional LSTM layer over padded rows of different lengths (Lample et al. 2016)."""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ner_app.bilm.lstm import reverse_within_length

# One direction's parameters, as a one-direction nn.LSTM names them; the backward direction's end in "_reverse".
DIRECTION = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
# In fp32 the fused call, with its fixed cost per call, is slower than the packed loop on short batches:
# measured crossover about 10 steps for batches of 8-64 rows, never for a single row (docs/performance.md).
# Under CPU autocast the fused call always runs: only it computes the LSTM in bf16.
FUSED_MIN_STEPS = 10
FUSED_MIN_ROWS = 2


class BiLstm(nn.LSTM):
    """``nn.LSTM(input_size, hidden_size, batch_first=True, bidirectional=True)``, its parameters and state-dict
    keys, with ``rows``: padded rows and their lengths in, each position's [forward; backward] state out, zero
    past a row's length: what the layer gives over the rows packed.

    Why not packed rows on a CPU: there torch runs a ``PackedSequence`` step by step, a matrix product and the
    gate ops a time step and, backward, a gradient buffer filled a step; over padded rows it runs oneDNN's fused
    LSTM, forward and backward, each direction one call (faster from about 10 steps, and in bf16 under autocast:
    docs/performance.md). Padded rows are exact for the forward direction, whose padding comes after every real
    step, and for the backward one once each row is reversed within its length; each direction runs as a
    one-direction LSTM with its own weights. Short fp32 batches, a GPU (cuDNN takes packed rows as they are) and tracing for ONNX (ONNX's LSTM
    takes the lengths) keep the packed rows (``fused``).
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size, batch_first=True, bidirectional=True)
        # The one-direction twin that runs each direction's weights, unregistered (no state-dict keys) and on the
        # meta device: it holds no memory and draws nothing from the random stream.
        self.__dict__["twin"] = nn.LSTM(input_size, hidden_size, batch_first=True, device="meta")

    def rows(self, x: torch.Tensor, lengths: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), lengths (B,) on the CPU, mask (B, T) -> (B, T, 2H), zero where mask is False."""
        if not self.fused(x):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            return pad_packed_sequence(self(packed)[0], batch_first=True, total_length=x.shape[1])[0]
        forward = self.direction("", x)  # (B, T, H)
        backward = reverse_within_length(
            self.direction("_reverse", reverse_within_length(x, lengths)), lengths
        )
        return torch.cat([forward, backward], dim=-1).masked_fill(~mask[:, :, None], 0.0)  # (B, T, 2H)

    @staticmethod
    def fused(x: torch.Tensor) -> bool:
        """Whether padded rows x (B, T, D) take the fused call: on a CPU, not traced, and bf16 autocast or a batch
        large enough for the call to pay."""
        if not x.is_cpu or torch.jit.is_tracing():
            return False
        large = x.shape[0] >= FUSED_MIN_ROWS and x.shape[1] >= FUSED_MIN_STEPS
        return large or torch.is_autocast_enabled("cpu")

    def direction(self, suffix: str, x: torch.Tensor) -> torch.Tensor:
        """One direction's LSTM over padded rows x (B, T, D), from zero state -> (B, T, H)."""
        weights = {name: getattr(self, name + suffix) for name in DIRECTION}
        return functional_call(self.__dict__["twin"], weights, (x,))[0]
