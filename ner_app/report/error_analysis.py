"""Entity-level error breakdown: every gold entity gets one outcome, every unmatched prediction is spurious.

Entities are the chunks seqeval's default mode reads (conlleval's chunking, the one metrics.json scores), as
``text.tags.Span`` = (type, start, end_exclusive). Within one sentence spans never overlap each
other on the same side (gold or predicted), so each token belongs to at most one gold and one predicted span.

For a gold span ``g``, its *partner* is the predicted span sharing the most tokens with it (ties: the one that
starts first); ``g``'s outcome is

- ``correct``: the partner has exactly ``g``'s boundaries and its type (a seqeval true positive);
- ``wrong_type``: the partner has exactly ``g``'s boundaries but another type;
- ``wrong_boundary``: a partner exists (shares at least one token) but starts or ends elsewhere, whatever its
  type;
- ``missed``: no predicted span shares a token with ``g``.

A predicted span that shares no token with any gold span is ``spurious``. A predicted span that overlaps a gold
span without being its partner (two predictions inside one gold entity) is counted nowhere: the gold entity
already counts as ``wrong_boundary``.

Per type, the four gold outcomes count under the gold type (they sum to the type's support) and ``spurious``
under the predicted type. The type confusion matrix pairs each gold entity's type with its partner's type
("none" when missed) and each spurious span's type with a "none" gold row; its diagonal is therefore the
correct entities plus those of right type but wrong boundary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from seqeval.metrics.sequence_labeling import get_entities

from ner_app.text.tags import Span

GOLD_OUTCOMES = ("correct", "wrong_type", "wrong_boundary", "missed")
CATEGORIES = (*GOLD_OUTCOMES, "spurious")
NONE = "none"  # the confusion matrix's row and column for "no entity"


def spans(tags: Sequence[str]) -> list[Span]:
    """The entities of one sentence's tags, chunked as seqeval's default mode (and conlleval) chunks them."""
    return [(kind, start, last + 1) for kind, start, last in get_entities(list(tags))]


@dataclass(frozen=True)
class Outcome:
    """One entry of the breakdown: a gold entity with its partner (or None), or a spurious prediction."""

    category: str
    gold: Span | None
    predicted: Span | None


def classify_sentence(gold: Sequence[Span], predicted: Sequence[Span]) -> list[Outcome]:
    """The outcome of each gold span (in order), then one ``spurious`` outcome per spurious prediction."""
    length = max([end for _, _, end in (*gold, *predicted)], default=0)
    predicted_at: list[int | None] = [None] * length  # token -> index of the predicted span covering it
    gold_at = [False] * length  # token -> covered by a gold span
    for i, (_, start, end) in enumerate(predicted):
        predicted_at[start:end] = [i] * (end - start)
    for _, start, end in gold:
        gold_at[start:end] = [True] * (end - start)

    outcomes: list[Outcome] = []
    for span in gold:
        kind, start, end = span
        shared = Counter(i for i in predicted_at[start:end] if i is not None)
        if not shared:
            outcomes.append(Outcome("missed", span, None))
            continue
        best = max(shared, key=lambda i: (shared[i], -predicted[i][1]))
        partner = predicted[best]
        if partner[1:] != (start, end):
            category = "wrong_boundary"
        else:
            category = "correct" if partner[0] == kind else "wrong_type"
        outcomes.append(Outcome(category, span, partner))
    for span in predicted:
        if not any(gold_at[span[1] : span[2]]):
            outcomes.append(Outcome("spurious", None, span))
    return outcomes


@dataclass
class ErrorBreakdown:
    """Counts per type and category, the type confusion matrix, and each sentence's outcomes."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)  # type -> category -> count
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)  # (gold type, predicted type)
    sentences: list[list[Outcome]] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return sorted(self.counts)

    def totals(self) -> Counter[str]:
        total: Counter[str] = Counter({c: 0 for c in CATEGORIES})
        for counts in self.counts.values():
            total.update(counts)
        return total

    def matrix(self) -> tuple[list[str], list[list[int]]]:
        """Labels (the types, then "none") and rows[gold][predicted] counts ("none", "none" is always 0)."""
        labels = [*self.types, NONE]
        return labels, [[self.confusion[(g, p)] for p in labels] for g in labels]


def error_breakdown(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> ErrorBreakdown:
    """The breakdown over a split: ``gold`` and ``predicted`` hold one tag sequence per sentence."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    result = ErrorBreakdown()
    for gold_tags, predicted_tags in zip(gold, predicted, strict=True):
        outcomes = classify_sentence(spans(gold_tags), spans(predicted_tags))
        result.sentences.append(outcomes)
        for outcome in outcomes:
            gold_type = outcome.gold[0] if outcome.gold else NONE
            partner = outcome.predicted[0] if outcome.predicted else NONE
            kind = gold_type if outcome.gold else partner  # a spurious prediction counts under its own type
            result.counts.setdefault(kind, Counter({c: 0 for c in CATEGORIES}))[outcome.category] += 1
            result.confusion[(gold_type, partner)] += 1
    return result


def has_error(outcomes: Sequence[Outcome]) -> bool:
    return any(o.category != "correct" for o in outcomes)
