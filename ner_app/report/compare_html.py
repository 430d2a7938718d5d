"""``compare --html FILE``: the comparison's chart and tables in one self-contained page (``page``'s shell),
so the file can be mailed or attached to an issue as it is."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from ner_app.report import page
from ner_app.report.charts import seed_scores
from ner_app.report.compare import EVALUATED, Group
from ner_app.report.compare_tables import Table


def f1_chart(groups: Sequence[Group]) -> Figure:
    """Dev and test F1 per group: a dot per seed, mean ± one sample std, the axis fitted to the scores."""
    scores = {split: [[r.f1[split] for r in g.runs] for g in groups] for split in EVALUATED}
    return seed_scores([g.name for g in groups], scores)


def compare_html(groups: Sequence[Group], tables: Sequence[Table]) -> str:
    """The page: the chart, the tables (as given: ``compare_tables.narrow`` cuts wide ones), then each group's
    run folders."""
    folders = "".join(
        f"<li><b>{page.esc(g.name)}</b>: "
        + ", ".join(f"{page.esc(r.path)} (seed {r.seed})" for r in g.runs)
        + "</li>\n"
        for g in groups
    )
    chart = f1_chart(groups)
    low = chart.axes[0].get_ylim()[0]
    note = "" if low == 0 else f" The F1 axis is fitted to the scores: it starts at {low:.2f}, not at 0."
    parts = [
        page.image(chart, "dev and test F1 per config"),
        page.paragraph(f"A dot per seed; the bar is the mean, the whiskers one sample std.{note}", note=True),
        *(page.table(t.header, t.rows, caption=t.title, numeric=t.numeric) for t in tables),
        f"<h2>Run folders</h2>\n<ul>\n{folders}</ul>",
    ]
    return page.page("Run comparison", parts)
