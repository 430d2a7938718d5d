"""``python -m ner_app report RUN_DIR``: one self-contained HTML page about a finished training run.

It reads what ``train.py`` leaves in the run folder, nothing else (``run_files``); a missing or malformed file
is one ``NerAppError`` naming it. The page is ``page``'s shell: entity types in the same colours as on the
predictions page.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from ner_app.errors import DISK_FULL, MissingFileError, NerAppError
from ner_app.files import Claim, claim_file, write_text
from ner_app.report import charts, page
from ner_app.report.calibration_report import calibration_section
from ner_app.report.curves_section import curves_section
from ner_app.report.error_analysis import (
    CATEGORIES,
    ErrorBreakdown,
    Outcome,
    error_breakdown,
    has_error,
    spans,
)
from ner_app.report.forgetting import forgetting_section
from ner_app.report.run_files import (
    Sentence,
    learning_curves,
    read_elmo_mixes,
    read_log,
    read_model_types,
    read_predictions,
    read_transformer_mix,
)
from ner_app.text.tags import Span
from ner_app.train.corpus import EVALUATED
from ner_app.train.metrics import Mix, RunMetrics

log = logging.getLogger("ner_app")
MAX_SENTENCES = 20
MAX_PLACES = 8  # where a repeated sentence occurs: the first few
LABELS = {
    "correct": "correct",
    "wrong_type": "wrong type",
    "wrong_boundary": "wrong boundary",
    "missed": "missed",
    "spurious": "spurious",
}


def _error_section(breakdowns: dict[str, ErrorBreakdown]) -> str:
    parts = [
        page.paragraph(
            "Each gold entity is paired with the predicted entity sharing the most tokens with it. correct: same "
            "boundaries and type; wrong type: same boundaries, other type; wrong boundary: overlapping but "
            "starting or ending elsewhere (any type); missed: no predicted entity overlaps it; spurious: a "
            "predicted entity that overlaps no gold entity (counted under its predicted type).",
            note=True,
        )
    ]
    header = ["type", *(LABELS[c] for c in CATEGORIES)]
    for split, b in breakdowns.items():
        rows = [[t, *(b.counts[t][c] for c in CATEGORIES)] for t in b.types]
        rows.append(["all", *(b.totals()[c] for c in CATEGORIES)])
        parts.append(page.table(header, rows, caption=f"{split}: entity outcomes per type"))
    return page.section("errors", "Entity-level error breakdown", parts)


def _confusion_section(breakdowns: dict[str, ErrorBreakdown]) -> str:
    parts = [
        page.paragraph(
            "Rows: gold type; columns: the type of the predicted entity paired with it, "
            "'none' for missed entities (column) and spurious predictions (row).",
            note=True,
        )
    ]
    for split, b in breakdowns.items():
        labels, rows = b.matrix()
        figure = charts.confusion_matrix(labels, rows, f"{split}: gold vs predicted type")
        parts.append(page.image(figure, f"{split} type confusion matrix"))
    return page.section("confusion", "Type confusion matrix", parts)


def _elmo_section(mixes: Sequence[Mix], source: str) -> str:
    if not mixes:
        return page.section(
            "elmo", "ELMo layer weights", [page.paragraph(f"This run has no ELMo (no mix in {source}).")]
        )
    rows = [[f"{m.place(k)} mix", *m.softmax_w, m.gamma] for k, m in enumerate(mixes)]
    header = ["", *(f"softmax(w) layer {j}" for j in range(len(mixes[0].softmax_w))), "gamma"]
    figure = charts.layer_weights(mixes)
    return page.section(
        "elmo",
        "ELMo layer weights",
        [
            page.paragraph(f"The best weights' scalar mix (read from {source}).", note=True),
            page.table(header, rows),
            page.image(figure, "ELMo layer weights"),
        ],
    )


def _transformer_section(mix: Mix, source: str) -> str:
    """The transformer feature's learned mix: layer 0 is the encoder's embedding layer, j its j-th block."""
    header = [
        "",
        "softmax(w) embeddings",
        *(f"softmax(w) block {j}" for j in range(1, len(mix.softmax_w))),
        "gamma",
    ]
    return page.section(
        "transformer",
        "Transformer layer weights",
        [
            page.paragraph(
                f"The best weights' scalar mix of the encoder's hidden states (read from {source}).",
                note=True,
            ),
            page.table(header, [["transformer mix", *mix.softmax_w, mix.gamma]]),
        ],
    )


Marked = list[tuple[Span, str]]


def _marks(gold: list[Span], predicted: list[Span], outcomes: Sequence[Outcome]) -> tuple[Marked, Marked]:
    """(gold spans, predicted spans), each with its problem ('' when correct)."""
    gold_problem = {o.gold: LABELS[o.category] for o in outcomes if o.gold and o.category != "correct"}
    predicted_problem = {
        o.predicted: LABELS[o.category] for o in outcomes if o.predicted and o.category != "correct"
    }
    paired = {o.predicted for o in outcomes if o.predicted}
    return (
        [(s, gold_problem.get(s, "")) for s in gold],
        [(s, predicted_problem.get(s, "" if s in paired else "wrong boundary")) for s in predicted],
    )


def highlighted(tokens: Sequence[str], marked: Marked) -> str:
    """The sentence with each span of ``marked`` = [(span, problem)] in its type's colour; a span with a
    problem (such as "wrong type") gets a red frame and the problem in its tooltip."""
    starts = {start: (kind, end, problem) for (kind, start, end), problem in marked}
    out, i = [], 0
    while i < len(tokens):
        if i not in starts:
            out.append(page.esc(tokens[i]))
            i += 1
            continue
        kind, end, problem = starts[i]
        words = " ".join(page.esc(t) for t in tokens[i:end])
        out.append(page.mark(kind, words, f"{kind}: {problem}" if problem else kind, bad=bool(problem)))
        i = end
    return " ".join(out)


def _sentences_section(data: dict[str, list[Sentence]], breakdowns: dict[str, ErrorBreakdown]) -> str:
    # A sentence that occurs more than once with the same gold and predicted tags (CoNLL-2003 test repeats some)
    # is one entry, shown once with where it occurs.
    found: dict[tuple[tuple[str, ...], ...], tuple[Sentence, list[Outcome], list[str]]] = {}
    for split in ("test", "dev"):
        for number, (sentence, outcomes) in enumerate(
            zip(data[split], breakdowns[split].sentences, strict=True)
        ):
            if has_error(outcomes):
                key = tuple(map(tuple, sentence))
                found.setdefault(key, (sentence, outcomes, []))[2].append(f"{split} sentence {number + 1}")
    shown = []
    for (tokens, gold_tags, predicted_tags), outcomes, where in list(found.values())[:MAX_SENTENCES]:
        gold, predicted = _marks(spans(gold_tags), spans(predicted_tags), outcomes)
        label = where[0]
        if len(where) > 1:
            places = ", ".join(where[:MAX_PLACES]) + (", ..." if len(where) > MAX_PLACES else "")
            label = f"{len(where)} times, shown once: {places}"
        shown.append(
            f'<div class="sentence"><div class="note">{page.esc(label)}</div>'
            f'<div class="tagged"><span class="who">gold</span>{highlighted(tokens, gold)}</div>'
            f'<div class="tagged"><span class="who">predicted</span>{highlighted(tokens, predicted)}</div></div>'
        )
    total = sum(len(where) for *_, where in found.values())
    repeats = f" ({total} counting repeats, each shown once with its count)" if total > len(found) else ""
    intro = page.paragraph(
        f"{len(found)} sentences with at least one error{repeats}; test first, then dev, at "
        f"most {MAX_SENTENCES} shown. A red frame marks an entity that is not correct.",
        note=True,
    )
    return page.section("sentences", "Sentences with errors", [intro, *shown])


def _per_type_section(metrics: RunMetrics) -> str:
    per_type = {s: metrics.split(s).per_type for s in EVALUATED}
    types = sorted({t for s in EVALUATED for t in per_type[s]})
    rows = [
        [
            t,
            *(
                getattr(per_type[s][t], k) if t in per_type[s] else 0.0
                for s in EVALUATED
                for k in ("precision", "recall", "f1")
            ),
            *(per_type[s][t].support if t in per_type[s] else 0 for s in EVALUATED),
        ]
        for t in types
    ]
    header = [
        "type",
        *(f"{s} {k}" for s in EVALUATED for k in ("P", "R", "F1")),
        *(f"{s} support" for s in EVALUATED),
    ]
    f1 = {s: {t: v.f1 for t, v in per_type[s].items()} for s in EVALUATED}
    if not any(v for scores in f1.values() for v in scores.values()):  # bars of height 0: empty axes
        chart = page.paragraph(
            "F1 per type: 0.00 for every type on dev and test, so no chart is drawn (a run this short has not "
            "found an entity yet)."
        )
    else:
        chart = page.image(charts.per_type_scores(f1), "F1 per type")
    return page.section("per-type", "Scores per entity type", [page.table(header, rows), chart])


def build_report(run_dir: str | Path) -> str:
    """The report page of the run in ``run_dir``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise MissingFileError(
            f"{run_dir}: not found or not a folder (expected a run folder written by train.py)"
        )
    metrics, rows = RunMetrics.read(run_dir / "metrics.json"), read_log(run_dir)
    data = {split: read_predictions(run_dir, split) for split in EVALUATED}
    mixes, source = read_elmo_mixes(run_dir)
    transformer_mix = read_transformer_mix(run_dir)
    breakdowns = {
        s: error_breakdown([g for _, g, _ in data[s]], [p for _, _, p in data[s]]) for s in EVALUATED
    }
    types = sorted({t for b in breakdowns.values() for t in b.types})

    scores = {s: metrics.split(s) for s in EVALUATED}
    speeds = {s: "–" if x.sentences_per_s is None else x.sentences_per_s for s, x in scores.items()}
    summary = page.table(
        ["split", "precision", "recall", "F1", "sentences / s (evaluation)"],
        [[s, x.precision, x.recall, x.f1, speeds[s]] for s, x in scores.items()],
    )
    loss, dev, speed = learning_curves(rows)
    epochs = len(set(loss) | set(dev) | set(speed))
    note = (
        f"{epochs} epoch{'s' * (epochs != 1)} trained; entity scores in %, seqeval default mode (conlleval)."
    )
    sections = [
        page.section("summary", "Final scores (best checkpoint)", [summary, page.paragraph(note, note=True)]),
        curves_section(loss, dev, speed),
        _per_type_section(metrics),
        calibration_section(run_dir),
        *([forgetting_section(metrics.previous_dev)] if metrics.previous_dev is not None else []),
        _error_section(breakdowns),
        _confusion_section(breakdowns),
        _elmo_section(mixes, source),
        *([_transformer_section(transformer_mix, source)] if transformer_mix is not None else []),
        _sentences_section(data, breakdowns),
    ]
    # The model's types first, so that each has the colour the predictions page of its export gives it.
    model_types = read_model_types(run_dir)
    return page.page(f"NER run report: {run_dir.resolve().name}", sections, model_types, extra=types)


def write_report(run_dir: str | Path, output: str | Path | None = None, claim: Claim | None = None) -> Path:
    """Write the report (default ``run_dir/report.html``) atomically: a reader never sees half a page.
    ``claim``: the command drawing it (the output policy of ``files.py``; default: train's last step)."""
    out = Path(output) if output is not None else Path(run_dir) / "report.html"
    claim = claim or Claim("train", also=("report",))
    claim_file(out, claim)
    return write_text(out, build_report(run_dir), claim)


def report_after_training(run_dir: Path) -> Path | None:
    """train.py's last step. The metrics, predictions and export are on disk before it runs, and the report is
    drawn from them alone, so a failure here costs nothing that cannot be redone: it is logged (with the
    command to redraw it) and the run still succeeds."""
    try:
        return write_report(run_dir)
    except Exception as err:
        # a user's mistake or a full disk is the machine's state, not a bug: one line, no traceback
        known = isinstance(err, NerAppError) or (isinstance(err, OSError) and err.errno in DISK_FULL)
        log.warning(
            "report.html not written (%s: %s); the run's results are intact, retry with "
            "`python -m ner_app report %s`",
            type(err).__name__,
            err,
            run_dir,
            exc_info=not known,
        )
        return None
