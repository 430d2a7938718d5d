"""Entity scores of predicted tags against gold tags: what ``metrics.json`` holds and ``evaluate`` prints.

seqeval's default mode, which counts entities as conlleval does. No torch here: training and ``evaluate`` both
score with it, so an export scored on a run's dev file gives that run's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seqeval.metrics import classification_report, f1_score, precision_score, recall_score


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Entity precision, recall and F1 in percent (seqeval default mode, which scores like conlleval)."""
    gold, predicted = [list(t) for t in gold], [list(t) for t in predicted]
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    per_type = {
        name: {
            "precision": 100 * v["precision"],
            "recall": 100 * v["recall"],
            "f1": 100 * v["f1-score"],
            "support": int(v["support"]),
        }
        for name, v in report.items()
        if not name.endswith(" avg")
    }
    return {
        "precision": 100 * precision_score(gold, predicted, zero_division=0),
        "recall": 100 * recall_score(gold, predicted, zero_division=0),
        "f1": 100 * f1_score(gold, predicted, zero_division=0),
        "per_type": per_type,
    }
