"""``check-data``: the audit of a corpus before training (``text/data_check.py`` counts), read as training
reads it: a config's data section, a folder of split files, or the split files named one by one."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ner_app.cli.convert import add_reading_arguments, reading_options
from ner_app.errors import NerAppError
from ner_app.text.annotations.format import Options

if TYPE_CHECKING:
    from ner_app.text.data_check import Problem, SplitCounts

_SHOWN = {"train": "train", "valid": "dev", "test": "test"}  # a split file's name -> the split's name


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ner_app.text.annotations.registry import format_names

    check = commands.add_parser(
        "check-data",
        help="audit training data before a run: counts per split, leakage, unseen and rare types, changed spans",
        description="Reads the splits as training does (a config's data section with --config, a folder of "
        "train/valid/test files, or --train/--dev/--test files) and prints per split: sentences, tokens, "
        "entities per type, the detected scheme, ill-formed sentences, the share of unknown (-) tags, the "
        "longest sentences and the spans the conversion changed; then the problems. Exit code 1 when a "
        "problem is blocking (docs/own_data.md#checking-the-data), 2 when a file cannot be read.",
    )
    check.add_argument("folder", nargs="?", metavar="DIR", help="a folder with train, valid and test files")
    check.add_argument("--config", help="a training config: its data section (data.dir, data.format, ...)")
    for split in ("train", "dev", "test"):
        check.add_argument(f"--{split}", metavar="FILE", help=f"the {split} file (a brat folder for brat)")
    check.add_argument(
        "--format", dest="fmt", choices=format_names(), help="the files' format (default: detected)"
    )
    check.add_argument(
        "--json", action="store_true", help="print the counts and problems as one JSON document"
    )
    add_reading_arguments(check)


def _sources(args: argparse.Namespace) -> tuple[dict[str, Path], str | None, Options]:
    """The split files, their format and the reading options, from --config, DIR or --train/--dev/--test."""
    from ner_app.train.corpus import data_reading, split_paths

    files = {
        name: getattr(args, split) for name, split in (("train", "train"), ("valid", "dev"), ("test", "test"))
    }
    given = [x for x in (args.config, args.folder, any(files.values()) or None) if x]
    if len(given) != 1:
        raise NerAppError(
            "check-data: give one of --config CONFIG, a folder DIR, or --train FILE [--dev F --test F]"
        )
    if args.config:
        from ner_app.config.load import load_config

        data = load_config(args.config).data
        if data.hub_name or not data.dir:
            raise NerAppError(
                f"{args.config}: check-data reads the files of data.dir; this config reads the hub dataset "
                f"{data.hub_name!r}"
            )
        return split_paths(data.dir, data.format), data.format, data_reading(data)
    options = dataclasses.replace(reading_options(args, "IOB2"), format_option="--format")
    if args.folder:
        folder = Path(args.folder)
        if not folder.is_dir():
            raise NerAppError(
                f"{folder}: not a folder; expected one holding train, valid and test files (one file per split: "
                f"--train {folder} --dev FILE --test FILE; one export: ner-app split {folder} --output DIR)"
            )
        return split_paths(str(folder), args.fmt), args.fmt, options
    paths = {name: Path(p) for name, p in files.items() if p}
    for path in paths.values():
        if not path.exists():
            raise NerAppError(f"{path}: not found")
    return paths, args.fmt, options


def text_report(splits: dict[str, SplitCounts], problems: list[Problem]) -> str:
    """The table of counts, then one line per problem (and its examples), then the summary line."""
    names = list(splits)
    types = sorted({t for c in splits.values() for t in c.entities})
    rows: list[tuple[str, list[str]]] = [
        ("sentences", [f"{c.sentences:,}" for c in splits.values()]),
        ("tokens", [f"{c.tokens:,}" for c in splits.values()]),
        ("entities", [f"{sum(c.entities.values()):,}" for c in splits.values()]),
        *((f"  {t}", [f"{c.entities.get(t, 0):,}" for c in splits.values()]) for t in types),
        ("scheme", [c.scheme for c in splits.values()]),
        ("ill-formed sentences", [f"{c.ill_formed:,}" for c in splits.values()]),
        ("unknown tags (-)", [f"{c.unknown_share:.1%}" for c in splits.values()]),
        ("spans changed", [f"{len(c.changed):,}" for c in splits.values()]),
        ("longest sentence", [f"{c.longest[0][0]:,}" if c.longest else "-" for c in splits.values()]),
    ]
    if any(c.records for c in splits.values()):  # an export's whole records: only where there are some
        from ner_app.text.annotations.model import DISAGREE, MERGED

        kept = next(iter(splits.values())).keep_unannotated
        rows += [
            (
                "tasks kept, no entities" if kept else "tasks left out",
                [f"{len(c.unannotated):,}" for c in splits.values()],
            ),
            ("duplicates merged", [f"{len(c.records.get(MERGED, [])):,}" for c in splits.values()]),
            ("texts disagreeing", [f"{len(c.records.get(DISAGREE, [])):,}" for c in splits.values()]),
        ]
    label = max(len(r[0]) for r in rows)
    width = [max(len(n), *(len(r[1][i]) for r in rows)) for i, n in enumerate(names)]
    lines = [" " * label + "".join(f"  {n:>{w}}" for n, w in zip(names, width, strict=True))]
    lines += [
        f"{r:<{label}}" + "".join(f"  {v:>{w}}" for v, w in zip(values, width, strict=True))
        for r, values in rows
    ]
    lines.append("")
    for c in splits.values():
        lines.append(
            f"{c.name}: {c.source}; longest: " + ", ".join(f"{n:,} tokens at {at}" for n, at in c.longest)
        )
    lines.append("")
    for p in problems:
        lines.append(
            f"{p.level.upper() if p.level == 'blocking' else p.level}: {p.split}: {p.kind}: {p.message}"
        )
        lines.extend(f"  {at}" for at in p.examples)
    blocking = sum(p.level == "blocking" for p in problems)
    lines.append(
        f"{blocking} blocking problems, {len(problems) - blocking} warnings"
        + (" (exit code 1)" if blocking else "")
    )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ner_app.text.annotations.model import Audit
    from ner_app.text.data_check import count_split, find_problems, json_report
    from ner_app.text.data_records import record_problems
    from ner_app.text.tags import detect_scheme
    from ner_app.train.corpus import read_splits

    paths, fmt, options = _sources(args)
    audits: dict[str, Audit] = {}
    read = read_splits(paths, fmt, options, audits, scored_known=False)
    sentences = {_SHOWN[name]: found for name, found in read.items()}
    # a sentence of an export is placed by its task or file (FILE:task 12, doc.ann), else FILE:LINE
    where = {
        _SHOWN[name]: [s.where or f"{paths[name]}:{s.line}" for s in found] for name, found in read.items()
    }
    # every split is read in train's scheme, as the run reads it
    scheme = detect_scheme(s.tags for s in read.get("train", next(iter(read.values()))))
    splits = {}
    for name, found in read.items():
        counts = count_split(_SHOWN[name], str(paths[name]), found, scheme, where[_SHOWN[name]])
        counts.changed = list(audits[name].lines)
        counts.changed_counts = {
            k: v for k, v in audits[name].counts.items() if k in ("moved", "cut", "dropped")
        }
        counts.records = dict(audits[name].records)
        counts.keep_unannotated = options.keep_unannotated
        splits[_SHOWN[name]] = counts
    # blocking problems first (find_problems' order); those of records and repeated sentences are warnings
    problems = find_problems(splits, sentences, where) + record_problems(splits, sentences, where)
    if args.json:
        print(json.dumps(json_report(splits, problems), indent=2, ensure_ascii=False))
    else:
        print(text_report(splits, problems), end="")
    return 1 if any(p.level == "blocking" for p in problems) else 0
