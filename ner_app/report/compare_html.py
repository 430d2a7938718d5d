"""``compare --html FILE``: the comparison's tables and a chart in one self-contained HTML file.

The chart is drawn by matplotlib on its Agg canvas (no display, no pyplot state) and embedded as a base64 PNG, so the
file can be mailed or attached to an issue as it is.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence

from ner_app.report.compare import SPLITS, Group, Summary
from ner_app.report.compare_tables import Table

_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; color: #111; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding-bottom: .3em; white-space: nowrap; }
img { max-width: 100%; }
"""


def f1_chart_png(groups: Sequence[Group]) -> bytes:
    """Dev and test F1 per group: bars at the mean, error bars of one sample std, a dot per seed."""
    from matplotlib.figure import Figure  # no pyplot: no global backend or figure registry to leak

    width = 0.38
    fig = Figure(figsize=(max(5.0, 1.3 * len(groups) + 2.5), 3.6), dpi=110)
    ax = fig.subplots()
    for k, (split, colour) in enumerate(zip(SPLITS, ("#4c78a8", "#f58518"), strict=True)):
        xs = [i + (k - 0.5) * width for i in range(len(groups))]
        stats = [Summary.of([r.f1[split] for r in g.runs]) for g in groups]
        ax.bar(xs, [s.mean for s in stats], width * 0.92, color=colour, alpha=0.55, label=f"{split} F1")
        ax.errorbar(xs, [s.mean for s in stats], yerr=[s.std or 0.0 for s in stats], fmt="none",
                    ecolor="black", capsize=4, linewidth=1)  # fmt: skip
        for x, g in zip(xs, groups, strict=True):
            ax.scatter([x] * len(g.runs), [r.f1[split] for r in g.runs], s=14, color=colour,
                       edgecolors="black", linewidths=0.5, zorder=3)  # fmt: skip
    names = [g.name.replace("$", r"\$") for g in groups]  # a "$" would start matplotlib's math text
    ax.set_xticks(range(len(groups)), names, rotation=15 if len(groups) > 3 else 0)
    ax.set_ylabel("entity F1 (%)")
    ax.set_title("F1 per config: mean ± sample std, a dot per seed", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")  # Figure draws PNG with the Agg canvas, no display needed
    return buffer.getvalue()


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    rows = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html.escape(c)}</td>' if n else f"<td>{html.escape(c)}</td>"
            for c, n in zip(row, table.numeric, strict=True)
        )
        + "</tr>\n"
        for row in table.rows
    )
    return f"<table>\n<caption>{html.escape(table.title)}</caption>\n<tr>{head}</tr>\n{rows}</table>\n"


def compare_html(groups: Sequence[Group], tables: Sequence[Table]) -> str:
    """The page: the chart, the tables, then each group's run folders."""
    png = base64.b64encode(f1_chart_png(groups)).decode("ascii")
    folders = "".join(
        f"<li><b>{html.escape(g.name)}</b>: "
        + ", ".join(f"{html.escape(str(r.path))} (seed {r.seed})" for r in g.runs)
        + "</li>\n"
        for g in groups
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">\n<title>Run comparison</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n<h1>Run comparison</h1>\n"
        f'<img alt="dev and test F1 per config" src="data:image/png;base64,{png}">\n'
        + "".join(_html_table(t) for t in tables)
        + f"<h2>Run folders</h2>\n<ul>\n{folders}</ul>\n</body>\n</html>\n"
    )
