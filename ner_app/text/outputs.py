"""What an output format of predictions is (``OutputFormat``) and what its writer knows besides the records
(``Target``). The formats of annotation tools keep their writers beside their readers
(``text/annotations/``); ``report/formats.py`` maps every ``predict --format`` name to its writer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Target:
    """What a writer knows besides the records: the model's entity types (sorted) and the input's name."""

    entity_types: tuple[str, ...] = ()
    source: str = "<stdin>"
    # the model's name and a short hash of its weights, for tools that keep it with predictions (Label Studio)
    model_version: str = "ner_app"


ALTERNATIVES, FLAGGED = "--alternatives", "--flag-missed"  # what predict may add to the entities

Writer = Callable[[Iterable[Any], Target], Iterator[str]]
FilesWriter = Callable[[Iterable[Any], Target], Iterator[tuple[str, str]]]


@dataclass(frozen=True)
class OutputFormat:
    """A named output: what predict reads for it (raw ``text`` lines or ``conll`` token lines), its writer and
    one line of help. A folder format has ``files`` (``(name, content)`` pairs) and a ``write`` that refuses.
    ``documents``: a task of it is a document, a block of non-empty lines (``predictions.documents``), so a
    writer of candidates that are documents each (``select``) separates them by a blank line. ``carries``:
    which of ``ALTERNATIVES`` and ``FLAGGED`` it holds; ``lacks`` says why it holds no other (predict refuses
    those in one line rather than drop them)."""

    name: str
    reads: Literal["text", "conll"]
    write: Writer
    help: str
    files: FilesWriter | None = None
    documents: bool = False
    carries: frozenset[str] = frozenset()
    lacks: str = ""


def json_line(value: Any) -> str:
    """``value`` as one line of JSON: non-ASCII kept, the line separators JSON leaves raw (and line readers
    split on) escaped, so one line stays one object."""
    line = json.dumps(value, ensure_ascii=False)
    return line.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"
