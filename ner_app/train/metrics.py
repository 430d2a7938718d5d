"""``metrics.json``: the scores a training run leaves in its folder, as one typed record.

``train.py`` writes it with ``RunMetrics.write``; ``report`` and ``compare`` read it with ``RunMetrics.read``
(the typed reader of ``ner_app.records``), which checks every value and raises one ``NerAppError`` naming the
file and the key. Scores are in percent
(seqeval's default mode, which scores like conlleval). Keys this type does not know are ignored, so records
written by other versions still read.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import write_text
from ner_app.records import Reader, checked, read_field, read_json, read_record
from ner_app.train.corpus import EVALUATED

_SHA256 = re.compile(r"[0-9a-f]{64}")


MAX_METRICS_BYTES = 1 << 24  # metrics.json: scores per entity type, a few KB for CoNLL-2003


class MetricsError(NerAppError):
    """A metrics.json that is not the record of a training run, or holds a malformed value."""


class _MetricsReader(Reader):
    """metrics.json's wording: ``FILE: dev.per_type.PER.f1: expected ...``; keys of other versions skipped."""

    ignore_unknown = True

    def __init__(self, source: str) -> None:
        super().__init__(MetricsError, source)

    def error(self, key: str, msg: str) -> NerAppError:
        return MetricsError(f"{self.source}: {key}: {msg}" if key else f"{self.source}: {msg}")

    def not_a_mapping(self, key: str, value: Any) -> NerAppError:
        return self.error(key, f"expected a mapping, found {type(value).__name__}")

    def missing(self, key: str, prefix: str, names: Sequence[str], data: Mapping[str, Any]) -> NerAppError:
        return self.error(key, "missing (expected the scores train.py writes)")


def _number(value: Any, key: str, reader: Reader, low: float = -math.inf, high: float = math.inf) -> float:
    """``value``, a finite number within [low, high] (an int stays one, so a file reads back as written); an
    error naming ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise reader.error(key, f"expected a number, found {value!r:.40}")
    if isinstance(value, float) and not math.isfinite(value):
        raise reader.error(key, f"expected a finite number, found {value!r:.40}")
    if not low <= value <= high:
        bounds = f">= {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
        raise reader.error(key, f"expected a number {bounds}, found {value!r:.40}")
    return value


def _count(value: Any, key: str, reader: Reader) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise reader.error(key, f"expected a count (a whole number >= 0), found {value!r:.40}")
    return value


def _speed(value: Any, key: str, reader: Reader) -> float | None:
    return None if value is None else _number(value, key, reader, 0.0)


def _gamma(value: Any, key: str, reader: Reader) -> float:
    return _number(value, key, reader)


PERCENT = checked(lambda value, key, reader: _number(value, key, reader, 0.0, 100.0))


@dataclass(frozen=True)
class TypeScores:
    """Entity scores of one entity type; ``support``: the gold entities of that type."""

    precision: float = field(metadata=PERCENT)
    recall: float = field(metadata=PERCENT)
    f1: float = field(metadata=PERCENT)
    support: int = field(metadata=checked(_count))

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "support": self.support}


@dataclass(frozen=True)
class SplitScores:
    """Entity scores of one split, overall and per type, and the evaluation's speed (None in older records).
    F1 comes first: a file is read in field order, and the headline number's error is the one worth reading."""

    f1: float = field(metadata=PERCENT)
    precision: float = field(metadata=PERCENT)
    recall: float = field(metadata=PERCENT)
    per_type: dict[str, TypeScores]
    sentences_per_s: float | None = field(default=None, metadata=checked(_speed))

    @classmethod
    def of(cls, scores: Mapping[str, Any], sentences_per_s: float | None = None) -> SplitScores:
        """From ``text.scores.entity_scores``'s dict (checked like a file's)."""
        return read_record(
            cls, {**scores, "sentences_per_s": sentences_per_s}, _MetricsReader("entity scores")
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "per_type": {t: s.to_json() for t, s in self.per_type.items()},
        }
        if self.sentences_per_s is not None:
            out["sentences_per_s"] = self.sentences_per_s
        return out


MIX_PLACES = ("input", "output")  # where the tagger's k-th mix goes: [x_k; ELMo_k], then [h_k; ELMo_k^task]


def _weights(value: Any, key: str, reader: Reader) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise reader.error(key, "expected a list of layer weights")
    return tuple(_number(w, key, reader, 0.0, 1.0) for w in value)


def _place(value: Any, key: str, reader: Reader) -> str | None:
    if value is not None and value not in MIX_PLACES:
        raise reader.error(key, f"expected one of {', '.join(MIX_PLACES)}, found {value!r:.40}")
    return value


@dataclass(frozen=True)
class Mix:
    """One learned ELMo scalar mix: softmax(w) per biLM layer (summing to 1), gamma, and where it enters the
    tagger (``MIX_PLACES``; None in records written before the output mix existed: the input)."""

    softmax_w: tuple[float, ...] = field(metadata=checked(_weights))
    gamma: float = field(metadata=checked(_gamma))
    at: str | None = field(default=None, metadata=checked(_place))

    @classmethod
    def of(cls, learned: Mapping[str, Any], at: str | None = None) -> Mix:
        """From ``ScalarMix.learned()``'s dict (checked like a file's), placed ``at``."""
        return read_record(cls, {**learned, "at": at}, _MetricsReader("ELMo mix"))

    def place(self, index: int) -> str:
        """Where this mix enters the tagger: its own record, else its position."""
        return self.at or (MIX_PLACES[index] if index < len(MIX_PLACES) else f"mix {index}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"softmax_w": list(self.softmax_w), "gamma": self.gamma}
        if self.at is not None:
            out["at"] = self.at
        return out


def _mixes(value: Any, key: str, reader: Reader) -> tuple[Mix, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise reader.error(key, "expected a list of {softmax_w, gamma} mappings")
    return tuple(read_record(Mix, m, reader, f"{key}[{k}]") for k, m in enumerate(value))


def _fingerprint(value: Any, key: str, reader: Reader) -> str | None:
    if value is not None and not (isinstance(value, str) and _SHA256.fullmatch(value)):
        raise reader.error(key, f"expected 64 hex digits (a sha256), found {value!r:.40}")
    return value


@dataclass(frozen=True)
class PreviousDev:
    """A continued run's forgetting (``model.init_from`` with ``data.previous_dev``): the scores on the old
    model's dev file of the export it started from (``before``) and of the chosen checkpoint (``after``);
    ``types``: the export's entity types."""

    file: str
    types: tuple[str, ...]
    before: SplitScores
    after: SplitScores

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "types": list(self.types),
            "before": self.before.to_json(),
            "after": self.after.to_json(),
        }


@dataclass(frozen=True)
class RunCalibration:
    """The temperature fitted on dev at the end of training and the entity ECE before and after it, on dev and
    test (the reliability diagrams' bins are in ``calibration.json``)."""

    temperature: float
    dev_ece_before: float
    dev_ece_after: float
    test_ece_before: float
    test_ece_after: float

    @classmethod
    def of(cls, report: Mapping[str, Any]) -> RunCalibration:
        """From ``calibration.json``'s data (``train/calibration.py``)."""
        dev, test = report["dev"], report["test"]
        return cls(
            report["temperature"],
            dev["before"]["ece"],
            dev["after"]["ece"],
            test["before"]["ece"],
            test["after"]["ece"],
        )


@dataclass(frozen=True)
class RunMetrics:
    """A run's ``metrics.json``: dev and test scores of the chosen checkpoint, its ELMo mixes (None without
    ELMo), the fingerprint of the biLM it read (None without ELMo), the same two of a transformer feature and,
    for a run continued from an export with the old dev file given, the old types' scores before and after
    (None otherwise)."""

    dev: SplitScores
    test: SplitScores
    elmo_mix: tuple[Mix, ...] | None = field(default=None, metadata=checked(_mixes))
    bilm_fingerprint: str | None = field(default=None, metadata=checked(_fingerprint))
    # the transformer feature's mix and the fingerprint of its encoder's files (None without one)
    transformer_mix: tuple[Mix, ...] | None = field(default=None, metadata=checked(_mixes))
    transformer_fingerprint: str | None = field(default=None, metadata=checked(_fingerprint))
    previous_dev: PreviousDev | None = None
    calibration: RunCalibration | None = None  # None: a run without one (older, or no entity on dev)

    def split(self, name: str) -> SplitScores:
        """The scores of ``name`` ("dev" or "test")."""
        return {"dev": self.dev, "test": self.test}[name]

    @classmethod
    def from_json(cls, data: Any, where: str) -> RunMetrics:
        """The record held by parsed JSON ``data``; ``where`` (the file) starts every error message."""
        if not isinstance(data, dict) or not all(isinstance(data.get(s), dict) for s in EVALUATED):
            found = ", ".join(sorted(data)[:4]) if isinstance(data, dict) else type(data).__name__
            raise MetricsError(
                f"{where}: expected the dev and test scores of a train.py run, found {found or 'nothing'}"
            )
        reader = _MetricsReader(where)  # the mixes and the fingerprint first, as the file's layout checks go
        names = (
            "elmo_mix",
            "bilm_fingerprint",
            "transformer_mix",
            "transformer_fingerprint",
            "calibration",
            *EVALUATED,
            "previous_dev",
        )
        return cls(**{name: read_field(cls, name, data, reader) for name in names})

    @classmethod
    def read(cls, path: str | Path) -> RunMetrics:
        """The record in ``path``; one ``NerAppError`` naming the file (and the key) when it is not one."""
        path = Path(path)
        if not path.is_file():
            raise MissingFileError(f"{path}: not found (expected the metrics.json of a train.py run)")
        data = read_json(path, MAX_METRICS_BYTES, MetricsError)
        return cls.from_json(data, str(path))

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values, keys in the order the file holds them."""
        out: dict[str, Any] = {"dev": self.dev.to_json(), "test": self.test.to_json()}
        if self.elmo_mix is not None:
            out["elmo_mix"] = [m.to_json() for m in self.elmo_mix]
        if self.bilm_fingerprint is not None:
            out["bilm_fingerprint"] = self.bilm_fingerprint
        if self.transformer_mix is not None:
            out["transformer_mix"] = [m.to_json() for m in self.transformer_mix]
        if self.transformer_fingerprint is not None:
            out["transformer_fingerprint"] = self.transformer_fingerprint
        if self.previous_dev is not None:
            out["previous_dev"] = self.previous_dev.to_json()
        if self.calibration is not None:
            out["calibration"] = dataclasses.asdict(self.calibration)
        return out

    def write(self, path: str | Path) -> Path:
        """Write ``path`` atomically (2-space indented JSON, as train.py always wrote it)."""
        return write_text(path, json.dumps(self.to_json(), indent=2) + "\n")
