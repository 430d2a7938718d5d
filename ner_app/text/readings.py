"""Entity readings and what prediction asks of them, the model-free part: which tag paths hold a reading,
which readings to score, and the options that use the scores (``predict --min-score --alternatives
--flag-missed``).

A *reading* is ``(start token, end token exclusive, entity type)``. Its probability is the total probability
of the tag paths that hold exactly that entity: in BIOES ``S-X``, or ``B-X I-X... E-X``; in IOB2 ``B-X I-X...``
with a next tag that is not ``I-X``; in IOB1 the same, opened by ``B-X`` or by an ``I-X`` that follows no
``X`` tag. Each such set of paths is one or two *lattices*, each a per-position set of allowed tags, and the
model sums each lattice exactly (``tagger/crf/readings.py`` in torch, ``onnx/crf.py`` in numpy; both equal
``CRF.log_partition`` over the lattice) from ``Lattices`` tables, so that both predictors score the same
readings. No torch and no numpy here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ner_app.text.tags import entities, entity_types, scheme_of

Reading = tuple[int, int, str]  # (start token, end token exclusive, entity type)
# A position's constraint in a lattice: (position, tags, keep): keep -> only these tags, else all but these.
Constraint = tuple[int, tuple[str, ...], bool]
# Alternatives have each boundary at most this many tokens from the entity's own; a missed token's readings
# start at most this many tokens before it and end at most this many tokens after it.
WINDOW = 2


@dataclass(frozen=True)
class ReadingOptions:
    """What prediction reports besides the entities: ``min_score`` drops entities below it, ``alternatives``
    (K) gives each entity its K most probable overlapping other readings, ``flag_missed`` (P) flags the tokens
    tagged O whose probability of O is below P (None: no flags)."""

    min_score: float = 0.0
    alternatives: int = 0
    flag_missed: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("min_score", self.min_score), ("flag_missed", self.flag_missed)):
            if value is None and name == "flag_missed":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: expected a probability in [0, 1], found {value!r:.40}")
        k = self.alternatives
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"alternatives: expected an integer >= 0, found {k!r:.40}")

    @property
    def needs_outside(self) -> bool:
        return self.flag_missed is not None


def lattices(reading: Reading, length: int, scheme: str) -> list[list[Constraint]]:
    """The lattices whose paths together are those holding exactly ``reading`` in a sentence of ``length``
    tokens (disjoint, so their probabilities add up); the CRF's transition rules do the rest."""
    start, end, kind = reading
    if not 0 <= start < end <= length:
        raise ValueError(f"reading {reading} does not lie in a sentence of {length} tokens")
    name = scheme_of(scheme).name
    inside: list[Constraint] = [(i, (f"I-{kind}",), True) for i in range(start + 1, end)]
    closed: list[Constraint] = [(end, (f"I-{kind}",), False)] if end < length else []
    if name == "BIOES":
        if end - start == 1:
            return [[(start, (f"S-{kind}",), True)]]
        return [[(start, (f"B-{kind}",), True), *inside[:-1], (end - 1, (f"E-{kind}",), True)]]
    if name == "IOB2":
        return [[(start, (f"B-{kind}",), True), *inside, *closed]]
    # IOB1: B-X opens it (after an X tag, which the rules require), or I-X after a tag that is not X.
    after_other = [(start - 1, (f"B-{kind}", f"I-{kind}"), False)] if start > 0 else []
    return [
        [(start, (f"B-{kind}",), True), *inside, *closed],
        [*after_other, (start, (f"I-{kind}",), True), *inside, *closed],
    ]


@dataclass
class Lattices:
    """Lattices of readings over a batch of sentences, as index lists into an allowed-tag mask (L, T, K) that
    starts all True: ``clear`` (lattice, position) allows nothing, then ``keep`` (lattice, position, tag)
    allows a tag again and ``drop`` forbids one. ``rows[l]`` is lattice l's sentence in the batch,
    ``readings[l]`` the reading whose probability it adds to, and every constraint of lattice l lies between
    positions ``first[l]`` and ``last[l]`` (outside them it is the sentence's full lattice)."""

    rows: list[int] = field(default_factory=list)
    readings: list[int] = field(default_factory=list)
    first: list[int] = field(default_factory=list)  # per lattice: its first and last constrained position
    last: list[int] = field(default_factory=list)
    count: int = 0  # readings
    clear: tuple[list[int], list[int]] = field(default_factory=lambda: ([], []))
    keep: tuple[list[int], list[int], list[int]] = field(default_factory=lambda: ([], [], []))
    drop: tuple[list[int], list[int], list[int]] = field(default_factory=lambda: ([], [], []))

    def add(
        self,
        row: int,
        reading: Reading,
        length: int,
        scheme: str,
        tag_ids: Mapping[str, int],
        number: int | None = None,
    ) -> int:
        """Add the lattices of one reading of batch row ``row`` as reading ``number`` (default: the next);
        returns that number."""
        number = self.count if number is None else number
        for lattice in lattices(reading, length, scheme):
            index = len(self.rows)
            self.rows.append(row)
            self.readings.append(number)
            self.first.append(min(c[0] for c in lattice))
            self.last.append(max(c[0] for c in lattice))
            for position, tags, keep in lattice:
                ids = [tag_ids[t] for t in tags if t in tag_ids]  # a tag training never saw: never on a path
                if keep:
                    self.clear[0].append(index)
                    self.clear[1].append(position)
                for tag in ids:
                    for where, value in zip(
                        self.keep if keep else self.drop, (index, position, tag), strict=True
                    ):
                        where.append(value)
        self.count = max(self.count, number + 1)
        return number


# The probability of every lattice of a table (its lattices in order): the model's part.
LatticeProbabilities = Callable[[Lattices], Sequence[float]]


class LatticeBook:
    """The lattices of a batch's readings, in tables of similar window width (by powers of two), so that one
    long reading does not widen the windows of all the others."""

    def __init__(self, scheme: str, tag_ids: Mapping[str, int]) -> None:
        self.scheme, self.tag_ids = scheme, tag_ids
        self.tables: dict[int, Lattices] = {}
        self.count = 0  # readings

    def add(self, row: int, reading: Reading, length: int) -> int:
        """Add one reading of batch row ``row``; returns its number."""
        width = reading[1] - reading[0] + 2  # its tokens and the positions around them
        table = self.tables.setdefault(width.bit_length(), Lattices())
        table.add(row, reading, length, self.scheme, self.tag_ids, self.count)
        self.count += 1
        return self.count - 1

    def probabilities(self, score: LatticeProbabilities) -> list[float]:
        """The probability of each reading (clamped as ``add_up`` does), one call of ``score`` per table."""
        total = [0.0] * self.count
        for table in self.tables.values():
            for reading, p in zip(table.readings, score(table), strict=True):
                total[reading] += p
        return _clamped(total)


def add_up(lattices: Lattices, lattice_probabilities: Sequence[float]) -> list[float]:
    """The probability of each reading: the sum of its lattices', clamped into [0, 1] (rounding)."""
    total = [0.0] * lattices.count
    for reading, p in zip(lattices.readings, lattice_probabilities, strict=True):
        total[reading] += p
    return _clamped(total)


def _clamped(probabilities: list[float]) -> list[float]:
    return [min(max(p, 0.0), 1.0) if math.isfinite(p) else 0.0 for p in probabilities]


def alternative_readings(reading: Reading, length: int, types: Sequence[str]) -> list[Reading]:
    """The other readings that overlap ``reading``, with each boundary at most ``WINDOW`` tokens from its own
    (any entity type, the same boundaries included with another type)."""
    start, end, _ = reading
    return [
        (s, e, kind)
        for s in range(max(0, start - WINDOW), min(length, start + WINDOW + 1))
        for e in range(max(s + 1, end - WINDOW), min(length, end + WINDOW) + 1)
        for kind in types
        if s < end and e > start and (s, e, kind) != reading
    ]


def covering_readings(token: int, length: int, types: Sequence[str]) -> list[Reading]:
    """The readings that cover ``token``, starting at most ``WINDOW`` tokens before it and ending at most
    ``WINDOW`` tokens after it."""
    return [
        (s, e, kind)
        for s in range(max(0, token - WINDOW), token + 1)
        for e in range(token + 1, min(length, token + 1 + WINDOW) + 1)
        for kind in types
    ]


Scored = tuple[Reading, float]


@dataclass(frozen=True)
class Missed:
    """A token tagged O with a probability of O below ``flag_missed``, and the most probable reading
    covering it."""

    token: int
    outside: float  # its probability of O
    reading: Scored


@dataclass(frozen=True)
class SentenceReading:
    """A sentence's tags (training scheme), its entities as scored readings, each entity's alternatives
    (None when not asked for) and the flagged tokens (None when not asked for)."""

    tags: list[str]
    entities: list[Scored]
    alternatives: list[list[Scored]] | None = None
    missed: list[Missed] | None = None


def read_batch(
    tags: Sequence[Sequence[str]],
    outside: Sequence[Sequence[float]] | None,
    scheme: str,
    tag_ids: Mapping[str, int],
    options: ReadingOptions,
    probabilities: LatticeProbabilities,
) -> list[SentenceReading]:
    """Score the readings a batch of sentences needs in one call of ``probabilities``: each predicted
    entity, and the alternatives and the readings of missed tokens that ``options`` asks for. ``tags`` are
    the predicted paths (training scheme), ``outside`` each token's probability of O (needed for
    ``flag_missed``)."""
    types = entity_types(tag_ids)
    book = LatticeBook(scheme, tag_ids)
    plans: list[tuple[list[tuple[Reading, int]], list[list[tuple[Reading, int]]], list[Any]]] = []
    for row, path in enumerate(tags):
        n = len(path)
        found = [(s, e, kind) for kind, s, e in entities(path, scheme)]
        own = [(r, book.add(row, r, n)) for r in found]
        others = [
            [(a, book.add(row, a, n)) for a in alternative_readings(r, n, types)]
            for r in (found if options.alternatives else [])
        ]
        flagged = []
        if options.flag_missed is not None and outside is not None:
            for i, tag in enumerate(path):
                if tag == "O" and outside[row][i] < options.flag_missed:
                    cover = [(c, book.add(row, c, n)) for c in covering_readings(i, n, types)]
                    flagged.append((i, outside[row][i], cover))
        plans.append((own, others, flagged))
    p = book.probabilities(probabilities)
    out = []
    for path, (own, others, flagged) in zip(tags, plans, strict=True):
        alternatives = None
        if options.alternatives:
            alternatives = [_best(cands, p, options.alternatives) for cands in others]
        missed = None
        if options.flag_missed is not None:
            missed = [Missed(i, o, _best(cover, p, 1)[0]) for i, o, cover in flagged if _best(cover, p, 1)]
        out.append(SentenceReading(list(path), [(r, p[k]) for r, k in own], alternatives, missed))
    return out


def _best(candidates: Sequence[tuple[Reading, int]], p: Sequence[float], k: int) -> list[Scored]:
    """The ``k`` most probable candidates of non-zero probability; ties in reading order."""
    ranked = sorted(((r, p[i]) for r, i in candidates if p[i] > 0.0), key=lambda x: (-x[1], x[0]))
    return ranked[:k]
