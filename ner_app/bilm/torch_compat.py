"""torch's private API, fenced: the one call the biLM makes outside torch's public surface.

``packed_lstm`` runs one LSTM layer with projection (Sak et al. 2014) over packed rows on torch's own kernel
(cuDNN on a GPU) through ``torch._VF.lstm``, the function ``torch.nn.LSTM`` itself calls for a
``PackedSequence``. The public ``nn.LSTM`` owns its weights; the biLM's cell maps its own parameters on every
call (differentiable, ``bilm/lstm.py``), which only this functional form allows. Every room from ``bilm`` on
may import it; tests/bilm/test_torch_compat.py pins it against ``nn.LSTM`` for the supported torch versions
(pyproject.toml).
"""

from __future__ import annotations

import torch

# The torch versions this module is checked against: pyproject.toml's range, which its test compares with.
SUPPORTED = "torch>=2.1"


def packed_lstm(
    inputs: torch.Tensor,
    batch_sizes: list[int],
    h0: torch.Tensor,
    c0: torch.Tensor,
    weights: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One unidirectional layer over packed rows, evaluation semantics (no dropout).

    inputs (N, I) time-major packed rows sorted by length; h0 (B, P), c0 (B, C) in the same row order;
    weights [w_ih (4C, I), w_hh (4C, P), b_ih (4C,), b_hh (4C,), w_hr (P, C)] in torch's gate order
    (i, f, g, o). Returns outputs (N, P) and every row's final h (B, P) and c (B, C).
    """
    sizes = torch.tensor(batch_sizes, dtype=torch.int64)  # the kernel wants them on the CPU
    # (data, batch_sizes, hx, weights, has_biases, num_layers, dropout, train, bidirectional);
    # hx is (layers * directions, B, P) and (layers * directions, B, C).
    out, h, c = torch._VF.lstm(
        inputs, sizes, (h0[None].contiguous(), c0[None].contiguous()), weights, True, 1, 0.0, False, False
    )
    return out, h[0], c[0]


__all__ = ["SUPPORTED", "packed_lstm"]
