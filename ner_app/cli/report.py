"""``report``: a run folder's self-contained HTML report (``report/run_report.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ner_app.cli.arguments import add_overwrite_argument, output_claim
from ner_app.errors import NerAppError


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report",
        help="write a run folder's self-contained HTML report (curves, per-type scores, errors, ELMo weights)",
        description="Reads metrics.json, logs/metrics.csv, predictions_{dev,test}.conll and the trained weights "
        "of a train.py run folder and writes one HTML file with its images embedded (docs/reports.md).",
    )
    report.add_argument("run_dir", metavar="RUN_DIR", help="a train.py output_dir")
    report.add_argument("--output", help="the HTML file (default RUN_DIR/report.html; - for standard output)")
    add_overwrite_argument(report)


def run(args: argparse.Namespace) -> int:
    from ner_app.report import write_report

    if not Path(args.run_dir).is_dir():  # also a symlink loop, which resolve() would raise on
        raise NerAppError(f"{args.run_dir}: not a folder (expected a run folder written by train.py)")
    out = write_report(args.run_dir, args.output, output_claim(args, "--output", "train"))
    print(f"wrote {'the report to standard output' if str(out) == '-' else out}", file=sys.stderr)
    return 0
