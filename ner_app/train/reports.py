"""Classification reports of a run (its entity scores: ``text/scores.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import seqeval.scheme
from seqeval.metrics import classification_report

from ner_app.text.tags import scheme_of


def text_report(
    gold: Sequence[Sequence[str]],
    predicted: Sequence[Sequence[str]],
    gold_train_scheme: Sequence[Sequence[str]],
    predicted_train_scheme: Sequence[Sequence[str]],
    train_scheme: str,
) -> str:
    """Default-mode report on the original tags, then strict-mode report in the training scheme."""
    default = classification_report(
        [list(t) for t in gold], [list(t) for t in predicted], digits=4, zero_division=0
    )
    strict = classification_report(
        [list(t) for t in gold_train_scheme],
        [list(t) for t in predicted_train_scheme],
        digits=4,
        mode="strict",
        scheme=_strict_mode(train_scheme),
        zero_division=0,
    )
    return (
        "seqeval, default mode (conlleval scoring), original tags:\n"
        f"{default}\nseqeval, strict mode, {train_scheme} tags:\n{strict}"
    )


def _strict_mode(train_scheme: str) -> type[seqeval.scheme.Token] | Any:
    """seqeval's scheme class for strict-mode scores in ``train_scheme`` (the tag grammar's record names it)."""
    name = scheme_of(train_scheme).seqeval
    if name is None:
        raise ValueError(f"seqeval has no strict mode for tag scheme {train_scheme!r}")
    return getattr(seqeval.scheme, name)


def percent_table(scores: dict[str, Any]) -> str:
    """``entity_scores`` as one table in percent: a row per entity type, then all types together."""
    rows = [(name, v) for name, v in sorted(scores["per_type"].items())]
    support = sum(int(v["support"]) for _, v in rows)
    rows.append(("all", {**scores, "support": support}))
    width = max(len("type"), *(len(name) for name, _ in rows))
    lines = [
        "entity scores in percent (seqeval, conlleval scoring):",
        f"{'type':<{width}}  precision  recall      F1  support",
    ]
    for name, v in rows:
        lines.append(
            f"{name:<{width}}  {v['precision']:9.2f}  {v['recall']:6.2f}  {v['f1']:6.2f}  {v['support']:7d}"
        )
    return "\n".join(lines)
