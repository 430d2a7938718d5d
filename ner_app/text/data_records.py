"""The warnings of ``check-data`` about whole records and repeated text: an export's tasks left out (or read
as text without entities), texts whose records disagree, and sentences that occur again with other tags (a
Label Studio CONLL2003 export writes a sentence an annotation; any corpus may teach the same words two ways).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ner_app.text.annotations.model import DISAGREE, SKIPPED, UNANNOTATED
from ner_app.text.conll import Sentence
from ner_app.text.data_check import EXAMPLES, WARNING, Problem, SplitCounts


def record_problems(
    splits: Mapping[str, SplitCounts],
    sentences: Mapping[str, Sequence[Sentence]],
    where: Mapping[str, Sequence[str]],
) -> list[Problem]:
    """The warnings of each split's records (``SplitCounts.records``) and repeated sentences."""
    found = []
    for name, counts in splits.items():
        found += _record_problems(counts)
        twice = tagged_differently(sentences[name], where[name])
        if twice:
            found.append(
                Problem(
                    WARNING,
                    "sentences tagged differently",
                    name,
                    f"{len(twice)} sentences occur more than once with different tags: the same words taught two "
                    "ways (Label Studio's CONLL2003 export writes a sentence an annotation; its JSON and JSON-MIN "
                    "exports are read a text once)",
                    tuple(twice[:EXAMPLES]),
                )
            )
    return found


def tagged_differently(sentences: Sequence[Sentence], where: Sequence[str]) -> list[str]:
    """``FIRST and OTHER`` for each sentence whose words occur again with other tags (once a sentence)."""
    first: dict[tuple[str, ...], tuple[list[str], str]] = {}
    found: dict[tuple[str, ...], str] = {}
    for sentence, at in zip(sentences, where, strict=True):
        key = tuple(sentence.tokens)
        tags, place = first.setdefault(key, (sentence.tags, at))
        if tags != sentence.tags and key not in found:
            found[key] = f"{place} and {at}"
    return list(found.values())


def _record_problems(counts: SplitCounts) -> list[Problem]:
    """The warnings of an export's whole records: tasks left out (or trained as no entities), and texts in
    several records with different annotations."""
    found = []
    unannotated = counts.unannotated
    if unannotated:
        what = (
            f"{len(counts.records.get(SKIPPED, []))} skipped (every annotation cancelled), "
            f"{len(counts.records.get(UNANNOTATED, []))} not annotated"
        )
        if counts.keep_unannotated:
            kind = "tasks trained as no entities"
            message = (
                f"{len(unannotated)} Label Studio tasks without an annotation are read as text without entities "
                f"(--keep-unannotated): {what}; the tagger learns that the names in them are none"
            )
        else:
            kind = "tasks left out"
            message = (
                f"{len(unannotated)} Label Studio tasks without an annotation are left out: {what}; "
                "--keep-unannotated (data.keep_unannotated: true) reads them as text without entities"
            )
        found.append(Problem(WARNING, kind, counts.name, message, tuple(unannotated[:EXAMPLES])))
    disagree = counts.records.get(DISAGREE, [])
    if disagree:
        found.append(
            Problem(
                WARNING,
                "disagreeing records",
                counts.name,
                f"{len(disagree)} texts are in several records with different annotations; each is read once, "
                "from one of them (ground truth first, then --annotation)",
                tuple(disagree[:EXAMPLES]),
            )
        )
    return found
