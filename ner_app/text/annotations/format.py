"""What an annotation format is: one ``Format`` record per tool (its reader, its writer, how its files are
named and recognised), the ``Options`` a reader may be told, and the ``Probe`` detection looks at.

Each tool's module (``columns``, ``conllu``, ``doccano``, ``labelstudio``, ``prodigy``, ``brat``, ``jsonl``)
holds its reader, its writer and its record ``FORMAT``; ``registry.py`` lists the records, and every list of
format names, suffixes and choices is derived from there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from ner_app.files import is_special
from ner_app.text.annotations.model import Audit, Document
from ner_app.text.annotations.read import load_json
from ner_app.text.annotations.resolve import Policy
from ner_app.text.outputs import OutputFormat


@dataclass(frozen=True)
class Options:
    """Everything a conversion may be told: reading (``tag_column``, ``annotation``,
    ``keep_unannotated``), alignment, the policy."""

    policy: Policy
    align: str = "expand"
    scheme: str = "IOB2"
    tag_column: int = -1
    annotation: str = "first"
    # "unknown": tokens of span formats outside every span are tagged UNKNOWN (not annotated), not O
    outside: str = "O"
    # Label Studio tasks skipped or never annotated: left out (False), or read as text without entities
    keep_unannotated: bool = False
    # what names the format where detection fails: convert --from, check-data --format, a config's data.format
    format_option: str = "--from"


READING_OPTIONS = frozenset(f.name for f in fields(Options))


@dataclass
class Probe:
    """What detection looks at: the path, and the first record of a JSON-lines file, read at most once."""

    path: Path

    @cached_property
    def first_record(self) -> dict[str, Any] | None:
        """The first line of the file as a JSON object; None when it is none (or the path is a FIFO, a
        device or a folder: those are not opened, their reader names them)."""
        if is_special(self.path) or self.path.is_dir():
            return None
        with open(self.path, "rb") as f:
            head = f.readline(1 << 20)
        try:  # a BOM, as some Windows tools write, is no part of the record
            record = load_json(head.decode("utf-8-sig"), str(self.path))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            return None
        return record if isinstance(record, dict) else None


# A reader: the documents of one input (a file, or a folder for brat) with the conversion's options.
Reader = Callable[[Path, Options, Audit], Iterable[Document]]
Detect = Callable[[Probe], bool]


@dataclass(frozen=True)
class Format:
    """One annotation tool's format. ``suffixes`` are how a split file of it may end (``""``: a folder; the
    first is the one named in messages); ``detect`` says whether a path looks like it, asked in ascending
    ``precedence`` (so a folder is brat before a JSON-lines file is told apart by its first record, and CoNLL,
    which any two-column line looks like, is asked last); ``clue`` is what detection looks for, for the
    message when nothing fits. ``spans``: raw text with character spans, aligned to the tokenizer (else
    tokens with token spans). ``writer``: its ``predict --format`` output, when the tool takes predictions.
    ``options``: the fields of ``Options`` its reader reads (besides the conversion's)."""

    name: str
    suffixes: tuple[str, ...]
    detect: Detect
    precedence: int
    clue: str
    read: Reader
    spans: bool
    writer: OutputFormat | None = None
    options: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        unknown = set(self.options) - READING_OPTIONS
        if unknown:
            raise ValueError(f"format {self.name}: options {sorted(unknown)} are not fields of Options")
