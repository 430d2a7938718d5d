"""Pretraining's metrics, typed: held-out perplexities and the record ``metrics.json`` holds."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypedDict

from ner_app.files import write_text

METRICS_FILE = "metrics.json"


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
    documents: int
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
    heldout: dict[str, HeldoutScores]

    def to_dict(self) -> dict[str, Any]:
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "heldout"}
        return {**plain, "heldout": {name: scores.to_dict() for name, scores in self.heldout.items()}}

    def save(self, run_dir: str | Path) -> Path:
        """Write ``run_dir/metrics.json`` (atomic)."""
        return write_text(Path(run_dir) / METRICS_FILE, json.dumps(self.to_dict(), indent=2) + "\n")


__all__ = ["METRICS_FILE", "HeldoutScores", "Perplexity", "PretrainMetrics"]
