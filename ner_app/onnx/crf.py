"""The CRF's decoding in numpy, for the ONNX predictor: ``CRF.decode`` (Viterbi), ``CRF.marginals``
(forward-backward) and the readings' lattices (``ner_app.tagger.crf.readings``) step for step, on
the constrained scores an ONNX export stores in ``crf.npz``.

Batch-first like the CRF: emissions (B, T, K) float32 and lengths (B,), every length at least 1. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ner_app.text.readings import Lattices

FORBIDDEN = -1e4  # the score of a tag a lattice does not allow, as ``ner_app.tagger.crf.crf.FORBIDDEN``


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = x.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.exp(x - top).sum(axis=axis))


def _mask(emissions: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return np.arange(emissions.shape[1])[None, :] < lengths[:, None]  # (B, T)


def viterbi(
    emissions: np.ndarray, lengths: np.ndarray, start: np.ndarray, trans: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Best tag paths (B, T) int64, 0 at padding: the paths of ``CRF.decode``."""
    batch, steps, k = emissions.shape
    mask = _mask(emissions, lengths)
    # At padded steps the pointer is the identity, so backtracking carries each row's last tag back unchanged.
    identity = np.broadcast_to(np.arange(k), (batch, k))
    pointers = [identity]
    score = start + emissions[:, 0]  # (B, K)
    for t in range(1, steps):
        candidates = score[:, :, None] + trans  # (B, K previous, K next)
        arg = candidates.argmax(axis=1)  # (B, K)
        best = np.take_along_axis(candidates, arg[:, None, :], axis=1)[:, 0]
        keep = mask[:, t, None]
        score = np.where(keep, best + emissions[:, t], score)
        pointers.append(np.where(keep, arg, identity))
    tag = (score + end).argmax(axis=1)  # (B,): score is frozen after a row's end, so end applies there
    path = np.empty((batch, steps), dtype=np.int64)
    rows = np.arange(batch)
    for t in range(steps - 1, -1, -1):
        path[:, t] = tag
        tag = pointers[t][rows, tag]
    return np.where(mask, path, 0)


def _forward_backward(
    emissions: np.ndarray, mask: np.ndarray, start: np.ndarray, trans: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward variables (B, T, K), backward variables (B, T, K) and log Z (B,): ``CRF._alphas`` and
    ``CRF._betas``."""
    alpha = start + emissions[:, 0]  # (B, K)
    alphas = [alpha]
    for t in range(1, emissions.shape[1]):
        nxt = _logsumexp(alpha[:, :, None] + trans, axis=1) + emissions[:, t]
        alpha = np.where(mask[:, t, None], nxt, alpha)
        alphas.append(alpha)
    log_z = _logsumexp(alpha + end, axis=1)  # (B,)
    beta = np.broadcast_to(end, alpha.shape)  # a row's last step starts from the end scores
    betas = [beta]
    for t in range(emissions.shape[1] - 2, -1, -1):
        nxt = _logsumexp(trans + (emissions[:, t + 1] + beta)[:, None, :], axis=2)  # (B, K)
        beta = np.where(mask[:, t + 1, None], nxt, end)
        betas.append(beta)
    return np.stack(alphas, axis=1), np.stack(betas[::-1], axis=1), log_z


def marginals(
    emissions: np.ndarray,
    lengths: np.ndarray,
    start: np.ndarray,
    trans: np.ndarray,
    end: np.ndarray,
    temperature: float = 1.0,
) -> np.ndarray:
    """Posterior probability (B, T, K) of each tag at each position, 0 at padding: ``CRF.marginals``, every
    potential divided by ``temperature`` as ``CRF._tempered`` divides them."""
    if temperature != 1.0:
        emissions, start, trans, end = (a / np.float32(temperature) for a in (emissions, start, trans, end))
    mask = _mask(emissions, lengths)
    e64, start64, trans64, end64 = (np.asarray(x, np.float64) for x in (emissions, start, trans, end))
    alphas, betas = _scaled_forward_backward(e64, start64, trans64, end64, mask)
    probs = alphas * betas  # (B, T, K): each position's alpha * beta, up to a factor of that position
    probs /= probs.sum(axis=2, keepdims=True)  # sum_k alpha_t(k) beta_t(k) = Z at every t: exact marginals
    return np.where(mask[:, :, None], probs, 0.0).astype(np.float32)


def _scaled_forward_backward(
    emissions: np.ndarray, start: np.ndarray, trans: np.ndarray, end: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``_forward_backward``'s variables in probability space, each step rescaled to sum 1 (B, T, K) twice:
    a (B, K) x (K, K) product a step instead of a log-sum-exp over (B, K, K), for marginals, where the scale
    of a position cancels. The potentials are shifted by their maxima before ``exp`` (a forbidden transition,
    -1e4, becomes exactly 0, as in log space); float64 keeps the smallest ratios of a step well above
    underflow."""
    steps = emissions.shape[1]
    weights = np.exp(trans - trans.max())  # (K, K)
    local = np.exp(emissions - emissions.max(axis=2, keepdims=True))  # (B, T, K)
    alpha = np.exp(start - start.max()) * local[:, 0]
    alpha /= alpha.sum(axis=1, keepdims=True)
    alphas = np.empty_like(local)
    alphas[:, 0] = alpha
    for t in range(1, steps):
        nxt = (alpha @ weights) * local[:, t]
        nxt /= nxt.sum(axis=1, keepdims=True)
        alpha = np.where(mask[:, t, None], nxt, alpha)
        alphas[:, t] = alpha
    final = np.exp(end - end.max())
    final = np.broadcast_to(final / final.sum(), alpha.shape)  # a row's last step starts from the end scores
    betas = np.empty_like(local)
    beta = final
    betas[:, steps - 1] = beta
    for t in range(steps - 2, -1, -1):
        nxt = (local[:, t + 1] * beta) @ weights.T
        nxt /= nxt.sum(axis=1, keepdims=True)
        beta = np.where(mask[:, t + 1, None], nxt, final)
        betas[:, t] = beta
    return alphas, betas


def allowed_mask(table: Lattices, width: int, num_tags: int) -> np.ndarray:
    """The allowed-tag mask (L, W, K) bool of each lattice's window, position 0 being its ``first``
    (``ner_app.tagger.crf.readings.allowed_mask`` with ``from_first``)."""
    allowed = np.ones((len(table.rows), width, num_tags), dtype=bool)
    first = np.asarray(table.first, dtype=np.intp)
    for lists, value in ((table.clear, False), (table.keep, True), (table.drop, False)):
        lattice, position, *tag = (np.asarray(x, dtype=np.intp) for x in lists)
        allowed[(lattice, position - first[lattice]) + tuple(tag)] = value
    return allowed


@dataclass(frozen=True)
class Sweep:
    """A batch's potentials in float64 (already tempered) and its forward and backward variables, computed
    once for all its lattices (``ner_app.tagger.crf.readings.Sweep``)."""

    emissions: np.ndarray  # (B, T, K)
    start: np.ndarray  # (K,)
    trans: np.ndarray  # (K, K)
    alphas: np.ndarray  # (B, T, K)
    betas: np.ndarray  # (B, T, K)
    log_z: np.ndarray  # (B,)
    mask: np.ndarray  # (B, T)

    @classmethod
    def of(
        cls, emissions: np.ndarray, lengths: np.ndarray, start: np.ndarray, trans: np.ndarray, end: np.ndarray
    ) -> Sweep:
        emissions, start, trans, end = (
            np.asarray(x, dtype=np.float64) for x in (emissions, start, trans, end)
        )
        mask = _mask(emissions, lengths)
        alphas, betas, log_z = _forward_backward(emissions, mask, start, trans, end)
        return cls(emissions, start, trans, alphas, betas, log_z, mask)

    def outside(self, tag: int) -> np.ndarray:
        """Each token's marginal probability (B, T) of tag ``tag``, 0 at padding."""
        probs = np.exp(self.alphas[..., tag] + self.betas[..., tag] - self.log_z[:, None])
        return np.where(self.mask, probs, 0.0)


def lattice_probabilities(
    emissions: np.ndarray,
    lengths: np.ndarray,
    start: np.ndarray,
    trans: np.ndarray,
    end: np.ndarray,
    table: Lattices,
) -> np.ndarray:
    """Probability (L,) float64 of each lattice of ``table`` (the potentials already tempered)."""
    return window_probabilities(Sweep.of(emissions, lengths, start, trans, end), table)


def window_probabilities(sweep: Sweep, table: Lattices) -> np.ndarray:
    """Probability (L,) float64 of each lattice of ``table`` over the batch of ``sweep``:
    ``ner_app.tagger.crf.readings.window_probabilities`` step for step."""
    emissions, start, trans = sweep.emissions, sweep.start, sweep.trans
    rows, first, last = (np.asarray(x, dtype=np.intp) for x in (table.rows, table.first, table.last))
    width = int((last - first).max()) + 1
    positions = first[:, None] + np.arange(width)  # (L, W)
    inside = positions <= last[:, None]
    positions = np.minimum(positions, emissions.shape[1] - 1)
    allowed = allowed_mask(table, width, emissions.shape[2])  # (L, W, K)
    window = np.where(allowed, emissions[rows[:, None], positions], FORBIDDEN)  # (L, W, K)
    before = sweep.alphas[rows, np.maximum(first - 1, 0)]  # (L, K)
    entering = _logsumexp(before[:, :, None] + trans, axis=1)
    alpha = np.where((first == 0)[:, None], start, entering) + window[:, 0]
    for i in range(1, width):
        nxt = _logsumexp(alpha[:, :, None] + trans, axis=1) + window[:, i]
        alpha = np.where(inside[:, i, None], nxt, alpha)
    return np.exp(_logsumexp(alpha + sweep.betas[rows, last], axis=1) - sweep.log_z[rows])
