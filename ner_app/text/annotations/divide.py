"""One export divided into the train, dev and test files training reads (``ner-app split``).

The input is read by the one reader of split files (``splits.read_split``: CoNLL as it is, every other format
converted as ``convert`` and training convert it). The unit is a document (a Label Studio task, a doccano or
Prodigy line, a brat file, a CoNLL ``-DOCSTART-`` document), or a sentence with ``by="sentence"``; a unit is
never cut. Units with the same text (the same tokens) form one group and go to one split, so no text is
trained on and scored at once.

The rule (``assign``), deterministic for a seed: the groups are shuffled with the seed; then each entity type,
rarest first (fewest groups holding it), deals its groups not yet placed: first one to each split that has
none of it yet, in the order train, test, dev, while the type has groups for them (a type in one group goes to
train, in two to train and test, in three or more to all three); then each remaining one to the split furthest
below its share of that type's groups. Groups without entities then go to the split furthest below its share
of sentences. A split left empty takes the smallest group of the largest split.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ner_app.text.annotations.format import Options
from ner_app.text.annotations.model import AnnotationFormatError, Audit
from ner_app.text.annotations.splits import read_split
from ner_app.text.conll import DOCSTART, Sentence, write_conll
from ner_app.text.tags import detect_scheme, known_entities

SPLIT_NAMES = ("train", "dev", "test")
FILE_NAMES = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}  # what training reads
DEALING_ORDER = ("train", "test", "dev")  # who gets a rare type's first groups
UNITS = ("document", "sentence")


@dataclass
class Group:
    """Units of one text (or one unit): their sentences, how many, and their entities by type."""

    units: list[list[Sentence]]
    types: Counter[str] = field(default_factory=Counter)

    @property
    def sentences(self) -> int:
        return sum(len(u) for u in self.units)


@dataclass(frozen=True)
class Division:
    """Where everything went: each split's units (lists of sentences, in input order) and its counts."""

    splits: dict[str, list[list[Sentence]]]
    scheme: str

    def counts(self) -> dict[str, dict[str, Any]]:
        """Per split: documents (units), sentences, tokens and entities by type."""
        out: dict[str, dict[str, Any]] = {}
        for name, units in self.splits.items():
            types = Counter(t for u in units for s in u for t, _, _ in known_entities(s.tags, self.scheme))
            out[name] = {
                "file": FILE_NAMES[name],
                "units": len(units),
                "sentences": sum(len(u) for u in units),
                "tokens": sum(len(s.tokens) for u in units for s in u),
                "entities": dict(sorted(types.items())),
            }
        return out


def read_units(path: Path, fmt: str | None, options: Options, audit: Audit, by: str) -> list[list[Sentence]]:
    """The units of one export, in input order: its documents (sentences grouped by document), or its
    sentences one by one."""
    sentences = [s for s in read_split(path, fmt, options.tag_column, options, audit) if s.tokens]
    if by == "sentence":
        return [[s] for s in sentences]
    documents: dict[int, list[Sentence]] = {}
    for sentence in sentences:
        documents.setdefault(sentence.doc, []).append(sentence)
    return list(documents.values())


def _groups(units: Sequence[list[Sentence]], scheme: str) -> list[Group]:
    """Units with the same tokens in one group (first-seen order)."""
    by_text: dict[tuple[tuple[str, ...], ...], Group] = {}
    for unit in units:
        group = by_text.setdefault(tuple(tuple(s.tokens) for s in unit), Group([]))
        group.units.append(unit)
        group.types.update(t for s in unit for t, _, _ in known_entities(s.tags, scheme))
    return list(by_text.values())


def assign(groups: Sequence[Group], shares: dict[str, float], seed: int) -> list[str]:
    """The split of each group (the module's rule); ``shares`` are the fractions of train, dev and test."""
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    placed: dict[int, str] = {}
    total = sum(g.sentences for g in groups)
    size = Counter[str]()

    def place(i: int, name: str) -> None:
        placed[i] = name
        size[name] += groups[i].sentences

    def size_gap(name: str) -> float:
        return shares[name] * total - size[name]

    holding: dict[str, list[int]] = {}
    for i in order:
        for kind in groups[i].types:
            holding.setdefault(kind, []).append(i)
    for kind in sorted(holding, key=lambda k: (len(holding[k]), k)):
        have = Counter(placed[i] for i in holding[kind] if i in placed)
        pending = [i for i in holding[kind] if i not in placed]
        for name in DEALING_ORDER[: len(holding[kind])]:
            if pending and have[name] == 0 and shares[name] > 0:
                place(pending.pop(0), name)
                have[name] += 1
        for i in pending:
            name = max(
                SPLIT_NAMES,
                key=lambda n: (shares[n] * len(holding[kind]) - have[n], size_gap(n)),
            )
            place(i, name)
            have[name] += 1
    for i in order:
        if i not in placed:
            place(i, max(SPLIT_NAMES, key=size_gap))
    for name in SPLIT_NAMES:  # a split must hold something: the smallest group of the largest split moves
        if shares[name] > 0 and size[name] == 0:
            largest = max(SPLIT_NAMES, key=lambda n: (sum(1 for s in placed.values() if s == n), n))
            i = min(
                (i for i in order if placed[i] == largest),
                key=lambda i: groups[i].sentences,
            )
            size[largest] -= groups[i].sentences
            place(i, name)
    return [placed[i] for i in range(len(groups))]


def divide(
    units: Sequence[list[Sentence]], where: str, dev: float, test: float, seed: int, by: str
) -> Division:
    """The units split into train, dev and test (the module's rule); ``where`` names the input in errors."""
    scheme = detect_scheme(s.tags for u in units for s in u)
    groups = _groups(units, scheme)
    if len(groups) < len(SPLIT_NAMES):
        what = by if len(groups) == 1 else f"{by}s"
        hint = (
            " (a CoNLL file marks documents with -DOCSTART- lines; or split by sentence: --by sentence)"
            if by == "document"
            else ""
        )
        raise AnnotationFormatError(
            f"{where}: {len(groups)} {what} of distinct text; expected at least 3, one for each of train, dev "
            f"and test{hint}"
        )
    shares = {"train": 1.0 - dev - test, "dev": dev, "test": test}
    chosen = assign(groups, shares, seed)
    index = {id(u): n for n, u in enumerate(units)}
    splits: dict[str, list[list[Sentence]]] = {name: [] for name in SPLIT_NAMES}
    for group, name in zip(groups, chosen, strict=True):
        splits[name].extend(group.units)
    for name in SPLIT_NAMES:
        splits[name].sort(key=lambda u: index[id(u)])  # input order within a split
    return Division(splits, scheme)


def write_division(folder: Path, division: Division, by: str, where: str) -> None:
    """The three CoNLL files into ``folder`` (a fresh staging folder): one ``-DOCSTART-`` document a unit, or,
    by sentence, one a run of sentences of the same input document. ``where`` names the input in errors."""
    for name, units in division.splits.items():
        documents: list[list[tuple[list[str], list[str]]]] = []
        last = None
        for unit in units:
            if not (by == "sentence" and unit[0].doc == last):
                documents.append([])
            last = unit[0].doc
            for sentence in unit:
                if DOCSTART in sentence.tokens:
                    raise AnnotationFormatError(
                        f"{where}:{sentence.line}: the text holds the token {DOCSTART}, which CoNLL reads as a "
                        "document boundary; change that word"
                    )
                documents[-1].append((sentence.tokens, sentence.tags))
        write_conll(folder / FILE_NAMES[name], documents)
