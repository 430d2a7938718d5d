"""``TaggerSpec``: everything that defines a trained tagger except its weights, as one frozen value.

It is built once from the config and the training data (``TaggerSpec.from_training_data``) and is the single
input of the model builder (``BiLstmCrfTagger.from_spec``), of the batch encoding, of export and of predict.
``to_json``/``from_json`` round-trip it exactly; ``from_json`` also reads the untyped ``tagger.json`` of
exports written before it existed (format ``ner_app.tagger/1``) and refuses anything else in one line that
names the key. See docs/architecture.md for how the spec travels through a run.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ner_app.records import Reader, hints, read_value
from ner_app.tagger.features import FeatureSpec, feature_class
from ner_app.tagger.features.base import SpecError
from ner_app.tagger.features.chars import CharsRef
from ner_app.tagger.features.elmo import ElmoRef
from ner_app.tagger.features.words import WordsRef
from ner_app.text.tags import SCHEMES, TRAINING_SCHEMES, convert
from ner_app.text.vocab import Vocab, build_char_vocab, build_tag_vocab, build_word_vocab

SPEC_FORMAT = "ner_app.tagger/3"
# /1 and /2: the input was always words and chars, and ELMo when "elmo" is not null (/1: untyped, as /2)
READABLE_FORMATS = ("ner_app.tagger/1", "ner_app.tagger/2", SPEC_FORMAT)
BASE_FEATURES: tuple[FeatureSpec, ...] = (WordsRef(), CharsRef())  # what every tagger before /3 had


@dataclass(frozen=True)
class TaggerSizes:
    """The tagger's size arguments (``BiLstmCrfTagger``'s keyword arguments of the same names)."""

    word_dim: int
    char_dim: int
    char_filters: int
    char_width: int
    lstm_hidden: int
    lstm_layers: int
    dropout: float


@dataclass(frozen=True)
class VocabSpec:
    """A vocabulary as data: its entries without the specials, in id order (``Vocab.to_dict``'s layout)."""

    tokens: tuple[str, ...]
    specials: bool
    lowercase: bool

    @classmethod
    def of(cls, vocab: Vocab) -> VocabSpec:
        d = vocab.to_dict()
        return cls(tuple(d["tokens"]), d["specials"], d["lowercase"])

    def build(self) -> Vocab:
        return Vocab(self.tokens, specials=self.specials, lowercase=self.lowercase)


@dataclass(frozen=True)
class Calibration:
    """Temperature scaling of the tagger's probabilities (docs/calibration.md): every CRF potential is divided
    by ``temperature`` before scores are computed (the best path does not change), and what it was fitted on:
    the file, its predicted entities and their expected calibration error (ECE) and log loss before and after.
    """

    temperature: float
    fitted_on: str
    entities: int
    ece_before: float
    ece_after: float
    log_loss_before: float
    log_loss_after: float
    method: str = "temperature"


MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0  # far outside what a fit finds (0.05 to 20): a bound on edits


@dataclass(frozen=True)
class TaggerSpec:
    """Sizes, vocabularies, tag schemes (training ``scheme``, ``source_scheme`` of the data files) and the input
    features (``tagger/features/``), in the order the tagger concatenates them."""

    sizes: TaggerSizes
    words: VocabSpec
    num_trainable_words: int  # word ids below this are train words; the rest are frozen pretrained words
    chars: VocabSpec
    tags: VocabSpec
    scheme: str
    source_scheme: str
    max_word_chars: int
    features: tuple[FeatureSpec, ...]
    calibration: Calibration | None = None  # None: uncalibrated (temperature 1), as exports before it

    # ------------------------------------------------------------------------------ building
    @classmethod
    def from_training_data(
        cls,
        sizes: TaggerSizes,
        train_tokens: Sequence[Sequence[str]],
        train_tags: Sequence[Sequence[str]],
        scheme: str,
        source_scheme: str,
        lowercase: bool = True,
        min_word_count: int = 1,
        pretrained_words: Iterable[str] = (),
        max_word_chars: int = 30,
        elmo: ElmoRef | None = None,
        features: Sequence[FeatureSpec] | None = None,
    ) -> TaggerSpec:
        """Vocabularies from the training split (tags already in ``scheme``); ``pretrained_words`` (e.g.
        GloVe's) unseen in train follow the train words as frozen entries, so they are not <unk>. ``features``
        (default: words, chars and ``elmo`` when given) in the order the tagger concatenates them."""
        if features is None:
            features = (*BASE_FEATURES, *([elmo] if elmo is not None else []))
        words = build_word_vocab(train_tokens, lowercase, min_word_count)
        known = set(words.itos)
        extra = [w for w in dict.fromkeys(words.normalize(w) for w in pretrained_words) if w not in known]
        entries = tuple(words.itos[2:]) + tuple(extra)
        return cls(
            sizes=sizes,
            words=VocabSpec(entries, True, lowercase),
            num_trainable_words=len(words),
            chars=VocabSpec.of(build_char_vocab(train_tokens)),
            tags=VocabSpec.of(build_tag_vocab(train_tags, scheme)),
            scheme=scheme,
            source_scheme=source_scheme,
            max_word_chars=max_word_chars,
            features=tuple(features),
        )

    # ------------------------------------------------------------------------------ derived values
    def feature(self, name: str) -> FeatureSpec | None:
        """The spec part of the input feature ``name``; None when the tagger has none of that name."""
        return next((f for f in self.features if f.name == name), None)

    @property
    def elmo(self) -> ElmoRef | None:
        """The ELMo feature's spec part (None without it): a compatibility alias of ``feature("elmo")``."""
        found = self.feature("elmo")
        return found if isinstance(found, ElmoRef) else None

    @functools.cached_property
    def word_vocab(self) -> Vocab:
        return self.words.build()

    @functools.cached_property
    def char_vocab(self) -> Vocab:
        return self.chars.build()

    @functools.cached_property
    def tag_vocab(self) -> Vocab:
        return self.tags.build()

    def decode_tags(
        self, tag_ids: torch.Tensor | Sequence[Sequence[int]], mask: torch.Tensor
    ) -> list[list[str]]:
        """Tag strings (training scheme) of ids (B, T) or of per-sentence id lists, cut to the mask (B, T)."""
        lengths = mask.sum(dim=1).tolist()
        rows = tag_ids.tolist() if isinstance(tag_ids, torch.Tensor) else tag_ids
        return [self.tag_vocab.decode(row[:n]) for row, n in zip(rows, lengths, strict=True)]

    def to_source_scheme(self, tags: Sequence[Sequence[str]]) -> list[list[str]]:
        """Tag sequences of the training scheme in the scheme of the data files (IOB1 for CoNLL-2003)."""
        return [convert(t, self.scheme, self.source_scheme) for t in tags]

    # ------------------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (``from_json`` inverts it exactly)."""

        def vocab(v: VocabSpec) -> dict[str, Any]:
            return {"tokens": list(v.tokens), "specials": v.specials, "lowercase": v.lowercase}

        return {
            "format": SPEC_FORMAT,
            "model": dataclasses.asdict(self.sizes),
            "features": [f.to_json() for f in self.features],
            "vocab": {
                "words": vocab(self.words),
                "num_trainable_words": self.num_trainable_words,
                "chars": vocab(self.chars),
                "tags": vocab(self.tags),
            },
            "scheme": self.scheme,
            "source_scheme": self.source_scheme,
            "max_word_chars": self.max_word_chars,
            **({"calibration": dataclasses.asdict(self.calibration)} if self.calibration is not None else {}),
        }

    @property
    def temperature(self) -> float:
        """The CRF's temperature: the calibration's, 1.0 without one."""
        return 1.0 if self.calibration is None else self.calibration.temperature

    @classmethod
    def from_json(cls, data: Any, source: str = "tagger spec") -> TaggerSpec:
        """Read ``to_json``'s output, or an older export's ``tagger.json``; ``SpecError`` names what is wrong."""
        if not isinstance(data, Mapping):
            raise SpecError(f"{source}: expected a JSON object, found {type(data).__name__}")
        fmt = data.get("format")
        if fmt not in READABLE_FORMATS:
            raise SpecError(
                f"{source}: tagger spec format {fmt!r} is not one this version reads "
                f"({', '.join(READABLE_FORMATS)}); export the model again with this version"
            )
        vocab = _object(data, "vocab", source)
        reader = Reader(SpecError, source)
        flat = {
            "sizes": data.get("model"),
            "words": vocab.get("words"),
            "num_trainable_words": vocab.get("num_trainable_words"),
            "chars": vocab.get("chars"),
            "tags": vocab.get("tags"),
            "scheme": data.get("scheme"),
            "source_scheme": data.get("source_scheme"),
            "max_word_chars": data.get("max_word_chars"),
            "calibration": data.get("calibration"),
        }
        where = {
            "sizes": "model",
            "words": "vocab.words",
            "chars": "vocab.chars",
            "tags": "vocab.tags",
            "num_trainable_words": "vocab.num_trainable_words",
        }
        values = {
            name: read_value(hint, flat[name], where.get(name, name), reader)
            for name, hint in hints(cls).items()
            if name != "features"
        }
        spec = cls(**values, features=_read_features(data, fmt, reader))
        for key, value, names in (
            ("scheme", spec.scheme, TRAINING_SCHEMES),
            ("source_scheme", spec.source_scheme, tuple(SCHEMES)),
        ):
            if value not in names:  # the tag grammar's names: a tagger is trained in, and converts to, these
                raise SpecError(f"{source}: key '{key}': expected one of {', '.join(names)}, found {value!r}")
        for i, f in enumerate(spec.features):
            problem = f.problem("elmo" if fmt != SPEC_FORMAT else f"features[{i}]")
            if problem:
                raise SpecError(f"{source}: {problem}")
        c = spec.calibration
        if c is not None and not (
            math.isfinite(c.temperature) and MIN_TEMPERATURE <= c.temperature <= MAX_TEMPERATURE
        ):
            raise SpecError(
                f"{source}: key 'calibration.temperature': expected a number in [{MIN_TEMPERATURE}, "
                f"{MAX_TEMPERATURE}], found {c.temperature}"
            )
        # the vocabulary's own index finds repeats (it keeps the first): no second set of 400k words
        entries = len(spec.words.tokens) + (2 if spec.words.specials else 0)
        if len(spec.word_vocab) != entries or not 0 < spec.num_trainable_words <= len(spec.word_vocab):
            raise SpecError(
                f"{source}: vocab.words has duplicates or vocab.num_trainable_words is out of range"
            )
        return spec


def frozen_fingerprints(data: Any) -> dict[str, str]:
    """The fingerprints of the frozen encoders a spec's JSON (``to_json``'s, of any readable format) names, by
    feature, read without building the spec (a checkpoint's: its 400k words are not needed for this)."""
    if not isinstance(data, Mapping):
        return {}
    entries: list[Mapping[str, Any]]
    if data.get("format") != SPEC_FORMAT:  # /1, /2: ELMo's entry
        entries = [{**data["elmo"], "name": "elmo"}] if isinstance(data.get("elmo"), Mapping) else []
    else:
        entries = [e for e in data.get("features") or [] if isinstance(e, Mapping)]
    return {str(e.get("name")): e["fingerprint"] for e in entries if isinstance(e.get("fingerprint"), str)}


def _read_features(data: Mapping[str, Any], fmt: str, reader: Reader) -> tuple[FeatureSpec, ...]:
    """The input features of a ``tagger.json``: its ``features`` list (/3), or what /1 and /2 implied."""
    if fmt != SPEC_FORMAT:
        elmo = read_value(ElmoRef | None, data.get("elmo"), "elmo", reader)
        return (*BASE_FEATURES, *([elmo] if elmo is not None else []))
    if "elmo" in data:
        raise reader.error("elmo", "not a key of this format (ELMo is an entry of 'features')")
    entries = data.get("features")
    if not isinstance(entries, list) or not entries:
        raise reader.error(
            "features", f"expected a non-empty list of input features, found {type(entries).__name__}"
        )
    features: list[FeatureSpec] = []
    for i, entry in enumerate(entries):
        where = f"features[{i}]"
        if not isinstance(entry, Mapping):
            raise reader.not_a_mapping(where, entry)
        cls = feature_class(entry.get("name"), f"{reader.source_of(where)}: key '{where}.name'", SpecError)
        feature = cls.read(entry, reader, where)
        if any(f.name == feature.name for f in features):
            raise reader.error(f"{where}.name", f"the input feature {feature.name!r} is listed twice")
        features.append(feature)
    return tuple(features)


def _object(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise SpecError(f"{source}: key '{key}': expected an object, found {type(value).__name__}")
    return value
