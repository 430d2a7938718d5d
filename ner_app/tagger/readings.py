"""The probability of entity readings under the CRF, exact and batched (the torch part of ``text/readings.py``).

A reading's probability is the summed probability of its lattices (``text.readings.lattices``): for each
lattice, exp(log Z of the lattice - log Z), both on the tempered potentials (``CRF.log_partition``), so that
calibration applies to every score. One row per lattice, in float64: a probability near 1 is a difference of
two log-sums of hundreds, which float32 would round past 1.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ner_app.tagger.crf import CRF
from ner_app.text.readings import LatticeProbabilities, Lattices, ReadingOptions, SentenceReading, read_batch

LATTICE_CELLS = 1 << 18  # rows x steps of one lattice pass at most: bounds the memory of many alternatives


def allowed_mask(table: Lattices, steps: int, num_tags: int, device: torch.device) -> Tensor:
    """The allowed-tag mask (L, T, K) bool of a table of lattices."""
    allowed = torch.ones(len(table.rows), steps, num_tags, dtype=torch.bool, device=device)

    def index(lists: tuple[list[int], ...]) -> tuple[Tensor, ...]:
        return tuple(torch.tensor(x, dtype=torch.long, device=device) for x in lists)

    allowed[index(table.clear)] = False
    allowed[index(table.keep)] = True
    allowed[index(table.drop)] = False
    return allowed


def lattice_probabilities(crf: CRF, emissions: Tensor, mask: Tensor, table: Lattices) -> Tensor:
    """Probability (L,) float64 of each lattice of ``table`` over a batch of emissions (B, T, K), mask (B, T)."""
    emissions = emissions.double()
    rows = torch.tensor(table.rows, dtype=torch.long, device=emissions.device)  # (L,)
    log_z = crf.log_partition(emissions, mask)[rows]  # (L,)
    allowed = allowed_mask(table, emissions.size(1), emissions.size(2), emissions.device)  # (L, T, K)
    chunk = max(1, LATTICE_CELLS // emissions.size(1))
    parts = [
        crf.log_partition(emissions[rows[a : a + chunk]], mask[rows[a : a + chunk]], allowed[a : a + chunk])
        for a in range(0, len(table.rows), chunk)
    ]
    return torch.exp(torch.cat(parts) - log_z)


def read_sentences(
    crf: CRF, emissions: Tensor, mask: Tensor, itos: list[str], scheme: str, options: ReadingOptions
) -> list[SentenceReading]:
    """Each sentence's Viterbi tags, its entities with their reading probabilities and what ``options`` asks
    for, from a batch of emissions (B, T, K) and mask (B, T)."""
    paths = crf.decode(emissions, mask)[0].tolist()  # (B, T)
    lengths = mask.sum(dim=1).tolist()
    tags = [[itos[i] for i in path[:n]] for path, n in zip(paths, lengths, strict=True)]
    outside = None
    if options.flag_missed is not None and "O" in itos:
        outside = crf.marginals(emissions, mask)[..., itos.index("O")].double().tolist()  # (B, T)
    tag_ids = {tag: i for i, tag in enumerate(itos)}

    def probabilities(table: Lattices) -> list[float]:
        return lattice_probabilities(crf, emissions, mask, table).tolist()

    score: LatticeProbabilities = probabilities
    return read_batch(tags, outside, scheme, tag_ids, options, score)
