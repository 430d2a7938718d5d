"""``ner-app evaluate``: an exported tagger scored on a gold file (CoNLL or any format convert reads), as training scores dev and test.

The scores are the ones ``metrics.json`` holds (``text/scores.entity_scores``: seqeval's default mode on the
file's own tags, which counts entities exactly as conlleval does), so evaluating a run's export on its dev or
test file gives that run's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ner_app.errors import NerAppError
from ner_app.text.annotations.splits import read_split
from ner_app.text.case import CaseView, case_view
from ner_app.text.conll import Sentence, require_annotated
from ner_app.text.predictions import ConllItem, TaggedSentence
from ner_app.text.scores import entity_scores
from ner_app.text.tags import SCHEMES, convert, detect_scheme, scheme_of

if TYPE_CHECKING:
    from ner_app.predict.loading import AnyPredictor

CONLLEVAL_PREFIXES = "BI"  # the tag prefixes conlleval's chunking (seqeval's default mode) knows


def read_gold(gold_path: str | Path, fmt: str | None = None) -> tuple[list[Sentence], str]:
    """The sentences of a gold file and its tag scheme, every tag known and in a scheme conlleval's chunking
    reads (B, I and O); one ``NerAppError`` naming the file otherwise. The file is read as training reads a
    split file (``read_split``): CoNLL as it is, any other format (``fmt``, or detected) converted to IOB2."""
    sentences = read_split(Path(gold_path), fmt)
    if not sentences:
        raise NerAppError(f"{gold_path}: no sentences (expected 'token ... tag' lines)")
    require_annotated(sentences, gold_path)
    scheme = detect_scheme(s.tags for s in sentences)
    others = [p for p in scheme_of(scheme).prefixes if p not in CONLLEVAL_PREFIXES]
    if others:  # conlleval's chunking knows B, I and O only
        readable = " or ".join(s.name for s in SCHEMES.values() if set(s.prefixes) <= set(CONLLEVAL_PREFIXES))
        raise NerAppError(
            f"{gold_path}: {' or '.join(p + '-' for p in others)} tags found; evaluate reads {readable} tags, "
            "as conlleval does"
        )
    return sentences, scheme


def evaluate_file(
    predictor: AnyPredictor,
    gold_path: str | Path,
    views: Sequence[CaseView] = ("cased",),
    fmt: str | None = None,
) -> tuple[dict[str, Any], list[ConllItem]]:
    """Tag every sentence of ``gold_path`` (documents kept for document context) and score the tags against
    the file's: entity precision, recall and F1 in percent, overall and per type, and the counts. Also the
    predictions as records for a CoNLL writer: ``token gold`` rows with the predicted tag, in the gold file's
    scheme (IOB1 or IOB2), a blank line after each sentence (conlleval's input, ``evaluate --predictions``).

    ``views`` are the case views to score (``ner_app.text.case``: the tokens as written, lower-cased,
    upper-cased; gold tags unchanged). The result's top-level scores and the records are the first view's;
    with more than one, ``result["case_views"]`` holds every view's scores by name."""
    if not views:
        raise ValueError("evaluate_file needs at least one case view")
    sentences, scheme = read_gold(gold_path, fmt)
    gold = [s.tags for s in sentences]
    head = {
        "file": str(gold_path),
        "sentences": len(sentences),
        "tokens": sum(len(s.tokens) for s in sentences),
        "scheme": scheme,
    }
    scored: dict[str, dict[str, Any]] = {}
    items: list[ConllItem] = []
    for view in views:
        tokens = [case_view(s.tokens, view) for s in sentences]
        tagged = predictor.tag(tokens, [s.doc for s in sentences])
        # the gold file's scheme: a model trained on IOB1 files writes IOB1 beside IOB2 gold otherwise
        predicted = [convert(tags, predictor.scheme, scheme) for tags, _ in tagged]
        scored[view] = entity_scores(gold, predicted)
        if not items:
            for words, gold_tags, predicted_tags in zip(tokens, gold, predicted, strict=True):
                rows = tuple(f"{t} {g}" for t, g in zip(words, gold_tags, strict=True))
                items += [TaggedSentence(rows, tuple(predicted_tags)), ""]
    result = {**head, **scored[views[0]]}
    if len(views) > 1:
        result["case_views"] = scored
    return result, items


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


def case_view_table(result: dict[str, Any]) -> str:
    """Every case view's overall scores (``result["case_views"]``) as a Markdown table (percent)."""
    rows = ["| view | precision | recall | F1 |", "|---|---:|---:|---:|"]
    for view, s in result["case_views"].items():
        rows.append(f"| {view} | {s['precision']:.2f} | {s['recall']:.2f} | {s['f1']:.2f} |")
    return "\n".join(rows) + "\n"
