"""Pretraining's metrics, typed: held-out perplexities and the record ``metrics.json`` holds, written by
``PretrainMetrics.save`` and read back by ``PretrainMetrics.read`` (``ner_app.records``: one line naming the
file and the key for a malformed file)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict

from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import write_text
from ner_app.records import Reader, checked, found, hints, read_json, read_record, read_value

METRICS_FILE = "metrics.json"
MAX_METRICS_BYTES = 1 << 24  # a few held-out files' perplexities: a few KB


class PretrainMetricsError(NerAppError):
    """A pretraining ``metrics.json`` that is not the record a pretraining run writes."""


class _MetricsReader(Reader):
    """The wording of a pretraining metrics.json: ``FILE: key 'heldout.h.txt.mean': expected ...``; a missing
    key is named."""

    def __init__(self, source: str) -> None:
        super().__init__(PretrainMetricsError, source)

    def missing(self, key: str, prefix: str, names: Sequence[str], data: Mapping[str, Any]) -> NerAppError:
        return self.error(key, "missing (expected the record a pretraining run writes)")


class Perplexity(TypedDict):
    """Exact perplexity of held-out text: per direction, their mean (exp of the mean NLL, as bilm-tf reports
    it), and how many tokens each direction predicted."""

    forward: float
    backward: float
    mean: float
    predicted_tokens: int


@dataclass(frozen=True)
class HeldoutScores:
    """One held-out file scored in every context; ``context`` is the first, whose numbers are also shown flat."""

    path: str
    sentences: int
    documents: int | None  # None in records written before document context (sentences were read alone)
    context: str
    contexts: dict[str, Perplexity]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sentences": self.sentences,
            "documents": self.documents,
            "context": self.context,
            **self.contexts[self.context],
            "contexts": self.contexts,
        }

    @classmethod
    def from_json(cls, data: Any, key: str, reader: Reader) -> HeldoutScores:
        """The scores of mapping ``data`` (at dotted ``key``): the first context's numbers, shown flat beside
        ``contexts``, must be that context's."""
        flat = hints(Perplexity)
        if not isinstance(data, dict):
            raise reader.not_a_mapping(key, data)
        if "contexts" not in data and "context" not in data:  # written before contexts: one, sentence
            shown = {k: v for k, v in data.items() if k in flat}
            data = {"documents": None, **data, "context": "sentence", "contexts": {"sentence": shown}}
        scores = read_record(cls, {k: v for k, v in data.items() if k not in flat}, reader, key)
        if scores.context not in scores.contexts:
            known = ", ".join(sorted(scores.contexts)) or "none"
            raise reader.error(
                f"{key}.context", f"expected one of the contexts ({known}), found {found(scores.context)}"
            )
        shown = read_value(Perplexity, {k: v for k, v in data.items() if k in flat}, key, reader)
        expected: dict[str, Any] = dict(scores.contexts[scores.context])
        for name, value in shown.items():
            if value != expected[name]:
                raise reader.error(
                    f"{key}.{name}",
                    f"expected {expected[name]} (its {scores.context} context's), found {found(value)}",
                )
        return scores


def _heldout(value: Any, key: str, reader: Reader) -> dict[str, HeldoutScores]:
    if not isinstance(value, dict):
        raise reader.not_a_mapping(key, value)
    return {
        str(name): HeldoutScores.from_json(scores, f"{key}.{name}", reader) for name, scores in value.items()
    }


@dataclass(frozen=True)
class PretrainMetrics:
    """``metrics.json`` of a pretraining run: steps, passes over the corpus, stream tokens per second (a step
    reads B x T tokens in each direction on every process; None when no step was timed), and every held-out
    file's perplexities by file name."""

    steps: int
    epochs: float
    processes: int
    train_tokens_per_s: float | None
    train_tokens_timed: int
    vocab_size: int
    parameters: int
    exported_step: int
    heldout: dict[str, HeldoutScores] = field(metadata=checked(_heldout))

    @classmethod
    def from_json(cls, data: Any, where: str) -> PretrainMetrics:
        """The record held by parsed JSON ``data``; ``where`` (the file) starts every error message. A record
        written before these keys existed (the shipped news biLM's) reads with one process and its last step
        exported."""
        if isinstance(data, dict) and not {"processes", "exported_step"} & set(data):
            data = {**data, "processes": 1, "exported_step": data.get("steps")}
        return read_record(cls, data, _MetricsReader(where))

    @classmethod
    def read(cls, path: str | Path) -> PretrainMetrics:
        """The record in ``path`` (a run folder's ``metrics.json``); one ``NerAppError`` naming the file (and the
        key) when it is not one."""
        path = Path(path)
        if not path.is_file():
            raise MissingFileError(f"{path}: not found (expected the metrics.json of a pretraining run)")
        data = read_json(path, MAX_METRICS_BYTES, PretrainMetricsError, "a pretraining metrics.json")
        return cls.from_json(data, str(path))

    def to_dict(self) -> dict[str, Any]:
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "heldout"}
        return {**plain, "heldout": {name: scores.to_dict() for name, scores in self.heldout.items()}}

    def save(self, run_dir: str | Path) -> Path:
        """Write ``run_dir/metrics.json`` (atomic)."""
        return write_text(Path(run_dir) / METRICS_FILE, json.dumps(self.to_dict(), indent=2) + "\n")


__all__ = ["METRICS_FILE", "HeldoutScores", "Perplexity", "PretrainMetrics", "PretrainMetricsError"]
