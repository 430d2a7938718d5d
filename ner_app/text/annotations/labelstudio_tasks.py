"""Which annotation of a Label Studio export each text is read from, and which records are left out.

A record is a task of the JSON export (with its annotations) or a record of the JSON-MIN export (one
annotation each: a task annotated twice is two records). A record with no annotation left (skipped: every
annotation ``was_cancelled``; or never annotated) says nothing about its entities, so it is left out unless
``keep_unannotated`` reads it as text without entities. Records of the same text are one document: among their
annotations those marked ``ground_truth`` win, then ``choice`` picks (``first`` or ``last`` in the file,
``latest``: the newest ``updated_at``, else ``created_at``). Records that agree are merged and counted; records
that disagree are named in one line of the audit, so a text never enters training twice with two answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ner_app.text.annotations.model import DISAGREE, MERGED, Audit

SHOWN_NAMES = 5  # the records named in the line of a text whose records disagree
# An ISO 8601 time as Label Studio and other tools write it: a date, a time with any fraction of a second, a zone
# (Z, +02:00 or +0200; none: UTC)
_ISO = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?)?\s*(Z|[+-]\d{2}:?\d{2})?", re.ASCII
)


def moment(text: str) -> str | None:
    """An ISO 8601 time as UTC ``YYYY-MM-DDTHH:MM:SS.ffffff``, which sorts as time does (the strings as
    written do not: a zone, a fraction of a second); None when it is none."""
    found = _ISO.fullmatch(text.strip())
    if found is None:
        return None
    date, clock, fraction, zone = found.groups()
    zone = "+00:00" if zone in (None, "Z") else zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    try:  # the fraction cut to microseconds, the most a datetime holds
        when = datetime.fromisoformat(f"{date}T{clock or '00:00:00'}.{(fraction or '')[:6]:0<6}{zone}")
    except ValueError:  # month 13, hour 25
        return None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")


@dataclass(frozen=True)
class Region:
    """A labelled span as the file gives it (offsets checked when it is read: ``read.char_span``)."""

    start: Any
    end: Any
    label: Any
    claimed: Any  # the span's text as the file gives it, or None


@dataclass(frozen=True)
class Candidate:
    """One annotation a text may be read from: ``name`` says which in messages (``task 3 annotation 12``)."""

    name: str
    ground_truth: bool
    stamp: str  # updated_at, else created_at, in UTC (``moment``; "" when neither): what ``latest`` compares
    regions: tuple[Region, ...]

    @property
    def key(self) -> tuple[str, ...]:
        """The annotation as a comparable value: its spans (offsets and label), in any order."""
        return tuple(sorted(json.dumps([r.start, r.end, r.label], default=str) for r in self.regions))


@dataclass(frozen=True)
class Record:
    """A task (or JSON-MIN record): its place ``FILE:task N``, its text and the annotations it may be read
    from; ``kind`` (``model.SKIPPED`` or ``UNANNOTATED``) when there is none."""

    where: str
    text: str
    candidates: tuple[Candidate, ...]
    kind: str | None = None


def pick(candidates: Sequence[Candidate], choice: str) -> tuple[Candidate, str]:
    """The annotation read of ``candidates`` (ground truth first, then ``choice``) and why, for messages."""
    truth = [c for c in candidates if c.ground_truth]
    pool = truth or list(candidates)
    if choice == "latest":
        best = max(pool, key=lambda c: c.stamp)  # the first of equal stamps: file order breaks ties
    else:
        best = pool[0] if choice == "first" else pool[-1]
    if not truth:
        return best, f"the {choice}"
    return best, "the ground truth" if len(truth) == 1 else f"the {choice} ground truth"


def choose(
    records: Sequence[Record], choice: str, keep_unannotated: bool, audit: Audit
) -> Iterator[tuple[Record, Candidate | None]]:
    """One ``(record, annotation)`` a distinct text, in the order of its first record; the annotation is None
    for a text kept as no entities (``keep_unannotated``). What was left out, merged or chosen goes to
    ``audit``."""
    groups: dict[str, list[Record]] = {}
    for record in records:
        if record.kind is not None:
            audit.record(record.kind, record.where)
        groups.setdefault(record.text, []).append(record)
    for group in groups.values():
        annotated = [r for r in group if r.candidates]
        if not annotated:
            if keep_unannotated:
                for record in group[1:]:
                    audit.record(MERGED, record.where)
                yield group[0], None
            continue
        candidates = [c for r in annotated for c in r.candidates]
        chosen, why = pick(candidates, choice)
        owner = next(r for r in annotated if chosen in r.candidates)
        if len(annotated) > 1 and len({c.key for c in candidates}) > 1:
            names = [c.name for c in candidates]
            shown = ", ".join(names[:SHOWN_NAMES]) + (", ..." if len(names) > SHOWN_NAMES else "")
            audit.record(
                DISAGREE,
                f"{annotated[0].where}: the same text in {len(annotated)} records with different annotations "
                f"({shown}); used {chosen.name}, {why}",
            )
        elif len(annotated) > 1:  # all alike: read once, placed at the first
            owner = annotated[0]
            for record in annotated[1:]:
                audit.record(MERGED, record.where)
        elif len(candidates) > 1:
            audit.note(f"Label Studio tasks with several annotations ({why} used)")
        yield owner, chosen
