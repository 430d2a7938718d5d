"""The documents every reader yields, the error of a file that cannot be read, and the audit of changed spans."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ner_app.errors import NerAppError


class AnnotationFormatError(NerAppError):
    """An annotation file that cannot be read: the message names ``FILE:LINE`` and what was expected."""


@dataclass(frozen=True)
class CharSpan:
    """An entity as a tool wrote it: ``text[start:end]`` of its document, its type, and where it was read."""

    start: int
    end: int
    type: str
    where: str  # FILE:LINE (or FILE:LINE task N), for the audit


@dataclass(frozen=True)
class TokenSpan:
    """An entity over tokens ``start`` to ``end`` (exclusive) of its document."""

    start: int
    end: int
    type: str
    where: str


@dataclass
class TextDocument:
    """Raw text and its character spans (doccano, Label Studio, Prodigy, brat, JSONL)."""

    where: str
    text: str
    spans: list[CharSpan]


@dataclass
class TokenDocument:
    """Tokens, their sentences (``(start, end)`` token ranges) and token spans (CoNLL, CoNLL-U), or a
    ``TextDocument`` after alignment (then ``offsets`` holds each token's characters in ``text``)."""

    where: str
    tokens: list[str]
    sentences: list[tuple[int, int]]
    spans: list[TokenSpan]
    text: str | None = None
    offsets: list[tuple[int, int]] | None = None
    # CoNLL: the file's own tags (``-`` where not annotated) in ``scheme``, converted tag by tag, never guessed
    tags: list[str] | None = None
    scheme: str = "IOB2"


Document = TextDocument | TokenDocument

# What happened to a span. Those in CHANGED count for --strict: the entity is not what the annotator marked.
MOVED, CUT, DROPPED = "moved", "cut", "dropped"
CHANGED = (MOVED, CUT, DROPPED)
LEFT_OUT = "left out"  # a type outside the whitelist: named, but what the user asked for

# What happened to a whole record of an export (a Label Studio task, a JSON-MIN record). A skipped or
# unannotated task says nothing about its entities: read as "no entities" it would teach that they are none.
SKIPPED = "skipped"  # every annotation cancelled (Label Studio's Skip)
UNANNOTATED = "not annotated"  # no annotation at all
MERGED = "merged"  # the same text and annotation as an earlier record: read once
DISAGREE = "disagree"  # the same text in several records with different annotations: one is read
RECORD_KINDS = (SKIPPED, UNANNOTATED, MERGED, DISAGREE)


def unannotated(records: Mapping[str, list[str]]) -> list[str]:
    """The places of the records (``Audit.records``) that hold no annotation: skipped, then not annotated."""
    return [*records.get(SKIPPED, []), *records.get(UNANNOTATED, [])]


@dataclass
class Audit:
    """Every span the conversion changed, one ``FILE:LINE: ...`` line each, and the counts of the summary."""

    lines: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    # RECORD_KINDS -> the place of each such record (DISAGREE: one line a text, naming its records)
    records: dict[str, list[str]] = field(default_factory=dict)

    def report(self, where: str, action: str, text: str, kind: str, what: str) -> None:
        """Name one changed span: ``FILE:LINE: dropped 'Sony' (ORG): its edges fall inside tokens``."""
        self.counts[action] += 1
        self.lines.append(f"{where}: {action} {text!r} ({kind}): {what}")

    def note(self, what: str, n: int = 1) -> None:
        """Count something that changes no entity (whitespace trimmed, a duplicate merged)."""
        self.counts[what] += n

    def record(self, kind: str, where: str) -> None:
        """Name one record of ``kind`` (``RECORD_KINDS``): ``FILE:task 12``, or for DISAGREE its line."""
        self.records.setdefault(kind, []).append(where)

    @property
    def changed(self) -> int:
        return sum(self.counts[a] for a in CHANGED)

    def records_summary(self, keep_unannotated: bool, option: str) -> str | None:
        """One line of what happened to whole records (None when nothing did): the tasks left out (or kept as no
        entities, ``keep_unannotated``) and how ``option`` changes that, the duplicates merged, the texts
        whose records disagree."""
        parts = []
        skipped, never = len(self.records.get(SKIPPED, [])), len(self.records.get(UNANNOTATED, []))
        if skipped or never:
            what = f"{skipped} skipped (every annotation cancelled), {never} not annotated"
            parts.append(
                f"{skipped + never} Label Studio tasks read as text without entities: {what} ({option})"
                if keep_unannotated
                else f"{skipped + never} Label Studio tasks left out: {what} ({option} reads them as text "
                "without entities)"
            )
        if self.records.get(MERGED):
            parts.append(
                f"{len(self.records[MERGED])} duplicate records merged (the same text and annotation)"
            )
        if self.records.get(DISAGREE):
            parts.append(
                f"{len(self.records[DISAGREE])} texts in several records with different annotations (one used, "
                "named above)"
            )
        return "; ".join(parts) or None
