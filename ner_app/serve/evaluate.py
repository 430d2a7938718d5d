"""``ner-app evaluate``: an exported tagger scored on a gold CoNLL file, as training scores dev and test.

The scores are the ones ``metrics.json`` holds (``train/reports.entity_scores``: seqeval's default mode on the
file's own tags, which counts entities exactly as conlleval does), so evaluating a run's export on its dev or
test file gives that run's numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError
from ner_app.serve.predictor import Predictor
from ner_app.text.conll import read_conll, require_annotated, write_predictions
from ner_app.text.tags import detect_scheme
from ner_app.train.reports import entity_scores


def evaluate_file(
    predictor: Predictor, gold_path: str | Path, predictions_path: str | Path | None = None
) -> dict[str, Any]:
    """Tag every sentence of ``gold_path`` (documents kept for document context) and score the tags against
    the file's: entity precision, recall and F1 in percent, overall and per type, and the counts. With
    ``predictions_path``, also write ``token gold predicted`` lines (conlleval's input) there."""
    sentences = read_conll(gold_path)
    if not sentences:
        raise NerAppError(f"{gold_path}: no sentences (expected 'token ... tag' lines)")
    require_annotated(sentences, gold_path)
    gold = [s.tags for s in sentences]
    scheme = detect_scheme(gold)
    if scheme == "BIOES":  # conlleval's chunking knows B, I and O only
        raise NerAppError(
            f"{gold_path}: E- or S- tags found; evaluate reads IOB1 or IOB2 tags, as conlleval does"
        )
    tagged = predictor.tag([s.tokens for s in sentences], [s.doc for s in sentences])
    predicted = [predictor.to_source(tags) for tags, _ in tagged]
    if predictions_path is not None:
        write_predictions(predictions_path, [s.tokens for s in sentences], gold, predicted)
    scores = entity_scores(gold, predicted)
    return {
        "file": str(gold_path),
        "sentences": len(sentences),
        "tokens": sum(len(s.tokens) for s in sentences),
        "scheme": scheme,
        **scores,
    }


def score_table(result: dict[str, Any]) -> str:
    """The scores as a Markdown table: one row per entity type, then all types together (percent)."""
    rows = ["| type | precision | recall | F1 | gold entities |", "|---|---:|---:|---:|---:|"]
    for name, s in sorted(result["per_type"].items()):
        rows.append(
            f"| {name} | {s['precision']:.2f} | {s['recall']:.2f} | {s['f1']:.2f} | {s['support']:,} |"
        )
    total = sum(s["support"] for s in result["per_type"].values())
    rows.append(
        f"| **all** | {result['precision']:.2f} | {result['recall']:.2f} | **{result['f1']:.2f}** | {total:,} |"
    )
    return "\n".join(rows) + "\n"
