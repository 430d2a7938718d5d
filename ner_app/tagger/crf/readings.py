"""The probability of entity readings under the CRF, exact and batched (the torch part of ``text/readings.py``).

A reading's probability is the summed probability of its lattices (``text.readings.lattices``): for each
lattice, exp(log Z of the lattice - log Z), both on the tempered potentials (``CRF._tempered``), so that
calibration applies to every score. One row per lattice, in float64: a probability near 1 is a difference of
two log-sums of hundreds, which float32 would round past 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ner_app.tagger.crf.crf import CRF, FORBIDDEN
from ner_app.text.readings import LatticeProbabilities, Lattices, ReadingOptions, SentenceReading, read_batch


def allowed_mask(
    table: Lattices, steps: int, num_tags: int, device: torch.device, from_first: bool = False
) -> Tensor:
    """The allowed-tag mask (L, T, K) bool of a table of lattices; ``from_first``: only each lattice's window,
    position 0 being its ``first`` (then ``steps`` is the widest window)."""
    allowed = torch.ones(len(table.rows), steps, num_tags, dtype=torch.bool, device=device)
    first = torch.tensor(table.first, dtype=torch.long, device=device)  # (L,)
    for lists, value in ((table.clear, False), (table.keep, True), (table.drop, False)):
        lattice, position, *tag = (torch.tensor(x, dtype=torch.long, device=device) for x in lists)
        if from_first:
            position = position - first[lattice]
        allowed[(lattice, position) + tuple(tag)] = value
    return allowed


@dataclass(frozen=True)
class Sweep:
    """A batch's tempered potentials (float64) and its forward and backward variables, computed once for
    all the lattices of the batch."""

    emissions: Tensor  # (B, T, K)
    start: Tensor  # (K,)
    trans: Tensor  # (K, K)
    alphas: Tensor  # (B, T, K)
    betas: Tensor  # (B, T, K)
    log_z: Tensor  # (B,)

    @classmethod
    def of(cls, crf: CRF, emissions: Tensor, mask: Tensor) -> Sweep:
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            em, start, trans, end = crf._tempered(emissions.double())  # (B, T, K), (K,), (K, K), (K,)
            alphas = torch.stack(crf._alphas(em, mask, start, trans), dim=1)  # (B, T, K)
            betas = crf._betas(em, mask, trans, end)  # (B, T, K)
            return cls(em, start, trans, alphas, betas, torch.logsumexp(alphas[:, -1] + end, dim=1))

    def outside(self, mask: Tensor, tag: int) -> Tensor:
        """Each token's marginal probability (B, T) of tag ``tag`` (0 at padding), as ``CRF.marginals``."""
        return torch.exp(self.alphas[..., tag] + self.betas[..., tag] - self.log_z[:, None]).masked_fill(
            ~mask, 0
        )


def lattice_probabilities(crf: CRF, emissions: Tensor, mask: Tensor, table: Lattices) -> Tensor:
    """Probability (L,) float64 of each lattice of ``table`` over a batch of emissions (B, T, K), mask (B, T)."""
    return window_probabilities(Sweep.of(crf, emissions, mask), table)


def window_probabilities(sweep: Sweep, table: Lattices) -> Tensor:
    """Probability (L,) float64 of each lattice of ``table`` over the batch of ``sweep``.

    Outside its window (``first``..``last``) a lattice is the sentence's full lattice, so its log-sum is the
    forward variable before the window, a forward recursion through the window's constrained positions, and
    the backward variable after it: the same value as ``CRF.log_partition`` with the lattice's mask (a test
    holds them equal), in a few steps per reading rather than one pass over the sentence.
    """
    em, start, trans = sweep.emissions, sweep.start, sweep.trans
    device = em.device
    rows = torch.tensor(table.rows, dtype=torch.long, device=device)  # (L,)
    first = torch.tensor(table.first, dtype=torch.long, device=device)  # (L,)
    last = torch.tensor(table.last, dtype=torch.long, device=device)  # (L,)
    width = int((last - first).max()) + 1
    positions = first[:, None] + torch.arange(width, device=device)  # (L, W)
    inside = positions <= last[:, None]  # (L, W)
    positions = positions.clamp(max=em.size(1) - 1)
    allowed = allowed_mask(table, width, em.size(2), device, from_first=True)  # (L, W, K)
    window = torch.where(allowed, em[rows[:, None], positions], FORBIDDEN)  # (L, W, K)
    before = sweep.alphas[rows, (first - 1).clamp(min=0)]  # (L, K): forward variable before the window
    entering = torch.logsumexp(before.unsqueeze(2) + trans, dim=1)  # (L, K)
    alpha = torch.where((first == 0)[:, None], start, entering) + window[:, 0]  # (L, K)
    for i in range(1, width):
        nxt = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + window[:, i]
        alpha = torch.where(inside[:, i, None], nxt, alpha)
    log_lattice = torch.logsumexp(alpha + sweep.betas[rows, last], dim=1)  # (L,)
    return torch.exp(log_lattice - sweep.log_z[rows])


def read_sentences(
    crf: CRF, emissions: Tensor, mask: Tensor, itos: list[str], scheme: str, options: ReadingOptions
) -> list[SentenceReading]:
    """Each sentence's Viterbi tags, its entities with their reading probabilities and what ``options`` asks
    for, from a batch of emissions (B, T, K) and mask (B, T)."""
    paths = crf.decode(emissions, mask)[0].tolist()  # (B, T)
    lengths = mask.sum(dim=1).tolist()
    tags = [[itos[i] for i in path[:n]] for path, n in zip(paths, lengths, strict=True)]
    sweep = Sweep.of(crf, emissions, mask)
    outside = None
    if options.flag_missed is not None and "O" in itos:
        outside = sweep.outside(mask, itos.index("O")).tolist()  # (B, T)
    tag_ids = {tag: i for i, tag in enumerate(itos)}

    def probabilities(table: Lattices) -> list[float]:
        return window_probabilities(sweep, table).tolist()

    score: LatticeProbabilities = probabilities
    return read_batch(tags, outside, scheme, tag_ids, options, score)
