"""The report's section on a continued run (``train --init-from`` with ``data.previous_dev``): each old entity
type's F1 on the old model's dev file, by the export the run started from and by the trained model."""

from __future__ import annotations

from pathlib import Path

from ner_app.report import charts, page
from ner_app.train.metrics import PreviousDev

NOTE = (
    "Before: the export this run started from; after: the checkpoint this run chose. Both tag the old model's "
    "dev file; a drop is what the old types lost to the new data (entity F1 in %, seqeval default mode). "
    "'all' scores every entity of the file, the new types' predictions included."
)


def forgetting_section(record: PreviousDev) -> str:
    """A table (type, F1 before, F1 after, change, support) of the old types, and their bars."""
    rows: list[list[object]] = []
    pairs = [(record.before.per_type.get(t), record.after.per_type.get(t)) for t in record.types]
    for t, (b, a) in zip(record.types, pairs, strict=True):
        f1 = [s.f1 if s is not None else 0.0 for s in (b, a)]
        support = max((s.support for s in (b, a) if s is not None), default=0)
        rows.append([t, f1[0], f1[1], f"{f1[1] - f1[0]:+.2f}", support])
    before, after = record.before.f1, record.after.f1
    total = sum(max((s.support for s in (b, a) if s is not None), default=0) for b, a in pairs)
    rows.append(["all", before, after, f"{after - before:+.2f}", total])
    header = ["type", "F1 before", "F1 after", "change", "support"]
    scores = {
        name: {t: s.per_type[t].f1 for t in record.types if t in s.per_type}
        for name, s in (("before", record.before), ("after", record.after))
    }
    parts = [
        page.paragraph(NOTE, note=True),
        page.table(
            header, rows, caption=f"old types on {Path(record.file).name}", numeric=[False, *[True] * 4]
        ),
        page.image(charts.per_type_scores(scores), "old types' F1 before and after"),
    ]
    return page.section("forgetting", "Old types before and after (forgetting)", parts)
