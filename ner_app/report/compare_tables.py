"""The tables of ``compare``: as data first, then cut to a width (``narrow``), then as Markdown (stdout, the
README's results tables) or HTML (``compare_html``). ``compare_table`` is the whole of ``compare``'s output
for a list of run folders, for other commands to print."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

from ner_app.report.compare import (
    EVALUATED,
    Group,
    Run,
    Summary,
    differing_keys,
    group_runs,
    paired_differences,
    read_runs,
    value_of,
)
from ner_app.train.metrics import Mix

MAX_WIDTH = 100  # characters of a Markdown line: a terminal, a diff, a README read as text


@dataclass(frozen=True)
class Table:
    """A titled table of text cells; ``numeric`` marks the columns to right-align; the first ``keys`` columns
    say what a row is about and are repeated in every part when the table is cut to a width."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]
    keys: int = 1


def f1_table(groups: Sequence[Group]) -> Table:
    rows = tuple(
        (
            g.name,
            str(len(g.runs)),
            ", ".join(map(str, g.seeds)),
            *(str(Summary.of([r.f1[s] for r in g.runs])) for s in EVALUATED),
        )
        for g in groups
    )
    return Table(
        "Entity F1 (%), mean ± sample std (n − 1) over seeds",
        ("config", "runs", "seeds", "dev F1", "test F1"),
        rows,
        (False, True, False, True, True),
    )


def per_type_table(groups: Sequence[Group], split: str) -> Table:
    """F1 per entity type; a type some runs of a group lack is averaged over the runs that have it (n shown)."""
    types = sorted({t for g in groups for r in g.runs for t in r.per_type[split]})
    rows = []
    for g in groups:
        cells = []
        for t in types:
            values = [r.per_type[split][t] for r in g.runs if t in r.per_type[split]]
            summary = Summary.of(values) if values else None
            note = f" (n={len(values)})" if summary is not None and len(values) < len(g.runs) else ""
            cells.append("–" if summary is None else f"{summary}{note}")
        rows.append((g.name, *cells))
    name = {"dev": "Dev", "test": "Test"}[split]
    return Table(
        f"{name} F1 (%) per entity type, mean ± sample std over seeds",
        ("config", *types),
        tuple(rows),
        (False, *(True for _ in types)),
    )


MAX_ALL_PAIRS = 12  # groups compared two by two; with more, each group against the first (500 -> 499 rows)


def pairs(groups: Sequence[Group]) -> list[tuple[Group, Group]]:
    """Every two groups, or, beyond ``MAX_ALL_PAIRS`` groups, each group with the first: the quadratic table of
    hundreds of configs would be tens of MB that nobody reads."""
    if len(groups) <= MAX_ALL_PAIRS:
        return list(combinations(groups, 2))
    return [(groups[0], g) for g in groups[1:]]


def _each_against(groups: Sequence[Group]) -> str:
    return (
        ""
        if len(groups) <= MAX_ALL_PAIRS
        else f" (more than {MAX_ALL_PAIRS} configs: each against the first)"
    )


def paired_table(groups: Sequence[Group]) -> Table | None:
    """For every two groups that ran some seed both: mean ± std over shared seeds of (F1 of B − F1 of A)."""
    rows = []
    for a, b in pairs(groups):
        seeds, _ = paired_differences(a, b, "dev")
        if seeds:
            summaries = [Summary.of(paired_differences(a, b, s)[1]) for s in EVALUATED]
            cells = [x.signed() for x in summaries] + [x.interval() for x in summaries]
            rows.append((a.name, b.name, ", ".join(map(str, seeds)), *cells))
    if not rows:
        return None
    return Table(
        "Paired by seed: B − A in F1 points, mean ± sample std of the per-seed differences, and the 95% "
        f"confidence interval of their mean (Student's t){_each_against(groups)}",
        ("A", "B", "shared seeds", "dev ΔF1", "test ΔF1", "dev 95% CI", "test 95% CI"),
        tuple(rows),
        (False, False, False, True, True, True, True),
        keys=2,
    )


def per_seed_table(groups: Sequence[Group]) -> Table | None:
    """Each shared seed's difference (F1 of B − F1 of A), the numbers behind the paired table."""
    rows = []
    for a, b in pairs(groups):
        seeds, dev = paired_differences(a, b, "dev")
        _, test = paired_differences(a, b, "test")
        rows += [
            (a.name, b.name, str(seed), f"{d:+.2f}", f"{t:+.2f}")
            for seed, d, t in zip(seeds, dev, test, strict=True)
        ]
    if not rows:
        return None
    return Table(
        f"Paired by seed, each seed: B − A in F1 points{_each_against(groups)}",
        ("A", "B", "seed", "dev ΔF1", "test ΔF1"),
        tuple(rows),
        (False, False, True, True, True),
        keys=3,
    )


def mix_table(groups: Sequence[Group], transformer: bool = False) -> Table | None:
    """softmax(w) per layer and gamma of each ELMo mix (``transformer``: of the transformer's mix), mean ± std
    over the runs that recorded it."""

    def of(run: Run) -> tuple[Mix, ...]:
        return run.transformer_mixes if transformer else run.mixes

    rows, layers = [], max((len(m.softmax_w) for g in groups for r in g.runs for m in of(r)), default=0)
    for g in groups:
        count = max((len(of(r)) for r in g.runs), default=0)
        for k in range(count):
            mixes = [of(r)[k] for r in g.runs if len(of(r)) > k]
            cells = [
                _three(Summary.of([m.softmax_w[j] for m in mixes])) if j < len(mixes[0].softmax_w) else "–"
                for j in range(layers)
            ]
            name = g.name if count == 1 else f"{g.name} ({mixes[0].place(k)} mix)"
            rows.append((name, str(len(mixes)), *cells, _three(Summary.of([m.gamma for m in mixes]))))
    if not rows:
        return None
    what = "transformer mix" if transformer else "ELMo mix"
    unit = "encoder layer (0: its embeddings)" if transformer else "biLM layer"
    return Table(
        f"Learned {what} of the chosen checkpoint: softmax(w) per {unit} and gamma, mean ± sample std",
        ("config", "runs", *(f"layer {j}" for j in range(layers)), "gamma"),
        tuple(rows),
        (False, True, *(True for _ in range(layers)), True),
    )


def _three(summary: Summary) -> str:
    """Mix weights need three decimals (they sum to 1)."""
    return f"{summary.mean:.3f}" if summary.std is None else f"{summary.mean:.3f} ± {summary.std:.3f}"


def differences_table(groups: Sequence[Group]) -> Table | None:
    """What tells the groups' configs apart (None for one group or identical configs)."""
    keys = differing_keys([g.runs for g in groups])
    if len(groups) < 2 or not keys:
        return None
    rows = tuple((g.name, *(value_of(g.runs[0], k) for k in keys)) for g in groups)
    return Table("What differs between the configs", ("config", *keys), rows, (False, *(False for _ in keys)))


def compare_tables(groups: Sequence[Group]) -> list[Table]:
    """Every table of the comparison, in reading order."""
    tables = [f1_table(groups), per_type_table(groups, "test"), per_type_table(groups, "dev")]
    extra = (
        paired_table(groups),
        per_seed_table(groups),
        mix_table(groups),
        mix_table(groups, transformer=True),
        differences_table(groups),
    )
    return tables + [t for t in extra if t is not None]


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _widths(table: Table) -> list[int]:
    """Each column's Markdown width: its widest cell, at least 3 (the "---" of the alignment row)."""
    return [
        max(3, *(len(_md_cell(row[j])) for row in (table.header, *table.rows)))
        for j in range(len(table.header))
    ]


def _pack(sizes: Sequence[int], room: int) -> list[list[int]]:
    """Column indices packed in order into parts whose sizes sum to at most ``room`` (one column at least)."""
    parts: list[list[int]] = [[]]
    used = 0
    for j, size in enumerate(sizes):
        if parts[-1] and used + size > room:
            parts.append([])
            used = 0
        parts[-1].append(j)
        used += size
    return parts


def narrow(tables: Sequence[Table], width: int = MAX_WIDTH) -> list[Table]:
    """Each table whose Markdown lines would be wider than ``width`` cut into as few parts of whole columns as
    fit, of about equal width, each part repeating the key columns ("part 1 of 3" in its title). A part has
    at least one column besides its keys, so only keys or a single cell wider than ``width`` leave a line
    longer."""
    out = []
    for table in tables:
        widths = _widths(table)
        keys = min(table.keys, len(widths))
        sizes = [w + 3 for w in widths[keys:]]  # each column adds its cell and " | "
        room = width - 1 - sum(w + 3 for w in widths[:keys])  # "| key | ... |" comes first
        parts = _pack(sizes, room)
        for limit in range(-(-sum(sizes) // len(parts)), room):  # the same number of parts, evened out
            if len(even := _pack(sizes, limit)) <= len(parts):
                parts = even
                break
        if len(parts) == 1:
            out.append(table)
            continue
        for k, columns in enumerate(parts):
            pick = [*range(keys), *(keys + j for j in columns)]
            out.append(
                replace(
                    table,
                    title=f"{table.title} (part {k + 1} of {len(parts)})",
                    header=tuple(table.header[j] for j in pick),
                    rows=tuple(tuple(row[j] for j in pick) for row in table.rows),
                    numeric=tuple(table.numeric[j] for j in pick),
                )
            )
    return out


def _line(cells: Sequence[str], widths: Sequence[int], numeric: Sequence[bool]) -> str:
    """One Markdown table row, each cell padded to its column's width (numbers to the right)."""
    padded = (
        _md_cell(c).rjust(w) if n else _md_cell(c).ljust(w)
        for c, w, n in zip(cells, widths, numeric, strict=True)
    )
    return "| " + " | ".join(padded) + " |"


def markdown(tables: Sequence[Table], width: int = MAX_WIDTH) -> str:
    """GitHub Markdown: a bold title (wrapped at ``width``) and a pipe table with aligned columns per table."""
    out = []
    for t in tables:
        widths = _widths(t)
        align = "|".join(
            "-" * (w + 1) + ":" if n else "-" * (w + 2) for w, n in zip(widths, t.numeric, strict=True)
        )
        title = textwrap.fill(f"**{t.title}**", width, break_long_words=False, break_on_hyphens=False)
        rows = [_line(row, widths, t.numeric) for row in (t.header, *t.rows)]
        out.append("\n".join([title, "", rows[0], f"|{align}|", *rows[1:]]))
    return "\n\n".join(out) + "\n"


def compare_table(run_dirs: Iterable[str | Path], width: int = MAX_WIDTH) -> str:
    """What ``python -m ner_app compare RUN_DIR ...`` prints for these run folders: every table, in Markdown,
    cut to ``width`` characters. A folder that is not a finished run, or two runs of one config and seed,
    raise ``CompareError`` (a ``NerAppError``: one line naming the path)."""
    return markdown(narrow(compare_tables(group_runs(read_runs(run_dirs))), width), width)
