"""The recurrence of ``LstmCellWithProjection`` as one autograd node (docs/pretraining_speed.md, "fused gates").

The per-step loop of ``LstmCellWithProjection`` records about fifteen autograd nodes per step (addmm, chunk,
three sigmoids, tanh, products, clamps, the projection, cat): the backward then replays them one by one and
computes the two weight gradients as one small matmul per step. Here the whole sequence is one node:

- forward: the same operations in the same order, in place where that cannot change a bit, so fp32 results
  are bit-identical to the loop (tested);
- backward: the gate derivatives by hand, step by step; the weight gradients of the recurrent matrix and of
  the projection as ONE large matmul each over every step, dW_rec = H_prev^T dZ and dW_P = dOut^T M.

Under CPU or CUDA autocast the two matmuls run in the autocast dtype (bf16), while gates, cell state and the
carried h and c stay fp32 (fp32 master weights and state, bf16 products).
"""

from __future__ import annotations

from typing import Any

import torch

State = tuple[torch.Tensor, torch.Tensor]  # h (B, P), c (B, C)


def _matmul_dtype(device: torch.device) -> torch.dtype | None:
    """The autocast dtype that matmuls on ``device`` would use now, or None outside autocast."""
    kind = device.type if device.type in ("cpu", "cuda") else "cpu"
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None


def _step_gates(
    z: torch.Tensor, c_prev: torch.Tensor, cell_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """z (n, 4C) pre-activations in TF order (i, j, f, o), turned into activations IN PLACE.

    Returns (raw cell (n, C) before clipping, clipped cell (n, C), m = sigmoid(o) * tanh(cell) (n, C)).
    The arithmetic is the loop's: sigmoid(f) * c + sigmoid(i) * tanh(j), in that order, for identical bits.
    """
    i, j, f, o = z.chunk(4, dim=1)
    i.sigmoid_(), j.tanh_(), f.sigmoid_(), o.sigmoid_()
    raw = f * c_prev + i * j  # (n, C)
    cell = raw.clamp(-cell_clip, cell_clip) if cell_clip is not None else raw
    return raw, cell, o * torch.tanh(cell)


def recurrence(
    projected_inputs: torch.Tensor,
    batch_sizes: list[int],
    state: State,
    w_rec: torch.Tensor,
    w_proj: torch.Tensor,
    cell_clip: float | None,
    proj_clip: float | None,
    resets: torch.Tensor | None = None,
) -> tuple[torch.Tensor, State]:
    """Run the projected LSTM over a packed sequence; differentiable as one node.

    projected_inputs (N, 4C): x W_x + B (+ forget bias) of every packed row, time-major, rows sorted by length;
    w_rec (4C, P) the ``state_linearity`` weight; w_proj (P, C) the ``projection`` weight; resets (N,) bool
    or None. Returns outputs (N, P) and the final state of every row, as ``LstmCellWithProjection.forward``.
    """
    h0, c0 = state
    dtype = _matmul_dtype(projected_inputs.device)
    if resets is None:
        resets = torch.zeros(0, dtype=torch.bool, device=projected_inputs.device)
    outputs, h, c = _Recurrence.apply(
        projected_inputs, h0, c0, w_rec, w_proj, resets, batch_sizes, cell_clip, proj_clip, dtype
    )
    return outputs, (h, c)


class _Recurrence(torch.autograd.Function):
    """Forward: the loop with fewer, in-place operations. Backward: hand-written, big weight-gradient matmuls."""

    @staticmethod
    def forward(  # noqa: PLR0913
        ctx: Any,
        x: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor,
        w_rec: torch.Tensor,
        w_proj: torch.Tensor,
        resets: torch.Tensor,
        batch_sizes: list[int],
        cell_clip: float | None,
        proj_clip: float | None,
        dtype: torch.dtype | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(x.device.type, enabled=False):
            x = x.float()
            rec = w_rec.t() if dtype is None else w_rec.t().to(dtype)  # (P, 4C)
            proj = w_proj.t() if dtype is None else w_proj.t().to(dtype)  # (C, P)
            h, c = h0.float(), c0.float()
            keep = ctx.needs_input_grad[0] or any(ctx.needs_input_grad[1:5])
            saved: list[list[torch.Tensor]] = [[], [], [], [], [], []]  # z, raw, m, out_raw, h_prev, c_prev
            outputs = []
            offset = 0
            for n in batch_sizes:
                h_prev, c_prev = h[:n], c[:n]
                if resets.numel():
                    reset = resets[offset : offset + n, None]  # (n, 1)
                    h_prev, c_prev = h_prev.masked_fill(reset, 0.0), c_prev.masked_fill(reset, 0.0)
                step_x = x[offset : offset + n]
                if dtype is None:
                    z = torch.addmm(step_x, h_prev, rec)  # (n, 4C)
                else:
                    z = torch.mm(h_prev.to(dtype), rec).float().add_(step_x)
                raw, cell, m = _step_gates(z, c_prev, cell_clip)
                out_raw = torch.mm(m, proj) if dtype is None else torch.mm(m.to(dtype), proj).float()
                out = out_raw.clamp(-proj_clip, proj_clip) if proj_clip is not None else out_raw
                outputs.append(out)
                if keep:
                    for store, value in zip(saved, (z, raw, m, out_raw, h_prev, c_prev), strict=True):
                        store.append(value)
                if n == h.shape[0]:
                    h, c = out, cell
                else:
                    h, c = torch.cat([out, h[n:]]), torch.cat([cell, c[n:]])
                offset += n
            packed = torch.cat(outputs) if outputs else x.new_zeros(0, w_proj.shape[0])
        if keep:
            ctx.save_for_backward(*(torch.cat(store) for store in saved), w_rec, w_proj, resets)
        ctx.batch_sizes, ctx.clips, ctx.dtype, ctx.x_dtype = (
            batch_sizes,
            (cell_clip, proj_clip),
            dtype,
            x.dtype,
        )
        ctx.state_rows = h0.shape[0]
        return packed, h, c

    @staticmethod
    def backward(  # noqa: PLR0915
        ctx: Any,
        grad_out: torch.Tensor | None,
        grad_h: torch.Tensor | None,
        grad_c: torch.Tensor | None,
    ) -> tuple[torch.Tensor | None, ...]:
        acts, raws, ms, out_raws, h_prevs, c_prevs, w_rec, w_proj, resets = ctx.saved_tensors
        cell_clip, proj_clip = ctx.clips
        dtype = ctx.dtype
        mm_dtype = dtype if dtype is not None else torch.float32
        rec = w_rec.to(mm_dtype)  # (4C, P): dZ @ W_rec gives dh_prev
        proj = w_proj.to(mm_dtype)  # (P, C): dOut @ W_P gives dM
        batch, size_c = ctx.state_rows, raws.shape[1]
        dh = grad_h.float().clone() if grad_h is not None else raws.new_zeros(batch, w_rec.shape[1])
        dc = grad_c.float().clone() if grad_c is not None else raws.new_zeros(batch, size_c)
        g_out_all = (
            grad_out.float() if grad_out is not None else raws.new_zeros(raws.shape[0], w_rec.shape[1])
        )
        d_z = torch.empty_like(acts)  # (N, 4C)
        d_out = torch.empty_like(out_raws)  # (N, P): gradient at the projection's (unclipped) output
        offset = acts.shape[0]
        for n in reversed(ctx.batch_sizes):
            rows = slice(offset - n, offset)
            offset -= n
            g_out = g_out_all[rows] + dh[:n]  # the output is also the next step's h
            if proj_clip is not None:
                g_out = g_out * (out_raws[rows].abs() <= proj_clip)
            d_out[rows] = g_out
            d_m = torch.mm(g_out.to(mm_dtype), proj).float()  # (n, C)
            i, j, f, o = acts[rows].chunk(4, dim=1)
            raw = raws[rows]
            cell = raw.clamp(-cell_clip, cell_clip) if cell_clip is not None else raw
            tanh_cell = torch.tanh(cell)
            g_cell = d_m * o * (1 - tanh_cell * tanh_cell)
            if cell_clip is not None:  # the clipped cell is carried: dc flows into it, then through the clip
                g_cell = (g_cell + dc[:n]) * (raw.abs() <= cell_clip)
            else:
                g_cell = g_cell + dc[:n]
            dz_i, dz_j, dz_f, dz_o = d_z[rows].chunk(4, dim=1)
            torch.mul(g_cell * j, i * (1 - i), out=dz_i)
            torch.mul(g_cell * i, 1 - j * j, out=dz_j)
            torch.mul(g_cell * c_prevs[rows], f * (1 - f), out=dz_f)
            torch.mul(d_m * tanh_cell, o * (1 - o), out=dz_o)
            dh_prev = torch.mm(d_z[rows].to(mm_dtype), rec).float()  # (n, P)
            dc_prev = g_cell * f
            if resets.numel():  # a reset row started from zeros: nothing flows to the earlier state
                reset = resets[rows, None]
                dh_prev, dc_prev = dh_prev.masked_fill(reset, 0.0), dc_prev.masked_fill(reset, 0.0)
            dh[:n], dc[:n] = dh_prev, dc_prev
        # The weight gradients over every step at once: (4C, N) @ (N, P) and (P, N) @ (N, C).
        grad_rec = torch.mm(d_z.t().to(mm_dtype), h_prevs.to(mm_dtype)).to(w_rec.dtype)
        grad_proj = torch.mm(d_out.t().to(mm_dtype), ms.to(mm_dtype)).to(w_proj.dtype)
        return d_z.to(ctx.x_dtype), dh, dc, grad_rec, grad_proj, None, None, None, None, None
