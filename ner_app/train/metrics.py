"""``metrics.json``: the scores a training run leaves in its folder, as one typed record.

``train.py`` writes it with ``RunMetrics.write``; ``report`` and ``compare`` read it with ``RunMetrics.read``,
which checks every value and raises one ``NerAppError`` naming the file and the key. Scores are in percent
(seqeval's default mode, which scores like conlleval). Keys this type does not know are ignored, so records
written by other versions still read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import read_json, write_text
from ner_app.train.corpus import EVALUATED

_SHA256 = re.compile(r"[0-9a-f]{64}")


MAX_METRICS_BYTES = 1 << 24  # metrics.json: scores per entity type, a few KB for CoNLL-2003


class MetricsError(NerAppError):
    """A metrics.json that is not the record of a training run, or holds a malformed value."""


def _number(value: Any, where: str, low: float = -math.inf, high: float = math.inf) -> float:
    """``value``, a finite number within [low, high] (an int stays one, so a file reads back as written); a
    ``MetricsError`` naming ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetricsError(f"{where}: expected a number, found {value!r:.40}")
    if isinstance(value, float) and not math.isfinite(value):
        raise MetricsError(f"{where}: expected a finite number, found {value!r:.40}")
    if not low <= value <= high:
        bounds = f">= {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
        raise MetricsError(f"{where}: expected a number {bounds}, found {value!r:.40}")
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MetricsError(f"{where}: expected a count (a whole number >= 0), found {value!r:.40}")
    return value


def _mapping(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise MetricsError(f"{where}: expected a mapping, found {type(data).__name__}")
    return data


def _key(data: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise MetricsError(f"{where}.{key}: missing (expected the scores train.py writes)")
    return data[key]


def _percent(data: Mapping[str, Any], key: str, where: str) -> float:
    return _number(_key(data, key, where), f"{where}.{key}", 0.0, 100.0)


@dataclass(frozen=True)
class TypeScores:
    """Entity scores of one entity type; ``support``: the gold entities of that type."""

    precision: float
    recall: float
    f1: float
    support: int

    @classmethod
    def from_json(cls, data: Any, where: str) -> TypeScores:
        data = _mapping(data, where)
        return cls(_percent(data, "precision", where), _percent(data, "recall", where),
                   _percent(data, "f1", where), _count(_key(data, "support", where), f"{where}.support"))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "support": self.support}


@dataclass(frozen=True)
class SplitScores:
    """Entity scores of one split, overall and per type, and the evaluation's speed (None in older records)."""

    precision: float
    recall: float
    f1: float
    per_type: dict[str, TypeScores] = field(default_factory=dict)
    sentences_per_s: float | None = None

    @classmethod
    def of(cls, scores: Mapping[str, Any], sentences_per_s: float | None = None) -> SplitScores:
        """From ``text.scores.entity_scores``'s dict (checked like a file's)."""
        return cls.from_json({**scores, "sentences_per_s": sentences_per_s}, "entity scores")

    @classmethod
    def from_json(cls, data: Any, where: str) -> SplitScores:
        data = _mapping(data, where)
        f1 = _percent(data, "f1", where)  # the headline number first: its error is the one worth reading
        precision, recall = _percent(data, "precision", where), _percent(data, "recall", where)
        types = _mapping(_key(data, "per_type", where), f"{where}.per_type")
        per_type = {str(t): TypeScores.from_json(v, f"{where}.per_type.{t}") for t, v in types.items()}
        speed = data.get("sentences_per_s")
        return cls(precision, recall, f1, per_type,
                   None if speed is None else _number(speed, f"{where}.sentences_per_s", 0.0))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                               "per_type": {t: s.to_json() for t, s in self.per_type.items()}}  # fmt: skip
        if self.sentences_per_s is not None:
            out["sentences_per_s"] = self.sentences_per_s
        return out


MIX_PLACES = ("input", "output")  # where the tagger's k-th mix goes: [x_k; ELMo_k], then [h_k; ELMo_k^task]


@dataclass(frozen=True)
class Mix:
    """One learned ELMo scalar mix: softmax(w) per biLM layer (summing to 1), gamma, and where it enters the
    tagger (``MIX_PLACES``; None in records written before the output mix existed: the input)."""

    softmax_w: tuple[float, ...]
    gamma: float
    at: str | None = None

    @classmethod
    def of(cls, learned: Mapping[str, Any], at: str | None = None) -> Mix:
        """From ``ScalarMix.learned()``'s dict (checked like a file's), placed ``at``."""
        return cls.from_json({**learned, "at": at}, "ELMo mix")

    def place(self, index: int) -> str:
        """Where this mix enters the tagger: its own record, else its position."""
        return self.at or (MIX_PLACES[index] if index < len(MIX_PLACES) else f"mix {index}")

    @classmethod
    def from_json(cls, data: Any, where: str) -> Mix:
        weights = data.get("softmax_w")
        if not isinstance(weights, list) or not weights:
            raise MetricsError(f"{where}.softmax_w: expected a list of layer weights")
        at = data.get("at")
        if at is not None and at not in MIX_PLACES:
            raise MetricsError(f"{where}.at: expected one of {', '.join(MIX_PLACES)}, found {at!r:.40}")
        return cls(tuple(_number(w, f"{where}.softmax_w", 0.0, 1.0) for w in weights),
                   _number(data.get("gamma"), f"{where}.gamma"), at)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"softmax_w": list(self.softmax_w), "gamma": self.gamma}
        if self.at is not None:
            out["at"] = self.at
        return out


def _mixes(value: Any, where: str) -> tuple[Mix, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise MetricsError(f"{where}: expected a list of {{softmax_w, gamma}} mappings")
    return tuple(Mix.from_json(m, f"{where}[{k}]") for k, m in enumerate(value))


def _fingerprint(value: Any, where: str) -> str | None:
    if value is not None and not (isinstance(value, str) and _SHA256.fullmatch(value)):
        raise MetricsError(f"{where}: expected 64 hex digits (a sha256), found {value!r:.40}")
    return value


@dataclass(frozen=True)
class RunMetrics:
    """A run's ``metrics.json``: dev and test scores of the chosen checkpoint, its ELMo mixes (None without
    ELMo) and the fingerprint of the biLM it read (None without ELMo)."""

    dev: SplitScores
    test: SplitScores
    elmo_mix: tuple[Mix, ...] | None = None
    bilm_fingerprint: str | None = None

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
        mixes = _mixes(data.get("elmo_mix"), f"{where}: elmo_mix")
        bilm = _fingerprint(data.get("bilm_fingerprint"), f"{where}: bilm_fingerprint")
        dev, test = (SplitScores.from_json(data[s], f"{where}: {s}") for s in EVALUATED)
        return cls(dev, test, mixes, bilm)

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
        return out

    def write(self, path: str | Path) -> Path:
        """Write ``path`` atomically (2-space indented JSON, as train.py always wrote it)."""
        return write_text(path, json.dumps(self.to_json(), indent=2) + "\n")
