"""How unsure the CRF is of a sentence: the quantities active learning ranks a pool by (Settles & Craven 2008).

Exact, from the CRF's own distribution over tag paths (at its calibrated temperature, like every probability of
``crf.py``):

- least confidence: 1 - P(best path), with P(best path) = exp(Viterbi score - log Z);
- margin: P(best path) - P(second-best path), the second-best path from an exact 2-best Viterbi (``two_best``);
- token entropy: the entropy of each token's marginal distribution over tags, averaged over the tokens;
- MNLP (maximum normalized log-probability, Shen et al. 2018): log P(best path) over the number of tokens, the
  least confidence of a sentence per token.

Token entropy is the mean over tokens, not the sum (Settles & Craven's TE, normalised by the length): the cost
of a selection is counted in sentences, and the summed entropy of a sentence grows with its length, so the sum
would mostly pick long sentences and buy more annotated tokens per "sentence" than the other strategies. MNLP
normalises least confidence the same way: a path's log-probability is a sum over its tokens too.

A sentence tagged in several pieces (or a line holding several sentences) is a product of independent CRF
sentences: ``combine`` gives the exact quantities of the whole from those of its parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ner_app.tagger.crf.crf import CRF

STRATEGIES = ("least-confidence", "margin", "entropy", "mnlp", "random")


def two_best(
    emissions: Tensor, start: Tensor, trans: Tensor, end: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """Exact 2-best Viterbi: the two highest-scoring tag paths (B, 2, T) (0 at padding) and their scores (B, 2).

    Each (step, tag) keeps its two best prefixes; the two best of a step's 2K candidates per tag are distinct
    paths because every kept prefix is. A sentence with a single path (one tag, one token) gets -inf as its
    second score. ``mask`` is left-aligned bool (B, T) with every row non-empty (``CRF._check``).
    """
    batch, steps, k = emissions.shape
    neg = torch.full((batch, k, 1), -math.inf, dtype=emissions.dtype, device=emissions.device)
    score = torch.cat([(start + emissions[:, 0]).unsqueeze(2), neg], dim=2)  # (B, K, 2): tag, rank
    # A state is tag * 2 + rank; a pointer names the state at the previous step. Past a row's end the pointer is
    # the identity, so the row's own last states are carried back unchanged (as in ``CRF.decode``).
    identity = torch.arange(2 * k, device=emissions.device).view(1, k, 2).expand(batch, k, 2)
    pointers: list[Tensor] = []  # (B, K, 2) for each step 1..T-1
    for t in range(1, steps):
        # (B, K_prev, 1, 2) + (K_prev, K_next, 1) -> (B, K_next, K_prev * 2): every extension of every prefix
        cand = (score.unsqueeze(2) + trans.unsqueeze(2)).permute(0, 2, 1, 3).reshape(batch, k, 2 * k)
        top, arg = cand.topk(2, dim=2)  # (B, K, 2)
        keep = mask[:, t, None, None]
        score = torch.where(keep, top + emissions[:, t, :, None], score)
        pointers.append(torch.where(keep, arg, identity))
    # score is frozen after each row's end, so adding end here applies it at the row's own end.
    scores, state = (score + end[:, None]).reshape(batch, 2 * k).topk(2, dim=1)  # (B, 2) each
    paths = torch.empty(batch, 2, steps, dtype=torch.long, device=emissions.device)
    for t in range(steps - 1, -1, -1):
        paths[:, :, t] = torch.div(state, 2, rounding_mode="floor")
        if t:
            state = pointers[t - 1].reshape(batch, 2 * k).gather(1, state)
    return paths.masked_fill(~mask.unsqueeze(1), 0), scores


@dataclass(frozen=True)
class SentenceUncertainty:
    """What ranking needs of one sentence (or of several independent ones, ``combine``): the log-probabilities
    of its best and second-best tag paths (-inf when it has one path), its summed token entropy (nats) and its
    number of tokens."""

    log_best: float
    log_second: float
    entropy_sum: float
    tokens: int

    @property
    def least_confidence(self) -> float:
        """1 - P(best path)."""
        return -math.expm1(self.log_best)

    @property
    def margin(self) -> float:
        """P(best path) - P(second-best path)."""
        return math.exp(self.log_best) - math.exp(self.log_second)

    @property
    def normalized_log_best(self) -> float:
        """MNLP's number: log P(best path) / tokens, the best path's log-probability per token (<= 0)."""
        return self.log_best / self.tokens if self.tokens else 0.0

    @property
    def entropy(self) -> float:
        """Mean token entropy (nats): the summed entropy of the marginals over the number of tokens."""
        return self.entropy_sum / self.tokens if self.tokens else 0.0

    def rank_key(self, strategy: str) -> float:
        """Higher is more uncertain: the order in which ``strategy`` selects. Least confidence and margin are
        ranked in log space, where long sentences whose best path has a probability below float precision
        still keep their order (1 - P would be 1.0 for all of them)."""
        if strategy == "least-confidence":
            return -self.log_best
        if strategy == "margin":  # -log(P1 - P2) = -(log P1 + log(1 - P2 / P1))
            gap = self.log_second - self.log_best
            return math.inf if gap >= 0 else -(self.log_best + math.log1p(-math.exp(gap)))
        if strategy == "entropy":
            return self.entropy
        if strategy == "mnlp":
            return -self.normalized_log_best
        if strategy == "random":
            return 0.0
        raise ValueError(f"unknown strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")

    def value(self, strategy: str) -> float:
        """The strategy's own number: 1 - P(best), the margin, the mean token entropy, log P(best) / tokens
        (random: 0)."""
        if strategy == "least-confidence":
            return self.least_confidence
        if strategy == "margin":
            return self.margin
        if strategy == "mnlp":
            return self.normalized_log_best
        return self.entropy if strategy == "entropy" else 0.0


def combine(parts: Sequence[SentenceUncertainty]) -> SentenceUncertainty:
    """The exact quantities of independent sentences taken together (a sentence cut into pieces, a line of
    several sentences): path probabilities multiply, and the second-best joint path is the best one with a
    single part switched to its own second-best path, the part that loses the least."""
    if not parts:
        return SentenceUncertainty(0.0, -math.inf, 0.0, 0)
    log_best = sum(p.log_best for p in parts)
    loss = max(p.log_second - p.log_best for p in parts)
    return SentenceUncertainty(
        log_best, log_best + loss, sum(p.entropy_sum for p in parts), sum(p.tokens for p in parts)
    )


def sentence_uncertainty(
    crf: CRF, emissions: Tensor, mask: Tensor | None = None
) -> list[SentenceUncertainty]:
    """The ``SentenceUncertainty`` of every row of emissions (B, T, K), at the CRF's temperature."""
    # The CRF's own checks and tempered potentials: probabilities here are the ones its marginals give.
    mask = crf._check(emissions, mask)
    with torch.autocast(device_type=emissions.device.type, enabled=False):
        em, start, trans, end = crf._tempered(emissions)
        log_z = torch.logsumexp(crf._alphas(em, mask, start, trans)[-1] + end, dim=1)  # (B,)
        _, scores = two_best(em, start, trans, end, mask)  # (B, 2)
        log_p = (scores - log_z[:, None]).clamp(max=0.0)  # (B, 2): a probability is at most 1
        marginals = crf.marginals(emissions, mask).clamp(0.0, 1.0)  # (B, T, K)
        entropy = -torch.special.xlogy(marginals, marginals).sum(dim=2)  # (B, T), 0 at padding
        entropy = entropy.clamp(min=0.0).sum(dim=1)  # (B,)
    lengths = mask.sum(dim=1).tolist()
    return [
        SentenceUncertainty(float(best), float(second), float(h), int(n))
        for (best, second), h, n in zip(
            log_p.double().tolist(), entropy.double().tolist(), lengths, strict=True
        )
    ]
