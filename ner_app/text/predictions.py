"""What prediction finds, as typed records: the entities of a line of text, and the tags of a CoNLL sentence.

Every output of a tagger is written from these (``report/formats.py`` maps a format name to its writer; the
server answers ``TaggedLine.to_json``; the Python API returns ``Entity``), so each output reads the same facts.
No torch here: the ONNX predictor makes them too.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Entity:
    """A named entity found in a text: ``text == source[start:end]``. ``score`` is the probability, under the
    model's CRF, that the text holds exactly this entity: the summed probability of every tag path with an
    entity of this type on these tokens (calibrated when the export carries a temperature), in [0, 1] and
    rounded to 4 decimals. ``alternatives``, when asked for, are the most probable other readings that overlap
    it (another type or other boundaries), each an ``Entity`` with its own probability, most probable first.
    """

    start: int
    end: int
    type: str
    text: str
    score: float
    alternatives: tuple[Entity, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"start", "end", "type", "text", "score"}``, and ``"alternatives"`` when asked for."""
        out: dict[str, Any] = {
            "start": self.start,
            "end": self.end,
            "type": self.type,
            "text": self.text,
            "score": self.score,
        }
        if self.alternatives is not None:
            out["alternatives"] = [a.to_json() for a in self.alternatives]
        return out

    def reading_text(self) -> str:
        """``TYPE "text" score``: a reading as a person reads it in a tool's note (the text in JSON quotes, so
        a tab stays on the line)."""
        return f"{self.type} {json.dumps(self.text, ensure_ascii=False)} {self.score}"

    def alternatives_text(self) -> str:
        """The other readings in one line: ``MISC "Sony" 0.31, ORG "Sony Music" 0.05`` (empty: none)."""
        return ", ".join(a.reading_text() for a in self.alternatives or ())

    def shifted(self, at: int) -> Entity:
        """The same entity ``at`` characters further on (its line placed in a document)."""
        moved = None if self.alternatives is None else tuple(a.shifted(at) for a in self.alternatives)
        return replace(self, start=self.start + at, end=self.end + at, alternatives=moved)


@dataclass(frozen=True)
class Flagged:
    """A token tagged O whose probability of O (``o_score``) is below the asked threshold: perhaps a missed
    entity. ``reading`` is the most probable entity reading that covers it, with its probability."""

    start: int
    end: int
    text: str
    o_score: float
    reading: Entity

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "o_score": self.o_score,
            "reading": self.reading.to_json(),
        }

    def note(self) -> str:
        """``"Sony" (O 0.42): ORG "Sony" 0.55``: the token, its probability of O and its likeliest reading."""
        return (
            f"{json.dumps(self.text, ensure_ascii=False)} (O {self.o_score}): {self.reading.reading_text()}"
        )

    def shifted(self, at: int) -> Flagged:
        return replace(self, start=self.start + at, end=self.end + at, reading=self.reading.shifted(at))


@dataclass(frozen=True)
class TaggedLine:
    """One input line of raw text and its entities, in order; offsets index into ``text``. ``flagged`` (None
    unless asked for) holds the tokens that may be missed entities."""

    text: str
    entities: tuple[Entity, ...]
    flagged: tuple[Flagged, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"text", "entities": [{"start", "end", "type", "text", "score"}]}`` (and ``"flagged"`` when asked
        for): one line of ``--format jsonl`` and one result of the server."""
        out: dict[str, Any] = {"text": self.text, "entities": [e.to_json() for e in self.entities]}
        if self.flagged is not None:
            out["flagged"] = [f.to_json() for f in self.flagged]
        return out


@dataclass(frozen=True)
class TaggedSentence:
    """A sentence of a CoNLL file and its predicted tags (in the scheme of the training files): ``rows`` are
    the columns each output line starts with (the input's token line, or ``token gold`` for conlleval)."""

    rows: tuple[str, ...]
    tags: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.tags):
            raise ValueError(
                f"a tagged sentence needs one tag per row: {len(self.rows)} rows, {len(self.tags)} tags"
            )

    def conll_lines(self) -> Iterator[str]:
        """``ROW TAG`` per token: the predicted tag as the last column."""
        return (f"{row} {tag}" for row, tag in zip(self.rows, self.tags, strict=True))


def documents(records: Iterable[TaggedLine]) -> Iterator[TaggedLine]:
    """The documents of tagged lines: each block of consecutive non-empty lines (a blank line ends it, and
    belongs to none) as one record, its lines joined by ``\\n`` and its offsets counted from the block's
    start. An annotation tool's task is a document, never an empty one."""
    block: list[TaggedLine] = []
    for record in itertools.chain(
        records, [TaggedLine("", ())]
    ):  # a blank line ends the last block; streamed
        if record.text.strip():
            block.append(record)
            continue
        if block:
            yield _joined(block)
            block = []


def _joined(block: list[TaggedLine]) -> TaggedLine:
    entities: list[Entity] = []
    flagged: list[Flagged] | None = None if all(r.flagged is None for r in block) else []
    at = 0
    for record in block:
        entities.extend(e.shifted(at) for e in record.entities)
        if flagged is not None:
            flagged.extend(f.shifted(at) for f in record.flagged or ())
        at += len(record.text) + 1
    text = "\n".join(r.text for r in block)
    return TaggedLine(text, tuple(entities), None if flagged is None else tuple(flagged))


# A CoNLL output in order: tagged sentences, and the lines between them (blank lines, -DOCSTART-) as they are.
ConllItem = TaggedSentence | str
