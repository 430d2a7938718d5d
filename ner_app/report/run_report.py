"""``python -m ner_app report RUN_DIR``: one self-contained HTML page about a finished training run.

It reads what ``train.py`` leaves in the run folder, nothing else: ``metrics.json`` (final dev/test scores),
``logs/metrics.csv`` (the per-step log), ``predictions_{dev,test}.conll`` (token, gold, predicted) and the
ELMo mix weights from ``export/model.safetensors`` (or, without an export, ``checkpoints/best.ckpt`` through
``safe_load``). A missing or malformed file is one ``NerAppError`` naming it.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import write_text
from ner_app.report import charts
from ner_app.report import html as h
from ner_app.report.error_analysis import CATEGORIES, ErrorBreakdown, Span, error_breakdown, has_error, spans

log = logging.getLogger("ner_app")
SPLITS = ("dev", "test")
MAX_SENTENCES = 20
LABELS = {"correct": "correct", "wrong_type": "wrong type", "wrong_boundary": "wrong boundary",
          "missed": "missed", "spurious": "spurious"}  # fmt: skip
_MIX = re.compile(r"(?:tagger\.)?elmo\.scalar_mixes\.(\d+)\.(scalar_parameters|gamma)")

Sentence = tuple[list[str], list[str], list[str]]  # tokens, gold tags, predicted tags


def _need(path: Path) -> Path:
    if not path.is_file():
        raise MissingFileError(f"{path}: not found (expected a run folder written by train.py)")
    return path


def read_metrics(run_dir: Path) -> dict[str, Any]:
    path = _need(run_dir / "metrics.json")
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
        for split in SPLITS:
            for key in ("precision", "recall", "f1", "per_type"):
                metrics[split][key]  # noqa: B018 - presence check
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise NerAppError(
            f"{path}: expected train.py's metrics (dev and test scores), cannot read it ({err})"
        ) from None
    return metrics


def read_log(run_dir: Path) -> list[dict[str, float]]:
    """The rows of ``logs/metrics.csv`` with their non-empty numeric fields."""
    path = _need(run_dir / "logs" / "metrics.csv")
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not {"epoch", "step", "train_loss", "val_f1"} <= set(reader.fieldnames or []):
            raise NerAppError(f"{path}: expected columns epoch, step, train_loss and val_f1 (train.py's log)")
        for number, row in enumerate(reader, start=2):
            try:
                rows.append({k: float(v) for k, v in row.items() if k and v not in ("", None)})
            except (ValueError, TypeError):
                raise NerAppError(f"{path}:{number}: expected numbers, found {row}") from None
    return rows


def learning_curves(rows: Sequence[dict[str, float]]) -> tuple[dict, dict, dict]:
    """Per epoch: mean train loss, dev scores of the fit's validations and training throughput.

    The validation logged after fit (the chosen checkpoint, at a step past the last training step) is left
    out: metrics.json holds it. Throughput comes from Lightning's cumulative ``train/time``, ``train/samples``
    and ``train/lengths``, taken between an epoch's first and last batch so that validation time is excluded.
    """
    losses: dict[int, list[float]] = defaultdict(list)
    counters: dict[int, list[dict[str, float]]] = defaultdict(list)
    for row in rows:
        if "train_loss" in row:
            losses[int(row["epoch"])].append(row["train_loss"])
        if {"train/time", "train/samples", "train/lengths"} <= row.keys():
            counters[int(row["epoch"])].append(row)
    last_step = max((r["step"] for r in rows if "train_loss" in r), default=-1)
    dev = {int(r["epoch"]): {k: r[f"val_{k}"] for k in ("f1", "precision", "recall") if f"val_{k}" in r}
           for r in rows if "val_f1" in r and r["step"] <= last_step}  # fmt: skip
    speed = {}
    for epoch, group in sorted(counters.items()):
        first, last = group[0], group[-1]
        seconds = last["train/time"] - first["train/time"]
        if seconds > 0:
            speed[epoch] = {"sentences": (last["train/samples"] - first["train/samples"]) / seconds,
                            "tokens": (last["train/lengths"] - first["train/lengths"]) / seconds}  # fmt: skip
    return {e: sum(v) / len(v) for e, v in sorted(losses.items())}, dict(sorted(dev.items())), speed


def read_predictions(run_dir: Path, split: str) -> list[Sentence]:
    """``predictions_{split}.conll``: ``token gold predicted`` lines, a blank line between sentences."""
    path = _need(run_dir / f"predictions_{split}.conll")
    sentences: list[Sentence] = []
    current: Sentence = ([], [], [])
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        fields = line.split(" ")
        if line == "":
            if current[0]:
                sentences.append(current)
            current = ([], [], [])
        elif len(fields) != 3 or not all(fields):
            raise NerAppError(f"{path}:{number}: expected 'token gold predicted', found {line[:80]!r}")
        else:
            for column, value in zip(current, fields, strict=True):
                column.append(value)
    if current[0]:
        sentences.append(current)
    return sentences


def read_elmo_mixes(run_dir: Path) -> tuple[list[tuple[list[float], float]], str]:
    """[(softmax(w), gamma)] of each ELMo mix of the best weights ([] without ELMo), and the file read."""
    from ner_app.bilm.scalar_mix import mix_values  # torch: imported only when a report reads weights

    export, best = run_dir / "export" / "model.safetensors", run_dir / "checkpoints" / "best.ckpt"
    if export.is_file():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(str(export))
        except (SafetensorError, OSError) as err:
            raise NerAppError(f"{export}: not a readable safetensors file ({err})") from None
        source = export
    elif best.is_file():
        from ner_app.runtime.checkpoint import load_checkpoint

        state, source = load_checkpoint(best).get("state_dict", {}), best
    else:
        raise MissingFileError(f"{export}: not found, nor {best} (the run's trained weights)")
    found: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in state.items():
        match = _MIX.fullmatch(key)
        if match:
            found[int(match[1])][match[2]] = value
    mixes = []
    for k in sorted(found):
        if set(found[k]) != {"scalar_parameters", "gamma"}:
            raise NerAppError(f"{source}: ELMo mix {k} lacks its weights or gamma")
        mixes.append(mix_values(found[k]["scalar_parameters"], found[k]["gamma"]))
    return mixes, str(source)


def _error_section(breakdowns: dict[str, ErrorBreakdown]) -> str:
    parts = [h.paragraph(
        "Each gold entity is paired with the predicted entity sharing the most tokens with it. correct: same "
        "boundaries and type; wrong type: same boundaries, other type; wrong boundary: overlapping but "
        "starting or ending elsewhere (any type); missed: no predicted entity overlaps it; spurious: a "
        "predicted entity that overlaps no gold entity (counted under its predicted type).", note=True)]  # fmt: skip
    header = ["type", *(LABELS[c] for c in CATEGORIES)]
    for split, b in breakdowns.items():
        rows = [[t, *(b.counts[t][c] for c in CATEGORIES)] for t in b.types]
        rows.append(["all", *(b.totals()[c] for c in CATEGORIES)])
        parts.append(h.table(header, rows, caption=f"{split}: entity outcomes per type"))
    return h.section("errors", "Entity-level error breakdown", parts)


def _confusion_section(breakdowns: dict[str, ErrorBreakdown]) -> str:
    parts = [h.paragraph("Rows: gold type; columns: the type of the predicted entity paired with it, 'none' "
                         "for missed entities (column) and spurious predictions (row).", note=True)]  # fmt: skip
    for split, b in breakdowns.items():
        labels, rows = b.matrix()
        figure = charts.confusion_matrix(labels, rows, f"{split}: gold vs predicted type")
        parts.append(h.image(charts.figure_to_data_uri(figure), f"{split} type confusion matrix"))
    return h.section("confusion", "Type confusion matrix", parts)


def _elmo_section(mixes: list[tuple[list[float], float]], source: str) -> str:
    if not mixes:
        return h.section(
            "elmo", "ELMo layer weights", [h.paragraph(f"This run has no ELMo (no mix in {source}).")]
        )
    rows = [[f"mix {k}", *w, g] for k, (w, g) in enumerate(mixes)]
    header = ["", *(f"softmax(w) layer {j}" for j in range(len(mixes[0][0]))), "gamma"]
    figure = charts.layer_weights(mixes)
    return h.section("elmo", "ELMo layer weights", [
        h.paragraph(f"The best weights' scalar mix (read from {source}).", note=True),
        h.table(header, rows), h.image(charts.figure_to_data_uri(figure), "ELMo layer weights")])  # fmt: skip


def _marks(gold: list[Span], predicted: list[Span], outcomes: Sequence[Any]) -> tuple[list, list]:
    """(gold spans, predicted spans), each with its problem ('' when correct)."""
    gold_problem = {o.gold: LABELS[o.category] for o in outcomes if o.gold and o.category != "correct"}
    predicted_problem = {
        o.predicted: LABELS[o.category] for o in outcomes if o.predicted and o.category != "correct"
    }
    paired = {o.predicted for o in outcomes if o.predicted}
    return ([(s, gold_problem.get(s, "")) for s in gold],
            [(s, predicted_problem.get(s, "" if s in paired else "wrong boundary")) for s in predicted])  # fmt: skip


def _sentences_section(
    data: dict[str, list[Sentence]], breakdowns: dict[str, ErrorBreakdown], types: list[str]
) -> str:
    index = {t: i for i, t in enumerate(types)}
    shown: list[str] = []
    for split in ("test", "dev"):
        for number, (sentence, outcomes) in enumerate(
            zip(data[split], breakdowns[split].sentences, strict=True)
        ):
            if len(shown) == MAX_SENTENCES or not has_error(outcomes):
                continue
            tokens, gold_tags, predicted_tags = sentence
            gold, predicted = _marks(spans(gold_tags), spans(predicted_tags), outcomes)
            shown.append(
                f'<div class="sentence"><div class="note">{h.esc(split)} sentence {number + 1}</div>'
                f'<div class="line"><span class="who">gold</span>{h.highlighted(tokens, gold, index)}</div>'
                f'<div class="line"><span class="who">predicted</span>{h.highlighted(tokens, predicted, index)}</div></div>'
            )  # fmt: skip
    intro = h.paragraph(f"{len(shown)} sentences with at least one error (test first, then dev; at most "
                        f"{MAX_SENTENCES}); a red frame marks an entity that is not correct.", note=True)  # fmt: skip
    return h.section("sentences", "Sentences with errors", [intro, *shown])


def _per_type_section(metrics: dict[str, Any]) -> str:
    per_type = {s: metrics[s]["per_type"] for s in SPLITS}
    keys = ("precision", "recall", "f1")
    rows = [
        [t, *(float(per_type[s].get(t, {}).get(k, 0.0)) for s in SPLITS for k in keys),
         *(int(per_type[s].get(t, {}).get("support", 0)) for s in SPLITS)]
        for t in sorted({t for s in SPLITS for t in per_type[s]})
    ]  # fmt: skip
    header = [
        "type",
        *(f"{s} {k}" for s in SPLITS for k in ("P", "R", "F1")),
        *(f"{s} support" for s in SPLITS),
    ]
    chart = h.image(charts.figure_to_data_uri(charts.per_type_scores(per_type)), "F1 per type")
    return h.section("per-type", "Scores per entity type", [h.table(header, rows), chart])


def build_report(run_dir: str | Path) -> str:
    """The report page of the run in ``run_dir``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise MissingFileError(
            f"{run_dir}: not found or not a folder (expected a run folder written by train.py)"
        )
    metrics, rows = read_metrics(run_dir), read_log(run_dir)
    data = {split: read_predictions(run_dir, split) for split in SPLITS}
    mixes, source = read_elmo_mixes(run_dir)
    breakdowns = {s: error_breakdown([g for _, g, _ in data[s]], [p for _, _, p in data[s]]) for s in SPLITS}
    types = sorted({t for b in breakdowns.values() for t in b.types})  # the highlight colours' order

    summary = h.table(["split", "precision", "recall", "F1", "sentences / s (evaluation)"],
                      [[s, metrics[s]["precision"], metrics[s]["recall"], metrics[s]["f1"],
                        float(metrics[s].get("sentences_per_s", 0.0))] for s in SPLITS])  # fmt: skip
    loss, dev, speed = learning_curves(rows)
    curves = h.image(charts.figure_to_data_uri(charts.learning_curves(loss, dev, speed)), "learning curves")
    note = f"{len(loss)} epochs trained; entity scores in %, seqeval default mode (conlleval)."
    sections = [
        h.section("summary", "Final scores (best checkpoint)", [summary, h.paragraph(note, note=True)]),
        h.section("learning-curves", "Learning curves", [curves]),
        _per_type_section(metrics), _error_section(breakdowns), _confusion_section(breakdowns),
        _elmo_section(mixes, source), _sentences_section(data, breakdowns, types),
    ]  # fmt: skip
    return h.page(f"NER run report: {run_dir.resolve().name}", sections, types)


def write_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Write the report (default ``run_dir/report.html``) atomically: a reader never sees half a page."""
    page = build_report(run_dir)
    out = Path(output) if output is not None else Path(run_dir) / "report.html"
    return write_text(out, page)


def report_after_training(run_dir: Path) -> Path | None:
    """train.py's last step. The metrics, predictions and export are on disk before it runs, and the report is
    drawn from them alone, so a failure here costs nothing that cannot be redone: it is logged (with the
    command to redraw it) and the run still succeeds."""
    try:
        return write_report(run_dir)
    except Exception as err:
        log.warning("report.html not written (%s: %s); the run's results are intact, retry with "
                    "`python -m ner_app report %s`", type(err).__name__, err, run_dir,
                    exc_info=not isinstance(err, NerAppError))  # fmt: skip
        return None
