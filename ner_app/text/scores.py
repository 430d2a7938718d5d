"""Entity scores of predicted tags against gold tags: what ``metrics.json`` holds and ``evaluate`` prints.

seqeval's default mode, which counts entities as conlleval does. No torch here: training and ``evaluate`` both
score with it, so an export scored on a run's dev file gives that run's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seqeval.metrics.sequence_labeling import get_entities, precision_recall_fscore_support


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Entity precision, recall and F1 in percent (seqeval default mode, which scores like conlleval).

    The numbers of seqeval's ``classification_report`` and its ``precision_score``, ``recall_score`` and
    ``f1_score``, from the two calls they all make (per type, and micro-averaged): those five read every
    sentence's entities sixteen times, which an epoch's dev pass waited for."""
    gold, predicted = [list(t) for t in gold], [list(t) for t in predicted]
    names = sorted({e[0] for e in get_entities(gold)} | {e[0] for e in get_entities(predicted)})
    p, r, f, support = precision_recall_fscore_support(gold, predicted, average=None, zero_division=0)
    per_type = {
        name: {"precision": 100 * p[i], "recall": 100 * r[i], "f1": 100 * f[i], "support": int(support[i])}
        for i, name in enumerate(names)
    }
    precision, recall, f1, _ = precision_recall_fscore_support(
        gold, predicted, average="micro", zero_division=0
    )
    return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * f1, "per_type": per_type}
