"""The per-step recurrence of one projected LSTM cell over packed rows (docs/bilm_reference.md section 4).

Two loops compute the same function. ``autograd_steps`` builds every step out of place, so autograd can
train the cell. ``inference_steps`` runs without autograd and works inside the input projections it is given:
each step's recurrent matmul accumulates into its own rows (``addmm_``, no copy of the input part) and the gate
functions overwrite their own blocks, so a step allocates only its cell output and projection. The operations
and their order are the same as the autograd loop's, so both give the same bits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

State = tuple[torch.Tensor, torch.Tensor]  # h (B, P), c (B, C)


def _step_state(h: torch.Tensor, c: torch.Tensor, n: int, reset: torch.Tensor | None) -> State:
    """The state the first ``n`` rows start a step from; ``reset`` (n,) bool rows start from zeros."""
    h_prev, c_prev = (h, c) if n == h.shape[0] else (h[:n], c[:n])  # a full slice costs a copy back
    if reset is not None:  # the state a stateless run starts a sentence from
        h_prev = h_prev.masked_fill(reset[:, None], 0.0)
        c_prev = c_prev.masked_fill(reset[:, None], 0.0)
    return h_prev, c_prev


def _carry(h: torch.Tensor, c: torch.Tensor, out: torch.Tensor, cell: torch.Tensor) -> State:
    """Rows past their end keep their state; out-of-place so autograd can train the cell too."""
    n = out.shape[0]
    if n == h.shape[0]:
        return out, cell
    return torch.cat([out, h[n:]]), torch.cat([cell, c[n:]])


def autograd_steps(
    projected: torch.Tensor,
    batch_sizes: list[int],
    state: State,
    recurrent: torch.Tensor,
    projection: torch.Tensor,
    clips: tuple[float | None, float | None],
    resets: torch.Tensor | None,
) -> tuple[torch.Tensor, State]:
    """projected (N, 4C) = x W_x + B per packed row, gate blocks (i, j, f, o); state h (B, P), c (B, C);
    recurrent (P, 4C); projection (P, C) weight; clips (cell, projection). Returns outputs (N, P), final state."""
    cell_clip, proj_clip = clips
    h, c = state
    outputs = []
    # split/chunk give views whose backward is one concatenation, not a zero-filled copy per slice.
    step_resets = resets.split(batch_sizes) if resets is not None else [None] * len(batch_sizes)
    for step_inputs, reset in zip(projected.split(batch_sizes), step_resets, strict=True):
        h_prev, c_prev = _step_state(h, c, step_inputs.shape[0], reset)
        z = torch.addmm(step_inputs, h_prev, recurrent)  # (n, 4C)
        i, j, f, o = z.chunk(4, dim=1)  # TF gate order
        cell = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(j)  # (n, C)
        if cell_clip is not None:
            cell = cell.clamp(-cell_clip, cell_clip)  # the clipped cell is carried
        out = F.linear(torch.sigmoid(o) * torch.tanh(cell), projection)  # (n, P)
        if proj_clip is not None:
            out = out.clamp(-proj_clip, proj_clip)
        outputs.append(out)
        h, c = _carry(h, c, out, cell)
    packed = torch.cat(outputs) if outputs else projected.new_zeros(0, projection.shape[0])
    return packed, (h, c)


def inference_steps(
    projected: torch.Tensor,
    batch_sizes: list[int],
    state: State,
    recurrent: torch.Tensor,
    projection: torch.Tensor,
    clips: tuple[float | None, float | None],
    resets: torch.Tensor | None,
) -> tuple[torch.Tensor, State]:
    """``autograd_steps`` without autograd, overwriting ``projected`` (the caller's own, made for this call).

    Same arguments and result. ``recurrent`` has the dtype of ``projected`` (under autocast the caller casts
    it), so the in-place matmul sees one dtype, as autocast's ``addmm`` does.
    """
    cell_clip, proj_clip = clips
    recurrent = recurrent.to(projected.dtype)  # no-op unless autocast made the projections in another dtype
    h, c = state
    outputs = []
    step_resets = resets.split(batch_sizes) if resets is not None else [None] * len(batch_sizes)
    for z, reset in zip(projected.split(batch_sizes), step_resets, strict=True):
        h_prev, c_prev = _step_state(h, c, z.shape[0], reset)
        z.addmm_(h_prev.to(z.dtype), recurrent)  # (n, 4C): the input part is already there
        i, j, f, o = z.chunk(4, dim=1)  # TF gate order
        # sigmoid(f) * c + sigmoid(i) * tanh(j), each product and the sum as in the autograd loop
        gate_f = f.sigmoid_()
        forget = gate_f.mul_(c_prev) if gate_f.dtype == c_prev.dtype else gate_f * c_prev
        cell = forget.add_(j.tanh_().mul_(i.sigmoid_()))  # (n, C)
        if cell_clip is not None:
            cell.clamp_(-cell_clip, cell_clip)
        out = F.linear(torch.tanh(cell).mul_(o.sigmoid_()), projection)  # (n, P)
        if proj_clip is not None:
            out.clamp_(-proj_clip, proj_clip)
        outputs.append(out)
        h, c = _carry(h, c, out, cell)
    packed = torch.cat(outputs) if outputs else projected.new_zeros(0, projection.shape[0])
    # c may be a view into ``projected`` (the f block): a copy of its own lets the projections go
    return packed, (h, c.contiguous())
