"""The CRF's decoding in numpy, for the ONNX predictor: ``CRF.decode`` (Viterbi) and ``CRF.marginals``
(forward-backward) step for step, on the constrained scores an ONNX export stores in ``crf.npz``.

Batch-first like the CRF: emissions (B, T, K) float32 and lengths (B,), every length at least 1. No torch.
"""

from __future__ import annotations

import numpy as np


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
    probs = np.exp(np.stack(alphas, axis=1) + np.stack(betas[::-1], axis=1) - log_z[:, None, None])
    return np.where(mask[:, :, None], probs, 0.0).astype(np.float32)
