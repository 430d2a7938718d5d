"""The manifest of an ONNX export (``onnx.json``): a typed record (``OnnxManifest``, read by
``ner_app.records``: a key of the wrong type is one line naming it), under its own checksum, and every field
checked before a graph runs, so that an edited manifest is refused at load in one line instead of tagging
wrongly or failing at the first prediction. Torch-free, like ``onnx_predictor``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ner_app.errors import NerAppError
from ner_app.records import Reader, canonical_sha256, checked, read_record
from ner_app.text.tags import SCHEMES, is_tag, normalize_scheme, scheme_tags, split_tag
from ner_app.text.vocab import Vocab

MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0  # tagger/spec.py's bounds (a test keeps the two equal)
MANIFEST_SUM = "manifest_sha256"  # the key holding the sha256 of every other key (``canonical_sha256``)
MAX_WORD_CHARS = 1000  # a token's characters the char CNN may see: far above what any export uses (30)

# How char_mapper.token_to_ids turns a token into the biLM's 50 char ids (ids shifted by 1, 0 is padding):
# begin-of-word 259, end-of-word 260, pad 261; <S> and </S> are one char each (257, 258) between the markers.
_BOW, _EOW, _PAD, _WIDTH = 259, 260, 261, 50
ELMO_CHAR_LAYOUT: dict[str, Any] = {
    "max_chars": _WIDTH,
    "begin_word": _BOW,
    "end_word": _EOW,
    "pad": _PAD,
    "shift": 1,
    "bos_token": "<S>",
    "eos_token": "</S>",
    "bos": [_BOW, 257, _EOW] + [_PAD] * (_WIDTH - 3),
    "eos": [_BOW, 258, _EOW] + [_PAD] * (_WIDTH - 3),
}


class OnnxModelError(NerAppError):
    """A folder that is not a readable ONNX export, or onnxruntime missing."""


class _ManifestReader(Reader):
    """onnx.json's wording: ``FILE: key 'spec.scheme': expected str, found int 3; export the model again``.
    Keys the predictor does not read (the sizes of the tagger's layers, the biLM's files, opset, torch) are
    skipped: they are still under the manifest's checksum."""

    ignore_unknown = True

    def __init__(self, source: str) -> None:
        super().__init__(OnnxModelError, source)

    def error(self, key: str, msg: str) -> NerAppError:
        return super().error(key, f"{msg}; export the model again")

    def missing(self, key: str, prefix: str, names: Sequence[str], data: Mapping[str, Any]) -> NerAppError:
        return self.error(key, "missing")


@dataclass(frozen=True)
class ManifestVocab:
    """A vocabulary as the spec writes it: its entries without the specials, in id order."""

    tokens: tuple[str, ...]
    specials: bool
    lowercase: bool

    def build(self) -> Vocab:
        return Vocab(self.tokens, specials=self.specials, lowercase=self.lowercase)


@dataclass(frozen=True)
class ManifestVocabs:
    """The spec's vocabularies the predictor encodes with and decodes to."""

    words: ManifestVocab
    chars: ManifestVocab
    tags: ManifestVocab


@dataclass(frozen=True)
class CharWidth:
    """Of the tagger's sizes, the one the predictor checks: the char CNN's widest filter."""

    char_width: int


@dataclass(frozen=True)
class ManifestCalibration:
    """Of the spec's calibration record, what scores use: the temperature every CRF potential is divided by."""

    temperature: float


@dataclass(frozen=True)
class ManifestSpec:
    """What the predictor reads of the tagger spec (``TaggerSpec.to_json``): vocabularies, schemes, the
    characters of a token the char CNN sees."""

    vocab: ManifestVocabs
    scheme: str
    source_scheme: str
    max_word_chars: int
    model: CharWidth
    calibration: ManifestCalibration | None = None  # None: uncalibrated (an export made before calibration)


@dataclass(frozen=True)
class Graphs:
    """The ONNX files: the tagger's, and the biLM's (None without ELMo)."""

    tagger: str
    bilm: str | None = None


@dataclass(frozen=True)
class OnnxManifest:
    """``onnx.json``: the format, the spec, the graphs and the CRF's file, the char layout of the biLM graph
    (None without ELMo; kept as written, ``check_elmo_chars`` reads it once the checksum holds), every file's
    sha256 and the manifest's own (``MANIFEST_SUM``)."""

    format: str
    spec: ManifestSpec
    graphs: Graphs
    crf: str
    sha256: dict[str, str]
    elmo_chars: Any = field(default=None, metadata=checked(lambda value, key, reader: value))
    manifest_sha256: str | None = None
    quantize: str | None = None  # "int8": graphs with int8 weights (export --onnx --quantize int8)

    @classmethod
    def from_json(cls, data: Any, source: str) -> OnnxManifest:
        """The record of parsed JSON ``data``; one ``OnnxModelError`` naming ``source`` and the key otherwise."""
        return read_record(cls, data, _ManifestReader(source))


def with_checksum(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` with ``MANIFEST_SUM``: what the exporter writes."""
    return {**manifest, MANIFEST_SUM: canonical_sha256(manifest)}


def check_checksum(manifest: dict[str, Any], source: str) -> None:
    recorded = manifest.get(MANIFEST_SUM)
    if recorded is None:
        raise OnnxModelError(
            f"{source}: no {MANIFEST_SUM} (written by an older version, or edited); export the model again"
        )
    body = {key: value for key, value in manifest.items() if key != MANIFEST_SUM}
    if recorded != canonical_sha256(body):
        raise OnnxModelError(
            f"{source}: changed after export ({MANIFEST_SUM} differs: its tags, sizes or char layout were "
            "edited); export the model again"
        )


def check_spec(
    tags: list[str], scheme: str, source_scheme: str, max_word_chars: int, char_width: Any, source: str
) -> None:
    """The tag vocabulary is every tag of ``scheme`` for its types, in the order training builds it (a swap of
    two types is refused); the schemes are known; ``max_word_chars`` covers the char CNN's width."""
    for key, value in (("spec.scheme", scheme), ("spec.source_scheme", source_scheme)):
        try:
            normalize_scheme(value)
        except ValueError:
            raise OnnxModelError(
                f"{source}: {key} {value!r} is not a scheme ({', '.join(SCHEMES)})"
            ) from None
    if not all(isinstance(t, str) and is_tag(t) for t in tags):
        bad = next(t for t in tags if not (isinstance(t, str) and is_tag(t)))
        raise OnnxModelError(f"{source}: spec.vocab.tags holds {str(bad)[:40]!r}, which is no tag")
    expected = scheme_tags(scheme, {split_tag(t)[1] for t in tags if t != "O"})
    if tags != expected:
        raise OnnxModelError(
            f"{source}: spec.vocab.tags is not the {scheme} tag list training builds (its {len(tags)} tags are "
            "reordered, repeated or incomplete); export the model again"
        )
    width = char_width if isinstance(char_width, int) and not isinstance(char_width, bool) else 1
    if not width <= max_word_chars <= MAX_WORD_CHARS:
        raise OnnxModelError(
            f"{source}: spec.max_word_chars {max_word_chars} is outside [{width}, {MAX_WORD_CHARS}] (the char "
            "CNN's width to the largest a token may have); export the model again"
        )


def check_elmo_chars(layout: Any, source: str) -> None:
    """The layout must be the one the biLM graph was traced with: any other is refused (one key named)."""
    if not isinstance(layout, dict):
        raise OnnxModelError(
            f"{source}: key 'elmo_chars' is missing or not an object; export the model again"
        )
    for key, value in ELMO_CHAR_LAYOUT.items():
        if layout.get(key) != value or type(layout.get(key)) is not type(value):
            raise OnnxModelError(
                f"{source}: elmo_chars.{key} is {str(layout.get(key))[:40]}, expected {str(value)[:40]} (the "
                "char ids the biLM graph reads); export the model again"
            )
    extra = sorted(set(layout) - set(ELMO_CHAR_LAYOUT))
    if extra:
        raise OnnxModelError(f"{source}: elmo_chars has unknown keys {extra[:3]}; export the model again")


def check_temperature(temperature: float, source: str) -> None:
    """The calibration's temperature is a finite number in the bounds the tagger spec reads."""
    if not (math.isfinite(temperature) and MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE):
        raise OnnxModelError(
            f"{source}: spec.calibration.temperature {temperature} is outside [{MIN_TEMPERATURE}, "
            f"{MAX_TEMPERATURE}]; export the model again"
        )


def check_crf(arrays: tuple[np.ndarray, ...], k: int, source: str) -> None:
    """(start (K,), transitions (K, K), end (K,)), every entry finite or the export's ``FORBIDDEN`` score."""
    if [a.shape for a in arrays] != [(k,), (k, k), (k,)]:
        raise OnnxModelError(f"{source}: CRF scores of the wrong shape for {k} tags; export the model again")
    for name, array in zip(("start", "transitions", "end"), arrays, strict=True):
        if not np.isfinite(array).all():
            bad = float(array[~np.isfinite(array)].flat[0])
            raise OnnxModelError(
                f"{source}: CRF {name} scores hold {'NaN' if math.isnan(bad) else bad}; export the model again"
            )
