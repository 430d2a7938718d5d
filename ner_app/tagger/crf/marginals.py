"""The CRF's marginals by a forward-backward in probability space, each step rescaled: ``CRF.marginals``.

The recursion of the ONNX predictor's numpy marginals (``onnx/crf.py``, which cannot import torch), less
the padding selects that change nothing (the same values).
"""

from __future__ import annotations

import torch
from torch import Tensor


def scaled_marginals(
    emissions: Tensor, start: Tensor, trans: Tensor, end: Tensor, mask: Tensor, full_steps: int = 0
) -> Tensor:
    """Posterior probability (B, T, K) float64 of each tag at each position, 0 at padding, from the potentials
    emissions (B, T, K), start (K,), trans (K, K), end (K,) and a left-aligned bool mask (B, T).

    Forward and backward variables in probability space, in float64, each step divided by its sum: a position's
    scale cancels in its marginals, and float64 keeps a step's smallest ratios far above underflow. The
    potentials are shifted by their maxima before ``exp``, so a forbidden transition (-1e4) becomes exactly 0.
    ``full_steps`` as ``viterbi``'s: the backward variables' leading steps, real in every row, skip the
    selects that start each row's recursion at its own end.
    """
    e, start, trans, end = (x.double() for x in (emissions, start, trans, end))
    weights = torch.exp(trans - trans.max())  # (K, K)
    weights_t = weights.T  # (K, K)
    local = torch.exp(e - e.amax(dim=2, keepdim=True)).unbind(1)  # T x (B, K)
    step_masks = mask[:, :, None].unbind(1)  # T x (B, 1)
    alpha = torch.exp(start - start.max()) * local[0]  # (B, K)
    alphas = [alpha / alpha.sum(dim=1, keepdim=True)]
    for t in range(1, len(local)):
        # No select for padding here: a row's forward variables at its real steps do not depend on later
        # ones, and its padded positions are zeroed at the end.
        nxt = (alphas[-1] @ weights) * local[t]  # (B, K)
        alphas.append(nxt / nxt.sum(dim=1, keepdim=True))
    final = torch.exp(end - end.max())
    final = (final / final.sum()).expand_as(alpha)  # a row's last step starts from the end scores
    betas = [final]
    for t in range(len(local) - 2, -1, -1):
        nxt = (local[t + 1] * betas[-1]) @ weights_t  # (B, K)
        nxt = nxt / nxt.sum(dim=1, keepdim=True)
        betas.append(nxt if t + 1 < full_steps else torch.where(step_masks[t + 1], nxt, final))
    probs = torch.stack(alphas, dim=1) * torch.stack(betas[::-1], dim=1)  # (B, T, K)
    probs = probs / probs.sum(dim=2, keepdim=True)  # sum_k alpha_t(k) beta_t(k) is the same at every t
    return probs.masked_fill(~mask.unsqueeze(2), 0.0)
