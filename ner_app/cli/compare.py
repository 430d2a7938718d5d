"""``compare``: finished runs grouped by config and compared over seeds (``report/compare.py``), as Markdown
tables, JSON or an HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ner_app.cli.arguments import add_overwrite_argument, output_claim
from ner_app.cli.common import is_stdout


def add_parser(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare finished runs: dev/test F1 mean +/- std per config, per entity type, paired by seed",
        description="Groups the run folders by config (seed, output_dir, threads, logging and cache keys left "
        "out) and data, and prints Markdown tables: F1 mean +/- sample std over seeds, per entity type, and "
        "per-seed differences between configs that share seeds; tables wider than 100 characters are cut into "
        "parts (docs/reports.md).",
    )
    compare.add_argument("runs", nargs="+", metavar="RUN_DIR", help="train.py output folders")
    compare.add_argument(
        "--html",
        metavar="FILE",
        help="also write the tables and a chart to one HTML file (- for standard output)",
    )
    add_overwrite_argument(compare)
    compare.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as one JSON document instead of the tables (keys: docs/reports.md)",
    )


def run(args: argparse.Namespace) -> int:
    from ner_app.report.compare import group_runs, read_runs
    from ner_app.report.compare_tables import compare_tables, markdown, narrow

    groups = group_runs(read_runs(args.runs))
    tables = narrow(compare_tables(groups))  # wide tables cut into parts that fit a terminal and the page
    # with --html -, standard output holds the page alone and the tables (or JSON) go to stderr
    shown = sys.stderr if args.html and is_stdout(args.html) else sys.stdout
    if args.json:
        import json

        from ner_app.report.compare_json import compare_json

        print(json.dumps(compare_json(groups), indent=2, ensure_ascii=False, allow_nan=False), file=shown)
    else:
        print(markdown(tables), end="", file=shown)
    if args.html:
        from ner_app.files import claim_file, write_text
        from ner_app.report.compare_html import compare_html

        out, claim = Path(args.html), output_claim(args, "--html")
        claim_file(out, claim)  # never over a run's own files
        write_text(out, compare_html(groups, tables), claim)  # a reader never sees half a page
        print(f"wrote {out}", file=sys.stderr)
    return 0
