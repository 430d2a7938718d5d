"""Entity scores of predicted tags against gold tags: what ``metrics.json`` holds and ``evaluate`` prints.

seqeval's default mode, which counts entities as conlleval does. No torch here: training and ``evaluate`` both
score with it, so an export scored on a run's dev file gives that run's numbers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from seqeval.metrics.sequence_labeling import get_entities

Spans = dict[str, set[tuple[int, int]]]  # entity type -> its (start, end) positions over the joined sentences


def entity_spans(tags: Sequence[Sequence[str]]) -> Spans:
    """Every entity of the sentences by type, as seqeval's default mode reads them (``get_entities``)."""
    spans: Spans = defaultdict(set)
    for name, start, end in get_entities([list(t) for t in tags]):
        spans[name].add((start, end))
    return dict(spans)


class GoldEntities:
    """The entities of a split's gold tags, read once: a training run scores its dev set every epoch."""

    def __init__(self, gold: Sequence[Sequence[str]]) -> None:
        self.lengths = [len(t) for t in gold]
        self.spans = entity_spans(gold)

    def score(self, predicted: Sequence[Sequence[str]]) -> dict[str, Any]:
        """Entity precision, recall and F1 in percent, micro-averaged and per type, of ``predicted`` (each
        sentence as long as its gold one).

        The numbers of seqeval's ``classification_report`` and its ``precision_score``, ``recall_score`` and
        ``f1_score`` with ``zero_division=0``, float for float (tested): the same counts, and each ratio
        computed as seqeval computes it. Those functions read every sentence's entities again at each call,
        sixteen times in all, which an epoch's dev pass waited for. No sentences at all (which seqeval
        refuses) score 0 everywhere, with no types."""
        if [len(t) for t in predicted] != self.lengths:
            raise ValueError("entity_scores: every predicted sentence must be as long as its gold one")
        found = entity_spans(predicted)
        names = sorted(self.spans.keys() | found.keys())
        counts = np.array(
            [
                (
                    len(self.spans.get(n, set()) & found.get(n, set())),
                    len(found.get(n, ())),
                    len(self.spans.get(n, ())),
                )
                for n in names
            ],
            dtype=np.int64,
        ).reshape(-1, 3)  # (types, [true positives, predicted, gold])
        p, r, f = _ratios(counts)
        per_type = {
            n: {"precision": 100 * p[i], "recall": 100 * r[i], "f1": 100 * f[i], "support": int(counts[i, 2])}
            for i, n in enumerate(names)
        }
        precision, recall, f1 = (x[0] for x in _ratios(counts.sum(axis=0, keepdims=True)))
        return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * f1, "per_type": per_type}


def _ratios(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 (each (N,) float64) of counts (N, 3), 0 where a denominator is 0, in seqeval's
    order of operations (so its floats exactly)."""
    tp, predicted, gold = counts[:, 0], counts[:, 1], counts[:, 2]
    precision = tp / np.where(predicted == 0, 1, predicted) * (predicted != 0)
    recall = tp / np.where(gold == 0, 1, gold) * (gold != 0)
    denominator = precision + recall
    f1 = 2.0 * precision * recall / np.where(denominator == 0.0, 1.0, denominator)
    return precision, recall, f1


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Entity precision, recall and F1 in percent (seqeval default mode, which scores like conlleval):
    ``GoldEntities(gold).score(predicted)``."""
    return GoldEntities(gold).score(predicted)
