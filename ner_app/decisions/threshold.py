"""``ner-app find-threshold``: the minimum entity score to keep, chosen on a gold file (CoNLL or any format convert reads).

The file is tagged once. Each predicted entity gets the score ``predict`` gives it (rounded as ``predict``
prints it, so that a suggested threshold acts on the numbers a user sees) and is correct when its type and span
match a gold entity exactly. Dropping the entities that score below a threshold changes only the counts, so the
whole sweep is one sort: precision = kept correct / kept, recall = kept correct / gold entities. The counts are
seqeval's default mode (conlleval's chunks), the scores ``evaluate`` prints (``text/scores.py``): at threshold 0
the row is ``evaluate``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqeval.metrics.sequence_labeling import get_entities

from ner_app.predict.evaluate import read_gold

if TYPE_CHECKING:
    from ner_app.predict.loading import AnyPredictor

GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)  # the rows of the printed table
SCORE_DECIMALS = 4  # as predict prints an entity's score (``text/pieces.py``)


@dataclass(frozen=True)
class ScoredEntity:
    """A predicted entity of sentence ``sentence``: tokens [start, end) in the training scheme, its score and
    whether a gold entity has its type and span."""

    sentence: int
    type: str
    start: int
    end: int
    score: float
    correct: bool


def scored_entities(
    predictor: AnyPredictor, gold_path: str | Path, fmt: str | None = None
) -> tuple[dict[str, Any], list[ScoredEntity]]:
    """Tag the gold file once: its counts (``file``, ``sentences``, ``tokens``, ``scheme``, ``gold_entities``)
    and every predicted entity, scored as ``predict`` scores it (the probability of its reading, rounded) and
    judged against the gold ones."""
    sentences, scheme = read_gold(gold_path, fmt)
    readings = predictor.read([s.tokens for s in sentences], [s.doc for s in sentences])
    found: list[ScoredEntity] = []
    gold_count = 0
    for n, (sentence, reading) in enumerate(zip(sentences, readings, strict=True)):
        gold = {(kind, start, end + 1) for kind, start, end in get_entities(list(sentence.tags))}
        gold_count += len(gold)
        for (start, end, kind), p in reading.entities:
            score = round(p, SCORE_DECIMALS)
            found.append(ScoredEntity(n, kind, start, end, score, (kind, start, end) in gold))
    counts = {
        "file": str(gold_path),
        "sentences": len(sentences),
        "tokens": sum(len(s.tokens) for s in sentences),
        "scheme": scheme,
        "gold_entities": gold_count,
        "predicted_entities": len(found),
    }
    return counts, found


def scores_at(found: Sequence[ScoredEntity], gold_entities: int, threshold: float) -> dict[str, float]:
    """Precision, recall and F1 in percent (0 where undefined, as seqeval's ``zero_division=0``) of the
    entities scoring at least ``threshold``, and how many are kept."""
    kept = [e for e in found if e.score >= threshold]
    correct = sum(e.correct for e in kept)
    return _row(threshold, len(kept), correct, gold_entities)


def _row(threshold: float, kept: int, correct: int, gold: int) -> dict[str, float]:
    precision = correct / kept if kept else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "min_score": threshold,
        "kept": kept,
        "correct": correct,
        "precision": 100 * precision,
        "recall": 100 * recall,
        "f1": 100 * f1,
    }


def sweep(found: Sequence[ScoredEntity], gold_entities: int) -> list[dict[str, float]]:
    """The row of threshold 0 and of every distinct score (each keeps the entities scoring at least it), by
    increasing threshold: one sort, counts from the top."""
    by_score = sorted(found, key=lambda e: e.score, reverse=True)
    rows: list[dict[str, float]] = []
    correct = 0
    for i, entity in enumerate(by_score):
        correct += entity.correct
        if i + 1 == len(by_score) or by_score[i + 1].score != entity.score:
            rows.append(_row(entity.score, i + 1, correct, gold_entities))
    rows.reverse()
    if not rows or rows[0]["min_score"] > 0:
        rows.insert(0, _row(0.0, len(found), sum(e.correct for e in found), gold_entities))
    return rows


def suggest(rows: Sequence[dict[str, float]], precision: float | None) -> dict[str, Any]:
    """The suggested threshold among ``rows`` (by increasing threshold): the best F1 (the lowest threshold of a
    tie, which keeps the most entities), or with ``precision`` (a fraction) the lowest threshold whose
    precision reaches it. ``row`` is None when no threshold reaches the precision."""
    if precision is None:
        best = max(rows, key=lambda r: (r["f1"], -r["min_score"]))
        return {"rule": "best F1", "target_precision": None, "row": best}
    reaching = [r for r in rows if r["precision"] >= 100 * precision]
    return {
        "rule": "target precision",
        "target_precision": precision,
        "row": reaching[0] if reaching else None,
    }


def find_threshold(
    predictor: AnyPredictor, gold_path: str | Path, precision: float | None = None, fmt: str | None = None
) -> dict[str, Any]:
    """The whole result of ``find-threshold``: the file's counts, the ``GRID`` rows, every distinct score's
    row and the suggestion (``fmt``: the gold file's format, None: detected)."""
    counts, found = scored_entities(predictor, gold_path, fmt)
    rows = sweep(found, counts["gold_entities"])
    grid = [scores_at(found, counts["gold_entities"], t) for t in GRID]
    return {**counts, "grid": grid, "every_score": rows, "suggested": suggest(rows, precision)}


def threshold_table(result: dict[str, Any]) -> str:
    """The grid rows, and the suggested one in bold, as a Markdown table (percent)."""
    lines = ["| min score | entities kept | precision | recall | F1 |", "|---:|---:|---:|---:|---:|"]
    chosen = result["suggested"]["row"]
    rows = list(result["grid"])
    if chosen is not None and all(r["min_score"] != chosen["min_score"] for r in rows):
        rows = sorted([*rows, chosen], key=lambda r: r["min_score"])
    for r in rows:
        mark = "**" if chosen is not None and r["min_score"] == chosen["min_score"] else ""
        lines.append(
            f"| {mark}{r['min_score']:.4f}{mark} | {r['kept']:,} | {r['precision']:.2f} | {r['recall']:.2f} | "
            f"{mark}{r['f1']:.2f}{mark} |"
        )
    return "\n".join(lines) + "\n"


def suggestion_line(result: dict[str, Any]) -> str:
    """One line: the suggested ``--min-score`` and why, or why there is none."""
    suggested, row = result["suggested"], result["suggested"]["row"]
    if row is None:
        best = max(r["precision"] for r in result["every_score"])
        return (
            f"no threshold reaches precision {100 * suggested['target_precision']:.2f}% on this file "
            f"(the highest is {best:.2f}%)"
        )
    why = (
        f"the best F1, {row['f1']:.2f}"
        if suggested["rule"] == "best F1"
        else f"the lowest threshold with precision >= {100 * suggested['target_precision']:.2f}%"
    )
    return (
        f"suggested: --min-score {row['min_score']:.4f} ({why}; precision {row['precision']:.2f}, "
        f"recall {row['recall']:.2f}, F1 {row['f1']:.2f}, {row['kept']:,} of {result['predicted_entities']:,} "
        "entities kept)"
    )
