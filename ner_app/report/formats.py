"""The output formats of predictions: a format's name -> its writer (``predict --format``, ``evaluate
--predictions``). Adding a format is one entry in ``FORMATS`` (docs/architecture.md has the recipe).

A writer turns prediction records (``text/predictions.py``) into pieces of text, written in order, so a large input
streams: ``TaggedLine`` records for formats that read raw text lines, ``TaggedSentence`` records and the lines
between them for formats that read CoNLL token lines (``reads``). The JSON the server answers and the entities
the Python API returns are the same records (``TaggedLine.to_json``, ``Entity``). A format that is a folder of
files (brat) has a ``files`` writer instead, which yields ``(name, content)`` pairs. The formats that
``convert`` reads back (this program's JSONL, CoNLL, and the pre-annotations of doccano, Label Studio, Prodigy
and brat) have their writers beside their readers, in the annotation formats' registry
(``text/annotations/registry.py``); this module adds the outputs no tool reads (``html``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from ner_app.errors import NerAppError
from ner_app.files import Claim, write_into_folder, write_text
from ner_app.report.predictions_html import predictions_html
from ner_app.text.annotations import registry
from ner_app.text.outputs import ALTERNATIVES, FLAGGED, FilesWriter, OutputFormat, Target, Writer
from ner_app.text.predictions import TaggedLine

__all__ = [
    "ALTERNATIVES",
    "FLAGGED",
    "FORMATS",
    "FilesWriter",
    "OutputFormat",
    "Target",
    "Writer",
    "output_format",
    "refuse_unheld",
    "write_output",
]


def write_html(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    """One self-contained page: the text with its entities highlighted by type (``predictions_html``)."""
    results = (record.to_json() for record in records)
    return predictions_html(results, list(target.entity_types), title=f"Entities in {target.source}")


HTML = OutputFormat(
    "html",
    "text",
    write_html,
    "one self-contained page, the text with its entities highlighted by type",
    carries=frozenset({ALTERNATIVES, FLAGGED}),
)
# The writers of the annotation formats (those whose tool takes predictions), in the registry's order.
TOOL_FORMATS = {f.name: f.writer for f in registry.FORMATS.values() if f.writer is not None}
_FIRST = ("jsonl", "conll")  # predict's own outputs lead --format's list, html after them, then the tools'
FORMATS: dict[str, OutputFormat] = {
    f.name: f
    for f in (
        *(TOOL_FORMATS[name] for name in _FIRST),
        HTML,
        *(f for name, f in TOOL_FORMATS.items() if name not in _FIRST),
    )
}
ALIASES = {"text": "jsonl"}  # earlier names, still accepted: each says its new name once
_noted: set[str] = set()


def format_names() -> list[str]:
    """Every name ``--format`` accepts: the formats, then the aliases."""
    return [*FORMATS, *ALIASES]


def format_help() -> str:
    """``--format``'s help: a clause per format."""
    aliases = "; ".join(f"{old}: the old name of {new}" for old, new in ALIASES.items())
    return "; ".join(f"{f.name}: {f.help}" for f in FORMATS.values()) + f" ({aliases})"


def output_format(name: str, notes: TextIO | None = None) -> OutputFormat:
    """The format called ``name``; an alias says once (on ``notes``, default stderr) which name replaced it."""
    if name in ALIASES:
        if name not in _noted:
            _noted.add(name)
            new = ALIASES[name]
            print(
                f"--format {name} is now called --format {new}; it writes the same output",
                file=notes or sys.stderr,
            )
        name = ALIASES[name]
    if name not in FORMATS:
        raise ValueError(f"unknown output format {name!r}: expected one of {', '.join(format_names())}")
    return FORMATS[name]


def refuse_unheld(fmt: OutputFormat, asked: dict[str, bool]) -> None:
    """One line for the first option of ``asked`` (``ALTERNATIVES``, ``FLAGGED``: whether given) that ``fmt``
    has no place for: what it asks would otherwise be dropped without a word."""
    for option, given in asked.items():
        if given and option not in fmt.carries:
            holders = ", ".join(f.name for f in FORMATS.values() if option in f.carries)
            raise NerAppError(
                f"{option}: --format {fmt.name} has no place for it ({fmt.lacks}); use --format {holders}"
            )


def write_output(
    path: str | Path,
    fmt: OutputFormat,
    records: Iterable[Any],
    target: Target,
    claim: Claim | None = None,
) -> Path:
    """The whole output written to ``path`` at once, by an atomic rename (``files.write_text``); a folder
    format's files into the folder ``path`` (``files.write_into_folder``: a new folder whole, an existing one
    file by file, never replacing a file changed since ``claim``'s command wrote it; default: predict)."""
    claim = claim or Claim("predict")
    if fmt.files is None:
        return write_text(path, "".join(fmt.write(records, target)), claim)
    return write_into_folder(Path(path), list(fmt.files(records, target)), claim)
