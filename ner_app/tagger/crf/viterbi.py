"""The CRF's best path by Viterbi (max-product in log space), batched over sentences: ``CRF.decode``."""

from __future__ import annotations

import torch
from torch import Tensor


def viterbi(
    emissions: Tensor, start: Tensor, trans: Tensor, end: Tensor, mask: Tensor, full_steps: int = 0
) -> tuple[Tensor, Tensor]:
    """Best tag paths (B, T) long, 0 at padding, and their scores (B,), from the potentials emissions (B, T, K),
    start (K,), trans (K, K), end (K,) and a left-aligned bool mask (B, T).

    ``full_steps``: how many leading steps are real in every row (a host value, e.g. the batch's shortest
    length; 0 when unknown). Those steps skip the selects that carry a finished row unchanged, which are then
    known to pick the new values: the same paths and scores, two operations fewer a step.
    """
    batch, steps, k = emissions.shape
    at_step = emissions.unbind(1)  # T x (B, K): views, not a slice per step
    keep = mask[:, :, None].unbind(1)  # T x (B, 1)
    # Backpointers (B, K) a step: the best previous tag for each tag. Past a row's end the pointer is the
    # identity, so backtracking from the last step carries each row's own last tag back unchanged.
    identity = torch.arange(k, device=emissions.device).expand(batch, k)  # (B, K)
    pointers = []
    score = start + at_step[0]  # (B, K)
    for t in range(1, steps):
        best, arg = (score.unsqueeze(2) + trans).max(dim=1)  # (B, K) over the previous tag
        if t < full_steps:
            score = best + at_step[t]
        else:
            score = torch.where(keep[t], best + at_step[t], score)
            arg = torch.where(keep[t], arg, identity)
        pointers.append(arg)

    # score is frozen after each row's end, so adding end here applies it at the row's own end.
    best_score, last = (score + end).max(dim=1)  # (B,)
    tag = last.unsqueeze(1)  # (B, 1)
    path = [tag]
    for arg in reversed(pointers):
        tag = arg.gather(1, tag)
        path.append(tag)
    return torch.cat(path[::-1], dim=1).masked_fill(~mask, 0), best_score  # (B, T), (B,)
