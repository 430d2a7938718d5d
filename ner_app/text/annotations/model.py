"""The documents every reader yields, the error of a file that cannot be read, and the audit of changed spans."""

from __future__ import annotations

from collections import Counter
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


Document = TextDocument | TokenDocument

# What happened to a span. Those in CHANGED count for --strict: the entity is not what the annotator marked.
MOVED, CUT, DROPPED = "moved", "cut", "dropped"
CHANGED = (MOVED, CUT, DROPPED)
LEFT_OUT = "left out"  # a type outside the whitelist: named, but what the user asked for


@dataclass
class Audit:
    """Every span the conversion changed, one ``FILE:LINE: ...`` line each, and the counts of the summary."""

    lines: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def report(self, where: str, action: str, text: str, kind: str, what: str) -> None:
        """Name one changed span: ``FILE:LINE: dropped 'Sony' (ORG): its edges fall inside tokens``."""
        self.counts[action] += 1
        self.lines.append(f"{where}: {action} {text!r} ({kind}): {what}")

    def note(self, what: str, n: int = 1) -> None:
        """Count something that changes no entity (whitespace trimmed, a duplicate merged)."""
        self.counts[what] += n

    @property
    def changed(self) -> int:
        return sum(self.counts[a] for a in CHANGED)
