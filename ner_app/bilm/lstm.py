"""The biLM's LSTMs (docs/bilm_reference.md sections 3-5): LSTM cells with projection, two direction stacks.

One stack serves inference and pretraining. A cell without clipping can run on torch's own LSTM kernel (cuDNN
on a GPU): ``torch_lstm.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ner_app.bilm.module_list import Layers
from ner_app.bilm.recurrence import State, autograd_steps, inference_steps
from ner_app.bilm.torch_lstm import can_use_torch_lstm, torch_lstm_recurrence, torch_lstm_weights

TorchLstmUse = Literal["auto", "on", "off"]


class LstmCellWithProjection(nn.Module):
    """One direction of one layer: an LSTM whose output is projected (Sak et al. 2014) and clipped.

    Gate blocks are kept in TF order (i, j, f, o) so the weight file needs no reordering. The bias holds the
    file's ``B``; the constant ``forget_bias`` is added at run time, as TF's LSTMCell does.

    ``torch_lstm`` picks the code path (see the module doc): "auto" takes torch's LSTM kernel on CUDA when both
    clips are null and no resets are asked for, "on" also on CPU, "off" never; otherwise the per-step loop
    below runs. It is this cell's own setting (``set_code_paths`` changes it on a built biLM).
    """

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        cell_clip: float | None,
        proj_clip: float | None,
        forget_bias: float = 1.0,
        torch_lstm: TorchLstmUse = "auto",
    ) -> None:
        super().__init__()
        self.torch_lstm = torch_lstm
        self.input_size, self.cell_size, self.projection_size = input_size, cell_size, projection_size
        self.cell_clip, self.proj_clip, self.forget_bias = cell_clip, proj_clip, forget_bias
        self.input_linearity = nn.Linear(input_size, 4 * cell_size)  # x_t part of W_0, and B
        self.state_linearity = nn.Linear(projection_size, 4 * cell_size, bias=False)  # h_{t-1} part of W_0
        self.projection = nn.Linear(cell_size, projection_size, bias=False)  # W_P_0

    def input_projection(self, inputs: torch.Tensor) -> torch.Tensor:
        """x W_x + B with TF's forget bias added to the f block: (N, I) -> (N, 4C)."""
        c_size = self.cell_size
        bias = self.input_linearity.bias.clone()
        bias[2 * c_size : 3 * c_size] += self.forget_bias
        return F.linear(inputs, self.input_linearity.weight, bias)

    def forward(
        self,
        inputs: torch.Tensor,
        batch_sizes: list[int],
        state: State,
        projected_inputs: torch.Tensor | None = None,
        resets: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, State]:
        """Run over a packed sequence.

        inputs (N, I): time-major packed rows (all rows of step 0, then step 1, ...), rows sorted by length
        so that step t uses the first ``batch_sizes[t]`` rows. state: h (B, P), c (B, C) in the same row
        order. Returns outputs (N, P) in the packed layout and the final state of every row (a row's final
        state is the one after its own last step). ``projected_inputs`` (N, 4C), if given, is
        ``input_projection(inputs)`` computed by the caller for this call (without autograd the steps overwrite
        it: ``recurrence.inference_steps``). ``resets`` (N,) bool, packed like ``inputs``: rows
        whose state is zeroed before that step (a new sentence inside a pretraining stream).
        """
        if can_use_torch_lstm((self.cell_clip, self.proj_clip), inputs.device, resets, self.torch_lstm):
            weights = torch_lstm_weights(
                self.input_linearity, self.state_linearity, self.projection, self.forget_bias
            )
            return torch_lstm_recurrence(weights, inputs, batch_sizes, state)
        if projected_inputs is None:
            # One large matmul for every step's input part, instead of one small one per step.
            projected_inputs = self.input_projection(inputs)  # (N, 4C)
        recurrent = self.state_linearity.weight.t()  # (P, 4C)
        kind = inputs.device.type
        if torch.is_autocast_enabled(kind):  # cast once, not once per step (a transposed view is not cached)
            recurrent = recurrent.to(torch.get_autocast_dtype(kind))
        # Without autograd the steps work inside the input projections (made for this call: above, or by
        # ``ElmoLstm.run_direction``); with it every step is out of place.
        steps = autograd_steps if torch.is_grad_enabled() else inference_steps
        clips = (self.cell_clip, self.proj_clip)
        return steps(projected_inputs, batch_sizes, state, recurrent, self.projection.weight, clips, resets)


def reverse_within_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """x (B, T, D) -> each row reversed within its own length; padded positions stay where they are."""
    steps = torch.arange(x.shape[1], device=x.device)  # (T,)
    lengths = lengths.to(x.device)[:, None]  # (B, 1)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)  # (B, T)
    return x.gather(1, index[:, :, None].expand_as(x))


class ElmoLstm(nn.Module):
    """Two independent stacks of ``LstmCellWithProjection``: forward, and backward over reversed rows.

    Stateless (default): every call starts from zero state, so a sentence gives the same outputs alone or in
    any batch. Stateful: the final (h, c) of every row is the initial state of the same row in the next
    call, exactly as the reference implementation does. ``torch_lstm``: every cell's code path
    (``LstmCellWithProjection``).
    """

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        n_layers: int,
        cell_clip: float | None,
        proj_clip: float | None,
        use_skip_connections: bool,
        stateful: bool = False,
        dropout: float = 0.0,
        torch_lstm: TorchLstmUse = "auto",
    ) -> None:
        super().__init__()
        if input_size != projection_size and n_layers > 1 and use_skip_connections:
            raise ValueError("skip connections need the input size to equal the projection size")
        self.n_layers, self.use_skip_connections = n_layers, use_skip_connections
        self.projection_size, self.cell_size = projection_size, cell_size
        self.stateful, self.dropout = stateful, dropout

        def stack() -> Layers[LstmCellWithProjection]:
            sizes = [input_size] + [projection_size] * (n_layers - 1)
            return Layers(
                LstmCellWithProjection(
                    size, cell_size, projection_size, cell_clip, proj_clip, torch_lstm=torch_lstm
                )
                for size in sizes
            )

        self.forward_layers, self.backward_layers = stack(), stack()
        self._states: list[State] | None = None  # per (direction, layer), rows in the caller's order

    def reset_states(self) -> None:
        """Forget the carried state (stateful mode)."""
        self._states = None

    def forward(
        self,
        inputs: torch.Tensor,
        mask: torch.Tensor,
        distinct: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> list[torch.Tensor]:
        """inputs (B, T, I), mask (B, T) bool, left-aligned, every row non-empty.

        ``distinct``: the distinct input rows (U, I) and, for every position, its row (B, T) long. Layer 0's
        input projection then runs once per distinct token instead of once per position (exact; only used
        without dropout, which would differ per position).

        Returns L tensors (B, T, 2P): [forward output; backward output] of each layer, 0 at padded positions.
        """
        lengths = mask.sum(dim=1).cpu()  # (B,)
        if bool((lengths == 0).any()):
            raise ValueError("ElmoLstm needs at least one position per row (the biLM adds <S> and </S>)")
        batch = inputs.shape[0]
        initial = self._initial_states(batch, inputs)
        directions = []
        finals: list[State] = []
        for d, layers in enumerate((self.forward_layers, self.backward_layers)):
            x = inputs if d == 0 else reverse_within_length(inputs, lengths)
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            rows = None  # (N,) distinct-token row of every packed position
            if distinct is not None and not (self.dropout and self.training):
                index = (
                    distinct[1] if d == 0 else reverse_within_length(distinct[1][..., None], lengths)[..., 0]
                )
                rows = pack_padded_sequence(index, lengths, batch_first=True, enforce_sorted=False).data
            order, unorder = packed.sorted_indices, packed.unsorted_indices  # (B,), (B,)
            tokens = (distinct[0], rows) if rows is not None and distinct is not None else None
            states = [
                (h0[order], c0[order]) for h0, c0 in initial[d * self.n_layers : (d + 1) * self.n_layers]
            ]
            outputs = []
            batch_sizes = packed.batch_sizes.tolist()
            for out, (h, c) in self.run_direction(layers, packed.data, batch_sizes, states, tokens):
                finals.append((h[unorder], c[unorder]))
                outputs.append(self._unpack(out, packed, lengths, inputs.shape[1], d == 1))
            directions.append(outputs)
        if self.stateful:
            self._update_states(finals)
        return [torch.cat([fwd, bwd], dim=-1) for fwd, bwd in zip(*directions, strict=True)]

    def run_direction(
        self,
        layers: Layers[LstmCellWithProjection],
        data: torch.Tensor,
        batch_sizes: list[int],
        states: list[State],
        tokens: tuple[torch.Tensor, torch.Tensor] | None = None,
        resets: torch.Tensor | None = None,
    ) -> Iterator[tuple[torch.Tensor, State]]:
        """One direction's stack over packed rows: dropout on every layer's input, a residual connection from
        the second layer on. data (N, I) time-major packed (see ``LstmCellWithProjection.forward``); states: h
        (B, P), c (B, C) per layer, in the packed row order; ``tokens``: the distinct input rows (U, I) and the
        one of every packed row (N,), so that layer 0 projects each distinct token once (exact); ``resets``
        (N,) bool: rows whose state every layer zeroes before that step.

        Yields every layer's outputs (N, P) and final state as the layer finishes. Pretraining runs each
        direction through this with its own windows and carried state; ``forward`` runs both over a batch of
        sentences.
        """
        for index, layer in enumerate(layers):
            layer_input = F.dropout(data, self.dropout, self.training) if self.dropout else data
            projected = (
                None  # (N, 4C); made here and dropped with the layer: held longer, it costs ~5% of a forward
            )
            if index == 0 and tokens is not None:
                projected = layer.input_projection(tokens[0])[tokens[1]]  # (U, 4C) -> (N, 4C)
            out, final = layer(layer_input, batch_sizes, states[index], projected, resets)
            del projected
            if self.use_skip_connections and index > 0:
                out = out + layer_input
            yield out, final
            data = out

    @staticmethod
    def _unpack(
        data: torch.Tensor, like: PackedSequence, lengths: torch.Tensor, total: int, reverse: bool
    ) -> torch.Tensor:
        """Packed (N, P) -> padded (B, T, P) in the caller's row order (reversed back for the backward stack)."""
        packed = PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)
        padded, _ = pad_packed_sequence(packed, batch_first=True, total_length=total)  # (B, T, P)
        return reverse_within_length(padded, lengths) if reverse else padded

    def _initial_states(self, batch: int, like: torch.Tensor) -> list[State]:
        """Zero states, or (stateful) the carried ones: row i from the last call's row i, new rows zero."""
        zeros_h = like.new_zeros(batch, self.projection_size)
        zeros_c = like.new_zeros(batch, self.cell_size)
        if not self.stateful or self._states is None:
            return [(zeros_h, zeros_c)] * (2 * self.n_layers)
        states = []
        for h, c in self._states:
            rows = min(batch, h.shape[0])
            states.append(
                (
                    torch.cat([h[:rows], zeros_h[rows:]]).to(like.dtype),
                    torch.cat([c[:rows], zeros_c[rows:]]).to(like.dtype),
                )
            )
        return states

    def _update_states(self, finals: list[State]) -> None:
        """Keep each row's final state; rows beyond this batch keep what they had."""
        new = [(h.detach().float(), c.detach().float()) for h, c in finals]
        if self._states is None:
            self._states = new
            return
        merged = []
        for (old_h, old_c), (h, c) in zip(self._states, new, strict=True):
            rows = h.shape[0]
            if old_h.shape[0] > rows:
                h, c = torch.cat([h, old_h[rows:]]), torch.cat([c, old_c[rows:]])
            merged.append((h, c))
        self._states = merged
