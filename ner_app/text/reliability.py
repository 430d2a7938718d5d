"""How well entity scores match how often the entities are right: correctness against gold, the expected
calibration error (ECE) over equal-width bins, the reliability diagram's bins and the binary log loss.

An entity is correct when a gold entity has exactly its span and its type. No torch here: the fitting
(``tagger/crf/calibration.py``), the ``calibrate`` command and the run report all read these numbers.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ner_app.text.tags import Span

BINS = 10  # equal-width bins over [0, 1]: the usual ECE (Guo et al. 2017; Kumar et al. 2019 on its bias)
LOG_LOSS_EPS = 1e-12  # a score of exactly 0 or 1 costs log(1e-12), not infinity


def correct_entities(predicted: Sequence[Span], gold: Sequence[Span]) -> list[bool]:
    """For each predicted entity ``(type, start, end)``, whether a gold entity has its span and type."""
    wanted = set(gold)
    return [span in wanted for span in predicted]


@dataclass(frozen=True)
class Bin:
    """One bin of the reliability diagram: its bounds, how many entities fell in it, their mean score and the
    share of them that are correct (0 for an empty bin)."""

    low: float
    high: float
    count: int
    confidence: float
    accuracy: float


def _check(scores: Sequence[float], correct: Sequence[bool]) -> None:
    if len(scores) != len(correct):
        raise ValueError(f"{len(scores)} scores but {len(correct)} correctness labels")


def reliability_bins(scores: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> list[Bin]:
    """``bins`` equal-width bins over [0, 1]; bin i holds scores in [i/bins, (i+1)/bins), the last one 1.0 too.
    A score outside [0, 1] goes to the nearest end bin."""
    _check(scores, correct)
    if bins < 1:
        raise ValueError(f"bins must be >= 1, found {bins}")
    totals = [[0, 0.0, 0] for _ in range(bins)]  # count, summed score, correct count
    for score, right in zip(scores, correct, strict=True):
        i = min(max(int(math.floor(score * bins)), 0), bins - 1)
        totals[i][0] += 1
        totals[i][1] += score
        totals[i][2] += int(right)
    return [
        Bin(i / bins, (i + 1) / bins, int(n), s / n if n else 0.0, r / n if n else 0.0)
        for i, (n, s, r) in enumerate(totals)
    ]


def expected_calibration_error(scores: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> float:
    """ECE: the mean over entities of |accuracy - mean score| of their bin (0.0 without entities)."""
    total = len(scores)
    if total == 0:
        _check(scores, correct)
        return 0.0
    return sum(
        b.count / total * abs(b.accuracy - b.confidence) for b in reliability_bins(scores, correct, bins)
    )


def log_loss(scores: Sequence[float], correct: Sequence[bool]) -> float:
    """Mean binary cross-entropy of the scores against correctness (scores kept in [eps, 1 - eps])."""
    _check(scores, correct)
    if not scores:
        return 0.0
    total = 0.0
    for score, right in zip(scores, correct, strict=True):
        p = min(max(score, LOG_LOSS_EPS), 1.0 - LOG_LOSS_EPS)
        total -= math.log(p) if right else math.log1p(-p)
    return total / len(scores)


_TOLD: set[str] = set()  # the models whose uncalibrated scores were already pointed out in this process


def note_uncalibrated(calibrated: bool, model: str) -> None:
    """Where scores are shown: say once per model and process, on stderr, that an export without a calibration
    record (made before calibration existed) gives uncalibrated scores. Not an error: it still tags as before."""
    if calibrated or model in _TOLD:
        return
    _TOLD.add(model)
    print(
        f"note: {model}: no calibration record (an export made before calibration): its entity scores are the "
        "uncalibrated CRF probabilities, often too confident; ner-app calibrate writes a calibrated copy",
        file=sys.stderr,
        flush=True,
    )
