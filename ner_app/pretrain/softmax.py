"""The biLM's shared softmax: a log-uniform candidate sampler and the sampled softmax loss (Jean et al. 2015).

Training uses TF's ``sampled_softmax_loss`` with a ``log_uniform_candidate_sampler(unique=True)``, as the
bilm-tf recipe does; evaluation uses the exact full softmax.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class Candidates(NamedTuple):
    """Sampled classes (S,) long, unique, and the expected count of each (S,); the draws it took."""

    ids: torch.Tensor
    expected: torch.Tensor
    num_tries: int


class LogUniformSampler:
    """Zipfian sampler over classes sorted by decreasing frequency: P(k) = log((k+2)/(k+1)) / log(V+1).

    ``sample(n)`` draws with replacement until ``n`` distinct classes are seen (TF's ``unique=True``); the
    expected count of a class is then 1 - (1 - P(k))^num_tries, TF's estimate of the probability that the
    class is among the candidates.
    """

    def __init__(self, num_classes: int, seed: int = 0) -> None:
        if num_classes < 1:
            raise ValueError(f"num_classes must be positive, found {num_classes}")
        self.num_classes = num_classes
        self._log_range = math.log(num_classes + 1)
        self.generator = torch.Generator().manual_seed(seed)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        """P(k) for class ids (any shape) -> float64 of the same shape."""
        k = ids.to(torch.float64)
        return (torch.log(k + 2) - torch.log(k + 1)) / self._log_range

    def expected_count(self, ids: torch.Tensor, num_tries: int) -> torch.Tensor:
        """1 - (1 - P(k))^num_tries, computed as -expm1(num_tries * log1p(-P)) for precision; float32."""
        p = self.probability(ids)
        return (-torch.expm1(num_tries * torch.log1p(-p))).float()

    def draw(self, n: int) -> torch.Tensor:
        """``n`` independent draws (n,) long by inverting the CDF: k = floor((V+1)^u) - 1, u ~ U[0, 1)."""
        u = torch.rand(n, generator=self.generator, dtype=torch.float64)
        k = torch.floor(torch.exp(u * self._log_range)).long() - 1
        return k.clamp_(0, self.num_classes - 1)  # guards the rounding at u -> 1

    def sample(self, num_sampled: int) -> Candidates:
        """``num_sampled`` distinct classes in order of first draw, with their expected counts.

        When ``num_sampled >= V`` every class is a candidate with certainty: the exact inclusion probability
        is 1 (the 1 - (1-p)^tries estimate would only approach it), so the expected counts are exactly 1 and
        the sampled softmax reduces to the full softmax.
        """
        if num_sampled >= self.num_classes:
            ids = torch.arange(self.num_classes)
            return Candidates(ids, torch.ones(self.num_classes), 0)
        draws = torch.empty(0, dtype=torch.long)
        chunk = 2 * num_sampled
        while True:
            draws = torch.cat([draws, self.draw(chunk)])
            values, inverse = torch.unique(draws, return_inverse=True)
            if len(values) >= num_sampled:
                break
            chunk *= 2
        # First draw position of every distinct value; the num_sampled-th earliest one ends the tries.
        positions = torch.arange(len(draws))
        first = torch.full((len(values),), len(draws), dtype=torch.long).scatter_reduce(
            0, inverse, positions, reduce="amin"
        )
        order = first.argsort()[:num_sampled]
        num_tries = int(first[order[-1]]) + 1
        ids = values[order]
        return Candidates(ids, self.expected_count(ids, num_tries), num_tries)


class SampledSoftmaxLoss(nn.Module):
    """One softmax (W (V, P), b (V,)) shared by both LM directions; sampled in training, exact in evaluation.

    Sampled loss of a row with hidden h and label y, candidates S with expected counts q:
    logits [h.W_y + b_y - log q_y,  h.W_s + b_s - log q_s for s in S], where a candidate equal to y (an
    accidental hit) gets -inf; the loss is the cross entropy with the true logit first.
    """

    def __init__(self, num_classes: int, dim: int, num_sampled: int, seed: int = 0) -> None:
        super().__init__()
        self.num_classes, self.dim, self.num_sampled = num_classes, dim, num_sampled
        # bilm-tf initialises the softmax with N(0, 1/sqrt(P)) and a zero bias.
        self.W = nn.Parameter(torch.randn(num_classes, dim) / math.sqrt(dim))
        self.b = nn.Parameter(torch.zeros(num_classes))
        self.sampler = LogUniformSampler(num_classes, seed)

    def sampled_loss(
        self, hidden: torch.Tensor, labels: torch.Tensor, candidates: Candidates | None = None
    ) -> torch.Tensor:
        """hidden (N, P), labels (N,) long (all valid) -> mean sampled-softmax loss (scalar, float32)."""
        if candidates is None:
            candidates = self.sampler.sample(self.num_sampled)
        ids = candidates.ids.to(hidden.device)
        expected = candidates.expected.to(hidden.device)
        with torch.autocast(hidden.device.type, enabled=False):  # logits and log-sum-exp in float32
            h = hidden.float()
            true_logits = (h * self.W[labels]).sum(-1) + self.b[labels]  # (N,)
            true_logits = true_logits - torch.log(self._true_expected(labels, candidates))
            sampled_logits = h @ self.W[ids].t() + self.b[ids] - torch.log(expected)  # (N, S)
            hits = labels[:, None] == ids[None, :]  # (N, S): the true class drawn as a negative
            sampled_logits = sampled_logits.masked_fill(hits, float("-inf"))
            logits = torch.cat([true_logits[:, None], sampled_logits], dim=1)  # (N, 1 + S)
            return torch.logsumexp(logits, dim=1).sub(true_logits).mean()

    def _true_expected(self, labels: torch.Tensor, candidates: Candidates) -> torch.Tensor:
        """Expected counts of the true classes (N,): 1 when every class was a candidate."""
        if candidates.num_tries == 0:
            return torch.ones(labels.shape, dtype=torch.float32, device=labels.device)
        return self.sampler.expected_count(labels, candidates.num_tries)

    def full_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (N, P) -> log-probabilities over every class (N, V), float32."""
        with torch.autocast(hidden.device.type, enabled=False):
            return F.log_softmax(hidden.float() @ self.W.t() + self.b, dim=-1)

    def full_nll(self, hidden: torch.Tensor, labels: torch.Tensor, chunk: int = 512) -> torch.Tensor:
        """Exact negative log-likelihood of every row: hidden (N, P), labels (N,) -> (N,) float32.

        Rows go through in chunks so that memory stays at chunk x V logits.
        """
        parts = [
            -self.full_log_probs(hidden[i : i + chunk]).gather(1, labels[i : i + chunk, None])[:, 0]
            for i in range(0, len(hidden), chunk)
        ]
        return torch.cat(parts) if parts else hidden.new_zeros(0, dtype=torch.float32)

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean loss of hidden (N, P), labels (N,): sampled in training mode, exact in evaluation mode."""
        return self.sampled_loss(hidden, labels) if self.training else self.full_nll(hidden, labels).mean()
