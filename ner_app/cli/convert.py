"""``convert``: annotations of doccano, Label Studio, Prodigy, brat, CoNLL-U or CoNLL into CoNLL or JSONL,
with every span that was moved, cut or dropped named (docs/data.md#your-own-annotations)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ner_app.cli.arguments import add_overwrite_argument, output_claim
from ner_app.errors import NerAppError

if TYPE_CHECKING:
    from ner_app.text.annotations.format import Options


def add_reading_arguments(parser: argparse.ArgumentParser) -> None:
    """How annotations are read and aligned (``convert`` and ``check-data``; the ``data.`` keys of the same
    names in a config)."""
    from ner_app.text.annotations.align import ALIGN_MODES
    from ner_app.text.annotations.convert import OUTSIDE
    from ner_app.text.annotations.labelstudio import CHOICES
    from ner_app.text.annotations.resolve import OVERLAP_MODES

    parser.add_argument(
        "--align",
        default="expand",
        choices=ALIGN_MODES,
        help="a span with an edge inside a token: expand to whole tokens (default), contract to the tokens "
        "inside it, or drop it (strict)",
    )
    parser.add_argument(
        "--overlap",
        default="longest",
        choices=OVERLAP_MODES,
        help="overlapping spans: keep the longest (default), the first in the file, or stop (error)",
    )
    parser.add_argument("--labels", metavar="A=B,...", help="rename types (before --types applies)")
    parser.add_argument("--types", metavar="T1,T2,...", help="keep only these types (after --labels)")
    parser.add_argument(
        "--tag-column",
        type=int,
        default=-1,
        metavar="N",
        help="CoNLL input: the 0-based column of the tag (negative: from the end; default -1, the last)",
    )
    parser.add_argument(
        "--annotation",
        default="first",
        choices=CHOICES,
        help="Label Studio: which annotation of a text with several (not cancelled; those marked ground_truth "
        "first): first, last (in the file) or latest (updated_at)",
    )
    parser.add_argument(
        "--keep-unannotated",
        action="store_true",
        help="Label Studio: read tasks that were skipped or never annotated as text without entities (default: "
        "left out, and counted)",
    )
    parser.add_argument(
        "--outside",
        default="O",
        choices=OUTSIDE,
        help="span formats: text outside every annotated span is O (default), or unknown: not annotated, "
        "the tag - (partial annotation; CoNLL output only)",
    )


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ner_app.text.annotations.registry import format_names

    convert = commands.add_parser(
        "convert",
        help="convert annotations (doccano, Label Studio, Prodigy, brat, CoNLL-U, CoNLL, JSONL) to CoNLL or JSONL",
        description="Reads every INPUT in one format, maps its character spans onto the tokenizer's tokens, and "
        "writes OUT.conll (token tag lines, -DOCSTART- before each document) or OUT.jsonl (predict's "
        "format). Every span moved, cut or dropped is printed as FILE:LINE: ..., then a summary (docs/data.md).",
    )
    convert.add_argument("inputs", nargs="+", metavar="INPUT", help="files (brat: .ann files or folders)")
    convert.add_argument(
        "--from", dest="fmt", choices=format_names(), help="the input format (default: detected)"
    )
    convert.add_argument("--output", required=True, metavar="OUT", help="OUT.conll (or .txt) or OUT.jsonl")
    convert.add_argument("--scheme", default="IOB2", choices=["IOB1", "IOB2", "BIOES"], help="output tags")
    add_reading_arguments(convert)
    convert.add_argument(
        "--strict",
        action="store_true",
        help="exit 2 and write nothing when any span was moved, cut or dropped",
    )
    add_overwrite_argument(convert)


def reading_options(args: argparse.Namespace, scheme: str) -> Options:
    """The ``Options`` of the arguments ``add_reading_arguments`` added, with the output's tag ``scheme``."""
    from ner_app.text.annotations.convert import label_map, type_list
    from ner_app.text.annotations.format import Options
    from ner_app.text.annotations.resolve import Policy

    return Options(
        Policy(label_map(args.labels, "--labels"), type_list(args.types), args.overlap),
        args.align,
        scheme,
        args.tag_column,
        args.annotation,
        args.outside,
        args.keep_unannotated,
    )


def run(args: argparse.Namespace) -> int:
    from ner_app.files import claim_file
    from ner_app.text.annotations.convert import (
        convert_files,
        count_entities,
        write_converted,
    )
    from ner_app.text.annotations.model import DISAGREE, Audit
    from ner_app.text.annotations.registry import detect_format

    out = Path(args.output)
    if out.suffix not in (".conll", ".txt", ".jsonl"):
        raise NerAppError(f"{out}: expected an output name ending in .conll, .txt or .jsonl")
    inputs = [Path(p) for p in args.inputs]
    for path in inputs:
        if not path.exists():
            raise NerAppError(f"{path}: not found")
        if path.resolve() == out.resolve() or (path.is_dir() and path.resolve() in out.resolve().parents):
            raise NerAppError(f"{out}: is an input (or inside one); choose another output name")
    claim = output_claim(args)
    claim_file(out, claim)  # never a file convert did not write (a gold file, an export), unless --overwrite
    options = reading_options(args, args.scheme)
    formats = {p: args.fmt or detect_format(p) for p in inputs}
    audit = Audit()
    converted = [d for p in inputs for d in convert_files(formats[p], [p], options, audit)]
    for line in [*audit.lines, *audit.records.get(DISAGREE, [])]:
        print(line)
    counts = audit.counts
    left_out = f"; {counts['left out']} left out by --types" if "left out" in counts else ""
    notes = [
        f"{n} {what}"
        for what, n in sorted(counts.items())
        if what not in ("moved", "cut", "dropped", "left out")
    ]
    sentences = sum(len(d.sentences) for d in converted)
    tokens = sum(len(t) for d in converted for t, _ in d.sentences)
    records = audit.records_summary(args.keep_unannotated, "--keep-unannotated")
    notes += [records] if records else []  # tasks left out, duplicates merged: counted like the notes
    summary = (
        f"{len(converted)} documents, {sentences} sentences, {tokens} tokens, "
        f"{count_entities(converted, args.scheme)} entities; spans moved {counts['moved']}, cut {counts['cut']}, "
        f"dropped {counts['dropped']}{left_out}" + "".join(f"; {n}" for n in notes)
    )
    if args.strict and audit.changed:
        print(summary)
        raise NerAppError(
            f"{audit.changed} spans were moved, cut or dropped (listed above) and --strict is set; "
            f"nothing written to {out}"
        )
    if not converted:
        why = f" ({records})" if records else ""
        raise NerAppError(f"{', '.join(map(str, inputs))}: no document to convert{why}; nothing written")
    write_converted(out, converted, claim)
    print(f"{summary}; written to {out}")
    return 0
