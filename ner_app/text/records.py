"""What prediction finds, as typed records: the entities of a line of text, and the tags of a CoNLL sentence.

Every output of a tagger is written from these (``report/formats.py`` maps a format name to its writer; the
server answers ``TaggedLine.to_json``; the Python API returns ``Entity``), so each output reads the same facts.
No torch here: the ONNX predictor makes them too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entity:
    """A named entity found in a text: ``text == source[start:end]``; ``score`` is the mean probability of its
    tokens' predicted tags (from the CRF's marginals), rounded to 4 decimals."""

    start: int
    end: int
    type: str
    text: str
    score: float


@dataclass(frozen=True)
class TaggedLine:
    """One input line of raw text and its entities, in order; offsets index into ``text``."""

    text: str
    entities: tuple[Entity, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"text", "entities": [{"start", "end", "type", "text", "score"}]}``: one line of ``--format jsonl``
        and one result of the server."""
        return {"text": self.text, "entities": [dataclasses.asdict(e) for e in self.entities]}


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


# A CoNLL output in order: tagged sentences, and the lines between them (blank lines, -DOCSTART-) as they are.
ConllItem = TaggedSentence | str
