"""A run that continues an export (``model.init_from``): the tagger it starts from, and the forgetting it
measures on the old model's dev file (``data.previous_dev``): each old type's F1 before and after.

The mapping of old weights to new rows is ``ner_app.tagger.init_from``'s; here it meets the config and files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ner_app.errors import NerAppError
from ner_app.tagger.decode_all import decode_sentences
from ner_app.tagger.export import load_export
from ner_app.tagger.init_from import carried_state, check_compatible, extended_spec
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.annotations.splits import read_split
from ner_app.text.conll import require_annotated
from ner_app.text.scores import entity_scores
from ner_app.text.tags import convert, detect_scheme, entity_types
from ner_app.train.early_checks import check_init_from
from ner_app.train.metrics import PreviousDev, SplitScores

log = logging.getLogger("ner_app")


@dataclass(frozen=True)
class StartingPoint:
    """The export a run continues: its tagger (eval mode, on the CPU), its spec and its folder."""

    tagger: BiLstmCrfTagger
    spec: TaggerSpec
    source: str

    @classmethod
    def load(cls, init_from: str) -> StartingPoint:
        check_init_from(init_from, None)
        tagger, spec = load_export(init_from)
        return cls(tagger, spec, str(init_from))

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(entity_types(self.spec.tags.tokens))


def continue_from(
    start: StartingPoint, fresh: TaggerSpec, build: Callable[[TaggerSpec], BiLstmCrfTagger]
) -> tuple[BiLstmCrfTagger, TaggerSpec]:
    """The tagger and spec of a run whose own data gives ``fresh``: the export's vocabularies extended by the
    data's, a tagger ``build`` initialises as a fresh run would, then every old weight copied in."""
    check_compatible(start.spec, fresh, start.source)
    spec = extended_spec(start.spec, fresh)
    tagger = build(spec)
    state = carried_state(
        start.tagger.trained_state(), start.spec, tagger.trained_state(), spec, start.source
    )
    tagger.load_trained_state(state, start.source)
    new_types = sorted(set(entity_types(spec.tags.tokens)) - set(start.types))
    log.info(
        "continuing %s: %d of %d words, %d of %d tags from the export; new types: %s; data in %s, trained in %s",
        start.source,
        len(start.spec.word_vocab),
        len(spec.word_vocab),
        len(start.spec.tag_vocab),
        len(spec.tag_vocab),
        ", ".join(new_types) or "none",
        spec.source_scheme,
        spec.scheme,
    )
    return tagger, spec


@dataclass(frozen=True)
class OldDev:
    """The old model's dev file: its sentences, gold tags (in the file's scheme) and document ids."""

    file: str
    tokens: list[list[str]]
    tags: list[list[str]]
    docs: list[int]

    @classmethod
    def read(cls, path: str, tag_column: int) -> OldDev:
        """The file in its own format (detected as ``data.format: null`` detects one; CoNLL: ``tag_column``)."""
        sentences = [s for s in read_split(Path(path), None, tag_column) if s.tokens]
        if not sentences:
            raise NerAppError(f"data.previous_dev: {path}: no sentences (expected the old model's dev file)")
        require_annotated(sentences, path)  # scored: every gold tag must be known
        return cls(
            path, [s.tokens for s in sentences], [s.tags for s in sentences], [s.doc for s in sentences]
        )

    def score(self, tagger: BiLstmCrfTagger, spec: TaggerSpec, batch_size: int) -> SplitScores:
        """Entity scores of ``tagger`` on this file, its predictions written in the file's scheme."""
        predicted = decode_sentences(tagger, spec, self.tokens, self.docs, batch_size)
        scheme = detect_scheme(self.tags)
        return SplitScores.of(entity_scores(self.tags, [convert(p, spec.scheme, scheme) for p in predicted]))


def forgetting(old: OldDev, types: tuple[str, ...], before: SplitScores, after: SplitScores) -> PreviousDev:
    """The record metrics.json keeps of the old ``types``' scores; the console gets its table."""
    record = PreviousDev(old.file, types, before, after)
    print(f"\nOld types on {old.file} (F1, %): before (the export) -> after (this run)")
    for t in record.types:
        scores = [s.per_type.get(t) for s in (before, after)]
        shown = [f"{s.f1:6.2f}" if s is not None else "     -" for s in scores]
        support = max((s.support for s in scores if s is not None), default=0)
        print(f"  {t:<12} {shown[0]} -> {shown[1]}   ({support} entities)")
    return record
