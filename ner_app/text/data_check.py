"""The audit of a corpus before training (``check-data``): counts per split and the problems that block a run.

Each split is counted (sentences, tokens, entities per type, the detected tag scheme, the share of ``-``
tags, the longest sentences, the spans the conversion changed), then the splits are compared: sentences of
dev or test that are also in train (leakage), types of dev or test never seen in train, types with fewer
than ``RARE`` training examples. A problem is ``blocking`` when training would refuse the data or could not
learn from it (``BLOCKING``); the others are warnings (``data_records.py`` adds those of an export's records
and of repeated sentences). No torch here: it runs before anything heavy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ner_app.limits import MAX_ENTITY_TYPES, MAX_TRAIN_SENTENCE_TOKENS
from ner_app.text.annotations.model import DISAGREE, MERGED, SKIPPED, UNANNOTATED, unannotated
from ner_app.text.conll import Sentence
from ner_app.text.tags import UNKNOWN, Part, detect_scheme, known_entities, may_follow, scheme_part

RARE = 20  # a type with fewer training examples than this is named (spaCy's debug data uses the same bound)
LONGEST = 3  # the longest sentences shown per split
EXAMPLES = 5  # FILE:LINE examples shown per problem
BLOCKING, WARNING = "blocking", "warning"
# The problems that stop check-data with exit code 1: training refuses these data, or learns nothing from them.
BLOCKING_KINDS = (
    "unseen types",  # a dev/test type never seen in train: training refuses it
    "unknown tags in a scored split",  # dev/test are scored: every gold tag must be known
    "no entities in train",  # nothing to learn
    "sentence too long",  # longer than training takes
    "too many types",  # more than a CRF trains in reasonable time
)


@dataclass(frozen=True)
class Problem:
    """One finding: ``level`` (blocking or warning), its ``kind``, the split, a message and FILE:LINE examples."""

    level: str
    kind: str
    split: str
    message: str
    examples: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "kind": self.kind,
            "split": self.split,
            "message": self.message,
            "examples": list(self.examples),
        }


@dataclass
class SplitCounts:
    """What one split holds. ``where`` names each sentence ``FILE:LINE``; ``changed`` holds the audit's lines
    (spans moved, cut or dropped by the conversion)."""

    name: str
    source: str
    sentences: int = 0
    tokens: int = 0
    entities: Counter[str] = field(default_factory=Counter)
    scheme: str = "IOB2"
    ill_formed: int = 0  # sentences with a transition the scheme does not allow (repaired when read)
    ill_formed_at: list[str] = field(default_factory=list)
    unknown: int = 0  # tokens tagged - (not annotated)
    longest: list[tuple[int, str]] = field(default_factory=list)  # (tokens, FILE:LINE)
    changed: list[str] = field(default_factory=list)
    changed_counts: dict[str, int] = field(default_factory=dict)
    # whole records of an export (Audit.records): tasks skipped or not annotated, duplicates merged, texts whose
    # records disagree; and whether the unannotated ones were kept as text without entities
    records: dict[str, list[str]] = field(default_factory=dict)
    keep_unannotated: bool = False

    @property
    def unknown_share(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    @property
    def unannotated(self) -> list[str]:
        """The places of the tasks skipped (every annotation cancelled) or never annotated."""
        return unannotated(self.records)

    def records_json(self) -> dict[str, Any]:
        """``records`` of ``--json``: the counts of the export's whole records, and where they are."""
        without = len(self.unannotated)
        return {
            "skipped": len(self.records.get(SKIPPED, [])),
            "not_annotated": len(self.records.get(UNANNOTATED, [])),
            "left_out": 0 if self.keep_unannotated else without,
            "kept_as_no_entities": without if self.keep_unannotated else 0,
            "unannotated_at": self.unannotated[:EXAMPLES],
            "duplicates_merged": len(self.records.get(MERGED, [])),
            "disagreeing_texts": len(self.records.get(DISAGREE, [])),
            "disagreeing": list(self.records.get(DISAGREE, [])),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sentences": self.sentences,
            "tokens": self.tokens,
            "entities": dict(sorted(self.entities.items())),
            "scheme": self.scheme,
            "ill_formed_sentences": self.ill_formed,
            "ill_formed_at": self.ill_formed_at[:EXAMPLES],
            "unknown_tags": self.unknown,
            "unknown_share": round(self.unknown_share, 6),
            "longest": [{"tokens": n, "at": at} for n, at in self.longest],
            "spans_changed": self.changed_counts,
            "spans_changed_lines": self.changed,
            "records": self.records_json(),
        }


def _part(tag: str, scheme: str) -> Part | None:
    """The tag's part in ``scheme``, or None when the scheme has no such tag (it is ill-formed there)."""
    try:
        return scheme_part(tag, scheme)
    except ValueError:
        return None


def well_formed(tags: Sequence[str], scheme: str) -> bool:
    """Whether every transition of ``tags`` (sentence edges included) is one ``scheme`` allows; a transition
    next to a ``-`` tag may be anything, so it is not judged."""
    previous: Part | None = None
    previous_known = True
    for tag in tags:
        if tag == UNKNOWN:
            previous_known = False
            continue
        part = _part(tag, scheme)
        if part is None or (previous_known and not may_follow(previous, part, scheme)):
            return False
        previous, previous_known = part, True
    return not previous_known or may_follow(previous, None, scheme)


def count_split(
    name: str, source: str, sentences: Sequence[Sentence], scheme: str, where: Sequence[str]
) -> SplitCounts:
    """The counts of one split whose tags are in ``scheme`` (the run reads every split in train's)."""
    counts = SplitCounts(name, source, scheme=detect_scheme(s.tags for s in sentences))
    for sentence, at in zip(sentences, where, strict=True):
        counts.sentences += 1
        counts.tokens += len(sentence.tokens)
        counts.unknown += sentence.tags.count(UNKNOWN)
        if not well_formed(sentence.tags, scheme):
            counts.ill_formed += 1
            counts.ill_formed_at.append(at)
        try:
            found = known_entities(sentence.tags, scheme)
        except ValueError:  # a tag of another scheme: counted as ill-formed above; read as the split's own
            found = known_entities(sentence.tags, counts.scheme)
        counts.entities.update(kind for kind, _, _ in found)
    order = sorted(range(len(sentences)), key=lambda i: (-len(sentences[i].tokens), i))[:LONGEST]
    counts.longest = [(len(sentences[i].tokens), where[i]) for i in order]
    return counts


def _shown(items: Sequence[str]) -> str:
    return ", ".join(items[:EXAMPLES]) + (f", ... ({len(items)} in all)" if len(items) > EXAMPLES else "")


def find_problems(
    splits: Mapping[str, SplitCounts],
    sentences: Mapping[str, Sequence[Sentence]],
    where: Mapping[str, Sequence[str]],
) -> list[Problem]:
    """The problems of the splits (``train`` compared with the others), blocking ones first."""
    found: list[Problem] = []
    train = splits.get("train")
    train_types = set(train.entities) if train else set()
    train_text = {tuple(s.tokens) for s in sentences.get("train", ())}
    if train is not None:
        if not train.entities:
            found.append(
                Problem(BLOCKING, "no entities in train", "train", "train has no entity: nothing to learn")
            )
        if len(train_types) > MAX_ENTITY_TYPES:
            found.append(
                Problem(
                    BLOCKING,
                    "too many types",
                    "train",
                    f"{len(train_types):,} entity types, more than the {MAX_ENTITY_TYPES:,} a CRF trains in "
                    "reasonable time; is the tag column the NER tag?",
                )
            )
        long = [
            f"{at} ({len(s.tokens):,} tokens)"
            for s, at in zip(sentences["train"], where["train"], strict=True)
            if len(s.tokens) > MAX_TRAIN_SENTENCE_TOKENS
        ]
        if long:
            found.append(
                Problem(
                    BLOCKING,
                    "sentence too long",
                    "train",
                    f"{len(long)} sentences longer than the {MAX_TRAIN_SENTENCE_TOKENS:,} tokens training takes: "
                    "split them",
                    tuple(long[:EXAMPLES]),
                )
            )
        rare = sorted(t for t, n in train.entities.items() if n < RARE)
        if rare:
            shown = ", ".join(f"{t} ({train.entities[t]})" for t in rare)
            found.append(
                Problem(
                    WARNING,
                    "rare types",
                    "train",
                    f"types with fewer than {RARE} training examples: {shown}; the tagger will rarely find them",
                )
            )
        if train.unknown:
            found.append(
                Problem(
                    WARNING,
                    "unknown tags",
                    "train",
                    f"{train.unknown:,} of {train.tokens:,} tokens ({train.unknown_share:.1%}) are not annotated (-): "
                    "trained on as partial annotation",
                )
            )
    for name, counts in splits.items():
        if counts.ill_formed:
            found.append(
                Problem(
                    WARNING,
                    "ill-formed sequences",
                    name,
                    f"{counts.ill_formed} sentences have tag transitions {train.scheme if train else counts.scheme} "
                    "does not allow (an I- after O, ...); read leniently, as conlleval does",
                    tuple(counts.ill_formed_at[:EXAMPLES]),
                )
            )
        if counts.changed:
            moved = ", ".join(f"{n} {what}" for what, n in counts.changed_counts.items())
            found.append(
                Problem(
                    WARNING,
                    "misaligned spans",
                    name,
                    f"{len(counts.changed)} spans changed by the conversion ({moved}): listed with their FILE:LINE",
                    tuple(counts.changed),
                )
            )
        if name == "train":
            continue
        if counts.unknown:
            first = next(at for s, at in zip(sentences[name], where[name], strict=True) if UNKNOWN in s.tags)
            found.append(
                Problem(
                    BLOCKING,
                    "unknown tags in a scored split",
                    name,
                    f"{counts.unknown:,} tokens are not annotated (-); {name} is scored, every gold tag must be known",
                    (first,),
                )
            )
        unseen = sorted(set(counts.entities) - train_types) if train is not None else []
        if unseen:
            shown = ", ".join(f"{t} ({counts.entities[t]})" for t in unseen)
            found.append(
                Problem(
                    BLOCKING,
                    "unseen types",
                    name,
                    f"types never seen in train: {shown}; training refuses them",
                )
            )
        leaked = [
            at for s, at in zip(sentences[name], where[name], strict=True) if tuple(s.tokens) in train_text
        ]
        if leaked:
            found.append(
                Problem(
                    WARNING,
                    "leakage",
                    name,
                    f"{len(leaked)} of {counts.sentences} sentences are also in train: their scores overstate "
                    "the tagger",
                    tuple(leaked[:EXAMPLES]),
                )
            )
        missing = sorted(train_types - set(counts.entities)) if counts.sentences else []
        if missing:
            found.append(
                Problem(
                    WARNING, "types missing", name, f"train types with no example here: {', '.join(missing)}"
                )
            )
    return sorted(found, key=lambda p: p.level != BLOCKING)


def json_report(splits: Mapping[str, SplitCounts], problems: Sequence[Problem]) -> dict[str, Any]:
    """``--json``: every count of every split, the problems, and how many block."""
    return {
        "splits": {name: c.to_json() for name, c in splits.items()},
        "problems": [p.to_json() for p in problems],
        "blocking": sum(p.level == BLOCKING for p in problems),
        "warnings": sum(p.level == WARNING for p in problems),
    }
