"""``split``: one export (any format ``convert`` reads) divided into train, dev and test CoNLL files in a new
folder (``text/annotations/divide.py``), documents kept whole, identical texts together, rare types dealt to
every split; prints what went where (docs/data.md#one-export-into-train-dev-and-test)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ner_app.cli.arguments import add_overwrite_argument, output_claim
from ner_app.cli.convert import add_reading_arguments, reading_options
from ner_app.errors import NerAppError

REPORT = "split.json"  # the record of what went where, written beside the three files


def _fraction(option: str, text: str) -> float:
    """A share of the input: a fraction strictly between 0 and 1 (checked here: one error line, no usage)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:  # also refuses nan
        raise NerAppError(f"{option} {text}: expected a fraction between 0 and 1 (exclusive), e.g. 0.1")
    return value


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ner_app.text.annotations.divide import UNITS
    from ner_app.text.annotations.registry import format_names

    split = commands.add_parser(
        "split",
        help="split one export (Label Studio, doccano, Prodigy, brat, CoNLL-U, CoNLL, JSONL) into train, "
        "valid and test files",
        description="Reads INPUT as convert and training read it and writes OUT/train.txt, OUT/valid.txt and "
        "OUT/test.txt (CoNLL, what train, check-data and evaluate read) and OUT/split.json (what went where). "
        "Documents (tasks) are never cut, documents of identical text go to one split, and each entity type "
        "reaches train, test and dev when it is in enough documents (docs/data.md).",
    )
    split.add_argument("input", metavar="INPUT", help="the export: a file, or a folder for brat")
    split.add_argument(
        "--output", required=True, metavar="OUT", help="a new (or empty) folder for the splits"
    )
    split.add_argument(
        "--from", dest="fmt", choices=format_names(), help="the input format (default: detected)"
    )
    split.add_argument("--dev", default="0.1", metavar="F", help="dev's share (default 0.1)")
    split.add_argument("--test", default="0.1", metavar="F", help="test's share (default 0.1)")
    split.add_argument("--seed", type=int, default=13, help="the shuffle's seed (default 13)")
    split.add_argument(
        "--by",
        default="document",
        choices=UNITS,
        help="what is never cut: a document (default; a task, a line, a brat file, a -DOCSTART- document) "
        "or each sentence",
    )
    split.add_argument(
        "--scheme", default="IOB2", choices=["IOB1", "IOB2", "BIOES"], help="span formats' tags"
    )
    split.add_argument("--json", action="store_true", help="print what went where as one JSON document")
    add_reading_arguments(split)
    add_overwrite_argument(split)


def table(counts: dict[str, dict[str, Any]], unit: str) -> str:
    """Rows: units, sentences, tokens, entities and each type; one column a split."""
    names = list(counts)
    types = sorted({t for c in counts.values() for t in c["entities"]})
    rows = [
        (f"{unit}s", [c["units"] for c in counts.values()]),
        ("sentences", [c["sentences"] for c in counts.values()]),
        ("tokens", [c["tokens"] for c in counts.values()]),
        ("entities", [sum(c["entities"].values()) for c in counts.values()]),
        *((f"  {t}", [counts[n]["entities"].get(t, 0) for n in names]) for t in types),
    ]
    heads = [f"{n} ({counts[n]['file']})" for n in names]
    width = max(len(r[0]) for r in rows)
    lines = [" " * width + "".join(f"  {h:>18}" for h in heads)]
    lines += [f"{label:<{width}}" + "".join(f"  {v:>18,}" for v in values) for label, values in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ner_app.files import atomic_folder, claim_folder, write_text
    from ner_app.text.annotations.divide import divide, read_units, write_division
    from ner_app.text.annotations.model import Audit
    from ner_app.text.annotations.splits import split_format

    source, out = Path(args.input), Path(args.output)
    dev, test = _fraction("--dev", args.dev), _fraction("--test", args.test)
    if dev + test >= 1:
        raise NerAppError(
            f"--dev {args.dev} and --test {args.test} leave nothing for train; expected a sum below 1"
        )
    if not source.exists():
        raise NerAppError(f"{source}: not found (expected an export: a file, or a brat folder)")
    if out.resolve() == source.resolve() or out.resolve().is_relative_to(source.resolve()):
        raise NerAppError(f"--output {out}: is the input (or inside it); name a new folder")
    if args.outside != "O":
        raise NerAppError(
            "--outside unknown: split writes dev and test, which are scored and must be fully annotated; "
            "split a fully annotated export"
        )
    if (args.labels or args.types) and split_format(source, args.fmt, "--from") == "conll":
        raise NerAppError(
            f"{source}: a CoNLL input is split as it is, its tags unchanged, so --labels and --types do not "
            "apply; rename or keep types with convert first (convert --labels ... --output all.conll)"
        )
    claim = output_claim(args)
    claim_folder(out, claim)
    options = reading_options(args, args.scheme)
    audit = Audit()
    units = read_units(source, args.fmt, options, audit, args.by)
    division = divide(units, str(source), dev, test, args.seed, args.by)
    counts = division.counts()
    report = {
        "input": str(source),
        "seed": args.seed,
        "by": args.by,
        "shares": {"dev": dev, "test": test},
        "spans_changed": audit.changed,
        "splits": counts,
    }
    with atomic_folder(out, claim) as tmp:
        write_division(tmp, division, args.by, str(source))
        write_text(tmp / REPORT, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    shown = sys.stderr if args.json else sys.stdout  # --json: stdout holds the JSON document alone
    for line in audit.lines:
        print(line, file=shown)
    if audit.lines:
        print(f"{audit.changed} spans moved, cut or dropped (listed above)", file=shown)
    if args.json:
        print(json.dumps({**report, "output": str(out)}, ensure_ascii=False))
        return 0
    print(table(counts, args.by))
    print(f"written to {out}: {', '.join(c['file'] for c in counts.values())} and {REPORT}")
    return 0
