"""The tag grammar: IOB1 (CoNLL-2003 original), IOB2 (= BIO) and BIOES; what a tag is, which tag may follow
which, detection, entity spans and conversion. Every other module asks this one.

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
from functools import lru_cache

Span = tuple[str, int, int]  # (type, start, end_exclusive)

SCHEMES = ("IOB1", "IOB2", "BIOES")
_ALIASES = {"IOB1": "IOB1", "IOB2": "IOB2", "BIO": "IOB2", "BIOES": "BIOES", "IOBES": "BIOES"}
_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES"}
# A tag of any scheme: O, or a prefix and a non-empty entity type.
TAG_PATTERN = re.compile(r"O|[BIES]-\S+")
UNKNOWN = "-"  # the tag of a token that was not annotated: any tag may be its own


def is_tag(text: str) -> bool:
    """Whether ``text`` is a tag of some scheme (``O``, ``B-X``, ``I-X``, ``E-X``, ``S-X``)."""
    return TAG_PATTERN.fullmatch(text) is not None


def is_tag_or_unknown(text: str) -> bool:
    """Whether ``text`` is a tag (``is_tag``) or ``UNKNOWN``, what a training file may hold."""
    return text == UNKNOWN or is_tag(text)


def normalize_scheme(name: str) -> str:
    """The canonical name ("IOB1", "IOB2" or "BIOES") of a scheme name; "BIO" means IOB2, "IOBES" BIOES."""
    key = name.upper()
    if key not in _ALIASES:
        raise ValueError(f"unknown tag scheme {name!r}: expected one of IOB1, IOB2 (BIO), BIOES (IOBES)")
    return _ALIASES[key]


def split_tag(tag: str) -> tuple[str, str]:
    """("O", "") for O, else (prefix, type): "B-PER" -> ("B", "PER"). Raises ValueError on anything else."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES":
        return tag[0], tag[2:]
    raise ValueError(f"invalid tag {tag!r}: expected O or B-X, I-X, E-X, S-X with a non-empty type X")


def scheme_tags(scheme: str, types: Iterable[str]) -> list[str]:
    """Every tag of ``scheme`` for the entity types: "O" first, then sorted."""
    prefixes = _PREFIXES[normalize_scheme(scheme)]
    return ["O", *sorted(f"{p}-{t}" for t in set(types) for p in prefixes)]


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
    allowed = _PREFIXES[normalize_scheme(scheme)]
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
    """Convert one tag sequence between schemes (targets: IOB1, IOB2/BIO, BIOES); same scheme: a copy.

    ``UNKNOWN`` tags stay as they are. Each run of known tags is converted on its own, and a tag of it
    whose target form depends on an unknown neighbour (IOB2 ``- B-X`` is BIOES ``B-X``, but ``- I-X`` is
    ``B-X`` or ``I-X``) becomes ``UNKNOWN`` too: known tags are never guessed.
    """
    source, target = normalize_scheme(source), normalize_scheme(target)
    if source == target:
        return list(tags)
    if UNKNOWN not in tags:
        return from_entities(entities(tags, source), len(tags), target)
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
        return [["O"]] + [[f"{p}-{t}"] for p in _PREFIXES[source] for t in (kind, f"{kind}_other")]

    outcomes = [
        convert([*before, *run, *after], source, target)[len(before) : len(before) + len(run)]
        for before in neighbours(hidden_before, run[0])
        for after in neighbours(hidden_after, run[-1])
    ]
    return tuple(tag if all(o[i] == tag for o in outcomes) else UNKNOWN for i, tag in enumerate(outcomes[0]))


Part = tuple[str, str]  # (prefix, type) of a tag; ("O", "") for O


def scheme_part(tag: str, scheme: str) -> Part:
    """``"B-PER"`` -> ``("B", "PER")`` if ``scheme`` has such tags; ValueError naming tag and scheme otherwise."""
    prefixes = _PREFIXES[normalize_scheme(scheme)]
    if tag == "O":
        return "O", ""
    prefix, sep, entity = tag.partition("-")
    if not sep or not entity or prefix not in prefixes:
        allowed = ", ".join(f"{p}-<type>" for p in sorted(prefixes))
        raise ValueError(f"tag {tag!r} does not fit scheme {scheme!r}: expected 'O' or one of {allowed}")
    return prefix, entity


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


_FOLLOWS: dict[str, Callable[[Part | None, Part | None], bool]] = {
    "IOB1": _iob1_follows, "IOB2": _iob2_follows, "BIOES": _bioes_follows,
}  # fmt: skip


def may_follow(prev: Part | None, cur: Part | None, scheme: str) -> bool:
    """Whether tag part ``cur`` may follow ``prev`` in a well-formed sequence (None: the sentence boundary)."""
    return _FOLLOWS[normalize_scheme(scheme)](prev, cur)
