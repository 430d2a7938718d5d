"""The tag grammar: IOB1 (CoNLL-2003 original), IOB2 (= BIO) and BIOES; what a tag is, which tag may follow
which, detection, entity spans and conversion. Every other module asks this one.

Each scheme is one ``Scheme`` record in ``SCHEMES`` (names, tag prefixes, transition rule, training name,
seqeval's strict mode); the tables other modules use (``TRAINING_SCHEMES``, ``TRAINABLE_SCHEMES``,
``TAG_PATTERN``) and ``entity_types`` are derived from those records.

All conversions go through entity spans ``(type, start, end_exclusive)``, so any scheme can be turned into
any other and back. Decoding is lenient, like conlleval: an ``I-X`` or ``E-X`` that does not continue an open
``X`` entity starts a new one. The transition rules (``may_follow``) are strict: they are what a well-formed
sequence obeys, and the CRF's constraints are built from them.

``UNKNOWN`` (``-``) marks a token whose tag was not annotated (partial annotation, docs/data.md). Detection
and conversion leave it where it is; entity spans need every tag known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

Span = tuple[str, int, int]  # (type, start, end_exclusive)
Part = tuple[str, str]  # (prefix, type) of a tag; ("O", "") for O
# A transition rule: may tag part ``cur`` follow ``prev``? None stands for the sentence boundary.
Follows = Callable[[Part | None, Part | None], bool]


@dataclass(frozen=True)
class Scheme:
    """One tag scheme: its names, the prefixes of its tags and which tag may follow which. The training names,
    seqeval's mode, the tag pattern and the CRF's constraints are all derived from these records."""

    name: str  # canonical name
    aliases: tuple[str, ...]  # other names ``scheme_of`` accepts for it
    prefixes: str  # the letters before "-" in its tags
    follows: Follows  # the transition rule of a well-formed sequence (``may_follow``)
    training_name: str  # its name in configs and tagger specs (``data.scheme``)
    # seqeval's strict-mode scheme (a class of seqeval.scheme) that scores it; None: a run cannot train in it
    # (config/schema.py's data.scheme lists the training names of the others)
    seqeval: str | None = None


def _iob2_follows(prev: Part | None, cur: Part | None) -> bool:
    """IOB2: an I-X continues a B-X or I-X; ``None`` stands for the sentence boundary."""
    if cur is not None and cur[0] == "I":
        return prev is not None and prev[0] in "BI" and prev[1] == cur[1]
    return True


def _iob1_follows(prev: Part | None, cur: Part | None) -> bool:
    """IOB1: I-X may open an entity; B-X only separates two adjacent entities of the same type X."""
    if cur is not None and cur[0] == "B":
        return prev is not None and prev[0] in "BI" and prev[1] == cur[1]
    return True


def _bioes_follows(prev: Part | None, cur: Part | None) -> bool:
    """BIOES: B-X and I-X must be continued by I-X or E-X; the others are followed by O, B-* or S-*."""
    prev_open = prev is not None and prev[0] in "BI"  # inside an unfinished entity
    if cur is None:
        return not prev_open
    if cur[0] in "IE":
        return prev is not None and prev_open and prev[1] == cur[1]
    return not prev_open


SCHEMES = {
    s.name: s
    for s in (
        Scheme("IOB1", (), "BI", _iob1_follows, training_name="IOB1"),
        Scheme("IOB2", ("BIO",), "BI", _iob2_follows, training_name="BIO", seqeval="IOB2"),
        Scheme("BIOES", ("IOBES",), "BIES", _bioes_follows, training_name="BIOES", seqeval="IOBES"),
    )
}
_BY_NAME = {n: s for s in SCHEMES.values() for n in (s.name, *s.aliases, s.training_name)}
# Names a tagger spec may give its training scheme (the CRF's constraints are built in any of them), and the
# schemes a run can train in (those seqeval scores in strict mode).
TRAINING_SCHEMES = tuple(sorted(s.training_name for s in SCHEMES.values()))
TRAINABLE_SCHEMES = tuple(s.training_name for s in SCHEMES.values() if s.seqeval is not None)
_ALL_PREFIXES = "".join(sorted({p for s in SCHEMES.values() for p in s.prefixes}))
# A tag of any scheme: O, or a prefix and a non-empty entity type of printable characters (a control character,
# a terminal escape sequence's first, would reach every message and report).
TAG_PATTERN = re.compile(rf"O|[{_ALL_PREFIXES}]-[^\s\x00-\x1f\x7f-\x9f]+")


def scheme_of(name: str) -> Scheme:
    """The scheme of a name, any case: canonical ("IOB2"), alias ("BIO") or training name."""
    found = _BY_NAME.get(name.upper())
    if found is None:
        names = ", ".join(
            f"{s.name} ({', '.join(s.aliases)})" if s.aliases else s.name for s in SCHEMES.values()
        )
        raise ValueError(f"unknown tag scheme {name!r}: expected one of {names}")
    return found


UNKNOWN = "-"  # the tag of a token that was not annotated: any tag may be its own


def is_tag(text: str) -> bool:
    """Whether ``text`` is a tag of some scheme (``O``, ``B-X``, ``I-X``, ``E-X``, ``S-X``)."""
    return TAG_PATTERN.fullmatch(text) is not None


def is_tag_or_unknown(text: str) -> bool:
    """Whether ``text`` is a tag (``is_tag``) or ``UNKNOWN``, what a training file may hold."""
    return text == UNKNOWN or is_tag(text)


def normalize_scheme(name: str) -> str:
    """The canonical name ("IOB1", "IOB2" or "BIOES") of a scheme name; "BIO" means IOB2, "IOBES" BIOES."""
    return scheme_of(name).name


def split_tag(tag: str) -> tuple[str, str]:
    """("O", "") for O, else (prefix, type): "B-PER" -> ("B", "PER"). Raises ValueError on anything else."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in _ALL_PREFIXES:
        return tag[0], tag[2:]
    raise ValueError(f"invalid tag {tag!r}: expected O or B-X, I-X, E-X, S-X with a non-empty type X")


def scheme_tags(scheme: str, types: Iterable[str]) -> list[str]:
    """Every tag of ``scheme`` for the entity types: "O" first, then sorted."""
    prefixes = scheme_of(scheme).prefixes
    return ["O", *sorted(f"{p}-{t}" for t in set(types) for p in prefixes)]


def entity_types(tags: Iterable[str]) -> list[str]:
    """The entity types of ``tags`` (any scheme; e.g. a tag vocabulary), sorted; O and non-tags left out."""
    return sorted({split_tag(tag)[1] for tag in tags if tag != "O" and is_tag(tag)})


def detect_scheme(tag_sequences: Iterable[Sequence[str]]) -> str:
    """Guess the scheme of tagged sentences.

    BIOES when any E-/S- tag occurs; otherwise IOB1 when any entity starts with I- (an I-X not preceded by
    B-X or I-X); otherwise IOB2. Data with no entities at all is reported as IOB2. An I-X after an
    ``UNKNOWN`` tag is no evidence either way.
    """
    iob1 = False
    for tags in tag_sequences:
        prev_prefix, prev_type = "O", ""
        for tag in tags:
            prefix, kind = (UNKNOWN, "") if tag == UNKNOWN else split_tag(tag)
            if prefix in "ES":
                return "BIOES"
            if prefix == "I" and prev_prefix != UNKNOWN and not (prev_prefix in "BI" and prev_type == kind):
                iob1 = True
            prev_prefix, prev_type = prefix, kind
    return "IOB1" if iob1 else "IOB2"


def entities(tags: Sequence[str], scheme: str) -> list[Span]:
    """Entity spans ``(type, start, end_exclusive)`` of one tag sequence in ``scheme``."""
    allowed = scheme_of(scheme).prefixes
    spans: list[Span] = []
    open_type, open_start = "", -1  # open_start == -1: no entity open
    for i, tag in enumerate(tags):
        prefix, kind = split_tag(tag)
        if prefix != "O" and prefix not in allowed:
            raise ValueError(f"tag {tag!r} at position {i} is not valid in scheme {scheme}")
        if prefix == "O" or prefix in "BS" or open_start < 0 or kind != open_type:
            if open_start >= 0:
                spans.append((open_type, open_start, i))
            open_type, open_start = (kind, i) if prefix != "O" else ("", -1)
        if prefix in "ES":  # closes the entity on this token
            spans.append((open_type, open_start, i + 1))
            open_type, open_start = "", -1
    if open_start >= 0:
        spans.append((open_type, open_start, len(tags)))
    return spans


def known_entities(tags: Sequence[str], scheme: str) -> list[Span]:
    """``entities`` of a sequence that may hold ``UNKNOWN`` tags: those made of known tags only (an unknown
    tag ends an open entity and starts none)."""
    return entities([("O" if t == UNKNOWN else t) for t in tags], scheme)


def from_entities(spans: Sequence[Span], length: int, scheme: str) -> list[str]:
    """The tag sequence of ``length`` tokens holding the (non-overlapping, sorted) spans in ``scheme``."""
    scheme = normalize_scheme(scheme)
    tags = ["O"] * length
    prev_end, prev_type = -1, ""
    for kind, start, end in spans:
        if scheme == "BIOES" and end - start == 1:
            tags[start] = f"S-{kind}"
        else:
            tags[start:end] = [f"I-{kind}"] * (end - start)
            if scheme == "IOB2" or scheme == "BIOES":
                tags[start] = f"B-{kind}"
            elif start == prev_end and kind == prev_type:  # IOB1: B- only between adjacent same-type entities
                tags[start] = f"B-{kind}"
            if scheme == "BIOES":
                tags[end - 1] = f"E-{kind}"
        prev_end, prev_type = end, kind
    return tags


def convert(tags: Sequence[str], source: str, target: str) -> list[str]:
    """Convert one tag sequence between schemes (targets: IOB1, IOB2/BIO, BIOES). Within one scheme a fully
    known sequence is rewritten from its entities, so an ill-formed one (BIOES ``B-X O E-X``) is repaired as
    every reader repairs it, and a well-formed one comes back unchanged.

    ``UNKNOWN`` tags stay as they are. Each run of known tags is converted on its own, and a tag of it
    whose target form depends on an unknown neighbour (IOB2 ``- B-X`` is BIOES ``B-X``, but ``- I-X`` is
    ``B-X`` or ``I-X``) becomes ``UNKNOWN`` too: known tags are never guessed.
    """
    source, target = normalize_scheme(source), normalize_scheme(target)
    if UNKNOWN not in tags:
        return from_entities(entities(tags, source), len(tags), target)
    if source == target:
        return list(tags)
    out = list(tags)
    start = 0
    while start < len(tags):
        if tags[start] == UNKNOWN:
            start += 1
            continue
        end = start
        while end < len(tags) and tags[end] != UNKNOWN:
            end += 1
        out[start:end] = _convert_run(tuple(tags[start:end]), start > 0, end < len(tags), source, target)
        start = end
    return out


@lru_cache(maxsize=65536)
def _convert_run(
    run: tuple[str, ...], hidden_before: bool, hidden_after: bool, source: str, target: str
) -> tuple[str, ...]:
    """A run of known tags converted under every tag its unknown neighbours could have; a tag that is not the
    same under all of them becomes ``UNKNOWN``. An ``O`` at the run's edge shields it from the neighbour."""

    def neighbours(hidden: bool, edge: str) -> list[list[str]]:
        if not hidden or edge == "O":
            return [[]]
        kind = split_tag(edge)[1]
        return [["O"]] + [[f"{p}-{t}"] for p in scheme_of(source).prefixes for t in (kind, f"{kind}_other")]

    outcomes = [
        convert([*before, *run, *after], source, target)[len(before) : len(before) + len(run)]
        for before in neighbours(hidden_before, run[0])
        for after in neighbours(hidden_after, run[-1])
    ]
    return tuple(tag if all(o[i] == tag for o in outcomes) else UNKNOWN for i, tag in enumerate(outcomes[0]))


def scheme_part(tag: str, scheme: str) -> Part:
    """``"B-PER"`` -> ``("B", "PER")`` if ``scheme`` has such tags; ValueError naming tag and scheme otherwise."""
    prefixes = scheme_of(scheme).prefixes
    if tag == "O":
        return "O", ""
    prefix, sep, entity = tag.partition("-")
    if not sep or not entity or prefix not in prefixes:
        allowed = ", ".join(f"{p}-<type>" for p in sorted(prefixes))
        raise ValueError(f"tag {tag!r} does not fit scheme {scheme!r}: expected 'O' or one of {allowed}")
    return prefix, entity


def may_follow(prev: Part | None, cur: Part | None, scheme: str) -> bool:
    """Whether tag part ``cur`` may follow ``prev`` in a well-formed sequence (None: the sentence boundary)."""
    return scheme_of(scheme).follows(prev, cur)
